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

/**
 * connmem_charge() - take @bytes of the pool.  False, nothing taken, when
 * the pool has not that much left: the caller waits, refuses or closes;
 * nothing is ever reclaimed for it.  Thread-safe, lock-free.
 */
bool connmem_charge(size_t bytes);
void connmem_uncharge(size_t bytes);

/** Has the pool less than @bytes left? */
bool connmem_short(size_t bytes);

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
