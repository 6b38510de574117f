/* SPDX-License-Identifier: MIT */
/*
 * The over-soft index: the groups of a tree that went over their soft limit
 * (memcg v1 kept them in a tree keyed by excess).  A charge pushes a group
 * once, lock-free, onto a pending stack when its count first passes soft;
 * reclaimers fold the pending stack into the member list under the index
 * lock, visit the members in their scope, and drop the members that are no
 * longer over.  The lock is never held while a callback runs, and several
 * reclaimers read the index at once: none takes it away from the others.
 */
#include "internal.h"

void sl__over_push(sl_group *g)
{
	sl_tree *t = g->tree;
	uint32_t zero = 0;
	sl_group *head;

	if (!sl__cas_strong(&g->over_flag, &zero, 1, SL_RELAXED, SL_RELAXED))
		return;
	head = sl__load(&t->over_pending, SL_RELAXED);
	do {
		sl__store(&g->over_next, head, SL_RELAXED);
		/* Release: pairs with the acquire exchange in fold_pending(),
		 * which then sees g->over_next. */
	} while (!sl__cas_weak(&t->over_pending, &head, g, SL_RELEASE, SL_RELAXED));
}

/* Move every pending push to the members.  Caller holds index_lock. */
static void fold_pending(sl_tree *t)
{
	/* Acquire: pairs with the pushes' release, so every over_next in the
	 * chain is visible. */
	sl_group *g = sl__exchange(&t->over_pending, NULL, SL_ACQUIRE), *next;

	for (; g; g = next) {
		next = sl__load(&g->over_next, SL_RELAXED);
		sl__store(&g->over_next, sl__load(&t->over_members, SL_RELAXED), SL_RELAXED);
		sl__store(&t->over_members, g, SL_RELAXED);
	}
}

/* Unlink g from the index (group destroy); caller holds index_lock. */
void sl__over_forget_locked(sl_group *g)
{
	sl_tree *t = g->tree;
	_Atomic(sl_group *) *pp;
	sl_group *p;

	if (!sl__load(&g->over_flag, SL_RELAXED))
		return;
	fold_pending(t);
	/* Relaxed: the list changes only under index_lock. */
	for (pp = &t->over_members; (p = sl__load(pp, SL_RELAXED)); pp = &p->over_next) {
		if (p == g) {
			sl__store(pp, sl__load(&g->over_next, SL_RELAXED), SL_RELAXED);
			break;
		}
	}
	sl__store(&g->over_flag, 0, SL_RELAXED);
}

void sl__over_collect(sl_tree *t, const sl_group *scope, void (*fn)(sl_group *g, void *arg), void *arg)
{
	_Atomic(sl_group *) *pp;
	sl_group *g, *gone = NULL;

	pthread_mutex_lock(&t->index_lock);
	fold_pending(t);
	/* Relaxed: the list changes only under index_lock. */
	for (pp = &t->over_members; (g = sl__load(pp, SL_RELAXED));) {
		if (sl__load(&g->count, SL_RELAXED) <= sl__load(&g->soft, SL_RELAXED)) {
			sl__store(pp, sl__load(&g->over_next, SL_RELAXED), SL_RELAXED);
			sl__store(&g->over_next, gone, SL_RELAXED);
			gone = g;
			continue;
		}
		if (g != scope && sl__is_ancestor(scope, g))
			fn(g, arg);
		pp = &g->over_next;
	}
	/* A group that went over again between our look and the flag's
	 * clearing saw the flag still set and did not push itself: push it
	 * now.  Members stay valid under the lock (destroy forgets them here
	 * first). */
	for (g = gone; g; g = gone) {
		gone = sl__load(&g->over_next, SL_RELAXED);
		sl__store(&g->over_flag, 0, SL_RELAXED);
		sl__over_check(g, sl__load(&g->count, SL_RELAXED));
	}
	pthread_mutex_unlock(&t->index_lock);
}
