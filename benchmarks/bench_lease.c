/* SPDX-License-Identifier: MIT */
/*
 * bench_lease: the lease allocators in a simulation of up to 1,000
 * participants x 100 budgets (no I/O, no threads, simulated time).
 *
 * Each budget is a tenant shaped like one of Twitter's cache clusters
 * (benchmarks/data/twitter-2020Mar-stats.md through twitter_mix.h: Zipf
 * alpha, key and value sizes, one-hit wonders).  Its keys are spread over
 * the participants with skew (weights rank^-s, s drawn per tenant, ranks
 * shuffled), and at every phase the skew moves for half of the tenants.
 *
 * A participant's cache is a formula, not a trace, so that 100,000 of them
 * run in seconds: holding c of its K keys, a Zipf(alpha) cache hits
 * G(c) / G(K) of its repeat requests, G(x) = ((1 + x)^(1 - alpha) - 1) /
 * (1 - alpha); its misses fill it; what it evicts, what refaults (misses on
 * the c keys just past its share: a ghost as large as the cache) and how
 * long its coldest item sat idle follow from the same curve.  Those are the
 * demand hook's three figures.  What a participant truly needs is the
 * memory of the keys it touches more often than once per idle limit (30
 * s): lease.h's definition of memory worth keeping.  A tenant's request
 * rate is set so that its needs sum to 0.5 to 2 times its budget.
 *
 * The store follows the protocol of lease.h: a period is cut into slots;
 * the participants of one slot read one view, compute everyone's targets
 * from it, and write in turn.  A shrink lowers the local max first, reclaims
 * (one time in ten it lags, as an -EBUSY sl_group_set_limits() does, and the
 * usage stays above the new max until the next period), then reports
 * max(target, min(usage, held)).  A grow takes only free room, by a write
 * that fails if another grow bumped the version since the read; the loser
 * re-reads once at once (one more store operation) and grows from what is
 * free then.  After every write the simulator sums what the store counts
 * and the caches' actual usages: either above the budget's max is an
 * over_budget_sample.
 *
 * Allocators: static (max / N each, no store), proportional (to usage, over
 * the floors), maxmin (lib/lease/alloc.c: sl__lease_alloc_maxmin over
 * sl__lease_demand) and gradient (weighted max-min: the water level rises
 * faster for a participant whose refaults per byte of share are higher).
 *
 * Output: one JSON line per (allocator, configuration) on stdout; progress
 * and the hit ratios on stderr.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_lease_reuse.h"
#include "trace_rand.h"
#include "twitter_mix.h"

#define PERIOD_S 0.2
#define IDLE_S 30.0
#define SLOTS_MAX 16
#define SHARE_UNIT (16u << 20) /* each participant's static share: 16 MiB */

enum allocator { A_STATIC, A_PROPORTIONAL, A_MAXMIN, A_GRADIENT, A_COUNT };
static const char *const alloc_name[A_COUNT] = { "static", "proportional", "maxmin", "gradient" };

struct tenant {
	double alpha, isz, rate, p_fresh, keys, skew;
	uint64_t max, min;
	double *w;    /* the participants' weights (sum 1) */
	int *rank;    /* participant -> its rank in the skew */
};

/* One (participant, budget): the cache, and its record in the store. */
struct part {
	/* the process */
	double usage;         /* bytes in the cache (may pass local_max while a shrink lags) */
	uint64_t local_max;
	double need, hit, reqs;
	uint64_t evicted, refaulted, idle_ms;
	/* the store's record */
	uint64_t held, floor, demand, gain, rep_usage;
};

struct sim {
	int n, m;
	enum allocator a;
	struct tenant *t;
	struct part *p;   /* m x n */
	uint64_t rng, ops, over;
	double hit_sum, req_sum, util_sum, fair_sum, bound_sum;
	long samples, fair_samples;
};

/* ------------------------------------------------------------ the caches */

static double zipf_g(double x, double alpha)
{
	return fabs(alpha - 1) < 1e-6 ? log1p(x) : (pow(1 + x, 1 - alpha) - 1) / (1 - alpha);
}

/* Items touched more often than once per IDLE_S, of @keys at @rate. */
static double need_items(double rate, double keys, double alpha)
{
	double k;

	if (rate <= 0)
		return 0;
	if (alpha < 1e-3)
		return rate * IDLE_S / keys >= 1 ? keys : 0;
	k = pow(rate * IDLE_S / zipf_g(keys, alpha), 1 / alpha) - 1;
	return k < 0 ? 0 : k > keys ? keys : k;
}

/* One period of a participant's cache: fills, hits, and the hook's figures. */
static void cache_step(const struct tenant *t, double w, struct part *x)
{
	double keys = fmax(1, w * t->keys), rate = w * t->rate, reuse = rate * (1 - t->p_fresh);
	double gk = zipf_g(keys, t->alpha), c, hit, miss, cap;
	int full;

	if (x->usage > (double)x->local_max) /* a lagging shrink completes */
		x->usage = (double)x->local_max;
	c = fmin(x->usage / t->isz, keys);
	hit = zipf_g(c, t->alpha) / gk * (1 - t->p_fresh);
	miss = rate * (1 - hit);
	/* One-hit wonders keep a cache filling to its max; without them it
	 * stops at its keys. */
	cap = t->p_fresh > 0 ? (double)x->local_max : fmin((double)x->local_max, keys * t->isz);
	x->usage = fmin(cap, x->usage + miss * PERIOD_S * t->isz);
	full = x->usage + t->isz > (double)x->local_max;
	x->evicted = full ? (uint64_t)(miss * PERIOD_S * t->isz) : 0;
	x->refaulted = full ? (uint64_t)(reuse * (zipf_g(fmin(2 * c, keys), t->alpha) -
						  zipf_g(c, t->alpha)) / gk * PERIOD_S * t->isz)
			    : 0;
	/* The coldest item: a full LRU's tail is as old as it takes to insert
	 * c items; a cache that is not full keeps every key it saw. */
	double idle_s = full ? (miss > 0 ? c / miss : 1e9)
			     : (reuse > 0 ? 1 / (reuse * pow(1 + c, -t->alpha) / gk) : 1e9);
	x->idle_ms = idle_s > 1e12 ? UINT64_MAX - 1 : (uint64_t)(idle_s * 1000);
	x->need = need_items(reuse, keys, t->alpha) * t->isz;
	x->hit = hit;
	x->reqs = rate;
}

/* --------------------------------------------------------------- targets */

/* Weighted max-min: share_i = max(floor_i, min(want_i, L * weight_i)). */
static void alloc_gradient(uint64_t budget, int n, const struct sl__lease_alloc_in *in,
			   const double *wt, uint64_t *out)
{
	double lo = 0, hi = 1, sum, left;
	uint64_t total = 0, floors = 0;

	for (int i = 0; i < n; i++)
		floors += in[i].floor;
	if (floors > budget) { /* never here: floors are min / n */
		sl__lease_alloc_maxmin(budget, (size_t)n, in, out);
		return;
	}
	for (int it = 0; it < 200; it++) {
		sum = 0;
		for (int i = 0; i < n; i++)
			sum += fmax((double)in[i].floor,
				    fmin((double)(in[i].demand > in[i].floor ? in[i].demand : in[i].floor),
					 hi * wt[i]));
		if (sum >= (double)budget || hi > 1e30)
			break;
		hi *= 2;
	}
	for (int it = 0; it < 60; it++) {
		double mid = (lo + hi) / 2;

		sum = 0;
		for (int i = 0; i < n; i++)
			sum += fmax((double)in[i].floor,
				    fmin((double)(in[i].demand > in[i].floor ? in[i].demand : in[i].floor),
					 mid * wt[i]));
		if (sum <= (double)budget)
			lo = mid;
		else
			hi = mid;
	}
	for (int i = 0; i < n; i++) {
		double want = (double)(in[i].demand > in[i].floor ? in[i].demand : in[i].floor);

		out[i] = (uint64_t)fmax((double)in[i].floor, fmin(want, lo * wt[i]));
		total += out[i];
	}
	/* Rounding: never above the budget; what is left goes to everyone. */
	for (int i = n - 1; total > budget && i >= 0; i--) {
		uint64_t cut = out[i] - in[i].floor < total - budget ? out[i] - in[i].floor
								    : total - budget;
		out[i] -= cut;
		total -= cut;
	}
	left = (double)(budget - total);
	for (int i = 0; i < n; i++)
		out[i] += (uint64_t)(left / n);
}

static void targets(const struct sim *s, const struct tenant *t, const struct part *row,
		    struct sl__lease_alloc_in *in, double *wt, uint64_t *out)
{
	int n = s->n;
	double usum = 0, gsum = 0;
	int gn = 0;

	for (int i = 0; i < n; i++) {
		in[i] = (struct sl__lease_alloc_in){ .demand = row[i].demand, .floor = row[i].floor,
						     .gain = row[i].gain };
		usum += (double)row[i].rep_usage;
		if (row[i].gain) {
			gsum += (double)row[i].gain;
			gn++;
		}
	}
	switch (s->a) {
	case A_PROPORTIONAL: {
		uint64_t room = t->max, given = 0;

		for (int i = 0; i < n; i++)
			room -= row[i].floor;
		for (int i = 0; i < n; i++) {
			double part = usum > 0 ? (double)row[i].rep_usage / usum : 1.0 / n;

			out[i] = row[i].floor + (uint64_t)((double)room * part);
			given += out[i];
		}
		for (int i = 0; given > t->max && i < n; i++) {
			uint64_t cut = out[i] - row[i].floor < given - t->max ? out[i] - row[i].floor
									   : given - t->max;
			out[i] -= cut;
			given -= cut;
		}
		break;
	}
	case A_GRADIENT:
		for (int i = 0; i < n; i++)
			wt[i] = gn && row[i].gain ? fmin(8, fmax(0.125, (double)row[i].gain * gn / gsum))
						  : 0.125;
		alloc_gradient(t->max, n, in, wt, out);
		break;
	default:
		sl__lease_alloc_maxmin(t->max, (size_t)n, in, out);
		break;
	}
}

/* ------------------------------------------------------------- the store */

static double counted_sum(const struct part *row, int n)
{
	double sum = 0;

	for (int i = 0; i < n; i++)
		sum += (double)row[i].held;
	return sum;
}

/* Check the invariant after a write: what the store counts, and what the
 * caches really hold, each at most the budget's max. */
static void check(struct sim *s, const struct tenant *t, const struct part *row, uint64_t counted,
		  double used)
{
	(void)row;
	if (counted > t->max || used > (double)t->max)
		s->over++;
}

/* One period of one budget under the lease protocol. */
static void budget_period(struct sim *s, int b, struct sl__lease_alloc_in *in, double *wt,
			  uint64_t *tgt, int *order)
{
	const struct tenant *t = &s->t[b];
	struct part *row = &s->p[(size_t)b * (size_t)s->n];
	int n = s->n, slots = n < SLOTS_MAX ? n : SLOTS_MAX;
	uint64_t version = 0, counted = 0;
	double used = 0;

	for (int i = 0; i < n; i++) {
		cache_step(t, t->w[i], &row[i]);
		counted += row[i].held;
		used += row[i].usage;
	}
	if (s->a == A_STATIC)
		return;
	for (int i = 0; i < n; i++)
		order[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(trace_rng_next(&s->rng) % (uint64_t)(i + 1)), x = order[i];

		order[i] = order[j];
		order[j] = x;
	}
	for (int sl = 0; sl < slots; sl++) {
		int from = sl * n / slots, to = (sl + 1) * n / slots;
		uint64_t view_version = version, view_free = t->max - counted;

		/* Each reads the view and puts its own new demand in. */
		for (int k = from; k < to; k++) {
			struct part *x = &row[order[k]];

			x->demand = sl__lease_demand(x->held, (uint64_t)x->usage, x->floor, t->max,
						     x->idle_ms, (uint64_t)(IDLE_S * 1000), x->evicted,
						     x->refaulted);
			x->gain = x->held ? (uint64_t)((double)x->refaulted * 1e6 / (double)x->held) : 0;
		}
		s->ops += (uint64_t)(to - from);
		targets(s, t, row, in, wt, tgt);
		for (int k = from; k < to; k++) {
			int i = order[k];
			struct part *x = &row[i];
			uint64_t h = x->held, tg = tgt[i];

			if (tg < h) {
				/* Lower the local max first, reclaim, then report. */
				uint64_t c;

				x->local_max = tg;
				if (trace_rng_next(&s->rng) % 10 != 0 && x->usage > (double)tg) {
					used -= x->usage - (double)tg;
					x->usage = (double)tg;
				}
				c = (uint64_t)ceil(x->usage);
				x->held = tg > (c < h ? c : h) ? tg : (c < h ? c : h);
				counted -= h - x->held;
			} else if (tg > h) {
				uint64_t free_room = view_free, g;

				if (version != view_version) {
					/* -EAGAIN: re-read once, at once. */
					s->ops++;
					free_room = t->max - counted;
				}
				g = tg - h < free_room ? tg - h : free_room;
				if (g) {
					x->held = h + g;
					counted += g;
					version++;
					x->local_max = x->held;
				}
			}
			x->rep_usage = (uint64_t)x->usage;
			s->ops++;
			check(s, t, row, counted, used);
		}
	}
	if ((double)counted != counted_sum(row, n))
		s->over++; /* the incremental sum drifted: a simulator bug */
}

/* ------------------------------------------------------------- metrics */

static void measure(struct sim *s)
{
	double bound = 0, held = 0, budget = 0;

	for (int b = 0; b < s->m; b++) {
		const struct part *row = &s->p[(size_t)b * (size_t)s->n];
		double sx = 0, sx2 = 0, need = 0;
		int k = 0;

		budget += (double)s->t[b].max;
		for (int i = 0; i < s->n; i++) {
			const struct part *x = &row[i];
			double useful = fmin(x->usage, x->need);

			held += useful;
			need += x->need;
			s->hit_sum += x->hit * x->reqs;
			s->req_sum += x->reqs;
			if (x->need >= s->t[b].isz) {
				double r = fmin(1, (double)x->local_max / x->need);

				sx += r;
				sx2 += r * r;
				k++;
			}
		}
		bound += fmin(need, (double)s->t[b].max);
		if (k && sx2 > 0) {
			s->fair_sum += sx * sx / (k * sx2);
			s->fair_samples++;
		}
	}
	s->bound_sum += bound / budget;
	s->util_sum += held / budget;
	s->samples++;
}

/* ------------------------------------------------------------- the setup */

static void skew_draw(struct tenant *t, int n, uint64_t *rng)
{
	double sum = 0;

	for (int i = 0; i < n; i++)
		t->rank[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(trace_rng_next(rng) % (uint64_t)(i + 1)), x = t->rank[i];

		t->rank[i] = t->rank[j];
		t->rank[j] = x;
	}
	for (int i = 0; i < n; i++)
		sum += t->w[i] = pow(t->rank[i] + 1, -t->skew);
	for (int i = 0; i < n; i++)
		t->w[i] /= sum;
}

static double total_need(const struct tenant *t, int n, double rate)
{
	double sum = 0;

	for (int i = 0; i < n; i++)
		sum += need_items(t->w[i] * rate * (1 - t->p_fresh), fmax(1, t->w[i] * t->keys),
				  t->alpha) * t->isz;
	return sum;
}

/* Tenant @b of the mix: the shape of a usable row, a skew, and a request
 * rate that makes its needs @ratio times its budget. */
static void tenant_init(struct tenant *t, const struct tw_cluster *c, int n, uint64_t *rng)
{
	double ratio = 0.75 + 1.25 * trace_rng_unit(rng), lo = 0, hi = 40;

	t->alpha = c->alpha;
	t->isz = c->key_size + c->value_size + 48;
	t->p_fresh = c->ohw_pct > 0 && c->mean_freq > 0 ? fmin(0.9, c->ohw_pct / 100 / c->mean_freq) : 0;
	t->max = (uint64_t)n * SHARE_UNIT;
	t->min = t->max / 4;
	t->keys = 3.0 * (double)t->max / t->isz;
	t->skew = 0.5 + 1.5 * trace_rng_unit(rng);
	skew_draw(t, n, rng);
	for (int it = 0; it < 60; it++) { /* bisect log10(rate) */
		double mid = (lo + hi) / 2;

		if (total_need(t, n, pow(10, mid)) < ratio * (double)t->max)
			lo = mid;
		else
			hi = mid;
	}
	t->rate = pow(10, lo);
}

static int usable(const struct tw_cluster *c)
{
	return c->alpha >= 0.2 && c->key_size >= 0 && c->value_size >= 0;
}

static int sim_init(struct sim *s, const struct tw_table *tab, int n, int m, enum allocator a,
		    uint64_t seed)
{
	int row = 0;

	memset(s, 0, sizeof(*s));
	s->n = n;
	s->m = m;
	s->a = a;
	s->rng = seed;
	s->t = calloc((size_t)m, sizeof(*s->t));
	s->p = calloc((size_t)n * (size_t)m, sizeof(*s->p));
	if (!s->t || !s->p)
		return -ENOMEM;
	for (int b = 0; b < m; b++) {
		struct tenant *t = &s->t[b];

		while (!usable(&tab->rows[row % tab->n]))
			row++;
		t->w = calloc((size_t)n, sizeof(*t->w));
		t->rank = calloc((size_t)n, sizeof(*t->rank));
		if (!t->w || !t->rank)
			return -ENOMEM;
		tenant_init(t, &tab->rows[row % tab->n], n, &s->rng);
		row++;
		for (int i = 0; i < n; i++) {
			struct part *x = &s->p[(size_t)b * (size_t)n + (size_t)i];

			x->floor = t->min / (uint64_t)n;
			x->held = a == A_STATIC ? t->max / (uint64_t)n : x->floor;
			x->local_max = x->held;
			x->demand = x->floor;
		}
	}
	return 0;
}

static void sim_free(struct sim *s)
{
	for (int b = 0; s->t && b < s->m; b++) {
		free(s->t[b].w);
		free(s->t[b].rank);
	}
	free(s->t);
	free(s->p);
}

/* ------------------------------------------------------------- the runs */

struct result {
	double util, fair, conv, ops_s, hit, bound;
	uint64_t over;
};

/* Periods from the change until the shares are within 5% of the budget of
 * where the phase ends (L1), averaged over the tenants whose skew moved. */
static double convergence(const struct sim *s, const uint64_t *hist, int periods,
			  const unsigned char *moved)
{
	size_t nm = (size_t)s->n * (size_t)s->m;
	double sum = 0;
	int k = 0;

	for (int b = 0; b < s->m; b++) {
		const uint64_t *end = hist + (size_t)periods * nm + (size_t)b * (size_t)s->n;
		int t;

		if (!moved[b])
			continue;
		for (t = 0; t < periods; t++) {
			const uint64_t *at = hist + (size_t)t * nm + (size_t)b * (size_t)s->n;
			double d = 0;

			for (int i = 0; i < s->n; i++)
				d += fabs((double)at[i] - (double)end[i]);
			if (d <= 0.05 * (double)s->t[b].max)
				break;
		}
		sum += t * PERIOD_S;
		k++;
	}
	return k ? sum / k : 0;
}

static int run(const struct tw_table *tab, int n, int m, enum allocator a, uint64_t seed,
	       int warm, int phases, int plen, struct result *r)
{
	struct sim s;
	size_t nm = (size_t)n * (size_t)m;
	uint64_t *hist = malloc((size_t)(plen + 1) * nm * sizeof(*hist));
	struct sl__lease_alloc_in *in = malloc((size_t)n * sizeof(*in));
	double *wt = malloc((size_t)n * sizeof(*wt)), conv = 0;
	uint64_t *tgt = malloc((size_t)n * sizeof(*tgt));
	int *order = malloc((size_t)n * sizeof(*order)), rc;
	unsigned char *moved = calloc((size_t)m, 1);

	rc = sim_init(&s, tab, n, m, a, seed);
	if (rc || !hist || !in || !wt || !tgt || !order || !moved) {
		rc = -ENOMEM;
		goto out;
	}
	for (int ph = 0; ph < warm + phases; ph++) {
		int measured = ph >= warm;

		if (ph == warm)
			s.ops = 0;
		memset(moved, 0, (size_t)m);
		if (ph > 0) /* the load moves for half of the tenants */
			for (int b = 0; b < m; b++)
				if (trace_rng_next(&s.rng) & 1) {
					skew_draw(&s.t[b], n, &s.rng);
					moved[b] = 1;
				}
		for (int t = 0; t <= plen; t++) {
			for (size_t k = 0; k < nm; k++)
				hist[(size_t)t * nm + k] = s.p[k].local_max;
			if (t == plen)
				break;
			for (int b = 0; b < m; b++)
				budget_period(&s, b, in, wt, tgt, order);
			if (measured)
				measure(&s);
		}
		if (measured)
			conv += convergence(&s, hist, plen, moved);
		fprintf(stderr, "\r  %s %dx%d phase %d/%d   ", alloc_name[a], n, m, ph + 1,
			warm + phases);
	}
	r->util = s.util_sum / (double)s.samples;
	r->fair = s.fair_samples ? s.fair_sum / (double)s.fair_samples : 0;
	r->conv = conv / phases;
	r->ops_s = (double)s.ops / (phases * plen * PERIOD_S);
	r->bound = s.bound_sum / (double)s.samples;
	r->hit = s.req_sum > 0 ? s.hit_sum / s.req_sum : 0;
	r->over = s.over;
out:
	sim_free(&s);
	free(hist);
	free(in);
	free(wt);
	free(tgt);
	free(order);
	free(moved);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_lease [--quick] [--only NxM] [--allocator NAME] [--seed N] [--stats FILE]\n"
		"       bench_lease --workload slow-reuse [--quick] [--seed N]\n"
		"  Simulates the lease allocators (static, proportional, maxmin, gradient) over\n"
		"  N participants x M budgets of Twitter-shaped tenants; one JSON line each.\n"
		"  slow-reuse: issue Demand's three caches, keys read again every 1 to 30 s,\n"
		"  the skew flipped (bench_lease_reuse.c).\n"
		"  default table: %s\n",
		SL_TWITTER_STATS);
}

int main(int argc, char **argv)
{
	static const int configs[][2] = { { 3, 10 }, { 10, 100 }, { 100, 100 }, { 1000, 100 } };
	const char *stats = SL_TWITTER_STATS;
	int quick = 0, only_n = 0, only_m = 0, only_a = -1, workload = 0;
	uint64_t seed = 25;
	struct tw_table tab;
	char err[256];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			quick = 1;
		} else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
			if (sscanf(argv[++i], "%dx%d", &only_n, &only_m) != 2 || only_n < 1 ||
			    only_n > 100000 || only_m < 1 || only_m > 10000) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(argv[i], "--allocator") == 0 && i + 1 < argc) {
			i++;
			for (int a = 0; a < A_COUNT; a++)
				if (strcmp(argv[i], alloc_name[a]) == 0)
					only_a = a;
			if (only_a < 0) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
		} else if (strcmp(argv[i], "--stats") == 0 && i + 1 < argc) {
			stats = argv[++i];
		} else if (strcmp(argv[i], "--workload") == 0 && i + 1 < argc) {
			if (strcmp(argv[++i], "slow-reuse") != 0) {
				usage(stderr);
				return 2;
			}
			workload = 1;
		} else {
			usage(strcmp(argv[i], "--help") == 0 ? stdout : stderr);
			return strcmp(argv[i], "--help") == 0 ? 0 : 2;
		}
	}
	if (workload)
		return bench_lease_reuse(quick, seed);
	if (tw_table_load(&tab, stats, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_lease: %s\n", err);
		return 1;
	}
	for (size_t c = 0; c < sizeof(configs) / sizeof(configs[0]) || only_n; c++) {
		int n = only_n ? only_n : configs[c][0], m = only_n ? only_m : configs[c][1];
		/* Fewer repetitions where the configuration is large. */
		/* Fewer repetitions and phases where the configuration is large;
		 * a phase is 12 simulated seconds between moves of the load. */
		int big = n * m >= 100000;
		int reps = quick ? 1 : (big ? 2 : 4);
		int phases = quick ? (big ? 1 : 2) : 5, plen = 60, warm = quick ? 1 : 2;

		for (int a = 0; a < A_COUNT; a++) {
			struct result sum = { 0 };

			if (only_a >= 0 && a != only_a)
				continue;
			for (int rep = 0; rep < reps; rep++) {
				struct result r;

				if (run(&tab, n, m, (enum allocator)a, seed + (uint64_t)rep * 1000003, warm,
					phases, plen, &r) != 0) {
					fprintf(stderr, "bench_lease: out of memory\n");
					tw_table_free(&tab);
					return 1;
				}
				sum.util += r.util / reps;
				sum.fair += r.fair / reps;
				sum.conv += r.conv / reps;
				sum.ops_s += r.ops_s / reps;
				sum.hit += r.hit / reps;
				sum.bound += r.bound / reps;
				sum.over += r.over;
			}
			fprintf(stderr, "\r%-12s %4d x %-3d utilization %.3f (at most %.3f) fairness %.3f "
				"miss ratio %.2e convergence %.2f s\n",
				alloc_name[a], n, m, sum.util, sum.bound, sum.fair, 1 - sum.hit, sum.conv);
			printf("{\"bench\":\"lease_sim\",\"allocator\":\"%s\",\"participants\":%d,"
			       "\"budgets\":%d,\"utilization\":%.4f,\"fairness\":%.4f,"
			       "\"convergence_s\":%.2f,\"store_ops_per_s\":%.0f,"
			       "\"over_budget_samples\":%llu}\n",
			       alloc_name[a], n, m, sum.util, sum.fair, sum.conv, sum.ops_s,
			       (unsigned long long)sum.over);
			fflush(stdout);
		}
		if (only_n)
			break;
	}
	tw_table_free(&tab);
	return 0;
}
