/* SPDX-License-Identifier: MIT */
/*
 * connmem.h: connection memory (read and write buffers, so partial
 * requests, half-received values and unsent answers) taken from a pool
 * that the "connections" group reserves under -m (connmem.c), so that
 * clients can neither take the server past its budget nor evict items.
 */
#ifndef SLCACHE_CONNMEM_H
#define SLCACHE_CONNMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <softlimit/softlimit.h>

#define CONNMEM_NAME "connections"

/**
 * connmem_start() - create the "connections" group, max opt.conn_memory,
 * and charge it whole: below the tree's root when there is one (the
 * tenants' items then have -m less the reservation), else the root of a
 * tree of its own (--no-accounting).  0, or -errno with a message on
 * stderr.
 */
int connmem_start(void);

/** Gives the reservation back and destroys the group; every connection
 * must be closed. */
void connmem_stop(void);

/*
 * Within the pool, each tenant has a share, as its items have under -m: a
 * buffer is charged to the tenant it serves (an answer to the tenant of its
 * key; a request or a value to the tenant of its key once the key, or its
 * prefix, is read), and what is read before any key, or answered for no
 * key (stats), to an anonymous owner.  A tenant may hold up to half the
 * pool (its max; or, if more, -I and 256 KiB, within the pool), and past
 * an eighth (its soft) not the pool's last quarter, which stays for the
 * tenants under theirs; the anonymous owner a quarter and a sixteenth.  So the clients of one tenant cannot take
 * the memory that another's requests need.
 */
struct cm_owner;

/** The owner of what serves @key (its tenant, which this may create, as
 * any request for it does); NULL @key: the anonymous owner.  @key may be a
 * key's beginning: its prefix and ':' are enough.  Never NULL. */
struct cm_owner *connmem_owner(const char *key, size_t keylen);

/* What one buffer holds, by owner: a buffer may serve several tenants (an
 * output buffer, the answers of a pipeline).  Past CM_HOLD_MAX owners, the
 * last one is charged for the others. */
#define CM_HOLD_MAX 4
struct cm_hold {
	struct cm_owner *o[CM_HOLD_MAX];
	size_t n[CM_HOLD_MAX];
};

/**
 * connmem_hold() - take @bytes of the pool for @o, recorded in @h.  False,
 * nothing taken, when @o's share or the pool has not that much left: the
 * caller waits, refuses or closes; nothing is ever reclaimed for it.  With
 * @past_max, @o's max does not count, its soft still does: for the few
 * bytes an event leaves in flight (a connection that reads is not closed
 * because others of its tenant hold its share).  Thread-safe, lock-free.
 */
bool connmem_hold(struct cm_hold *h, struct cm_owner *o, size_t bytes, bool past_max);
/** Gives back @bytes that connmem_hold() took for @o. */
void connmem_unhold(struct cm_hold *h, struct cm_owner *o, size_t bytes);
/** Gives back all that @h holds. */
void connmem_release(struct cm_hold *h);

/** Has the pool less than @bytes left? */
bool connmem_short(size_t bytes);
/** Could @bytes for @o ever fit (its max)?  Else it is not waited for. */
bool connmem_fits(const struct cm_owner *o, size_t bytes);

/** What buffers hold now, and the pool. */
uint64_t connmem_used(void);
uint64_t connmem_pool(void);

/** A connection starts (+1) or stops (-1) waiting for room in the pool;
 * connmem_contended() says whether any does, so that net.c closes the
 * connections that hold memory without reading their answers. */
void connmem_wait(int delta);
bool connmem_contended(void);

/** The subtree /metrics shows: the tree's root, or the connections' own tree. */
sl_group *connmem_scope(void);

#endif /* SLCACHE_CONNMEM_H */
