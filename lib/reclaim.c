/* SPDX-License-Identifier: MIT */
/*
 * The reclaim engine: one reclaim's context, asking one group's callback,
 * and sl_reclaim().  The passes are the policy's (policy_*.c, through
 * tree->policy); pass 2's proportional cut is proportional.c's.
 *
 * Reclaims run concurrently, on the same subtree too, and no lock is held
 * while a callback runs.  They share the work through claims: before asking
 * a callback for units, a reclaim adds them to the claimed count of the
 * group and every ancestor, and it may claim only what every level can
 * still give above its floor once the others' claims are counted (its min,
 * and the floor a policy step set there, such as GUARANTEE's soft limit).
 * The check and the add are one step under the tree's claim lock, a short
 * critical section that never spans a callback.  So two reclaimers never
 * both take a group's excess, and together they ask for about what they
 * need, not a multiple of it.
 *
 * Groups a reclaim holds pointers to are pinned (snapshots, candidates):
 * sl_group_destroy() waits for its group's pins to drop.  Progress is
 * measured, not believed: a callback's return value counts only as far as
 * the group's own charge really fell.  Every loop is bounded.
 */
#include "internal.h"

#include <sched.h>

_Thread_local unsigned sl__tls_in_reclaim;
_Thread_local unsigned sl__tls_reclaiming;

/* ---- measuring ---- */

uint64_t sl__usage_of(const sl_group *g)
{
	return sl__load(&g->count, SL_RELAXED);
}

/* What g's host holds charged to g itself, as far as this thread can tell
 * without a fence: local plus this thread's ledger.  Other threads'
 * ledgers are left out (the at-max path gives back only its own stock
 * first), so this is never more than the host holds. */
uint64_t sl__own_of(const sl_group *g)
{
	return sl__load(&g->local, SL_RELAXED) + sl__stock_my_ledger(g);
}

uint64_t sl__soft_of(const sl_group *g)
{
	return sl__load(&g->soft, SL_RELAXED);
}

/* ---- pins ---- */

void sl__pin(sl_group *g)
{
	/* Relaxed: taken under a lock that destroy takes too (the topology
	 * lock for snapshots, the index lock for candidates), which orders it
	 * before destroy's look. */
	sl__fetch_add(&g->pins, 1, SL_RELAXED);
}

void sl__unpin(sl_group *g)
{
	/* Release: our last reads of g happen before destroy, which waits
	 * for 0 with acquire, frees it. */
	sl__fetch_sub(&g->pins, 1, SL_RELEASE);
}

/* ---- claims ---- */

/* The floor a policy step set at p, if any. */
static uint64_t step_floor(const struct sl__reclaim *r, const sl_group *p)
{
	const struct sl__floor *f;
	uint64_t floor = 0;

	for (f = r->floors; f; f = f->prev)
		if (f->g == p && f->floor > floor)
			floor = f->floor;
	return floor;
}

/*
 * Claim up to want units of g's own charges: at most what every level from
 * g up to r->end (the scope, or the root for reclaim ahead of need) can
 * give above its floor, net of the claims of the
 * reclaims in flight; the claim is added to g and every ancestor.  Returns
 * what was claimed.  floor is g's own floor in this step.
 */
static uint64_t claim(struct sl__reclaim *r, sl_group *g, uint64_t want, uint64_t floor)
{
	const sl_group *end = r->end;
	bool min_on_path = r->t->policy->min_on_path;
	sl_group *p;

	pthread_mutex_lock(&r->t->claim_lock);
	for (p = g; p != end && want; p = p->parent) {
		uint64_t f = p == g ? floor : 0, usage, stocked, taken;

		if (min_on_path && sl__load(&p->min, SL_RELAXED) > f)
			f = sl__load(&p->min, SL_RELAXED);
		if (step_floor(r, p) > f)
			f = step_floor(r, p);
		if (!f)
			continue;
		/* Claimed first, then usage: a reclaim that finishes gives
		 * its claim back after its callback's uncharges (release in
		 * unclaim()), so if we see the claim gone (acquire) we see
		 * those uncharges in usage too; read the other way round, a
		 * unit freed and unclaimed in between would be claimed twice
		 * (found by proof/reclaim.pml). */
		taken = sl__load(&p->claimed, SL_ACQUIRE) + f;
		/* Real usage: units that stocks refilled since the drain (a
		 * callback's own charges, other threads) are not usage; the
		 * count and the stocks read together, or a refill between
		 * them looks like usage (found by proof/reclaim.pml). */
		sl__stock_usage(p, &usage, &stocked);
		want = sl__min_u64(want, usage > taken ? usage - taken : 0);
	}
	/* Relaxed: the claim lock orders claims among claimers; a reader
	 * outside it only ever sees too much claimed, never too little. */
	if (want)
		for (p = g; p; p = p->parent)
			sl__fetch_add(&p->claimed, want, SL_RELAXED);
	pthread_mutex_unlock(&r->t->claim_lock);
	return want;
}

static void unclaim(sl_group *g, uint64_t n)
{
	/* Release: the callback's uncharges happen before a claimer that
	 * sees the claim gone (claim() reads claimed, then usage).  Giving
	 * back needs no lock: it only ever makes more room. */
	for (; g; g = g->parent)
		sl__fetch_sub(&g->claimed, n, SL_RELEASE);
}

/*
 * One callback per group at a time: the next reclaim of g claims against
 * the usage the last one's callback left, so a callback that frees whole
 * items (more than asked) cannot make two claims that each fit add up past
 * g's floor.  Nothing library-side is held while waiting, and a callback
 * never waits here (it cannot reclaim).
 */
static void callback_begin(sl_group *g)
{
	uint32_t zero = 0;

	/* Acquire: pairs with callback_end(), so the last callback's
	 * uncharges are in the counts we claim against. */
	while (!sl__cas_weak(&g->in_callback, &zero, 1, SL_ACQUIRE, SL_RELAXED)) {
		zero = 0;
		sched_yield();
	}
}

static void callback_end(sl_group *g)
{
	sl__store(&g->in_callback, 0, SL_RELEASE);
}

/*
 * Ask g's callback for up to want units (never more than what remains of
 * the target, never what concurrent reclaims claimed, never under a floor:
 * floor for g itself, the mins and step floors of its ancestors).  Returns
 * what the callback freed, as far as g's own charge really fell.  within: g
 * counts a low event if its usage is at or below it.
 */
uint64_t sl__reclaim_group(struct sl__reclaim *r, sl_group *g, uint64_t want, uint64_t floor, uint64_t within)
{
	uint64_t before, after, ret, fell, got, usage;

	/* A callback may free more than asked: the target can be met early. */
	if (r->freed >= r->target || !g->reclaim_fn)
		return 0;
	callback_begin(g);
	/* Never more than g's own charges: a group on its way out of
	 * sl_group_destroy() (empty, but still pinned by us) is not asked. */
	before = sl__own_of(g);
	want = sl__min_u64(sl__min_u64(want, r->target - r->freed), before);
	if (!want || !(want = claim(r, g, want, floor))) {
		callback_end(g);
		return 0;
	}
	usage = sl__usage_of(g);
	sl__tls_in_reclaim++;
	ret = g->reclaim_fn(g, want, g->ctx);
	sl__tls_in_reclaim--;
	after = sl__own_of(g);
	unclaim(g, want);
	callback_end(g);
	fell = before > after ? before - after : 0;
	got = sl__min_u64(ret, fell);
	if (!got)
		return 0;
	sl__fetch_add(&g->reclaimed, got, SL_RELAXED);
	sl__refault_evicted(r->t, got);
	/* Relaxed: a tally for charges at max to see that someone made room. */
	sl__fetch_add(&r->t->progress, got, SL_RELAXED);
	/* Once per reclaim per group; relaxed: a number, not a publication. */
	if (within && usage <= within && sl__exchange(&g->low_seq, r->seq, SL_RELAXED) != r->seq)
		sl__count(&g->events_low);
	r->freed += got;
	return got;
}

/* ---- the reclaim itself ---- */

/*
 * Reclaim up to target from scope's subtree by the tree's policy (the
 * caller has checked that this thread may reclaim).  Pass 2, which takes
 * what the policy grants, serves only must of it (<= target): a charge at
 * max reclaims its need and a batch, and the batch is extra, so it comes
 * from excess only and never costs anyone their protection; background
 * reclaim passes must = 0.  drain: give back the scope's stocks first
 * (callers that just did pass false).
 */
static uint64_t run(struct sl__reclaim *r, bool drain)
{
	/* Relaxed: counts and numbers only. */
	sl__fetch_add(&r->t->reclaimers, 1, SL_RELAXED);
	r->seq = sl__fetch_add(&r->t->reclaim_seq, 1, SL_RELAXED) + 1;
	sl__tls_reclaiming++;
	/* Decide on real usage: idle stock units are not anyone's usage
	 * (a charge at max drained what it chose to already). */
	if (drain)
		sl__stock_drain_subtree(r->scope);
	r->t->policy->reclaim(r);
	sl__tls_reclaiming--;
	sl__fetch_sub(&r->t->reclaimers, 1, SL_RELAXED);
	return r->freed;
}

uint64_t sl__reclaim(sl_group *scope, uint64_t target, uint64_t must, bool drain)
{
	struct sl__reclaim r = { .t = scope->tree, .scope = scope, .end = scope->parent, .target = target, .must = must };

	return run(&r, drain);
}

/*
 * Reclaim ahead of need (background reclaim): up to target from scope's
 * subtree, from what pass 1 may take (must = 0), and never below what the
 * policy grants scope or any group above it, as sl_group_stats() reports
 * it (emin, esoft).  A reclaim for need does not shield its scope (its own
 * soft limit and protection are what it must give up at its max); ahead of
 * need nothing presses, so scope and its ancestors keep their grant as
 * floors, and every claim is checked up to the root.  Below scope, pass 1
 * spares what the policy grants each group already.
 */
uint64_t sl__reclaim_ahead(sl_group *scope, uint64_t target)
{
	struct sl__floor grant[SL_DEPTH_MAX + 1];
	struct sl__reclaim r = { .t = scope->tree, .scope = scope, .end = NULL, .target = target };
	sl_group *p;
	size_t n = 0;

	/* A list of frames as the policies' steps push them; step_floor()
	 * reads them in any order. */
	for (p = scope; p; p = p->parent, n++) {
		uint64_t emin, esoft;

		r.t->policy->effective(p, &emin, &esoft);
		grant[n] = (struct sl__floor){ .g = p, .floor = emin > esoft ? emin : esoft, .prev = n ? &grant[n - 1] : NULL };
	}
	r.floors = &grant[n - 1];
	return run(&r, false);
}

/* Before pass 2: lower the target to what pass 2 may serve; false when
 * that is met already. */
bool sl__pass2_begin(struct sl__reclaim *r)
{
	if (r->target > r->must)
		r->target = r->must > r->freed ? r->must : r->freed;
	return r->freed < r->target;
}

uint64_t sl_reclaim(sl_group *scope, uint64_t target, unsigned flags)
{
	if (!sl__group_valid(scope) || !target || flags || sl__reclaim_forbidden())
		return 0;
	return sl__reclaim(scope, target, target, true);
}
