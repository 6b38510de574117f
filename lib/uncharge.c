/* SPDX-License-Identifier: MIT */
/*
 * sl_uncharge(): the per-thread fast path, and the slow path that finds the
 * host's charge wherever it sits (local, or some thread's ledger) and
 * settles a shortfall exactly before calling it an over-uncharge.
 */
#include "internal.h"

#include "testing.h"

/* How many ordinary folds of every stock an uncharge that comes up short
 * makes before the exact check (see sl__uncharge_slow). */
#define SL__FOLD_ROUNDS 2

unsigned sl__fold_rounds = SL__FOLD_ROUNDS;
void (*sl__fold_hook)(sl_group *g, bool exact);

/*
 * The exact over-uncharge check.  While it runs, no ledger of g may grow
 * (refills of g's stocks charge exactly, into local, when they see
 * g->checks), and it folds every ledger of g into local and empties every
 * slot of g, so that no owner's fast path can move units into a ledger
 * either.  Then every unit the host still has charged to g is in local.
 * Other uncharges of g go on taking from local meanwhile: each takes only
 * units its host holds, which local holds too, so what is left still covers
 * this one if it is no over-uncharge.  Returns what it took toward amount.
 */
static uint64_t take_local_exact(sl_group *g, uint64_t amount)
{
	uint64_t got;

	/* seq_cst: against a refill's store of its inflight flag and load of
	 * checks; either the quiesce below waits for it or it sees us. */
	sl__fetch_add(&g->checks, 1, SL_SEQ_CST);
	/* Refills that missed the count are done once this returns. */
	sl__stock_quiesce();
	sl__stock_drain_group(g);
	if (sl__unlikely(sl__fold_hook != NULL))
		sl__fold_hook(g, true);
	/* Ledger units on their way into local (a rebind, a folding refill). */
	sl__stock_quiesce();
	got = sl__sub_clamped(&g->local, amount);
	/* Release: our take from local happens before a refill that sees the
	 * count fall and lets ledgers grow again. */
	sl__fetch_sub(&g->checks, 1, SL_RELEASE);
	return got;
}

/*
 * Where the host's charge on g sits: local(g) and the ledger of every slot
 * bound to g.  An uncharge takes what its own ledger covers, then from
 * local.  When local is short, units it needs may sit in other threads'
 * ledgers: fold them into local and look again.  A fold is not a snapshot
 * (while it scans, other threads charge into ledgers already scanned and
 * uncharge from ones not yet scanned), so after sl__fold_rounds ordinary
 * folds the shortfall is settled exactly by take_local_exact(), which keeps
 * g's ledgers from growing for a moment.  Only a shortfall that survives it
 * is an over-uncharge: -EINVAL, having taken what was there.
 */
int sl__uncharge_slow(sl_group *g, uint64_t amount)
{
	struct sl__stock *s = sl__tls_stock;
	struct sl__slot *sl = s ? sl__slot_find(s, g) : NULL;
	uint64_t left = amount, release = 0, got;
	unsigned round;

	if (!sl__group_valid(g))
		return -EINVAL;
	if (amount == 0)
		return 0;
	if (sl) {
		/* What this thread's own ledger covers goes back into its slot,
		 * as far as the slot's cap allows. */
		uint64_t w = sl__load(&sl->word, SL_RELAXED), taken, keep;

		do {
			uint64_t u = sl__word_units(w), room = sl->cap > u ? sl->cap - u : 0;

			taken = sl__min_u64(sl__word_ledger(w), left);
			keep = sl__min_u64(taken, room);
			/* Relaxed: our own slot; the units stay charged. */
		} while (taken && !sl__cas_weak(&sl->word, &w, w - (taken << SL__LEDGER_SHIFT) + keep,
						SL_RELAXED, SL_RELAXED));
		left -= taken;
		release += taken - keep;
	}
	for (round = 0; left; round++) {
		/* Without stocks local is the only place: short is over. */
		if (round && !g->tree->batch)
			break;
		if (round > sl__fold_rounds) {
			got = take_local_exact(g, left);
			left -= got;
			release += got;
			break;
		}
		if (round) {
			sl__stock_fold_ledgers(g);
			sl__stock_quiesce();
			if (sl__unlikely(sl__fold_hook != NULL))
				sl__fold_hook(g, false);
		}
		got = sl__sub_clamped(&g->local, left);
		left -= got;
		release += got;
	}
	if (release)
		sl__stock_keep(g, release);
	return left ? -EINVAL : 0;
}

/* The slot can take amount back: its ledger covers it, its cap has room. */
static inline bool slot_takes(uint64_t w, uint64_t amount, uint64_t cap)
{
	return sl__word_ledger(w) >= amount && sl__word_units(w) + amount <= cap;
}

int sl_uncharge(sl_group *g, uint64_t amount)
{
	struct sl__stock *s = sl__tls_stock;
	struct sl__slot *sl;

	if (sl__likely(s && g) && (sl = sl__slot_find(s, g))) {
		/* Only what this slot's ledger covers: an over-uncharge always
		 * reaches the slow path, which catches it.  Relaxed: as in
		 * sl_charge(), and with its two protocols. */
		uint64_t w;

		if (sl__likely(sl__stock_protocol == SL__STOCK_FENCE)) {
			if (sl__stock_enter(s)) {
				w = sl__load(&sl->word, SL_RELAXED);
				if (sl__likely(slot_takes(w, amount, sl->cap))) {
					sl__store(&sl->word, w + amount - (amount << SL__LEDGER_SHIFT), SL_RELAXED);
					sl__stock_leave(s);
					return 0;
				}
				sl__stock_leave(s);
			}
		} else {
			w = sl__load(&sl->word, SL_RELAXED);
			while (slot_takes(w, amount, sl->cap))
				if (sl__cas_weak(&sl->word, &w, w + amount - (amount << SL__LEDGER_SHIFT), SL_RELAXED,
						 SL_RELAXED))
					return 0;
		}
	}
	return sl__uncharge_slow(g, amount);
}
