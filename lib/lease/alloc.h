/* SPDX-License-Identifier: MIT */
/*
 * The allocator of libsoftlimit-lease: demand in, shares out.  Pure
 * functions, no I/O, no clock: lease.c calls them on a store's view,
 * benchmarks/bench_lease calls them in its simulator, tests/test_lease_alloc
 * checks them against their definition.
 */
#ifndef SL_LEASE_ALLOC_H
#define SL_LEASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* The lease code's arithmetic on units: no sum wraps, it saturates. */
static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

struct sl__lease_alloc_in {
	uint64_t demand;   /* units the participant asks for                          */
	uint64_t floor;    /* it gets at least this (floors sum to at most the budget) */
	uint64_t gain;     /* the marginal value of more memory there (refaults per
			    * unit of share; 0: unknown), for allocators that weigh it */
};

/*
 * Max-min fair shares of @budget over @n participants: each gets at least
 * its floor; then demands are met smallest first, the rest shared equally
 * among those that want more; room nobody asks for is spread equally over
 * all.  Writes @n shares to @out; their sum is at most @budget (equal to it
 * when the floors fit).  Deterministic: the same input gives the same output
 * in every process.
 */
void sl__lease_alloc_maxmin(uint64_t budget, size_t n, const struct sl__lease_alloc_in *in,
			    uint64_t *out);

/*
 * What a participant asks for, from its share, its usage and what the host
 * says its memory is worth at the margin (lease.h, "Demand").
 */
uint64_t sl__lease_demand(uint64_t share, uint64_t usage, uint64_t floor, uint64_t budget_max,
			  uint64_t idle_ms, uint64_t idle_limit_ms, uint64_t evicted,
			  uint64_t refaulted);

/*
 * A lease's reading of its host's reuse reports (lease.h, struct
 * sl_lease_demand's reused and reuse_ms), carried from period to period.
 */
struct sl__lease_reuse {
	uint64_t live;       /* units shown live: the reuse flow, smoothed (below)   */
	uint64_t flow;       /* the last report's flow, not smoothed                   */
	uint64_t horizon_ms; /* the longest reuse interval seen lately, decaying     */
	uint64_t asked;      /* the last demand made from it (0: none yet)            */
	uint64_t used;       /* the usage that demand was made at                      */
	int known;           /* a report was folded in                               */
};

/* The reuse flow is smoothed over about this long: long enough to average
 * the rare reuses of slow items, short enough that memory that stopped
 * being read stops counting within a few seconds. */
#define SL__LEASE_REUSE_TAU_MS 1000
/* The horizon decays toward what is seen now over about this long. */
#define SL__LEASE_HORIZON_TAU_MS 10000
/* A cache that filled by X in a period asks for X this many times more:
 * about two seconds of filling at slcache's periods (200-250 ms), the time
 * the room takes to come back from caches that give back an eighth a
 * period and to reach it through the store (a period or two). */
#define SL__LEASE_GROW_PERIODS 8
/* The shortest horizon: reuse timed to the second (slcache's atime) makes
 * anything shorter noise. */
#define SL__LEASE_HORIZON_MIN_MS 2000

/*
 * Fold one report, @reused (units x ms, summed over the units read again)
 * and @reuse_ms (the longest idle before a read), covering @elapsed_ms,
 * into @r.  By Little's law the flow reused / elapsed is the memory the
 * reused units occupied between their reads: the live memory; memory no
 * one reads again adds nothing to it, however much of it there is.
 */
void sl__lease_reuse_fold(struct sl__lease_reuse *r, uint64_t reused, uint64_t reuse_ms,
			  uint64_t elapsed_ms);

/*
 * The idle horizon: memory idle longer than this is dead.  Twice the reuse
 * interval seen lately, within [SL__LEASE_HORIZON_MIN_MS, @idle_limit_ms].
 */
uint64_t sl__lease_horizon(const struct sl__lease_reuse *r, uint64_t idle_limit_ms);

/*
 * What a participant asks for when its host reports reuse (@r, folded):
 * its live memory and an eighth more (room to show growth); more than its
 * share when it evicts more than its usage fell by since its last demand
 * (what it evicted to come down to a lower share is no pressure) and at
 * least a third of its usage is live, both smoothed and in the last
 * report; its
 * usage and SL__LEASE_GROW_PERIODS times what it grew by since its last
 * demand, when it grew; never
 * less than seven eighths of its usage or of its last demand, if less (it
 * gives back an eighth a period), and never more than that when its
 * coldest memory has sat idle past the horizon.  Notes the demand in @r.
 */
uint64_t sl__lease_demand_reuse(struct sl__lease_reuse *r, uint64_t share, uint64_t usage,
				uint64_t floor, uint64_t budget_max, uint64_t idle_ms,
				uint64_t idle_limit_ms, uint64_t evicted, uint64_t refaulted);

#endif /* SL_LEASE_ALLOC_H */
