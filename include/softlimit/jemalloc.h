/* SPDX-License-Identifier: MIT */
/*
 * softlimit/jemalloc.h: a jemalloc arena bound to a softlimit group.
 *
 * The adapter (libsoftlimit-jemalloc, pkg-config module softlimit-jemalloc,
 * CMake target softlimit::softlimit_jemalloc) creates a group and a jemalloc
 * arena whose extent hooks charge the group for the pages the arena commits
 * and uncharge them when it decommits or unmaps them.  An allocation that
 * would take the group past its max fails cleanly (NULL) after the tree's
 * reclaim had its chance, instead of growing the process.
 *
 * What is charged: the arena's committed pages, in bytes: the pages of live
 * allocations (jemalloc's "active", including the slack of size classes and
 * slabs) plus the dirty and muzzy pages jemalloc keeps for reuse.  Retained
 * virtual memory (purged, not resident) is not charged.  jemalloc's metadata
 * for the arena (a few percent of it) is allocated outside the hooks and is
 * not charged.  Do not charge the group yourself: the hooks own its usage.
 *
 * Conventions: those of softlimit.h (0 or a negative errno).  Linking this
 * library links jemalloc, whose Debian build replaces malloc for the whole
 * process; the core libsoftlimit never links it.  Memory of an adapter comes
 * from sl_jemalloc_alloc() and goes back through sl_jemalloc_free(); the
 * arena's index is there for hosts that call mallocx() themselves
 * (MALLOCX_ARENA(sl_jemalloc_arena(a)) | MALLOCX_TCACHE_NONE), which then
 * get no reclaim before a NULL.
 */
#ifndef SOFTLIMIT_JEMALLOC_H
#define SOFTLIMIT_JEMALLOC_H

#include <stddef.h>
#include <stdint.h>

#include <softlimit/softlimit.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_jemalloc sl_jemalloc;

struct sl_jemalloc_ops {
	/*
	 * Free objects the host keeps in this arena worth about @target bytes,
	 * with sl_jemalloc_free(), and return the bytes freed.  Called by the
	 * group's reclaim after the arena's unused pages were purged and that
	 * freed too little; the adapter then purges again and reports how far
	 * the group's usage really fell.  Runs as an sl_ops reclaim callback
	 * (see sl_reclaim()): in the thread that charged or reclaimed, inside
	 * which charges never reclaim.  NULL: the host has nothing to evict.
	 */
	uint64_t (*evict)(sl_jemalloc *a, uint64_t target, void *ctx);
};

struct sl_jemalloc_stats {
	uint64_t charged;   /* bytes the hooks hold charged to the group: committed pages */
	uint64_t active;    /* jemalloc: pages of live allocations, in bytes (pactive)   */
	uint64_t dirty;     /* jemalloc: unused pages not yet purged (pdirty)            */
	uint64_t muzzy;     /* jemalloc: lazily purged pages (pmuzzy)                    */
	uint64_t retained;  /* jemalloc: virtual memory kept but decommitted: not charged */
	uint64_t allocated; /* jemalloc: bytes of live allocations (small + large)       */
};

/**
 * sl_jemalloc_create() - create a group below @parent and a jemalloc arena
 * bound to it.
 * @name, @lim: as sl_group_create(); the group's reclaim callback is the
 *        adapter's (purge the arena, then @ops->evict); its ctx, as
 *        sl_group_ctx() returns it, is the adapter.
 * @ops:  copied; NULL, or a NULL evict, means the host evicts nothing.
 * @ctx:  passed back to @ops->evict; sl_jemalloc_ctx() returns it.
 * @out:  receives the adapter.
 *
 * Errors: those of sl_group_create(); -ENOMEM when memory runs out or
 * jemalloc cannot create another arena (it has at most 4095); -ENOTSUP when
 * the jemalloc in the process answers none of the mallctl names the adapter
 * needs.  Nothing is left behind on failure.  Thread-safe.
 */
SL_API int sl_jemalloc_create(sl_group *parent, const char *name, const struct sl_limits *lim,
			      const struct sl_jemalloc_ops *ops, void *ctx, sl_jemalloc **out);

/**
 * sl_jemalloc_destroy() - destroy the arena (returning all its memory,
 * retained virtual memory included, to the system) and the group, and free
 * @a.  NULL is ignored (returns 0).
 *
 * Errors: -EBUSY while the arena still has live allocations, or the group
 * has children or charges other than the adapter's; nothing changes then.
 * -EBUSY too when the group is held (sl_group_hold()) or the call is made
 * inside a reclaim callback: then the arena is already destroyed and @a
 * lives on, to be destroyed by a later call (once released).
 * No other call may use @a concurrently or afterwards.
 */
SL_API int sl_jemalloc_destroy(sl_jemalloc *a);

/**
 * sl_jemalloc_alloc() - allocate @size bytes (0 is taken as 1) from @a's
 * arena, aligned as malloc() aligns, bypassing thread caches.
 *
 * When the arena needs pages and the group has no room, the hooks refuse
 * and the allocation makes room and is retried, for as long as a charge
 * would keep trying: while reclaim makes progress.  Each round either
 * charges the refused amount, held as a reservation of the calling thread
 * that only its retry consumes (what that did not use is uncharged), or
 * reclaims it from the group in the way (the tree's policy picks the
 * victims, which may be this very group: its reclaim purges the arena and
 * calls ops->evict, whose freed objects the retry may reuse).  It fails
 * only after rounds in a row without progress, as sl_charge() would, and
 * then as sl_charge() fails (an oom event, the tree's OOM handler).  An
 * allocation that could not fit even if reclaim freed all it may (larger
 * than the group's max or an ancestor's, or than what such a max leaves
 * beside memory no reclaim may take: sl_charge_can_fit()) makes no round
 * at all: it fails at once, as sl_charge() does, without purging the
 * arena or calling ops->evict (the OOM handler is still asked).  The
 * group's events_oom counts allocations that failed, one each: the hooks'
 * refused charges, and those between the tries, are SL_TRY.
 *
 * Returns the memory, or NULL with errno ENOMEM (the group or the system had
 * no room) or EINVAL (NULL @a).  Thread-safe.  May call reclaim callbacks
 * as sl_charge() does; inside a reclaim callback it does not reclaim.
 */
SL_API void *sl_jemalloc_alloc(sl_jemalloc *a, size_t size);

/**
 * sl_jemalloc_free() - free @p, which came from sl_jemalloc_alloc() on @a.
 * NULL is ignored.  Pages that this frees become dirty: they stay charged
 * until jemalloc's decay, sl_jemalloc_purge() or reclaim purges them.
 * Thread-safe; may uncharge the group (never reclaims).
 */
SL_API void sl_jemalloc_free(sl_jemalloc *a, void *p);

/** sl_jemalloc_usable_size() - the usable size of @p (0 for NULL). */
SL_API size_t sl_jemalloc_usable_size(const void *p);

/** sl_jemalloc_group() - the group @a charges (NULL for NULL). */
SL_API sl_group *sl_jemalloc_group(sl_jemalloc *a);

/** sl_jemalloc_arena() - @a's jemalloc arena index (0 for NULL, never @a's). */
SL_API unsigned sl_jemalloc_arena(sl_jemalloc *a);

/** sl_jemalloc_ctx() - the ctx given to sl_jemalloc_create() (NULL for NULL). */
SL_API void *sl_jemalloc_ctx(sl_jemalloc *a);

/**
 * sl_jemalloc_purge() - purge all of the arena's unused (dirty and muzzy)
 * pages now, uncharging them.  Errors: -EINVAL for NULL; -EIO when jemalloc
 * refuses.  Thread-safe.
 */
SL_API int sl_jemalloc_purge(sl_jemalloc *a);

/**
 * sl_jemalloc_stats() - the adapter's charge and jemalloc's own counters of
 * the arena (refreshed through jemalloc's "epoch", which takes its global
 * statistics lock).  With no allocation in flight, charged equals active +
 * dirty + muzzy.  Errors: -EINVAL for NULL arguments; -ENOTSUP when jemalloc
 * was built without statistics (only charged is then filled in).
 * Thread-safe.
 */
SL_API int sl_jemalloc_stats(sl_jemalloc *a, struct sl_jemalloc_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* SOFTLIMIT_JEMALLOC_H */
