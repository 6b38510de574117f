/* SPDX-License-Identifier: MIT */
/*
 * slcache: a caching server that speaks the memcached text protocol, with a
 * tenant per key prefix (the text before the first ':'; other keys belong to
 * "default"), accounted by softlimit.
 *
 *   slcache -l ADDR -p PORT -m MEGABYTES [--policy guarantee|gatekeeper|protection]
 *           [--tenant NAME[:min=SIZE][:soft=SIZE][:high=SIZE][:max=SIZE]]...
 *           [--no-accounting | --no-arenas] [-t THREADS] [-c MAXCONNS]
 *           [-I ITEM_MAX] [--max-tenants N] [-v]
 *
 * -m is the whole server's budget: the softlimit root's max.  When it is
 * short, softlimit picks the tenants that give memory back (by the policy
 * and their soft limits) and the store evicts their least recently used
 * items.  --no-accounting serves the same protocol from one shared LRU of
 * -m bytes, as a plain memcached would.  Items come from a jemalloc arena
 * per tenant (the softlimit-jemalloc adapter) when jemalloc is there;
 * --no-arenas keeps the accounting but takes items from the process's
 * malloc and charges them with sl_charge(), which separates what the
 * accounting costs from what the arenas cost (benchmarks/bench_server.sh).
 *
 * Networking: the main thread accepts and hands connections round-robin to
 * -t worker threads, each with its own level-triggered epoll; sockets are
 * non-blocking with per-connection read and write buffers, so partial reads
 * and writes and pipelined requests just work.  SIGINT/SIGTERM shut down
 * cleanly.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <softlimit/softlimit.h>

#include "store.h"

/* The memcached protocol level this server speaks (clients gate features on it). */
#define SLCACHE_PROTO_VERSION "1.6.0"

#define LINE_MAX_BYTES (64 * 1024)    /* longest command line                 */
#define RBUF_MIN (16 * 1024)
#define WBUF_HIGH (4 * 1024 * 1024)   /* stop reading while more is unsent    */
#define MAX_TOKENS 24
#define TENANTS_MAX 64                /* --tenant flags                       */

/* ---- options ---- */

struct tenant_opt {
	char name[SL_NAME_MAX + 1];
	struct sl_limits lim;
	unsigned pct; /* bit i: field i (min, soft, high, max) is a percentage of -m */
};

static struct {
	const char *addr;
	const char *port;
	uint64_t max_bytes;
	enum sl_policy policy;
	bool accounting;
	bool arenas;
	unsigned threads;
	unsigned max_conns;
	size_t item_max;
	unsigned max_tenants;
	int verbose;
	struct tenant_opt tenants[TENANTS_MAX];
	unsigned nr_tenants;
} opt = {
	.addr = "127.0.0.1",
	.port = "11211",
	.max_bytes = 64ull << 20,
	.policy = SL_POLICY_GUARANTEE,
	.accounting = true,
	.arenas = true,
	.threads = 2,
	.max_conns = 4096,
	.item_max = 1u << 20,
	.max_tenants = 256,
};

static struct store *store;
static time_t started;
static _Atomic uint64_t curr_conns, total_conns, rejected_conns;

static void logv(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logv(const char *fmt, ...)
{
	va_list ap;

	if (!opt.verbose)
		return;
	va_start(ap, fmt);
	fputs("slcache: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: slcache [-l ADDR] [-p PORT] [-m MEGABYTES] [--policy guarantee|gatekeeper|protection]\n"
		"               [--tenant NAME[:min=SIZE][:soft=SIZE][:high=SIZE][:max=SIZE]]...\n"
		"               [--no-accounting | --no-arenas] [-t THREADS] [-c MAXCONNS] [-I ITEM_MAX]\n"
		"               [--max-tenants N] [-v]\n"
		"  -l ADDR          address to listen on (default 127.0.0.1)\n"
		"  -p PORT          TCP port (default 11211)\n"
		"  -m MEGABYTES     the whole server's memory budget, the root's max (default 64)\n"
		"  --policy P       soft-limit policy of the tree (default guarantee)\n"
		"  --tenant SPEC    declare a tenant (key prefix before ':') with limits; SIZE takes\n"
		"                   K, M, G suffixes or a percentage of -m (soft=40%%)\n"
		"  --no-accounting  one shared LRU of -m bytes, no softlimit (the baseline)\n"
		"  --no-arenas      softlimit as usual, but items from malloc, not an arena per tenant\n"
		"  -t THREADS       worker threads (default 2)\n"
		"  -c MAXCONNS      most simultaneous connections (default 4096)\n"
		"  -I ITEM_MAX      largest value (default 1M)\n"
		"  --max-tenants N  tenants created on first use beyond N share \"default\" (256)\n"
		"  -v               log connections and errors to stderr\n");
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("slcache: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\n(slcache --help for usage)\n", stderr);
	va_end(ap);
	exit(2);
}

/* Digits with an optional K, M or G (or KB, MB, GB; any case) suffix. */
static int parse_size(const char *s, uint64_t *out)
{
	uint64_t x = 0, mul = 1;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'k': case 'K': mul = 1ull << 10; p++; break;
	case 'm': case 'M': mul = 1ull << 20; p++; break;
	case 'g': case 'G': mul = 1ull << 30; p++; break;
	default: break;
	}
	if (mul != 1 && (*p == 'b' || *p == 'B'))
		p++;
	if (*p != '\0' || (x != 0 && x > UINT64_MAX / mul))
		return -1;
	*out = x * mul;
	return 0;
}

static unsigned parse_uint(const char *s, const char *what, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s < '0' || *s > '9' || *end != '\0' || errno || v < lo || v > hi)
		die_usage("%s must be a number from %u to %u, not '%s'", what, lo, hi, s);
	return (unsigned)v;
}

static void parse_tenant(const char *spec)
{
	struct tenant_opt *t;
	char buf[1024], *field, *save = NULL;
	unsigned i;

	if (opt.nr_tenants >= TENANTS_MAX)
		die_usage("at most %d --tenant options", TENANTS_MAX);
	if (strlen(spec) >= sizeof(buf))
		die_usage("--tenant '%.40s...' is too long", spec);
	strcpy(buf, spec);
	t = &opt.tenants[opt.nr_tenants];
	memset(t, 0, sizeof(*t));
	sl_limits_init(&t->lim);
	field = strtok_r(buf, ":", &save);
	if (!field || buf[0] == ':')
		die_usage("--tenant '%s': the name comes first (NAME[:soft=SIZE]...)", spec);
	if (strlen(field) > SL_NAME_MAX || strchr(field, '/'))
		die_usage("--tenant '%s': a name is 1..%d bytes without '/'", spec, SL_NAME_MAX);
	for (i = 0; field[i]; i++)
		if ((unsigned char)field[i] <= 0x20 || (unsigned char)field[i] >= 0x7f)
			die_usage("--tenant '%s': a name is printable ASCII without spaces", spec);
	strcpy(t->name, field);
	for (i = 0; i < opt.nr_tenants; i++)
		if (strcmp(opt.tenants[i].name, t->name) == 0)
			die_usage("--tenant '%s' declared twice", t->name);
	while ((field = strtok_r(NULL, ":", &save)) != NULL) {
		static const char *const keys[] = { "min", "soft", "high", "max" };
		char *eq = strchr(field, '='), *val;
		uint64_t v, *dst[4] = { &t->lim.min, &t->lim.soft, &t->lim.high, &t->lim.max };
		size_t len;
		unsigned k;

		if (!eq)
			die_usage("--tenant %s: '%s' is not KEY=SIZE (min, soft, high, max)", t->name, field);
		*eq = '\0';
		val = eq + 1;
		for (k = 0; k < 4 && strcmp(field, keys[k]) != 0; k++)
			;
		if (k == 4)
			die_usage("--tenant %s: unknown limit '%s' (min, soft, high, max)", t->name, field);
		len = strlen(val);
		if (len > 1 && val[len - 1] == '%') {
			val[len - 1] = '\0';
			v = parse_uint(val, "a percentage", 0, 100);
			t->pct |= 1u << k;
		} else if (parse_size(val, &v) != 0) {
			die_usage("--tenant %s: %s=%s is not a size (e.g. 512K, 40M, 1G)", t->name, field, val);
		}
		*dst[k] = v;
	}
	opt.nr_tenants++;
}

static void parse_args(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes = true;

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "-v") == 0 || strcmp(a, "-vv") == 0) {
			opt.verbose++;
			takes = false;
		} else if (strcmp(a, "--no-accounting") == 0) {
			opt.accounting = false;
			takes = false;
		} else if (strcmp(a, "--no-arenas") == 0) {
			opt.arenas = false;
			takes = false;
		}
		if (!takes)
			continue;
		if (!v)
			die_usage("option '%s' needs a value", a);
		if (strcmp(a, "-l") == 0) {
			opt.addr = v;
		} else if (strcmp(a, "-p") == 0) {
			parse_uint(v, "-p (port)", 1, 65535);
			opt.port = v;
		} else if (strcmp(a, "-m") == 0) {
			uint64_t mb;

			if (parse_size(v, &mb) != 0 || mb == 0)
				die_usage("-m takes megabytes (e.g. 64, or 512K, 2G), not '%s'", v);
			/* A bare number is megabytes, as memcached's -m. */
			opt.max_bytes = (v[strlen(v) - 1] >= '0' && v[strlen(v) - 1] <= '9') ? mb << 20 : mb;
			if (opt.max_bytes < (1u << 20))
				die_usage("-m must be at least 1 megabyte");
		} else if (strcmp(a, "--policy") == 0) {
			if (strcmp(v, "guarantee") == 0)
				opt.policy = SL_POLICY_GUARANTEE;
			else if (strcmp(v, "gatekeeper") == 0)
				opt.policy = SL_POLICY_GATEKEEPER;
			else if (strcmp(v, "protection") == 0)
				opt.policy = SL_POLICY_PROTECTION;
			else
				die_usage("--policy must be guarantee, gatekeeper or protection, not '%s'", v);
		} else if (strcmp(a, "--tenant") == 0) {
			parse_tenant(v);
		} else if (strcmp(a, "-t") == 0) {
			opt.threads = parse_uint(v, "-t (threads)", 1, 256);
		} else if (strcmp(a, "-c") == 0) {
			opt.max_conns = parse_uint(v, "-c (connections)", 1, 1000000);
		} else if (strcmp(a, "--max-tenants") == 0) {
			opt.max_tenants = parse_uint(v, "--max-tenants", 1, 4000);
		} else if (strcmp(a, "-I") == 0) {
			uint64_t im;

			if (parse_size(v, &im) != 0 || im < 1024 || im > (128u << 20))
				die_usage("-I takes a size from 1K to 128M, not '%s'", v);
			opt.item_max = (size_t)im;
		} else {
			die_usage("unknown option '%s'", a);
		}
		i++;
	}
	if (!opt.accounting && !opt.arenas)
		die_usage("--no-arenas keeps the accounting: it does not go with --no-accounting");
	for (i = 0; i < (int)opt.nr_tenants; i++) {
		struct tenant_opt *t = &opt.tenants[i];
		uint64_t *f[4] = { &t->lim.min, &t->lim.soft, &t->lim.high, &t->lim.max };
		unsigned k;

		for (k = 0; k < 4; k++)
			if (t->pct & (1u << k))
				*f[k] = opt.max_bytes / 100 * *f[k];
		if (t->lim.min > t->lim.max || t->lim.soft > t->lim.max)
			die_usage("--tenant %s: min and soft must not be above max", t->name);
	}
}

/* ---- connections ---- */

enum cstate { CS_CMD, CS_DATA, CS_SWALLOW, CS_SKIPLINE };

struct worker;

struct conn {
	int fd;
	struct worker *w;
	struct conn *prev, *next;
	char *rbuf;
	size_t rcap, rstart, rend;
	char *wbuf;
	size_t wcap, wstart, wend;
	enum cstate state;
	uint64_t swallow;
	bool close_after; /* quit, or a fatal error: close once the output is out */
	bool dead;
	uint32_t events;  /* what epoll watches now */
	/* The storage command waiting for its data block. */
	struct {
		enum store_mode mode;
		char key[STORE_KEY_MAX];
		size_t keylen;
		uint32_t flags;
		int64_t exptime;
		size_t vlen;
		uint64_t cas;
		bool noreply;
	} p;
};

/* Per-worker counters: written by their worker only, read by stats. */
struct wstats {
	_Atomic uint64_t cmd_get, cmd_set, cmd_flush, cmd_touch, get_hits, get_misses;
	_Atomic uint64_t delete_hits, delete_misses, incr_hits, incr_misses, decr_hits, decr_misses;
	_Atomic uint64_t cas_hits, cas_misses, cas_badval, touch_hits, touch_misses;
	_Atomic uint64_t bytes_read, bytes_written, total_items, oom_errors;
};

struct worker {
	pthread_t th;
	int epfd;
	int evfd;
	_Atomic int stop;
	pthread_mutex_t qlock;
	int *queue;
	size_t qlen, qcap;
	struct conn *conns;
	struct wstats st;
};

static struct worker *workers;

#define BUMP(c, field) \
	atomic_store_explicit(&(c)->w->st.field, \
			      atomic_load_explicit(&(c)->w->st.field, memory_order_relaxed) + 1, \
			      memory_order_relaxed)
#define ADD(w, field, n) \
	atomic_store_explicit(&(w)->st.field, \
			      atomic_load_explicit(&(w)->st.field, memory_order_relaxed) + (n), \
			      memory_order_relaxed)

/* ---- output buffer ---- */

static bool ob_reserve(struct conn *c, size_t n)
{
	size_t cap;
	char *nb;

	if (c->wcap - c->wend >= n)
		return true;
	if (c->wstart > 0) {
		memmove(c->wbuf, c->wbuf + c->wstart, c->wend - c->wstart);
		c->wend -= c->wstart;
		c->wstart = 0;
		if (c->wcap - c->wend >= n)
			return true;
	}
	for (cap = c->wcap ? c->wcap : 4096; cap - c->wend < n; cap *= 2)
		;
	nb = realloc(c->wbuf, cap);
	if (!nb) {
		c->close_after = true;
		return false;
	}
	c->wbuf = nb;
	c->wcap = cap;
	return true;
}

static void ob_put(struct conn *c, const void *p, size_t n)
{
	if (ob_reserve(c, n)) {
		memcpy(c->wbuf + c->wend, p, n);
		c->wend += n;
	}
}

static void ob_str(struct conn *c, const char *s)
{
	ob_put(c, s, strlen(s));
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

static void ob_printf(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ob_printf(struct conn *c, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		ob_put(c, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

struct get_ctx {
	struct conn *c;
	bool cas;
};

/* Called under the tenant's lock: format and copy, nothing else. */
static void emit_value(void *arg, const char *key, size_t keylen, uint32_t flags,
		       const void *value, size_t vlen, uint64_t cas)
{
	struct get_ctx *g = arg;
	struct conn *c = g->c;
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
		struct tenant *t;

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
		t = store_tenant_for_key(store, k.s, k.n);
		if (store_get(t, k.s, k.n, emit_value, &g) == ST_OK)
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
	c->p.noreply = nt == want + 1 && tok_is(&tk[want], "noreply");
	c->p.keylen = tk[1].n;
	memcpy(c->p.key, tk[1].s, tk[1].n);
	c->p.vlen = (size_t)vlen;
	if (vlen > opt.item_max) {
		ob_str(c, "SERVER_ERROR object too large for cache\r\n");
		/* As memcached: a failed set drops the old value; the data is swallowed. */
		if (mode == SM_SET)
			store_delete(store_tenant_for_key(store, c->p.key, c->p.keylen), c->p.key,
				     c->p.keylen);
		c->swallow = vlen + 2;
		c->state = CS_SWALLOW;
		return;
	}
	c->state = CS_DATA;
}

static void complete_update(struct conn *c, const char *data)
{
	struct tenant *t;
	enum store_result r;

	if (data[c->p.vlen] != '\r' || data[c->p.vlen + 1] != '\n') {
		ob_str(c, "CLIENT_ERROR bad data chunk\r\n");
		return;
	}
	BUMP(c, cmd_set);
	t = store_tenant_for_key(store, c->p.key, c->p.keylen);
	r = store_update(t, c->p.mode, c->p.key, c->p.keylen, c->p.flags, c->p.exptime, data,
			 c->p.vlen, c->p.cas);
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
	if (store_delete(store_tenant_for_key(store, tk[1].s, tk[1].n), tk[1].s, tk[1].n) ==
	    ST_DELETED) {
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
	uint64_t delta, val = 0;
	enum store_result r;

	if (nt != 3 && nt != 4) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	if (!key_ok(&tk[1])) {
		ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		return;
	}
	if (!tok_u64(&tk[2], &delta)) {
		ob_str(c, "CLIENT_ERROR invalid numeric delta argument\r\n");
		return;
	}
	r = store_arith(store_tenant_for_key(store, tk[1].s, tk[1].n), tk[1].s, tk[1].n, incr,
			delta, &val);
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
	if (store_touch(store_tenant_for_key(store, tk[1].s, tk[1].n), tk[1].s, tk[1].n, exptime) ==
	    ST_TOUCHED) {
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
	store_flush(store, delay);
	reply(c, noreply, "OK\r\n");
}

static uint64_t sum_stat(size_t off)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < opt.threads; i++)
		sum += atomic_load_explicit((_Atomic uint64_t *)((char *)&workers[i].st + off),
					    memory_order_relaxed);
	return sum;
}

#define SUM(field) sum_stat(offsetof(struct wstats, field))

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

static const char *policy_name(enum sl_policy p)
{
	return p == SL_POLICY_GATEKEEPER ? "gatekeeper" :
	       p == SL_POLICY_PROTECTION ? "protection" : "guarantee";
}

static void cmd_stats(struct conn *c, struct tok *tk, size_t nt)
{
	if (nt == 1) {
		struct tenant_stats tot;
		struct rusage ru;
		time_t now = time(NULL);

		store_totals(store, &tot);
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
		stat_u64(c, "curr_connections", atomic_load(&curr_conns));
		stat_u64(c, "total_connections", atomic_load(&total_conns));
		stat_u64(c, "rejected_connections", atomic_load(&rejected_conns));
		stat_u64(c, "cmd_get", SUM(cmd_get));
		stat_u64(c, "cmd_set", SUM(cmd_set));
		stat_u64(c, "cmd_flush", SUM(cmd_flush));
		stat_u64(c, "cmd_touch", SUM(cmd_touch));
		stat_u64(c, "get_hits", SUM(get_hits));
		stat_u64(c, "get_misses", SUM(get_misses));
		stat_u64(c, "delete_misses", SUM(delete_misses));
		stat_u64(c, "delete_hits", SUM(delete_hits));
		stat_u64(c, "incr_misses", SUM(incr_misses));
		stat_u64(c, "incr_hits", SUM(incr_hits));
		stat_u64(c, "decr_misses", SUM(decr_misses));
		stat_u64(c, "decr_hits", SUM(decr_hits));
		stat_u64(c, "cas_misses", SUM(cas_misses));
		stat_u64(c, "cas_hits", SUM(cas_hits));
		stat_u64(c, "cas_badval", SUM(cas_badval));
		stat_u64(c, "touch_hits", SUM(touch_hits));
		stat_u64(c, "touch_misses", SUM(touch_misses));
		stat_u64(c, "bytes_read", SUM(bytes_read));
		stat_u64(c, "bytes_written", SUM(bytes_written));
		stat_u64(c, "limit_maxbytes", opt.max_bytes);
		stat_u64(c, "threads", opt.threads);
		stat_u64(c, "bytes", tot.bytes);
		stat_u64(c, "curr_items", tot.items);
		stat_u64(c, "total_items", SUM(total_items));
		stat_u64(c, "evictions", tot.evictions);
		stat_u64(c, "oom_errors", SUM(oom_errors));
		ob_printf(c, "STAT accounting %s\r\n", store_backend(store));
		ob_printf(c, "STAT policy %s\r\n", opt.accounting ? policy_name(opt.policy) : "none");
		stat_u64(c, "usage", tot.usage);
		store_tenant_stats(store, emit_tenant, c);
	} else if (tok_is(&tk[1], "tenants")) {
		store_tenant_stats(store, emit_tenant, c);
	} else if (tok_is(&tk[1], "settings")) {
		stat_u64(c, "maxbytes", opt.max_bytes);
		stat_u64(c, "maxconns", opt.max_conns);
		ob_printf(c, "STAT tcpport %s\r\n", opt.port);
		stat_u64(c, "num_threads", opt.threads);
		stat_u64(c, "item_size_max", opt.item_max);
		stat_u64(c, "max_tenants", opt.max_tenants);
		ob_printf(c, "STAT accounting %s\r\n", store_backend(store));
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
static void process_input(struct conn *c)
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
		} else if (c->state == CS_SKIPLINE) {
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
					c->state = CS_SKIPLINE;
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

/* ---- the event loop ---- */

static void conn_close(struct conn *c)
{
	struct worker *w = c->w;

	logv("connection %d closed", c->fd);
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c->rbuf);
	free(c->wbuf);
	free(c);
	atomic_fetch_sub(&curr_conns, 1);
}

static void conn_watch(struct conn *c, uint32_t ev)
{
	if (ev != c->events) {
		struct epoll_event e = { .events = ev, .data.ptr = c };

		epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &e);
		c->events = ev;
	}
}

/* Sends what it can; false when the connection is dead. */
static bool conn_flush(struct conn *c)
{
	while (c->wstart < c->wend) {
		ssize_t n = send(c->fd, c->wbuf + c->wstart, c->wend - c->wstart, MSG_NOSIGNAL);

		if (n > 0) {
			c->wstart += (size_t)n;
			ADD(c->w, bytes_written, (uint64_t)n);
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			break;
		} else {
			return false;
		}
	}
	if (c->wstart == c->wend) {
		c->wstart = c->wend = 0;
		if (c->wcap > 1024 * 1024) { /* give a big response's buffer back */
			free(c->wbuf);
			c->wbuf = NULL;
			c->wcap = 0;
		}
	}
	return true;
}

/* Makes room to read: the whole data block of a pending storage command
 * must fit, or at least RBUF_MIN bytes. */
static bool rbuf_room(struct conn *c)
{
	size_t need = RBUF_MIN, used = c->rend - c->rstart, cap;
	char *nb;

	if (c->state == CS_DATA && c->p.vlen + 2 > used)
		need = c->p.vlen + 2 - used;
	if (c->rcap - c->rend >= need)
		return true;
	if (c->rstart > 0) {
		memmove(c->rbuf, c->rbuf + c->rstart, used);
		c->rend = used;
		c->rstart = 0;
		if (c->rcap - c->rend >= need)
			return true;
	}
	for (cap = c->rcap ? c->rcap : RBUF_MIN; cap - c->rend < need; cap *= 2)
		;
	nb = realloc(c->rbuf, cap);
	if (!nb)
		return false;
	c->rbuf = nb;
	c->rcap = cap;
	return true;
}

static void conn_event(struct conn *c, uint32_t ev)
{
	bool ok = true;

	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		if (!rbuf_room(c)) {
			ok = false;
		} else {
			ssize_t n = recv(c->fd, c->rbuf + c->rend, c->rcap - c->rend, 0);

			if (n > 0) {
				c->rend += (size_t)n;
				ADD(c->w, bytes_read, (uint64_t)n);
			} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
				ok = false;
			}
		}
	}
	/* Run what was read; when output drains below the mark, go on with
	 * requests already read (pipelined behind a big answer). */
	while (ok) {
		size_t left = c->rend - c->rstart;

		process_input(c);
		ok = conn_flush(c);
		if (c->close_after || c->rend == c->rstart || c->rend - c->rstart == left ||
		    c->wend - c->wstart >= WBUF_HIGH)
			break;
	}
	/* A big request's buffer is given back once it is done. */
	if (ok && c->rstart == c->rend && c->rcap > 1024 * 1024) {
		free(c->rbuf);
		c->rbuf = NULL;
		c->rcap = c->rstart = c->rend = 0;
	}
	if (!ok || (c->close_after && c->wstart == c->wend)) {
		conn_close(c);
		return;
	}
	if (c->wstart < c->wend)
		conn_watch(c, c->wend - c->wstart >= WBUF_HIGH || c->close_after ? EPOLLOUT
										  : EPOLLIN | EPOLLOUT);
	else
		conn_watch(c, EPOLLIN);
}

static void worker_adopt(struct worker *w, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct epoll_event e = { .events = EPOLLIN };

	if (!c) {
		close(fd);
		atomic_fetch_sub(&curr_conns, 1);
		return;
	}
	c->fd = fd;
	c->w = w;
	c->events = EPOLLIN;
	e.data.ptr = c;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
		close(fd);
		free(c);
		atomic_fetch_sub(&curr_conns, 1);
		return;
	}
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	logv("connection %d opened", fd);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[128];

	while (!atomic_load(&w->stop)) {
		int n = epoll_wait(w->epfd, evs, 128, -1), i;

		if (n < 0 && errno != EINTR)
			break;
		for (i = 0; i < n; i++) {
			if (evs[i].data.ptr == w) {
				uint64_t v;
				size_t k;

				if (read(w->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					continue;
				pthread_mutex_lock(&w->qlock);
				for (k = 0; k < w->qlen; k++)
					worker_adopt(w, w->queue[k]);
				w->qlen = 0;
				pthread_mutex_unlock(&w->qlock);
			} else {
				conn_event(evs[i].data.ptr, evs[i].events);
			}
		}
	}
	while (w->conns)
		conn_close(w->conns);
	return NULL;
}

static void worker_push(struct worker *w, int fd)
{
	uint64_t one = 1;

	pthread_mutex_lock(&w->qlock);
	if (w->qlen == w->qcap) {
		size_t cap = w->qcap ? w->qcap * 2 : 64;
		int *q = realloc(w->queue, cap * sizeof(*q));

		if (!q) {
			pthread_mutex_unlock(&w->qlock);
			close(fd);
			atomic_fetch_sub(&curr_conns, 1);
			return;
		}
		w->queue = q;
		w->qcap = cap;
	}
	w->queue[w->qlen++] = fd;
	pthread_mutex_unlock(&w->qlock);
	if (write(w->evfd, &one, sizeof(one)) < 0)
		logv("eventfd write: %s", strerror(errno));
}

static int listen_on(const char *addr, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res, *ai;
	int fd = -1, err, one = 1;

	err = getaddrinfo(addr, port, &hints, &res);
	if (err) {
		fprintf(stderr, "slcache: -l %s -p %s: %s\n", addr, port, gai_strerror(err));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0)
			break;
		err = errno;
		close(fd);
		fd = -1;
		errno = err;
	}
	if (fd < 0)
		fprintf(stderr, "slcache: cannot listen on %s:%s: %s\n", addr, port, strerror(errno));
	freeaddrinfo(res);
	return fd;
}

static int declare_tenants(void)
{
	unsigned i;

	for (i = 0; i < opt.nr_tenants; i++) {
		int err = store_tenant_declare(store, opt.tenants[i].name, &opt.tenants[i].lim);

		if (err) {
			fprintf(stderr, "slcache: --tenant %s: %s\n", opt.tenants[i].name,
				err == -EINVAL ? "limits refused (is the sum of the tree consistent?)"
					       : strerror(-err));
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct store_opts so = { 0 };
	struct epoll_event e, evs[16];
	sigset_t mask;
	int lfd, sfd, epfd, err;
	unsigned i, next = 0;
	bool running = true;

	parse_args(argc, argv);
	started = time(NULL);
	signal(SIGPIPE, SIG_IGN);

	so.policy = opt.policy;
	so.max_bytes = opt.max_bytes;
	so.accounting = opt.accounting;
	so.arenas = opt.arenas;
	so.item_max = opt.item_max;
	so.max_tenants = opt.max_tenants;
	err = store_create(&so, &store);
	if (err) {
		fprintf(stderr, "slcache: cannot create the store: %s\n", strerror(-err));
		return 1;
	}
	if (declare_tenants() != 0) {
		store_destroy(store);
		return 2;
	}

	lfd = listen_on(opt.addr, opt.port);
	if (lfd < 0) {
		store_destroy(store);
		return 1;
	}

	/* Signals go to the main thread's signalfd only. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || epfd < 0) {
		perror("slcache: signalfd/epoll");
		return 1;
	}
	e = (struct epoll_event){ .events = EPOLLIN, .data.fd = lfd };
	epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &e);
	e = (struct epoll_event){ .events = EPOLLIN, .data.fd = sfd };
	epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &e);

	workers = calloc(opt.threads, sizeof(*workers));
	if (!workers)
		return 1;
	for (i = 0; i < opt.threads; i++) {
		struct worker *w = &workers[i];

		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		pthread_mutex_init(&w->qlock, NULL);
		if (w->epfd < 0 || w->evfd < 0) {
			perror("slcache: epoll/eventfd");
			return 1;
		}
		e = (struct epoll_event){ .events = EPOLLIN, .data.ptr = w };
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &e);
		if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
			fprintf(stderr, "slcache: cannot start worker threads\n");
			return 1;
		}
	}
	fprintf(stderr, "slcache: listening on %s:%s, %" PRIu64 " MiB, %s, %u threads%s\n", opt.addr,
		opt.port, opt.max_bytes >> 20,
		opt.accounting ? policy_name(opt.policy) : "no accounting (shared LRU)", opt.threads,
		opt.accounting ? "" : "");
	if (opt.accounting)
		logv("item memory: %s", store_backend(store));

	while (running) {
		int n = epoll_wait(epfd, evs, 16, -1), k;

		if (n < 0 && errno != EINTR)
			break;
		for (k = 0; k < n; k++) {
			if (evs[k].data.fd == sfd) {
				struct signalfd_siginfo si;

				if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
					logv("signal %u: shutting down", si.ssi_signo);
					running = false;
				}
				continue;
			}
			for (;;) {
				int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;

				if (fd < 0) {
					if (errno == EMFILE || errno == ENFILE) {
						logv("accept: %s", strerror(errno));
						usleep(10000);
					}
					break;
				}
				if (atomic_load(&curr_conns) >= opt.max_conns) {
					static const char msg[] = "SERVER_ERROR too many open connections\r\n";

					if (send(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL) < 0)
						logv("send: %s", strerror(errno));
					close(fd);
					atomic_fetch_add(&rejected_conns, 1);
					continue;
				}
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				atomic_fetch_add(&curr_conns, 1);
				atomic_fetch_add(&total_conns, 1);
				worker_push(&workers[next], fd);
				next = (next + 1) % opt.threads;
			}
		}
	}

	close(lfd);
	for (i = 0; i < opt.threads; i++) {
		uint64_t one = 1;

		atomic_store(&workers[i].stop, 1);
		if (write(workers[i].evfd, &one, sizeof(one)) < 0)
			logv("eventfd write: %s", strerror(errno));
	}
	for (i = 0; i < opt.threads; i++) {
		struct worker *w = &workers[i];
		size_t k;

		pthread_join(w->th, NULL);
		for (k = 0; k < w->qlen; k++)
			close(w->queue[k]);
		free(w->queue);
		close(w->epfd);
		close(w->evfd);
		pthread_mutex_destroy(&w->qlock);
	}
	free(workers);
	close(epfd);
	close(sfd);
	store_destroy(store);
	fprintf(stderr, "slcache: shut down\n");
	return 0;
}
