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

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

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
		want = add_sat(share, max_u64(share / 4, add_sat(evicted, refaulted)));
	} else {
		/* Neither idle nor pressed: what it uses, and a little room so
		 * that growth shows as evictions only when it is real. */
		want = add_sat(usage, usage / 16);
	}
	return max_u64(min_u64(want, budget_max), floor);
}
