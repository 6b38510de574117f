/* SPDX-License-Identifier: MIT */
/*
 * proto.h: what protocol.c (classic commands) and meta.c (meta commands)
 * share: tokens, numbers, replies.
 */
#ifndef SLCACHE_PROTO_H
#define SLCACHE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"

#define MAX_TOKENS 24

struct tok {
	char *s;
	size_t n;
};

bool tok_is(const struct tok *t, const char *s);
/* Numbers as memcached reads them (strtoull/strtoll on the token; see
 * protocol.c); _i32 and _u32 keep the low 32 bits, as memcached does for
 * exptimes, lengths and client flags. */
bool tok_u64(const struct tok *t, uint64_t *out);
bool tok_i64(const struct tok *t, int64_t *out);
bool tok_i32(const struct tok *t, int64_t *out);
bool tok_u32(const struct tok *t, uint32_t *out);
size_t fmt_u64(char *buf, uint64_t v);

/* Skip @n bytes, then answer @answer ("\r\n" added; NULL: nothing). */
void proto_swallow(struct conn *c, uint64_t n, const char *answer);

/* A reply line ("\r\n" added), unless the command said noreply. */
void reply(struct conn *c, const char *s);

/* The last token is "noreply": the command answers nothing, errors included. */
void noreply_maybe(struct conn *c, struct tok *tk, size_t nt);

/* memcached's slab class ids are below this (stats cachedump, slabs, lru_crawler). */
#define SLAB_CLASSES_MAX 64

/* admin.c: verbosity, cache_memlimit, slabs, lru, lru_crawler, shutdown,
 * refresh_certs, watch; false when tk[0] is none of them. */
bool admin_command(struct conn *c, struct tok *tk, size_t nt);

/* Data block of a storage command complete (classic or ms). */
void meta_complete_set(struct conn *c, const char *data);

/* mg, ms, md, ma, me (mn is answered by protocol.c). */
void meta_get(struct conn *c, struct tok *tk, size_t nt);
void meta_set(struct conn *c, struct tok *tk, size_t nt);
void meta_delete(struct conn *c, struct tok *tk, size_t nt);
void meta_arith(struct conn *c, struct tok *tk, size_t nt);
void meta_debug(struct conn *c, struct tok *tk, size_t nt);

#endif /* SLCACHE_PROTO_H */
