/* SPDX-License-Identifier: MIT */
/*
 * tenants.c: where slcache meets softlimit.  Everything else in slcache is
 * a memcached; this file is what makes it a multi-tenant one.
 *
 *  - The tree: its root's max is -m, the whole budget (tenants_set_budget()
 *    moves it live: cache_memlimit), its policy is --policy.
 *  - A tenant per key prefix, each an lru_cache tenant, so an sl_group
 *    below the root with the limits of --tenant (or none), created on first
 *    use.  Lookup is lock-free: an open-addressed table of published
 *    tenants; creation takes one lock.
 *  - Item memory: with the jemalloc adapter, each tenant owns an arena
 *    whose hooks charge its group by the page (the hooks below); else
 *    lru_cache takes items from malloc() and sl_charge()s each one.  An
 *    arena's own metadata (about 100 KiB) is no item's: the tenant's group
 *    is charged ARENA_OVERHEAD for it when the tenant is created, so that
 *    key prefixes cannot grow the process outside -m (issue 27).  With
 *    --no-arenas a tenant's own structures (its LRU, its group) are charged
 *    likewise, TENANT_OVERHEAD.  With --lease-store the charge goes to the
 *    root instead (overhead_group()).
 *  - Reclaim: when a charge would pass a max, softlimit picks the tenants
 *    that give memory back, by the policy and their soft limits, and calls
 *    their reclaim: lru_tenant_evict() (through the arena's evict with the
 *    adapter), which drops that tenant's least recently used items.
 *  - High: lru_store() calls sl_handle_over_high() on its way out, the safe
 *    point outside every lock.
 *  - The maintainer: a thread of ours runs sl_background_run() on the tree,
 *    which evicts ahead of the sets (memcached's LRU maintainer, the
 *    kernel's kswapd).  Every group with a max (the root: -m; a tenant with
 *    max=) gets a headroom of --headroom percent of it (default 3, about
 *    max/32), and is kept that far below it, so that a full cache's sets
 *    find room instead of each reclaiming itself.  The reclaim callbacks
 *    take only the tenant's lock, never held across a charge, so they are
 *    safe on that thread too.  Stopped and joined before the tree goes.
 *  - Without accounting (--no-accounting) there is no tree: one shared LRU
 *    of -m bytes over every tenant, the plain-memcached baseline.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SLCACHE_JEMALLOC
#include <softlimit/jemalloc.h>
#endif

#include "slcache.h"
#include "tenants.h"

enum backend { BE_SHARED, BE_MALLOC, BE_JEMALLOC };

/* What a jemalloc arena costs beyond the pages of its items (its base
 * metadata and extent structures), measured: RSS grows by about 100 KiB
 * per tenant holding one 1-byte item. */
#define ARENA_OVERHEAD (100u << 10)
/* What a tenant costs without an arena (its lru_cache tenant and hash
 * table, its group, its slot), measured: RSS grows by about 1.5 KiB per
 * tenant holding nothing (tests/slcache_isolation.py); rounded up. */
#define TENANT_OVERHEAD (2u << 10)

static struct {
	struct lru_cache *cache;
	enum backend be;
	bool (*live)(void *ctx, const struct lru_meta *m);
	_Atomic uint64_t budget;

	pthread_mutex_t lock;              /* creation: tenants[] and slots[] */
	struct lru_tenant **tenants;       /* opt.max_tenants of them          */
	_Atomic unsigned nr_tenants;
	_Atomic(struct lru_tenant *) *slots; /* open addressing by name        */
	_Atomic int64_t *flush_at;         /* a tenant's delayed flush_all, by slot */
	size_t nslots;
	struct lru_tenant *dflt;
	pthread_t maintainer;
	bool maintained; /* the maintainer thread runs */
} tn = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- the maintainer: background reclaim ---- */

/* A group's headroom: --headroom percent of its max; none without a max. */
static void headroom_apply(sl_group *g)
{
	struct sl_limits lim;

	if (!g || opt.headroom_pct == 0 || sl_group_limits(g, &lim) != 0)
		return;
	sl_group_set_headroom(g, lim.max == SL_UNLIMITED ? 0 : lim.max / 100 * opt.headroom_pct);
}

static void *maintainer_main(void *arg)
{
	sl_background_run(arg);
	return NULL;
}

static int maintainer_start(void)
{
	sl_tree *tree = lru_cache_tree(tn.cache);
	int err;

	sigset_t all, old;

	if (!tree || opt.headroom_pct == 0)
		return 0;
	/* Signals are the main thread's (net.c's signalfd): the maintainer,
	 * started before it blocks them, is born with every signal blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&tn.maintainer, NULL, maintainer_main, tree);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	tn.maintained = true;
	return 0;
}

static void maintainer_stop(void)
{
	if (!tn.maintained)
		return;
	sl_background_stop(lru_cache_tree(tn.cache));
	pthread_join(tn.maintainer, NULL);
	tn.maintained = false;
}

/* ---- item memory in a jemalloc arena per tenant ---- */

#ifdef SLCACHE_JEMALLOC
static uint64_t arena_evict(sl_jemalloc *a, uint64_t target, void *ctx)
{
	(void)a;
	return lru_tenant_evict(ctx, target);
}

static int arena_group_create(void *ctx, struct lru_tenant *t, sl_group *parent, const char *name,
			      const struct sl_limits *lim, void **data, sl_group **group)
{
	static const struct sl_jemalloc_ops jops = { .evict = arena_evict };
	sl_jemalloc *a;
	int err = sl_jemalloc_create(parent, name, lim, &jops, t, &a);

	(void)ctx;
	if (err)
		return err;
	*data = a;
	*group = sl_jemalloc_group(a);
	return 0;
}

static int arena_group_destroy(void *ctx, struct lru_tenant *t, void *data)
{
	(void)ctx;
	(void)t;
	return sl_jemalloc_destroy(data);
}

static void *arena_alloc(void *ctx, struct lru_tenant *t, size_t size)
{
	(void)ctx;
	return sl_jemalloc_alloc(lru_tenant_data(t), size);
}

static void arena_free(void *ctx, struct lru_tenant *t, void *p)
{
	(void)ctx;
	sl_jemalloc_free(lru_tenant_data(t), p);
}

static uint64_t arena_charged(void *ctx, const void *p, size_t size)
{
	(void)ctx;
	(void)size;
	return sl_jemalloc_usable_size(p);
}
#endif

/* ---- the tenant table ---- */

static uint64_t hash_name(const char *p, size_t len)
{
	uint64_t h = UINT64_C(14695981039346656037);

	while (len--) {
		h ^= (unsigned char)*p++;
		h *= UINT64_C(1099511628211);
	}
	return h ^ (h >> 29);
}

static bool name_ok(const char *name, size_t len)
{
	size_t i;

	if (len == 0 || len > SL_NAME_MAX)
		return false;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c <= 0x20 || c >= 0x7f || c == '/')
			return false;
	}
	return true;
}

static bool name_is(struct lru_tenant *t, const char *name, size_t len)
{
	const char *n = lru_tenant_name(t);

	return strncmp(n, name, len) == 0 && n[len] == '\0';
}

static struct lru_tenant *slot_lookup(const char *name, size_t len, size_t *slot)
{
	size_t mask = tn.nslots - 1, i = hash_name(name, len) & mask;
	struct lru_tenant *t;

	for (;; i = (i + 1) & mask) {
		/* Acquire: pairs with the release in tenant_create(), so the
		 * tenant read here is whole. */
		t = atomic_load_explicit(&tn.slots[i], memory_order_acquire);
		if (!t || name_is(t, name, len))
			break;
	}
	if (slot)
		*slot = i;
	return t;
}

/* What a tenant is charged for its own memory when created: none in a
 * shared LRU (no tree). */
static uint64_t tenant_overhead(void)
{
	return tn.be == BE_JEMALLOC ? ARENA_OVERHEAD : tn.be == BE_MALLOC ? TENANT_OVERHEAD : 0;
}

/* Where a tenant's arena overhead is charged: its group, so that its max
 * counts its arena too; but with --lease-store the root, since a group that
 * joins a budget must be emptied to join deferred (and a share of a budget
 * moves between processes, a process's own arena does not). */
static sl_group *overhead_group(struct lru_tenant *t)
{
	return opt.lease_store ? sl_tree_root(lru_cache_tree(tn.cache)) : lru_tenant_group(t);
}

/* Creates and publishes a tenant; caller holds tn.lock and checked that it
 * does not exist and that there is room. */
static int tenant_create(const char *name, size_t len, const struct sl_limits *lim,
			 struct lru_tenant **out)
{
	char buf[SL_NAME_MAX + 1];
	struct lru_tenant *t;
	unsigned n = atomic_load_explicit(&tn.nr_tenants, memory_order_relaxed);
	size_t slot;
	int err;

	memcpy(buf, name, len);
	buf[len] = '\0';
	err = lru_tenant_create(tn.cache, NULL, buf, lim, &t);
	if (err)
		return err;
	if (tenant_overhead()) {
		/* May reclaim: tn.lock is no tenant's lock, and no reclaim takes it. */
		err = sl_charge(overhead_group(t), tenant_overhead(), 0);
		if (err) {
			lru_tenant_destroy(t);
			return err;
		}
	}
	/* Refaults for --policy refault: every tenant reaches as far back. */
	if (opt.ghosts && lru_tenant_group(t))
		lru_tenant_set_ghosts(t, opt.ghosts);
	headroom_apply(lru_tenant_group(t));
	/* Before it is published: no write of a tenant whose lease is starting
	 * runs before its share is known (protocol.c waits: lease_write_wait()). */
	lease_tenant_created(t);
	slot_lookup(name, len, &slot);
	tn.tenants[n] = t;
	/* Release: readers that see the count or the slot see the tenant. */
	atomic_store_explicit(&tn.nr_tenants, n + 1, memory_order_release);
	atomic_store_explicit(&tn.slots[slot], t, memory_order_release);
	*out = t;
	return 0;
}

/* A tenant of --tenant: created with its limits, or given them. */
static int tenant_declare(const char *name, const struct sl_limits *lim)
{
	size_t len = strlen(name);
	struct lru_tenant *t;
	int err = 0;

	if (!name_ok(name, len))
		return -EINVAL;
	pthread_mutex_lock(&tn.lock);
	t = slot_lookup(name, len, NULL);
	if (t) {
		if (lru_tenant_group(t) && lim) {
			err = sl_group_set_limits(lru_tenant_group(t), lim);
			if (!err)
				headroom_apply(lru_tenant_group(t));
		}
	} else if (tn.nr_tenants >= opt.max_tenants) {
		err = -ENOSPC;
	} else {
		err = tenant_create(name, len, lim, &t);
	}
	pthread_mutex_unlock(&tn.lock);
	return err;
}

/* How many tenants key prefixes may make: --max-tenants, and no more than
 * a quarter of -m in their overhead (an arena's, or a tenant's own without
 * arenas), so that prefixes cannot crowd the items out of the cache (later
 * ones share "default"). */
static unsigned tenants_cap(void)
{
	uint64_t by_budget = tenant_overhead() ? opt.max_bytes / 4 / tenant_overhead() : UINT64_MAX;

	if (by_budget >= opt.max_tenants)
		return opt.max_tenants;
	return by_budget > opt.nr_tenants + 1 ? (unsigned)by_budget : opt.nr_tenants + 1;
}

struct lru_tenant *tenant_for_key(const char *key, size_t keylen)
{
	const char *colon = memchr(key, ':', keylen);
	size_t len;
	struct lru_tenant *t;

	if (!colon)
		return tn.dflt;
	len = (size_t)(colon - key);
	if (!name_ok(key, len))
		return tn.dflt;
	t = slot_lookup(key, len, NULL);
	if (t)
		return t;
	if (atomic_load_explicit(&tn.nr_tenants, memory_order_relaxed) >= tenants_cap())
		return tn.dflt;
	pthread_mutex_lock(&tn.lock);
	t = slot_lookup(key, len, NULL);
	if (!t && (tn.nr_tenants >= tenants_cap() || tenant_create(key, len, NULL, &t) != 0))
		t = tn.dflt;
	pthread_mutex_unlock(&tn.lock);
	return t;
}

_Atomic int64_t *tenant_flush_at(struct lru_tenant *t)
{
	const char *name = lru_tenant_name(t);
	size_t slot;

	slot_lookup(name, strlen(name), &slot);
	return &tn.flush_at[slot];
}

void tenants_each(void (*fn)(struct lru_tenant *t, void *arg), void *arg)
{
	/* Acquire: pairs with tenant_create()'s release of the count. */
	unsigned i, n = atomic_load_explicit(&tn.nr_tenants, memory_order_acquire);

	for (i = 0; i < n; i++)
		fn(tn.tenants[i], arg);
}

/* ---- the cache ---- */

/* Gives back what tenant_create() charged for the arenas: a group is only
 * destroyed (with the cache) once nothing is charged to it. */
static void overhead_release(void)
{
	unsigned i, n = atomic_load_explicit(&tn.nr_tenants, memory_order_acquire);

	for (i = 0; tenant_overhead() && i < n; i++)
		sl_uncharge(overhead_group(tn.tenants[i]), tenant_overhead());
}

static int cache_create(enum backend be)
{
	struct lru_hooks hooks = { .live = tn.live };
	int err;

	if (be == BE_SHARED) {
		/* Connection memory is reserved within -m (connmem.c). */
		err = lru_cache_create_shared(opt.max_bytes - opt.conn_memory, &tn.cache);
	} else {
		struct sl_tree_opts to;

		sl_tree_opts_init(&to);
		to.policy = opt.policy;
		to.root.max = opt.max_bytes;
		err = lru_cache_create(&to, &tn.cache);
	}
#ifdef SLCACHE_JEMALLOC
	if (be == BE_JEMALLOC) {
		hooks.group_create = arena_group_create;
		hooks.group_destroy = arena_group_destroy;
		hooks.alloc = arena_alloc;
		hooks.free = arena_free;
		hooks.charged = arena_charged;
	}
#endif
	tn.be = be; /* before the first tenant: it pays for its arena */
	if (!err)
		err = lru_cache_set_hooks(tn.cache, &hooks, NULL);
	if (!err && lru_cache_tree(tn.cache))
		headroom_apply(sl_tree_root(lru_cache_tree(tn.cache)));
	if (!err)
		err = tenant_declare(TENANT_DEFAULT, NULL);
	if (err) {
		overhead_release();
		lru_cache_destroy(tn.cache);
		tn.cache = NULL;
		atomic_store_explicit(&tn.nr_tenants, 0, memory_order_relaxed);
		memset(tn.slots, 0, tn.nslots * sizeof(*tn.slots));
		return err;
	}
	tn.be = be;
	tn.dflt = tn.tenants[0];
	return 0;
}

int tenants_start(bool (*live)(void *ctx, const struct lru_meta *m))
{
	enum backend be = !opt.accounting ? BE_SHARED : opt.arenas ? BE_JEMALLOC : BE_MALLOC;
	unsigned i;
	int err;

#ifndef SLCACHE_JEMALLOC
	if (be == BE_JEMALLOC)
		be = BE_MALLOC;
#endif
	tn.live = live;
	atomic_store_explicit(&tn.budget, opt.max_bytes, memory_order_relaxed);
	for (tn.nslots = 16; tn.nslots < 2 * (size_t)opt.max_tenants + 2; tn.nslots *= 2)
		;
	tn.tenants = calloc(opt.max_tenants, sizeof(*tn.tenants));
	tn.slots = calloc(tn.nslots, sizeof(*tn.slots));
	tn.flush_at = calloc(tn.nslots, sizeof(*tn.flush_at));
	if (!tn.tenants || !tn.slots || !tn.flush_at) {
		tenants_stop();
		return -ENOMEM;
	}
	err = cache_create(be);
	if (err == -ENOTSUP && be == BE_JEMALLOC) /* no usable jemalloc here */
		err = cache_create(BE_MALLOC);
	if (err) {
		fprintf(stderr, "slcache: cannot create the cache: %s\n", strerror(-err));
		tenants_stop();
		return err;
	}
	for (i = 0; i < opt.nr_tenants; i++) {
		err = tenant_declare(opt.tenants[i].name, &opt.tenants[i].lim);
		if (err) {
			fprintf(stderr, "slcache: --tenant %s: %s\n", opt.tenants[i].name,
				err == -EINVAL ? "limits refused (is the sum of the tree consistent?)"
					       : strerror(-err));
			tenants_stop();
			return err;
		}
	}
	err = maintainer_start();
	if (err) {
		fprintf(stderr, "slcache: cannot start the maintainer thread: %s\n", strerror(-err));
		tenants_stop();
		return err;
	}
	err = lease_start();
	if (err)
		tenants_stop();
	return err;
}

void tenants_stop(void)
{
	/* The leases leave first (their shares go back to the budget), then
	 * the maintainer, which reclaims the tree.  Items, arenas and groups
	 * go with the cache. */
	lease_stop();
	maintainer_stop();
	overhead_release();
	lru_cache_destroy(tn.cache);
	tn.cache = NULL;
	free(tn.tenants);
	free(tn.slots);
	free(tn.flush_at);
	tn.tenants = NULL;
	tn.slots = NULL;
	tn.flush_at = NULL;
}

const char *tenants_backend(void)
{
	return tn.be == BE_JEMALLOC ? "jemalloc" : tn.be == BE_MALLOC ? "malloc" : "shared-lru";
}

int tenants_set_budget(uint64_t bytes)
{
	sl_tree *tree = lru_cache_tree(tn.cache);
	int err;

	if (bytes <= opt.conn_memory) /* the connections' reservation is in it */
		return -EINVAL;
	if (tree) {
		struct sl_stats st;

		err = sl_group_stats(sl_tree_root(tree), &st);
		if (!err) {
			st.limits.max = bytes;
			if (st.limits.soft > bytes)
				st.limits.soft = bytes;
			if (st.limits.min > bytes)
				st.limits.min = bytes;
			err = sl_group_set_limits(sl_tree_root(tree), &st.limits);
			if (!err)
				headroom_apply(sl_tree_root(tree));
		}
	} else {
		err = lru_cache_set_capacity(tn.cache, bytes - opt.conn_memory);
	}
	if (!err)
		atomic_store_explicit(&tn.budget, bytes, memory_order_relaxed);
	return err;
}

uint64_t tenants_budget(void)
{
	return atomic_load_explicit(&tn.budget, memory_order_relaxed);
}

sl_group *tenants_root(void)
{
	return sl_tree_root(lru_cache_tree(tn.cache));
}

/* ---- stats ---- */

static void tenant_snapshot(struct lru_tenant *t, struct tenant_stats *st)
{
	struct lru_stats ls;
	sl_group *g = lru_tenant_group(t);

	memset(st, 0, sizeof(*st));
	if (lru_tenant_stats(t, &ls) == 0) {
		st->items = ls.items;
		st->bytes = ls.bytes;
		st->hits = ls.hits;
		st->misses = ls.misses;
		st->evictions = ls.evictions;
		st->refaults = ls.refaults;
	}
	if (g) {
		struct sl_stats gs;

		if (sl_group_stats(g, &gs) == 0) {
			st->usage = gs.usage;
			st->soft = gs.limits.soft;
			st->max = gs.limits.max;
			st->events_low = gs.events_low;
			st->events_high = gs.events_high;
			st->events_max = gs.events_max;
			st->events_oom = gs.events_oom;
		}
	} else {
		st->usage = st->bytes;
		st->max = SL_UNLIMITED;
	}
	lease_tenant(t, &st->lease);
}

void tenants_stats(tenant_stats_fn fn, void *arg)
{
	unsigned i, n = atomic_load_explicit(&tn.nr_tenants, memory_order_acquire);

	for (i = 0; i < n; i++) {
		struct tenant_stats st;

		tenant_snapshot(tn.tenants[i], &st);
		fn(arg, lru_tenant_name(tn.tenants[i]), &st);
	}
}

unsigned tenants_count(void)
{
	return atomic_load_explicit(&tn.nr_tenants, memory_order_acquire);
}

void tenants_stat_one(unsigned i, tenant_stats_fn fn, void *arg)
{
	struct tenant_stats st;

	if (i >= tenants_count())
		return;
	tenant_snapshot(tn.tenants[i], &st);
	fn(arg, lru_tenant_name(tn.tenants[i]), &st);
}

void tenants_totals(struct tenant_stats *out)
{
	unsigned i, n = atomic_load_explicit(&tn.nr_tenants, memory_order_acquire);
	sl_tree *tree = lru_cache_tree(tn.cache);

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n; i++) {
		struct tenant_stats st;

		tenant_snapshot(tn.tenants[i], &st);
		out->items += st.items;
		out->bytes += st.bytes;
		out->hits += st.hits;
		out->misses += st.misses;
		out->evictions += st.evictions;
		out->refaults += st.refaults;
		out->usage += st.usage;
	}
	out->max = tenants_budget();
	if (tree) {
		struct sl_stats gs;

		if (sl_group_stats(sl_tree_root(tree), &gs) == 0)
			out->usage = gs.usage;
	}
}
