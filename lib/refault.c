/* SPDX-License-Identifier: MIT */
/*
 * Refaults: reads that missed what reclaim took lately, as hosts report
 * them (sl_refault()), counted per group and summed up the path.
 * SL_POLICY_REFAULT ranks pass 1's victims by them: the group with the
 * fewest recent refaults gives first.  With every group's ghost list
 * reaching as many bytes back, a group's refaults are the hits that many
 * more bytes would have given it (the kernel's workingset refaults and
 * Memshare's shadow queues measure the same): the fewest is the lowest
 * marginal hit value.
 *
 * "Recent": the tree counts what reclaim frees (sl__refault_evicted(), from
 * the engine) in a window; a window ends when it has freed as much as the
 * tree holds (at least WINDOW_MIN units), and every group's count is halved
 * once per window ended, lazily, when next touched (the group keeps the
 * window it was last halved to).  So a count weighs the last window fully
 * and older ones by half each, time runs with reclaim (a tree that does
 * not reclaim keeps its order), and no walk over the groups is ever needed.
 * Everything here is relaxed: the counts order victims and feed stats;
 * they guard no memory and order nothing.
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

/* Bring f's count to the tree's current window.  The thread that moves the
 * group's window halves it; one racing with it may add before or after the
 * halving, which moves a rank a little and nothing else. */
static void catch_up(const sl_tree *t, struct sl__refault *f)
{
	uint32_t now = sl__load(&t->rf_epoch, SL_RELAXED), then = sl__load(&f->epoch, SL_RELAXED), times;
	uint64_t old;

	if (then == now || !sl__cas_strong(&f->epoch, &then, now, SL_RELAXED, SL_RELAXED))
		return;
	times = now - then;
	old = sl__load(&f->recent, SL_RELAXED);
	while (old && !sl__cas_weak(&f->recent, &old, times >= 64 ? 0 : old >> times, SL_RELAXED, SL_RELAXED))
		;
}

int sl_refault(sl_group *g, uint64_t count)
{
	sl_group *p;

	if (!sl__group_valid(g))
		return -EINVAL;
	if (!count)
		return 0;
	add_sat(&sl__refault_of(g)->total, count);
	for (p = g; p; p = p->parent) {
		struct sl__refault *f = sl__refault_of(p);

		catch_up(g->tree, f);
		add_sat(&f->recent, count);
	}
	return 0;
}

/* Reclaim took units from the tree: the clock of the windows. */
void sl__refault_evicted(sl_tree *t, uint64_t units)
{
	uint64_t w = sl__fetch_add(&t->rf_window, units, SL_RELAXED) + units;
	uint64_t window = sl__load(&t->root->count, SL_RELAXED);

	if (window < WINDOW_MIN)
		window = WINDOW_MIN;
	/* One thread ends the window; a loser's units stay in the next. */
	if (w >= window && sl__cas_strong(&t->rf_window, &w, 0, SL_RELAXED, SL_RELAXED))
		sl__fetch_add(&t->rf_epoch, 1, SL_RELAXED);
}

/* g's refault rank, larger gives first: the fewest recent refaults. */
uint64_t sl__refault_rank(const sl_group *g)
{
	struct sl__refault *f = sl__refault_of(g);

	catch_up(g->tree, f);
	return UINT64_MAX - sl__load(&f->recent, SL_RELAXED);
}
