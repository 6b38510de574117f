/* SPDX-License-Identifier: MIT */
/*
 * metaflags.h: a meta command's key and flags, parsed as memcached 1.6
 * parses them (metaflags.c), and the return flags that echo them; meta.c
 * runs the commands.
 */
#ifndef SLCACHE_METAFLAGS_H
#define SLCACHE_METAFLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "storage.h"

/* A parsed meta request: its key and flags. */
struct mreq {
	const char *key;          /* as stored (decoded from base64 with b) */
	size_t keylen;
	char keybuf[STORE_KEY_MAX];
	struct tok flag[MAX_TOKENS];
	size_t nflags;
	uint64_t seen;            /* bit ('a'..'z', 'A'..'Z'): given        */
	bool q, b;
	struct tok opaque;
	bool opaque_long;         /* too long: mg and ma answer so after acting */
};

#define MF_OPAQUE_TOO_LONG "CLIENT_ERROR opaque token too long"

/** Splits tk[@first..] into @m's flags; NULL, or the error line to answer
 * (without its "\r\n"), as memcached's: the last bad flag's text, or
 * MF_OPAQUE_TOO_LONG when the flags are fine but an O token is too long. */
const char *mf_parse(struct mreq *m, struct tok *tk, size_t nt, size_t first);

/** What every meta command checks first (a key, its length, the token
 * count); false after answering the error. */
bool mf_line_ok(struct conn *c, struct tok *tk, size_t nt, const char *too_long);

bool mf_has(const struct mreq *m, char f);
const struct tok *mf_flag_tok(const struct mreq *m, char f);

/* The number after flag letter @f: true when @f is absent or reads as one
 * (mf_parse() has checked it); _i32 for exptimes, _u32 for client flags. */
bool mf_u64(const struct mreq *m, char f, uint64_t *out);
bool mf_i32(const struct mreq *m, char f, int64_t *out);
bool mf_u32(const struct mreq *m, char f, uint32_t *out);

/* Return flags: " kKEY" (" b" when @binary), k and O as the request gave
 * them, " <f><v>", and every k and O then "\r\n". */
void mf_put_key(struct conn *c, const char *key, size_t keylen, bool binary);
void mf_put_echo(struct conn *c, const struct mreq *m, char f);
void mf_put_num(struct conn *c, char f, int64_t v);
void mf_put_echoes(struct conn *c, const struct mreq *m);

/* Base64 keys (b), as memcached's coder: the length written to @out. */
size_t mf_b64_decode(const char *in, size_t n, char *out);
size_t mf_b64_encode(const char *in, size_t n, char *out);

#endif /* SLCACHE_METAFLAGS_H */
