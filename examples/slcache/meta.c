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
#include "metaflags.h"
#include "proto.h"
#include "slcache.h"
#include "storage.h"

/* ---- mg ---- */

struct mg_ctx {
	struct conn *c;
	const struct mreq *m;
	struct store_swr_out swr; /* where the flags leave the item */
	int64_t touch_at, vivify_at, recache_at; /* T, N, R as expiry times */
};

/*
 * memcached acts on mg's flags in the client's order: T sets the expiry
 * where it stands (so a "t" before it shows the old one), N sets a created
 * item's and wins its token, R compares with the expiry as it is then,
 * and an O too long stops the answer there, the effects before it kept.
 */
static void mg_emit(void *arg, const struct item_view *v)
{
	struct mg_ctx *g = arg;
	struct conn *c = g->c;
	const struct mreq *m = g->m;
	size_t i, start = c->wend;
	bool win = false;

	/* q hides only a miss: a hit answers, with or without its value. */
	if (mf_has(m, 'v'))
		ob_printf(c, "VA %zu", v->vlen);
	else
		ob_str(c, "HD");
	for (i = 0; i < m->nflags; i++) {
		char f = m->flag[i].s[0];

		switch (f) {
		case 'T': g->swr.exptime = g->touch_at; break;
		case 'N':
			if (v->created) {
				g->swr.exptime = g->vivify_at;
				win = true;
			}
			break;
		case 'R':
			if (!v->won && !v->created && g->swr.exptime != 0 &&
			    g->swr.exptime < g->recache_at)
				win = true;
			break;
		case 'O':
			if (!m->opaque_long) {
				mf_put_echo(c, m, f);
				break;
			}
			/* memcached drops the answer; an mg that reads the
			 * item under its lock (N, T, R, h, l) leaves it unfetched. */
			c->wend = start;
			ob_str(c, MF_OPAQUE_TOO_LONG "\r\n");
			g->swr.unread = mf_has(m, 'N') || mf_has(m, 'T') || mf_has(m, 'R') ||
					mf_has(m, 'h') || mf_has(m, 'l');
			return;
		case 'c': mf_put_num(c, 'c', (int64_t)v->cas); break;
		case 'f': mf_put_num(c, 'f', v->flags); break;
		case 's': mf_put_num(c, 's', (int64_t)v->vlen); break;
		case 't': mf_put_num(c, 't', store_ttl(g->swr.exptime)); break;
		case 'h': mf_put_num(c, 'h', v->fetched); break;
		case 'l': mf_put_num(c, 'l', store_now() - v->atime); break;
		case 'k': mf_put_key(c, m->key, m->keylen, v->binkey); break;
		default: mf_put_echo(c, m, f); break;
		}
	}
	/* Stale-while-revalidate, after the flags as memcached: Z (another
	 * client is refreshing it), X (stale), W (you refresh it: the first
	 * reader of a stale item, or the one R or N chose). */
	if (v->won)
		ob_put(c, " Z", 2);
	if (v->stale) {
		ob_put(c, " X", 2);
		win |= !v->won;
	}
	if (win) {
		ob_put(c, " W", 2);
		g->swr.take_token = true;
	}
	ob_put(c, "\r\n", 2);
	if (mf_has(m, 'v') && ob_reserve(c, v->vlen + 2)) {
		memcpy(c->wbuf + c->wend, v->value, v->vlen);
		memcpy(c->wbuf + c->wend + v->vlen, "\r\n", 2);
		c->wend += v->vlen + 2;
	}
}

/* A miss with N: where the flags, in their order, leave the item mg
 * creates (memcached creates it with no expiry; an O too long stops the
 * walk), and whether it holds its win token. */
static void mg_vivify(const struct mreq *m, const struct mg_ctx *g, struct store_read *how)
{
	size_t i;

	how->vivify_at = 0;
	for (i = 0; i < m->nflags; i++) {
		char f = m->flag[i].s[0];

		if (f == 'O' && m->opaque_long)
			break;
		if (f == 'T') {
			how->vivify_at = g->touch_at;
		} else if (f == 'N') {
			how->vivify_at = g->vivify_at;
			how->vivify_token = true;
		}
	}
}

void meta_get(struct conn *c, struct tok *tk, size_t nt)
{
	struct mreq m;
	struct mg_ctx g = { .c = c, .m = &m };
	struct store_read how = { .swr = &g.swr };
	int64_t t = 0;
	const char *err;

	BUMP(c, meta_cmds);
	if (!mf_line_ok(c, tk, nt, "CLIENT_ERROR options flags are too long\r\n"))
		return;
	err = mf_parse(&m, tk, nt, 2);
	if (err && !m.opaque_long) {
		ob_printf(c, "%s\r\n", err);
		return;
	}
	(void)mf_i32(&m, 'T', &t);
	g.touch_at = store_realtime(t);
	t = 0;
	(void)mf_i32(&m, 'N', &t);
	g.vivify_at = store_realtime(t);
	t = 0;
	(void)mf_i32(&m, 'R', &t);
	g.recache_at = store_realtime(t);
	how.noupdate = mf_has(&m, 'u');
	how.vivify = mf_has(&m, 'N');
	if (how.vivify)
		mg_vivify(&m, &g, &how);
	if (mf_has(&m, 'T'))
		BUMP(c, cmd_touch);
	BUMP(c, cmd_get);
	if (store_get(m.key, m.keylen, &how, mg_emit, &g) == ST_OK) {
		BUMP(c, get_hits);
		if (mf_has(&m, 'T'))
			BUMP(c, touch_hits);
		return;
	}
	BUMP(c, get_misses);
	if (mf_has(&m, 'T'))
		BUMP(c, touch_misses);
	if (err) /* memcached reads the opaque as it writes the answer */
		ob_printf(c, "%s\r\n", err);
	else if (!m.q) {
		ob_str(c, "EN");
		mf_put_echoes(c, &m);
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
	if (!mf_line_ok(c, tk, nt, "CLIENT_ERROR options flags too long\r\n"))
		return;
	if (nt >= 3)
		len = tk[2];
	if (nt < 3 || !tok_i32(&len, &vlen) || vlen < 0 || vlen > INT_MAX - 2) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return;
	}
	/* From here on an error swallows the data block, as memcached does. */
	err = mf_parse(&m, tk, nt, 3);
	(void)(mf_u32(&m, 'F', &flags) && mf_u64(&m, 'C', &cas) &&
	       mf_i32(&m, 'T', &exptime));
	memset(p, 0, offsetof(struct pending, mret));
	p->meta = true;
	p->mode = SM_SET;
	mode = mf_flag_tok(&m, 'M');
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
	if (mf_has(&m, 'C') && (p->mode == SM_SET || p->mode == SM_REPLACE))
		p->mode = mf_has(&m, 'I') ? SM_CAS_STALE : SM_CAS;
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

		if (f == 'k' && m.b) {
			char enc[(STORE_KEY_MAX + 2) / 3 * 4];
			size_t e = mf_b64_encode(m.key, m.keylen, enc);

			n = (size_t)snprintf(buf, sizeof(buf), " k%.*s b", (int)e, enc);
		} else if (f == 'k')
			n = (size_t)snprintf(buf, sizeof(buf), " k%.*s", (int)m.keylen, m.key);
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

/* md and ma answer one text for any bad flag, but the opaque's own (memcached). */
static bool bad_flags(struct conn *c, const char *err)
{
	if (!err)
		return false;
	if (strcmp(err, MF_OPAQUE_TOO_LONG) != 0)
		err = "CLIENT_ERROR invalid or duplicate flag";
	ob_printf(c, "%s\r\n", err);
	return true;
}


static void peek_emit(void *arg, const struct item_view *v)
{
	(void)arg;
	(void)v;
}

void meta_delete(struct conn *c, struct tok *tk, size_t nt)
{
	struct store_read peek = { .nostats = true };
	struct mreq m;
	uint64_t cas = 0;
	int64_t ttl = 0;
	enum store_result r;

	BUMP(c, meta_cmds);
	if (!mf_line_ok(c, tk, nt, "CLIENT_ERROR options flags too long\r\n"))
		return;
	if (bad_flags(c, mf_parse(&m, tk, nt, 2)))
		return;
	(void)(mf_u64(&m, 'C', &cas) && mf_i32(&m, 'T', &ttl));
	if (mf_has(&m, 'C') && cas == 0) /* memcached compares a C0 too: no item has it */
		r = store_get(m.key, m.keylen, &peek, peek_emit, NULL) == ST_OK ? ST_EXISTS
									   : ST_NOT_FOUND;
	else if (mf_has(&m, 'I')) /* invalidate: stale, for one client to refresh */
		r = store_invalidate(m.key, m.keylen, cas, mf_has(&m, 'T'), ttl);
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
	mf_put_echoes(c, &m);
}

/* ---- ma ---- */

void meta_arith(struct conn *c, struct tok *tk, size_t nt)
{
	struct mreq m;
	struct store_arith a = { .incr = true, .delta = 1 };
	struct store_arith_out out;
	const struct tok *mode;
	const char *err;
	int64_t touch = 0;
	char num[24];
	size_t i, n;

	BUMP(c, meta_cmds);
	if (!mf_line_ok(c, tk, nt, "CLIENT_ERROR options flags too long\r\n"))
		return;
	err = mf_parse(&m, tk, nt, 2);
	if (!m.opaque_long && bad_flags(c, err))
		return;
	(void)(mf_u64(&m, 'C', &a.cas) && mf_u64(&m, 'D', &a.delta) &&
	       mf_u64(&m, 'J', &a.initial) && mf_i32(&m, 'N', &a.exptime) &&
	       mf_i32(&m, 'T', &touch));
	mode = mf_flag_tok(&m, 'M');
	if (mode) {
		switch (mode->s[1]) {
		case 'I': case '+': a.incr = true; break;
		case 'D': case '-': a.incr = false; break;
		default:
			ob_str(c, "CLIENT_ERROR invalid mode for ma M token\r\n");
			return;
		}
	}
	a.vivify = mf_has(&m, 'N');
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
		if (m.opaque_long) /* memcached reads it as it writes the answer */
			break;
		ob_str(c, "NF");
		mf_put_echoes(c, &m);
		return;
	case ST_EXISTS:
		if (m.opaque_long)
			break;
		ob_str(c, "EX");
		mf_put_echoes(c, &m);
		return;
	case ST_NON_NUMERIC:
		ob_str(c, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
		return;
	default:
		BUMP(c, oom_errors);
		ob_str(c, "SERVER_ERROR out of memory\r\n");
		return;
	}
	if (mf_has(&m, 'T') && !m.opaque_long) {
		store_touch(m.key, m.keylen, touch);
		out.exptime = store_realtime(touch);
	}
	if (m.opaque_long) {
		ob_str(c, MF_OPAQUE_TOO_LONG "\r\n");
		return;
	}
	if (m.q && !out.created) /* q hides a plain success, not a vivified item */
		return;
	n = fmt_u64(num, out.value);
	if (mf_has(&m, 'v'))
		ob_printf(c, "VA %zu", n);
	else
		ob_str(c, "HD");
	for (i = 0; i < m.nflags; i++) {
		char f = m.flag[i].s[0];

		if (f == 't')
			mf_put_num(c, 't', store_ttl(out.exptime));
		else if (f == 'c')
			mf_put_num(c, 'c', (int64_t)out.cas);
		else
			mf_put_echo(c, &m, f);
	}
	ob_put(c, "\r\n", 2);
	if (mf_has(&m, 'v')) {
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
	size_t n = v->binkey ? mf_b64_encode(x->key, x->keylen, key) : x->keylen;
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
		x.keylen = mf_b64_decode(tk[1].s, tk[1].n, keybuf);
		if (x.keylen == 0) {
			ob_str(c, "CLIENT_ERROR bad command line format\r\n");
			return;
		}
		x.key = keybuf;
	}
	if (store_get(x.key, x.keylen, &how, me_emit, &x) != ST_OK)
		ob_str(c, "EN\r\n");
}
