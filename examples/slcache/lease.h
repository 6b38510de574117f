/* SPDX-License-Identifier: MIT */
/*
 * lease.h: --lease-store, a tenant's budget shared with other slcache
 * processes (shm:NAME) or nodes (etcd://...) through libsoftlimit-lease
 * (lease.c).  Without --lease-store every function here does nothing.
 */
#ifndef SLCACHE_LEASE_H
#define SLCACHE_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lru_cache.h"

/* A tenant's lease, for stats and metrics. */
struct tenant_lease {
	bool on;              /* the tenant holds a lease                      */
	uint64_t share;       /* its share now: the group's local max          */
	uint64_t floor;       /* what it falls to without the store            */
	uint64_t demand;      /* what it last asked for                        */
	int64_t expires_ms;   /* until its own view of the lease ends (<0 ended) */
	const char *state;    /* "joining", "held", "fenced", ...              */
	uint64_t fences;      /* times it fell to its floor                    */
};

/**
 * lease_start() - with --lease-store: open the store, join the budgets of
 * the tenants that exist (declared by --tenant, and "default"), and start
 * the lease thread (sl_lease_run()) and the watcher (new budgets, log
 * lines).  Called by tenants_start() once the tenants are there.  0, or
 * -errno with a message on stderr.
 */
int lease_start(void);

/** Stops both threads; every lease leaves and the tenants' limits are
 * restored.  Before the groups go.  Nothing without lease_start(). */
void lease_stop(void);

/**
 * lease_tenant_created() - @t was just created on first use (a request's
 * key prefix), not yet published: if a budget has its name, the watcher
 * thread joins it deferred (@t then holds nothing until the lease thread
 * has registered it, then its floor until its first grant), and @t's
 * writes wait for its share (lease_write_wait()).  Called under the tenant
 * table's lock; calls nothing of the library, so never waits on the store.
 */
void lease_tenant_created(struct lru_tenant *t);

/**
 * lease_write_wait() - may a write that takes memory for @t run now?  A
 * tenant of lease_tenant_created() is starting until its share is known
 * (its lease registered and its share computed by the store once); its
 * writes wait, at most --lease-wait ms from *@since_ms, which the first
 * call that waits sets (the caller keeps it per request, 0 at first).
 * 0: go on (then the usual limits apply); -EAGAIN: ask again later (the
 * caller parks the request, never its thread); -ETIMEDOUT: the wait ran
 * out (answer an error naming the lease store).  Reads the lease's figures
 * only: never waits on the store.
 */
int lease_write_wait(struct lru_tenant *t, int64_t *since_ms);

/** @t's lease figures into *@out (out->on false when it holds none). */
void lease_tenant(struct lru_tenant *t, struct tenant_lease *out);

/**
 * lease_metrics() - the OpenMetrics families of the leases (share, floor,
 * demand, usage, expiry, renewals, store errors, fences, store resets),
 * inserted before the final "# EOF" of the exposition in *@buf (*@len
 * bytes, malloc'd; reallocated).  0, or -ENOMEM leaving *@buf as it was.
 */
int lease_metrics(char **buf, size_t *len);

#endif /* SLCACHE_LEASE_H */
