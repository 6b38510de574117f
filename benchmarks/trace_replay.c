/* SPDX-License-Identifier: MIT */
/*
 * trace_replay: replay a cache trace against a memcached-protocol server
 * and report each tenant's hit ratio, so that a real server (examples/
 * slcache, Debian's memcached) can be set beside bench_isolation's
 * simulation of the same trace.
 *
 *     trace_replay [--host H] [--port P] [--label NAME] [--warmup N]
 *                  [--no-pace] [--json-only] TRACE
 *     trace_replay --slcache-args TRACE
 *
 * The trace is the text format of isolation_trace.h.  A tenant is a key
 * prefix, as slcache maps them: tenant "custA/ns1" sends its keys as
 * "custA.ns1:KEY" (slcache's tenant names have no '/', and its tenant is
 * the text before the first ':').  --slcache-args prints the slcache
 * options that give those tenants the trace's soft limits and budget.
 *
 * One connection, one request at a time, in file order, so the server sees
 * the trace's order exactly:
 *   getset          get; on a miss, set (the fill) with the line's size and TTL
 *   get, gets       get, gets
 *   set, add, replace, append, prepend, delete, incr, decr, touch  as named
 *   cas             replace: in a replay nobody races, so a cas succeeds
 *                   exactly when the item is there, which is what replace does
 * Values are ASCII zeros, so incr and decr find numbers.  A TTL is sent in
 * whole seconds, rounded up (the protocol has no finer unit; over 30 days it
 * is sent as an absolute time).
 *
 * Pacing.  A server expires items by its own clock, so a trace with TTLs
 * is replayed at the speed of its own clock (its "time" column) unless
 * --no-pace: a request is not sent before its time.  The lag (how far
 * behind the trace's clock the replay fell) is reported; a lag of seconds
 * means TTLs expired later, in trace terms, than the trace says.
 *
 * Output: progress every few seconds on stderr, then one JSON object per
 * tenant and one for the whole trace on stdout, and a table on stderr.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "isolation_trace.h"

#define KEY_MAX 250                       /* memcached's limit                   */
#define RELATIVE_MAX (60 * 60 * 24 * 30)  /* memcached: larger exptimes are absolute */
#define PROGRESS_S 5.0

static bool g_json_only;

static void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("trace_replay: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ connection */

struct conn {
	int fd;
	char in[1 << 16];
	size_t in_len, in_off;
	char *out;
	size_t out_len, out_cap;
};

static void conn_open(struct conn *c, const char *host, const char *port)
{
	struct addrinfo hints, *res, *ai;
	struct timeval tv = {30, 0};
	int one = 1, rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0)
		die("%s:%s: %s", host, port, gai_strerror(rc));
	c->fd = -1;
	for (ai = res; ai && c->fd < 0; ai = ai->ai_next) {
		c->fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (c->fd < 0)
			continue;
		if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
			close(c->fd);
			c->fd = -1;
		}
	}
	freeaddrinfo(res);
	if (c->fd < 0)
		die("cannot connect to %s:%s: %s", host, port, strerror(errno));
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A server that stops answering ends the replay with an error, not a hang. */
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->in_len = c->in_off = 0;
}

static void out_put(struct conn *c, const void *p, size_t n)
{
	if (c->out_len + n > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;

		while (cap < c->out_len + n)
			cap *= 2;
		c->out = realloc(c->out, cap);
		if (!c->out)
			die("out of memory");
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
}

static void out_printf(struct conn *c, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		die("command too long");
	out_put(c, buf, (size_t)n);
}

static void flush_out(struct conn *c)
{
	size_t off = 0;

	while (off < c->out_len) {
		ssize_t n = send(c->fd, c->out + off, c->out_len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("send: %s", n < 0 ? strerror(errno) : "connection closed");
		off += (size_t)n;
	}
	c->out_len = 0;
}

static void fill_in(struct conn *c)
{
	ssize_t n;

	if (c->in_off > 0) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	if (c->in_len == sizeof(c->in))
		die("reply line too long");
	do
		n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		die("recv: %s", errno == EAGAIN ? "the server did not answer in 30 s" : strerror(errno));
	if (n == 0)
		die("the server closed the connection");
	c->in_len += (size_t)n;
}

/* The next reply line, without its "\r\n"; valid until the next read. */
static const char *read_line(struct conn *c)
{
	for (;;) {
		char *start = c->in + c->in_off;
		char *nl = memchr(start, '\n', c->in_len - c->in_off);

		if (nl) {
			c->in_off = (size_t)(nl + 1 - c->in);
			*nl = '\0';
			if (nl > start && nl[-1] == '\r')
				nl[-1] = '\0';
			return start;
		}
		fill_in(c);
	}
}

static void skip_bytes(struct conn *c, size_t n)
{
	while (n > 0) {
		size_t have = c->in_len - c->in_off;

		if (have == 0) {
			fill_in(c);
			continue;
		}
		if (have > n)
			have = n;
		c->in_off += have;
		n -= have;
	}
}

/* ---------------------------------------------------------------- replay */

struct tenant_count {
	uint64_t reads, hits, set_fails, errors;
};

struct replay {
	struct conn c;
	const struct iso_trace *tr;
	char **prefix;          /* per node: "custA.ns1" */
	struct tenant_count *n; /* per node */
	char *value;
	size_t value_len;
	time_t wall0;           /* for absolute exptimes */
};

/* A reply line that is neither of the expected answers. */
static bool server_error(const char *line)
{
	return strncmp(line, "SERVER_ERROR", 12) == 0 || strncmp(line, "CLIENT_ERROR", 12) == 0 ||
	       strcmp(line, "ERROR") == 0;
}

/* get/gets: true on a hit. */
static bool do_get(struct replay *r, const char *cmd, const char *key, size_t keylen,
		   struct tenant_count *n)
{
	bool hit = false;

	out_printf(&r->c, "%s %.*s\r\n", cmd, (int)keylen, key);
	flush_out(&r->c);
	for (;;) {
		const char *line = read_line(&r->c);
		unsigned long long bytes;

		if (strcmp(line, "END") == 0)
			return hit;
		if (strncmp(line, "VALUE ", 6) == 0 &&
		    sscanf(line, "VALUE %*s %*u %llu", &bytes) == 1) {
			hit = true;
			skip_bytes(&r->c, (size_t)bytes + 2);
			continue;
		}
		n->errors++;
		if (server_error(line))
			return false;
		die("unexpected reply to %s: '%.80s'", cmd, line);
	}
}

static long long exptime(const struct replay *r, uint64_t ttl_ms)
{
	long long s = (long long)((ttl_ms + 999) / 1000);

	return s > RELATIVE_MAX ? (long long)r->wall0 + s : s;
}

/* A storage command; returns its reply line. */
static const char *do_store(struct replay *r, const char *cmd, const char *key, size_t keylen,
			    uint64_t size, uint64_t ttl_ms, struct tenant_count *n)
{
	const char *line;

	if (size > r->value_len) {
		free(r->value);
		r->value = malloc((size_t)size);
		if (!r->value)
			die("out of memory (a %" PRIu64 "-byte value)", size);
		memset(r->value, '0', (size_t)size);
		r->value_len = (size_t)size;
	}
	out_printf(&r->c, "%s %.*s 0 %lld %" PRIu64 "\r\n", cmd, (int)keylen, key, exptime(r, ttl_ms),
		   size);
	out_put(&r->c, r->value, (size_t)size);
	out_put(&r->c, "\r\n", 2);
	flush_out(&r->c);
	line = read_line(&r->c);
	if (strncmp(line, "SERVER_ERROR", 12) == 0)
		n->set_fails++;
	else if (server_error(line))
		n->errors++;
	return line;
}

/* Sends the command queued in r->c and reads its one-line reply. */
static void do_simple(struct replay *r, struct tenant_count *n)
{
	const char *line;

	flush_out(&r->c);
	line = read_line(&r->c);
	if (server_error(line))
		n->errors++;
}

/* One request; true when it was a read that hit. */
static bool replay_one(struct replay *r, const struct iso_req *q, bool count)
{
	struct tenant_count *n = &r->n[q->node];
	struct tenant_count scratch = {0};
	char key[KEY_MAX + 1];
	const char *p = r->prefix[q->node];
	size_t plen = strlen(p), keylen = plen + 1 + q->keylen;
	bool hit = false;

	memcpy(key, p, plen);
	key[plen] = ':';
	memcpy(key + plen + 1, r->tr->pool + q->key_off, q->keylen);
	if (!count)
		n = &scratch; /* the warm-up's errors and fails are not reported */
	switch ((enum iso_op)q->op) {
	case ISO_GETSET:
	case ISO_GET:
	case ISO_GETS:
		hit = do_get(r, q->op == ISO_GETS ? "gets" : "get", key, keylen, n);
		n->reads++;
		n->hits += hit;
		if (!hit && q->op == ISO_GETSET)
			do_store(r, "set", key, keylen, q->size, q->ttl_ms, n);
		break;
	case ISO_SET:
		do_store(r, "set", key, keylen, q->size, q->ttl_ms, n);
		break;
	case ISO_ADD:
		do_store(r, "add", key, keylen, q->size, q->ttl_ms, n);
		break;
	case ISO_REPLACE:
	case ISO_CAS:
		do_store(r, "replace", key, keylen, q->size, q->ttl_ms, n);
		break;
	case ISO_APPEND:
		do_store(r, "append", key, keylen, q->size, 0, n);
		break;
	case ISO_PREPEND:
		do_store(r, "prepend", key, keylen, q->size, 0, n);
		break;
	case ISO_DELETE:
		out_printf(&r->c, "delete %.*s\r\n", (int)keylen, key);
		do_simple(r, n);
		break;
	case ISO_INCR:
		out_printf(&r->c, "incr %.*s 1\r\n", (int)keylen, key);
		do_simple(r, n);
		break;
	case ISO_DECR:
		out_printf(&r->c, "decr %.*s 1\r\n", (int)keylen, key);
		do_simple(r, n);
		break;
	case ISO_TOUCH:
		out_printf(&r->c, "touch %.*s %lld\r\n", (int)keylen, key, exptime(r, q->ttl_ms));
		do_simple(r, n);
		break;
	default:
		die("bad op %u", (unsigned)q->op);
	}
	return hit;
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: trace_replay [--host H] [--port P] [--label NAME] [--warmup N] [--no-pace]\n"
		"                    [--json-only] TRACE\n"
		"       trace_replay --slcache-args TRACE\n"
		"\n"
		"Replays TRACE (\"time tenant key size [op [ttl]]\" per line, see\n"
		"benchmarks/README.md) against a memcached-protocol server over TCP, one request\n"
		"at a time, with tenant T's keys sent as \"T:KEY\" ('/' in T becomes '.'), and\n"
		"reports each tenant's hit ratio on reads after the warm-up.\n"
		"\n"
		"  --host H         server address (default 127.0.0.1)\n"
		"  --port P         server port (default 11211)\n"
		"  --label NAME     names the server in the JSON (default host:port)\n"
		"  --warmup N       requests not counted (default: the trace's '# warmup:', else 0)\n"
		"  --no-pace        send as fast as the server answers, even when the trace has\n"
		"                   TTLs (by default such a trace runs at its own clock's speed)\n"
		"  --no-flush       do not send flush_all first\n"
		"  --json-only      no progress or table on stderr\n"
		"  --slcache-args   print the slcache options for the trace's budget and soft\n"
		"                   limits (-m MB --tenant NAME:soft=BYTES ...) and exit\n"
		"\n"
		"stdout: {\"bench\":\"replay\",\"trace\":...,\"server\":...,\"tenant\":...,\"reads\":...,\n"
		"         \"hit_ratio\":...,...} per tenant, then {\"bench\":\"replay_total\",...}.\n"
		"Exit status: 0 done, 1 an error (server, trace), 2 bad arguments.\n");
}

static void progress(const char *fmt, ...)
{
	va_list ap;

	if (g_json_only)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1", *port = "11211", *label = NULL, *file = NULL;
	bool pace = true, flush = true, slcache_args = false, warmup_given = false;
	unsigned long long warmup = 0;
	struct iso_trace tr;
	struct replay r;
	char err[512], labelbuf[300];
	uint64_t hits = 0, reads = 0, t0_ms;
	double start, last, max_lag = 0;
	const char *trace_name;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--no-pace") == 0) {
			pace = false;
		} else if (strcmp(a, "--no-flush") == 0) {
			flush = false;
		} else if (strcmp(a, "--json-only") == 0) {
			g_json_only = true;
		} else if (strcmp(a, "--slcache-args") == 0) {
			slcache_args = true;
		} else if (val && strcmp(a, "--host") == 0) {
			host = val;
			i++;
		} else if (val && strcmp(a, "--port") == 0) {
			port = val;
			i++;
		} else if (val && strcmp(a, "--label") == 0) {
			label = val;
			i++;
		} else if (val && strcmp(a, "--warmup") == 0 && val[0] != '-' &&
			   (errno = 0, warmup = strtoull(val, &end, 10), !errno && !*end && end != val)) {
			warmup_given = true;
			i++;
		} else if (a[0] != '-' && !file) {
			file = a;
		} else {
			fprintf(stderr, "trace_replay: bad argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (!file) {
		usage(stderr);
		return 2;
	}

	iso_trace_init(&tr);
	if (iso_trace_load(&tr, file, err, sizeof(err)) != 0)
		die("%s", err);
	trace_name = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;

	memset(&r, 0, sizeof(r));
	r.tr = &tr;
	r.prefix = calloc((size_t)tr.nnodes, sizeof(*r.prefix));
	r.n = calloc((size_t)tr.nnodes, sizeof(*r.n));
	if (!r.prefix || !r.n)
		die("out of memory");
	for (int i = 0; i < tr.nnodes; i++) {
		char *p = strdup(tr.nodes[i].path);

		if (!p)
			die("out of memory");
		for (char *s = p; *s; s++)
			if (*s == '/')
				*s = '.';
		r.prefix[i] = p;
	}
	for (size_t q = 0; q < tr.nreqs; q++)
		if (strlen(r.prefix[tr.reqs[q].node]) + 1 + tr.reqs[q].keylen > KEY_MAX)
			die("request %zu: tenant prefix plus key is over %d bytes", q + 1, KEY_MAX);

	if (slcache_args) {
		uint64_t budget = tr.budget_set ? tr.budget : 64u << 20;

		/* slcache's tenants are flat: only the tenants that hold items get one. */
		printf("-m %" PRIu64, (budget + (1u << 20) - 1) >> 20);
		for (int i = 0; i < tr.nnodes; i++)
			if (tr.nodes[i].holds && tr.nodes[i].soft)
				printf(" --tenant %s:soft=%" PRIu64, r.prefix[i], tr.nodes[i].soft);
		printf("\n");
		return 0;
	}
	if (!warmup_given)
		warmup = tr.warmup;
	pace = pace && tr.has_ttl;
	if (!label) {
		snprintf(labelbuf, sizeof(labelbuf), "%s:%s", host, port);
		label = labelbuf;
	}

	conn_open(&r.c, host, port);
	r.wall0 = time(NULL);
	if (flush) {
		const char *line;

		out_printf(&r.c, "flush_all\r\n");
		flush_out(&r.c);
		line = read_line(&r.c);
		if (strcmp(line, "OK") != 0)
			die("flush_all: '%.80s'", line);
	}
	progress("trace_replay: %s -> %s (%s): %zu requests, %d tenants, warm-up %llu%s\n",
		 trace_name, label, host, tr.nreqs, tr.nnodes, warmup,
		 pace ? ", paced at the trace's clock (it has TTLs)" : "");

	t0_ms = tr.nreqs ? tr.reqs[0].time_ms : 0;
	start = last = now_s();
	for (size_t q = 0; q < tr.nreqs; q++) {
		const struct iso_req *qq = &tr.reqs[q];
		bool count = q >= warmup, hit;
		double due = start + (double)(qq->time_ms - (qq->time_ms > t0_ms ? t0_ms : qq->time_ms)) /
					     1000.0,
		       t = now_s();

		if (pace) {
			if (t < due) {
				struct timespec ts;
				double d = due - t;

				ts.tv_sec = (time_t)d;
				ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
				nanosleep(&ts, NULL);
			} else if (t - due > max_lag) {
				max_lag = t - due;
			}
		}
		hit = replay_one(&r, qq, count);
		if (count && iso_op_is_read(qq->op)) {
			reads++;
			hits += hit;
		}
		if (t - last >= PROGRESS_S) {
			last = t;
			progress("  [%s] %zu/%zu requests (%.0f%%), %.0f req/s, hit ratio so far %.3f, "
				 "lag %.2f s\n", label, q + 1, tr.nreqs, 100.0 * (double)(q + 1) / (double)tr.nreqs,
				 (double)(q + 1) / (t - start), reads ? (double)hits / (double)reads : 0.0,
				 pace ? (t > due ? t - due : 0.0) : 0.0);
		}
	}

	{
		double secs = now_s() - start;

		for (int i = 0; i < tr.nnodes; i++) {
			const struct tenant_count *n = &r.n[i];

			if (!tr.nodes[i].holds)
				continue;
			printf("{\"bench\":\"replay\",\"trace\":\"%s\",\"server\":\"%s\",\"tenant\":\"%s\","
			       "\"soft\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"hits\":%" PRIu64 ",",
			       trace_name, label, tr.nodes[i].path, tr.nodes[i].soft, n->reads, n->hits);
			if (n->reads)
				printf("\"hit_ratio\":%.4f,", (double)n->hits / (double)n->reads);
			else
				printf("\"hit_ratio\":null,");
			printf("\"set_fails\":%" PRIu64 ",\"errors\":%" PRIu64 "}\n", n->set_fails,
			       n->errors);
		}
		printf("{\"bench\":\"replay_total\",\"trace\":\"%s\",\"server\":\"%s\",\"hit_ratio\":%.4f,"
		       "\"requests\":%zu,\"warmup\":%llu,\"seconds\":%.1f,\"req_per_s\":%.0f,"
		       "\"paced\":%s,\"max_lag_s\":%.2f}\n",
		       trace_name, label, reads ? (double)hits / (double)reads : 0.0, tr.nreqs, warmup,
		       secs, (double)tr.nreqs / secs, pace ? "true" : "false", max_lag);
		fflush(stdout);
		progress("\n%s on %s: %.1f s, %.0f req/s%s\n%-16s %10s %8s %9s %7s\n", trace_name, label,
			 secs, (double)tr.nreqs / secs, pace ? "" : " (not paced)", "tenant", "reads",
			 "hit", "set_fails", "errors");
		for (int i = 0; i < tr.nnodes; i++) {
			const struct tenant_count *n = &r.n[i];

			if (!tr.nodes[i].holds)
				continue;
			progress("%-16s %10" PRIu64 " %8.3f %9" PRIu64 " %7" PRIu64 "\n", tr.nodes[i].path,
				 n->reads, n->reads ? (double)n->hits / (double)n->reads : 0.0,
				 n->set_fails, n->errors);
		}
		progress("%-16s %10" PRIu64 " %8.3f   (max lag %.2f s)\n", "whole cache", reads,
			 reads ? (double)hits / (double)reads : 0.0, max_lag);
	}
	close(r.c.fd);
	for (int i = 0; i < tr.nnodes; i++)
		free(r.prefix[i]);
	free(r.prefix);
	free(r.n);
	free(r.value);
	free(r.c.out);
	iso_trace_free(&tr);
	return 0;
}
