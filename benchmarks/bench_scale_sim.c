/* SPDX-License-Identifier: MIT */
/*
 * bench_scale_sim: the coordinated etcd protocol (issue Scale) in discrete
 * time, for N nodes x B budgets, every node a member of every budget: the
 * store requests it costs and how fast grants follow a move of demand.
 * No I/O, no threads: the store is arrays, the coordinator of each budget
 * is lib/lease/coord.c's sl__coord_plan(), the very plan the etcd store runs.
 *
 * Time goes in periods of 250 ms, cut in 4 slots (a coordinator coalesces
 * changes for period / 4); node i's period starts in slot i % 4.  In each
 * slot, in this order:
 *   1. the nodes see the grants written in the last slot (their watches on
 *      grants/NODE/) and set each lease's local max to its grant: lower at
 *      once; raise at once too (the design's rule 2: the grant already
 *      counts it), or, with --ack-first, only as far as the node's own
 *      report covers (the rest once its next report is written).  A cache
 *      fills toward min(demand, local max) and keeps what it holds until
 *      the local max drops below it; a reclaim lags one time in ten until
 *      the node's next step (an -EBUSY sl_group_set_limits());
 *   2. the nodes whose period starts in this slot write, in one txn (126
 *      ops at most), the reports that changed: held = max(grant, min(usage,
 *      reported held)) moved, or demand moved by more than 1/8 of the grant;
 *   3. the coordinator of every budget with a changed report plans, and
 *      writes the grants that changed, 62 per txn (two puts each);
 *   4. the store is checked: what it counts for a budget (coord.h) and the
 *      caches' usages summed, each at most the budget's max, or one
 *      over_budget_sample (stderr tells which).
 * At the end of each period: whether every grant is within 10% of its
 * max-min target over the members' true demands, or within the plan's dead
 * band (max / N / 16: a grant that close to its target is not rewritten,
 * so small targets may stay a little more than 10% off; stderr gives the
 * strict 10% time too, -1 when never).
 * Keepalives: one per node every max(period, (ttl - margin) / 3), nodes
 * spread over that interval.  At start: per node a session grant, a range
 * read of grants/NODE/, two watch creates (grants, elections) and its joins
 * (claim 0: member + rep, no compare) in batch txns; per budget, the
 * campaigns: every member campaigns after a random delay in [0, period)
 * unless it has seen the winner's key by then (a round trip of RTT_MS after
 * the first campaign), and the winner reads budgets/NAME/ and watches it.
 *
 * Demand: each lease wants share x U(1/4, 2), share = max / N (the budget
 * is over-subscribed by about an eighth); at MOVE_S, in every budget, the
 * even members double their demand and the odd ones halve it.  Budgets:
 * max = N x 64 MiB, min = max / 4.  --churn P: besides, each period, P in
 * 1000 leases draw a new demand (no convergence measured then).
 *
 * Output: one JSON line per configuration on stdout (requests per second
 * over [WARM_S, END_S), which holds the move; convergence from the move);
 * the start's requests and the quiet rate on stderr.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "coord.h"
#include "trace_rand.h"

#define PERIOD_MS 250
#define TTL_MS 10000
#define MARGIN_MS 1000
#define RTT_MS 5             /* a campaign's txn until the others' watches see it */
#define WARM_S 10            /* the start is over: the rate is measured from here */
#define MOVE_S 30            /* the demand moves */
#define END_S 60
#define REPORT_OPS 126       /* puts per report txn */
#define GRANTS_PER_TXN 62    /* two puts per grant, plus compares and the version */
#define UNIT (64ull << 20)   /* each member's share of a budget's max */
#define SLOTS 4              /* a coordinator coalesces changes for period / 4 */

/* One (budget, node): the store's grant and report, and the node's cache. */
struct lease {
	uint64_t demand;         /* what the cache truly wants              */
	uint64_t g_held, g_floor; /* the grant in the store                  */
	uint64_t r_held, r_demand; /* the report in the store                */
	uint64_t seen;           /* the grant the node has seen              */
	uint64_t local;          /* the node's max for the lease             */
	uint64_t usage;          /* the cache: at most local, but for a lag  */
	uint64_t target;         /* max-min over the true demands            */
	bool granted;
};

struct sim {
	int n, nb;
	uint64_t max, min;
	struct lease *l;         /* [budget * n + node] */
	bool *dirty;             /* a report of the budget changed this slot */
	bool *planned;           /* grants written last slot: delivered now  */
	bool ack_first;          /* a node raises only what its report covers */
	unsigned churn;          /* leases per 1000 whose demand is drawn anew each period */
	struct sl__coord_member *m;
	void *scratch;
	struct sl__lease_alloc_in *in;
	uint64_t *out;
	uint64_t rng;
	uint64_t requests, start_requests, plans;
	uint64_t over, over_counted, over_usage;
};

static struct lease *at(const struct sim *s, int b, int i)
{
	return &s->l[(size_t)b * (size_t)s->n + (size_t)i];
}

static uint64_t txns(uint64_t items, uint64_t per)
{
	return (items + per - 1) / per;
}

/* Max-min targets of budget @b over the true demands (floors min / n). */
static void targets(struct sim *s, int b)
{
	for (int i = 0; i < s->n; i++) {
		s->in[i].demand = at(s, b, i)->demand;
		s->in[i].floor = s->min / (uint64_t)s->n;
		s->in[i].gain = 0;
	}
	sl__lease_alloc_maxmin(s->max, (size_t)s->n, s->in, s->out);
	for (int i = 0; i < s->n; i++)
		at(s, b, i)->target = s->out[i];
}

/* A lease's demand: share x U(1/4, 2). */
static uint64_t draw_demand(struct sim *s)
{
	return UNIT / 4 + trace_rng_next(&s->rng) % (UNIT * 7 / 4);
}

/* The start: sessions, watches, joins with claim 0, elections. */
static void start(struct sim *s)
{
	uint64_t r = 0;

	/* Per node: session, range read of grants/NODE/, two watches, joins. */
	r += (uint64_t)s->n * (4 + txns(2 * (uint64_t)s->nb, REPORT_OPS));
	for (int b = 0; b < s->nb; b++) {
		uint64_t first = UINT64_MAX, *delay = s->out;

		for (int i = 0; i < s->n; i++) {
			struct lease *x = at(s, b, i);

			x->demand = draw_demand(s);
			x->r_demand = x->demand;
			/* Campaign delays in microseconds. */
			delay[i] = trace_rng_next(&s->rng) % (PERIOD_MS * 1000);
			first = min_u64(first, delay[i]);
		}
		for (int i = 0; i < s->n; i++)
			if (delay[i] < first + RTT_MS * 1000)
				r++; /* a campaign txn (all but the first fail) */
		r += 2;         /* the winner's range read and watch */
		s->dirty[b] = true;
	}
	s->requests += r;
	s->start_requests = r;
}

/* The cache under its local max: it fills toward its demand and keeps
 * what it holds until the max drops below it; a reclaim lags one time in
 * ten (an -EBUSY sl_group_set_limits()) until the node's next step. */
static void cache(struct sim *s, struct lease *x)
{
	if (x->usage <= x->local)
		x->usage = max_u64(x->usage, min_u64(x->demand, x->local));
	else if (trace_rng_next(&s->rng) % 10)
		x->usage = x->local;
}

/* 1: the nodes see the grants written in the last slot (their watches):
 * a lower grant applies at once; a higher one at once too (the design's
 * rule 2: the grant already counts it), or, --ack-first, only as far as
 * the node's report covers it. */
static void deliver(struct sim *s)
{
	for (int b = 0; b < s->nb; b++) {
		if (!s->planned[b])
			continue;
		s->planned[b] = false;
		for (int i = 0; i < s->n; i++) {
			struct lease *x = at(s, b, i);

			x->seen = x->g_held;
			x->local = s->ack_first ? min_u64(x->seen, x->r_held) : x->seen;
			cache(s, x);
		}
	}
}

/* 2: the nodes whose period starts in slot @q report, in one txn, what
 * changed: held = max(grant, min(usage, reported held)), or demand moved by
 * more than 1/8 of the grant. */
static void report(struct sim *s, int q)
{
	for (int i = q; i < s->n; i += SLOTS) {
		uint64_t changed = 0;

		for (int b = 0; b < s->nb; b++) {
			struct lease *x = at(s, b, i);
			uint64_t held, moved;

			cache(s, x);
			held = max_u64(x->seen, min_u64(x->usage, x->r_held));
			moved = x->demand > x->r_demand ? x->demand - x->r_demand
							: x->r_demand - x->demand;
			if (held != x->r_held || moved > x->seen / 8) {
				x->r_held = held;
				x->r_demand = x->demand;
				s->dirty[b] = true;
				changed++;
			}
			if (x->local < x->seen) {
				/* --ack-first: the report now covers it. */
				x->local = x->seen;
				cache(s, x);
			}
		}
		s->requests += txns(changed, REPORT_OPS);
	}
}

/* 3: the coordinators plan the budgets whose reports changed. */
static void coordinators(struct sim *s)
{
	struct sl__coord_budget cb = { .max = s->max, .min = s->min,
				       .dead_band = s->max / (uint64_t)s->n / 16 };

	for (int b = 0; b < s->nb; b++) {
		size_t writes;

		if (!s->dirty[b])
			continue;
		s->dirty[b] = false;
		for (int i = 0; i < s->n; i++) {
			const struct lease *x = at(s, b, i);

			s->m[i] = (struct sl__coord_member){
				.granted = x->granted, .grant_current = x->granted,
				.g_held = x->g_held, .g_floor = x->g_floor,
				.reported = true, .r_held = x->r_held, .demand = x->r_demand,
			};
		}
		writes = sl__coord_plan(&cb, s->m, (size_t)s->n, s->scratch);
		s->plans++;
		for (int i = 0; i < s->n && writes; i++) {
			struct lease *x = at(s, b, i);

			if (!s->m[i].write)
				continue;
			x->granted = true;
			x->g_held = s->m[i].held;
			x->g_floor = s->m[i].floor;
		}
		s->planned[b] = writes > 0;
		s->requests += txns(writes, GRANTS_PER_TXN);
	}
}

/* 4: what the store counts for each budget and the caches' usages, each
 * at most the budget's max. */
static void check(struct sim *s)
{
	for (int b = 0; b < s->nb; b++) {
		uint64_t counted = 0, used = 0; /* far below 2^64 here */

		for (int i = 0; i < s->n; i++) {
			const struct lease *x = at(s, b, i);

			counted += x->granted ? max_u64(x->g_held, x->r_held) : x->r_held;
			used += x->usage;
		}
		s->over_counted += counted > s->max;
		s->over_usage += used > s->max;
		s->over += counted > s->max || used > s->max;
	}
}

/* Every grant within 10% of its target, or, with @band, within the plan's
 * dead band (a grant that close is not rewritten). */
static bool near(const struct sim *s, uint64_t band)
{
	for (size_t k = 0; k < (size_t)s->n * (size_t)s->nb; k++) {
		const struct lease *x = &s->l[k];
		uint64_t d = x->g_held > x->target ? x->g_held - x->target : x->target - x->g_held;

		if (d > band && d * 10 > x->target)
			return false;
	}
	return true;
}

struct result {
	double rate, quiet_rate, conv, conv10;
};

static int run(int n, int nb, uint64_t seed, bool ack_first, unsigned churn, struct result *res)
{
	struct sim s = { .n = n, .nb = nb, .rng = seed, .ack_first = ack_first, .churn = churn };
	int ticks = END_S * 1000 / PERIOD_MS, warm = WARM_S * 1000 / PERIOD_MS;
	int move = MOVE_S * 1000 / PERIOD_MS, last_far = move, last_far10 = move;
	int keep = max_u64(PERIOD_MS, (TTL_MS - MARGIN_MS) / 3) / PERIOD_MS;
	uint64_t at_warm = 0, at_move = 0;

	s.max = (uint64_t)n * UNIT;
	s.min = s.max / 4;
	s.l = calloc((size_t)n * (size_t)nb, sizeof(*s.l));
	s.dirty = calloc((size_t)nb, sizeof(*s.dirty));
	s.planned = calloc((size_t)nb, sizeof(*s.planned));
	s.m = calloc((size_t)n, sizeof(*s.m));
	s.scratch = malloc(sl__coord_scratch_size((size_t)n));
	s.in = calloc((size_t)n, sizeof(*s.in));
	s.out = calloc((size_t)n, sizeof(*s.out));
	if (!s.l || !s.dirty || !s.planned || !s.m || !s.scratch || !s.in || !s.out) {
		fprintf(stderr, "bench_scale_sim: out of memory for %dx%d\n", n, nb);
		return -1;
	}
	start(&s);
	for (int b = 0; b < nb; b++)
		targets(&s, b);
	for (int t = 0; t < ticks; t++) {
		if (t == warm)
			at_warm = s.requests;
		if (t == move) {
			at_move = s.requests;
			for (int b = 0; b < nb; b++) {
				for (int i = 0; i < n; i++) {
					struct lease *x = at(&s, b, i);

					x->demand = i % 2 ? x->demand / 2 : x->demand * 2;
				}
				targets(&s, b);
			}
		}
		for (size_t k = 0; churn && k < (size_t)n * (size_t)nb; k++)
			if (trace_rng_next(&s.rng) % 1000 < churn)
				s.l[k].demand = draw_demand(&s);
		/* Keepalives: node i sends at the periods i, i + keep, ... */
		s.requests += (uint64_t)(n / keep + (t % keep < n % keep ? 1 : 0));
		for (int q = 0; q < SLOTS; q++) {
			deliver(&s);
			report(&s, q);
			coordinators(&s);
			check(&s);
		}
		if (t >= move && !churn && !near(&s, s.max / (uint64_t)n / 16))
			last_far = t + 1;
		if (t >= move && !churn && !near(&s, 0))
			last_far10 = t + 1;
	}
	res->rate = (double)(s.requests - at_warm) / (END_S - WARM_S);
	res->quiet_rate = (double)(at_move - at_warm) / (MOVE_S - WARM_S);
	/* From the move to the end of the first period after which every
	 * grant stays near its target (-1: not by the end). */
	res->conv = last_far >= ticks || churn ? -1 : (double)(last_far + 1 - move) * PERIOD_MS / 1000.0;
	res->conv10 = last_far10 >= ticks || churn ? -1
						   : (double)(last_far10 + 1 - move) * PERIOD_MS / 1000.0;
	fprintf(stderr,
		"%dx%d: start %llu requests; %.1f/s before the move; %llu plans; "
		"within 10%% of the targets, dead band or not: %.2f s; "
		"over max: %llu samples of the store's count, %llu of the usages\n",
		n, nb, (unsigned long long)s.start_requests, res->quiet_rate,
		(unsigned long long)s.plans, res->conv10, (unsigned long long)s.over_counted,
		(unsigned long long)s.over_usage);
	printf("{\"bench\":\"fleet_scale\",\"store\":\"sim\",\"participants\":%d,\"budgets\":%d,"
	       "\"store_requests_per_s\":%.1f,\"requests_per_participant_s\":%.3f,"
	       "\"convergence_s\":%.2f,\"over_budget_samples\":%llu}\n",
	       n, nb, res->rate, res->rate / n, res->conv, (unsigned long long)s.over);
	fflush(stdout);
	free(s.l);
	free(s.dirty);
	free(s.planned);
	free(s.m);
	free(s.scratch);
	free(s.in);
	free(s.out);
	return 0;
}

int main(int argc, char **argv)
{
	static const int conf[][2] = { { 10, 1 }, { 100, 10 }, { 1000, 100 }, { 10000, 100 } };
	int only_n = 0, only_b = 0;
	bool ack_first = false;
	unsigned churn = 0;
	uint64_t seed = 42;
	struct result r;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
			if (sscanf(argv[++i], "%dx%d", &only_n, &only_b) != 2 || only_n < 1 ||
			    only_b < 1) {
				fprintf(stderr, "bench_scale_sim: --only NxB\n");
				return 2;
			}
		} else if (strcmp(argv[i], "--ack-first") == 0) {
			ack_first = true;
		} else if (strcmp(argv[i], "--churn") == 0 && i + 1 < argc) {
			churn = (unsigned)strtoul(argv[++i], NULL, 0);
		} else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
		} else {
			fprintf(strcmp(argv[i], "--help") ? stderr : stdout,
				"usage: bench_scale_sim [--only NxB] [--seed N] [--ack-first] [--churn PERMILLE]\n");
			return strcmp(argv[i], "--help") ? 2 : 0;
		}
	}
	if (only_n)
		return run(only_n, only_b, seed, ack_first, churn, &r) ? 1 : 0;
	for (size_t c = 0; c < sizeof(conf) / sizeof(conf[0]); c++)
		if (run(conf[c][0], conf[c][1], seed, ack_first, churn, &r))
			return 1;
	return 0;
}
