/* SPDX-License-Identifier: MIT */
/*
 * protocol.c: the memcached text protocol, what a request means and what
 * it answers (conn.h has the connection, net.c moves the bytes).
 */
#define _GNU_SOURCE

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "slcache.h"
#include "storage.h"
#include "tenants.h"

#define LINE_MAX_BYTES (64 * 1024)    /* longest command line                 */
#define RBUF_MIN (16 * 1024)
#define WBUF_HIGH (4 * 1024 * 1024)   /* stop reading while more is unsent    */
#define MAX_TOKENS 24

#define NS(field) atomic_load_explicit(&ns.sum.field, memory_order_relaxed)

size_t proto_read_need(const struct conn *c)
{
	size_t used = c->rend - c->rstart;

	if (c->state == CS_DATA && c->p.vlen + 2 > used)
		return c->p.vlen + 2 - used;
	return RBUF_MIN;
}

static size_t fmt_u64(char *buf, uint64_t v)
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

struct get_ctx {
	struct conn *c;
	bool cas;
	const char *key;
	size_t keylen;
};

/* Called under the tenant's lock: format and copy, nothing else. */
static void emit_value(void *arg, const struct item_view *v)
{
	struct get_ctx *g = arg;
	struct conn *c = g->c;
	const char *key = g->key;
	size_t keylen = g->keylen, vlen = v->vlen;
	uint32_t flags = v->flags;
	uint64_t cas = v->cas;
	const void *value = v->value;
	char *p;

	if (!ob_reserve(c, keylen + vlen + 80))
		return;
	p = c->wbuf + c->wend;
	memcpy(p, "VALUE ", 6);
	p += 6;
	memcpy(p, key, keylen);
	p += keylen;
	*p++ = ' ';
	p += fmt_u64(p, flags);
	*p++ = ' ';
	p += fmt_u64(p, vlen);
	if (g->cas) {
		*p++ = ' ';
		p += fmt_u64(p, cas);
	}
	*p++ = '\r';
	*p++ = '\n';
	memcpy(p, value, vlen);
	p += vlen;
	*p++ = '\r';
	*p++ = '\n';
	c->wend = (size_t)(p - c->wbuf);
}

/* ---- parsing helpers ---- */

struct tok {
	char *s;
	size_t n;
};

static bool tok_is(const struct tok *t, const char *s)
{
	size_t n = strlen(s);

	return t->n == n && memcmp(t->s, s, n) == 0;
}

static bool tok_u64(const struct tok *t, uint64_t *out)
{
	uint64_t x = 0;
	size_t i;

	if (t->n == 0 || t->n > 20)
		return false;
	for (i = 0; i < t->n; i++) {
		unsigned d = (unsigned char)t->s[i] - '0';

		if (d > 9 || x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*out = x;
	return true;
}

static bool tok_u32(const struct tok *t, uint32_t *out)
{
	uint64_t x;

	if (!tok_u64(t, &x) || x > UINT32_MAX)
		return false;
	*out = (uint32_t)x;
	return true;
}

static bool tok_i64(const struct tok *t, int64_t *out)
{
	struct tok u = *t;
	uint64_t x;
	bool neg = false;

	if (u.n > 0 && u.s[0] == '-') {
		neg = true;
		u.s++;
		u.n--;
	}
	if (!tok_u64(&u, &x) || x > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? -(int64_t)x : (int64_t)x;
	return true;
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

/* ---- commands ---- */

static void reply(struct conn *c, bool noreply, const char *s)
{
	if (!noreply)
		ob_str(c, s);
}

static void cmd_get(struct conn *c, char *line, size_t len, bool cas)
{
	struct get_ctx g = { .c = c, .cas = cas };
	size_t mark = c->wend - c->wstart, i = 0, nkeys = 0;

	/* skip the command word */
	while (i < len && line[i] != ' ')
		i++;
	for (;;) {
		struct tok k;

		while (i < len && line[i] == ' ')
			i++;
		if (i == len)
			break;
		k.s = line + i;
		for (; i < len && line[i] != ' '; i++)
			;
		k.n = (size_t)(line + i - k.s);
		if (!key_ok(&k)) {
			/* drop the partial answer */
			c->wend = c->wstart + mark;
			ob_str(c, "CLIENT_ERROR bad command line format\r\n");
			return;
		}
		nkeys++;
		BUMP(c, cmd_get);
		g.key = k.s;
		g.keylen = k.n;
		if (store_get(k.s, k.n, NULL, emit_value, &g) == ST_OK)
			BUMP(c, get_hits);
		else
			BUMP(c, get_misses);
	}
	if (nkeys == 0)
		ob_str(c, "ERROR\r\n");
	else
		ob_str(c, "END\r\n");
}

/* set/add/replace/append/prepend/cas: parse the line, then wait for the data. */
static void cmd_update(struct conn *c, struct tok *tk, size_t nt, enum store_mode mode)
{
	size_t want = mode == SM_CAS ? 6 : 5;
	uint64_t vlen;

	if (nt != want && nt != want + 1) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	if (!key_ok(&tk[1]) || !tok_u32(&tk[2], &c->p.flags) || !tok_i64(&tk[3], &c->p.exptime) ||
	    !tok_u64(&tk[4], &vlen) || vlen > INT_MAX - 2 ||
	    (mode == SM_CAS && !tok_u64(&tk[5], &c->p.cas))) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return;
	}
	c->p.mode = mode;
	if (mode != SM_CAS)
		c->p.cas = 0;
	c->p.noreply = nt == want + 1 && tok_is(&tk[want], "noreply");
	c->p.keylen = tk[1].n;
	memcpy(c->p.key, tk[1].s, tk[1].n);
	c->p.vlen = (size_t)vlen;
	if (vlen > opt.item_max) {
		ob_str(c, "SERVER_ERROR object too large for cache\r\n");
		/* As memcached: a failed set drops the old value; the data is swallowed. */
		if (mode == SM_SET)
			store_delete(c->p.key, c->p.keylen, 0);
		c->swallow = vlen + 2;
		c->state = CS_SWALLOW;
		return;
	}
	c->state = CS_DATA;
}

static void complete_update(struct conn *c, const char *data)
{
	enum store_result r;

	if (data[c->p.vlen] != '\r' || data[c->p.vlen + 1] != '\n') {
		ob_str(c, "CLIENT_ERROR bad data chunk\r\n");
		return;
	}
	BUMP(c, cmd_set);
	r = store_update(c->p.mode, c->p.key, c->p.keylen, c->p.flags, c->p.exptime, data,
			 c->p.vlen, c->p.cas, NULL);
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
		reply(c, c->p.noreply, "STORED\r\n");
		break;
	case ST_NOT_STORED:
		reply(c, c->p.noreply, "NOT_STORED\r\n");
		break;
	case ST_EXISTS:
		reply(c, c->p.noreply, "EXISTS\r\n");
		break;
	case ST_NOT_FOUND:
		reply(c, c->p.noreply, "NOT_FOUND\r\n");
		break;
	case ST_TOO_LARGE:
		ob_str(c, "SERVER_ERROR object too large for cache\r\n");
		break;
	default:
		BUMP(c, oom_errors);
		ob_str(c, "SERVER_ERROR out of memory storing object\r\n");
		break;
	}
}

static void cmd_delete(struct conn *c, struct tok *tk, size_t nt)
{
	bool noreply = nt > 2 && tok_is(&tk[nt - 1], "noreply");
	size_t extra = nt - 2 - (noreply ? 1 : 0);

	if (nt < 2 || nt > 4) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	if (extra > 1 || (extra == 1 && !tok_is(&tk[2], "0"))) {
		ob_str(c, "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n");
		return;
	}
	if (!key_ok(&tk[1])) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return;
	}
	if (store_delete(tk[1].s, tk[1].n, 0) == ST_DELETED) {
		BUMP(c, delete_hits);
		reply(c, noreply, "DELETED\r\n");
	} else {
		BUMP(c, delete_misses);
		reply(c, noreply, "NOT_FOUND\r\n");
	}
}

static void cmd_arith(struct conn *c, struct tok *tk, size_t nt, bool incr)
{
	bool noreply = nt == 4 && tok_is(&tk[3], "noreply");
	struct store_arith a = { .incr = incr };
	struct store_arith_out out;
	uint64_t val;
	enum store_result r;

	if (nt != 3 && nt != 4) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	if (!key_ok(&tk[1])) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return;
	}
	if (!tok_u64(&tk[2], &a.delta)) {
		ob_str(c, "CLIENT_ERROR invalid numeric delta argument\r\n");
		return;
	}
	r = store_arith(tk[1].s, tk[1].n, &a, &out);
	val = out.value;
	switch (r) {
	case ST_OK:
		if (incr)
			BUMP(c, incr_hits);
		else
			BUMP(c, decr_hits);
		if (!noreply) {
			char buf[24];
			size_t n = fmt_u64(buf, val);

			buf[n++] = '\r';
			buf[n++] = '\n';
			ob_put(c, buf, n);
		}
		break;
	case ST_NOT_FOUND:
		if (incr)
			BUMP(c, incr_misses);
		else
			BUMP(c, decr_misses);
		reply(c, noreply, "NOT_FOUND\r\n");
		break;
	case ST_NON_NUMERIC:
		ob_str(c, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
		break;
	default:
		BUMP(c, oom_errors);
		ob_str(c, "SERVER_ERROR out of memory\r\n");
		break;
	}
}

static void cmd_touch(struct conn *c, struct tok *tk, size_t nt)
{
	bool noreply = nt == 4 && tok_is(&tk[3], "noreply");
	int64_t exptime;

	if (nt != 3 && nt != 4) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	if (!key_ok(&tk[1])) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return;
	}
	if (!tok_i64(&tk[2], &exptime)) {
		ob_str(c, "CLIENT_ERROR invalid exptime argument\r\n");
		return;
	}
	BUMP(c, cmd_touch);
	if (store_touch(tk[1].s, tk[1].n, exptime) == ST_TOUCHED) {
		BUMP(c, touch_hits);
		reply(c, noreply, "TOUCHED\r\n");
	} else {
		BUMP(c, touch_misses);
		reply(c, noreply, "NOT_FOUND\r\n");
	}
}

static void cmd_flush(struct conn *c, struct tok *tk, size_t nt)
{
	bool noreply = nt > 1 && tok_is(&tk[nt - 1], "noreply");
	size_t nargs = nt - 1 - (noreply ? 1 : 0);
	int64_t delay = 0;

	if (nargs > 1) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	if (nargs == 1 && !tok_i64(&tk[1], &delay)) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return;
	}
	BUMP(c, cmd_flush);
	store_flush(delay);
	reply(c, noreply, "OK\r\n");
}

static void stat_u64(struct conn *c, const char *name, uint64_t v)
{
	ob_printf(c, "STAT %s %" PRIu64 "\r\n", name, v);
}

static void emit_tenant(void *arg, const char *name, const struct tenant_stats *st)
{
	struct conn *c = arg;

	ob_printf(c, "STAT tenant:%s:usage %" PRIu64 "\r\n", name, st->usage);
	ob_printf(c, "STAT tenant:%s:soft %" PRIu64 "\r\n", name, st->soft);
	ob_printf(c, "STAT tenant:%s:max %" PRIu64 "\r\n", name, st->max);
	ob_printf(c, "STAT tenant:%s:items %" PRIu64 "\r\n", name, st->items);
	ob_printf(c, "STAT tenant:%s:bytes %" PRIu64 "\r\n", name, st->bytes);
	ob_printf(c, "STAT tenant:%s:evictions %" PRIu64 "\r\n", name, st->evictions);
	ob_printf(c, "STAT tenant:%s:hits %" PRIu64 "\r\n", name, st->hits);
	ob_printf(c, "STAT tenant:%s:misses %" PRIu64 "\r\n", name, st->misses);
	ob_printf(c, "STAT tenant:%s:events_low %" PRIu64 "\r\n", name, st->events_low);
	ob_printf(c, "STAT tenant:%s:events_high %" PRIu64 "\r\n", name, st->events_high);
	ob_printf(c, "STAT tenant:%s:events_max %" PRIu64 "\r\n", name, st->events_max);
	ob_printf(c, "STAT tenant:%s:events_oom %" PRIu64 "\r\n", name, st->events_oom);
}

static void cmd_stats(struct conn *c, struct tok *tk, size_t nt)
{
	if (nt == 1) {
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
		ob_printf(c, "STAT implementation slcache (softlimit %s)\r\n", sl_version());
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
		stat_u64(c, "get_hits", NS(get_hits));
		stat_u64(c, "get_misses", NS(get_misses));
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
		stat_u64(c, "limit_maxbytes", opt.max_bytes);
		stat_u64(c, "threads", opt.threads);
		stat_u64(c, "bytes", tot.bytes);
		stat_u64(c, "curr_items", tot.items);
		stat_u64(c, "total_items", NS(total_items));
		stat_u64(c, "evictions", tot.evictions);
		stat_u64(c, "oom_errors", NS(oom_errors));
		ob_printf(c, "STAT accounting %s\r\n", tenants_backend());
		ob_printf(c, "STAT policy %s\r\n", opt.accounting ? policy_name(opt.policy) : "none");
		stat_u64(c, "usage", tot.usage);
		tenants_stats(emit_tenant, c);
	} else if (tok_is(&tk[1], "tenants")) {
		tenants_stats(emit_tenant, c);
	} else if (tok_is(&tk[1], "settings")) {
		stat_u64(c, "maxbytes", opt.max_bytes);
		stat_u64(c, "maxconns", opt.max_conns);
		ob_printf(c, "STAT tcpport %s\r\n", opt.port);
		stat_u64(c, "num_threads", opt.threads);
		stat_u64(c, "item_size_max", opt.item_max);
		stat_u64(c, "max_tenants", opt.max_tenants);
		ob_printf(c, "STAT accounting %s\r\n", tenants_backend());
	} else if (tok_is(&tk[1], "reset")) {
		ob_str(c, "RESET\r\n");
		return;
	} else if (tok_is(&tk[1], "items") || tok_is(&tk[1], "slabs") || tok_is(&tk[1], "sizes") ||
		   tok_is(&tk[1], "conns")) {
		/* nothing of the kind here */
	} else {
		ob_str(c, "ERROR\r\n");
		return;
	}
	ob_str(c, "END\r\n");
}

/* One command line (without its "\r\n"). */
static void process_line(struct conn *c, char *line, size_t len)
{
	struct tok tk[MAX_TOKENS];
	size_t nt;

	if (len >= 4 && (memcmp(line, "get ", 4) == 0 || memcmp(line, "gets ", 5) == 0)) {
		cmd_get(c, line, len, line[3] == 's');
		return;
	}
	nt = tokenize(line, len, tk, MAX_TOKENS);
	if (nt == 0 || nt == MAX_TOKENS) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	if (tok_is(&tk[0], "get") || tok_is(&tk[0], "gets"))
		ob_str(c, "ERROR\r\n"); /* no key */
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
	else if (tok_is(&tk[0], "stats"))
		cmd_stats(c, tk, nt);
	else if (tok_is(&tk[0], "flush_all"))
		cmd_flush(c, tk, nt);
	else if (tok_is(&tk[0], "version")) /* as memcached 1.6: arguments are ignored */
		ob_str(c, "VERSION " SLCACHE_PROTO_VERSION "\r\n");
	else if (tok_is(&tk[0], "verbosity") && (nt == 2 || nt == 3))
		reply(c, tok_is(&tk[nt - 1], "noreply"), "OK\r\n");
	else if (tok_is(&tk[0], "quit") && nt == 1)
		c->close_after = true;
	else
		ob_str(c, "ERROR\r\n");
}

/* Runs every complete request in the read buffer; stops at a partial one,
 * at quit, or while too much output waits. */
void proto_input(struct conn *c)
{
	while (!c->close_after && c->wend - c->wstart < WBUF_HIGH) {
		char *p = c->rbuf + c->rstart;
		size_t avail = c->rend - c->rstart;

		if (c->state == CS_SWALLOW) {
			size_t n = avail < c->swallow ? avail : (size_t)c->swallow;

			c->rstart += n;
			c->swallow -= n;
			if (c->swallow)
				break;
			c->state = CS_CMD;
		} else if (c->state == CS_CLOSE) {
			char *nl = memchr(p, '\n', avail);

			if (!nl) {
				c->rstart = c->rend;
				break;
			}
			c->rstart += (size_t)(nl - p) + 1;
			c->state = CS_CMD;
		} else if (c->state == CS_DATA) {
			if (avail < c->p.vlen + 2)
				break;
			c->state = CS_CMD;
			c->rstart += c->p.vlen + 2;
			complete_update(c, p);
		} else {
			char *nl = memchr(p, '\n', avail);
			size_t len;

			if (!nl) {
				if (avail > LINE_MAX_BYTES) {
					ob_str(c, "CLIENT_ERROR line too long\r\n");
					c->rstart = c->rend;
					c->state = CS_CLOSE;
				}
				break;
			}
			len = (size_t)(nl - p);
			c->rstart += len + 1;
			if (len > 0 && p[len - 1] == '\r')
				len--;
			if (len > LINE_MAX_BYTES)
				ob_str(c, "CLIENT_ERROR line too long\r\n");
			else
				process_line(c, p, len);
		}
	}
	if (c->rstart == c->rend)
		c->rstart = c->rend = 0;
}

