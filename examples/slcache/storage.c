/* SPDX-License-Identifier: MIT */
/*
 * storage.c: memcached's item semantics over examples/lru_cache.  See
 * storage.h.
 *
 * lru_cache stores, evicts and accounts; an item's lru_meta carries what
 * memcached adds: the client flags, the absolute expiry time, when it was
 * stored and last read, and whether it was read.  The cache asks
 * item_live() whether an item it meets is still there (expired, or hidden
 * by a delayed flush_all) and frees it when not.
 *
 * Read-modify-write commands (append, prepend, incr, decr) copy the item
 * out, build the new value with no lock held (allocating it may reclaim),
 * and store it only if the item's cas is still the one they read
 * (LRU_IF_CAS), retrying when another client got there first.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "slcache.h"
#include "storage.h"
#include "tenants.h"

#define REALTIME_MAXDELTA (60 * 60 * 24 * 30) /* memcached: larger is absolute time */
#define RMW_TRIES 64
#define META_FETCHED 1u
#define META_WON 2u   /* the win token was handed out (mg W, then Z)  */
#define META_STALE 4u /* invalidated by md I or ms I                   */
#define META_BINKEY 8u /* the key came in base64 (ms b)               */

static size_t item_max;
static int64_t started_at;
static _Atomic int64_t flush_at; /* a delayed flush_all's deadline, 0 = none */
/* Tenants with a delayed flush_all of their own pending: while none, no
 * key looks its tenant's deadline up. */
static _Atomic unsigned tenant_flushes;
/* The connection this worker thread serves: its tenant, which the first key
 * it uses sets (store_bind()).  Thread-local so that every command reaches
 * it without the storage calls taking the connection. */
static _Thread_local struct lru_tenant **bound;

int64_t store_now(void)
{
	return (int64_t)time(NULL);
}

size_t store_item_total(size_t keylen, uint32_t flags, size_t vlen)
{
	return 48 + 8 + keylen + 1 + (flags ? 4 : 0) + vlen + 2;
}

int64_t store_realtime(int64_t exptime)
{
	int64_t now = store_now();

	if (exptime == 0)
		return 0;
	if (exptime < 0)
		return 1;
	if (exptime > REALTIME_MAXDELTA)
		return exptime <= now ? 1 : exptime > UINT32_MAX ? UINT32_MAX : exptime;
	return now + exptime;
}

int64_t store_ttl(int64_t exptime)
{
	/* memcached keeps an expiry as seconds since its start (1: expired
	 * at the start) and prints what is left as an unsigned 32-bit
	 * number: an item that has expired shows a huge one, not a negative. */
	if (exptime == 0)
		return -1;
	return (uint32_t)((exptime == 1 ? started_at + 1 : exptime) - store_now());
}

/* A tenant's delayed flush_all, done by the first command to reach the
 * tenant once its time has come (before that command reads or stores). */
static void tenant_flush_due(struct lru_tenant *t)
{
	_Atomic int64_t *at = tenant_flush_at(t);
	int64_t due = atomic_load_explicit(at, memory_order_relaxed);

	if (due == 0 || store_now() < due)
		return;
	if (atomic_compare_exchange_strong_explicit(at, &due, 0, memory_order_relaxed,
						    memory_order_relaxed)) {
		atomic_fetch_sub_explicit(&tenant_flushes, 1, memory_order_relaxed);
		lru_tenant_clear(t);
	}
}

/* The tenant of @key; the served connection is bound to it if it was not
 * yet bound. */
static struct lru_tenant *tenant_of(const char *key, size_t keylen)
{
	struct lru_tenant *t = tenant_for_key(key, keylen);

	if (bound && !*bound)
		*bound = t;
	if (atomic_load_explicit(&tenant_flushes, memory_order_relaxed))
		tenant_flush_due(t);
	return t;
}

void store_bind(struct lru_tenant **tenant)
{
	bound = tenant;
}

/* Called by the cache under a tenant's lock. */
static bool item_live(void *ctx, const struct lru_meta *m)
{
	/* Relaxed: flush_all's deadline orders nothing else. */
	int64_t now = store_now(), fa = atomic_load_explicit(&flush_at, memory_order_relaxed);

	(void)ctx;
	if (m->exptime != 0 && m->exptime <= now)
		return false;
	return fa == 0 || now < fa || m->stored >= fa;
}

int store_start(size_t max)
{
	item_max = max;
	/* memcached's clock starts 62 s before the process (ITEM_UPDATE_INTERVAL
	 * + 2): an absolute time in that span is after its start too. */
	started_at = store_now() - 62;
	return tenants_start(item_live);
}

void store_stop(void)
{
	tenants_stop();
}

static struct lru_meta new_meta(uint32_t flags, int64_t exptime, uint64_t cas)
{
	struct lru_meta m = { .cas = cas, .flags = flags };

	m.exptime = (uint32_t)store_realtime(exptime);
	m.stored = m.atime = (uint32_t)store_now();
	return m;
}

/* ---- reads ---- */

struct read_ctx {
	const struct store_read *how;
	store_emit_fn emit;
	void *arg;
	struct lru_tenant *t;
	size_t keylen;
};

static void read_item(void *arg, struct lru_meta *m, const void *value, size_t vlen)
{
	struct read_ctx *r = arg;
	const struct store_read *how = r->how;
	struct item_view v = {
		.value = value, .vlen = vlen, .flags = m->flags, .cas = m->cas,
		.exptime = m->exptime, .atime = m->atime, .fetched = m->bits & META_FETCHED,
		.stale = m->bits & META_STALE, .won = m->bits & META_WON,
		.binkey = m->bits & META_BINKEY,
	};

	if (how && how->touch) {
		m->exptime = (uint32_t)store_realtime(how->exptime);
		v.exptime = m->exptime;
	}
	if (how && how->swr) {
		how->swr->exptime = m->exptime;
		how->swr->take_token = how->swr->unread = false;
	}
	r->emit(r->arg, &v);
	/* One mg reader wins the right to refresh (of a stale item, or with
	 * R of one about to expire); the others see Z until it is replaced. */
	if (how && how->swr) {
		m->exptime = (uint32_t)how->swr->exptime;
		if (how->swr->take_token)
			m->bits |= META_WON;
		if (how->swr->unread)
			return;
	}
	if (!how || (!how->nostats && !how->noupdate)) {
		int64_t now = store_now();

		/* A read after idling: the lease's evidence that the memory is
		 * live (lease.c).  atime is to the second, but over many reads
		 * the difference of two truncated times averages to the true
		 * interval. */
		if (opt.lease_store && now > (int64_t)m->atime)
			lru_tenant_note_reuse(r->t, lru_item_size(r->keylen, vlen),
					      (uint64_t)(now - (int64_t)m->atime) * 1000);
		m->bits |= META_FETCHED;
		m->atime = (uint32_t)now;
	}
}

enum store_result store_get(const char *key, size_t keylen, const struct store_read *how,
			    store_emit_fn emit, void *arg)
{
	struct lru_tenant *t = tenant_of(key, keylen);
	struct read_ctx r = { how, emit, arg, t, keylen };
	unsigned flags = how && how->nostats ? LRU_VISIT_NOSTATS : 0;
	unsigned tries;

	for (tries = 0; tries < RMW_TRIES; tries++) {
		struct lru_meta m;
		struct item_view v = { .value = "", .created = true };
		int err;

		if (lru_visit(t, key, keylen, flags, read_item, &r) == 0)
			return ST_OK;
		if (!how || !how->vivify)
			return ST_NOT_FOUND;
		/* mg N: the first to miss creates an empty item and refreshes it
		 * (memcached creates it with no expiry; the emit shows how the
		 * flags, in their order, leave it, which the caller computed). */
		m = new_meta(0, 0, 0);
		m.exptime = (uint32_t)how->vivify_at;
		m.bits = (how->vivify_token ? META_WON : 0) | (how->noupdate ? 0 : META_FETCHED);
		err = lru_store(t, key, keylen, "", 0, &m, LRU_IF_ABSENT, &v.cas);
		if (err == -EEXIST)
			continue; /* another client's got there first: read it */
		if (err)
			return ST_NOMEM;
		v.atime = m.atime;
		if (how->swr)
			how->swr->exptime = 0;
		emit(arg, &v);
		return ST_OK;
	}
	return ST_NOT_FOUND;
}

/* A copy of an item, for read-modify-write. */
struct copy {
	struct lru_meta meta;
	char *value;
	size_t vlen;
	bool nomem;
};

static void copy_item(void *arg, struct lru_meta *m, const void *value, size_t vlen)
{
	struct copy *c = arg;

	c->meta = *m;
	c->vlen = vlen;
	/* Plain malloc under the lock: it never reclaims. */
	c->value = malloc(vlen + 1);
	if (c->value)
		memcpy(c->value, value, vlen);
	else
		c->nomem = true;
}

/* ST_OK with a copy in *@c (free c->value), ST_NOT_FOUND or ST_NOMEM. */
static enum store_result copy_out(struct lru_tenant *t, const char *key, size_t keylen,
				  struct copy *c)
{
	memset(c, 0, sizeof(*c));
	if (lru_visit(t, key, keylen, LRU_VISIT_NOSTATS, copy_item, c) != 0)
		return ST_NOT_FOUND;
	return c->nomem ? ST_NOMEM : ST_OK;
}

/* ---- writes ---- */

/* What a read-modify-write's conditional store (LRU_IF_CAS) came to: @ok,
 * ST_NOT_FOUND (the item went), ST_NOMEM, or ST_EXISTS when another
 * client changed it first: read it again. */
static enum store_result rmw_result(int err, enum store_result ok)
{
	switch (err) {
	case 0: return ok;
	case -ENOENT: return ST_NOT_FOUND;
	case -EEXIST: return ST_EXISTS;
	default: return ST_NOMEM;
	}
}

/* append/prepend: ST_STORED, ST_NOT_STORED, ST_EXISTS or ST_NOMEM. */
static enum store_result concat(struct lru_tenant *t, bool prepend, const char *key,
				size_t keylen, const void *data, size_t vlen, uint64_t cas,
				uint64_t *cas_out)
{
	unsigned tries;

	for (tries = 0; tries < RMW_TRIES; tries++) {
		struct copy old;
		enum store_result r = copy_out(t, key, keylen, &old);
		char *v;
		int err;

		if (r == ST_NOT_FOUND)
			return ST_NOT_STORED;
		if (r != ST_OK)
			return r;
		if (cas && old.meta.cas != cas) {
			free(old.value);
			return ST_EXISTS;
		}
		if (store_item_total(keylen, old.meta.flags, old.vlen + vlen) > item_max) {
			/* as memcached: not stored */
			free(old.value);
			return ST_NOT_STORED;
		}
		v = malloc(old.vlen + vlen + 1);
		if (!v) {
			free(old.value);
			return ST_NOMEM;
		}
		memcpy(v + (prepend ? vlen : 0), old.value, old.vlen);
		memcpy(v + (prepend ? 0 : old.vlen), data, vlen);
		free(old.value);
		old.meta.stored = (uint32_t)store_now();
		err = lru_store(t, key, keylen, v, old.vlen + vlen, &old.meta, LRU_IF_CAS, cas_out);
		free(v);
		r = rmw_result(err, ST_STORED);
		if (r != ST_EXISTS)
			return r == ST_NOT_FOUND ? ST_NOT_STORED : r;
	}
	return ST_NOT_STORED;
}

/*
 * ms I with a cas: the unique matches, a plain cas store; it is older than
 * the item's, the value still goes in, but keeps the item's expiry and win
 * token and is marked stale (memcached 1.6); otherwise ST_EXISTS.
 */
static enum store_result cas_stale(struct lru_tenant *t, const char *key, size_t keylen,
				   const struct lru_meta *m, const void *data, size_t vlen,
				   uint64_t cas, uint64_t *cas_out)
{
	unsigned tries;

	for (tries = 0; tries < RMW_TRIES; tries++) {
		struct copy old;
		struct lru_meta nm = *m;
		enum store_result r = copy_out(t, key, keylen, &old);
		int err;

		if (r != ST_OK)
			return r;
		free(old.value);
		if (cas == 0 || cas > old.meta.cas)
			return ST_EXISTS;
		if (cas < old.meta.cas) {
			nm.exptime = old.meta.exptime;
			nm.bits = META_STALE | (old.meta.bits & META_WON) | (m->bits & META_BINKEY);
		}
		nm.cas = old.meta.cas;
		err = lru_store(t, key, keylen, data, vlen, &nm, LRU_IF_CAS, cas_out);
		r = rmw_result(err, ST_STORED);
		if (r != ST_EXISTS)
			return r;
	}
	return ST_EXISTS;
}

enum store_result store_update(enum store_mode mode, const char *key, size_t keylen,
			       uint32_t flags, int64_t exptime, const void *data, size_t vlen,
			       uint64_t cas, uint64_t *cas_out, bool binkey)
{
	struct lru_tenant *t = tenant_of(key, keylen);
	struct lru_meta m = new_meta(flags, exptime, cas);
	enum lru_cond cond = LRU_ALWAYS;
	int err;

	if (binkey)
		m.bits |= META_BINKEY;
	if (mode == SM_APPEND || mode == SM_PREPEND)
		return concat(t, mode == SM_PREPEND, key, keylen, data, vlen, cas, cas_out);
	if (mode == SM_CAS_STALE && store_item_total(keylen, flags, vlen) <= item_max)
		return cas_stale(t, key, keylen, &m, data, vlen, cas, cas_out);
	if (store_item_total(keylen, flags, vlen) > item_max) {
		/* As memcached: a failed set does not leave the old value behind. */
		if (mode == SM_SET)
			lru_delete(t, key, keylen);
		return ST_TOO_LARGE;
	}
	switch (mode) {
	case SM_ADD: cond = LRU_IF_ABSENT; break;
	case SM_REPLACE: cond = LRU_IF_PRESENT; break;
	case SM_CAS: case SM_CAS_STALE: cond = LRU_IF_CAS; break;
	default: break;
	}
	err = lru_store(t, key, keylen, data, vlen, &m, cond, cas_out);
	switch (err) {
	case 0:
		return ST_STORED;
	case -EEXIST:
		return cond == LRU_IF_CAS ? ST_EXISTS : ST_NOT_STORED;
	case -ENOENT:
		return cond == LRU_IF_CAS ? ST_NOT_FOUND : ST_NOT_STORED;
	default:
		if (mode == SM_SET)
			lru_delete(t, key, keylen);
		return ST_NOMEM;
	}
}

enum store_result store_delete(const char *key, size_t keylen, uint64_t cas)
{
	switch (lru_delete_cas(tenant_of(key, keylen), key, keylen, cas)) {
	case 0:
		return ST_DELETED;
	case -EEXIST:
		return ST_EXISTS;
	default:
		return ST_NOT_FOUND;
	}
}

enum store_result store_invalidate(const char *key, size_t keylen, uint64_t cas, bool ttl,
				   int64_t exptime)
{
	struct lru_tenant *t = tenant_of(key, keylen);
	unsigned tries;

	for (tries = 0; tries < RMW_TRIES; tries++) {
		struct copy old;
		enum store_result r = copy_out(t, key, keylen, &old);
		int err;

		if (r != ST_OK)
			return r;
		if (cas && old.meta.cas != cas) {
			free(old.value);
			return ST_EXISTS;
		}
		/* Stale, with its token back for the next reader; a new cas. */
		old.meta.bits = (old.meta.bits | META_STALE) & ~META_WON;
		if (ttl)
			old.meta.exptime = (uint32_t)store_realtime(exptime);
		err = lru_store(t, key, keylen, old.value, old.vlen, &old.meta, LRU_IF_CAS, NULL);
		free(old.value);
		r = rmw_result(err, ST_DELETED);
		if (r != ST_EXISTS)
			return r;
	}
	return ST_NOT_FOUND;
}

static void touch_item(void *arg, struct lru_meta *m, const void *value, size_t vlen)
{
	(void)value;
	(void)vlen;
	m->exptime = (uint32_t)*(const int64_t *)arg;
}

enum store_result store_touch(const char *key, size_t keylen, int64_t exptime)
{
	int64_t when = store_realtime(exptime);

	return lru_visit(tenant_of(key, keylen), key, keylen, LRU_VISIT_NOSTATS, touch_item,
			 &when) == 0
		       ? ST_TOUCHED
		       : ST_NOT_FOUND;
}

static bool is_space(char ch)
{
	return ch == ' ' || (ch >= '\t' && ch <= '\r');
}

bool store_num_scan(const char *s, size_t n, bool *neg, uint64_t *mag)
{
	size_t i = 0, digits = 0;
	uint64_t x = 0;

	while (i < n && is_space(s[i]))
		i++;
	*neg = i < n && s[i] == '-';
	if (i < n && (s[i] == '-' || s[i] == '+'))
		i++;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	if (digits == 0 || (i < n && !is_space(s[i])))
		return false;
	*mag = x;
	return true;
}

bool store_num_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t mag, v;
	bool neg;

	if (!store_num_scan(s, n, &neg, &mag))
		return false;
	v = neg ? (uint64_t)0 - mag : mag;
	if ((int64_t)v < 0 && memchr(s, '-', n))
		return false;
	*out = v;
	return true;
}

enum store_result store_arith(const char *key, size_t keylen, const struct store_arith *a,
			      struct store_arith_out *out)
{
	struct lru_tenant *t = tenant_of(key, keylen);
	unsigned tries;

	for (tries = 0; tries < RMW_TRIES; tries++) {
		struct copy old;
		enum store_result r = copy_out(t, key, keylen, &old);
		char buf[24];
		uint64_t val;
		int len, err;

		if (r == ST_NOT_FOUND && a->vivify) {
			struct lru_meta m = new_meta(0, a->exptime, 0);

			len = snprintf(buf, sizeof(buf), "%" PRIu64, a->initial);
			err = lru_store(t, key, keylen, buf, (size_t)len, &m, LRU_IF_ABSENT, &out->cas);
			if (err == -EEXIST)
				continue;
			if (err)
				return ST_NOMEM;
			out->created = true;
			out->value = a->initial;
			out->exptime = m.exptime;
			return ST_OK;
		}
		if (r != ST_OK)
			return r;
		if (a->cas && old.meta.cas != a->cas) {
			free(old.value);
			return ST_EXISTS;
		}
		/* As memcached: the value is read as a number is on a command
		 * line, so " 12", "+1" and "1 2" count (12, 1, 1). */
		if (old.vlen == 0 || !store_num_u64(old.value, old.vlen, &val)) {
			free(old.value);
			return ST_NON_NUMERIC;
		}
		free(old.value);
		if (a->incr)
			val += a->delta; /* wraps at 2^64, as memcached */
		else
			val = a->delta > val ? 0 : val - a->delta;
		len = snprintf(buf, sizeof(buf), "%" PRIu64, val);
		/* As memcached, a number that got shorter keeps the item's length,
		 * padded with spaces. */
		if ((size_t)len < old.vlen && old.vlen < sizeof(buf)) {
			memset(buf + len, ' ', old.vlen - (size_t)len);
			len = (int)old.vlen;
		}
		/* A number that grew is a new item in memcached: unfetched, not
		 * stale, its token and its key's base64 mark gone. */
		if ((size_t)len > old.vlen) {
			old.meta.bits = 0;
			old.meta.atime = (uint32_t)store_now();
		}
		old.meta.stored = (uint32_t)store_now();
		err = lru_store(t, key, keylen, buf, (size_t)len, &old.meta, LRU_IF_CAS, &out->cas);
		r = rmw_result(err, ST_OK);
		if (r == ST_OK) {
			out->created = false;
			out->value = val;
			out->exptime = old.meta.exptime;
		}
		if (r != ST_EXISTS)
			return r;
	}
	return ST_NOT_FOUND;
}

static void clear_tenant(struct lru_tenant *t, void *arg)
{
	(void)arg;
	lru_tenant_clear(t);
}

void store_flush_tenant(struct lru_tenant *t, int64_t when)
{
	_Atomic int64_t *slot = tenant_flush_at(t);
	int64_t at = when > 0 ? store_realtime(when) : 0;

	/* The times as store_flush() reads them, for this tenant only. */
	if (when > REALTIME_MAXDELTA && when <= started_at)
		return;
	if (at <= store_now())
		at = 0;
	if (atomic_exchange_explicit(slot, at, memory_order_relaxed) == 0) {
		if (at)
			atomic_fetch_add_explicit(&tenant_flushes, 1, memory_order_relaxed);
	} else if (!at) {
		atomic_fetch_sub_explicit(&tenant_flushes, 1, memory_order_relaxed);
	}
	if (!at)
		lru_tenant_clear(t);
}

void store_flush(int64_t when)
{
	int64_t at = when > 0 ? store_realtime(when) : 0;

	/* As memcached 1.6.18: an absolute time already past flushes every item
	 * now (its oldest live cas moves to the current one), unless it is
	 * before the server started (its clock then reads 0, "no flush"). */
	if (when > REALTIME_MAXDELTA && when <= started_at)
		return;
	if (at > store_now()) {
		atomic_store_explicit(&flush_at, at, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&flush_at, 0, memory_order_relaxed);
	tenants_each(clear_tenant, NULL);
}
