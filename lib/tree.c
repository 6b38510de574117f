/* SPDX-License-Identifier: MIT */
/*
 * Trees and groups: create, destroy, and what a group is.  Topology changes
 * take the tree's lock; the charge path never does (it only follows parent
 * pointers, which never change while a group lives, and reads limits
 * atomically).
 */
#include "internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

void sl_limits_init(struct sl_limits *lim)
{
	if (!lim)
		return;
	lim->min = 0;
	lim->soft = 0;
	lim->high = SL_UNLIMITED;
	lim->max = SL_UNLIMITED;
}

void sl_tree_opts_init(struct sl_tree_opts *opts)
{
	if (!opts)
		return;
	memset(opts, 0, sizeof(*opts));
	opts->policy = SL_POLICY_GUARANTEE;
	opts->batch = SL_BATCH_DEFAULT;
	opts->reclaim_batch = SL_RECLAIM_BATCH_DEFAULT;
	sl_limits_init(&opts->root);
}

/* Reserved room in a public struct must be zero: a later release gives it a
 * meaning, and a caller that sets it against this one gets -EINVAL rather
 * than being silently ignored. */
static bool all_zero(const void *p, size_t size)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < size; i++)
		if (b[i])
			return false;
	return true;
}

static const struct sl__policy *policy_of(enum sl_policy id)
{
	switch (id) {
	case SL_POLICY_GUARANTEE:
		return &sl__policy_guarantee;
	case SL_POLICY_GATEKEEPER:
		return &sl__policy_gatekeeper;
	case SL_POLICY_PROTECTION:
		return &sl__policy_protection;
	case SL_POLICY_REFAULT:
		return &sl__policy_refault;
	}
	return NULL;
}

int sl_tree_create(const struct sl_tree_opts *opts, sl_tree **out)
{
	struct sl_tree_opts def;
	const struct sl__policy *policy;
	sl_tree *t;
	sl_group *root;

	if (!out)
		return -EINVAL;
	if (!opts) {
		sl_tree_opts_init(&def);
		opts = &def;
	}
	/* The stocks' protocol is chosen before any group can have one. */
	sl__stock_protocol_init();
	policy = policy_of(opts->policy);
	if (!policy || !all_zero(opts->reserved, sizeof(opts->reserved)))
		return -EINVAL;
	if (opts->batch > SL_BATCH_MAX && opts->batch != SL_BATCH_NONE)
		return -EINVAL;
	if (!sl__limits_valid(&opts->root))
		return -EINVAL;

	t = sl__aligned_alloc(SL__CACHELINE, sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t, 0, sizeof(*t));
	root = sl__group_alloc("", 0, opts->policy == SL_POLICY_PROTECTION);
	if (sl__hash_init(t) != 0 || !root)
		goto nomem;
	if (pthread_mutex_init(&t->lock, NULL) != 0)
		goto nomem;
	if (pthread_mutex_init(&t->index_lock, NULL) != 0) {
		pthread_mutex_destroy(&t->lock);
		goto nomem;
	}
	if (pthread_mutex_init(&t->claim_lock, NULL) != 0) {
		pthread_mutex_destroy(&t->index_lock);
		pthread_mutex_destroy(&t->lock);
		goto nomem;
	}
	if (pthread_mutex_init(&t->limits_lock, NULL) != 0) {
		pthread_mutex_destroy(&t->claim_lock);
		pthread_mutex_destroy(&t->index_lock);
		pthread_mutex_destroy(&t->lock);
		goto nomem;
	}
	t->policy_id = opts->policy;
	t->policy = policy;
	t->prot = opts->policy == SL_POLICY_PROTECTION;
	t->at_max = sl__at_max;
	t->batch = opts->batch == SL_BATCH_NONE ? 0 : opts->batch ? opts->batch : SL_BATCH_DEFAULT;
	t->reclaim_batch = opts->reclaim_batch;
	root->tree = t;
	root->magic = SL__GROUP_MAGIC;
	sl__store_limits(root, &opts->root);
	t->root = root;
	t->nr_groups = 1;
	*out = t;
	return 0;
nomem:
	free(root);
	free(t->hash);
	free(t);
	return -ENOMEM;
}

void sl_tree_destroy(sl_tree *t)
{
	sl_group *g, *next;

	if (!t)
		return;
	/* Empty every stock slot of this tree first: after this no thread
	 * holds a reference to one of its groups. */
	sl__stock_forget_tree(t);

	/* Free the groups depth-first without recursion: descend to a leaf,
	 * free it, continue with its sibling or go back to its parent. */
	g = t->root;
	while (g) {
		if (g->first_child) {
			g = g->first_child;
			continue;
		}
		next = g->next_sibling ? g->next_sibling : g->parent;
		if (g->parent && g->parent->first_child == g)
			g->parent->first_child = g->next_sibling;
		g->magic = SL__GROUP_DEAD;
		free(g);
		g = next;
	}
	pthread_mutex_destroy(&t->limits_lock);
	pthread_mutex_destroy(&t->claim_lock);
	pthread_mutex_destroy(&t->index_lock);
	pthread_mutex_destroy(&t->lock);
	free(t->headroom_groups);
	free(t->hash);
	free(t);
}

sl_group *sl_tree_root(const sl_tree *t)
{
	return t ? t->root : NULL;
}

sl_tree *sl_group_tree(const sl_group *g)
{
	return sl__group_valid(g) ? g->tree : NULL;
}

enum sl_policy sl_tree_policy(const sl_tree *t)
{
	return t ? t->policy_id : SL_POLICY_GUARANTEE;
}

uint64_t sl_tree_batch(const sl_tree *t)
{
	return t ? t->batch : 0;
}

static bool name_valid(const char *name, size_t *len)
{
	size_t n;

	if (!name)
		return false;
	n = strnlen(name, SL_NAME_MAX + 1);
	if (n == 0 || n > SL_NAME_MAX || memchr(name, '/', n))
		return false;
	*len = n;
	return true;
}

int sl_group_create(sl_group *parent, const char *name, const struct sl_limits *lim,
		    const struct sl_ops *ops, void *ctx, sl_group **out)
{
	struct sl_limits def;
	sl_tree *t;
	sl_group *g;
	size_t len;
	int rc = 0;

	if (!sl__group_valid(parent) || !out || !name_valid(name, &len))
		return -EINVAL;
	if (ops && !all_zero(ops->reserved, sizeof(ops->reserved)))
		return -EINVAL;
	if (!lim) {
		sl_limits_init(&def);
		lim = &def;
	}
	if (!sl__limits_valid(lim) || parent->depth >= SL_DEPTH_MAX)
		return -EINVAL;

	t = parent->tree;
	/* Inside a walk of this tree the lock is ours already. */
	if (sl__walking(t))
		return -EBUSY;
	g = sl__group_alloc(name, len, t->prot);
	if (!g)
		return -ENOMEM;
	g->tree = t;
	g->parent = parent;
	g->depth = (uint16_t)(parent->depth + 1);
	g->ctx = ctx;
	g->reclaim_fn = ops ? ops->reclaim : NULL;
	sl__store_limits(g, lim);

	pthread_mutex_lock(&t->lock);
	if (sl__child_find(parent, g->name, len)) {
		rc = -EEXIST;
	} else {
		g->magic = SL__GROUP_MAGIC;
		g->next_sibling = parent->first_child;
		if (parent->first_child)
			parent->first_child->prev_sibling = g;
		parent->first_child = g;
		parent->nr_children++;
		t->nr_groups++;
		sl__hash_insert(t, g);
	}
	pthread_mutex_unlock(&t->lock);
	if (rc) {
		free(g);
		return rc;
	}
	*out = g;
	return 0;
}

int sl_group_destroy(sl_group *g)
{
	sl_tree *t;
	int rc;

	if (!sl__group_valid(g) || !g->parent)
		return -EINVAL;
	/* A reclaim callback must not wait for the pins of its own reclaim;
	 * inside a walk the topology lock is ours already. */
	t = g->tree;
	if (sl__tls_reclaiming || sl__walking(t))
		return -EBUSY;
	/* Reclaims pin under the topology lock (snapshots, background) or the
	 * index lock (candidates): holding both, no new pin can come.  Wait
	 * for the reclaims that hold g first (one may be running g's callback,
	 * which uncharges, or even charges, g), then judge whether g is empty.
	 * Acquire: pairs with the release in sl__unpin(), so the reclaims'
	 * last reads of g happen before the free. */
	for (;;) {
		pthread_mutex_lock(&t->lock);
		pthread_mutex_lock(&t->index_lock);
		if (sl__load(&g->pins, SL_ACQUIRE) == 0)
			break;
		pthread_mutex_unlock(&t->index_lock);
		pthread_mutex_unlock(&t->lock);
		sched_yield();
	}
	rc = g->nr_children || g->holds ? -EBUSY : 0;
	if (rc == 0) {
		/* Give the stocks' units back and fold their ledgers into
		 * local, so that count and local say exactly what the host
		 * still holds. */
		sl__stock_drain_group(g);
		sl__stock_quiesce();
		if (sl__load(&g->local, SL_RELAXED) || sl__load(&g->count, SL_RELAXED))
			rc = -EBUSY;
	}
	if (rc) {
		pthread_mutex_unlock(&t->index_lock);
		pthread_mutex_unlock(&t->lock);
		return rc;
	}
	/* Count 0: its protected usages leave the parent's sums with it. */
	if (g->prot)
		sl__counter_protect(g);
	sl__over_forget_locked(g);
	pthread_mutex_unlock(&t->index_lock);
	if (g->prev_sibling)
		g->prev_sibling->next_sibling = g->next_sibling;
	else
		g->parent->first_child = g->next_sibling;
	if (g->next_sibling)
		g->next_sibling->prev_sibling = g->prev_sibling;
	g->parent->nr_children--;
	sl__hash_remove(t, g);
	t->nr_groups--;
	sl__headroom_forget(t, g);
	g->magic = SL__GROUP_DEAD;
	pthread_mutex_unlock(&t->lock);
	free(g);
	return 0;
}

/*
 * Holds are counted under the topology lock, which sl_group_destroy()
 * judges them under: a hold either comes before the destroy's judgement
 * (which then refuses) or after the group is gone (the caller's bug, as
 * any call on a destroyed group).
 */
static int change_holds(sl_group *g, bool hold)
{
	sl_tree *t;
	bool locked;
	int rc = 0;

	if (!sl__group_valid(g))
		return -EINVAL;
	t = g->tree;
	locked = !sl__walking(t); /* inside a walk the lock is ours */
	if (locked)
		pthread_mutex_lock(&t->lock);
	if (hold && g->holds == UINT32_MAX)
		rc = -EOVERFLOW;
	else if (!hold && g->holds == 0)
		rc = -EINVAL;
	else
		g->holds += hold ? 1 : (uint32_t)-1;
	if (locked)
		pthread_mutex_unlock(&t->lock);
	return rc;
}

int sl_group_hold(sl_group *g)
{
	return change_holds(g, true);
}

int sl_group_unhold(sl_group *g)
{
	return change_holds(g, false);
}

const char *sl_group_name(const sl_group *g)
{
	return sl__group_valid(g) ? g->name : NULL;
}

sl_group *sl_group_parent(const sl_group *g)
{
	return sl__group_valid(g) ? g->parent : NULL;
}

void *sl_group_ctx(const sl_group *g)
{
	return sl__group_valid(g) ? g->ctx : NULL;
}
