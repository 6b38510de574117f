/* SPDX-License-Identifier: MIT */
/*
 * The allocator: demand in, shares out (alloc.h).
 *
 * Max-min fairness with a floor each is one water level L: participant i
 * gets max(floor_i, min(want_i, L)), where want_i = max(floor_i, demand_i),
 * and L is the highest level whose shares still fit in the budget.  The
 * level is found by bisection over [0, largest want]: 64 passes over the
 * input at most, no allocation and no sort, so the function cannot fail and
 * costs the same in every process that runs it on the same view.
 *
 * Integer shares leave a remainder below the number of participants the
 * level would raise next; it goes one unit each to the first of them in
 * input order, so every process computes the same shares.  A sum is only
 * ever compared with the budget, and stops as soon as it would pass it, so
 * no input can overflow it.
 */
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"

/* Each participant's bounds for one water-filling: at least lo, at most hi. */
struct bounds {
	const struct sl__lease_alloc_in *in;
	size_t n;
	int floors_only; /* the floors do not fit: fill up to the floors, from 0 */
};

static uint64_t lo_of(const struct bounds *b, size_t i)
{
	return b->floors_only ? 0 : b->in[i].floor;
}

static uint64_t hi_of(const struct bounds *b, size_t i)
{
	return b->floors_only ? b->in[i].floor : max_u64(b->in[i].floor, b->in[i].demand);
}

static uint64_t share_at(const struct bounds *b, size_t i, uint64_t level)
{
	return max_u64(lo_of(b, i), min_u64(hi_of(b, i), level));
}

/* The shares' sum at @level if it fits in @budget, else UINT64_MAX (which
 * may be a budget itself: callers test fits_at() first). */
static int fits_at(const struct bounds *b, uint64_t level, uint64_t budget, uint64_t *sum)
{
	uint64_t s = 0;

	for (size_t i = 0; i < b->n; i++) {
		uint64_t x = share_at(b, i, level);

		if (x > budget - s)
			return 0;
		s += x;
	}
	*sum = s;
	return 1;
}

/*
 * Fill @out to the highest level that fits in @budget, given that the
 * lower bounds alone fit (sum_at(b, 0) <= budget).  Returns what is left of
 * the budget once every hi is met (0 when some hi is not).
 */
static uint64_t water_fill(const struct bounds *b, uint64_t budget, uint64_t *out)
{
	uint64_t top = 0, level, sum = 0, left;

	for (size_t i = 0; i < b->n; i++)
		top = max_u64(top, hi_of(b, i));
	if (fits_at(b, top, budget, &sum)) {
		for (size_t i = 0; i < b->n; i++)
			out[i] = hi_of(b, i);
		return budget - sum;
	}
	/* sum_at(lo) <= budget < sum_at(hi): keep that, halve the gap. */
	uint64_t lo = 0, hi = top;

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (fits_at(b, mid, budget, &sum))
			lo = mid;
		else
			hi = mid;
	}
	level = lo;
	(void)fits_at(b, level, budget, &sum);
	left = budget - sum;
	/*
	 * Raising the level by one would add one unit to each participant
	 * with lo <= level < hi, and that no longer fits: so fewer units are
	 * left than there are such participants.  Hand them out in order.
	 */
	for (size_t i = 0; i < b->n; i++) {
		out[i] = share_at(b, i, level);
		if (left && lo_of(b, i) <= level && hi_of(b, i) > level) {
			out[i]++;
			left--;
		}
	}
	return 0;
}

void sl__lease_alloc_maxmin(uint64_t budget, size_t n, const struct sl__lease_alloc_in *in,
			    uint64_t *out)
{
	struct bounds b = { .in = in, .n = n, .floors_only = 0 };
	uint64_t left, sum = 0;

	if (n == 0 || !in || !out)
		return;
	/*
	 * The store never grants floors beyond the budget, but a lowered max
	 * can leave them so until the holders report: then the floors
	 * themselves are shared max-min fairly, and nothing else is given.
	 */
	if (!fits_at(&b, 0, budget, &sum)) {
		b.floors_only = 1;
		(void)water_fill(&b, budget, out);
		return;
	}
	left = water_fill(&b, budget, out);
	if (!left)
		return;
	/*
	 * Every demand is met: the rest is headroom for all, so a participant
	 * whose demand rises finds room at once, without waiting for others
	 * to shrink.  The shares sum to at most the budget, so none overflows.
	 */
	uint64_t each = left / n, extra = left % n;

	for (size_t i = 0; i < n; i++)
		out[i] += each + (i < extra ? 1 : 0);
}

uint64_t sl__lease_demand(uint64_t share, uint64_t usage, uint64_t floor, uint64_t budget_max,
			  uint64_t idle_ms, uint64_t idle_limit_ms, uint64_t evicted,
			  uint64_t refaulted)
{
	uint64_t want;

	if (idle_ms != UINT64_MAX && idle_ms > idle_limit_ms) {
		/* Memory nobody touches goes back an eighth a period: a cold
		 * tail gives room to others without dropping a warm head. */
		want = usage - usage / 8;
	} else if (evicted || refaulted) {
		/* Pressed at its share: ask for a quarter more, or for what it
		 * lost if that is more, so a burst is met within a period. */
		want = sat_add(share, max_u64(share / 4, sat_add(evicted, refaulted)));
	} else {
		/* Neither idle nor pressed: what it uses, and a little room so
		 * that growth shows as evictions only when it is real. */
		want = sat_add(usage, usage / 16);
	}
	return max_u64(min_u64(want, budget_max), floor);
}

/* @x moved toward @to by @num / @den of the way (@num <= @den). */
static uint64_t toward(uint64_t x, uint64_t to, uint64_t num, uint64_t den)
{
	double step = ((double)to - (double)x) * (double)num / (double)den;
	double y = (double)x + step;

	return y <= 0 ? 0 : y >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)y;
}

void sl__lease_reuse_fold(struct sl__lease_reuse *r, uint64_t reused, uint64_t reuse_ms,
			  uint64_t elapsed_ms)
{
	uint64_t flow, e = elapsed_ms ? elapsed_ms : 1;

	flow = reused / e;
	r->flow = flow;
	if (!r->known) {
		/* The first report is all there is to go on. */
		r->live = flow;
		r->horizon_ms = reuse_ms;
		r->known = 1;
		return;
	}
	/* An exponential average: weight e / (e + tau) for the new flow. */
	r->live = toward(r->live, flow, e, e + SL__LEASE_REUSE_TAU_MS);
	if (reuse_ms >= r->horizon_ms)
		r->horizon_ms = reuse_ms;
	else
		r->horizon_ms = toward(r->horizon_ms, reuse_ms, e, e + SL__LEASE_HORIZON_TAU_MS);
}

uint64_t sl__lease_horizon(const struct sl__lease_reuse *r, uint64_t idle_limit_ms)
{
	uint64_t h = max_u64(sat_add(r->horizon_ms, r->horizon_ms), SL__LEASE_HORIZON_MIN_MS);

	return min_u64(h, idle_limit_ms);
}

uint64_t sl__lease_demand_reuse(struct sl__lease_reuse *r, uint64_t share, uint64_t usage,
				uint64_t floor, uint64_t budget_max, uint64_t idle_ms,
				uint64_t idle_limit_ms, uint64_t evicted, uint64_t refaulted)
{
	uint64_t live = r->live, want = sat_add(live, live / 8);
	/* Dead memory goes back an eighth a period, of what it used or last
	 * asked for, whichever is less: the room given back is spread over
	 * everyone as headroom, and what a dead cache gets back of it must
	 * not hold its demand up. */
	uint64_t base = r->asked ? min_u64(usage, r->asked) : usage, keep = base - base / 8;
	/* What its usage fell by since its last demand was evicted to come
	 * down to a lower share, not to make room for new items: no pressure
	 * (counted, a cut would be asked back four times over, and a cache
	 * giving back would ask for its share again). */
	uint64_t shrunk = r->asked && r->used > usage ? r->used - usage : 0;
	uint64_t pressed = evicted > shrunk ? evicted - shrunk : 0;

	/* Evictions are demand only where reuse shows the memory live: a
	 * cache whose items nobody reads again evicts as much as one whose
	 * items are read, and only the second gains from more room (a third
	 * live: a cache growing into new keys shows their reuse late).  Live
	 * now, too: when the reads stop (a shift of load) the smoothed flow
	 * takes seconds to fall, and the few sets the cache still takes would
	 * hold its share all that time.  It asks four times what it lost, up
	 * to a quarter of its share. */
	if (pressed && min_u64(live, r->flow) >= usage / 3) {
		uint64_t lost = sat_add(pressed, refaulted);
		uint64_t more = lost > UINT64_MAX / 4 ? UINT64_MAX : lost * 4;

		want = max_u64(want, sat_add(share, min_u64(share / 4, more)));
	}
	/* A cache filling asks for room to go on filling as fast for a few
	 * periods more: after a shift of load, reuse shows late (a key is read
	 * again only after its interval), and room others give back is spread
	 * over everyone as headroom, where a dead cache keeps what it holds. */
	if (r->asked && usage > r->used) {
		uint64_t grew = usage - r->used, n = SL__LEASE_GROW_PERIODS;

		want = max_u64(want, sat_add(usage, grew > UINT64_MAX / n ? UINT64_MAX : grew * n));
	}
	/* Past the horizon nothing in the tail is read again: an eighth goes,
	 * even where the flow (which lags by its smoothing) says it is live. */
	if (idle_ms != UINT64_MAX && idle_ms > sl__lease_horizon(r, idle_limit_ms))
		want = min_u64(want, keep);
	/* A cache read in bursts does not drop what the next burst needs on
	 * one quiet period. */
	want = max_u64(want, keep);
	want = max_u64(min_u64(want, budget_max), floor);
	r->asked = want;
	r->used = usage;
	return want;
}
