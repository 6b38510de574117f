/* SPDX-License-Identifier: MIT */
/*
 * sl_charge(): the per-thread fast path, then a stock refill, then an exact
 * charge.  A charge that does not fit under some max goes to the reclaim
 * engine's at-max path (tree->at_max; atmax.c), which sits above this file.
 */
#include "internal.h"

/* Charge exactly amount, into g's local charge. */
static int charge_exact(sl_group *g, uint64_t amount, unsigned flags)
{
	sl_group *fail = NULL;
	int rc = sl__counter_try(g, amount, 0, 0, &fail);

	if (rc == -ENOMEM)
		return g->tree->at_max(g, amount, flags, fail);
	if (rc == 0)
		sl__fetch_add(&g->local, amount, SL_RELAXED);
	return rc;
}

int sl__charge_slow(sl_group *g, uint64_t amount, unsigned flags)
{
	struct sl__stock *s;

	if (!sl__group_valid(g) || (flags & ~SL__FLAGS_ALL))
		return -EINVAL;
	if (amount == 0)
		return 0;
	if (g->tree->batch && amount <= g->tree->batch && (s = sl__stock_get()) &&
	    sl__stock_refill(s, g, amount) == 0)
		return 0;
	return charge_exact(g, amount, flags);
}

/* The slot can hand out amount: units to give, room in the ledger. */
static inline bool slot_covers(uint64_t w, uint64_t amount)
{
	return sl__word_units(w) >= amount && sl__word_ledger(w) + amount <= SL__LEDGER_MAX;
}

int sl_charge(sl_group *g, uint64_t amount, unsigned flags)
{
	struct sl__stock *s = sl__tls_stock;
	struct sl__slot *sl;

	if (sl__likely(s && g && !(flags & ~SL__FLAGS_ALL)) && (sl = sl__slot_find(s, g))) {
		/* Relaxed throughout: the units are already charged to every
		 * level; moving them from the stock to the host's ledger
		 * publishes nothing. */
		uint64_t w;

		if (sl__likely(sl__stock_protocol == SL__STOCK_FENCE)) {
			/* No other thread writes the word until we leave. */
			if (sl__stock_enter(s)) {
				w = sl__load(&sl->word, SL_RELAXED);
				if (sl__likely(slot_covers(w, amount))) {
					sl__store(&sl->word, w - amount + (amount << SL__LEDGER_SHIFT), SL_RELAXED);
					sl__stock_leave(s);
					return 0;
				}
				sl__stock_leave(s);
			}
		} else {
			w = sl__load(&sl->word, SL_RELAXED);
			while (slot_covers(w, amount))
				if (sl__cas_weak(&sl->word, &w, w - amount + (amount << SL__LEDGER_SHIFT), SL_RELAXED,
						 SL_RELAXED))
					return 0;
		}
	}
	return sl__charge_slow(g, amount, flags);
}
