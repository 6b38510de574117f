/* SPDX-License-Identifier: MIT */
/*
 * meta.c: memcached's meta commands (mg, ms, md, ma, me; mn is one line in
 * protocol.c), as memcached 1.6 answers them.  A meta command is a key and
 * single-letter flags, some with a token ("T30", "Oabc"); the answer is a
 * two-letter code (HD, VA, EN, NF, NS, EX) followed by the return flags in
 * the order the client gave them.  "q" hides the answers a pipelining
 * client does not need (a miss for mg, success for the others); "b" says
 * the key is base64.
 *
 * Stale-while-revalidate: md I (and ms I with an old cas) leave an item
 * stale instead of gone; mg N creates a missing item empty, and mg R finds
 * one about to expire; one reader then gets "W" (refresh it), the others
 * "Z", and a stale item "X" (storage.c keeps the bits).
 */
#define _GNU_SOURCE

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "proto.h"
#include "slcache.h"
#include "storage.h"

#define OPAQUE_MAX 32
#define FLAGS_TOKENS_MAX 20 /* memcached's, counting the line's end as one */

/* ---- base64 keys ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_val(unsigned char ch)
{
	const char *p = ch ? strchr(b64, ch) : NULL;

	return p ? (int)(p - b64) : -1;
}

/* Decodes @in into @out (room for STORE_KEY_MAX); the length, or 0 when
 * @in is not base64 or decodes to nothing or too much. */
static size_t b64_decode(const char *in, size_t n, char *out)
{
	size_t i, o = 0;
	unsigned acc = 0, bits = 0;

	if (n == 0 || n % 4)
		return 0;
	for (i = 0; i < n; i++) {
		int v;

		if (in[i] == '=') {
			if (i < n - 2 || (i == n - 2 && in[n - 1] != '='))
				return 0;
			break;
		}
		v = b64_val((unsigned char)in[i]);
		if (v < 0)
			return 0;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o == STORE_KEY_MAX)
				return 0;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	return o;
}

static size_t b64_encode(const char *in, size_t n, char *out)
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

/* A parsed meta request: its key and flags. */
struct mreq {
	const char *key;          /* as stored (decoded from base64 with b) */
	size_t keylen;
	char keybuf[STORE_KEY_MAX];
	struct tok wire_key;      /* as the client sent it                  */
	struct tok flag[MAX_TOKENS];
	size_t nflags;
	uint64_t seen;            /* bit ('a'..'z', 'A'..'Z'): given        */
	bool q, b;
	struct tok opaque;
};

static int flag_bit(char f)
{
	if (f >= 'a' && f <= 'z')
		return f - 'a';
	if (f >= 'A' && f <= 'Z')
		return 26 + f - 'A';
	return -1;
}

static bool has(const struct mreq *m, char f)
{
	return m->seen >> flag_bit(f) & 1;
}

static const struct tok *flag_tok(const struct mreq *m, char f)
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
static const char *parse_flags(struct mreq *m, struct tok *tk, size_t nt, size_t first)
{
	const char *err = NULL;
	size_t i;

	memset(m, 0, offsetof(struct mreq, keybuf));
	m->nflags = 0;
	m->seen = 0;
	m->q = m->b = false;
	m->opaque.s = NULL;
	m->opaque.n = 0;
	m->wire_key = tk[1];
	for (i = first; i < nt; i++) {
		char f = tk[i].s[0];
		int bit = flag_bit(f);
		struct tok v = { tk[i].s + 1, tk[i].n - 1 };
		int64_t i64;
		uint64_t u64;
		uint32_t u32;

		if (bit >= 0 && (m->seen >> bit & 1))
			return "CLIENT_ERROR duplicate flag";
		if (bit < 0 || !strchr("bNTRlOPLkstcfvhuqFCMJDI", f))
			return "CLIENT_ERROR invalid flag";
		m->seen |= 1ull << bit;
		m->flag[m->nflags++] = tk[i];
		switch (f) {
		case 'q': m->q = true; break;
		case 'b': m->b = true; break;
		case 'O': m->opaque = tk[i]; break;
		case 'N': case 'T': case 'R':
			if (!tok_i32(&v, &i64))
				err = "CLIENT_ERROR bad token in command line format";
			break;
		case 'C':
			if (!tok_u64(&v, &u64))
				err = "CLIENT_ERROR bad token in command line format";
			break;
		case 'F':
			if (!tok_u32(&v, &u32))
				err = "CLIENT_ERROR bad command line format";
			break;
		case 'M':
			if (tk[i].n != 2)
				err = "CLIENT_ERROR incorrect length for M token";
			break;
		case 'J':
			if (!tok_u64(&v, &u64))
				err = "CLIENT_ERROR invalid numeric initial value";
			break;
		case 'D':
			if (!tok_u64(&v, &u64))
				err = "CLIENT_ERROR invalid numeric delta value";
			break;
		default: break;
		}
	}
	if (m->b) {
		m->keylen = b64_decode(tk[1].s, tk[1].n, m->keybuf);
		if (m->keylen == 0)
			err = "CLIENT_ERROR error decoding key";
		m->key = m->keybuf;
	} else {
		m->key = tk[1].s;
		m->keylen = tk[1].n;
	}
	if (!err && m->opaque.n > OPAQUE_MAX) /* the "O" counts, as in memcached */
		err = "CLIENT_ERROR opaque token too long";
	return err;
}

/* What every meta command checks before its flags: a key, its length, and
 * how many tokens (memcached's limit counts its end-of-line token). */
static bool line_ok(struct conn *c, struct tok *tk, size_t nt, const char *too_long)
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
	const struct tok *t = flag_tok(m, f);

	if (!t)
		return false;
	v->s = t->s + 1;
	v->n = t->n - 1;
	return true;
}

/* A numeric token after a flag letter: true when absent or a number. */
static bool flag_u64(const struct mreq *m, char f, uint64_t *out)
{
	struct tok v;

	return !flag_value(m, f, &v) || tok_u64(&v, out);
}

/* Exptimes (T, N) keep 32 bits, as memcached's. */
static bool flag_i32(const struct mreq *m, char f, int64_t *out)
{
	struct tok v;

	return !flag_value(m, f, &v) || tok_i32(&v, out);
}

static bool flag_u32(const struct mreq *m, char f, uint32_t *out)
{
	struct tok v;

	return !flag_value(m, f, &v) || tok_u32(&v, out);
}

/* The return flags that echo the request: k, O, b. */
static void put_echo(struct conn *c, const struct mreq *m, char f)
{
	if (f == 'k') { /* a base64 key goes back as sent, marked " b" */
		ob_put(c, " k", 2);
		ob_put(c, m->wire_key.s, m->wire_key.n);
		if (m->b)
			ob_put(c, " b", 2);
	} else if (f == 'O') {
		ob_put(c, " ", 1);
		ob_put(c, m->opaque.s, m->opaque.n);
	}
}

/* mg k on a hit: the stored key, in base64 (and " b") when it was stored
 * with ms b, whatever this request said (memcached keeps that bit). */
static void put_item_key(struct conn *c, const char *key, size_t keylen, bool binary)
{
	char enc[(STORE_KEY_MAX + 2) / 3 * 4];

	ob_put(c, " k", 2);
	if (!binary) {
		ob_put(c, key, keylen);
		return;
	}
	ob_put(c, enc, b64_encode(key, keylen, enc));
	ob_put(c, " b", 2);
}

static void put_num(struct conn *c, char f, int64_t v)
{
	ob_printf(c, " %c%" PRId64, f, v);
}

static int64_t ttl_of(int64_t exptime)
{
	return exptime == 0 ? -1 : exptime - store_now();
}

static void put_flags_echo(struct conn *c, const struct mreq *m);

/* ---- mg ---- */

struct mg_ctx {
	struct conn *c;
	const struct mreq *m;
};

/* Under the tenant's lock: format and copy. */
static void mg_emit(void *arg, const struct item_view *v)
{
	struct mg_ctx *g = arg;
	struct conn *c = g->c;
	const struct mreq *m = g->m;
	size_t i;

	/* q hides only a miss: a hit answers, with or without its value. */
	if (has(m, 'v'))
		ob_printf(c, "VA %zu", v->vlen);
	else
		ob_str(c, "HD");
	for (i = 0; i < m->nflags; i++) {
		char f = m->flag[i].s[0];

		switch (f) {
		case 'c': put_num(c, 'c', (int64_t)v->cas); break;
		case 'f': put_num(c, 'f', v->flags); break;
		case 's': put_num(c, 's', (int64_t)v->vlen); break;
		case 't': put_num(c, 't', ttl_of(v->exptime)); break;
		case 'h': put_num(c, 'h', v->fetched); break;
		case 'l': put_num(c, 'l', store_now() - v->atime); break;
		case 'k': put_item_key(c, m->key, m->keylen, v->binkey); break;
		default: put_echo(c, m, f); break;
		}
	}
	/* Stale-while-revalidate, after the flags as memcached: Z (another
	 * client is refreshing it), X (stale), W (you refresh it). */
	if (v->won)
		ob_put(c, " Z", 2);
	if (v->stale)
		ob_put(c, " X", 2);
	if (v->win)
		ob_put(c, " W", 2);
	ob_put(c, "\r\n", 2);
	if (has(m, 'v') && ob_reserve(c, v->vlen + 2)) {
		memcpy(c->wbuf + c->wend, v->value, v->vlen);
		memcpy(c->wbuf + c->wend + v->vlen, "\r\n", 2);
		c->wend += v->vlen + 2;
	}
}

void meta_get(struct conn *c, struct tok *tk, size_t nt)
{
	struct mreq m;
	struct mg_ctx g = { c, &m };
	struct store_read how = { 0 };
	const char *err;

	BUMP(c, meta_cmds);
	if (!line_ok(c, tk, nt, "CLIENT_ERROR options flags are too long\r\n"))
		return;
	err = parse_flags(&m, tk, nt, 2);
	if (err) {
		ob_printf(c, "%s\r\n", err);
		return;
	}
	how.vivify = flag_i32(&m, 'N', &how.vivify_exptime) && has(&m, 'N');
	how.recache = flag_i32(&m, 'R', &how.recache_time) && has(&m, 'R');
	if (has(&m, 'T')) {
		(void)flag_i32(&m, 'T', &how.exptime);
		how.touch = true;
		BUMP(c, cmd_touch);
	}
	BUMP(c, cmd_get);
	if (store_get(m.key, m.keylen, &how, mg_emit, &g) == ST_OK) {
		BUMP(c, get_hits);
		if (how.touch)
			BUMP(c, touch_hits);
		return;
	}
	BUMP(c, get_misses);
	if (how.touch)
		BUMP(c, touch_misses);
	if (!m.q) {
		ob_str(c, "EN");
		put_flags_echo(c, &m);
	}
}

/* ---- ms ---- */

void meta_set(struct conn *c, struct tok *tk, size_t nt)
{
	struct mreq m;
	struct pending *p = &c->p;
	struct tok len = { NULL, 0 };
	int64_t vlen = -1, exptime = 0;
	uint32_t flags = 0;
	uint64_t cas = 0;
	const char *err;
	const struct tok *mode;
	size_t i;

	BUMP(c, meta_cmds);
	if (!line_ok(c, tk, nt, "CLIENT_ERROR options flags too long\r\n"))
		return;
	if (nt >= 3)
		len = tk[2];
	if (nt < 3 || !tok_i32(&len, &vlen) || vlen < 0 || vlen > INT_MAX - 2) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return;
	}
	/* From here on an error swallows the data block, as memcached does. */
	err = parse_flags(&m, tk, nt, 3);
	(void)(flag_u32(&m, 'F', &flags) && flag_u64(&m, 'C', &cas) &&
	       flag_i32(&m, 'T', &exptime));
	memset(p, 0, offsetof(struct pending, mret));
	p->meta = true;
	p->mode = SM_SET;
	mode = flag_tok(&m, 'M');
	if (!err && mode) {
		switch (mode->s[1]) {
		case 'S': p->mode = SM_SET; break;
		case 'E': p->mode = SM_ADD; break;
		case 'A': p->mode = SM_APPEND; break;
		case 'P': p->mode = SM_PREPEND; break;
		case 'R': p->mode = SM_REPLACE; break;
		default: err = "CLIENT_ERROR invalid mode for ms M token"; break;
		}
	}
	if (err) {
		proto_swallow(c, (uint64_t)vlen + 2, err);
		return;
	}
	/* A C flag makes a set or a replace a cas, even C0 (memcached). */
	if (has(&m, 'C') && (p->mode == SM_SET || p->mode == SM_REPLACE))
		p->mode = has(&m, 'I') ? SM_CAS_STALE : SM_CAS;
	p->cas = cas;
	p->flags = flags;
	p->exptime = exptime;
	p->keylen = m.keylen;
	memcpy(p->key, m.key, m.keylen);
	p->vlen = (size_t)vlen;
	p->mquiet = m.q;
	p->mbinkey = m.b;
	p->mret_cas = false;
	p->mret_len = 0;
	for (i = 0; i < m.nflags; i++) {
		char f = m.flag[i].s[0];
		size_t n = 0;
		char buf[300];

		if (f == 'k')
			n = (size_t)snprintf(buf, sizeof(buf), " k%.*s%s", (int)m.wire_key.n,
					     m.wire_key.s, m.b ? " b" : "");
		else if (f == 'O')
			n = (size_t)snprintf(buf, sizeof(buf), " %.*s", (int)m.opaque.n, m.opaque.s);
		else if (f == 'c')
			n = (size_t)snprintf(buf, sizeof(buf), " c"); /* the cas goes after */
		if (n && p->mret_len + n < sizeof(p->mret)) {
			memcpy(p->mret + p->mret_len, buf, n);
			p->mret_len += n;
		}
	}
	if (store_item_total(p->keylen, p->flags, p->vlen) > opt.item_max) {
		/* memcached's ms drops the old item whatever the mode. */
		store_delete(p->key, p->keylen, 0);
		proto_swallow(c, (uint64_t)vlen + 2, "SERVER_ERROR object too large for cache");
		return;
	}
	c->state = CS_DATA;
}

void meta_complete_set(struct conn *c, const char *data)
{
	struct pending *p = &c->p;
	uint64_t cas = 0;
	const char *code;
	size_t i;

	if (data[p->vlen] != '\r' || data[p->vlen + 1] != '\n') {
		ob_str(c, "CLIENT_ERROR bad data chunk\r\n");
		return;
	}
	BUMP(c, cmd_set);
	switch (store_update(p->mode, p->key, p->keylen, p->flags, p->exptime, data, p->vlen,
			     p->cas, &cas, p->mbinkey)) {
	case ST_STORED:
		BUMP(c, total_items);
		if (p->mode == SM_CAS || p->mode == SM_CAS_STALE)
			BUMP(c, cas_hits);
		code = "HD";
		break;
	case ST_EXISTS:
		BUMP(c, cas_badval);
		code = "EX";
		break;
	case ST_NOT_FOUND:
		BUMP(c, cas_misses);
		code = "NF";
		break;
	case ST_NOT_STORED:
		code = "NS";
		break;
	case ST_TOO_LARGE:
		ob_str(c, "SERVER_ERROR object too large for cache\r\n");
		return;
	default:
		BUMP(c, oom_errors);
		ob_str(c, "SERVER_ERROR out of memory storing object\r\n");
		return;
	}
	if (p->mquiet && code[0] == 'H')
		return;
	ob_str(c, code);
	for (i = 0; i < p->mret_len; i++) {
		ob_put(c, p->mret + i, 1);
		if (p->mret[i] == 'c' && p->mret[i - 1] == ' ' &&
		    (i + 1 == p->mret_len || p->mret[i + 1] == ' ')) {
			char buf[24];

			ob_put(c, buf, fmt_u64(buf, code[0] == 'H' ? cas : 0));
		}
	}
	ob_put(c, "\r\n", 2);
}

/* ---- md ---- */

static void put_flags_echo(struct conn *c, const struct mreq *m)
{
	size_t i;

	for (i = 0; i < m->nflags; i++)
		put_echo(c, m, m->flag[i].s[0]);
	ob_put(c, "\r\n", 2);
}

void meta_delete(struct conn *c, struct tok *tk, size_t nt)
{
	struct mreq m;
	uint64_t cas = 0;
	int64_t ttl = 0;
	enum store_result r;

	BUMP(c, meta_cmds);
	if (!line_ok(c, tk, nt, "CLIENT_ERROR options flags too long\r\n"))
		return;
	if (parse_flags(&m, tk, nt, 2)) {
		ob_str(c, "CLIENT_ERROR invalid or duplicate flag\r\n");
		return;
	}
	(void)(flag_u64(&m, 'C', &cas) && flag_i32(&m, 'T', &ttl));
	if (has(&m, 'I')) /* invalidate: stale, for one client to refresh */
		r = store_invalidate(m.key, m.keylen, cas, has(&m, 'T'), ttl);
	else
		r = store_delete(m.key, m.keylen, cas);
	if (r == ST_DELETED) {
		BUMP(c, delete_hits);
		if (m.q)
			return;
		ob_str(c, "HD");
	} else if (r == ST_EXISTS) {
		ob_str(c, "EX");
	} else {
		BUMP(c, delete_misses);
		ob_str(c, "NF");
	}
	put_flags_echo(c, &m);
}

/* ---- ma ---- */

void meta_arith(struct conn *c, struct tok *tk, size_t nt)
{
	struct mreq m;
	struct store_arith a = { .incr = true, .delta = 1 };
	struct store_arith_out out;
	const struct tok *mode;
	int64_t touch = 0;
	char num[24];
	size_t i, n;

	BUMP(c, meta_cmds);
	if (!line_ok(c, tk, nt, "CLIENT_ERROR options flags too long\r\n"))
		return;
	if (parse_flags(&m, tk, nt, 2)) {
		ob_str(c, "CLIENT_ERROR invalid or duplicate flag\r\n");
		return;
	}
	(void)(flag_u64(&m, 'C', &a.cas) && flag_u64(&m, 'D', &a.delta) &&
	       flag_u64(&m, 'J', &a.initial) && flag_i32(&m, 'N', &a.exptime) &&
	       flag_i32(&m, 'T', &touch));
	mode = flag_tok(&m, 'M');
	if (mode) {
		switch (mode->s[1]) {
		case 'I': case '+': a.incr = true; break;
		case 'D': case '-': a.incr = false; break;
		default:
			ob_str(c, "CLIENT_ERROR invalid mode for ma M token\r\n");
			return;
		}
	}
	a.vivify = has(&m, 'N');
	switch (store_arith(m.key, m.keylen, &a, &out)) {
	case ST_OK:
		if (a.incr)
			BUMP(c, incr_hits);
		else
			BUMP(c, decr_hits);
		break;
	case ST_NOT_FOUND:
		if (a.incr)
			BUMP(c, incr_misses);
		else
			BUMP(c, decr_misses);
		ob_str(c, "NF");
		put_flags_echo(c, &m);
		return;
	case ST_EXISTS:
		ob_str(c, "EX");
		put_flags_echo(c, &m);
		return;
	case ST_NON_NUMERIC:
		ob_str(c, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
		return;
	default:
		BUMP(c, oom_errors);
		ob_str(c, "SERVER_ERROR out of memory\r\n");
		return;
	}
	if (has(&m, 'T')) {
		store_touch(m.key, m.keylen, touch);
		out.exptime = store_realtime(touch);
	}
	if (m.q && !out.created) /* q hides a plain success, not a vivified item */
		return;
	n = fmt_u64(num, out.value);
	if (has(&m, 'v'))
		ob_printf(c, "VA %zu", n);
	else
		ob_str(c, "HD");
	for (i = 0; i < m.nflags; i++) {
		char f = m.flag[i].s[0];

		if (f == 't')
			put_num(c, 't', ttl_of(out.exptime));
		else if (f == 'c')
			put_num(c, 'c', (int64_t)out.cas);
		else
			put_echo(c, &m, f);
	}
	ob_put(c, "\r\n", 2);
	if (has(&m, 'v')) {
		ob_put(c, num, n);
		ob_put(c, "\r\n", 2);
	}
}

/* ---- me ---- */

struct me_ctx {
	struct conn *c;
	const char *key;
	size_t keylen;
};

/* memcached's slab class for an item of @total bytes (-n 48, -f 1.25,
 * 8-byte aligned chunks): what "cls=" shows. */
static unsigned slab_class(size_t total)
{
	size_t size = 96;
	unsigned cls = 1;

	while (total > size && cls < 63) {
		size = size * 5 / 4;
		size = (size + 7) & ~(size_t)7;
		cls++;
	}
	return cls;
}

static void me_emit(void *arg, const struct item_view *v)
{
	struct me_ctx *x = arg;
	char key[STORE_KEY_MAX * 2 + 8];
	size_t n = v->binkey ? b64_encode(x->key, x->keylen, key) : x->keylen;
	size_t total = store_item_total(x->keylen, v->flags, v->vlen);

	/* The key as stored: base64 if it came so (memcached's binary bit). */
	if (!v->binkey)
		memcpy(key, x->key, n);
	/* exp= is memcached's "now - exptime": negative while the item lives. */
	ob_printf(x->c, "ME %.*s exp=%" PRId64 " la=%" PRId64 " cas=%" PRIu64
		  " fetch=%s cls=%u size=%zu\r\n",
		  (int)n, key, v->exptime == 0 ? -1 : store_now() - v->exptime,
		  store_now() - v->atime, v->cas, v->fetched ? "yes" : "no", slab_class(total),
		  total);
}

/* me KEY [b]: only a "b" right after the key means anything (memcached). */
void meta_debug(struct conn *c, struct tok *tk, size_t nt)
{
	struct me_ctx x = { c, tk[1].s, tk[1].n };
	struct store_read how = { .nostats = true };
	char keybuf[STORE_KEY_MAX];

	BUMP(c, meta_cmds);
	if (nt < 2 || tk[1].n > STORE_KEY_MAX) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return;
	}
	if (nt >= 3 && tok_is(&tk[2], "b")) {
		x.keylen = b64_decode(tk[1].s, tk[1].n, keybuf);
		if (x.keylen == 0) {
			ob_str(c, "CLIENT_ERROR bad command line format\r\n");
			return;
		}
		x.key = keybuf;
	}
	if (store_get(x.key, x.keylen, &how, me_emit, &x) != ST_OK)
		ob_str(c, "EN\r\n");
}
