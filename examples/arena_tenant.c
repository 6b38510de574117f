/* SPDX-License-Identifier: MIT */
/*
 * arena_tenant: a tenant whose values live in its own jemalloc arena while
 * its metadata (the index entries a cache keeps per item) is malloc()ed and
 * charged by hand, both under one limit.
 *
 *   root
 *   `-- tenant          max 2 MiB: values + metadata together
 *       |-- (own charges)  metadata: sl_charge() per index entry
 *       `-- values      a group made by sl_jemalloc_create(): the arena's
 *                       committed pages, charged by the adapter's hooks
 *
 * When the tenant is full, a charge (of either kind) reclaims from the
 * tenant's subtree: the values group's reclaim purges its arena and then
 * calls our evict hook; the tenant's own reclaim callback evicts too.  Both
 * evict whole items (value and metadata), oldest first, so neither part
 * outlives the other.
 *
 * Build: cc -std=c11 arena_tenant.c $(pkg-config --cflags --libs softlimit-jemalloc)
 * (linking the adapter links jemalloc, which replaces malloc process-wide).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softlimit/jemalloc.h>
#include <softlimit/softlimit.h>

#define KiB ((uint64_t)1024)

struct entry {               /* metadata: charged to the tenant by hand */
	struct entry *next;  /* FIFO: oldest at the head */
	void *value;         /* in the tenant's arena */
	size_t size;
};

struct cache {
	sl_group *tenant;
	sl_jemalloc *values;
	struct entry *head, **tail;
	uint64_t items, evicted;
};

/* Evict the oldest items until about @target bytes were given back.  Both
 * parts of an item go: its value to the arena (uncharged when its pages are
 * purged) and its entry (uncharged here). */
static uint64_t evict_items(struct cache *c, uint64_t target)
{
	uint64_t freed = 0;

	while (freed < target && c->head) {
		struct entry *e = c->head;

		c->head = e->next;
		if (!c->head)
			c->tail = &c->head;
		freed += sl_jemalloc_usable_size(e->value) + sizeof(*e);
		sl_jemalloc_free(c->values, e->value);
		free(e);
		sl_uncharge(c->tenant, sizeof(*e));
		c->items--;
		c->evicted++;
	}
	return freed;
}

/* The values group's hook: its arena was purged and that was not enough. */
static uint64_t evict_values(sl_jemalloc *a, uint64_t target, void *ctx)
{
	(void)a;
	return evict_items(ctx, target);
}

/* The tenant's own reclaim callback: what is charged to it directly is
 * metadata, which goes with its items. */
static uint64_t evict_meta(sl_group *g, uint64_t target, void *ctx)
{
	(void)g;
	return evict_items(ctx, target);
}

static int set(struct cache *c, size_t size)
{
	/* Metadata first: charge it, then allocate it. */
	int rc = sl_charge(c->tenant, sizeof(struct entry), 0);
	if (rc != 0)
		return rc;
	struct entry *e = malloc(sizeof(*e));
	/* The value: the arena's hooks charge its pages; NULL means the
	 * values group could not make room even after reclaim. */
	void *v = e ? sl_jemalloc_alloc(c->values, size) : NULL;
	if (!v) {
		free(e);
		sl_uncharge(c->tenant, sizeof(struct entry));
		return -1;
	}
	memset(v, 'x', size);
	e->value = v;
	e->size = size;
	e->next = NULL;
	*c->tail = e;
	c->tail = &e->next;
	c->items++;
	return 0;
}

int main(void)
{
	struct cache c = { .tail = &c.head };
	sl_tree *tree;
	struct sl_limits lim;

	if (sl_tree_create(NULL, &tree) != 0)
		return 1;
	sl_limits_init(&lim);
	lim.max = 2048 * KiB;
	const struct sl_ops meta_ops = { .reclaim = evict_meta };
	if (sl_group_create(sl_tree_root(tree), "tenant", &lim, &meta_ops, &c, &c.tenant) != 0)
		return 1;
	const struct sl_jemalloc_ops value_ops = { .evict = evict_values };
	if (sl_jemalloc_create(c.tenant, "values", NULL, &value_ops, &c, &c.values) != 0) {
		fprintf(stderr, "arena_tenant: no jemalloc arena (is jemalloc the allocator?)\n");
		return 1;
	}

	int failed = 0;
	for (int i = 0; i < 20000; i++)
		if (set(&c, 64 + (size_t)(i % 16) * 64) != 0)
			failed++;

	struct sl_stats all, values;
	struct sl_jemalloc_stats js;
	sl_group_stats(c.tenant, &all);
	sl_group_stats(sl_jemalloc_group(c.values), &values);
	sl_jemalloc_stats(c.values, &js);
	printf("items kept %" PRIu64 ", evicted %" PRIu64 ", failed sets %d\n", c.items, c.evicted, failed);
	printf("tenant usage %" PRIu64 " KiB of max %" PRIu64 " KiB: values (arena pages) %" PRIu64
	       " KiB, metadata %" PRIu64 " KiB\n",
	       all.usage / KiB, all.limits.max / KiB, values.usage / KiB, (all.usage - values.usage) / KiB);
	printf("arena: %" PRIu64 " KiB in live allocations, %" PRIu64 " KiB dirty\n", js.allocated / KiB,
	       js.dirty / KiB);

	evict_items(&c, UINT64_MAX);
	if (sl_jemalloc_destroy(c.values) != 0)
		return 1;
	sl_tree_destroy(tree);
	return failed == 0 && all.usage <= all.limits.max ? 0 : 1;
}
