/* SPDX-License-Identifier: MIT */
/*
 * The reclaim engine: one reclaim's context, asking one group's callback,
 * and sl_reclaim().  The passes are the policy's (policy_*.c, through
 * tree->policy); pass 2's proportional cut is proportional.c's.
 *
 * Reclaims of one tree are serialised by tree->reclaim_lock, callbacks
 * included, so that two reclaims never both take a group's excess (which
 * would push it below what the policy grants).  The lock is never taken by
 * a charge that fits, by an uncharge, or by anything a callback may call:
 * inside a callback charges do not reclaim and reclaim does not nest.
 *
 * Progress is measured, not believed: a callback's return value counts only
 * as far as the group's own charge really fell, and a callback that frees
 * nothing is not asked again in the same pass.  Every loop is bounded.
 */
#include "internal.h"

_Thread_local unsigned sl__tls_in_reclaim;
_Thread_local unsigned sl__tls_reclaim_owner;

/* ---- measuring ---- */

uint64_t sl__usage_of(const sl_group *g)
{
	return sl__load(&g->count, SL_RELAXED);
}

/* What g's host holds charged to g itself: local plus this thread's ledger
 * (a drain before the reclaim folded every other thread's). */
uint64_t sl__own_of(const sl_group *g)
{
	return sl__load(&g->local, SL_RELAXED) + sl__stock_my_ledger(g);
}

uint64_t sl__soft_of(const sl_group *g)
{
	return sl__load(&g->soft, SL_RELAXED);
}

/*
 * How far g's own charges may fall before g or an ancestor up to the scope
 * would go under its min: min is never reclaimed, not even by the scope's
 * own reclaim (the scope's ancestors only see the scope's usage fall, as
 * its own limit demands).  Policies that floor groups themselves (PROTECTION
 * by effective min) skip this.
 */
static uint64_t min_headroom(const struct sl__reclaim *r, const sl_group *g)
{
	uint64_t room = UINT64_MAX;
	const sl_group *end = r->scope->parent;

	for (; g && g != end; g = g->parent) {
		uint64_t min = sl__load(&g->min, SL_RELAXED), usage;

		if (!min)
			continue;
		/* Real usage: units that stocks refilled since the drain (a
		 * callback's own charges, other threads) are not usage. */
		usage = sl__usage_of(g);
		usage -= sl__min_u64(usage, r->t->batch ? sl__stock_units(g) : 0);
		room = sl__min_u64(room, usage > min ? usage - min : 0);
	}
	return room;
}

/*
 * Ask g's callback for up to want units (never more than what remains of
 * the target, never into a min).  Returns what the callback freed, as far as
 * g's own charge really fell.  within: g counts a low event if its usage is
 * at or below it.
 */
uint64_t sl__reclaim_group(struct sl__reclaim *r, sl_group *g, uint64_t want, uint64_t within)
{
	uint64_t before, after, ret, fell, got, usage;

	/* A callback may free more than asked: the target can be met early. */
	if (r->freed >= r->target || !g->reclaim_fn)
		return 0;
	want = sl__min_u64(want, r->target - r->freed);
	if (want && r->t->policy->min_on_path)
		want = sl__min_u64(want, min_headroom(r, g));
	if (!want)
		return 0;
	usage = sl__usage_of(g);
	before = sl__own_of(g);
	sl__tls_in_reclaim++;
	ret = g->reclaim_fn(g, want, g->ctx);
	sl__tls_in_reclaim--;
	after = sl__own_of(g);
	fell = before > after ? before - after : 0;
	got = sl__min_u64(ret, fell);
	if (!got)
		return 0;
	sl__fetch_add(&g->reclaimed, got, SL_RELAXED);
	if (within && usage <= within && g->low_seq != r->t->reclaim_seq) {
		g->low_seq = r->t->reclaim_seq;
		sl__count(&g->events_low);
	}
	r->freed += got;
	return got;
}

/* ---- the reclaim itself ---- */

void sl__reclaim_lock(sl_tree *t)
{
	pthread_mutex_lock(&t->reclaim_lock);
	sl__tls_reclaim_owner++;
	t->reclaim_seq++;
}

void sl__reclaim_unlock(sl_tree *t)
{
	sl__tls_reclaim_owner--;
	pthread_mutex_unlock(&t->reclaim_lock);
}

/* Caller holds reclaim_lock. */
uint64_t sl__reclaim_locked(sl_group *scope, uint64_t target)
{
	struct sl__reclaim r = { .t = scope->tree, .scope = scope, .target = target };

	/* Decide on real usage: idle stock units are not anyone's usage. */
	sl__stock_drain_subtree(scope);
	r.t->policy->reclaim(&r);
	return r.freed;
}

uint64_t sl_reclaim(sl_group *scope, uint64_t target, unsigned flags)
{
	uint64_t freed;

	if (!sl__group_valid(scope) || !target || flags || sl__reclaim_forbidden())
		return 0;
	sl__reclaim_lock(scope->tree);
	freed = sl__reclaim_locked(scope, target);
	sl__reclaim_unlock(scope->tree);
	return freed;
}
