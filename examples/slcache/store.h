/* SPDX-License-Identifier: MIT */
/*
 * store: slcache's item store, a multi-tenant LRU over a softlimit tree.
 *
 * The same design as examples/lru_cache (a tenant is an sl_group, eviction
 * is its reclaim callback, nothing is allocated under a tenant lock), with
 * what the memcached protocol needs on top: flags, expiry, cas uniques,
 * conditional stores, append/prepend, incr/decr, touch and flush_all.
 *
 * Items are allocated by two functions only (item_alloc/item_free in
 * store.c).  With the jemalloc adapter (SLCACHE_JEMALLOC), each tenant owns
 * an sl_jemalloc arena and the arena's hooks charge the tenant's group for
 * the pages it commits; without it items come from malloc() and the store
 * charges each item's size with sl_charge().  Without accounting
 * (store_opts.accounting false) every tenant shares one lock and one LRU
 * list holding at most max_bytes: a plain memcached-style cache.
 *
 * Every function is thread-safe.  No thread holds two tenant locks, and
 * nothing that may reclaim runs under one.
 */
#ifndef SLCACHE_STORE_H
#define SLCACHE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <softlimit/softlimit.h>

struct store;
struct tenant;

#define STORE_KEY_MAX 250
#define STORE_DEFAULT_TENANT "default"

struct store_opts {
	enum sl_policy policy;
	uint64_t max_bytes;   /* the root's max: the whole budget                  */
	bool accounting;      /* false: one shared LRU of max_bytes, no softlimit */
	bool arenas;          /* with accounting: a jemalloc arena per tenant when
	                       * jemalloc is there; false: malloc + sl_charge     */
	size_t item_max;      /* largest value, in bytes                           */
	unsigned max_tenants; /* tenants beyond this share the default tenant      */
};

enum store_result {
	ST_STORED,
	ST_NOT_STORED,
	ST_EXISTS,
	ST_NOT_FOUND,
	ST_DELETED,
	ST_TOUCHED,
	ST_OK,
	ST_NOMEM,      /* SERVER_ERROR out of memory storing object          */
	ST_TOO_LARGE,  /* SERVER_ERROR object too large for cache            */
	ST_NON_NUMERIC /* incr/decr on a value that is not a decimal number */
};

enum store_mode { SM_SET, SM_ADD, SM_REPLACE, SM_APPEND, SM_PREPEND, SM_CAS };

struct tenant_stats {
	uint64_t items, bytes; /* bytes: sum of item sizes (header + key + value) */
	uint64_t hits, misses, evictions;
	uint64_t usage, soft, max;      /* the group's (accounting mode)   */
	uint64_t events_low, events_high, events_max, events_oom;
};

/* Receives one hit of store_get(), called under the tenant's lock: copy, do not block. */
typedef void (*store_emit_fn)(void *arg, const char *key, size_t keylen, uint32_t flags,
			      const void *value, size_t vlen, uint64_t cas);
/* Receives each tenant for store_tenant_stats(). */
typedef void (*store_tenant_fn)(void *arg, const char *name, const struct tenant_stats *st);

/** Backend name for stats and logs: "jemalloc", "malloc" or "shared-lru". */
const char *store_backend(const struct store *s);

int store_create(const struct store_opts *opts, struct store **out);
void store_destroy(struct store *s);

/** Declare a tenant with limits (before serving; -EEXIST if it exists already). */
int store_tenant_declare(struct store *s, const char *name, const struct sl_limits *lim);

/** The tenant that owns @key: its prefix before ':', else the default tenant.
 * Creates it on first use; falls back to the default tenant when the prefix
 * is not a valid name or max_tenants are taken.  Never NULL after create. */
struct tenant *store_tenant_for_key(struct store *s, const char *key, size_t keylen);

/** Calls @emit for a live item under @key; returns ST_OK or ST_NOT_FOUND. */
enum store_result store_get(struct tenant *t, const char *key, size_t keylen, store_emit_fn emit,
			    void *arg);

enum store_result store_update(struct tenant *t, enum store_mode mode, const char *key,
			       size_t keylen, uint32_t flags, int64_t exptime, const void *data,
			       size_t vlen, uint64_t cas);

enum store_result store_delete(struct tenant *t, const char *key, size_t keylen);

/** incr/decr: ST_OK with the new value in *out, ST_NOT_FOUND, ST_NON_NUMERIC or ST_NOMEM. */
enum store_result store_arith(struct tenant *t, const char *key, size_t keylen, bool incr,
			      uint64_t delta, uint64_t *out);

enum store_result store_touch(struct tenant *t, const char *key, size_t keylen, int64_t exptime);

/** flush_all: @delay <= 0 drops every item now; else items stored before now + delay
 * become invisible at that time. */
void store_flush(struct store *s, int64_t delay);

/** Totals over every tenant. */
void store_totals(struct store *s, struct tenant_stats *out);
void store_tenant_stats(struct store *s, store_tenant_fn fn, void *arg);

#endif /* SLCACHE_STORE_H */
