/* SPDX-License-Identifier: MIT */
/*
 * lru_cache: a small multi-tenant LRU cache, the canonical softlimit host.
 *
 * A cache holds tenants arranged in a tree (the process, then customers,
 * then their namespaces).  Each tenant is one sl_group.  Storing an item
 * charges its tenant sizeof(item) + key + value bytes; when a charge would
 * pass some max, softlimit picks the victims by the tree's policy and calls
 * the victim tenant's reclaim callback, which evicts that tenant's least
 * recently used items and uncharges them.  So the cache never decides who
 * gives memory back: the soft limits do.
 *
 * For comparison, lru_cache_create_shared() builds the same cache without
 * accounting: one global LRU list over every tenant and a fixed capacity,
 * the way a plain memcached evicts.  Tenants then exist only for stats.
 * (Static partitioning needs no mode of its own: give every tenant a max
 * and soft 0.)
 *
 * Conventions: functions that can fail return 0 or a negative errno value,
 * as softlimit does.  Every function is thread-safe unless it says
 * otherwise; a tenant's items are guarded by one mutex per tenant (one
 * mutex for the whole cache in shared mode), and no thread ever holds two
 * of them.
 */
#ifndef LRU_CACHE_H
#define LRU_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <softlimit/softlimit.h>

#ifdef __cplusplus
extern "C" {
#endif

struct lru_cache;
struct lru_tenant;

/** Longest key, in bytes (memcached's limit). */
#define LRU_KEY_MAX 250
/** Largest value, in bytes. */
#define LRU_VALUE_MAX ((size_t)1 << 30)

struct lru_stats {
	uint64_t items;     /* items stored now                                      */
	uint64_t bytes;     /* bytes charged for them: sum of lru_item_size()         */
	uint64_t hits;      /* lru_get() calls that found the key                     */
	uint64_t misses;    /* lru_get() calls that did not                           */
	uint64_t sets;      /* lru_set() calls that stored their item                 */
	uint64_t set_fails; /* lru_set() calls that failed with -ENOMEM               */
	uint64_t evictions; /* items evicted (by reclaim, or by the shared LRU)       */
};

/**
 * lru_cache_create() - a cache accounted by softlimit.
 * @opts: the tree's policy, batch and root limits; root.max is the cache's
 *        whole budget in bytes.  NULL means sl_tree_opts_init()'s (no budget).
 * @out:  receives the cache.
 *
 * Errors: -EINVAL for a NULL @out or options sl_tree_create() refuses;
 * -ENOMEM when memory runs out.  The caller owns the cache and frees it
 * with lru_cache_destroy().
 */
int lru_cache_create(const struct sl_tree_opts *opts, struct lru_cache **out);

/**
 * lru_cache_create_shared() - the unaccounted baseline: one LRU list shared
 * by every tenant, holding at most @capacity bytes (counted as in accounted
 * mode); a set that does not fit evicts the globally least recently used
 * items first, whoever owns them.  Tenants' limits are ignored and
 * lru_tenant_group() is NULL.
 *
 * Errors: -EINVAL for a NULL @out or a zero @capacity; -ENOMEM.
 */
int lru_cache_create_shared(uint64_t capacity, struct lru_cache **out);

/**
 * lru_cache_destroy() - free every tenant, item and the softlimit tree.
 * NULL is ignored.  No other call may use the cache concurrently or after.
 */
void lru_cache_destroy(struct lru_cache *c);

/**
 * lru_cache_tree() - the softlimit tree behind @c (NULL in shared mode):
 * for sl_group_dump(), sl_tree_check() or an OOM handler.  Valid while @c lives.
 */
sl_tree *lru_cache_tree(struct lru_cache *c);

/**
 * lru_tenant_create() - add a tenant: one sl_group whose reclaim callback
 * evicts the tenant's own LRU items.
 * @parent: the parent tenant, or NULL for a child of the root (the cache).
 *          Any tenant may both hold items and have children; a customer
 *          that only groups its namespaces simply stores nothing.
 * @name:   as sl_group_create(): 1..SL_NAME_MAX bytes, no '/', unique
 *          among its siblings.
 * @lim:    its limits; NULL means sl_limits_init()'s.  Ignored in shared mode.
 * @out:    receives the tenant, owned by the cache.
 *
 * Errors: -EINVAL for NULL @c, @name or @out, or what sl_group_create()
 * refuses (bad name, inconsistent limits, too deep); -EEXIST for a taken
 * name; -ENOMEM.  Thread-safe.
 */
int lru_tenant_create(struct lru_cache *c, struct lru_tenant *parent, const char *name,
		      const struct sl_limits *lim, struct lru_tenant **out);

/**
 * lru_tenant_destroy() - evict all of @t's items and remove it.
 *
 * Errors: -EINVAL for NULL; -EBUSY while @t has child tenants (nothing is
 * evicted then).  Other tenants may be used concurrently (their reclaim may
 * still visit @t until it is gone, which is safe), but no other call may
 * use @t itself concurrently or afterwards.
 */
int lru_tenant_destroy(struct lru_tenant *t);

/** lru_tenant_group() - @t's sl_group (NULL in shared mode or for a NULL @t). */
sl_group *lru_tenant_group(struct lru_tenant *t);

/** lru_tenant_name() - @t's name, valid while @t lives (NULL for a NULL @t). */
const char *lru_tenant_name(struct lru_tenant *t);

/**
 * lru_item_size() - the bytes an item with these key and value lengths is
 * charged: its header plus the key plus the value.
 */
uint64_t lru_item_size(size_t keylen, size_t vlen);

/**
 * lru_set() - store @value under @key in @t, replacing any older value.
 *
 * Charges @t lru_item_size(@keylen, @vlen) bytes with sl_charge(..., 0)
 * before taking @t's lock: when the charge does not fit, softlimit reclaims
 * in this thread, and that may evict from any tenant, @t included.  After
 * the item is in, if the charge went past some group's high, the cache
 * reclaims back to it (sl_handle_over_high()), outside every lock.
 *
 * Errors: -EINVAL for a NULL @t or @key, a @keylen of 0 or above
 * LRU_KEY_MAX, a NULL @value with a nonzero @vlen, or @vlen above
 * LRU_VALUE_MAX; -ENOMEM when the item does not fit even after reclaim (or
 * malloc fails): nothing changed then, and an older value under @key, if
 * still cached, is kept.
 * Thread-safe.  Must not be called while holding any lock that a reclaim
 * callback of the same tree could wait for.
 */
int lru_set(struct lru_tenant *t, const void *key, size_t keylen, const void *value, size_t vlen);

/**
 * lru_get() - look @key up in @t; a hit moves the item to the front of the LRU.
 * @buf, @size: receive the first min(@size, value length) bytes of the value
 *              (@buf may be NULL when @size is 0).
 * @vlen:       if not NULL, receives the full value length; a caller whose
 *              @buf was too small calls again with a larger one.
 *
 * Returns 0 on a hit, -ENOENT on a miss, -EINVAL for a NULL @t or @key, a
 * bad @keylen, or a NULL @buf with a nonzero @size.  The value is copied
 * under @t's lock, so it is never torn by a concurrent set or eviction.
 * Thread-safe.
 */
int lru_get(struct lru_tenant *t, const void *key, size_t keylen, void *buf, size_t size,
	    size_t *vlen);

/**
 * lru_delete() - remove @key from @t and uncharge it.
 * Returns 0, -ENOENT when it is not there, -EINVAL as lru_get().  Thread-safe.
 */
int lru_delete(struct lru_tenant *t, const void *key, size_t keylen);

/**
 * lru_tenant_stats() - copy @t's counters (its own items only, not its
 * children's) to @out, read at one instant under @t's lock.  When no set
 * or delete is in flight, @out->bytes equals sl_group_stats() usage of a
 * tenant without children.  Errors: -EINVAL for NULL arguments.
 */
int lru_tenant_stats(struct lru_tenant *t, struct lru_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* LRU_CACHE_H */
