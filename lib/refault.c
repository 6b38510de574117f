/* SPDX-License-Identifier: MIT */
/*
 * Refaults: what hosts tell us came back soon after reclaim took it
 * (sl_refault()), against what reclaim took (sl__refault_evicted(), from
 * the engine), per group and summed up the path.  SL_POLICY_REFAULT ranks
 * pass 1's victims by the ratio: the group whose evictions come back least
 * gives first (the kernel's workingset refaults and Memshare's shadow
 * queues measure the same thing: what a list would gain from more memory).
 *
 * The sums forget: the tree counts what reclaim frees in a window, and
 * when a window has freed as much as the tree holds (at least
 * WINDOW_MIN units) it ends, and every group's sums are halved once per
 * window ended, lazily, when next touched (the group keeps the window it
 * was last halved to).  So a ratio weighs the last window's reclaim fully
 * and older ones by half each, and no walk over the groups is ever
 * needed.  Everything here is relaxed: the counts rank victims and feed
 * stats; they guard no memory and order nothing.
 */
#include "internal.h"

#define WINDOW_MIN 64

static void add_sat(sl_atomic64 *p, uint64_t v)
{
	uint64_t old = sl__load(p, SL_RELAXED), new;

	do
		new = old > UINT64_MAX - v ? UINT64_MAX : old + v;
	while (new != old && !sl__cas_weak(p, &old, new, SL_RELAXED, SL_RELAXED));
}

static void halve(sl_atomic64 *p, uint32_t times)
{
	uint64_t old = sl__load(p, SL_RELAXED);

	while (old && !sl__cas_weak(p, &old, times >= 64 ? 0 : old >> times, SL_RELAXED, SL_RELAXED))
		;
}

/* Bring f's sums to the tree's current window.  The thread that moves the
 * group's window halves them; one racing with it may add before or after
 * the halving, which moves a rank a little and nothing else. */
static void catch_up(const sl_tree *t, struct sl__refault *f)
{
	uint32_t now = sl__load(&t->rf_epoch, SL_RELAXED), then = sl__load(&f->epoch, SL_RELAXED);

	if (then == now || !sl__cas_strong(&f->epoch, &then, now, SL_RELAXED, SL_RELAXED))
		return;
	halve(&f->refaults, now - then);
	halve(&f->evicted, now - then);
}

int sl_refault(sl_group *g, uint64_t count)
{
	sl_group *p;

	if (!sl__group_valid(g))
		return -EINVAL;
	if (!count)
		return 0;
	add_sat(&sl__refault_of(g)->refaulted, count);
	for (p = g; p; p = p->parent) {
		struct sl__refault *f = sl__refault_of(p);

		catch_up(g->tree, f);
		add_sat(&f->refaults, count);
	}
	return 0;
}

/* Reclaim took units from g's own charges (a callback's believed take). */
void sl__refault_evicted(sl_group *g, uint64_t units)
{
	sl_tree *t = g->tree;
	uint64_t window, w;
	sl_group *p;

	for (p = g; p; p = p->parent) {
		struct sl__refault *f = sl__refault_of(p);

		catch_up(t, f);
		add_sat(&f->evicted, units);
	}
	w = sl__fetch_add(&t->rf_window, units, SL_RELAXED) + units;
	window = sl__load(&t->root->count, SL_RELAXED);
	if (window < WINDOW_MIN)
		window = WINDOW_MIN;
	/* One thread ends the window; a loser's units stay in the next. */
	if (w >= window && sl__cas_strong(&t->rf_window, &w, 0, SL_RELAXED, SL_RELAXED))
		sl__fetch_add(&t->rf_epoch, 1, SL_RELAXED);
}

/*
 * g's refault rank, larger gives first: refaulted units per evicted unit,
 * low ratios ranking high, in 32.32 fixed point inverted; a group with no
 * eviction in its history ranks above every ratio (it gives first, and so
 * gets a history).  Refaults beyond evictions (reported for items evicted
 * before the window, or by a host's own evictions) cap at a ratio of
 * 2^31, still ordered.
 */
void sl__refault_rank(const sl_group *g, uint64_t *key)
{
	struct sl__refault *f = sl__refault_of(g);
	uint64_t rf, ev;
	double q;

	catch_up(g->tree, f);
	rf = sl__load(&f->refaults, SL_RELAXED);
	ev = sl__load(&f->evicted, SL_RELAXED);
	if (!ev) {
		*key = UINT64_MAX;
		return;
	}
	q = (double)rf / (double)ev * 4294967296.0;
	*key = UINT64_MAX - 1 - (q >= 9223372036854775808.0 ? UINT64_C(1) << 63 : (uint64_t)q);
}
