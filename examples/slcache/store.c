/* SPDX-License-Identifier: MIT */
/*
 * store: slcache's multi-tenant item store.  See store.h.
 *
 * Each tenant has a chained hash table and an LRU list (head = most recently
 * used) under its mutex.  The rule that shapes everything, as in
 * examples/lru_cache: allocating an item may reclaim in the calling thread,
 * and reclaim locks whichever tenant softlimit picks, so items are
 * allocated before any lock is taken, and freed after it is dropped.
 * Conditional updates (append, incr, cas) read under the lock, allocate
 * unlocked, then relock and check that the item is still the one they read
 * (its cas unique is never reused) before swapping it in.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SLCACHE_JEMALLOC
#include <softlimit/jemalloc.h>
#endif

struct item {
	struct item *hnext;         /* hash chain, or a chain of items to free      */
	struct item *prev, *next;   /* LRU list; prev is toward the head (newer)    */
	struct tenant *owner;
	uint64_t hash;
	uint64_t cas;
	int64_t exptime;            /* absolute unix time; 0 = never               */
	int64_t stored;             /* when it was stored (for delayed flush_all)  */
	uint32_t flags;
	uint32_t vlen;
	uint8_t keylen;
	unsigned char data[];       /* the key, then the value                     */
};

struct lru_list {
	struct item *head, *tail;
};

enum backend { BE_SHARED, BE_MALLOC, BE_JEMALLOC };

struct tenant {
	struct store *s;
	char *name;
	size_t namelen;
	sl_group *group; /* NULL without accounting */
#ifdef SLCACHE_JEMALLOC
	sl_jemalloc *arena;
#endif
	pthread_mutex_t own_lock;
	pthread_mutex_t *lock; /* &own_lock, or the store's lock without accounting */
	struct lru_list own_lru;
	struct lru_list *lru;
	struct item **buckets; /* under *lock; a power of two */
	size_t nbuckets;
	uint64_t items, bytes, hits, misses, evictions; /* under *lock */
};

struct store {
	enum backend be;
	sl_tree *tree;
	size_t item_max;
	unsigned max_tenants;
	_Atomic uint64_t next_cas;
	_Atomic int64_t flush_at; /* delayed flush_all deadline, 0 = none */

	pthread_mutex_t tenants_lock;  /* creation; the array below */
	struct tenant **tenants;       /* max_tenants of them */
	_Atomic unsigned nr_tenants;
	_Atomic(struct tenant *) *slots; /* open addressing by name, lock-free lookup */
	size_t nslots;
	struct tenant *dflt;

	/* Without accounting, all under lock. */
	pthread_mutex_t lock;
	struct lru_list lru;
	uint64_t capacity, used;
};

#define BUCKETS_MIN 64
#define REALTIME_MAXDELTA (60 * 60 * 24 * 30) /* memcached: larger is absolute time */

const char *store_backend(const struct store *s)
{
	switch (s->be) {
	case BE_JEMALLOC:
		return "jemalloc";
	case BE_MALLOC:
		return "malloc";
	default:
		return "shared-lru";
	}
}

/* ---- sizes, hashing, time ---- */

static uint64_t item_size_of(size_t keylen, size_t vlen)
{
	return (uint64_t)sizeof(struct item) + keylen + vlen;
}

static uint64_t item_size(const struct item *it)
{
	return item_size_of(it->keylen, it->vlen);
}

static uint64_t hash_bytes(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t h = UINT64_C(14695981039346656037);

	while (len--) {
		h ^= *b++;
		h *= UINT64_C(1099511628211);
	}
	return h ^ (h >> 29);
}

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

/* memcached's exptime: 0 never, negative already expired, up to 30 days
 * relative, beyond that an absolute unix time. */
static int64_t realtime(int64_t exptime, int64_t now)
{
	if (exptime == 0)
		return 0;
	if (exptime < 0)
		return 1;
	if (exptime > REALTIME_MAXDELTA)
		return exptime <= now ? 1 : exptime;
	return now + exptime;
}

static int item_live(struct store *s, const struct item *it, int64_t now)
{
	int64_t fa = atomic_load_explicit(&s->flush_at, memory_order_relaxed);

	if (it->exptime != 0 && it->exptime <= now)
		return 0;
	if (fa != 0 && now >= fa && it->stored < fa)
		return 0;
	return 1;
}

/* ---- allocation: the only two functions that get or give item memory ---- */

/* May reclaim (any tenant, this one included): call with no lock held. */
static struct item *item_alloc(struct tenant *t, size_t keylen, size_t vlen)
{
	uint64_t size = item_size_of(keylen, vlen);
	struct item *it;

	switch (t->s->be) {
#ifdef SLCACHE_JEMALLOC
	case BE_JEMALLOC:
		it = sl_jemalloc_alloc(t->arena, (size_t)size);
		break;
#endif
	case BE_MALLOC:
		if (sl_charge(t->group, size, 0) != 0)
			return NULL;
		it = malloc((size_t)size);
		if (!it)
			sl_uncharge(t->group, size);
		break;
	default:
		it = malloc((size_t)size);
		break;
	}
	if (it) {
		it->owner = t;
		it->keylen = (uint8_t)keylen;
		it->vlen = (uint32_t)vlen;
		it->hnext = it->prev = it->next = NULL;
	}
	return it;
}

static void item_free(struct item *it)
{
	struct tenant *t = it->owner;

	switch (t->s->be) {
#ifdef SLCACHE_JEMALLOC
	case BE_JEMALLOC:
		sl_jemalloc_free(t->arena, it);
		break;
#endif
	case BE_MALLOC: {
		uint64_t size = item_size(it);

		free(it);
		sl_uncharge(t->group, size);
		break;
	}
	default:
		free(it);
		break;
	}
}

/* What freeing @it gives back to its group, for the eviction target. */
static uint64_t item_charge(const struct item *it)
{
#ifdef SLCACHE_JEMALLOC
	if (it->owner->s->be == BE_JEMALLOC)
		return sl_jemalloc_usable_size(it);
#endif
	return item_size(it);
}

/* Frees a chain of unlinked items (through hnext), with no lock held. */
static void release(struct item *chain)
{
	struct item *it, *next;

	for (it = chain; it; it = next) {
		next = it->hnext;
		item_free(it);
	}
}

/* ---- tables and lists (caller holds the tenant's lock) ---- */

static void lru_unlink(struct lru_list *l, struct item *it)
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

static void lru_push_front(struct lru_list *l, struct item *it)
{
	it->prev = NULL;
	it->next = l->head;
	if (l->head)
		l->head->prev = it;
	else
		l->tail = it;
	l->head = it;
}

static void lru_bump(struct tenant *t, struct item *it)
{
	if (t->lru->head != it) {
		lru_unlink(t->lru, it);
		lru_push_front(t->lru, it);
	}
}

static struct item **bucket_of(struct tenant *t, uint64_t hash)
{
	return &t->buckets[hash & (t->nbuckets - 1)];
}

static struct item **table_find(struct tenant *t, uint64_t hash, const char *key, size_t keylen)
{
	struct item **pp = bucket_of(t, hash);

	for (; *pp; pp = &(*pp)->hnext) {
		struct item *it = *pp;

		if (it->hash == hash && it->keylen == keylen && memcmp(it->data, key, keylen) == 0)
			break;
	}
	return pp;
}

static void table_grow(struct tenant *t)
{
	size_t n = t->nbuckets * 2, i;
	struct item **nb;

	if (t->items <= t->nbuckets || n < t->nbuckets)
		return;
	nb = calloc(n, sizeof(*nb)); /* plain malloc: never reclaims */
	if (!nb)
		return;
	for (i = 0; i < t->nbuckets; i++) {
		struct item *it = t->buckets[i], *next;

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

static void item_link(struct tenant *t, struct item *it)
{
	struct item **pp = bucket_of(t, it->hash);

	it->hnext = *pp;
	*pp = it;
	lru_push_front(t->lru, it);
	t->items++;
	t->bytes += item_size(it);
	if (t->s->be == BE_SHARED)
		t->s->used += item_size(it);
	table_grow(t);
}

/* Unlinks @it from its owner (@pp: its hash link, or NULL to look it up)
 * and pushes it on *@chain for release(). */
static void item_unlink(struct item *it, struct item **pp, struct item **chain)
{
	struct tenant *o = it->owner;

	if (!pp)
		for (pp = bucket_of(o, it->hash); *pp != it; pp = &(*pp)->hnext)
			;
	*pp = it->hnext;
	lru_unlink(o->lru, it);
	o->items--;
	o->bytes -= item_size(it);
	if (o->s->be == BE_SHARED)
		o->s->used -= item_size(it);
	it->hnext = *chain;
	*chain = it;
}

/* The link of the live item under @key (or of the chain's end); an expired
 * or flushed item found there is unlinked onto *@dead. */
static struct item **find_live(struct tenant *t, uint64_t hash, const char *key, size_t keylen,
			       int64_t now, struct item **dead)
{
	struct item **pp = table_find(t, hash, key, keylen);

	if (*pp && !item_live(t->s, *pp, now)) {
		item_unlink(*pp, pp, dead);
		pp = table_find(t, hash, key, keylen);
	}
	return pp;
}

/* Without accounting: evict the global LRU tail until @size more bytes fit.
 * Caller holds the store's lock. */
static void shared_make_room(struct store *s, uint64_t size, struct item **chain)
{
	struct item *it;

	while (s->used + size > s->capacity && (it = s->lru.tail) != NULL) {
		it->owner->evictions++;
		item_unlink(it, NULL, chain);
	}
}

static uint64_t next_cas(struct store *s)
{
	return atomic_fetch_add_explicit(&s->next_cas, 1, memory_order_relaxed) + 1;
}

/* ---- reclaim: evict a tenant's least recently used items ---- */

static uint64_t tenant_evict(struct tenant *t, uint64_t target)
{
	struct item *victims = NULL, *it;
	uint64_t freed = 0;

	pthread_mutex_lock(t->lock);
	while (freed < target && (it = t->lru->tail) != NULL) {
		freed += item_charge(it);
		t->evictions++;
		item_unlink(it, NULL, &victims);
	}
	pthread_mutex_unlock(t->lock);
	release(victims);
	return freed;
}

static uint64_t group_reclaim(sl_group *g, uint64_t target, void *ctx)
{
	(void)g;
	return tenant_evict(ctx, target);
}

#ifdef SLCACHE_JEMALLOC
static uint64_t arena_evict(sl_jemalloc *a, uint64_t target, void *ctx)
{
	(void)a;
	return tenant_evict(ctx, target);
}
#endif

/* ---- tenants ---- */

static int name_ok(const char *name, size_t len)
{
	size_t i;

	if (len == 0 || len > SL_NAME_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c <= 0x20 || c >= 0x7f || c == '/')
			return 0;
	}
	return 1;
}

static void tenant_free(struct tenant *t)
{
	size_t i;

	for (i = 0; t->buckets && i < t->nbuckets; i++) {
		struct item *it = t->buckets[i], *next;

		for (; it; it = next) {
			next = it->hnext;
			item_free(it);
		}
	}
#ifdef SLCACHE_JEMALLOC
	if (t->arena)
		sl_jemalloc_destroy(t->arena);
#endif
	pthread_mutex_destroy(&t->own_lock);
	free(t->buckets);
	free(t->name);
	free(t);
}

static struct tenant *slot_lookup(struct store *s, const char *name, size_t len, size_t *slot)
{
	size_t mask = s->nslots - 1, i = hash_bytes(name, len) & mask;
	struct tenant *t;

	for (;; i = (i + 1) & mask) {
		t = atomic_load_explicit(&s->slots[i], memory_order_acquire);
		if (!t || (t->namelen == len && memcmp(t->name, name, len) == 0))
			break;
	}
	if (slot)
		*slot = i;
	return t;
}

/* Creates and publishes a tenant; caller holds tenants_lock and checked
 * that it does not exist and that there is room. */
static int tenant_create(struct store *s, const char *name, size_t len,
			 const struct sl_limits *lim, struct tenant **out)
{
	struct tenant *t = calloc(1, sizeof(*t));
	size_t slot;
	int err = 0;

	if (!t)
		return -ENOMEM;
	t->s = s;
	t->name = malloc(len + 1);
	t->namelen = len;
	t->nbuckets = BUCKETS_MIN;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	pthread_mutex_init(&t->own_lock, NULL);
	t->lock = s->be == BE_SHARED ? &s->lock : &t->own_lock;
	t->lru = s->be == BE_SHARED ? &s->lru : &t->own_lru;
	if (!t->name || !t->buckets) {
		tenant_free(t);
		return -ENOMEM;
	}
	memcpy(t->name, name, len);
	t->name[len] = '\0';

	/* The tenant is whole before its group exists: reclaim may call it at once. */
#ifdef SLCACHE_JEMALLOC
	if (s->be == BE_JEMALLOC) {
		static const struct sl_jemalloc_ops jops = { .evict = arena_evict };

		err = sl_jemalloc_create(sl_tree_root(s->tree), t->name, lim, &jops, t, &t->arena);
		if (err == -ENOTSUP && s->nr_tenants == 0) {
			/* No usable jemalloc in this process: fall back to malloc. */
			s->be = BE_MALLOC;
		} else if (!err) {
			t->group = sl_jemalloc_group(t->arena);
		}
	}
#endif
	if (s->be == BE_MALLOC) {
		static const struct sl_ops ops = { .reclaim = group_reclaim };

		err = sl_group_create(sl_tree_root(s->tree), t->name, lim, &ops, t, &t->group);
	}
	if (err) {
		tenant_free(t);
		return err;
	}
	slot_lookup(s, name, len, &slot);
	s->tenants[s->nr_tenants] = t;
	atomic_store_explicit(&s->nr_tenants, s->nr_tenants + 1, memory_order_release);
	atomic_store_explicit(&s->slots[slot], t, memory_order_release);
	*out = t;
	return 0;
}

int store_tenant_declare(struct store *s, const char *name, const struct sl_limits *lim)
{
	size_t len = name ? strlen(name) : 0;
	struct tenant *t;
	int err = 0;

	if (!s || !name_ok(name, len))
		return -EINVAL;
	pthread_mutex_lock(&s->tenants_lock);
	t = slot_lookup(s, name, len, NULL);
	if (t) {
		if (t->group && lim)
			err = sl_group_set_limits(t->group, lim);
	} else if (s->nr_tenants >= s->max_tenants) {
		err = -ENOSPC;
	} else {
		err = tenant_create(s, name, len, lim, &t);
	}
	pthread_mutex_unlock(&s->tenants_lock);
	return err;
}

struct tenant *store_tenant_for_key(struct store *s, const char *key, size_t keylen)
{
	const char *colon = memchr(key, ':', keylen);
	size_t len;
	struct tenant *t;

	if (!colon)
		return s->dflt;
	len = (size_t)(colon - key);
	if (!name_ok(key, len))
		return s->dflt;
	t = slot_lookup(s, key, len, NULL);
	if (t)
		return t;
	if (atomic_load_explicit(&s->nr_tenants, memory_order_relaxed) >= s->max_tenants)
		return s->dflt;
	pthread_mutex_lock(&s->tenants_lock);
	t = slot_lookup(s, key, len, NULL);
	if (!t && (s->nr_tenants >= s->max_tenants || tenant_create(s, key, len, NULL, &t) != 0))
		t = s->dflt;
	pthread_mutex_unlock(&s->tenants_lock);
	return t;
}

/* ---- the store ---- */

int store_create(const struct store_opts *opts, struct store **out)
{
	struct store *s;
	int err;

	if (!opts || !out || opts->max_bytes == 0 || opts->max_tenants == 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->item_max = opts->item_max;
	s->max_tenants = opts->max_tenants;
	s->capacity = opts->max_bytes;
	pthread_mutex_init(&s->tenants_lock, NULL);
	pthread_mutex_init(&s->lock, NULL);
	for (s->nslots = 16; s->nslots < 2 * (size_t)opts->max_tenants + 2; s->nslots *= 2)
		;
	s->tenants = calloc(opts->max_tenants, sizeof(*s->tenants));
	s->slots = calloc(s->nslots, sizeof(*s->slots));
	if (!s->tenants || !s->slots) {
		store_destroy(s);
		return -ENOMEM;
	}
	if (opts->accounting) {
		struct sl_tree_opts to;

		sl_tree_opts_init(&to);
		to.policy = opts->policy;
		to.root.max = opts->max_bytes;
		err = sl_tree_create(&to, &s->tree);
		if (err) {
			store_destroy(s);
			return err;
		}
#ifdef SLCACHE_JEMALLOC
		s->be = opts->arenas ? BE_JEMALLOC : BE_MALLOC;
#else
		s->be = BE_MALLOC;
#endif
	} else {
		s->be = BE_SHARED;
	}
	err = store_tenant_declare(s, STORE_DEFAULT_TENANT, NULL);
	if (err) {
		store_destroy(s);
		return err;
	}
	s->dflt = s->tenants[0];
	*out = s;
	return 0;
}

void store_destroy(struct store *s)
{
	unsigned i;

	if (!s)
		return;
	/* Items first (their frees uncharge), then arenas and groups. */
	for (i = 0; s->tenants && i < s->nr_tenants; i++)
		tenant_free(s->tenants[i]);
	sl_tree_destroy(s->tree);
	free(s->tenants);
	free(s->slots);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->tenants_lock);
	free(s);
}

/* ---- commands ---- */

static void after_store(struct tenant *t)
{
	/* The safe point for high: out of every lock, on the way out. */
	if (t->group && sl_high_pending())
		sl_handle_over_high(t->group);
}

enum store_result store_get(struct tenant *t, const char *key, size_t keylen, store_emit_fn emit,
			    void *arg)
{
	uint64_t hash = hash_bytes(key, keylen);
	struct item *dead = NULL, *it;
	enum store_result r = ST_NOT_FOUND;

	pthread_mutex_lock(t->lock);
	it = *find_live(t, hash, key, keylen, now_s(), &dead);
	if (it) {
		lru_bump(t, it);
		t->hits++;
		emit(arg, key, keylen, it->flags, it->data + it->keylen, it->vlen, it->cas);
		r = ST_OK;
	} else {
		t->misses++;
	}
	pthread_mutex_unlock(t->lock);
	release(dead);
	return r;
}

enum store_result store_delete(struct tenant *t, const char *key, size_t keylen)
{
	uint64_t hash = hash_bytes(key, keylen);
	struct item *chain = NULL, **pp;
	enum store_result r = ST_NOT_FOUND;

	pthread_mutex_lock(t->lock);
	pp = find_live(t, hash, key, keylen, now_s(), &chain);
	if (*pp) {
		item_unlink(*pp, pp, &chain);
		r = ST_DELETED;
	}
	pthread_mutex_unlock(t->lock);
	release(chain);
	return r;
}

enum store_result store_touch(struct tenant *t, const char *key, size_t keylen, int64_t exptime)
{
	uint64_t hash = hash_bytes(key, keylen);
	struct item *dead = NULL, *it;
	int64_t now = now_s();
	enum store_result r = ST_NOT_FOUND;

	pthread_mutex_lock(t->lock);
	it = *find_live(t, hash, key, keylen, now, &dead);
	if (it) {
		it->exptime = realtime(exptime, now);
		lru_bump(t, it);
		r = ST_TOUCHED;
	}
	pthread_mutex_unlock(t->lock);
	release(dead);
	return r;
}

static int shared_fits(struct tenant *t, uint64_t size)
{
	return t->s->be != BE_SHARED || size <= t->s->capacity;
}

/* append/prepend: read, allocate unlocked, swap in if the item did not change. */
static enum store_result store_concat(struct tenant *t, int prepend, const char *key,
				      size_t keylen, const void *data, size_t vlen)
{
	uint64_t hash = hash_bytes(key, keylen);
	unsigned tries;

	for (tries = 0; tries < 16; tries++) {
		struct item *chain = NULL, **pp, *old, *it;
		uint64_t oldcas;
		size_t oldv;
		int64_t now = now_s();

		pthread_mutex_lock(t->lock);
		old = *find_live(t, hash, key, keylen, now, &chain);
		oldcas = old ? old->cas : 0;
		oldv = old ? old->vlen : 0;
		pthread_mutex_unlock(t->lock);
		release(chain);
		chain = NULL;
		if (!old)
			return ST_NOT_STORED;
		if (oldv + vlen > t->s->item_max)
			return ST_TOO_LARGE;
		if (!shared_fits(t, item_size_of(keylen, oldv + vlen)))
			return ST_NOMEM;
		it = item_alloc(t, keylen, oldv + vlen);
		if (!it)
			return ST_NOMEM;

		pthread_mutex_lock(t->lock);
		pp = find_live(t, hash, key, keylen, now, &chain);
		old = *pp;
		if (old && old->cas == oldcas && old->vlen == oldv) {
			unsigned char *v = it->data + keylen;

			it->hash = hash;
			memcpy(it->data, key, keylen);
			memcpy(v + (prepend ? vlen : 0), old->data + old->keylen, oldv);
			memcpy(v + (prepend ? 0 : oldv), data, vlen);
			it->flags = old->flags;
			it->exptime = old->exptime;
			it->stored = now;
			it->cas = next_cas(t->s);
			item_unlink(old, pp, &chain);
			if (t->s->be == BE_SHARED)
				shared_make_room(t->s, item_size(it), &chain);
			item_link(t, it);
			it = NULL;
		}
		pthread_mutex_unlock(t->lock);
		release(chain);
		if (!it) {
			after_store(t);
			return ST_STORED;
		}
		item_free(it); /* it changed under us: read again */
	}
	return ST_NOT_STORED;
}

enum store_result store_update(struct tenant *t, enum store_mode mode, const char *key,
			       size_t keylen, uint32_t flags, int64_t exptime, const void *data,
			       size_t vlen, uint64_t cas)
{
	uint64_t hash;
	struct item *chain = NULL, **pp, *old, *it;
	enum store_result r = ST_STORED;
	int64_t now;

	if (vlen > t->s->item_max)
		return ST_TOO_LARGE;
	if (mode == SM_APPEND || mode == SM_PREPEND)
		return store_concat(t, mode == SM_PREPEND, key, keylen, data, vlen);

	hash = hash_bytes(key, keylen);
	it = shared_fits(t, item_size_of(keylen, vlen)) ? item_alloc(t, keylen, vlen) : NULL;
	if (!it) {
		/* As memcached: a failed set must not leave the stale value behind. */
		if (mode == SM_SET)
			store_delete(t, key, keylen);
		return ST_NOMEM;
	}
	now = now_s();
	it->hash = hash;
	it->flags = flags;
	it->exptime = realtime(exptime, now);
	it->stored = now;
	memcpy(it->data, key, keylen);
	memcpy(it->data + keylen, data, vlen);

	pthread_mutex_lock(t->lock);
	pp = find_live(t, hash, key, keylen, now, &chain);
	old = *pp;
	switch (mode) {
	case SM_ADD:
		if (old) {
			lru_bump(t, old); /* memcached bumps the existing item */
			r = ST_NOT_STORED;
		}
		break;
	case SM_REPLACE:
		if (!old)
			r = ST_NOT_STORED;
		break;
	case SM_CAS:
		if (!old)
			r = ST_NOT_FOUND;
		else if (old->cas != cas)
			r = ST_EXISTS;
		break;
	default:
		break;
	}
	if (r == ST_STORED) {
		if (old)
			item_unlink(old, pp, &chain);
		if (t->s->be == BE_SHARED)
			shared_make_room(t->s, item_size(it), &chain);
		it->cas = next_cas(t->s);
		item_link(t, it);
		it = NULL;
	}
	pthread_mutex_unlock(t->lock);
	release(chain);
	if (it)
		item_free(it);
	else
		after_store(t);
	return r;
}

/* A value incr/decr accepts: 1..20 digits, optionally followed by the
 * spaces memcached pads shrunk numbers with. */
static int parse_counter(const unsigned char *v, size_t len, uint64_t *out)
{
	uint64_t x = 0;
	size_t i = 0;

	if (len == 0)
		return 0;
	for (; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
		unsigned d = v[i] - '0';

		if (x > (UINT64_MAX - d) / 10)
			return 0;
		x = x * 10 + d;
	}
	if (i == 0)
		return 0;
	for (; i < len; i++)
		if (v[i] != ' ')
			return 0;
	*out = x;
	return 1;
}

enum store_result store_arith(struct tenant *t, const char *key, size_t keylen, bool incr,
			      uint64_t delta, uint64_t *out)
{
	uint64_t hash = hash_bytes(key, keylen);
	unsigned tries;

	for (tries = 0; tries < 16; tries++) {
		struct item *chain = NULL, **pp, *old, *it;
		uint64_t val, oldcas;
		char buf[24];
		size_t len = 0;
		int64_t now = now_s();
		enum store_result r = ST_OK;

		pthread_mutex_lock(t->lock);
		old = *find_live(t, hash, key, keylen, now, &chain);
		if (!old) {
			r = ST_NOT_FOUND;
		} else if (!parse_counter(old->data + old->keylen, old->vlen, &val)) {
			r = ST_NON_NUMERIC;
		} else {
			val = incr ? val + delta : (delta > val ? 0 : val - delta);
			len = (size_t)snprintf(buf, sizeof(buf), "%" PRIu64, val);
			*out = val;
			if (len == old->vlen) { /* same length: in place */
				memcpy(old->data + old->keylen, buf, len);
				old->cas = next_cas(t->s);
				lru_bump(t, old);
				r = ST_STORED;
			}
		}
		oldcas = old ? old->cas : 0;
		pthread_mutex_unlock(t->lock);
		release(chain);
		chain = NULL;
		if (r == ST_STORED)
			return ST_OK;
		if (r != ST_OK)
			return r;

		it = item_alloc(t, keylen, len);
		if (!it)
			return ST_NOMEM;
		pthread_mutex_lock(t->lock);
		pp = find_live(t, hash, key, keylen, now, &chain);
		old = *pp;
		if (old && old->cas == oldcas) {
			it->hash = hash;
			memcpy(it->data, key, keylen);
			memcpy(it->data + keylen, buf, len);
			it->flags = old->flags;
			it->exptime = old->exptime;
			it->stored = now;
			it->cas = next_cas(t->s);
			item_unlink(old, pp, &chain);
			if (t->s->be == BE_SHARED)
				shared_make_room(t->s, item_size(it), &chain);
			item_link(t, it);
			it = NULL;
		}
		pthread_mutex_unlock(t->lock);
		release(chain);
		if (!it) {
			after_store(t);
			return ST_OK;
		}
		item_free(it);
	}
	return ST_NOT_FOUND;
}

void store_flush(struct store *s, int64_t delay)
{
	unsigned i, n = atomic_load_explicit(&s->nr_tenants, memory_order_acquire);

	if (delay > 0) {
		atomic_store_explicit(&s->flush_at, now_s() + delay, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&s->flush_at, 0, memory_order_relaxed);
	for (i = 0; i < n; i++) {
		struct tenant *t = s->tenants[i];
		struct item *chain = NULL, *it;

		pthread_mutex_lock(t->lock);
		while ((it = t->lru->tail) != NULL)
			item_unlink(it, NULL, &chain);
		pthread_mutex_unlock(t->lock);
		release(chain);
	}
}

static void tenant_snapshot(struct tenant *t, struct tenant_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(t->lock);
	st->items = t->items;
	st->bytes = t->bytes;
	st->hits = t->hits;
	st->misses = t->misses;
	st->evictions = t->evictions;
	pthread_mutex_unlock(t->lock);
	if (t->group) {
		struct sl_stats gs;

		if (sl_group_stats(t->group, &gs) == 0) {
			st->usage = gs.usage;
			st->soft = gs.limits.soft;
			st->max = gs.limits.max;
			st->events_low = gs.events_low;
			st->events_high = gs.events_high;
			st->events_max = gs.events_max;
			st->events_oom = gs.events_oom;
		}
	} else {
		st->usage = t->bytes;
		st->max = SL_UNLIMITED;
	}
}

void store_tenant_stats(struct store *s, store_tenant_fn fn, void *arg)
{
	unsigned i, n = atomic_load_explicit(&s->nr_tenants, memory_order_acquire);

	for (i = 0; i < n; i++) {
		struct tenant_stats st;

		tenant_snapshot(s->tenants[i], &st);
		fn(arg, s->tenants[i]->name, &st);
	}
}

void store_totals(struct store *s, struct tenant_stats *out)
{
	unsigned i, n = atomic_load_explicit(&s->nr_tenants, memory_order_acquire);

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n; i++) {
		struct tenant_stats st;

		tenant_snapshot(s->tenants[i], &st);
		out->items += st.items;
		out->bytes += st.bytes;
		out->hits += st.hits;
		out->misses += st.misses;
		out->evictions += st.evictions;
	}
	if (s->tree) {
		struct sl_stats gs;

		if (sl_group_stats(sl_tree_root(s->tree), &gs) == 0) {
			out->usage = gs.usage;
			out->max = gs.limits.max;
		}
	} else {
		pthread_mutex_lock(&s->lock);
		out->usage = s->used;
		pthread_mutex_unlock(&s->lock);
		out->max = s->capacity;
	}
}
