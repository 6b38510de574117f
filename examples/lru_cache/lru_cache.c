/* SPDX-License-Identifier: MIT */
/*
 * lru_cache: a multi-tenant LRU cache over a softlimit tree.  See lru_cache.h.
 *
 * Each tenant has a chained hash table and a doubly linked LRU list (head =
 * most recently used), both under the tenant's mutex.  The whole design
 * follows from one rule of softlimit: sl_charge() may run reclaim callbacks
 * in the calling thread, and a callback locks the tenant it evicts from,
 * which may be any tenant, including the caller's.  So:
 *
 *  - lru_set() charges before it takes any lock, and an item is charged for
 *    its whole life in the table: charged before it is linked, uncharged
 *    only after it is unlinked;
 *  - no thread ever holds two tenant locks, and nothing done under a tenant
 *    lock can wait for a reclaim (sl_uncharge() and malloc() are all that
 *    runs there), so a reclaim waiting for a tenant lock always gets it.
 *
 * Shared mode keeps the same tenants and tables but points every tenant's
 * lock and LRU list at one mutex and one list in the cache.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "lru_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct lru_item {
	struct lru_item *hnext;      /* hash chain                                  */
	struct lru_item *prev, *next; /* LRU list; prev is toward the head (newer)   */
	struct lru_tenant *owner;
	uint64_t hash;
	struct lru_meta meta;
	uint32_t keylen, vlen;
	unsigned char data[];        /* the key, then the value                     */
};

struct lru_list {
	struct lru_item *head, *tail;
};

/* What eviction took lately: the key's hash, the item's charge, and its
 * metadata (so that a key that would have expired is no refault). */
struct lru_ghost {
	struct lru_ghost *hnext;          /* the ghost table's chain          */
	struct lru_ghost *newer, *older;  /* the ghost FIFO                   */
	uint64_t hash;
	uint64_t size;
	struct lru_meta meta;
};

struct ghosts {
	struct lru_ghost **buckets;       /* nbuckets is a power of two (or 0) */
	size_t nbuckets, count;
	struct lru_ghost *newest, *oldest;
	uint64_t reach;                   /* remember up to this many evicted bytes; 0 = off */
	uint64_t remembered;              /* sum of the ghosts' sizes          */
};

struct lru_tenant {
	struct lru_cache *cache;
	struct lru_tenant *parent;
	struct lru_tenant *prev_all, *next_all; /* the cache's tenants, under tenants_lock */
	unsigned nr_children;                   /* under tenants_lock                      */
	sl_group *group;                        /* NULL in shared mode                     */
	void *data;                             /* from hooks.group_create                 */
	char *name;

	pthread_mutex_t own_lock;
	pthread_mutex_t *lock;  /* &own_lock, or the cache's lock in shared mode   */
	struct lru_list own_lru;
	struct lru_list *lru;   /* &own_lru, or the cache's list in shared mode     */
	struct lru_item **buckets; /* under *lock; nbuckets is a power of two      */
	size_t nbuckets;
	struct lru_stats st;    /* under *lock                                      */
	struct ghosts ghosts;   /* under *lock; accounted mode only                 */
	uint64_t reused, reuse_max; /* under *lock: the host's reuse notes, since taken */
};

struct lru_cache {
	sl_tree *tree;                  /* NULL in shared mode */
	struct lru_hooks hooks;
	void *hooks_ctx;
	_Atomic uint64_t next_cas;
	pthread_mutex_t tenants_lock;   /* the tenant list and child counts */
	struct lru_tenant *tenants;

	/* Shared mode only, all under lock. */
	pthread_mutex_t lock;
	struct lru_list lru;
	uint64_t capacity, used;
};

#define LRU_BUCKETS_MIN 16

static struct lru_item *shared_make_room(struct lru_cache *c, uint64_t size);

/* ---- allocation ---- */

/*
 * Items are allocated, charged, uncharged and freed here and nowhere else,
 * so that a host can put each tenant's items in its own arena (the hooks'
 * alloc and free, which charge the group themselves).  Else items come
 * from malloc() and are charged with sl_charge(): item_alloc() may reclaim,
 * so no lock may be held.  @t is the tenant the item is charged to;
 * item_free() gets NULL for the shared baseline's victims, whose owner may
 * be gone by the time they are freed (and which are never charged).
 */
static struct lru_item *item_alloc(struct lru_tenant *t, uint64_t size)
{
	const struct lru_hooks *h = &t->cache->hooks;
	struct lru_item *it;

	if (h->alloc)
		return h->alloc(t->cache->hooks_ctx, t, (size_t)size);
	it = malloc((size_t)size);
	if (it && t->group && sl_charge(t->group, size, 0) != 0) {
		free(it);
		it = NULL;
	}
	return it;
}

static void item_free(struct lru_tenant *t, struct lru_item *it, uint64_t size)
{
	if (t && t->cache->hooks.free) {
		t->cache->hooks.free(t->cache->hooks_ctx, t, it);
		return;
	}
	free(it);
	if (t && t->group)
		sl_uncharge(t->group, size);
}

/* What freeing @it gives back to its tenant's group. */
static uint64_t item_charged(const struct lru_tenant *t, const struct lru_item *it,
			     uint64_t size)
{
	if (t->cache->hooks.charged)
		return t->cache->hooks.charged(t->cache->hooks_ctx, it, (size_t)size);
	return size;
}

/* ---- ghosts (callers hold the tenant's lock) ----
 *
 * A ghost costs its tenant LRU_GHOST_SIZE bytes, charged like an item.  The
 * charge is SL_NORECLAIM: ghosts are made inside the reclaim callback,
 * where charges never reclaim, and a ghost that does not fit is not kept.
 */

static struct lru_ghost **ghost_find(struct ghosts *gh, uint64_t hash)
{
	struct lru_ghost **pp;

	if (!gh->nbuckets)
		return NULL;
	for (pp = &gh->buckets[hash & (gh->nbuckets - 1)]; *pp; pp = &(*pp)->hnext)
		if ((*pp)->hash == hash)
			return pp;
	return NULL;
}

/* Unlink and free the ghost at *pp, giving its charge back. */
static void ghost_drop(struct lru_tenant *t, struct lru_ghost **pp)
{
	struct ghosts *gh = &t->ghosts;
	struct lru_ghost *g = *pp;

	*pp = g->hnext;
	if (g->newer)
		g->newer->older = g->older;
	else
		gh->newest = g->older;
	if (g->older)
		g->older->newer = g->newer;
	else
		gh->oldest = g->newer;
	gh->count--;
	gh->remembered -= g->size;
	free(g);
	sl_uncharge(t->group, LRU_GHOST_SIZE);
}

static void ghost_drop_oldest(struct lru_tenant *t)
{
	struct ghosts *gh = &t->ghosts;

	ghost_drop(t, ghost_find(gh, gh->oldest->hash));
}

/* Room for one more chain entry per bucket on average; on no memory the
 * chains just grow. */
static void ghost_grow(struct ghosts *gh)
{
	size_t n = gh->nbuckets ? 2 * gh->nbuckets : 64, i;
	struct lru_ghost **b;

	if (gh->count < gh->nbuckets || n > SIZE_MAX / sizeof(*b) || !(b = calloc(n, sizeof(*b))))
		return;
	for (i = 0; i < gh->nbuckets; i++) {
		struct lru_ghost *g, *next;

		for (g = gh->buckets[i]; g; g = next) {
			next = g->hnext;
			g->hnext = b[g->hash & (n - 1)];
			b[g->hash & (n - 1)] = g;
		}
	}
	free(gh->buckets);
	gh->buckets = b;
	gh->nbuckets = n;
}

/* Remember @g (its hash and size set; malloc'd) as evicted, or free it. */
static void ghost_add(struct lru_tenant *t, struct lru_ghost *g)
{
	struct ghosts *gh = &t->ghosts;
	struct lru_ghost **pp;
	uint64_t hash = g->hash;

	if (!gh->reach || g->size > gh->reach) {
		free(g);
		return;
	}
	if ((pp = ghost_find(gh, hash)) != NULL)
		ghost_drop(t, pp);
	ghost_grow(gh);
	if (!gh->nbuckets || sl_charge(t->group, LRU_GHOST_SIZE, SL_NORECLAIM) != 0) {
		free(g);
		return;
	}
	g->hnext = gh->buckets[hash & (gh->nbuckets - 1)];
	gh->buckets[hash & (gh->nbuckets - 1)] = g;
	g->newer = NULL;
	g->older = gh->newest;
	if (gh->newest)
		gh->newest->newer = g;
	else
		gh->oldest = g;
	gh->newest = g;
	gh->count++;
	gh->remembered += g->size;
	while (gh->remembered > gh->reach)
		ghost_drop_oldest(t);
}

/* A read missed @hash: if it was evicted lately and would still be live
 * for the host, forget the ghost and return its size (a refault), else 0
 * (a ghost that would have expired is forgotten too). */
static uint64_t ghost_take(struct lru_tenant *t, uint64_t hash)
{
	struct lru_ghost **pp = ghost_find(&t->ghosts, hash);
	const struct lru_hooks *h = &t->cache->hooks;
	uint64_t size;

	if (!pp)
		return 0;
	size = h->live && !h->live(t->cache->hooks_ctx, &(*pp)->meta) ? 0 : (*pp)->size;
	ghost_drop(t, pp);
	return size;
}

static void ghosts_trim(struct lru_tenant *t, uint64_t reach)
{
	struct ghosts *gh = &t->ghosts;

	gh->reach = reach;
	while (gh->oldest && gh->remembered > reach)
		ghost_drop_oldest(t);
	if (!gh->count) {
		free(gh->buckets);
		gh->buckets = NULL;
		gh->nbuckets = 0;
	}
}

/* ---- items, hash tables and LRU lists (callers hold the tenant's lock) ---- */

uint64_t lru_item_size(size_t keylen, size_t vlen)
{
	return (uint64_t)sizeof(struct lru_item) + keylen + vlen;
}

static uint64_t item_size(const struct lru_item *it)
{
	return lru_item_size(it->keylen, it->vlen);
}

/* FNV-1a: short keys, no adversary in an example. */
static uint64_t hash_key(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = UINT64_C(14695981039346656037);

	while (len--) {
		h ^= *p++;
		h *= UINT64_C(1099511628211);
	}
	return h;
}

static void lru_unlink(struct lru_list *l, struct lru_item *it)
{
	if (it->prev)
		it->prev->next = it->next;
	else
		l->head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		l->tail = it->prev;
	it->prev = it->next = NULL;
}

static void lru_push_front(struct lru_list *l, struct lru_item *it)
{
	it->prev = NULL;
	it->next = l->head;
	if (l->head)
		l->head->prev = it;
	else
		l->tail = it;
	l->head = it;
}

static struct lru_item **bucket_of(struct lru_tenant *t, uint64_t hash)
{
	return &t->buckets[hash & (t->nbuckets - 1)];
}

/* The link that points at the item with this key, or at the chain's NULL end. */
static struct lru_item **table_find(struct lru_tenant *t, uint64_t hash, const void *key,
				    size_t keylen)
{
	struct lru_item **pp = bucket_of(t, hash);

	for (; *pp; pp = &(*pp)->hnext) {
		struct lru_item *it = *pp;

		if (it->hash == hash && it->keylen == keylen && memcmp(it->data, key, keylen) == 0)
			break;
	}
	return pp;
}

/* Doubles the table once it holds more items than buckets.  A failed
 * allocation only leaves the chains longer. */
static void table_grow(struct lru_tenant *t)
{
	size_t n = t->nbuckets * 2, i;
	struct lru_item **nb;

	if (t->st.items <= t->nbuckets || n < t->nbuckets)
		return;
	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (i = 0; i < t->nbuckets; i++) {
		struct lru_item *it = t->buckets[i], *next;

		for (; it; it = next) {
			next = it->hnext;
			it->hnext = nb[it->hash & (n - 1)];
			nb[it->hash & (n - 1)] = it;
		}
	}
	free(t->buckets);
	t->buckets = nb;
	t->nbuckets = n;
}

static void item_link(struct lru_tenant *t, struct lru_item *it)
{
	struct lru_item **pp = bucket_of(t, it->hash);

	it->hnext = *pp;
	*pp = it;
	lru_push_front(t->lru, it);
	t->st.items++;
	t->st.bytes += item_size(it);
	if (t->cache->tree == NULL)
		t->cache->used += item_size(it);
	table_grow(t);
}

/* Takes @it out of its owner's table and LRU list; @pp is its hash link if
 * the caller has it, else NULL. */
static void item_unlink(struct lru_item *it, struct lru_item **pp)
{
	struct lru_tenant *o = it->owner;

	if (!pp)
		for (pp = bucket_of(o, it->hash); *pp != it; pp = &(*pp)->hnext)
			;
	*pp = it->hnext;
	it->hnext = NULL;
	lru_unlink(o->lru, it);
	o->st.items--;
	o->st.bytes -= item_size(it);
	if (o->cache->tree == NULL)
		o->cache->used -= item_size(it);
}

/*
 * Uncharges and frees a chain of unlinked items (linked through hnext).
 * Called with no tenant lock held.  @t is their owner, or NULL for the
 * shared baseline's victims, which are not charged and whose owners may be
 * gone by now.
 */
static void items_release(struct lru_tenant *t, struct lru_item *chain)
{
	struct lru_item *it, *next;

	for (it = chain; it; it = next) {
		next = it->hnext;
		item_free(t, it, item_size(it));
	}
}

static bool item_live(const struct lru_tenant *t, const struct lru_item *it)
{
	const struct lru_cache *c = t->cache;

	return !c->hooks.live || c->hooks.live(c->hooks_ctx, &it->meta);
}

/* The link of the live item under @key, or of its chain's end.  A dead
 * item met there is unlinked and pushed on *@dead, for items_release(). */
static struct lru_item **find_live(struct lru_tenant *t, uint64_t hash, const void *key,
				   size_t keylen, struct lru_item **dead)
{
	struct lru_item **pp = table_find(t, hash, key, keylen);

	if (*pp && !item_live(t, *pp)) {
		struct lru_item *it = *pp;

		item_unlink(it, pp);
		it->hnext = *dead;
		*dead = it;
		/* *pp is now the next item of the chain, another key's: a key is
		 * in its chain once, so the answer is the chain's end. */
		while (*pp)
			pp = &(*pp)->hnext;
	}
	return pp;
}

/* Frees what find_live() or a flush took out: the owner's in accounted
 * mode; in shared mode nothing is charged, so no owner is needed. */
static void dead_release(struct lru_tenant *t, struct lru_item *dead)
{
	items_release(t->group ? t : NULL, dead);
}

/* ---- reclaim: the one callback softlimit calls ---- */

/*
 * Evicts @t's least recently used items until @target bytes are freed (the
 * last one may overshoot: an item is freed whole).  The items are unlinked
 * under the lock and uncharged after it, but before returning: softlimit
 * believes the return value only as far as usage really fell.
 */
uint64_t lru_tenant_evict(struct lru_tenant *t, uint64_t target)
{
	struct lru_item *victims = NULL, *it;
	struct lru_ghost *ghosts = NULL, **tail = &ghosts, *g;
	uint64_t freed = 0;

	if (!t)
		return 0;
	pthread_mutex_lock(t->lock);
	while (freed < target && (it = t->lru->tail) != NULL) {
		uint64_t charged = item_charged(t, it, item_size(it));

		item_unlink(it, NULL);
		t->st.evictions++;
		t->st.evicted_bytes += charged;
		freed += charged;
		if (t->ghosts.reach && (g = malloc(sizeof(*g))) != NULL) {
			g->hash = it->hash;
			g->size = charged;
			g->meta = it->meta;
			g->hnext = NULL;
			*tail = g;
			tail = &g->hnext;
		}
		it->hnext = victims;
		victims = it;
	}
	pthread_mutex_unlock(t->lock);
	items_release(t, victims);
	/* The ghosts are charged once the items are not: at max they fit in
	 * the room their items left.  In eviction order, oldest first. */
	if (ghosts) {
		pthread_mutex_lock(t->lock);
		while ((g = ghosts) != NULL) {
			ghosts = g->hnext;
			ghost_add(t, g);
		}
		pthread_mutex_unlock(t->lock);
	}
	return freed;
}

static uint64_t tenant_reclaim(sl_group *g, uint64_t target, void *ctx)
{
	(void)g;
	return lru_tenant_evict(ctx, target);
}

/* ---- caches ---- */

static int cache_alloc(struct lru_cache **out)
{
	struct lru_cache *c;

	if (!out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->tenants_lock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

int lru_cache_create(const struct sl_tree_opts *opts, struct lru_cache **out)
{
	struct lru_cache *c;
	int err = cache_alloc(out);

	if (err)
		return err;
	c = *out;
	err = sl_tree_create(opts, &c->tree);
	if (err) {
		lru_cache_destroy(c);
		*out = NULL;
	}
	return err;
}

int lru_cache_create_shared(uint64_t capacity, struct lru_cache **out)
{
	int err;

	if (!capacity)
		return -EINVAL;
	err = cache_alloc(out);
	if (!err)
		(*out)->capacity = capacity;
	return err;
}

static void tenant_free(struct lru_tenant *t)
{
	pthread_mutex_destroy(&t->own_lock);
	free(t->ghosts.buckets);
	free(t->buckets);
	free(t->name);
	free(t);
}

/* Frees every item of @t (uncharging them: the group may outlive the
 * cache's tenants by an instant, and an arena must be empty to go), then
 * what hooks.group_create made. */
static void tenant_free_items(struct lru_tenant *t)
{
	size_t i;

	for (i = 0; i < t->nbuckets; i++) {
		struct lru_item *it = t->buckets[i], *next;

		for (; it; it = next) {
			next = it->hnext;
			item_free(t->group ? t : NULL, it, item_size(it));
		}
	}
	while (t->ghosts.oldest)
		ghost_drop_oldest(t);
	if (t->group && t->cache->hooks.group_destroy)
		t->cache->hooks.group_destroy(t->cache->hooks_ctx, t, t->data);
}

void lru_cache_destroy(struct lru_cache *c)
{
	struct lru_tenant *t, *next;

	if (!c)
		return;
	for (t = c->tenants; t; t = next) {
		next = t->next_all;
		tenant_free_items(t);
		tenant_free(t);
	}
	sl_tree_destroy(c->tree);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->tenants_lock);
	free(c);
}

int lru_cache_set_hooks(struct lru_cache *c, const struct lru_hooks *hooks, void *ctx)
{
	int err = 0;

	if (!c || !hooks || !hooks->alloc != !hooks->free ||
	    (!c->tree && (hooks->alloc || hooks->group_create || hooks->charged)))
		return -EINVAL;
	pthread_mutex_lock(&c->tenants_lock);
	if (c->tenants) {
		err = -EBUSY;
	} else {
		c->hooks = *hooks;
		c->hooks_ctx = ctx;
	}
	pthread_mutex_unlock(&c->tenants_lock);
	return err;
}

int lru_cache_set_capacity(struct lru_cache *c, uint64_t capacity)
{
	struct lru_item *victims;

	if (!c || !capacity || c->tree)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	c->capacity = capacity;
	victims = shared_make_room(c, 0);
	pthread_mutex_unlock(&c->lock);
	items_release(NULL, victims);
	return 0;
}

sl_tree *lru_cache_tree(struct lru_cache *c)
{
	return c ? c->tree : NULL;
}

/* ---- tenants ---- */

/* Shared mode has no sl_group to check names, so it checks them as
 * sl_group_create() would.  Caller holds tenants_lock. */
static int shared_name_check(struct lru_cache *c, struct lru_tenant *parent, const char *name)
{
	size_t len = strlen(name);
	struct lru_tenant *t;

	if (len == 0 || len > SL_NAME_MAX || strchr(name, '/'))
		return -EINVAL;
	for (t = c->tenants; t; t = t->next_all)
		if (t->parent == parent && strcmp(t->name, name) == 0)
			return -EEXIST;
	return 0;
}

int lru_tenant_create(struct lru_cache *c, struct lru_tenant *parent, const char *name,
		      const struct sl_limits *lim, struct lru_tenant **out)
{
	static const struct sl_ops ops = { .reclaim = tenant_reclaim };
	struct lru_tenant *t;
	int err = 0;

	if (!c || !name || !out || (parent && parent->cache != c))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cache = c;
	t->parent = parent;
	t->name = strdup(name);
	t->nbuckets = LRU_BUCKETS_MIN;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	pthread_mutex_init(&t->own_lock, NULL);
	t->lock = c->tree ? &t->own_lock : &c->lock;
	t->lru = c->tree ? &t->own_lru : &c->lru;
	if (!t->name || !t->buckets) {
		tenant_free(t);
		return -ENOMEM;
	}

	/* The tenant is whole before its group exists: the group's reclaim
	 * callback may run on another thread as soon as it does. */
	if (c->tree) {
		sl_group *pg = parent ? parent->group : sl_tree_root(c->tree);

		if (c->hooks.group_create)
			err = c->hooks.group_create(c->hooks_ctx, t, pg, name, lim, &t->data,
						    &t->group);
		else
			err = sl_group_create(pg, name, lim, &ops, t, &t->group);
	}
	pthread_mutex_lock(&c->tenants_lock);
	if (!err && !c->tree)
		err = shared_name_check(c, parent, name);
	if (!err) {
		t->next_all = c->tenants;
		if (c->tenants)
			c->tenants->prev_all = t;
		c->tenants = t;
		if (parent)
			parent->nr_children++;
	}
	pthread_mutex_unlock(&c->tenants_lock);
	if (err) {
		tenant_free(t);
		return err;
	}
	*out = t;
	return 0;
}

void lru_tenant_clear(struct lru_tenant *t)
{
	struct lru_item *chain = NULL;
	size_t i;

	if (!t)
		return;
	pthread_mutex_lock(t->lock);
	for (i = 0; i < t->nbuckets; i++) {
		while (t->buckets[i]) {
			struct lru_item *it = t->buckets[i];

			item_unlink(it, &t->buckets[i]);
			it->hnext = chain;
			chain = it;
		}
	}
	while (t->ghosts.oldest)
		ghost_drop_oldest(t);
	pthread_mutex_unlock(t->lock);
	dead_release(t, chain);
}

int lru_tenant_destroy(struct lru_tenant *t)
{
	struct lru_cache *c;
	int err;

	if (!t)
		return -EINVAL;
	c = t->cache;
	pthread_mutex_lock(&c->tenants_lock);
	err = t->nr_children ? -EBUSY : 0;
	pthread_mutex_unlock(&c->tenants_lock);
	if (err)
		return err;

	lru_tenant_clear(t);

	/* Once the group is gone no reclaim can be inside our callback (the
	 * library destroys a group only between reclaims), so t may go too. */
	if (t->group) {
		if (c->hooks.group_destroy)
			err = c->hooks.group_destroy(c->hooks_ctx, t, t->data);
		else
			err = sl_group_destroy(t->group);
		if (err)
			return err;
	}
	pthread_mutex_lock(&c->tenants_lock);
	if (t->prev_all)
		t->prev_all->next_all = t->next_all;
	else
		c->tenants = t->next_all;
	if (t->next_all)
		t->next_all->prev_all = t->prev_all;
	if (t->parent)
		t->parent->nr_children--;
	pthread_mutex_unlock(&c->tenants_lock);
	tenant_free(t);
	return 0;
}

sl_group *lru_tenant_group(struct lru_tenant *t)
{
	return t ? t->group : NULL;
}

void *lru_tenant_data(struct lru_tenant *t)
{
	return t ? t->data : NULL;
}

const char *lru_tenant_name(struct lru_tenant *t)
{
	return t ? t->name : NULL;
}

int lru_tenant_stats(struct lru_tenant *t, struct lru_stats *out)
{
	if (!t || !out)
		return -EINVAL;
	pthread_mutex_lock(t->lock);
	*out = t->st;
	out->ghosts = t->ghosts.count;
	pthread_mutex_unlock(t->lock);
	return 0;
}

void lru_tenant_note_reuse(struct lru_tenant *t, uint64_t bytes, uint64_t idle)
{
	uint64_t x = bytes * idle;

	/* Saturating: a sum that would wrap says "a lot", not "little". */
	if (idle && x / idle != bytes)
		x = UINT64_MAX;
	t->reused = t->reused + x < t->reused ? UINT64_MAX : t->reused + x;
	if (idle > t->reuse_max)
		t->reuse_max = idle;
}

int lru_tenant_take_reuse(struct lru_tenant *t, uint64_t *reused, uint64_t *max_idle)
{
	if (!t || !reused || !max_idle)
		return -EINVAL;
	pthread_mutex_lock(t->lock);
	*reused = t->reused;
	*max_idle = t->reuse_max;
	t->reused = t->reuse_max = 0;
	pthread_mutex_unlock(t->lock);
	return 0;
}

int lru_tenant_oldest(struct lru_tenant *t, struct lru_meta *out)
{
	int rc = -ENOENT;

	if (!t || !out)
		return -EINVAL;
	pthread_mutex_lock(t->lock);
	if (t->lru->tail) {
		*out = t->lru->tail->meta;
		rc = 0;
	}
	pthread_mutex_unlock(t->lock);
	return rc;
}

int lru_tenant_set_ghosts(struct lru_tenant *t, uint64_t reach)
{
	if (!t)
		return -EINVAL;
	if (!t->group)
		return -EOPNOTSUPP;
	pthread_mutex_lock(t->lock);
	ghosts_trim(t, reach);
	pthread_mutex_unlock(t->lock);
	return 0;
}

/* ---- get, set, delete ---- */

static bool key_ok(const void *key, size_t keylen)
{
	return key && keylen > 0 && keylen <= LRU_KEY_MAX;
}

/* Shared mode: evicts the global LRU tail until @size more bytes fit.
 * Caller holds the cache's lock and checked that @size <= capacity. */
static struct lru_item *shared_make_room(struct lru_cache *c, uint64_t size)
{
	struct lru_item *victims = NULL, *it;

	while (c->used + size > c->capacity && (it = c->lru.tail) != NULL) {
		item_unlink(it, NULL);
		it->owner->st.evictions++;
		it->owner->st.evicted_bytes += item_size(it);
		it->hnext = victims;
		victims = it;
	}
	return victims;
}

int lru_store(struct lru_tenant *t, const void *key, size_t keylen, const void *value,
	      size_t vlen, const struct lru_meta *meta, enum lru_cond cond, uint64_t *cas)
{
	struct lru_item *it, **pp, *old = NULL, *victims = NULL, *dead = NULL;
	uint64_t size;
	int err = 0;

	if (!t || !key_ok(key, keylen) || (!value && vlen) || vlen > LRU_VALUE_MAX ||
	    (unsigned)cond > LRU_IF_CAS || (cond == LRU_IF_CAS && !meta))
		return -EINVAL;
	size = lru_item_size(keylen, vlen);
	if (!t->group && size > t->cache->capacity)
		err = -ENOMEM;
	/* No lock held: this may reclaim, and reclaim may lock t. */
	it = err ? NULL : item_alloc(t, size);
	if (!it) {
		pthread_mutex_lock(t->lock);
		t->st.set_fails++;
		t->st.set_fail_bytes += size;
		pthread_mutex_unlock(t->lock);
		return -ENOMEM;
	}

	it->owner = t;
	it->hash = hash_key(key, keylen);
	it->keylen = (uint32_t)keylen;
	it->vlen = (uint32_t)vlen;
	if (meta)
		it->meta = *meta;
	else
		memset(&it->meta, 0, sizeof(it->meta));
	memcpy(it->data, key, keylen);
	if (vlen)
		memcpy(it->data + keylen, value, vlen);

	pthread_mutex_lock(t->lock);
	pp = find_live(t, it->hash, key, keylen, &dead);
	old = *pp;
	if (cond == LRU_IF_ABSENT && old) {
		lru_unlink(t->lru, old);
		lru_push_front(t->lru, old);
		err = -EEXIST;
	} else if ((cond == LRU_IF_PRESENT || cond == LRU_IF_CAS) && !old) {
		err = -ENOENT;
	} else if (cond == LRU_IF_CAS && old->meta.cas != meta->cas) {
		err = -EEXIST;
	}
	if (!err) {
		struct lru_ghost **gp;

		if (old)
			item_unlink(old, pp);
		/* Back by a write, not a read: no refault to wait for. */
		if (t->ghosts.count && (gp = ghost_find(&t->ghosts, it->hash)) != NULL)
			ghost_drop(t, gp);
		if (!t->group)
			victims = shared_make_room(t->cache, size);
		/* Relaxed: a unique number is all it is; the lock orders the item. */
		it->meta.cas = atomic_fetch_add_explicit(&t->cache->next_cas, 1,
							 memory_order_relaxed) + 1;
		if (cas)
			*cas = it->meta.cas;
		item_link(t, it);
		t->st.sets++;
	}
	pthread_mutex_unlock(t->lock);

	dead_release(t, dead);
	if (err) {
		item_free(t, it, size);
		return err;
	}
	if (old)
		dead_release(t, old);
	items_release(NULL, victims);
	/* The safe point for high: out of every lock, on the way out. */
	if (t->group && sl_high_pending())
		sl_handle_over_high(t->group);
	return 0;
}

int lru_set(struct lru_tenant *t, const void *key, size_t keylen, const void *value, size_t vlen)
{
	return lru_store(t, key, keylen, value, vlen, NULL, LRU_ALWAYS, NULL);
}

int lru_visit(struct lru_tenant *t, const void *key, size_t keylen, unsigned flags,
	      lru_visit_fn fn, void *arg)
{
	struct lru_item *it, *dead = NULL;
	uint64_t hash, refault = 0;
	int err = 0;

	if (!t || !key_ok(key, keylen) || !fn)
		return -EINVAL;
	hash = hash_key(key, keylen);
	pthread_mutex_lock(t->lock);
	it = *find_live(t, hash, key, keylen, &dead);
	if (it) {
		uint64_t cas = it->meta.cas;

		lru_unlink(t->lru, it);
		lru_push_front(t->lru, it);
		fn(arg, &it->meta, it->data + it->keylen, it->vlen);
		it->meta.cas = cas;
		if (!(flags & LRU_VISIT_NOSTATS))
			t->st.hits++;
	} else {
		if (!(flags & LRU_VISIT_NOSTATS)) {
			t->st.misses++;
			if (t->ghosts.count && (refault = ghost_take(t, hash)) != 0) {
				t->st.refaults++;
				t->st.refault_bytes += refault;
			}
		}
		err = -ENOENT;
	}
	pthread_mutex_unlock(t->lock);
	dead_release(t, dead);
	/* Out of the lock: the library counts it up the tenant's path. */
	if (refault)
		sl_refault(t->group, 1);
	return err;
}

struct get_copy {
	void *buf;
	size_t size, *vlen;
};

static void get_copy(void *arg, struct lru_meta *meta, const void *value, size_t vlen)
{
	struct get_copy *g = arg;

	(void)meta;
	if (g->size)
		memcpy(g->buf, value, g->size < vlen ? g->size : vlen);
	if (g->vlen)
		*g->vlen = vlen;
}

int lru_get(struct lru_tenant *t, const void *key, size_t keylen, void *buf, size_t size,
	    size_t *vlen)
{
	struct get_copy g = { buf, size, vlen };

	if (!buf && size)
		return -EINVAL;
	return lru_visit(t, key, keylen, 0, get_copy, &g);
}

int lru_delete_cas(struct lru_tenant *t, const void *key, size_t keylen, uint64_t cas)
{
	struct lru_item **pp, *it, *dead = NULL;
	int err = 0;

	if (!t || !key_ok(key, keylen))
		return -EINVAL;
	pthread_mutex_lock(t->lock);
	pp = find_live(t, hash_key(key, keylen), key, keylen, &dead);
	it = *pp;
	if (!it)
		err = -ENOENT;
	else if (cas && it->meta.cas != cas)
		err = -EEXIST;
	else
		item_unlink(it, pp);
	pthread_mutex_unlock(t->lock);
	dead_release(t, dead);
	if (!err)
		dead_release(t, it);
	return err;
}

int lru_delete(struct lru_tenant *t, const void *key, size_t keylen)
{
	return lru_delete_cas(t, key, keylen, 0);
}
