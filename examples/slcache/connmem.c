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
 *
 * The pool was one for all: the clients of one tenant that never read
 * their answers, held long lines or trickled values took all of it, and
 * every other tenant's requests waited for them (issue "Isolation").  Now
 * it is shared as -m is among the items: each tenant has a share (owners,
 * below), and what a tenant's clients hold is charged to it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "connmem.h"
#include "slcache.h"
#include "tenants.h"

/* A tenant's share of the pool (or the anonymous one's). */
struct cm_owner {
	_Atomic(const void *) tenant; /* its lru_tenant; NULL: a free slot */
	_Atomic uint64_t used;
	uint64_t soft, max;
};

/* The shares, of the pool: a tenant's max and soft, the anonymous owner's,
 * and the part of the pool that only owners under their soft may take.  A
 * tenant's max holds at least its largest value and the output mark (a
 * small pool, -m 16, must not refuse a 1 MB set that memcached takes). */
#define SHARE_MAX(pool) ((pool) / 2)
#define SHARE_ITEM ((uint64_t)opt.item_max + WBUF_HIGH)
#define SHARE_SOFT(pool) ((pool) / 8)
#define ANON_MAX(pool) ((pool) / 4)
#define ANON_SOFT(pool) ((pool) / 16)
#define RESERVE(pool) ((pool) / 4)

static struct {
	sl_tree *own;   /* without accounting: a tree just for the connections */
	sl_group *g;
	uint64_t pool;  /* charged to g once: what buffers may take            */
	_Atomic uint64_t used;
	_Atomic unsigned waiting; /* connections waiting for room (connmem_wait) */
	/* Every tenant's owner, open-addressed by its lru_tenant: a slot is
	 * taken once (a compare-and-swap) and never given back, as tenants
	 * are never destroyed while the server runs. */
	struct cm_owner *owners;
	size_t nowners; /* a power of two, twice the tenants there can be */
	struct cm_owner anon;
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
	for (cm.nowners = 16; cm.nowners < 2 * ((size_t)opt.max_tenants + 1); cm.nowners *= 2)
		;
	cm.owners = calloc(cm.nowners, sizeof(*cm.owners));
	if (!cm.owners) {
		fprintf(stderr, "slcache: connection memory: out of memory\n");
		connmem_stop();
		return -ENOMEM;
	}
	for (size_t i = 0; i < cm.nowners; i++) {
		cm.owners[i].soft = SHARE_SOFT(cm.pool);
		cm.owners[i].max = SHARE_MAX(cm.pool) >= SHARE_ITEM ? SHARE_MAX(cm.pool)
				   : SHARE_ITEM < cm.pool ? SHARE_ITEM : cm.pool;
	}
	cm.anon.soft = ANON_SOFT(cm.pool);
	cm.anon.max = ANON_MAX(cm.pool);
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
	free(cm.owners);
	cm.owners = NULL;
}

struct cm_owner *connmem_owner(const char *key, size_t keylen)
{
	const void *t, *seen;
	size_t mask = cm.nowners - 1, i;

	if (!key || !cm.owners)
		return &cm.anon;
	t = tenant_for_key(key, keylen);
	i = (size_t)(((uintptr_t)t >> 4) * 0x9e3779b97f4a7c15ull) & mask;
	for (;; i = (i + 1) & mask) {
		struct cm_owner *o = &cm.owners[i];

		seen = atomic_load_explicit(&o->tenant, memory_order_relaxed);
		if (seen == t)
			return o;
		if (seen)
			continue;
		/* Free: take it (its limits were set at start). */
		if (atomic_compare_exchange_strong_explicit(&o->tenant, &seen, t, memory_order_relaxed,
							    memory_order_relaxed) ||
		    seen == t)
			return o;
	}
}

/* Relaxed: the counts guard no other data, only the sums matter.  The
 * owner's count first: an owner past its share never touches the pool. */
static bool charge(struct cm_owner *o, size_t bytes, bool past_max)
{
	uint64_t mine = atomic_fetch_add_explicit(&o->used, bytes, memory_order_relaxed) + bytes;
	uint64_t u = atomic_load_explicit(&cm.used, memory_order_relaxed);
	uint64_t keep = mine > o->soft ? RESERVE(cm.pool) : 0;

	if (mine > o->max && !past_max)
		goto undo;
	do {
		if (bytes + keep > cm.pool - u)
			goto undo;
	} while (!atomic_compare_exchange_weak_explicit(&cm.used, &u, u + bytes,
							memory_order_relaxed, memory_order_relaxed));
	return true;
undo:
	atomic_fetch_sub_explicit(&o->used, bytes, memory_order_relaxed);
	return false;
}

/* Where @h records @o: its slot, a free one, or (full) the last. */
static size_t hold_slot(const struct cm_hold *h, const struct cm_owner *o)
{
	size_t i;

	for (i = 0; i < CM_HOLD_MAX - 1 && h->o[i] && h->o[i] != o; i++)
		;
	return i;
}

bool connmem_hold(struct cm_hold *h, struct cm_owner *o, size_t bytes, bool past_max)
{
	size_t i = hold_slot(h, o);

	if (h->o[i]) /* o's, or the last's: it pays when all are taken */
		o = h->o[i];
	if (bytes && !charge(o, bytes, past_max))
		return false;
	h->o[i] = o;
	h->n[i] += bytes;
	return true;
}

void connmem_unhold(struct cm_hold *h, struct cm_owner *o, size_t bytes)
{
	size_t i = hold_slot(h, o);

	if (!h->o[i] || !bytes)
		return;
	atomic_fetch_sub_explicit(&h->o[i]->used, bytes, memory_order_relaxed);
	atomic_fetch_sub_explicit(&cm.used, bytes, memory_order_relaxed);
	h->n[i] -= bytes;
}

void connmem_release(struct cm_hold *h)
{
	size_t i;

	for (i = 0; i < CM_HOLD_MAX && h->o[i]; i++) {
		atomic_fetch_sub_explicit(&h->o[i]->used, h->n[i], memory_order_relaxed);
		atomic_fetch_sub_explicit(&cm.used, h->n[i], memory_order_relaxed);
		h->o[i] = NULL;
		h->n[i] = 0;
	}
}

bool connmem_fits(const struct cm_owner *o, size_t bytes)
{
	return bytes <= o->max;
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
