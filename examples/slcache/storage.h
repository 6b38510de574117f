/* SPDX-License-Identifier: MIT */
/*
 * storage.h: memcached's item semantics (storage.c) over examples/lru_cache:
 * client flags, expiry, CAS uniques, conditional stores, append/prepend,
 * incr/decr, touch and flush_all.  Keys go to their tenant (tenants.h).
 * Every function is thread-safe.
 */
#ifndef SLCACHE_STORAGE_H
#define SLCACHE_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lru_cache.h"

#define STORE_KEY_MAX LRU_KEY_MAX

enum store_result {
	ST_STORED,
	ST_NOT_STORED,
	ST_EXISTS,
	ST_NOT_FOUND,
	ST_DELETED,
	ST_TOUCHED,
	ST_OK,
	ST_NOMEM,      /* SERVER_ERROR out of memory storing object          */
	ST_TOO_LARGE,  /* SERVER_ERROR object too large for cache            */
	ST_NON_NUMERIC /* incr/decr on a value that is not a decimal number */
};

/* SM_CAS_STALE: a cas that, given a unique older than the item's, still
 * stores, keeping the item's expiry and marking it stale (ms I). */
enum store_mode { SM_SET, SM_ADD, SM_REPLACE, SM_APPEND, SM_PREPEND, SM_CAS, SM_CAS_STALE };

/* An item as a read sees it (before this read touched it). */
struct item_view {
	const void *value;
	size_t vlen;
	uint32_t flags;
	uint64_t cas;
	int64_t exptime;   /* absolute unix time, 0 = never                 */
	int64_t atime;     /* last access, unix time                         */
	bool fetched;      /* read before this read                          */
	bool stale;        /* invalidated (md I, ms I): a client should refresh */
	bool won;          /* its win token was handed out before (mg Z)     */
	bool win;          /* this read hands out the win token (mg W)       */
	bool binkey;       /* stored by ms b: shown in base64 (mg k, me)    */
	bool created;      /* mg N: this read created it                     */
};

/* What an mg's emit decided, applied to the item once it returns (still
 * under the lock): memcached acts on mg's flags in the client's order, so
 * meta.c walks them and says where the expiry and the win token end up. */
struct store_swr_out {
	int64_t exptime;   /* absolute, 0 = never                            */
	bool take_token;   /* hand the win token out: later readers see Z     */
	bool unread;       /* the answer failed: the read leaves it unfetched */
};

/* Receives a hit, under the tenant's lock: copy, do not block. */
typedef void (*store_emit_fn)(void *arg, const struct item_view *v);

/* Reads.  @touch: also set the expiry to @exptime (gat, mg T).  @nostats:
 * a look that is not a read (me): count no hit or miss on the tenant, and
 * leave the item unfetched, its last access as it was.  memcached's stale-while-revalidate
 * (mg R, N): with @recache, an item that expires before @recache_time (an
 * exptime) hands out the win token, once; with @vivify, a miss creates an
 * empty item expiring at @vivify_exptime and hands its token to this read.
 * A stale item hands out its token too.  With @swr (mg) the emit decides
 * the expiry and the token instead (struct store_swr_out); @vivify then
 * creates the item with expiry @vivify_at (absolute, 0 = never), holding
 * its token when @vivify_token.  A classic get, or me, leaves the token
 * alone.  @noupdate (mg u): the read leaves the item unfetched, its last
 * access as it was. */
struct store_read {
	struct store_swr_out *swr;
	bool touch;
	int64_t exptime;
	bool nostats;
	bool noupdate;
	bool vivify;
	int64_t vivify_at;
	bool vivify_token;
};

int store_start(size_t item_max);
void store_stop(void);

/** ST_OK after calling @emit, or ST_NOT_FOUND. */
enum store_result store_get(const char *key, size_t keylen, const struct store_read *how,
			    store_emit_fn emit, void *arg);

/** set/add/replace/append/prepend/cas; @cas is the expected unique (cas, and
 * append/prepend when nonzero).  *@cas_out, if not NULL, gets the new one.
 * @binkey: the key came in base64 (ms b); reads say so (item_view). */
enum store_result store_update(enum store_mode mode, const char *key, size_t keylen,
			       uint32_t flags, int64_t exptime, const void *data, size_t vlen,
			       uint64_t cas, uint64_t *cas_out, bool binkey);

/** ST_DELETED, ST_NOT_FOUND, or ST_EXISTS when @cas (nonzero) differs. */
enum store_result store_delete(const char *key, size_t keylen, uint64_t cas);

/** md I: marks the item stale instead of deleting it (a new cas, its win
 * token back for the next reader, the expiry set to @exptime if @ttl).
 * ST_DELETED, ST_NOT_FOUND, ST_EXISTS when @cas (nonzero) differs, or
 * ST_NOMEM. */
enum store_result store_invalidate(const char *key, size_t keylen, uint64_t cas, bool ttl,
				   int64_t exptime);

/* incr/decr; with @vivify a missing key is created with @initial (ma N). */
struct store_arith {
	bool incr;
	uint64_t delta;
	uint64_t cas;        /* expected unique, 0 = any            */
	bool vivify;
	uint64_t initial;
	int64_t exptime;     /* for a vivified item                  */
};

struct store_arith_out {
	bool created;       /* vivified (ma N): it was not there   */
	uint64_t value;
	uint64_t cas;
	int64_t exptime;
};

/** ST_OK with the new value, its cas and expiry in *@out, ST_NOT_FOUND,
 * ST_EXISTS (cas differs), ST_NON_NUMERIC or ST_NOMEM. */
enum store_result store_arith(const char *key, size_t keylen, const struct store_arith *a,
			      struct store_arith_out *out);

enum store_result store_touch(const char *key, size_t keylen, int64_t exptime);

/** What the t return flag shows for an item of @exptime: -1 (never), or the
 * seconds left as memcached's unsigned 32 bits (an expired item's wrap). */
int64_t store_ttl(int64_t exptime);

/** flush_all: @when as an exptime (0 or past: now; else relative or absolute). */
void store_flush(int64_t when);

struct lru_tenant;
/** flush_all on a connection bound to tenant @t: that tenant's items only,
 * now or (a later @when) by the first command to reach it after then. */
void store_flush_tenant(struct lru_tenant *t, int64_t when);

/** The connection the calling thread serves from now on: *@tenant is set to
 * the tenant of the first key a storage call is given, if still NULL
 * (protocol.c: flush_all stays within it).  NULL: none. */
void store_bind(struct lru_tenant **tenant);

/** The size memcached gives the item (its 48-byte header, the cas, the key
 * and a NUL, the client flags when not 0, the value and its "\r\n"):
 * what -I limits, and what "me" shows. */
size_t store_item_total(size_t keylen, uint32_t flags, size_t vlen);

/** memcached's exptime rule: 0 never, negative already expired, up to 30
 * days relative, beyond that an absolute unix time. */
int64_t store_realtime(int64_t exptime);

int64_t store_now(void);

/** A number as memcached reads one with strtoull/strtoll, base 10, from the
 * @n bytes at @s: leading white space and a sign are taken, the digits may
 * be followed by white space and then anything; false when there is no
 * digit, something else follows them, or the magnitude passes 64 bits.
 * *@neg says whether the sign was "-", *@mag gets the magnitude. */
bool store_num_scan(const char *s, size_t n, bool *neg, uint64_t *mag);

/** As strtoull: a negative number wraps, but one that then reads negative
 * as a signed number is refused (memcached's check). */
bool store_num_u64(const char *s, size_t n, uint64_t *out);

#endif /* SLCACHE_STORAGE_H */
