/* SPDX-License-Identifier: MIT */
/*
 * The over-soft index: the groups of a tree that went over their soft limit
 * (memcg v1 kept them in a tree keyed by excess).  A charge pushes a group
 * once, lock-free, when its count first passes soft; reclaim takes the whole
 * list, ranks what it finds, and puts back what is still over.  Keys may be
 * stale: reclaim re-checks every group it picks.
 */
#include "internal.h"

void sl__over_push(sl_group *g)
{
	sl_tree *t = g->tree;
	uint32_t zero = 0;
	sl_group *head;

	if (!sl__cas_strong(&g->over_flag, &zero, 1, SL_RELAXED, SL_RELAXED))
		return;
	head = sl__load(&t->over_head, SL_RELAXED);
	do {
		sl__store(&g->over_next, head, SL_RELAXED);
		/* Release: pairs with the acquire exchange in
		 * sl__over_take_all(), which then sees g->over_next. */
	} while (!sl__cas_weak(&t->over_head, &head, g, SL_RELEASE, SL_RELAXED));
}

/* Unlink g from the index; caller holds reclaim_lock (the only remover). */
void sl__over_forget(sl_group *g)
{
	sl_tree *t = g->tree;
	sl_group *head, *p;

	if (!sl__load(&g->over_flag, SL_RELAXED))
		return;
	/* Acquire: pairs with a push's release, so the chain we follow from
	 * head is the pushers' complete one. */
	head = sl__load(&t->over_head, SL_ACQUIRE);
	if (head == g) {
		sl_group *next = sl__load(&g->over_next, SL_RELAXED);

		/* Fails only if a push went in first: then g is inside.
		 * Acq_rel: publishes the shorter chain to the next taker
		 * (release) and, on failure, reads the pusher's (acquire). */
		if (sl__cas_strong(&t->over_head, &head, next, SL_ACQ_REL, SL_ACQUIRE))
			goto out;
	}
	for (p = head; p; p = sl__load(&p->over_next, SL_RELAXED)) {
		if (sl__load(&p->over_next, SL_RELAXED) == g) {
			sl__store(&p->over_next, sl__load(&g->over_next, SL_RELAXED), SL_RELAXED);
			break;
		}
	}
out:
	sl__store(&g->over_flag, 0, SL_RELAXED);
}

/* Take the whole list; caller holds reclaim_lock (the only consumer). */
sl_group *sl__over_take_all(sl_tree *t)
{
	/* Acquire: pairs with the pushes' release, so every over_next in the
	 * chain is visible. */
	return sl__exchange(&t->over_head, NULL, SL_ACQUIRE);
}

/* Put the chain head..tail back in front of whatever was pushed since. */
void sl__over_put_back(sl_tree *t, sl_group *head, sl_group *tail)
{
	sl_group *h;

	if (!head)
		return;
	h = sl__load(&t->over_head, SL_RELAXED);
	do {
		sl__store(&tail->over_next, h, SL_RELAXED);
		/* Release: pairs with the next sl__over_take_all()'s acquire. */
	} while (!sl__cas_weak(&t->over_head, &h, head, SL_RELEASE, SL_RELAXED));
}
