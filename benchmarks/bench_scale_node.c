/* SPDX-License-Identifier: MIT */
/*
 * bench_scale_node: the participants of benchmarks/bench_scale.sh, through
 * the public API only.
 *
 *   bench_scale_node URL --set-budgets B --total N [--unit U]
 *       set budgets b0..b(B-1) with max N x U, min max / 10, and exit;
 *   bench_scale_node URL --first G --count P --total N --budgets B
 *                    [--moved K] [--period MS] [--ttl MS] [--ramp MS] [--unit U]
 *       P participants, numbered G..G+P-1 of the N of the fleet: each opens
 *       its own store handle (as a node would: its own session, its
 *       node name "pI" so that the harness can tell whose record is whose)
 *       and runs it on its own sl_lease_run() thread, and joins every
 *       budget with a group of its own (SL_LEASE_DEFERRED: the run thread
 *       registers, so P x B joins do not block the start).  --ramp MS:
 *       participant I's run thread starts I * MS / N ms after the joins,
 *       as a fleet rolled out over MS (0, the default: all at once).
 *
 * Demand is immediate, not smoothed, so that what is measured is the
 * protocol: each participant wants a usage D of each budget, and each
 * period its demand hook charges or uncharges the group to min(D, the
 * group's max) and reports what did not fit as evicted.  By lease.h's rule
 * without reuse, a group that fits asks for its usage (and 1/16 more); one
 * pressed at its share asks for share + max(share / 4, evicted) >= D.  The
 * hook reports idle_ms 0 (all of it is hot), so nothing is given back for
 * idleness.  D is the equal share U at first; SIGUSR1 moves it: for budgets
 * b0..b(K-1), even participants want 3 U, odd ones U / 3; the other budgets
 * stay at U.  The groups' tree has no per-thread stocks (SL_BATCH_NONE), so
 * usage is exactly what the hook charged.
 *
 * stdout, once a second and on SIGUSR1: one JSON line of the process's
 * leases, {"registered":R,"leases":L,"held":H,"fenced":F,"store_errors":E,
 * "fences":X,"moved":0|1} (registered: no longer JOINING).  SIGTERM or
 * SIGINT: every lease leaves, every store closes, exit 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <softlimit/lease.h>
#include <softlimit/softlimit.h>

struct member {
	sl_group *g;
	sl_lease *l;
	uint64_t charged; /* what the hook holds charged to g */
	uint32_t budget;
	uint32_t who; /* the participant's number in the fleet */
};

struct part {
	sl_lease_store *s;
	pthread_t t;
	int started;
};

static volatile sig_atomic_t moved_sig, stop_sig;
static atomic_int moved;
static uint64_t unit = 1 << 20;
static uint32_t moved_budgets = 1;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		moved_sig = 1;
	else
		stop_sig = 1;
}

/* What participant @who wants of budget @budget now. */
static uint64_t desired(uint32_t who, uint32_t budget)
{
	if (!atomic_load_explicit(&moved, memory_order_relaxed) || budget >= moved_budgets)
		return unit;
	return who % 2 == 0 ? 3 * unit : unit / 3;
}

/* Charge or uncharge toward the desired usage, report what did not fit. */
static void demand_hook(sl_lease *l, struct sl_lease_demand *out, void *ctx)
{
	struct member *m = ctx;
	struct sl_limits lim;
	uint64_t want = desired(m->who, m->budget), fit = want;

	(void)l;
	if (sl_group_limits(m->g, &lim) == 0 && lim.max < fit)
		fit = lim.max;
	if (m->charged > fit) {
		if (sl_uncharge(m->g, m->charged - fit) == 0)
			m->charged = fit;
	} else if (m->charged < fit) {
		if (sl_charge(m->g, fit - m->charged, 0) == 0)
			m->charged = fit;
	}
	out->idle_ms = 0;
	out->evicted = want > m->charged ? want - m->charged : 0;
	out->refaulted = 0;
}

static uint64_t ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)(((int64_t)t.tv_sec - (int64_t)t0->tv_sec) * 1000 +
			  ((int64_t)t.tv_nsec - (int64_t)t0->tv_nsec) / 1000000);
}

static void *run(void *arg)
{
	sl_lease_run(arg);
	return NULL;
}

static int set_budgets(const char *url, uint32_t budgets, uint32_t total)
{
	struct sl_lease_store_opts so;
	struct sl_limits lim;
	sl_lease_store *s;
	int rc;

	sl_lease_store_opts_init(&so);
	so.timeout_ms = 5000;
	rc = sl_lease_store_open(url, &so, &s);
	if (rc)
		return rc;
	sl_limits_init(&lim);
	lim.max = (uint64_t)total * unit;
	lim.min = lim.max / 10;
	for (uint32_t b = 0; b < budgets && !rc; b++) {
		char name[32];

		snprintf(name, sizeof(name), "b%" PRIu32, b);
		rc = sl_lease_budget_set(s, name, &lim);
	}
	sl_lease_store_close(s);
	return rc;
}

static void report(struct member *ms, size_t n)
{
	uint64_t reg = 0, held = 0, fenced = 0, errs = 0, fences = 0;

	for (size_t i = 0; i < n; i++) {
		struct sl_lease_stats st;

		if (sl_lease_stats(ms[i].l, &st))
			continue;
		reg += st.state != SL_LEASE_JOINING;
		held += st.state == SL_LEASE_HELD;
		fenced += st.state == SL_LEASE_FENCED;
		errs += st.store_errors;
		fences += st.fences;
	}
	printf("{\"registered\":%" PRIu64 ",\"leases\":%zu,\"held\":%" PRIu64
	       ",\"fenced\":%" PRIu64 ",\"store_errors\":%" PRIu64 ",\"fences\":%" PRIu64
	       ",\"moved\":%d}\n",
	       reg, n, held, fenced, errs, fences, atomic_load(&moved));
	fflush(stdout);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: bench_scale_node URL --set-budgets B --total N [--unit U]\n"
		"       bench_scale_node URL --first G --count P --total N --budgets B\n"
		"                        [--moved K] [--period MS] [--ttl MS] [--ramp MS] [--unit U]\n");
	return 2;
}

int main(int argc, char **argv)
{
	uint32_t first = 0, count = 0, total = 0, budgets = 0, set = 0;
	uint32_t period = 250, ttl = 10000, ramp = 0;
	struct timespec t0;
	struct sl_tree_opts to;
	struct sl_lease_store_opts so;
	struct sl_lease_opts lo;
	struct sigaction sa;
	struct member *ms;
	struct part *ps;
	sl_tree *t = NULL;
	const char *url;
	size_t n;
	int rc = 0;

	if (argc < 2 || strncmp(argv[1], "etcd://", 7) != 0)
		return usage();
	url = argv[1];
	for (int i = 2; i + 1 < argc; i += 2) {
		unsigned long long v = strtoull(argv[i + 1], NULL, 10);

		if (!strcmp(argv[i], "--first"))
			first = (uint32_t)v;
		else if (!strcmp(argv[i], "--count"))
			count = (uint32_t)v;
		else if (!strcmp(argv[i], "--total"))
			total = (uint32_t)v;
		else if (!strcmp(argv[i], "--budgets"))
			budgets = (uint32_t)v;
		else if (!strcmp(argv[i], "--set-budgets"))
			set = (uint32_t)v;
		else if (!strcmp(argv[i], "--moved"))
			moved_budgets = (uint32_t)v;
		else if (!strcmp(argv[i], "--period"))
			period = (uint32_t)v;
		else if (!strcmp(argv[i], "--ttl"))
			ttl = (uint32_t)v;
		else if (!strcmp(argv[i], "--ramp"))
			ramp = (uint32_t)v;
		else if (!strcmp(argv[i], "--unit"))
			unit = v;
		else
			return usage();
	}
	if (set) {
		rc = total ? set_budgets(url, set, total) : -EINVAL;
		if (rc)
			fprintf(stderr, "bench_scale_node: set budgets: %s\n", strerror(-rc));
		return rc ? 1 : 0;
	}
	if (!count || !budgets || !total || unit < 3)
		return usage();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	n = (size_t)count * budgets;
	ms = calloc(n, sizeof(*ms));
	ps = calloc(count, sizeof(*ps));
	sl_tree_opts_init(&to);
	to.batch = SL_BATCH_NONE;
	if (!ms || !ps || sl_tree_create(&to, &t)) {
		fprintf(stderr, "bench_scale_node: out of memory\n");
		return 1;
	}
	sl_lease_store_opts_init(&so);
	/* A store call may take up to 5 s (the default is 1 s): a thousand
	 * nodes joining at once on two cores keep etcd's answers seconds
	 * late, and a call given up on is a call made again. */
	so.timeout_ms = 5000;
	sl_lease_opts_init(&lo);
	lo.flags = SL_LEASE_DEFERRED;
	lo.period_ms = period;
	lo.ttl_ms = ttl;
	lo.demand = demand_hook;
	for (uint32_t p = 0; p < count && !rc; p++) {
		char node[32];

		snprintf(node, sizeof(node), "p%" PRIu32, first + p);
		so.node = node;
		rc = sl_lease_store_open(url, &so, &ps[p].s);
		for (uint32_t b = 0; b < budgets && !rc; b++) {
			struct member *m = &ms[(size_t)p * budgets + b];
			char gname[48], bname[32];

			m->who = first + p;
			m->budget = b;
			snprintf(gname, sizeof(gname), "p%" PRIu32 ".b%" PRIu32, first + p, b);
			snprintf(bname, sizeof(bname), "b%" PRIu32, b);
			rc = sl_group_create(sl_tree_root(t), gname, NULL, NULL, NULL, &m->g);
			lo.demand_ctx = m;
			if (!rc)
				rc = sl_lease_join(ps[p].s, bname, m->g, &lo, &m->l);
		}
		if (rc)
			fprintf(stderr, "bench_scale_node: participant %" PRIu32 ": %s\n", first + p,
				strerror(-rc));
	}
	/* Participant G starts at G * ramp / total ms: a fleet rolled out,
	 * not a thousand nodes started within a second. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint32_t p = 0; p < count && !rc && !stop_sig; p++) {
		uint64_t at = (uint64_t)ramp * (first + p) / total;

		while (!stop_sig && ms_since(&t0) < at) {
			usleep(100 * 1000);
			report(ms, n);
		}
		rc = -pthread_create(&ps[p].t, NULL, run, ps[p].s);
		ps[p].started = !rc;
		if (rc)
			fprintf(stderr, "bench_scale_node: participant %" PRIu32 ": %s\n", first + p,
				strerror(-rc));
	}
	while (!rc && !stop_sig) {
		if (moved_sig && !atomic_load(&moved)) {
			atomic_store(&moved, 1);
			report(ms, n);
		}
		for (int i = 0; i < 10 && !stop_sig && !(moved_sig && !atomic_load(&moved)); i++)
			usleep(100 * 1000);
		report(ms, n);
	}
	for (uint32_t p = 0; p < count; p++)
		sl_lease_stop(ps[p].s);
	for (uint32_t p = 0; p < count; p++) {
		if (ps[p].started)
			pthread_join(ps[p].t, NULL);
	}
	/* Closing a store leaves its leases: the groups get their limits back. */
	for (uint32_t p = 0; p < count; p++)
		sl_lease_store_close(ps[p].s);
	for (size_t i = 0; i < n; i++) {
		if (ms[i].g) {
			if (ms[i].charged)
				sl_uncharge(ms[i].g, ms[i].charged);
			sl_group_destroy(ms[i].g);
		}
	}
	sl_tree_destroy(t);
	free(ms);
	free(ps);
	return rc ? 1 : 0;
}
