/* SPDX-License-Identifier: MIT */
/*
 * Group objects and the tree's topology: validity, ancestry, allocation,
 * the name hash, and the per-thread record of walks in progress.  Nothing
 * here takes a lock; callers that change the topology hold the tree's.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct sl_group) <= 256, "a group must fit in 256 bytes plus its name");
_Static_assert(offsetof(struct sl_group, name) <= 256 - 24, "room for a 23-byte name in 256 bytes");
_Static_assert(SL_DEPTH_MAX <= UINT16_MAX && SL_NAME_MAX <= UINT16_MAX, "depth and name_len are 16-bit");

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

/* The limits of a group no other thread sees yet (a changed limit takes
 * sl__counter_set_limits()).  Relaxed: publishing the group orders them. */
void sl__store_limits(sl_group *g, const struct sl_limits *lim)
{
	sl__store(&g->min, lim->min, SL_RELAXED);
	sl__store(&g->soft, lim->soft, SL_RELAXED);
	sl__store(&g->high, lim->high, SL_RELAXED);
	sl__store(&g->max, lim->max, SL_RELAXED);
}

/* size rounded up to whole cache lines. */
static size_t lines(size_t size)
{
	return (size + SL__CACHELINE - 1) & ~(size_t)(SL__CACHELINE - 1);
}

/* Bytes from a group's start to the end of its name's cache line. */
static size_t name_end(size_t len)
{
	return lines(offsetof(struct sl_group, name) + len + 1);
}

sl_group *sl__group_alloc(const char *name, size_t len, bool prot)
{
	/* The name lives in the group's last cache line while it fits; the
	 * refault counts follow it on a line of their own (written by
	 * sl_refault() and reclaim), then, in a PROTECTION tree, the
	 * protected usages on another (chargers write them). */
	size_t at = name_end(len) + lines(sizeof(struct sl__refault));
	size_t size = at + (prot ? lines(sizeof(struct sl__prot)) : 0);
	sl_group *g;

	g = sl__aligned_alloc(SL__CACHELINE, size);
	if (!g)
		return NULL;
	memset(g, 0, sizeof(*g));
	memset((char *)g + name_end(len), 0, sizeof(struct sl__refault));
	if (prot) {
		g->prot = (struct sl__prot *)((char *)g + at);
		memset(g->prot, 0, sizeof(*g->prot));
	}
	memcpy(g->name, name, len);
	g->name[len] = '\0';
	g->name_len = (uint16_t)len;
	return g;
}

struct sl__refault *sl__refault_of(const sl_group *g)
{
	return (struct sl__refault *)((char *)g + name_end(g->name_len));
}

/* ---- the name hash: (parent, name) -> group ---- */

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

static sl_group **bucket_of(const sl_tree *t, const sl_group *parent, const char *name, size_t len,
			    size_t mask)
{
	return &t->hash[name_hash(parent, name, len) & mask];
}

int sl__hash_init(sl_tree *t)
{
	t->hash = sl__calloc(16, sizeof(*t->hash));
	t->hash_mask = 15;
	return t->hash ? 0 : -ENOMEM;
}

/* Caller holds the tree's lock. */
sl_group *sl__child_find(const sl_group *parent, const char *name, size_t len)
{
	const sl_tree *t = parent->tree;
	sl_group *g = *bucket_of(t, parent, name, len, t->hash_mask);

	for (; g; g = g->hnext)
		if (g->parent == parent && g->name_len == len && memcmp(g->name, name, len) == 0)
			return g;
	return NULL;
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

/* Caller holds the tree's lock and counted g in nr_groups. */
void sl__hash_insert(sl_tree *t, sl_group *g)
{
	sl_group **b = bucket_of(t, g->parent, g->name, g->name_len, t->hash_mask);

	g->hnext = *b;
	*b = g;
	hash_grow(t);
}

/* Caller holds the tree's lock. */
void sl__hash_remove(sl_tree *t, sl_group *g)
{
	sl_group **pp = bucket_of(t, g->parent, g->name, g->name_len, t->hash_mask);

	while (*pp != g)
		pp = &(*pp)->hnext;
	*pp = g->hnext;
}

/* ---- walks in progress on this thread ---- */

static _Thread_local struct sl__walk_frame *tls_walks;

bool sl__walking(const sl_tree *t)
{
	const struct sl__walk_frame *f;

	for (f = tls_walks; f; f = f->prev)
		if (f->t == t)
			return true;
	return false;
}

void sl__walk_enter(struct sl__walk_frame *f, const sl_tree *t)
{
	f->t = t;
	f->prev = tls_walks;
	tls_walks = f;
}

void sl__walk_leave(struct sl__walk_frame *f)
{
	tls_walks = f->prev;
}
