/* SPDX-License-Identifier: MIT */
/*
 * connmem.h: connection memory (read and write buffers, so half-received
 * values and unsent answers) charged to a "connections" group, so that
 * clients cannot take the server past its budget (connmem.c).
 */
#ifndef SLCACHE_CONNMEM_H
#define SLCACHE_CONNMEM_H

#include <stdbool.h>
#include <stddef.h>

#include <softlimit/softlimit.h>

#define CONNMEM_NAME "connections"

/**
 * connmem_start() - create the "connections" group, max opt.conn_memory:
 * below the tree's root when there is one (the tenants' items and the
 * connections then share -m), else the root of a tree of its own
 * (--no-accounting).  0, or -errno with a message on stderr.
 */
int connmem_start(void);

/** Destroys the group; every connection must be closed. */
void connmem_stop(void);

/**
 * connmem_charge() - charge @bytes more of connection memory, @flags as
 * sl_charge()'s (SL_FORCE for what must not fail, SL_NORECLAIM under a
 * lock).  False when the connections group (or the whole budget) has no
 * room.  Thread-safe.
 */
bool connmem_charge(size_t bytes, unsigned flags);
void connmem_uncharge(size_t bytes);

/** Is the connections group over its max (output was forced past it)? */
bool connmem_over(void);

/** The subtree /metrics shows: the tree's root, or the connections' own tree. */
sl_group *connmem_scope(void);

#endif /* SLCACHE_CONNMEM_H */
