/* SPDX-License-Identifier: MIT */
/*
 * The group tree: trees, groups, names, limits.  Topology changes take the
 * tree's lock; the charge path never does (it only follows parent pointers,
 * which never change while a group lives, and reads limits atomically).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

_Thread_local sl_tree *sl__tls_walk_tree;

_Static_assert(sizeof(struct sl_group) <= 256, "a group must fit in 256 bytes plus its name");
_Static_assert(offsetof(struct sl_group, name) <= 256 - 48, "room for a 47-byte name in 256 bytes");
_Static_assert(SL_DEPTH_MAX <= UINT16_MAX && SL_NAME_MAX <= UINT16_MAX, "depth and name_len are 16-bit");

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
	opts->policy = SL_POLICY_GUARANTEE;
	opts->batch = SL_BATCH_DEFAULT;
	sl_limits_init(&opts->root);
}

bool sl__limits_valid(const struct sl_limits *lim)
{
	return lim->min <= lim->max && lim->soft <= lim->max;
}

bool sl__group_valid(const sl_group *g)
{
	return g && g->magic == SL__GROUP_MAGIC;
}

bool sl__is_ancestor(const sl_group *anc, const sl_group *g)
{
	if (g->depth < anc->depth)
		return false;
	while (g->depth > anc->depth)
		g = g->parent;
	return g == anc;
}

static void store_limits(sl_group *g, const struct sl_limits *lim)
{
	/* Relaxed: each limit is read on its own; a charge racing with a
	 * change may see the old or the new value of each, as documented. */
	sl__store(&g->min, lim->min, SL_RELAXED);
	sl__store(&g->soft, lim->soft, SL_RELAXED);
	sl__store(&g->high, lim->high, SL_RELAXED);
	sl__store(&g->max, lim->max, SL_RELAXED);
}

static sl_group *group_alloc(const char *name, size_t len)
{
	/* The name lives in the group's last cache line while it fits. */
	size_t size = offsetof(struct sl_group, name) + len + 1;
	sl_group *g;

	size = (size + SL__CACHELINE - 1) & ~(size_t)(SL__CACHELINE - 1);
	g = sl__aligned_alloc(SL__CACHELINE, size);
	if (!g)
		return NULL;
	memset(g, 0, sizeof(*g));
	memcpy(g->name, name, len);
	g->name[len] = '\0';
	g->name_len = (uint16_t)len;
	return g;
}

/* FNV-1a over the parent's address and the name. */
static size_t name_hash(const sl_group *parent, const char *name, size_t len)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	uintptr_t p = (uintptr_t)parent;
	size_t i;

	for (i = 0; i < sizeof(p); i++) {
		h ^= (p >> (8 * i)) & 0xff;
		h *= UINT64_C(0x100000001b3);
	}
	for (i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= UINT64_C(0x100000001b3);
	}
	return (size_t)(h ^ (h >> 29));
}

static sl_group *hash_find(sl_tree *t, const sl_group *parent, const char *name, size_t len)
{
	sl_group *g = t->hash[name_hash(parent, name, len) & t->hash_mask];

	for (; g; g = g->hnext)
		if (g->parent == parent && g->name_len == len && memcmp(g->name, name, len) == 0)
			return g;
	return NULL;
}

/* Caller holds the tree's lock. */
sl_group *sl__child_find(sl_group *parent, const char *name, size_t len)
{
	return hash_find(parent->tree, parent, name, len);
}

static void hash_insert(sl_tree *t, sl_group *g)
{
	size_t b = name_hash(g->parent, g->name, g->name_len) & t->hash_mask;

	g->hnext = t->hash[b];
	t->hash[b] = g;
}

static void hash_remove(sl_tree *t, sl_group *g)
{
	sl_group **pp = &t->hash[name_hash(g->parent, g->name, g->name_len) & t->hash_mask];

	while (*pp != g)
		pp = &(*pp)->hnext;
	*pp = g->hnext;
}

/* Double the buckets when the table is full; failure just keeps chains longer. */
static void hash_grow(sl_tree *t)
{
	size_t n = t->hash_mask + 1, i;
	sl_group **nh;

	if (t->nr_groups < n || n > SIZE_MAX / 2 / sizeof(*nh))
		return;
	nh = sl__calloc(2 * n, sizeof(*nh));
	if (!nh)
		return;
	for (i = 0; i < n; i++) {
		sl_group *g = t->hash[i], *next;

		for (; g; g = next) {
			size_t b = name_hash(g->parent, g->name, g->name_len) & (2 * n - 1);

			next = g->hnext;
			g->hnext = nh[b];
			nh[b] = g;
		}
	}
	free(t->hash);
	t->hash = nh;
	t->hash_mask = 2 * n - 1;
}

int sl_tree_create(const struct sl_tree_opts *opts, sl_tree **out)
{
	struct sl_tree_opts def;
	sl_tree *t;
	sl_group *root;

	if (!out)
		return -EINVAL;
	if (!opts) {
		sl_tree_opts_init(&def);
		opts = &def;
	}
	if ((unsigned)opts->policy > SL_POLICY_PROTECTION)
		return -EINVAL;
	if (opts->batch > SL_BATCH_MAX && opts->batch != SL_BATCH_NONE)
		return -EINVAL;
	if (!sl__limits_valid(&opts->root))
		return -EINVAL;

	t = sl__calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->hash = sl__calloc(16, sizeof(*t->hash));
	root = group_alloc("", 0);
	if (!t->hash || !root)
		goto nomem;
	if (pthread_mutex_init(&t->lock, NULL) != 0)
		goto nomem;
	if (pthread_mutex_init(&t->reclaim_lock, NULL) != 0) {
		pthread_mutex_destroy(&t->lock);
		goto nomem;
	}
	t->hash_mask = 15;
	t->policy = opts->policy;
	t->batch = opts->batch == SL_BATCH_NONE ? 0 : opts->batch ? opts->batch : SL_BATCH_DEFAULT;
	root->tree = t;
	root->magic = SL__GROUP_MAGIC;
	store_limits(root, &opts->root);
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
	sl__stock_drain(t->root, SL__DRAIN_TREE);

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
	pthread_mutex_destroy(&t->reclaim_lock);
	pthread_mutex_destroy(&t->lock);
	free(t->hash);
	free(t);
}

sl_group *sl_tree_root(sl_tree *t)
{
	return t ? t->root : NULL;
}

sl_tree *sl_group_tree(sl_group *g)
{
	return sl__group_valid(g) ? g->tree : NULL;
}

enum sl_policy sl_tree_policy(sl_tree *t)
{
	return t ? t->policy : SL_POLICY_GUARANTEE;
}

uint64_t sl_tree_batch(sl_tree *t)
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
	if (!lim) {
		sl_limits_init(&def);
		lim = &def;
	}
	if (!sl__limits_valid(lim) || parent->depth >= SL_DEPTH_MAX)
		return -EINVAL;

	t = parent->tree;
	/* Inside a walk of this tree the lock is ours already. */
	if (sl__tls_walk_tree == t)
		return -EBUSY;
	g = group_alloc(name, len);
	if (!g)
		return -ENOMEM;
	g->tree = t;
	g->parent = parent;
	g->depth = (uint16_t)(parent->depth + 1);
	g->ctx = ctx;
	g->reclaim_fn = ops ? ops->reclaim : NULL;
	store_limits(g, lim);

	pthread_mutex_lock(&t->lock);
	if (hash_find(t, parent, g->name, len)) {
		rc = -EEXIST;
	} else {
		g->magic = SL__GROUP_MAGIC;
		g->next_sibling = parent->first_child;
		if (parent->first_child)
			parent->first_child->prev_sibling = g;
		parent->first_child = g;
		parent->nr_children++;
		t->nr_groups++;
		hash_insert(t, g);
		hash_grow(t);
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
	int rc = 0;

	if (!sl__group_valid(g) || !g->parent)
		return -EINVAL;
	/* A reclaim holds pointers to groups while its callbacks run; one of
	 * those callbacks must not free them under it. */
	t = g->tree;
	if (sl__tls_reclaim_owner || sl__tls_walk_tree == t)
		return -EBUSY;
	pthread_mutex_lock(&t->reclaim_lock);
	pthread_mutex_lock(&t->lock);
	if (g->nr_children) {
		rc = -EBUSY;
		goto out;
	}
	/* Give the stocks' units back and fold their ledgers into local, so
	 * that count and local say exactly what the host still holds. */
	sl__stock_drain(g, SL__DRAIN_GROUP);
	sl__stock_quiesce();
	if (sl__load(&g->local, SL_RELAXED) || sl__load(&g->count, SL_RELAXED)) {
		rc = -EBUSY;
		goto out;
	}
	if (g->prev_sibling)
		g->prev_sibling->next_sibling = g->next_sibling;
	else
		g->parent->first_child = g->next_sibling;
	if (g->next_sibling)
		g->next_sibling->prev_sibling = g->prev_sibling;
	g->parent->nr_children--;
	hash_remove(t, g);
	t->nr_groups--;
	sl__over_forget(g);
	g->magic = SL__GROUP_DEAD;
out:
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_unlock(&t->reclaim_lock);
	if (rc == 0)
		free(g);
	return rc;
}

int sl_group_set_limits(sl_group *g, const struct sl_limits *lim)
{
	if (!sl__group_valid(g) || !lim || !sl__limits_valid(lim))
		return -EINVAL;
	store_limits(g, lim);
	/* A lower soft limit may put the group over it: index it now. */
	sl__over_check(g, sl__load(&g->count, SL_RELAXED));
	return sl__shrink_to_max(g);
}

int sl_group_limits(sl_group *g, struct sl_limits *out)
{
	if (!sl__group_valid(g) || !out)
		return -EINVAL;
	out->min = sl__load(&g->min, SL_RELAXED);
	out->soft = sl__load(&g->soft, SL_RELAXED);
	out->high = sl__load(&g->high, SL_RELAXED);
	out->max = sl__load(&g->max, SL_RELAXED);
	return 0;
}

const char *sl_group_name(sl_group *g)
{
	return sl__group_valid(g) ? g->name : NULL;
}

sl_group *sl_group_parent(sl_group *g)
{
	return sl__group_valid(g) ? g->parent : NULL;
}

void *sl_group_ctx(sl_group *g)
{
	return sl__group_valid(g) ? g->ctx : NULL;
}
