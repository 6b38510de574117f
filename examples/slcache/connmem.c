/* SPDX-License-Identifier: MIT */
/*
 * connmem.c: the memory a connection holds, charged as the kernel charges
 * socket buffers to a memory cgroup.  Items were the only thing charged, so
 * many clients each sending most of a large value and stopping could push
 * the process far past -m (a value is buffered whole before it is stored).
 * Now every read and write buffer is charged to a "connections" group below
 * the root: items and connection buffers share -m, and connection buffers
 * alone never pass --conn-memory.  A value whose buffer does not fit is
 * refused as memcached refuses it ("SERVER_ERROR out of memory storing
 * object"), and net.c closes connections that stall in the middle of a
 * value (--stall-timeout).
 *
 * The group has no reclaim callback: buffers in use cannot be taken back.
 * A charge at the root's max reclaims the tenants' items as an item's
 * charge would; one at the group's own max fails at once (or, forced,
 * goes past it).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "connmem.h"
#include "slcache.h"
#include "tenants.h"

static struct {
	sl_tree *own; /* without accounting: a tree just for the connections */
	sl_group *g;
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
	if (rc) {
		fprintf(stderr, "slcache: cannot create the %s group: %s\n", CONNMEM_NAME,
			strerror(-rc));
		sl_tree_destroy(cm.own);
		cm.own = NULL;
	}
	return rc;
}

void connmem_stop(void)
{
	if (cm.g && sl_group_destroy(cm.g) != 0)
		logv("%s group still charged at shutdown", CONNMEM_NAME);
	cm.g = NULL;
	sl_tree_destroy(cm.own);
	cm.own = NULL;
}

/* Reclaim can only make room above the group: it has no callback, and its
 * buffers are in use.  So reclaim (the tenants' items) only when the group
 * itself has room and the whole budget is what is short. */
static bool room_in_group(size_t bytes)
{
	struct sl_stats st;

	return sl_group_stats(cm.g, &st) == 0 && st.usage + bytes <= st.limits.max;
}

bool connmem_charge(size_t bytes, unsigned flags)
{
	if (bytes == 0 || sl_charge(cm.g, bytes, SL_NORECLAIM) == 0)
		return true;
	if (!(flags & SL_NORECLAIM) && room_in_group(bytes) && sl_charge(cm.g, bytes, 0) == 0)
		return true;
	return (flags & SL_FORCE) && sl_charge(cm.g, bytes, SL_FORCE | SL_NORECLAIM) == 0;
}

bool connmem_over(void)
{
	struct sl_stats st;

	return sl_group_stats(cm.g, &st) == 0 && st.usage > st.limits.max;
}

void connmem_uncharge(size_t bytes)
{
	if (bytes)
		sl_uncharge(cm.g, bytes);
}

sl_group *connmem_scope(void)
{
	return cm.own ? sl_tree_root(cm.own) : tenants_root();
}
