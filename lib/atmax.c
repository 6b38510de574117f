/* SPDX-License-Identifier: MIT */
/*
 * A charge that does not fit under some max: drain the stocks in the way,
 * reclaim, ask the host's OOM handler, and with SL_FORCE charge past max.
 * charge.c reaches this through tree->at_max.
 */
#include "internal.h"

#include <sched.h>

/* Rounds in a row in which no reclaim of the tree made progress before a
 * charge at max gives up (the kernel's MAX_RECLAIM_RETRIES). */
#define SL__RECLAIM_RETRIES 16
/* Rounds a charge waits in all for reclaims of others that are in flight. */
#define SL__WAIT_ROUNDS 4096

/*
 * A charge of need units did not fit under at's max: reclaim what is
 * missing plus the tree's reclaim batch, so that one reclaim serves the
 * charges that follow (a full cache charges at max on every set).  Returns
 * what this reclaim freed, or 1 if room appeared without one.
 */
static uint64_t reclaim_for_charge(sl_group *at, uint64_t need)
{
	uint64_t count, max, batch = at->tree->reclaim_batch;

	/* The caller drained its own stock; other threads' idle units stay
	 * theirs while reclaim can make room (see sl__at_max()). */
	count = sl__usage_of(at);
	max = sl__load(&at->max, SL_RELAXED);
	if (max >= need && count <= max - need)
		return 1;
	if (need > max)
		return 0;
	/* A batch small against max: at most 1/16 of it. */
	batch = sl__min_u64(batch, max / 16);
	return sl__reclaim(at, count - (max - need) + batch, count - (max - need), false);
}

/*
 * Could the charge of need fit under at's max even if reclaim freed all it
 * may (every protection kept, groups without a callback holding theirs,
 * stocks given back)?  false: reclaim would only evict for nothing, so the
 * charge fails without it (a failed charge leaves every counter as it
 * was).  Room that appears meanwhile is found by the retries as ever.
 */
static bool can_fit(sl_group *at, uint64_t need)
{
	uint64_t count = sl__usage_of(at), max = sl__load(&at->max, SL_RELAXED);

	if (need > max)
		return false;
	if (count <= max - need)
		return true;
	return sl__kept(at->tree, at) <= max - need;
}

/* Room for need under at's max now, stock units counted as usage. */
static bool fits_now(const sl_group *at, uint64_t need)
{
	uint64_t max = sl__load(&at->max, SL_RELAXED);

	return need <= max && sl__usage_of(at) <= max - need;
}

/*
 * The at-max path's judgement (sl__at_max() below) for every group on g's
 * path at once, for a host that makes room its own way between tries (the
 * jemalloc adapter): reclaim only where it may (not inside a callback or a
 * walk, where only room now counts); other threads' idle stock units given
 * back before a no, as the at-max path does before it gives up.
 */
int sl_charge_can_fit(sl_group *g, uint64_t amount)
{
	bool may_reclaim;
	sl_group *p;

	if (!sl__group_valid(g))
		return -EINVAL;
	if (amount == 0)
		return 1; /* sl_charge() of 0 always succeeds */
	may_reclaim = !sl__reclaim_forbidden();
	for (p = g; p; p = p->parent) {
		if (may_reclaim ? can_fit(p, amount) : fits_now(p, amount))
			continue;
		sl__stock_drain_subtree(p);
		if (!(may_reclaim ? can_fit(p, amount) : fits_now(p, amount)))
			return 0;
	}
	return 1;
}

/* The host's OOM handler, if any: nonzero asks for one more try. */
static bool ask_oom_handler(sl_group *at, uint64_t need)
{
	sl_tree *t = at->tree;
	sl_oom_fn fn;
	void *ctx;
	int again;

	pthread_mutex_lock(&t->lock);
	fn = t->oom_fn;
	ctx = t->oom_ctx;
	pthread_mutex_unlock(&t->lock);
	if (!fn)
		return false;
	sl__tls_in_reclaim++;
	again = fn(at, need, ctx);
	sl__tls_in_reclaim--;
	return again != 0;
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
		sl__stock_drain_subtree(top);
}

/*
 * Charge exactly amount, which did not fit under fail's max: other threads'
 * idle stock units first (a charge that fits once they are back has not hit
 * max), then reclaim, then the host's OOM handler; SL_FORCE then charges
 * past max.  One max event per charge that hit max, on the group in the way.
 *
 * The rule for failing (in the header): only after SL__RECLAIM_RETRIES
 * rounds in a row in which no reclaim of the tree freed anything, this
 * charge's or another thread's, and then the OOM handler declined; or, at
 * once, when the charge could not fit even if reclaim freed all it may
 * (can_fit()), again once the OOM handler declined.  Room
 * that another charge took first is no reason to fail while reclaims make
 * progress; reclaims of others in flight are waited for, boundedly.
 */
int sl__at_max(sl_group *g, uint64_t amount, unsigned flags, sl_group *fail)
{
	bool hit = false, oom_asked = false;
	bool may_reclaim = !(flags & SL_NORECLAIM) && !sl__reclaim_forbidden();
	sl_tree *t = g->tree;
	struct sl__stock *stock = t->batch && amount <= t->batch ? sl__stock_get() : NULL;
	sl_group *drained = NULL, *checked = NULL;
	unsigned idle = 0, waits = 0;
	int rc = -ENOMEM;

	for (;;) {
		uint64_t seen;

		/* Drain the stocks under the group in the way unless a drain
		 * already covered it; each new drain covers a strictly larger
		 * subtree, so there are at most depth + 1 of them between two
		 * reclaims.  While reclaim may make room, only this thread's
		 * own stock: other threads' idle units are their next charges,
		 * and taking them on every charge at max would have threads at
		 * max take each other's stocks in turn (and, under the fence
		 * protocol, interrupt each other with a membarrier); they are
		 * taken once reclaim makes no progress, before any failure. */
		if (!drained || !sl__is_ancestor(drained, fail)) {
			drained = fail;
			if (may_reclaim ? sl__stock_drain_mine(fail) : sl__stock_drain_subtree(fail))
				goto retry;
		}
		if (!hit) {
			hit = true;
			sl__count(&fail->events_max);
		}
		if (!may_reclaim)
			break;
		/* Relaxed: a tally; what it orders is nothing but our retry. */
		seen = sl__load(&t->progress, SL_RELAXED);
		if (checked != fail) {
			/* Once per group in the way, before any reclaim: a
			 * charge that cannot fit evicts nothing.  Other threads'
			 * idle units count as room (they are in the counts);
			 * given back, they may still make it fit. */
			checked = fail;
			if (!can_fit(fail, amount)) {
				sl__stock_drain_subtree(fail);
				if (!can_fit(fail, amount))
					idle = SL__RECLAIM_RETRIES;
				goto retry;
			}
		}
		if (idle < SL__RECLAIM_RETRIES) {
			/* Callbacks and the OOM handler may charge (never
			 * reclaiming) and so refill stocks: after either, drain
			 * afresh. */
			drained = NULL;
			if (reclaim_for_charge(fail, amount)) {
				idle = 0;
				goto retry;
			}
			if (sl__load(&t->progress, SL_RELAXED) != seen) {
				idle = 0; /* someone else made room */
				goto retry;
			}
			if (sl__load(&t->reclaimers, SL_RELAXED) && waits < SL__WAIT_ROUNDS) {
				/* Others hold claims on what we would take. */
				waits++;
				sched_yield();
				goto retry;
			}
			/* No progress this round: other threads' idle
			 * units under fail are room that needs no reclaim. */
			idle++;
			sl__stock_drain_subtree(fail);
			goto retry;
		}
		/* Reclaim could not make room: the host's OOM handler may drop
		 * something and ask for one more try. */
		if (oom_asked)
			break;
		oom_asked = true;
		if (!ask_oom_handler(fail, amount))
			break;
		idle = 0;
		drained = NULL;
		checked = NULL;
retry:
		/* The room a reclaim made goes to this thread first: a refill
		 * takes a stock's batch of it, so the charges that follow do
		 * not each meet max again. */
		if (stock && sl__stock_refill(stock, g, amount) == 0)
			return 0;
		rc = sl__counter_try(g, amount, 0, 0, &fail);
		if (rc != -ENOMEM)
			break;
	}
	if (rc == -ENOMEM) {
		if (!(flags & SL_FORCE)) {
			/* Failed for good, unless the caller says it will go
			 * on another way. */
			if (!(flags & SL_TRY))
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

int sl_tree_set_oom_handler(sl_tree *t, sl_oom_fn fn, void *ctx)
{
	bool locked;

	if (!t)
		return -EINVAL;
	locked = !sl__walking(t); /* inside a walk the lock is ours */
	if (locked)
		pthread_mutex_lock(&t->lock);
	t->oom_fn = fn;
	t->oom_ctx = ctx;
	if (locked)
		pthread_mutex_unlock(&t->lock);
	return 0;
}
