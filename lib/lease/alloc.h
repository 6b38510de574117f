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

#endif /* SL_LEASE_ALLOC_H */
