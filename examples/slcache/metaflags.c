/* SPDX-License-Identifier: MIT */
/*
 * metaflags.c: a meta command's key and flags as memcached 1.6 reads them
 * (metaflags.h): every letter it knows, its error texts and limits, keys
 * in base64 through its lenient decoder; and the return flags that echo
 * the request.
 */
#define _GNU_SOURCE

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "metaflags.h"

#define OPAQUE_MAX 32
#define FLAGS_TOKENS_MAX 20 /* memcached's, counting the line's end as one */

/* ---- base64 keys ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_val(unsigned char ch)
{
	const char *p = ch ? strchr(b64, ch) : NULL;

	return p ? (int)(p - b64) : -1;
}

/*
 * Decodes @in into @out (room for STORE_KEY_MAX); the length, or 0 when
 * it decodes to nothing.  As memcached's decoder: bytes outside the
 * alphabet are skipped, the rest must come in groups of four, and the
 * first group with padding ends the key.
 */
size_t mf_b64_decode(const char *in, size_t n, char *out)
{
	unsigned char block[4];
	size_t i, count = 0, o = 0;
	int pad = 0;

	for (i = 0; i < n; i++)
		count += in[i] == '=' || b64_val((unsigned char)in[i]) >= 0;
	if (count == 0 || count % 4 || count / 4 * 3 > STORE_KEY_MAX)
		return 0;
	count = 0;
	for (i = 0; i < n; i++) {
		int v = in[i] == '=' ? 0 : b64_val((unsigned char)in[i]);

		if (v < 0)
			continue;
		pad += in[i] == '=';
		block[count++] = (unsigned char)v;
		if (count < 4)
			continue;
		out[o++] = (char)(block[0] << 2 | block[1] >> 4);
		out[o++] = (char)(block[1] << 4 | block[2] >> 2);
		out[o++] = (char)(block[2] << 6 | block[3]);
		count = 0;
		if (pad) {
			if (pad > 2)
				return 0;
			o -= (size_t)pad;
			break;
		}
	}
	return o;
}

size_t mf_b64_encode(const char *in, size_t n, char *out)
{
	size_t i, o = 0;

	for (i = 0; i < n; i += 3) {
		unsigned v = (unsigned char)in[i] << 16;

		if (i + 1 < n)
			v |= (unsigned char)in[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)in[i + 2];
		out[o++] = b64[(v >> 18) & 63];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64[v & 63] : '=';
	}
	return o;
}

/* ---- flags ---- */


static int flag_bit(char f)
{
	if (f >= 'a' && f <= 'z')
		return f - 'a';
	if (f >= 'A' && f <= 'Z')
		return 26 + f - 'A';
	return -1;
}

bool mf_has(const struct mreq *m, char f)
{
	return m->seen >> flag_bit(f) & 1;
}

const struct tok *mf_flag_tok(const struct mreq *m, char f)
{
	size_t i;

	for (i = 0; i < m->nflags; i++)
		if (m->flag[i].s[0] == f)
			return &m->flag[i];
	return NULL;
}

/*
 * Splits tk[first..] into flags as memcached 1.6 does, whatever the
 * command: every flag letter memcached knows is taken (a command ignores
 * those it has no use for), a repeated or unknown one stops the parse, and
 * a bad token after a letter is an error with that letter's text.  Returns
 * the error line, or NULL.
 */
const char *mf_parse(struct mreq *m, struct tok *tk, size_t nt, size_t first)
{
	/* As memcached: the text of the last bad flag, in the client's order
	 * (a bad F sets none: the text before it, or this one, stays). */
	const char *err = "CLIENT_ERROR bad command line format";
	bool bad = false;
	size_t i;

	memset(m, 0, offsetof(struct mreq, keybuf));
	m->nflags = 0;
	m->seen = 0;
	m->q = m->b = m->opaque_long = false;
	m->opaque.s = NULL;
	m->opaque.n = 0;
	m->key = tk[1].s;
	m->keylen = tk[1].n;
	for (i = first; i < nt; i++) {
		char f = tk[i].s[0];
		int bit = flag_bit(f);
		struct tok v = { tk[i].s + 1, tk[i].n - 1 };
		const char *why = NULL;
		int64_t i64;
		uint64_t u64;
		uint32_t u32;

		/* memcached keeps a "seen" byte for the characters below 127
		 * only, and takes any other byte for a repeat. */
		if ((unsigned char)f >= 0x7f || (bit >= 0 && (m->seen >> bit & 1)))
			return "CLIENT_ERROR duplicate flag";
		if (bit < 0 || !strchr("bNTRlOPLkstcfvhuqFCMJDI", f))
			return "CLIENT_ERROR invalid flag";
		m->seen |= 1ull << bit;
		m->flag[m->nflags++] = tk[i];
		switch (f) {
		case 'q': m->q = true; break;
		case 'O': m->opaque = tk[i]; break;
		case 'b':
			m->b = true;
			m->keylen = mf_b64_decode(tk[1].s, tk[1].n, m->keybuf);
			m->key = m->keybuf;
			if (m->keylen == 0)
				why = "CLIENT_ERROR error decoding key";
			break;
		case 'N': case 'T': case 'R': case 'C':
			if (f == 'C' ? !tok_u64(&v, &u64) : !tok_i32(&v, &i64))
				why = "CLIENT_ERROR bad token in command line format";
			break;
		case 'F':
			bad |= !tok_u32(&v, &u32);
			break;
		case 'M':
			if (tk[i].n != 2)
				why = "CLIENT_ERROR incorrect length for M token";
			break;
		case 'J':
			if (!tok_u64(&v, &u64))
				why = "CLIENT_ERROR invalid numeric initial value";
			break;
		case 'D':
			if (!tok_u64(&v, &u64))
				why = "CLIENT_ERROR invalid numeric delta value";
			break;
		default: break;
		}
		if (why) {
			bad = true;
			err = why;
		}
	}
	if (bad)
		return err;
	m->opaque_long = m->opaque.n > OPAQUE_MAX; /* the "O" counts, as in memcached */
	if (m->opaque_long)
		return MF_OPAQUE_TOO_LONG;
	return NULL;
}

/* What every meta command checks before its flags: a key, its length, and
 * how many tokens (memcached's limit counts its end-of-line token). */
bool mf_line_ok(struct conn *c, struct tok *tk, size_t nt, const char *too_long)
{
	if (nt < 2) {
		ob_str(c, "ERROR\r\n");
		return false;
	}
	if (tk[1].n > STORE_KEY_MAX) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return false;
	}
	if (nt + 1 > FLAGS_TOKENS_MAX) {
		ob_str(c, too_long);
		return false;
	}
	return true;
}

/* The token after flag letter @f in *@v; false when @f was not given. */
static bool flag_value(const struct mreq *m, char f, struct tok *v)
{
	const struct tok *t = mf_flag_tok(m, f);

	if (!t)
		return false;
	v->s = t->s + 1;
	v->n = t->n - 1;
	return true;
}

/* A numeric token after a flag letter: true when absent or a number. */
bool mf_u64(const struct mreq *m, char f, uint64_t *out)
{
	struct tok v;

	return !flag_value(m, f, &v) || tok_u64(&v, out);
}

/* Exptimes (T, N) keep 32 bits, as memcached's. */
bool mf_i32(const struct mreq *m, char f, int64_t *out)
{
	struct tok v;

	return !flag_value(m, f, &v) || tok_i32(&v, out);
}

bool mf_u32(const struct mreq *m, char f, uint32_t *out)
{
	struct tok v;

	return !flag_value(m, f, &v) || tok_u32(&v, out);
}

/* The k return flag: the key, in base64 (and " b") when @binary, encoded
 * again from the decoded key as memcached does.  On an mg hit @binary is
 * the stored item's (ms b), whatever this request said. */
void mf_put_key(struct conn *c, const char *key, size_t keylen, bool binary)
{
	char enc[(STORE_KEY_MAX + 2) / 3 * 4];

	ob_put(c, " k", 2);
	if (!binary) {
		ob_put(c, key, keylen);
		return;
	}
	ob_put(c, enc, mf_b64_encode(key, keylen, enc));
	ob_put(c, " b", 2);
}

/* The return flags that echo the request: k, O. */
void mf_put_echo(struct conn *c, const struct mreq *m, char f)
{
	if (f == 'k') {
		mf_put_key(c, m->key, m->keylen, m->b);
	} else if (f == 'O') {
		ob_put(c, " ", 1);
		ob_put(c, m->opaque.s, m->opaque.n);
	}
}

void mf_put_num(struct conn *c, char f, int64_t v)
{
	ob_printf(c, " %c%" PRId64, f, v);
}

void mf_put_echoes(struct conn *c, const struct mreq *m)
{
	size_t i;

	for (i = 0; i < m->nflags; i++)
		mf_put_echo(c, m, m->flag[i].s[0]);
	ob_put(c, "\r\n", 2);
}
