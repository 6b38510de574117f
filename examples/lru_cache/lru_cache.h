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
 * gives memory back: the soft limits do.  (An item's header is 80 bytes,
 * so a 4000-byte value with a short key still fits a 4 KiB size class.)
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

#include <stdbool.h>
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
	uint64_t refaults;  /* counted misses of keys a ghost remembered (refaults)   */
	uint64_t refault_bytes; /* the evicted charges of those keys                 */
	uint64_t ghosts;    /* ghosts kept now (each charged LRU_GHOST_SIZE)          */
	uint64_t evicted_bytes; /* what the evicted items were charged                */
	uint64_t set_fail_bytes; /* what the items of failed sets would have been charged */
};

/** What one ghost (an evicted key remembered) is charged to its tenant:
 * its 80 bytes and an allocator's header. */
#define LRU_GHOST_SIZE 96

/**
 * struct lru_meta - what an item carries besides its key and value, for
 * hosts that need more than a plain cache (a memcached-style server keeps
 * its flags, expiry time and CAS unique here).  The cache reads only @cas
 * (and hands the rest to lru_hooks.live); the other fields are the host's.
 */
struct lru_meta {
	uint64_t cas;     /* the cache's: a new unique value at every store, never 0 */
	uint32_t exptime; /* the host's (e.g. expiry, unix seconds, 0 = never)       */
	uint32_t stored;  /* the host's (e.g. when the item was stored)              */
	uint32_t atime;   /* the host's (e.g. when it was last read)                 */
	uint32_t flags;   /* the host's (e.g. memcached's client flags)              */
	uint32_t bits;    /* the host's (e.g. "fetched")                             */
};

/**
 * struct lru_hooks - optional host hooks, set with lru_cache_set_hooks().
 * Every member may be NULL.
 *
 * @live:   false when an item is dead for the host (expired, flushed): the
 *          cache then treats it as absent and frees it when it meets it.
 *          Called under the tenant's lock: read @m, nothing else.
 * @group_create: create tenant @t's group below @parent with @name and
 *          @lim, whose reclaim ends in lru_tenant_evict(@t, ...), and store
 *          what the host needs for @t in *@data (lru_tenant_data()).  NULL:
 *          sl_group_create() with the cache's own reclaim callback.
 * @group_destroy: undo @group_create once @t holds no item; 0 or -errno.
 * @alloc, @free: item memory of @t, @alloc charging @t's group itself (an
 *          arena bound to the group); NULL: malloc() and sl_charge().  Both
 *          or neither.  @alloc may reclaim: it is called with no lock held.
 * @charged: what freeing item @p of @size bytes gives back to the group
 *          (its usable size in an arena); NULL: @size.
 * Accounted caches only: a shared cache uses @live and nothing else.
 */
struct lru_hooks {
	bool (*live)(void *ctx, const struct lru_meta *m);
	int (*group_create)(void *ctx, struct lru_tenant *t, sl_group *parent, const char *name,
			    const struct sl_limits *lim, void **data, sl_group **group);
	int (*group_destroy)(void *ctx, struct lru_tenant *t, void *data);
	void *(*alloc)(void *ctx, struct lru_tenant *t, size_t size);
	void (*free)(void *ctx, struct lru_tenant *t, void *p);
	uint64_t (*charged)(void *ctx, const void *p, size_t size);
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
 * lru_cache_set_hooks() - install @hooks (copied) with @ctx, passed back to
 * each.  Errors: -EINVAL for a NULL @c or @hooks, or only one of alloc and
 * free; -EBUSY once the cache has a tenant.
 */
int lru_cache_set_hooks(struct lru_cache *c, const struct lru_hooks *hooks, void *ctx);

/**
 * lru_cache_set_capacity() - a shared cache's new capacity in bytes,
 * evicting down to it at once.  Errors: -EINVAL for NULL @c, a zero
 * @capacity or an accounted cache (change the root's max there).
 */
int lru_cache_set_capacity(struct lru_cache *c, uint64_t capacity);

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

/** lru_tenant_data() - what lru_hooks.group_create stored for @t (NULL if none). */
void *lru_tenant_data(struct lru_tenant *t);

/**
 * lru_tenant_evict() - evict @t's least recently used items until they
 * give back at least @target bytes or @t is empty; returns the bytes given
 * back.  This is @t's reclaim callback; hosts whose reclaim goes through an
 * arena (lru_hooks.group_create) end theirs here.  Takes @t's lock:
 * thread-safe, but not to be called holding a tenant lock.
 */
uint64_t lru_tenant_evict(struct lru_tenant *t, uint64_t target);

/**
 * lru_tenant_set_ghosts() - remember what reclaim evicts from @t, for
 * refault reports: a "ghost" (the key's hash, the item's charge and its
 * lru_meta; no value) per evicted item, the newest first, while their
 * charges sum to at most @reach bytes (0, the default: none; a lower
 * @reach forgets the oldest at once).  A counted miss (lru_get(),
 * lru_visit() without LRU_VISIT_NOSTATS) of a remembered key is a refault
 * unless lru_hooks.live says its remembered item would be dead by now
 * (expired): the ghost is dropped, the tenant's refaults and
 * refault_bytes grow, and the cache calls sl_refault(group, 1) (which
 * SL_POLICY_REFAULT ranks reclaim by).  A store of the key drops its
 * ghost.  Each ghost is charged
 * LRU_GHOST_SIZE bytes to @t's group with SL_NORECLAIM, like an item;
 * one that does not fit is not kept.  Give every tenant the same @reach so
 * that their refault rates compare.
 *
 * Errors: -EINVAL for a NULL @t; -EOPNOTSUPP in shared mode (nothing to
 * report to).  Thread-safe.
 */
int lru_tenant_set_ghosts(struct lru_tenant *t, uint64_t reach);

/**
 * lru_tenant_clear() - drop every item and ghost of @t (not counted as
 * evictions).
 * NULL is ignored.  Thread-safe.
 */
void lru_tenant_clear(struct lru_tenant *t);

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

/** Conditions for lru_store(). */
enum lru_cond {
	LRU_ALWAYS,     /* store, replacing any older value                         */
	LRU_IF_ABSENT,  /* only if no live item has @key: else -EEXIST (and the
	                 * existing item moves to the front, as memcached's add)   */
	LRU_IF_PRESENT, /* only if a live item has @key: else -ENOENT               */
	LRU_IF_CAS,     /* only if the live item's cas is @meta->cas: -ENOENT when
	                 * there is none, -EEXIST when its cas differs              */
};

/**
 * lru_store() - lru_set() with metadata and a condition.
 * @meta: the new item's host fields (NULL: all 0); with LRU_IF_CAS,
 *        @meta->cas is the cas expected.
 * @cas:  if not NULL, receives the stored item's new cas.
 *
 * The item is allocated and charged before the condition is checked under
 * @t's lock (the check cannot wait for reclaim); when the condition fails,
 * it is uncharged and freed and nothing changed.  Returns 0, -EEXIST or
 * -ENOENT as @cond says, or what lru_set() returns.  Thread-safe.
 */
int lru_store(struct lru_tenant *t, const void *key, size_t keylen, const void *value,
	      size_t vlen, const struct lru_meta *meta, enum lru_cond cond, uint64_t *cas);

/**
 * lru_tenant_oldest() - the host fields of @t's least recently used item
 * (in shared mode: the cache's) into *@out, say to tell how long the
 * coldest memory has gone untouched.  Returns 0, -ENOENT when there is no
 * item, -EINVAL for NULL arguments.  Thread-safe.
 */
int lru_tenant_oldest(struct lru_tenant *t, struct lru_meta *out);

/**
 * lru_tenant_note_reuse() - the host saw @bytes of @t read again after
 * sitting idle @idle (its own unit, say ms): adds @bytes * @idle to @t's
 * reuse sum (saturating) and keeps the largest @idle.  Call it only from an
 * lru_visit() callback on @t (its lock is held).  A lease host's demand
 * hook reports the sum (softlimit/lease.h, struct sl_lease_demand).
 */
void lru_tenant_note_reuse(struct lru_tenant *t, uint64_t bytes, uint64_t idle);

/**
 * lru_tenant_take_reuse() - the sum and the largest idle noted since the
 * last take into *@reused and *@max_idle, and start again from 0.  Returns
 * 0, or -EINVAL for NULL arguments.  Thread-safe.
 */
int lru_tenant_take_reuse(struct lru_tenant *t, uint64_t *reused, uint64_t *max_idle);

/** Flags of lru_visit(). */
enum { LRU_VISIT_NOSTATS = 1u << 0 }; /* count neither a hit nor a miss */

/**
 * lru_visit() - call @fn on the live item under @key, under @t's lock, and
 * move it to the front of the LRU.  @fn may change the host's fields of
 * @meta (not its cas); it must copy what it keeps, and neither block nor
 * call into the cache.  Counts a hit or a miss unless LRU_VISIT_NOSTATS.
 * Returns 0, -ENOENT when there is no live item, -EINVAL as lru_get().
 */
typedef void (*lru_visit_fn)(void *arg, struct lru_meta *meta, const void *value, size_t vlen);
int lru_visit(struct lru_tenant *t, const void *key, size_t keylen, unsigned flags,
	      lru_visit_fn fn, void *arg);

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
 * lru_delete_cas() - lru_delete() only if the live item's cas is @cas
 * (0: whatever it is).  Returns 0, -ENOENT, -EEXIST when the cas differs,
 * -EINVAL.  Thread-safe.
 */
int lru_delete_cas(struct lru_tenant *t, const void *key, size_t keylen, uint64_t cas);

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
