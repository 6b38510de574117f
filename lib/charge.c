/* SPDX-License-Identifier: MIT */
/*
 * Charging and uncharging: the per-thread fast path, the hierarchical page
 * counters behind it, and the slow paths that refill stocks, charge exactly,
 * make room at max and catch over-uncharges.
 */
#include "internal.h"

/* How many ordinary folds of every stock an uncharge that comes up short
 * makes before the exact check (see sl__uncharge_slow). */
#define SL__FOLD_ROUNDS 2

unsigned sl__fold_rounds = SL__FOLD_ROUNDS;
void (*sl__fold_hook)(sl_group *g, bool exact);

/* How many times a charge at max reclaims and retries before it fails. */
#define SL__RECLAIM_RETRIES 16

/* This thread is inside a reclaim callback: nested charges never reclaim. */
_Thread_local unsigned sl__tls_in_reclaim;

/*
 * Charge amount to g and every ancestor, each level by a CAS that refuses to
 * pass its max: a counter never passes max, not even for an instant, unless
 * SL_FORCE.  stocked is the part of amount that goes into a stock rather
 * than to the host: a charge with one must not pass high either (a stock
 * never takes a group past high).  On failure the levels already charged are undone and *fail
 * names the group in the way.
 * Relaxed throughout: each counter is exact by itself, and no other memory
 * is published through them.
 */
int sl__counter_try(sl_group *g, uint64_t amount, unsigned flags, uint64_t stocked, sl_group **fail)
{
	uint64_t now[SL_DEPTH_MAX + 1];
	bool force = flags & SL_FORCE;
	sl_group *p, *q;
	unsigned i = 0;
	int rc;

	for (p = g; p; p = p->parent, i++) {
		uint64_t cur = sl__load(&p->count, SL_RELAXED);
		uint64_t lim = force ? UINT64_MAX : sl__load(&p->max, SL_RELAXED);

		if (stocked) {
			uint64_t high = sl__load(&p->high, SL_RELAXED);

			if (high < lim)
				lim = high;
		}
		do {
			if (cur > UINT64_MAX - amount) {
				rc = -EINVAL;
				goto undo;
			}
			if (cur + amount > lim) {
				rc = -ENOMEM;
				goto undo;
			}
		} while (!sl__cas_weak(&p->count, &cur, cur + amount, SL_RELAXED, SL_RELAXED));
		now[i] = cur + amount;
	}
	/* Peaks and events only once the whole charge stands. */
	for (p = g, i = 0; p; p = p->parent, i++) {
		sl__max_relaxed(&p->peak, now[i]);
		/* With the stock's units: the index must hold every group
		 * whose usage may pass soft through its stocks; reclaim
		 * drops the ones that turn out not to be over. */
		sl__over_check(p, now[i]);
		if (now[i] > sl__load(&p->high, SL_RELAXED)) {
			sl__count(&p->events_high);
			sl__high_note();
		}
	}
	return 0;
undo:
	for (q = g; q != p; q = q->parent)
		sl__fetch_sub(&q->count, amount, SL_RELAXED);
	if (fail)
		*fail = p;
	return rc;
}

void sl__counter_cancel(sl_group *g, uint64_t amount)
{
	for (; g; g = g->parent)
		sl__fetch_sub(&g->count, amount, SL_RELAXED);
}

/*
 * Pre-charge amount + batch to the path and hand amount out of the slot.
 * Returns 0, or 1 when the batch does not fit under every max and high on
 * the path: the caller then charges exactly, so a stock never makes a charge
 * fail (or pass high) that would not without it.
 */
static int stock_refill(struct sl__stock *s, sl_group *g, uint64_t amount)
{
	uint64_t batch = g->tree->batch, extra_local = 0, give_back = 0;
	struct sl__slot *sl = sl__stock_bind(s, g);
	uint64_t w;

	if (sl__counter_try(g, amount + batch, 0, batch, NULL) != 0)
		return 1;
	w = sl__load(&sl->word, SL_RELAXED);
	/* A ledger too full to take amount is folded into local below: until
	 * then those units are in neither, so an over-uncharge check must
	 * wait for us (see sl__uncharge_slow).  seq_cst: as in stock_bind. */
	sl__store(&s->inflight, 1, SL_SEQ_CST);
	/* While an over-uncharge check runs on g, no ledger of g may grow:
	 * charge exactly (into local) instead.  seq_cst: with the store just
	 * above, against the check's count and its quiesce; either it waits
	 * for us or we see it. */
	if (sl__unlikely(sl__load(&g->checks, SL_SEQ_CST) != 0)) {
		sl__store(&s->inflight, 0, SL_RELEASE);
		sl__counter_cancel(g, amount + batch);
		return 1;
	}
	for (;;) {
		uint64_t u = sl__w_units(w) + batch, h = sl__w_ledger(w) + amount, nw;

		give_back = u > sl->cap ? u - sl->cap : 0;
		u -= give_back;
		extra_local = h > SL__H_MAX ? h : 0;
		h -= extra_local;
		nw = (w & ~SL__UH_MASK) | u | (h << SL__H_SHIFT);
		/* Release: pairs with a drainer's acquire load of the word, so
		 * the drainer sees the group these units were charged to. */
		if (sl__cas_weak(&sl->word, &w, nw, SL_RELEASE, SL_RELAXED))
			break;
	}
	if (extra_local)
		sl__fetch_add(&g->local, extra_local, SL_RELAXED);
	/* Release: pairs with the acquire in sl__stock_quiesce(). */
	sl__store(&s->inflight, 0, SL_RELEASE);
	if (give_back)
		sl__counter_cancel(g, give_back);
	return 0;
}

/*
 * Before a forced charge: bring back the stocks under the highest group it
 * would pass, so that it passes only the maxes that real usage is over.
 * Drained again even if the charge drained there before: reclaim callbacks
 * and the OOM handler may have charged, and refilled stocks, since.
 */
static void force_room(sl_group *g, uint64_t amount)
{
	sl_group *top = NULL, *p;

	for (p = g; p; p = p->parent) {
		uint64_t count = sl__load(&p->count, SL_RELAXED);

		if (count > UINT64_MAX - amount || count + amount > sl__load(&p->max, SL_RELAXED))
			top = p;
	}
	if (top)
		sl__stock_drain(top, SL__DRAIN_SUBTREE);
}

/*
 * Charge exactly amount, making room when it does not fit: other threads'
 * idle stock units first (a charge that fits once they are back has not hit
 * max), then reclaim, then the host's OOM handler; SL_FORCE then charges
 * past max.  One max event per charge that hit max, on the group in the way.
 */
static int charge_exact(sl_group *g, uint64_t amount, unsigned flags)
{
	bool hit = false, oom_asked = false;
	bool may_reclaim = !(flags & SL_NORECLAIM) && !sl__tls_in_reclaim && !sl__tls_reclaim_owner;
	sl_group *fail = NULL, *drained = NULL;
	unsigned tries = 0;
	int rc;

	for (;;) {
		rc = sl__counter_try(g, amount, 0, 0, &fail);
		if (rc != -ENOMEM)
			break;
		/* Drain the stocks under the group in the way unless a drain
		 * already covered it; each new drain covers a strictly larger
		 * subtree, so there are at most depth + 1 of them between two
		 * reclaims. */
		if (!drained || !sl__is_ancestor(drained, fail)) {
			drained = fail;
			if (sl__stock_drain(fail, SL__DRAIN_SUBTREE))
				continue;
		}
		if (!hit) {
			hit = true;
			sl__count(&fail->events_max);
		}
		if (!may_reclaim)
			break;
		/* Callbacks and the OOM handler may charge (never reclaiming)
		 * and so refill stocks: after either, drain afresh. */
		if (tries < SL__RECLAIM_RETRIES) {
			tries++;
			if (sl__reclaim_for_charge(fail, amount)) {
				drained = NULL;
				continue;
			}
		}
		/* Reclaim could not make room: the host's OOM handler may drop
		 * something and ask for one more try. */
		if (oom_asked)
			break;
		oom_asked = true;
		if (!sl__oom(fail, amount))
			break;
		drained = NULL;
	}
	if (rc == -ENOMEM) {
		if (!(flags & SL_FORCE)) {
			sl__count(&fail->events_oom);
			return rc;
		}
		force_room(g, amount);
		/* Fails only if a counter would overflow. */
		rc = sl__counter_try(g, amount, SL_FORCE, 0, NULL);
	}
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
	    stock_refill(s, g, amount) == 0)
		return 0;
	return charge_exact(g, amount, flags);
}

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
	sl__stock_drain(g, SL__DRAIN_GROUP);
	if (sl__unlikely(sl__fold_hook != NULL))
		sl__fold_hook(g, true);
	/* Ledger units on their way into local (a rebind, a folding refill). */
	sl__stock_quiesce();
	got = sl__sub_clamped(&g->local, amount);
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
	struct sl__slot *sl = s ? sl__stock_slot_of(s, g) : NULL;
	uint64_t left = amount, release = 0, got;
	unsigned round;

	if (!sl__group_valid(g))
		return -EINVAL;
	if (amount == 0)
		return 0;
	if (sl) {
		/* What this thread's own ledger covers goes back into its slot,
		 * as far as the slot's cap allows. */
		uint64_t w = sl__load(&sl->word, SL_RELAXED), take, keep;

		do {
			uint64_t u = sl__w_units(w), room = sl->cap > u ? sl->cap - u : 0;

			take = sl__w_ledger(w) < left ? sl__w_ledger(w) : left;
			keep = take < room ? take : room;
		} while (take && !sl__cas_weak(&sl->word, &w, w - (take << SL__H_SHIFT) + keep,
					       SL_RELAXED, SL_RELAXED));
		left -= take;
		release += take - keep;
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
			sl__stock_drain(g, SL__DRAIN_LEDGERS);
			sl__stock_quiesce();
			if (sl__unlikely(sl__fold_hook != NULL))
				sl__fold_hook(g, false);
		}
		got = sl__sub_clamped(&g->local, left);
		left -= got;
		release += got;
	}
	if (release)
		sl__counter_cancel(g, release);
	return left ? -EINVAL : 0;
}

int sl_charge(sl_group *g, uint64_t amount, unsigned flags)
{
	struct sl__stock *s = sl__tls_stock;
	int i;

	if (sl__likely(s && g && !(flags & ~SL__FLAGS_ALL))) {
		for (i = 0; i < SL__STOCK_SLOTS; i++) {
			struct sl__slot *sl = &s->slot[i];
			uint64_t w;

			if (sl__load(&sl->group, SL_RELAXED) != g)
				continue;
			w = sl__load(&sl->word, SL_RELAXED);
			/* Relaxed: the units are already charged to every level;
			 * moving them from the stock to the host's ledger
			 * publishes nothing. */
			while (sl__w_units(w) >= amount && sl__w_ledger(w) + amount <= SL__H_MAX)
				if (sl__cas_weak(&sl->word, &w, w - amount + (amount << SL__H_SHIFT),
						 SL_RELAXED, SL_RELAXED))
					return 0;
			break;
		}
	}
	return sl__charge_slow(g, amount, flags);
}

int sl_uncharge(sl_group *g, uint64_t amount)
{
	struct sl__stock *s = sl__tls_stock;
	int i;

	if (sl__likely(s && g)) {
		for (i = 0; i < SL__STOCK_SLOTS; i++) {
			struct sl__slot *sl = &s->slot[i];
			uint64_t w;

			if (sl__load(&sl->group, SL_RELAXED) != g)
				continue;
			w = sl__load(&sl->word, SL_RELAXED);
			/* Only what this slot's ledger covers: an over-uncharge
			 * always reaches the slow path, which catches it. */
			while (sl__w_ledger(w) >= amount && sl__w_units(w) + amount <= sl->cap)
				if (sl__cas_weak(&sl->word, &w, w + amount - (amount << SL__H_SHIFT),
						 SL_RELAXED, SL_RELAXED))
					return 0;
			break;
		}
	}
	return sl__uncharge_slow(g, amount);
}
