/* SPDX-License-Identifier: MIT */
/*
 * protocol.c: the memcached text protocol, as memcached 1.6 speaks it:
 * what a request means and what it answers (conn.h has the connection,
 * net.c moves the bytes, meta.c has the meta commands).  memcached's
 * doc/protocol.txt is the specification; where it is silent, Debian's
 * memcached 1.6.18 is (tests/slcache_proto.sh compares the two).
 *
 * When a connection is closed rather than answered, as memcached does: a
 * command it does not know whose line ends in an "HTTP/..." token (a web
 * client), "quit", and a line that has no end after 2 KiB unless it is a
 * get or gets (multigets may be long; they are bounded by GETLINE_MAX).
 * And a first byte of 0x80: memcached speaks the binary protocol then,
 * slcache does not.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "connmem.h"
#include "proto.h"
#include "slcache.h"
#include "storage.h"
#include "tenants.h"

#define LINE_SHORT_MAX 2048             /* a command line that is not a get  */
#define GETLINE_MAX (1024 * 1024)       /* a get line: 4000 keys of 250 bytes */

#define NS(field) atomic_load_explicit(&ns.sum.field, memory_order_relaxed)

size_t proto_read_need(const struct conn *c)
{
	size_t used = c->rend - c->rstart;

	if (c->state == CS_DATA && c->p.vlen + 2 > used)
		return c->p.vlen + 2 - used;
	return RBUF_MIN;
}

const char *proto_read_key(const struct conn *c, size_t *len)
{
	const char *p = c->rbuf + c->rstart;
	size_t n = c->rend - c->rstart, i = 0, word, k;

	if (c->state == CS_DATA) {
		*len = c->p.keylen;
		return c->p.key;
	}
	if (c->state != CS_CMD)
		return NULL;
	while (i < n && p[i] == ' ')
		i++;
	for (word = i; i < n && p[i] != ' ' && p[i] != '\n'; i++)
		;
	if ((i - word == 3 || i - word == 4) && memcmp(p + word, "gat", 3) == 0) {
		while (i < n && p[i] == ' ') /* gat, gats: the exptime first */
			i++;
		while (i < n && p[i] != ' ' && p[i] != '\n')
			i++;
	}
	while (i < n && p[i] == ' ')
		i++;
	for (k = i; k < n && k - i <= SL_NAME_MAX; k++) {
		if (p[k] == ':') {
			*len = k + 1 - i;
			return p + i;
		}
		if (p[k] == ' ' || p[k] == '\r' || p[k] == '\n')
			break;
	}
	if (k == i || (k == n && k - i <= SL_NAME_MAX))
		return NULL; /* no key yet, or its prefix may still come */
	*len = k - i; /* a key with no prefix ("default"), or one too long for a name */
	return p + i;
}

void proto_refuse_value(struct conn *c)
{
	BUMP(c, oom_errors);
	c->noreply = c->p.noreply;
	c->ans_key = c->p.key;
	c->ans_keylen = c->p.keylen;
	if (c->p.meta)
		ob_str(c, "SERVER_ERROR out of memory storing object\r\n");
	else
		reply(c, "SERVER_ERROR out of memory storing object");
	/* As a value refused for its size: a failed set drops the old value. */
	if (c->p.mode == SM_SET)
		store_delete(c->p.key, c->p.keylen, 0);
	c->swallow = (uint64_t)c->p.vlen + 2;
	c->state = CS_SWALLOW;
	/* What is buffered is all the value's (it did not fit): drop it now. */
	c->swallow -= c->rend - c->rstart;
	c->rstart = c->rend = 0;
}

/*
 * Skips the next @n bytes (a refused value), then answers @answer, if not
 * NULL: memcached queues the answer and sends nothing until the declared
 * bytes are in, so a client that sends a huge length hears nothing.
 */
void proto_swallow(struct conn *c, uint64_t n, const char *answer)
{
	c->swallow = n;
	c->swallow_reply = answer;
	c->state = CS_SWALLOW;
}

/* ---- tokens and numbers ---- */

bool tok_is(const struct tok *t, const char *s)
{
	size_t n = strlen(s);

	return t->n == n && memcmp(t->s, s, n) == 0;
}

/* Numbers: storage.c reads them as memcached does (store_num_scan()). */
bool tok_u64(const struct tok *t, uint64_t *out)
{
	return store_num_u64(t->s, t->n, out);
}

bool tok_i64(const struct tok *t, int64_t *out)
{
	uint64_t mag;
	bool neg;

	if (!store_num_scan(t->s, t->n, &neg, &mag) || mag > (uint64_t)INT64_MAX + (neg ? 1 : 0))
		return false;
	*out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	return true;
}

/* memcached keeps 32 bits of what it read as a long: exptimes and lengths
 * wrap (an exptime of 99999999999 is a date in 2008). */
bool tok_i32(const struct tok *t, int64_t *out)
{
	int64_t v;

	if (!tok_i64(t, &v))
		return false;
	*out = (int32_t)(uint32_t)(uint64_t)v;
	return true;
}

bool tok_u32(const struct tok *t, uint32_t *out)
{
	uint64_t v;

	if (!tok_u64(t, &v))
		return false;
	*out = (uint32_t)v;
	return true;
}

size_t fmt_u64(char *buf, uint64_t v)
{
	char tmp[24];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

static size_t tokenize(char *line, size_t len, struct tok *toks, size_t max)
{
	size_t n = 0, i = 0;

	while (i < len && n < max) {
		size_t j;

		while (i < len && line[i] == ' ')
			i++;
		if (i == len)
			break;
		for (j = i; j < len && line[j] != ' '; j++)
			;
		toks[n].s = line + i;
		toks[n].n = j - i;
		n++;
		i = j;
	}
	return n;
}

static bool key_ok(const struct tok *t)
{
	return t->n > 0 && t->n <= STORE_KEY_MAX;
}

void reply(struct conn *c, const char *s)
{
	if (!c->noreply) {
		ob_str(c, s);
		ob_put(c, "\r\n", 2);
	}
}

void noreply_maybe(struct conn *c, struct tok *tk, size_t nt)
{
	c->noreply = nt > 1 && tok_is(&tk[nt - 1], "noreply");
}

/* ---- get, gets, gat, gats ---- */

struct get_ctx {
	struct conn *c;
	bool cas;
	bool quiet;  /* count the key, answer nothing                */
	bool nomem;  /* the pool had no room for this value's answer */
	size_t need; /* what it needed                               */
	const char *key;
	size_t keylen;
};

/* Called under the tenant's lock: format and copy, nothing else. */
static void emit_value(void *arg, const struct item_view *v)
{
	struct get_ctx *g = arg;
	struct conn *c = g->c;
	char *p;

	if (g->quiet)
		return;
	g->need = g->keylen + v->vlen + 80;
	if (!ob_try_reserve(c, g->need)) {
		g->nomem = true;
		return;
	}
	p = c->wbuf + c->wend;
	memcpy(p, "VALUE ", 6);
	p += 6;
	memcpy(p, g->key, g->keylen);
	p += g->keylen;
	*p++ = ' ';
	p += fmt_u64(p, v->flags);
	*p++ = ' ';
	p += fmt_u64(p, v->vlen);
	if (g->cas) {
		*p++ = ' ';
		p += fmt_u64(p, v->cas);
	}
	*p++ = '\r';
	*p++ = '\n';
	memcpy(p, v->value, v->vlen);
	p += v->vlen;
	*p++ = '\r';
	*p++ = '\n';
	c->wend = (size_t)(p - c->wbuf);
}

/* The next key of a get line from *i; false at the end of the line. */
static bool next_key(const char *line, size_t len, size_t *i, struct tok *k)
{
	while (*i < len && line[*i] == ' ')
		(*i)++;
	if (*i == len)
		return false;
	k->s = (char *)line + *i;
	while (*i < len && line[*i] != ' ')
		(*i)++;
	k->n = (size_t)(line + *i - k->s);
	return true;
}

enum get_res { GET_DONE, GET_WAIT, GET_FAIL };

/* One key of a multiget: GET_WAIT when it must wait (its answer did not
 * fit: its tenant's share of the pool is short), GET_FAIL when it never
 * could (answered with an error, which ends the answer, as memcached's).
 * @quiet: counted and touched, nothing answered (the keys before a bad
 * one, which memcached has already looked up). */
static enum get_res get_one(struct conn *c, const struct tok *k, bool cas, bool touch, bool quiet)
{
	struct get_ctx g = { .c = c, .cas = cas, .quiet = quiet, .key = k->s, .keylen = k->n };
	struct store_read how = { .touch = touch, .exptime = c->get_exptime };
	enum store_result r;

	c->ans_key = k->s; /* its answer is charged to its tenant */
	c->ans_keylen = k->n;
	r = store_get(k->s, k->n, &how, emit_value, &g);
	if (g.nomem && connmem_fits(connmem_owner(k->s, k->n), g.need)) {
		c->get_nomem = true;
		return GET_WAIT;
	}
	if (g.nomem) { /* could never fit: as memcached when it cannot answer */
		ob_str(c, "SERVER_ERROR out of memory writing get response\r\n");
		return GET_FAIL;
	}
	if (touch)
		BUMP(c, cmd_touch);
	else
		BUMP(c, cmd_get);
	if (r == ST_OK) {
		if (touch)
			BUMP(c, touch_hits);
		else
			BUMP(c, get_hits);
	} else if (touch) {
		BUMP(c, touch_misses);
	} else {
		BUMP(c, get_misses);
	}
	return GET_DONE;
}

/* The first look at a get line: its exptime (gat, gats) and every key
 * checked before any answer goes out, since a streamed answer cannot be
 * taken back.  Sets *i past the command word (and exptime); false when the
 * line is answered already (an error). */
static bool get_start(struct conn *c, const char *line, size_t len, bool touch, size_t *i)
{
	size_t j;
	struct tok k;
	bool any = false;

	while (*i < len && line[*i] != ' ') /* the command word */
		(*i)++;
	c->get_exptime = 0;
	if (touch) {
		if (!next_key(line, len, i, &k)) { /* "gat " alone: memcached wants a token */
			ob_str(c, "ERROR\r\n");
			return false;
		}
		if (!tok_i32(&k, &c->get_exptime)) {
			ob_str(c, "CLIENT_ERROR invalid exptime argument\r\n");
			return false;
		}
	}
	for (j = *i; next_key(line, len, &j, &k); any = true) {
		if (key_ok(&k))
			continue;
		/* memcached looked up the keys before the bad one and answers
		 * the error alone. */
		for (size_t m = *i; next_key(line, len, &m, &k) && m < j;)
			get_one(c, &k, false, touch, true);
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return false;
	}
	if (!any && !touch) { /* "get " with no key: memcached's token count */
		ob_str(c, "ERROR\r\n");
		return false;
	}
	return true;
}

/* get/gets KEY..., gat/gats EXPTIME KEY...: walks the line itself, so a
 * multiget may have any number of keys.  Its answer is produced as the
 * socket drains: past WBUF_HIGH of unsent output, or when the pool has no
 * room for the next value, it stops before that key (c->get_at) and
 * returns false, the line still unread; net.c calls again. */
static bool cmd_get(struct conn *c, char *line, size_t len, bool cas, bool touch)
{
	size_t i = c->get_at;
	struct tok k;
	enum get_res r;

	c->get_nomem = false;
	if (i == 0 && !get_start(c, line, len, touch, &i))
		return true;
	for (;;) {
		size_t at = i;

		if (!next_key(line, len, &i, &k))
			break;
		if (c->wend - c->wstart >= WBUF_HIGH ||
		    (r = get_one(c, &k, cas, touch, false)) == GET_WAIT) {
			c->get_at = at;
			return false;
		}
		if (r == GET_FAIL) {
			c->get_at = 0;
			return true;
		}
	}
	if (!ob_try_reserve(c, 5)) { /* END waits for room as a value does */
		c->get_at = i;
		c->get_nomem = true;
		return false;
	}
	c->get_at = 0;
	ob_str(c, "END\r\n");
	return true;
}

/* ---- storage commands ---- */

/* set/add/replace/append/prepend/cas: parse the line, then wait for the data. */
static void cmd_update(struct conn *c, struct tok *tk, size_t nt, enum store_mode mode)
{
	size_t want = mode == SM_CAS ? 6 : 5;
	int64_t vlen;

	if (nt != want && nt != want + 1) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	noreply_maybe(c, tk, nt);
	memset(&c->p, 0, offsetof(struct pending, mret));
	if (!key_ok(&tk[1]) || !tok_u32(&tk[2], &c->p.flags) || !tok_i32(&tk[3], &c->p.exptime) ||
	    !tok_i32(&tk[4], &vlen) || vlen < 0 || vlen > INT_MAX - 2 ||
	    (mode == SM_CAS && !tok_u64(&tk[5], &c->p.cas))) {
		reply(c, "CLIENT_ERROR bad command line format");
		return;
	}
	c->p.mode = mode;
	c->p.noreply = c->noreply;
	c->p.keylen = tk[1].n;
	memcpy(c->p.key, tk[1].s, tk[1].n);
	c->p.vlen = (size_t)vlen;
	if (store_item_total(c->p.keylen, c->p.flags, c->p.vlen) > opt.item_max) {
		/* As memcached: a failed set drops the old value; the data is
		 * swallowed, and the answer waits for its end. */
		if (mode == SM_SET)
			store_delete(c->p.key, c->p.keylen, 0);
		proto_swallow(c, (uint64_t)vlen + 2,
			      c->noreply ? NULL : "SERVER_ERROR object too large for cache");
		return;
	}
	c->state = CS_DATA;
}

static void complete_update(struct conn *c, const char *data)
{
	enum store_result r;

	c->noreply = c->p.noreply;
	if (data[c->p.vlen] != '\r' || data[c->p.vlen + 1] != '\n') {
		reply(c, "CLIENT_ERROR bad data chunk");
		return;
	}
	BUMP(c, cmd_set);
	r = store_update(c->p.mode, c->p.key, c->p.keylen, c->p.flags, c->p.exptime, data,
			 c->p.vlen, c->p.cas, NULL, false);
	if (c->p.mode == SM_CAS)
		switch (r) {
		case ST_STORED: BUMP(c, cas_hits); break;
		case ST_EXISTS: BUMP(c, cas_badval); break;
		case ST_NOT_FOUND: BUMP(c, cas_misses); break;
		default: break;
		}
	switch (r) {
	case ST_STORED:
		BUMP(c, total_items);
		reply(c, "STORED");
		break;
	case ST_NOT_STORED:
		reply(c, "NOT_STORED");
		break;
	case ST_EXISTS:
		reply(c, "EXISTS");
		break;
	case ST_NOT_FOUND:
		reply(c, "NOT_FOUND");
		break;
	case ST_TOO_LARGE:
		reply(c, "SERVER_ERROR object too large for cache");
		break;
	default:
		BUMP(c, oom_errors);
		reply(c, "SERVER_ERROR out of memory storing object");
		break;
	}
}

/*
 * The data block of a storage command is in: may it be stored now?  A
 * tenant whose lease is starting (created by this very key, maybe) has no
 * share yet: the write waits for it, its connection parked (c->lease_wait:
 * net.c runs it again, and reads nothing more meanwhile), and past
 * --lease-wait it is answered with an error naming the store.  0: store
 * it; 1: answered, its data to skip; -1: it waits.
 */
static int lease_gate(struct conn *c)
{
	int rc = opt.lease_store ? lease_write_wait(tenant_for_key(c->p.key, c->p.keylen),
						    &c->lease_since) : 0;

	c->lease_wait = rc == -EAGAIN;
	if (c->lease_wait)
		return -1;
	c->lease_since = 0;
	if (rc == 0)
		return 0;
	c->noreply = c->p.noreply;
	if (c->p.meta) /* ms: errors are answered, q or not */
		ob_str(c, "SERVER_ERROR lease store unavailable\r\n");
	else
		reply(c, "SERVER_ERROR lease store unavailable");
	return 1;
}

/* ---- delete, incr, decr, touch ---- */

static void cmd_delete(struct conn *c, struct tok *tk, size_t nt)
{
	size_t extra;

	if (nt < 2 || nt > 4) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	noreply_maybe(c, tk, nt);
	extra = nt - 2 - (c->noreply ? 1 : 0);
	if (extra > 1 || (extra == 1 && !tok_is(&tk[2], "0"))) {
		reply(c, "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
		return;
	}
	if (!key_ok(&tk[1])) {
		reply(c, "CLIENT_ERROR bad command line format");
		return;
	}
	if (store_delete(tk[1].s, tk[1].n, 0) == ST_DELETED) {
		BUMP(c, delete_hits);
		reply(c, "DELETED");
	} else {
		BUMP(c, delete_misses);
		reply(c, "NOT_FOUND");
	}
}

static void cmd_arith(struct conn *c, struct tok *tk, size_t nt, bool incr)
{
	struct store_arith a = { .incr = incr };
	struct store_arith_out out;
	char buf[24];

	if (nt != 3 && nt != 4) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	noreply_maybe(c, tk, nt);
	if (!key_ok(&tk[1])) {
		reply(c, "CLIENT_ERROR bad command line format");
		return;
	}
	if (!tok_u64(&tk[2], &a.delta)) {
		reply(c, "CLIENT_ERROR invalid numeric delta argument");
		return;
	}
	switch (store_arith(tk[1].s, tk[1].n, &a, &out)) {
	case ST_OK:
		if (incr)
			BUMP(c, incr_hits);
		else
			BUMP(c, decr_hits);
		buf[fmt_u64(buf, out.value)] = '\0';
		reply(c, buf);
		break;
	case ST_NOT_FOUND:
		if (incr)
			BUMP(c, incr_misses);
		else
			BUMP(c, decr_misses);
		reply(c, "NOT_FOUND");
		break;
	case ST_NON_NUMERIC:
		reply(c, "CLIENT_ERROR cannot increment or decrement non-numeric value");
		break;
	default:
		BUMP(c, oom_errors);
		reply(c, "SERVER_ERROR out of memory");
		break;
	}
}

static void cmd_touch(struct conn *c, struct tok *tk, size_t nt)
{
	int64_t exptime;

	if (nt != 3 && nt != 4) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	noreply_maybe(c, tk, nt);
	if (!key_ok(&tk[1])) {
		reply(c, "CLIENT_ERROR bad command line format");
		return;
	}
	if (!tok_i32(&tk[2], &exptime)) {
		reply(c, "CLIENT_ERROR invalid exptime argument");
		return;
	}
	BUMP(c, cmd_touch);
	if (store_touch(tk[1].s, tk[1].n, exptime) == ST_TOUCHED) {
		BUMP(c, touch_hits);
		reply(c, "TOUCHED");
	} else {
		BUMP(c, touch_misses);
		reply(c, "NOT_FOUND");
	}
}

/* ---- server commands ---- */

static void cmd_flush(struct conn *c, struct tok *tk, size_t nt)
{
	size_t nargs;
	int64_t when = 0;

	if (nt > 3) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	noreply_maybe(c, tk, nt);
	BUMP(c, cmd_flush); /* counted even when refused, as memcached */
	if (opt.flush_disabled) { /* -F */
		reply(c, "CLIENT_ERROR flush_all not allowed");
		return;
	}
	/* As memcached: only the first argument is read ("flush_all 0 0" is
	 * fine), unless the line is "flush_all [noreply]". */
	nargs = nt - 1 - (c->noreply ? 1 : 0);
	if (nargs >= 1 && !tok_i32(&tk[1], &when)) {
		reply(c, "CLIENT_ERROR invalid exptime argument");
		return;
	}
	/* A connection that has used a key flushes its tenant only (a guard
	 * against accidents: tenants are not authenticated); a fresh one
	 * flushes everything, as memcached's clients and tests expect. */
	if (c->tenant)
		store_flush_tenant(c->tenant, when);
	else
		store_flush(when);
	reply(c, "OK");
}

/* ---- stats ---- */

static void stat_u64(struct conn *c, const char *name, uint64_t v)
{
	ob_printf(c, "STAT %s %" PRIu64 "\r\n", name, v);
}

static void emit_tenant(void *arg, const char *name, const struct tenant_stats *st)
{
	struct conn *c = arg;
	static const char *const names[] = { "usage", "soft", "max", "items", "bytes",
					     "evictions", "hits", "misses", "events_low",
					     "events_high", "events_max", "events_oom", "refaults" };
	const uint64_t v[] = { st->usage, st->soft, st->max, st->items, st->bytes,
			       st->evictions, st->hits, st->misses, st->events_low,
			       st->events_high, st->events_max, st->events_oom, st->refaults };
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		ob_printf(c, "STAT tenant:%s:%s %" PRIu64 "\r\n", name, names[i], v[i]);
	if (st->lease.on) /* --lease-store: its share of its budget */
		ob_printf(c, "STAT tenant:%s:lease %" PRIu64 "\r\nSTAT tenant:%s:lease_expires_ms %" PRId64
			  "\r\nSTAT tenant:%s:lease_floor %" PRIu64 "\r\nSTAT tenant:%s:lease_state %s"
			  "\r\nSTAT tenant:%s:lease_fences %" PRIu64 "\r\n",
			  name, st->lease.share, name, st->lease.expires_ms, name, st->lease.floor, name,
			  st->lease.state, name, st->lease.fences);
}

/* stats items: a "slab class" per tenant, numbered from 1 in creation order. */
struct items_ctx {
	struct conn *c;
	unsigned id;
};

static void emit_items(void *arg, const char *name, const struct tenant_stats *st)
{
	struct items_ctx *x = arg;

	(void)name;
	x->id++;
	if (st->items == 0)
		return;
	ob_printf(x->c, "STAT items:%u:number %" PRIu64 "\r\n", x->id, st->items);
	ob_printf(x->c, "STAT items:%u:mem_requested %" PRIu64 "\r\n", x->id, st->bytes);
	ob_printf(x->c, "STAT items:%u:evicted %" PRIu64 "\r\n", x->id, st->evictions);
	ob_printf(x->c, "STAT items:%u:outofmemory %" PRIu64 "\r\n", x->id, st->events_oom);
}

static void stats_general(struct conn *c)
{
	struct tenant_stats tot;
	struct net_stats ns;
	struct rusage ru;
	time_t now = time(NULL);

	tenants_totals(&tot);
	net_stats(&ns);
	getrusage(RUSAGE_SELF, &ru);
	ob_printf(c, "STAT pid %ld\r\n", (long)getpid());
	stat_u64(c, "uptime", (uint64_t)(now - started));
	stat_u64(c, "time", (uint64_t)now);
	ob_printf(c, "STAT version %s\r\n", SLCACHE_PROTO_VERSION);
	ob_printf(c, "STAT libevent slcache (softlimit %s)\r\n", sl_version());
	stat_u64(c, "pointer_size", sizeof(void *) * 8);
	ob_printf(c, "STAT rusage_user %ld.%06ld\r\n", (long)ru.ru_utime.tv_sec,
		  (long)ru.ru_utime.tv_usec);
	ob_printf(c, "STAT rusage_system %ld.%06ld\r\n", (long)ru.ru_stime.tv_sec,
		  (long)ru.ru_stime.tv_usec);
	stat_u64(c, "max_connections", opt.max_conns);
	stat_u64(c, "curr_connections", ns.curr_conns);
	stat_u64(c, "total_connections", ns.total_conns);
	stat_u64(c, "rejected_connections", ns.rejected_conns);
	stat_u64(c, "cmd_get", NS(cmd_get));
	stat_u64(c, "cmd_set", NS(cmd_set));
	stat_u64(c, "cmd_flush", NS(cmd_flush));
	stat_u64(c, "cmd_touch", NS(cmd_touch));
	stat_u64(c, "cmd_meta", NS(meta_cmds));
	stat_u64(c, "get_hits", NS(get_hits));
	stat_u64(c, "get_misses", NS(get_misses));
	stat_u64(c, "get_expired", NS(get_expired));
	stat_u64(c, "get_flushed", NS(get_flushed));
	stat_u64(c, "delete_misses", NS(delete_misses));
	stat_u64(c, "delete_hits", NS(delete_hits));
	stat_u64(c, "incr_misses", NS(incr_misses));
	stat_u64(c, "incr_hits", NS(incr_hits));
	stat_u64(c, "decr_misses", NS(decr_misses));
	stat_u64(c, "decr_hits", NS(decr_hits));
	stat_u64(c, "cas_misses", NS(cas_misses));
	stat_u64(c, "cas_hits", NS(cas_hits));
	stat_u64(c, "cas_badval", NS(cas_badval));
	stat_u64(c, "touch_hits", NS(touch_hits));
	stat_u64(c, "touch_misses", NS(touch_misses));
	stat_u64(c, "bytes_read", NS(bytes_read));
	stat_u64(c, "bytes_written", NS(bytes_written));
	stat_u64(c, "limit_maxbytes", tenants_budget());
	stat_u64(c, "threads", opt.threads);
	stat_u64(c, "bytes", tot.bytes);
	stat_u64(c, "curr_items", tot.items);
	stat_u64(c, "total_items", NS(total_items));
	stat_u64(c, "evictions", tot.evictions);
	stat_u64(c, "refaults", tot.refaults);
	stat_u64(c, "oom_errors", NS(oom_errors));
	stat_u64(c, "conn_stalled_closed", NS(stalled_closed));
	stat_u64(c, "conn_bytes", connmem_used());
	stat_u64(c, "conn_memory", connmem_pool());
	ob_printf(c, "STAT accounting %s\r\n", tenants_backend());
	ob_printf(c, "STAT policy %s\r\n", opt.accounting ? policy_name(opt.policy) : "none");
	stat_u64(c, "usage", tot.usage);
}

/*
 * The tenants' lines of a stats answer, made as the socket drains, as a
 * multiget's values are: past WBUF_HIGH of unsent output it stops before a
 * tenant (c->get_at: that tenant's number + 1) and returns false, the line
 * still unread; net.c calls again.  Thousands of tenants' lines never need
 * more connection memory than that, and a tenant's lines stay together.
 */
static bool stats_tenants_part(struct conn *c)
{
	unsigned i = c->get_at ? (unsigned)(c->get_at - 1) : 0, n = tenants_count();

	for (; i < n; i++) {
		if (c->wend - c->wstart >= WBUF_HIGH) {
			c->get_at = (size_t)i + 1;
			return false;
		}
		tenants_stat_one(i, emit_tenant, c);
	}
	c->get_at = 0;
	return true;
}

static void stats_settings(struct conn *c)
{
	stat_u64(c, "maxbytes", tenants_budget());
	stat_u64(c, "maxconns", opt.max_conns);
	ob_printf(c, "STAT tcpport %s\r\n", opt.port);
	stat_u64(c, "udpport", 0);
	ob_printf(c, "STAT inter %s\r\n", opt.addr);
	stat_u64(c, "verbosity", (uint64_t)atomic_load_explicit(&opt.verbose, memory_order_relaxed));
	ob_str(c, "STAT evictions on\r\n");
	stat_u64(c, "num_threads", opt.threads);
	ob_str(c, "STAT cas_enabled yes\r\n");
	ob_str(c, "STAT binding_protocol ascii\r\n");
	stat_u64(c, "item_size_max", opt.item_max);
	ob_printf(c, "STAT flush_enabled %s\r\n", opt.flush_disabled ? "no" : "yes");
	stat_u64(c, "max_tenants", opt.max_tenants);
	ob_printf(c, "STAT accounting %s\r\n", tenants_backend());
	ob_printf(c, "STAT policy %s\r\n", opt.accounting ? policy_name(opt.policy) : "none");
}

static bool cmd_stats(struct conn *c, struct tok *tk, size_t nt)
{
	if (nt == 1 || tok_is(&tk[1], "tenants")) {
		if (nt == 1 && !c->get_at)
			stats_general(c);
		if (!stats_tenants_part(c))
			return false;
	} else if (tok_is(&tk[1], "settings")) {
		stats_settings(c);
	} else if (tok_is(&tk[1], "items")) {
		struct items_ctx x = { c, 0 };

		tenants_stats(emit_items, &x);
	} else if (tok_is(&tk[1], "slabs")) {
		struct tenant_stats tot;

		tenants_totals(&tot);
		stat_u64(c, "active_slabs", 0);
		stat_u64(c, "total_malloced", tot.usage);
	} else if (tok_is(&tk[1], "extstore")) {
		/* no external storage: nothing to report */
	} else if (tok_is(&tk[1], "sizes")) {
		ob_str(c, "STAT sizes_status disabled\r\n");
	} else if (tok_is(&tk[1], "conns")) {
		ob_printf(c, "STAT %d:state conn_parse_cmd\r\n", c->fd);
	} else if (tok_is(&tk[1], "cachedump")) {
		uint32_t id, limit;

		if (nt < 4) {
			ob_str(c, "CLIENT_ERROR bad command line\r\n");
			return true;
		}
		if (!tok_u32(&tk[2], &id) || !tok_u32(&tk[3], &limit)) {
			ob_str(c, "CLIENT_ERROR bad command line format\r\n");
			return true;
		}
		if (id >= SLAB_CLASSES_MAX) {
			ob_str(c, "CLIENT_ERROR Illegal slab id\r\n");
			return true;
		}
		/* item listing is not kept: an empty dump, as of an empty class */
	} else if (tok_is(&tk[1], "reset")) {
		ob_str(c, "RESET\r\n");
		return true;
	} else if (tok_is(&tk[1], "detail")) {
		/* Per-prefix statistics are the tenants' ("stats tenants"): the
		 * switch is accepted and the dump is empty. */
		if (nt >= 3 && (tok_is(&tk[2], "on") || tok_is(&tk[2], "off")))
			ob_str(c, "OK\r\n");
		else if (nt >= 3 && tok_is(&tk[2], "dump"))
			ob_str(c, "END\r\n");
		else
			ob_str(c, "CLIENT_ERROR usage: stats detail on|off|dump\r\n");
		return true;
	} else {
		ob_str(c, "ERROR\r\n");
		return true;
	}
	ob_str(c, "END\r\n");
	return true;
}

/* ---- dispatch ---- */

static bool starts(const char *line, size_t len, const char *word)
{
	size_t n = strlen(word);

	return len > n && memcmp(line, word, n) == 0 && line[n] == ' ';
}

/* A command word memcached does not know: a line whose last token is an
 * "HTTP/..." one is a web client's, closed without an answer. */
static void cmd_unknown(struct conn *c, struct tok *tk, size_t nt)
{
	if (tk[nt - 1].n >= 5 && memcmp(tk[nt - 1].s, "HTTP/", 5) == 0) {
		c->close_after = true;
		c->state = CS_CLOSE;
		return;
	}
	ob_str(c, "ERROR\r\n");
}

static void dispatch_meta(struct conn *c, struct tok *tk, size_t nt)
{
	if (nt > 1) { /* its answer is charged to its key's tenant */
		c->ans_key = tk[1].s;
		c->ans_keylen = tk[1].n;
	}
	switch (tk[0].s[1]) {
	case 'g': meta_get(c, tk, nt); break;
	case 's': meta_set(c, tk, nt); break;
	case 'd': meta_delete(c, tk, nt); break;
	case 'a': meta_arith(c, tk, nt); break;
	case 'n': ob_str(c, "MN\r\n"); break;
	case 'e': meta_debug(c, tk, nt); break;
	default: ob_str(c, "ERROR\r\n"); break;
	}
}

/* One command line (without its "\r\n"), dispatched as memcached does: a
 * one-letter command is an error whatever it is, and a command's token
 * count is checked before its arguments.  False when it is not done (a
 * multiget waits to go on: the line must stay). */
static bool process_line(struct conn *c, char *line, size_t len)
{
	struct tok tk[MAX_TOKENS];
	size_t nt;

	c->noreply = false;
	c->ans_key = NULL; /* an answer for no key: the anonymous owner's */
	while (len > 0 && line[0] == ' ') { /* as memcached's tokenizer */
		line++;
		len--;
	}
	if (starts(line, len, "get") || starts(line, len, "gets"))
		return cmd_get(c, line, len, line[3] == 's', false);
	if (starts(line, len, "bget")) /* memcached's ancient alias of get */
		return cmd_get(c, line, len, false, false);
	if (starts(line, len, "gat") || starts(line, len, "gats"))
		return cmd_get(c, line, len, line[3] == 's', true);
	nt = tokenize(line, len, tk, MAX_TOKENS);
	if (nt == 0 || tk[0].n < 2) {
		ob_str(c, "ERROR\r\n");
		return true;
	}
	/* A meta command answers its own "too long" for a line of too many
	 * tokens (memcached's tokenizer stops at 24; the flags' limit is 20). */
	if (tk[0].n == 2 && tk[0].s[0] == 'm')
		dispatch_meta(c, tk, nt);
	else if (nt == MAX_TOKENS)
		ob_str(c, "ERROR\r\n");
	else if (tok_is(&tk[0], "set"))
		cmd_update(c, tk, nt, SM_SET);
	else if (tok_is(&tk[0], "add"))
		cmd_update(c, tk, nt, SM_ADD);
	else if (tok_is(&tk[0], "replace"))
		cmd_update(c, tk, nt, SM_REPLACE);
	else if (tok_is(&tk[0], "append"))
		cmd_update(c, tk, nt, SM_APPEND);
	else if (tok_is(&tk[0], "prepend"))
		cmd_update(c, tk, nt, SM_PREPEND);
	else if (tok_is(&tk[0], "cas"))
		cmd_update(c, tk, nt, SM_CAS);
	else if (tok_is(&tk[0], "delete"))
		cmd_delete(c, tk, nt);
	else if (tok_is(&tk[0], "incr"))
		cmd_arith(c, tk, nt, true);
	else if (tok_is(&tk[0], "decr"))
		cmd_arith(c, tk, nt, false);
	else if (tok_is(&tk[0], "touch"))
		cmd_touch(c, tk, nt);
	else if (tok_is(&tk[0], "gat") || tok_is(&tk[0], "gats") || tok_is(&tk[0], "get") ||
		 tok_is(&tk[0], "gets") || tk[0].s[0] == 'g')
		ob_str(c, "ERROR\r\n"); /* no key, or no exptime; or no such command */
	else if (tok_is(&tk[0], "stats"))
		return cmd_stats(c, tk, nt);
	else if (tok_is(&tk[0], "flush_all"))
		cmd_flush(c, tk, nt);
	else if (tok_is(&tk[0], "version")) /* as memcached 1.6: arguments are ignored */
		ob_str(c, "VERSION " SLCACHE_PROTO_VERSION "\r\n");
	else if (tok_is(&tk[0], "quit")) {
		c->close_after = true;
		c->state = CS_CLOSE;
	} else if (admin_command(c, tk, nt))
		; /* verbosity, cache_memlimit, slabs, lru, lru_crawler, ... */
	else if (tk[0].s[0] == 's' || tk[0].s[0] == 'a' || tk[0].s[0] == 'c' ||
		   tk[0].s[0] == 'i' || tk[0].s[0] == 'd' || tk[0].s[0] == 't')
		ob_str(c, "ERROR\r\n"); /* memcached's families answer before the HTTP check */
	else
		cmd_unknown(c, tk, nt);
	return true;
}

/* A line with no end yet: may it still grow?  memcached lets only get and
 * gets lines pass 2 KiB. */
static bool line_may_grow(const char *p, size_t avail)
{
	size_t sp = 0;

	if (avail <= LINE_SHORT_MAX)
		return true;
	if (avail > GETLINE_MAX)
		return false;
	while (sp < avail && p[sp] == ' ')
		sp++;
	return sp <= 100 && (starts(p + sp, avail - sp, "get") || starts(p + sp, avail - sp, "gets"));
}

/*
 * An answer goes out whole or not at all: when a part of it found no room
 * in the pool (ob_reserve() set c->ob_short, and wrote nothing more), what
 * it wrote since @mark (bytes of output waiting before it) is taken back,
 * and an error line says why.  With no room even for that, the connection
 * is closed: never a cut answer, nor an END after one.  (Answers were cut
 * where the pool ran out, and a stats then ended in END all the same.)
 */
static void answer_end(struct conn *c, size_t mark)
{
	static const char err[] = "SERVER_ERROR out of memory writing response\r\n";

	if (!c->ob_short)
		return;
	c->ob_short = false;
	c->wend = c->wstart + mark;
	BUMP(c, oom_errors);
	if (ob_try_reserve(c, sizeof(err) - 1)) {
		memcpy(c->wbuf + c->wend, err, sizeof(err) - 1);
		c->wend += sizeof(err) - 1;
	} else {
		logv("connection %d: no memory to answer, nor to say so: closing", c->fd);
		c->close_after = true;
	}
}

/* An answer outside a request (a refused value's) that found no room: the
 * connection cannot say so, it is closed. */
static void answer_lost(struct conn *c)
{
	if (c->ob_short) {
		c->ob_short = false;
		c->close_after = true;
	}
}

/* Runs every complete request in the read buffer; stops at a partial one,
 * at quit, or while too much output waits. */
void proto_input(struct conn *c)
{
	store_bind(&c->tenant);
	answer_lost(c);
	while (!c->close_after && c->wend - c->wstart < WBUF_HIGH) {
		char *p = c->rbuf + c->rstart;
		size_t avail = c->rend - c->rstart, mark = c->wend - c->wstart;

		if (c->state == CS_CLOSE) {
			c->rstart = c->rend;
			break;
		}
		if (c->state == CS_SWALLOW) {
			size_t n = avail < c->swallow ? avail : (size_t)c->swallow;

			c->rstart += n;
			c->swallow -= n;
			if (c->swallow)
				break;
			c->state = CS_CMD;
			if (c->swallow_reply) {
				ob_str(c, c->swallow_reply);
				ob_put(c, "\r\n", 2);
				c->swallow_reply = NULL;
			}
		} else if (c->state == CS_DATA) {
			int gate;

			if (avail < c->p.vlen + 2 || (gate = lease_gate(c)) < 0)
				break;
			c->state = CS_CMD;
			c->rstart += c->p.vlen + 2;
			if (gate > 0)
				continue;
			c->ans_key = c->p.key;
			c->ans_keylen = c->p.keylen;
			if (c->p.meta)
				meta_complete_set(c, p);
			else
				complete_update(c, p);
			answer_end(c, mark);
		} else {
			char *nl, *nul;
			size_t len;
			bool done;

			if (avail == 0)
				break;
			if ((unsigned char)p[0] == 0x80) { /* the binary protocol */
				logv("connection %d: binary protocol, not spoken here: closing", c->fd);
				c->close_after = true;
				c->state = CS_CLOSE;
				continue;
			}
			nl = memchr(p, '\n', avail);
			if (!nl) {
				if (!line_may_grow(p, avail)) {
					logv("connection %d: line too long: closing", c->fd);
					c->close_after = true;
					c->state = CS_CLOSE;
					continue;
				}
				break;
			}
			len = (size_t)(nl - p);
			c->rstart += len + 1;
			if (len > 1 && p[len - 1] == '\r')
				len--;
			/* memcached reads the line as a C string: a NUL ends it. */
			nul = memchr(p, '\0', len);
			if (nul)
				len = (size_t)(nul - p);
			done = process_line(c, p, len);
			answer_end(c, mark);
			if (!done) {
				c->rstart -= (size_t)(nl - p) + 1; /* the line waits */
				break;
			}
		}
	}
	answer_lost(c);
	if (c->rstart == c->rend)
		c->rstart = c->rend = 0;
	store_bind(NULL);
}
