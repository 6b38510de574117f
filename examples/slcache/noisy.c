/* SPDX-License-Identifier: MIT */
/*
 * slcache_noisy: the noisy-neighbour scene, a memcached-protocol client.
 *
 *   slcache_noisy -p PORT -m MEGABYTES [-h HOST] [-k KEYS] [-s VALUE_SIZE]
 *                 [-r ROUNDS] [-f FLOOD_FACTOR] [-L LABEL] [--header]
 *
 * Tenant "steady" stores a working set of KEYS values ("steady:<i>") and
 * reads all of it back once per round.  Between two of its rounds, tenant
 * "noisy" floods FLOOD_FACTOR * MEGABYTES / ROUNDS of unique keys
 * ("noisy:<n>", never read again): FLOOD_FACTOR times the server's memory
 * over the whole run.  steady re-stores what it missed.  Printed, one row:
 * steady's hit ratio over the rounds, the share of its working set still
 * there after the last flood, and the server's per-tenant stats.
 *
 * The rows for slcache (softlimit) and slcache --no-accounting (one shared
 * LRU) side by side are the demo (scripts/demo).
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
	int fd;
	char buf[1 << 16];
	size_t start, end;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("slcache_noisy: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void conn_open(struct conn *c, const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	int one = 1, err;

	err = getaddrinfo(host, port, &hints, &res);
	if (err)
		die("%s:%s: %s", host, port, gai_strerror(err));
	c->fd = -1;
	for (ai = res; ai && c->fd < 0; ai = ai->ai_next) {
		c->fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (c->fd >= 0 && connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
			close(c->fd);
			c->fd = -1;
		}
	}
	freeaddrinfo(res);
	if (c->fd < 0)
		die("cannot connect to %s:%s: %s", host, port, strerror(errno));
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->start = c->end = 0;
}

/* Reads more into the buffer; dies on EOF. */
static void conn_fill(struct conn *c)
{
	ssize_t n;

	if (c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	if (c->end == sizeof(c->buf))
		die("response line too long");
	do
		n = recv(c->fd, c->buf + c->end, sizeof(c->buf) - c->end, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		die("server closed the connection");
	c->end += (size_t)n;
}

/* The next line, without "\r\n", NUL-terminated in place. */
static char *conn_line(struct conn *c)
{
	for (;;) {
		char *p = c->buf + c->start;
		char *nl = memchr(p, '\n', c->end - c->start);

		if (nl) {
			*nl = '\0';
			if (nl > p && nl[-1] == '\r')
				nl[-1] = '\0';
			c->start = (size_t)(nl - c->buf) + 1;
			return p;
		}
		conn_fill(c);
	}
}

static void conn_skip(struct conn *c, size_t n)
{
	while (n > 0) {
		size_t take;

		if (c->start == c->end)
			conn_fill(c);
		take = c->end - c->start < n ? c->end - c->start : n;
		c->start += take;
		n -= take;
	}
}

/* Sends @len bytes while draining whatever the server answers (errors to
 * noreply sets), so neither side can block the other.  Returns the number
 * of SERVER_ERROR lines seen. */
static uint64_t send_draining(struct conn *c, const char *p, size_t len)
{
	uint64_t errors = 0;

	while (len > 0) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLOUT | POLLIN };

		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (pfd.revents & POLLIN) {
			char tmp[4096];
			ssize_t n = recv(c->fd, tmp, sizeof(tmp), MSG_DONTWAIT);

			if (n == 0)
				die("server closed the connection");
			for (ssize_t i = 0; i + 12 <= n; i++)
				if (memcmp(tmp + i, "SERVER_ERROR", 12) == 0)
					errors++;
		}
		if (pfd.revents & POLLOUT) {
			ssize_t n = send(c->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);

			if (n < 0 && errno != EAGAIN && errno != EINTR)
				die("send: %s", strerror(errno));
			if (n > 0) {
				p += n;
				len -= (size_t)n;
			}
		}
	}
	return errors;
}

static void send_all(struct conn *c, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* A round trip: every request sent before it has been handled. */
static void sync_conn(struct conn *c)
{
	const char *line;

	send_all(c, "version\r\n", 9);
	while (strncmp(line = conn_line(c), "VERSION ", 8) != 0)
		if (strncmp(line, "SERVER_ERROR", 12) != 0)
			die("unexpected answer '%s'", line);
}

struct sbuf {
	char *p;
	size_t len, cap;
};

static void sb_put(struct sbuf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		while (b->len + n > b->cap)
			b->cap = b->cap ? b->cap * 2 : 1 << 20;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			die("out of memory");
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void sb_set(struct sbuf *b, const char *key, const char *value, size_t vlen)
{
	char hdr[320];
	int n = snprintf(hdr, sizeof(hdr), "set %s 0 0 %zu noreply\r\n", key, vlen);

	sb_put(b, hdr, (size_t)n);
	sb_put(b, value, vlen);
	sb_put(b, "\r\n", 2);
}

/* Reads all of steady's working set with multi-gets; marks hits in @hit. */
static uint64_t steady_read(struct conn *c, unsigned keys, bool *hit)
{
	uint64_t hits = 0;
	unsigned i, j, batch = 100;

	memset(hit, 0, keys * sizeof(*hit));
	for (i = 0; i < keys; i += batch) {
		struct sbuf req = { 0 };
		char k[64];
		const char *line;

		sb_put(&req, "get", 3);
		for (j = i; j < keys && j < i + batch; j++) {
			int n = snprintf(k, sizeof(k), " steady:%u", j);

			sb_put(&req, k, (size_t)n);
		}
		sb_put(&req, "\r\n", 2);
		send_all(c, req.p, req.len);
		free(req.p);
		while (strcmp(line = conn_line(c), "END") != 0) {
			unsigned idx, flags;
			size_t len;

			if (sscanf(line, "VALUE steady:%u %u %zu", &idx, &flags, &len) != 3)
				die("unexpected answer '%s'", line);
			conn_skip(c, len + 2);
			if (idx < keys && !hit[idx]) {
				hit[idx] = true;
				hits++;
			}
		}
	}
	return hits;
}

static uint64_t steady_store(struct conn *c, unsigned keys, const bool *hit, const char *value,
			     size_t vlen)
{
	struct sbuf b = { 0 };
	uint64_t stored = 0;
	unsigned i;
	char k[64];

	for (i = 0; i < keys; i++) {
		if (hit && hit[i])
			continue;
		snprintf(k, sizeof(k), "steady:%u", i);
		sb_set(&b, k, value, vlen);
		stored++;
	}
	send_draining(c, b.p, b.len);
	free(b.p);
	sync_conn(c);
	return stored;
}

/* Reads "STAT tenant:<name>:<field> <n>" for steady and noisy. */
struct tstat {
	uint64_t usage, items, evictions, soft;
};

static void server_stats(struct conn *c, struct tstat *steady, struct tstat *noisy)
{
	const char *line;

	memset(steady, 0, sizeof(*steady));
	memset(noisy, 0, sizeof(*noisy));
	send_all(c, "stats\r\n", 7);
	while (strcmp(line = conn_line(c), "END") != 0) {
		char name[64], field[64];
		uint64_t v;
		struct tstat *t;

		if (sscanf(line, "STAT tenant:%63[^:]:%63s %" SCNu64, name, field, &v) != 3)
			continue;
		t = strcmp(name, "steady") == 0 ? steady : strcmp(name, "noisy") == 0 ? noisy : NULL;
		if (!t)
			continue;
		if (strcmp(field, "usage") == 0)
			t->usage = v;
		else if (strcmp(field, "items") == 0)
			t->items = v;
		else if (strcmp(field, "evictions") == 0)
			t->evictions = v;
		else if (strcmp(field, "soft") == 0)
			t->soft = v;
	}
}

static void usage(void)
{
	fputs("usage: slcache_noisy -p PORT -m MEGABYTES [-h HOST] [-k KEYS] [-s VALUE_SIZE]\n"
	      "                     [-r ROUNDS] [-f FLOOD_FACTOR] [-L LABEL] [--header]\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1", *port = NULL, *label = "slcache";
	unsigned keys = 2000, rounds = 4, flood = 4, mb = 0, r, i;
	size_t vlen = 4000;
	bool header = false, *hit;
	char *value;
	struct conn *steady, *noisy;
	uint64_t gets = 0, hits = 0, last_hits = 0, noisy_sets = 0, noisy_errors = 0, per_round;
	struct tstat st, nt;
	struct timespec t0, t1;

	for (i = 1; i < (unsigned)argc; i++) {
		const char *a = argv[i], *v = i + 1 < (unsigned)argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--header") == 0) {
			header = true;
			continue;
		}
		if (!v)
			usage();
		if (strcmp(a, "-h") == 0)
			host = v;
		else if (strcmp(a, "-p") == 0)
			port = v;
		else if (strcmp(a, "-m") == 0)
			mb = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "-k") == 0)
			keys = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "-s") == 0)
			vlen = strtoul(v, NULL, 10);
		else if (strcmp(a, "-r") == 0)
			rounds = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "-f") == 0)
			flood = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "-L") == 0)
			label = v;
		else
			usage();
		i++;
	}
	if (header) {
		printf("%-28s %12s %12s %12s %12s %12s %10s\n", "server", "steady hits", "steady kept",
		       "steady MiB", "noisy MiB", "noisy evict", "noisy OOM");
		if (!port)
			return 0;
	}
	if (!port || !mb || !keys || !rounds || !vlen || vlen > 1000000)
		usage();

	steady = calloc(1, sizeof(*steady));
	noisy = calloc(1, sizeof(*noisy));
	hit = calloc(keys, sizeof(*hit));
	value = malloc(vlen);
	if (!steady || !noisy || !hit || !value)
		die("out of memory");
	memset(value, 'v', vlen);
	conn_open(steady, host, port);
	conn_open(noisy, host, port);
	clock_gettime(CLOCK_MONOTONIC, &t0);

	/* Warm up: steady's whole working set. */
	steady_store(steady, keys, NULL, value, vlen);

	per_round = (uint64_t)flood * mb * 1024 * 1024 / rounds / (vlen + 64);
	for (r = 0; r < rounds; r++) {
		struct sbuf b = { 0 };
		uint64_t n, round_hits;
		char k[64];

		/* The flood: unique keys, never read again. */
		for (n = 0; n < per_round; n++) {
			snprintf(k, sizeof(k), "noisy:%" PRIu64, noisy_sets++);
			sb_set(&b, k, value, vlen);
			if (b.len > (4u << 20)) {
				noisy_errors += send_draining(noisy, b.p, b.len);
				b.len = 0;
			}
		}
		noisy_errors += send_draining(noisy, b.p, b.len);
		free(b.p);
		sync_conn(noisy);

		/* steady reads its working set, and stores again what it lost. */
		round_hits = steady_read(steady, keys, hit);
		hits += round_hits;
		gets += keys;
		last_hits = round_hits;
		steady_store(steady, keys, hit, value, vlen);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	server_stats(steady, &st, &nt);

	printf("%-28s %11.1f%% %11.1f%% %12.1f %12.1f %12" PRIu64 " %10" PRIu64 "\n", label,
	       100.0 * (double)hits / (double)gets, 100.0 * (double)last_hits / keys,
	       (double)st.usage / 1048576.0, (double)nt.usage / 1048576.0, nt.evictions,
	       noisy_errors);
	fprintf(stderr, "slcache_noisy: %s: %u rounds, %" PRIu64 " noisy sets (%.0f MiB), %.2f s\n",
		label, rounds, noisy_sets, (double)noisy_sets * (double)vlen / 1048576.0,
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	close(steady->fd);
	close(noisy->fd);
	free(steady);
	free(noisy);
	free(hit);
	free(value);
	return 0;
}
