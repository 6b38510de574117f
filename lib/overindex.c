/* SPDX-License-Identifier: MIT */
/*
 * The tree's indexes of groups that reclaim must find without walking the
 * tree:
 *   - over soft: groups whose count went over their soft limit (memcg v1
 *     kept them in a tree keyed by excess);
 *   - overcommitted protection (PROTECTION trees): groups whose children
 *     protect more of their usage than the group's own soft limit, so that
 *     the children's effective low is cut below what they set.
 * A charge pushes a group once, lock-free, onto the index's pending stack
 * when it first qualifies; reclaimers fold the pending stack into the
 * member list under the index lock, visit the members in their scope, and
 * drop the members that no longer qualify.  The lock is never held while a
 * callback runs, and several reclaimers read an index at once: none takes
 * it away from the others.
 */
#include "internal.h"

/* One index: where its lists live and how a group is linked into it. */
struct kind {
	_Atomic(sl_group *) *(*pending)(sl_tree *t);
	_Atomic(sl_group *) *(*members)(sl_tree *t);
	_Atomic(sl_group *) *(*next)(sl_group *g);
	sl_atomic32 *(*flag)(sl_group *g);
	bool (*qualifies)(sl_group *g);
};

static _Atomic(sl_group *) *over_pending(sl_tree *t) { return &t->over_pending; }
static _Atomic(sl_group *) *over_members(sl_tree *t) { return &t->over_members; }
static _Atomic(sl_group *) *over_next(sl_group *g) { return &g->over_next; }
static sl_atomic32 *over_flag(sl_group *g) { return &g->over_flag; }
static bool over_qualifies(sl_group *g)
{
	return sl__load(&g->count, SL_RELAXED) > sl__load(&g->soft, SL_RELAXED);
}

static _Atomic(sl_group *) *oc_pending(sl_tree *t) { return &t->oc_pending; }
static _Atomic(sl_group *) *oc_members(sl_tree *t) { return &t->oc_members; }
static _Atomic(sl_group *) *oc_next(sl_group *g) { return &g->prot->oc_next; }
static sl_atomic32 *oc_flag(sl_group *g) { return &g->prot->oc_flag; }
static bool oc_qualifies(sl_group *g)
{
	return sl__prot_sum(&g->prot->children_low, UINT64_MAX) > sl__load(&g->soft, SL_RELAXED);
}

static const struct kind over = { over_pending, over_members, over_next, over_flag, over_qualifies };
static const struct kind oc = { oc_pending, oc_members, oc_next, oc_flag, oc_qualifies };

static void push(const struct kind *k, sl_group *g)
{
	_Atomic(sl_group *) *pending = k->pending(g->tree);
	uint32_t zero = 0;
	sl_group *head;

	if (!sl__cas_strong(k->flag(g), &zero, 1, SL_RELAXED, SL_RELAXED))
		return;
	head = sl__load(pending, SL_RELAXED);
	do {
		sl__store(k->next(g), head, SL_RELAXED);
		/* Release: pairs with the acquire exchange in fold_pending(),
		 * which then sees the group's next link. */
	} while (!sl__cas_weak(pending, &head, g, SL_RELEASE, SL_RELAXED));
}

void sl__over_push(sl_group *g)
{
	push(&over, g);
}

void sl__oc_push(sl_group *g)
{
	if (!sl__load(&g->prot->oc_flag, SL_RELAXED) && oc_qualifies(g))
		push(&oc, g);
}

/* Move every pending push to the members.  Caller holds index_lock. */
static void fold_pending(const struct kind *k, sl_tree *t)
{
	/* Acquire: pairs with the pushes' release, so every next link in the
	 * chain is visible. */
	sl_group *g = sl__exchange(k->pending(t), NULL, SL_ACQUIRE), *next;
	_Atomic(sl_group *) *members = k->members(t);

	for (; g; g = next) {
		next = sl__load(k->next(g), SL_RELAXED);
		sl__store(k->next(g), sl__load(members, SL_RELAXED), SL_RELAXED);
		sl__store(members, g, SL_RELAXED);
	}
}

/* Unlink g from one index; caller holds index_lock. */
static void forget(const struct kind *k, sl_group *g)
{
	_Atomic(sl_group *) *pp;
	sl_group *p;

	if (!sl__load(k->flag(g), SL_RELAXED))
		return;
	fold_pending(k, g->tree);
	/* Relaxed: the list changes only under index_lock. */
	for (pp = k->members(g->tree); (p = sl__load(pp, SL_RELAXED)); pp = k->next(p)) {
		if (p == g) {
			sl__store(pp, sl__load(k->next(g), SL_RELAXED), SL_RELAXED);
			break;
		}
	}
	sl__store(k->flag(g), 0, SL_RELAXED);
}

/* Unlink g from every index (group destroy); caller holds index_lock. */
void sl__over_forget_locked(sl_group *g)
{
	forget(&over, g);
	if (g->prot)
		forget(&oc, g);
}

static void collect(const struct kind *k, sl_tree *t, const sl_group *scope, void (*fn)(sl_group *g, void *arg),
		    void *arg)
{
	_Atomic(sl_group *) *pp;
	sl_group *g, *gone = NULL;

	pthread_mutex_lock(&t->index_lock);
	fold_pending(k, t);
	/* Relaxed: the list changes only under index_lock. */
	for (pp = k->members(t); (g = sl__load(pp, SL_RELAXED));) {
		if (!k->qualifies(g)) {
			sl__store(pp, sl__load(k->next(g), SL_RELAXED), SL_RELAXED);
			sl__store(k->next(g), gone, SL_RELAXED);
			gone = g;
			continue;
		}
		if (g != scope && sl__is_ancestor(scope, g))
			fn(g, arg);
		pp = k->next(g);
	}
	/* A group that qualified again between our look and the flag's
	 * clearing saw the flag still set and did not push itself: push it
	 * now.  Members stay valid under the lock (destroy forgets them here
	 * first). */
	for (g = gone; g; g = gone) {
		gone = sl__load(k->next(g), SL_RELAXED);
		sl__store(k->flag(g), 0, SL_RELAXED);
		if (k->qualifies(g))
			push(k, g);
	}
	pthread_mutex_unlock(&t->index_lock);
}

void sl__over_collect(sl_tree *t, const sl_group *scope, void (*fn)(sl_group *g, void *arg), void *arg)
{
	collect(&over, t, scope, fn, arg);
}

void sl__oc_collect(sl_tree *t, const sl_group *scope, void (*fn)(sl_group *g, void *arg), void *arg)
{
	collect(&oc, t, scope, fn, arg);
}
