/* SPDX-License-Identifier: MIT */
/*
 * connmem.c: the memory a connection holds (partial requests, values being
 * received, answers the socket has not taken), taken from a pool reserved
 * under -m.
 *
 * Connection buffers used to be charged to the "connections" group as they
 * grew, with reclaim: a full cache then evicted the tenants' items to make
 * room for them, so a client that sent half lines or a multiget it never
 * read took items from every tenant (issue 27).  Now the group charges its
 * whole max (--conn-memory) once, at start: items and connections still
 * share -m, but the items never have that part, and a buffer never evicts
 * an item.  Buffers are counted against the reservation here; when it is
 * spent, a charge fails, and net.c stops reading from the client, makes it
 * wait for its socket to drain, or closes it.
 *
 * The group's usage in stats and /metrics is therefore the reservation;
 * what buffers hold right now is connmem_used() ("STAT conn_bytes").
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "connmem.h"
#include "slcache.h"
#include "tenants.h"

static struct {
	sl_tree *own;   /* without accounting: a tree just for the connections */
	sl_group *g;
	uint64_t pool;  /* charged to g once: what buffers may take            */
	_Atomic uint64_t used;
	_Atomic unsigned waiting; /* connections waiting for room (connmem_wait) */
} cm;

int connmem_start(void)
{
	sl_group *root = tenants_root();
	struct sl_limits lim;
	int rc;

	if (!root) {
		struct sl_tree_opts to;

		sl_tree_opts_init(&to);
		rc = sl_tree_create(&to, &cm.own);
		if (rc) {
			fprintf(stderr, "slcache: connection memory: %s\n", strerror(-rc));
			return rc;
		}
		root = sl_tree_root(cm.own);
	}
	sl_limits_init(&lim);
	lim.max = opt.conn_memory;
	rc = sl_group_create(root, CONNMEM_NAME, &lim, NULL, NULL, &cm.g);
	if (rc == 0) {
		/* Before any client: the cache is empty, nothing is evicted. */
		rc = sl_charge(cm.g, opt.conn_memory, SL_NORECLAIM);
		if (rc)
			sl_group_destroy(cm.g);
	}
	if (rc) {
		fprintf(stderr, "slcache: cannot reserve %llu bytes of connection memory in the %s group: %s\n",
			(unsigned long long)opt.conn_memory, CONNMEM_NAME, strerror(-rc));
		cm.g = NULL;
		sl_tree_destroy(cm.own);
		cm.own = NULL;
		return rc;
	}
	cm.pool = opt.conn_memory;
	return 0;
}

void connmem_stop(void)
{
	if (atomic_load(&cm.used) != 0)
		logv("%llu bytes of connection memory still held at shutdown",
		     (unsigned long long)atomic_load(&cm.used));
	if (cm.g) {
		sl_uncharge(cm.g, cm.pool);
		if (sl_group_destroy(cm.g) != 0)
			logv("%s group still charged at shutdown", CONNMEM_NAME);
	}
	cm.g = NULL;
	sl_tree_destroy(cm.own);
	cm.own = NULL;
}

bool connmem_charge(size_t bytes)
{
	uint64_t u = atomic_load_explicit(&cm.used, memory_order_relaxed);

	/* Relaxed: the count guards no other data, only the sum matters. */
	do {
		if (bytes > cm.pool - u)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&cm.used, &u, u + bytes,
							memory_order_relaxed, memory_order_relaxed));
	return true;
}

void connmem_uncharge(size_t bytes)
{
	if (bytes)
		atomic_fetch_sub_explicit(&cm.used, bytes, memory_order_relaxed);
}

bool connmem_short(size_t bytes)
{
	return bytes > cm.pool - atomic_load_explicit(&cm.used, memory_order_relaxed);
}

uint64_t connmem_used(void)
{
	return atomic_load_explicit(&cm.used, memory_order_relaxed);
}

uint64_t connmem_pool(void)
{
	return cm.pool;
}

void connmem_wait(int delta)
{
	atomic_fetch_add_explicit(&cm.waiting, (unsigned)delta, memory_order_relaxed);
}

bool connmem_contended(void)
{
	return atomic_load_explicit(&cm.waiting, memory_order_relaxed) != 0;
}

sl_group *connmem_scope(void)
{
	return cm.own ? sl_tree_root(cm.own) : tenants_root();
}
