/* SPDX-License-Identifier: MIT */
/*
 * The one atomics layer of softlimit: thin wrappers over C11 <stdatomic.h>
 * that force an explicit memory order at every call site.  Every acquire or
 * release in the library carries a comment saying what it pairs with.
 */
#ifndef SL_ATOMIC_H
#define SL_ATOMIC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef _Atomic uint64_t sl_atomic64;
typedef _Atomic uint32_t sl_atomic32;

#define SL_RELAXED memory_order_relaxed
#define SL_ACQUIRE memory_order_acquire
#define SL_RELEASE memory_order_release
#define SL_ACQ_REL memory_order_acq_rel
#define SL_SEQ_CST memory_order_seq_cst

#define sl__load(p, mo) atomic_load_explicit((p), (mo))
#define sl__store(p, v, mo) atomic_store_explicit((p), (v), (mo))
#define sl__fetch_add(p, v, mo) atomic_fetch_add_explicit((p), (v), (mo))
#define sl__fetch_sub(p, v, mo) atomic_fetch_sub_explicit((p), (v), (mo))
#define sl__exchange(p, v, mo) atomic_exchange_explicit((p), (v), (mo))
#define sl__fetch_or(p, v, mo) atomic_fetch_or_explicit((p), (v), (mo))
/* Weak CAS: callers loop.  On failure *expected is reloaded with `fail` order. */
#define sl__cas_weak(p, expected, desired, mo, fail) \
	atomic_compare_exchange_weak_explicit((p), (expected), (desired), (mo), (fail))
#define sl__cas_strong(p, expected, desired, mo, fail) \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired), (mo), (fail))
#define sl__fence(mo) atomic_thread_fence(mo)

/* Relaxed counter bump for event counters: nothing is ordered by them. */
static inline void sl__count(sl_atomic64 *p)
{
	sl__fetch_add(p, 1, SL_RELAXED);
}

/* Raise *p to at least v (a high-water mark); relaxed: peaks order nothing. */
static inline void sl__max_relaxed(sl_atomic64 *p, uint64_t v)
{
	uint64_t cur = sl__load(p, SL_RELAXED);

	while (cur < v && !sl__cas_weak(p, &cur, v, SL_RELAXED, SL_RELAXED))
		;
}

/*
 * Subtract up to v from *p without going below zero; returns what was
 * subtracted.  Relaxed: the caller orders what it needs separately.
 */
static inline uint64_t sl__sub_clamped(sl_atomic64 *p, uint64_t v)
{
	uint64_t cur = sl__load(p, SL_RELAXED);
	uint64_t take;

	do {
		take = cur < v ? cur : v;
		if (take == 0)
			return 0;
	} while (!sl__cas_weak(p, &cur, cur - take, SL_RELAXED, SL_RELAXED));
	return take;
}

#define sl__likely(x) __builtin_expect(!!(x), 1)
#define sl__unlikely(x) __builtin_expect(!!(x), 0)

#endif /* SL_ATOMIC_H */
