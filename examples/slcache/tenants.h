/* SPDX-License-Identifier: MIT */
/*
 * tenants.h: slcache's softlimit integration (tenants.c).  A tenant is the
 * key prefix before the first ':' (other keys belong to "default"); each is
 * an lru_cache tenant, so an sl_group below the root, whose max is -m.
 */
#ifndef SLCACHE_TENANTS_H
#define SLCACHE_TENANTS_H

#include <stdatomic.h>
#include <stdint.h>

#include "lease.h"
#include "lru_cache.h"

#define TENANT_DEFAULT "default"

struct tenant_stats {
	uint64_t items, bytes; /* bytes: sum of lru_item_size() of the items     */
	uint64_t hits, misses, evictions;
	uint64_t refaults; /* misses of keys evicted lately (--ghosts)       */
	uint64_t usage, soft, max; /* the group's (accounting mode)                */
	uint64_t events_low, events_high, events_max, events_oom;
	struct tenant_lease lease; /* --lease-store (lease.h)                    */
};

typedef void (*tenant_stats_fn)(void *arg, const char *name, const struct tenant_stats *st);

/**
 * tenants_start() - build the cache: the softlimit tree (opt.policy, root
 * max opt.max_bytes) or, without accounting, one shared LRU; then the
 * tenants of --tenant and "default".  @live is storage's check of an item
 * (expiry, flush_all), installed in the cache.  0, or -errno with a message
 * on stderr.
 */
int tenants_start(bool (*live)(void *ctx, const struct lru_meta *m));
void tenants_stop(void);

/** The tenant of @key: created on first use; "default" when the prefix is
 * not a valid name or --max-tenants are taken.  Never NULL once started. */
struct lru_tenant *tenant_for_key(const char *key, size_t keylen);

/** Where @t's delayed flush_all keeps its deadline (unix time; 0, none):
 * storage.c's, for flush_all on a connection bound to @t. */
_Atomic int64_t *tenant_flush_at(struct lru_tenant *t);

/** Calls @fn for every tenant, oldest first. */
void tenants_each(void (*fn)(struct lru_tenant *t, void *arg), void *arg);

void tenants_stats(tenant_stats_fn fn, void *arg);
/* The number of tenants, and @fn on the tenant numbered @i (in creation
 * order; nothing if there is none): a stats answer made in parts. */
unsigned tenants_count(void);
void tenants_stat_one(unsigned i, tenant_stats_fn fn, void *arg);
void tenants_totals(struct tenant_stats *out);

/** "jemalloc", "malloc" or "shared-lru". */
const char *tenants_backend(void);

/** The whole budget (cache_memlimit), live: the root's max, or the shared
 * LRU's capacity.  0 or -errno. */
int tenants_set_budget(uint64_t bytes);
uint64_t tenants_budget(void);

/** The softlimit tree's root (the whole server's budget), or NULL without
 * accounting. */
sl_group *tenants_root(void);

#endif /* SLCACHE_TENANTS_H */
