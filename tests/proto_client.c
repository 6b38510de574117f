/* SPDX-License-Identifier: MIT */
/*
 * proto_client PORT < SCRIPT - play the exchanges of SCRIPT against a
 * memcached-protocol server on 127.0.0.1:PORT and print what it answered,
 * for tests/slcache_proto.sh to compare byte for byte.
 *
 * SCRIPT: "=== NAME [close]" starts an exchange; the lines after it, up to
 * the next "===", are sent as they are written, with C escapes (\r \n \t
 * \\ \xHH), "\{N*TEXT}" for N copies of TEXT, and "\{pause MS}" to send
 * what comes before, then wait MS milliseconds before the rest (a request
 * split across packets, or one that waits for an expiry).  A line is sent without a
 * line end; write "\r\n" where the protocol wants one.  Each exchange gets a
 * fresh connection.  After the request, "mn\r\n" is sent and the answer is
 * read up to the server's "MN\r\n" (memcached's meta no-op, the way clients
 * find the end of quiet commands; one more than the request's own "mn"s); with "close", the answer is read until
 * the server closes the connection instead (at most 3 s, then
 * "<still open>").  Lines starting with "#" outside a request are
 * comments.
 *
 * Output: "=== NAME" then the answer, each "\r\n" written as "\r\n" and a
 * line break, other bytes outside printable ASCII as \xHH.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct buf {
	char *p;
	size_t n, cap;
};

/* The request's pauses: at byte split_at[i], wait split_ms[i]. */
#define PAUSES_MAX 64
static size_t split_at[PAUSES_MAX];
static int split_ms[PAUSES_MAX];
static int nsplit;

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;

		while (b->n + n + 1 > cap)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p) {
			perror("proto_client");
			exit(2);
		}
		b->cap = cap;
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Appends the unescaped @line to @out. */
static void unescape(const char *line, struct buf *out)
{
	const char *s = line;

	while (*s) {
		char ch = *s++;

		if (ch != '\\') {
			put(out, &ch, 1);
			continue;
		}
		ch = *s++;
		switch (ch) {
		case 'r': put(out, "\r", 1); break;
		case 'n': put(out, "\n", 1); break;
		case 't': put(out, "\t", 1); break;
		case '\\': put(out, "\\", 1); break;
		case 'x': {
			int hi = hexval(s[0]), lo = hi < 0 ? -1 : hexval(s[1]);
			char v;

			if (lo < 0) {
				fprintf(stderr, "proto_client: bad \\x in '%s'\n", line);
				exit(2);
			}
			v = (char)(hi * 16 + lo);
			put(out, &v, 1);
			s += 2;
			break;
		}
		case '{': {
			char *star, *end;

			if (strncmp(s, "pause ", 6) == 0) {
				long ms = strtol(s + 6, &end, 10);

				if (*end != '}' || ms < 0 || nsplit == PAUSES_MAX) {
					fprintf(stderr, "proto_client: bad \\{pause MS} in '%s'\n", line);
					exit(2);
				}
				split_at[nsplit] = out->n;
				split_ms[nsplit++] = (int)ms;
				s = end + 1;
				break;
			}
			{
			long n = strtol(s, &star, 10);
			struct buf one = { 0 };

			end = star && *star == '*' ? strchr(star, '}') : NULL;
			if (!end || n < 0) {
				fprintf(stderr, "proto_client: bad \\{N*TEXT} in '%s'\n", line);
				exit(2);
			}
			{
				char *text = strndup(star + 1, (size_t)(end - star - 1));

				unescape(text, &one);
				free(text);
			}
			while (n-- > 0)
				put(out, one.p ? one.p : "", one.n);
			free(one.p);
			s = end + 1;
			}
			break;
		}
		default:
			fprintf(stderr, "proto_client: bad escape \\%c in '%s'\n", ch, line);
			exit(2);
		}
	}
}

/* Occurrences of @s in @b that start a line. */
static size_t count(const struct buf *b, const char *s)
{
	size_t n = 0, len = strlen(s), i;

	for (i = 0; i + len <= b->n; i++)
		if ((i == 0 || b->p[i - 1] == '\n') && memcmp(b->p + i, s, len) == 0)
			n++;
	return n;
}

static int connect_to(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		perror("proto_client: connect");
		exit(2);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sends @req (while reading, so a server that answers a long request as it
 * goes never blocks us), then reads the answer into @ans. */
static void exchange(int port, const struct buf *req, bool closes, struct buf *ans)
{
	int fd = connect_to(port);
	size_t sent = 0;
	bool mn_sent = closes, eof = false;
	double deadline = now() + 3;
	int pause = 0;

	while (!eof) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char tmp[65536];
		ssize_t n;

		if (sent < req->n || !mn_sent)
			p.events |= POLLOUT;
		if (now() > deadline)
			break;
		if (poll(&p, 1, 100) < 0 && errno != EINTR)
			break;
		if (p.revents & POLLOUT) {
			size_t upto = pause < nsplit ? split_at[pause] : req->n;

			if (pause < nsplit && sent == upto) {
				poll(NULL, 0, split_ms[pause]);
				deadline += split_ms[pause] / 1000.0;
				pause++;
				continue;
			}
			if (sent < req->n) {
				n = send(fd, req->p + sent, upto - sent, MSG_NOSIGNAL);
				if (n > 0)
					sent += (size_t)n;
				else if (n < 0 && errno != EAGAIN && errno != EINTR)
					sent = req->n; /* the server closed: read what it said */
			} else if (!mn_sent) {
				/* A server that closed: the read below sees it. */
				(void)!send(fd, "mn\r\n", 4, MSG_NOSIGNAL);
				mn_sent = true;
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			n = recv(fd, tmp, sizeof(tmp), 0);
			if (n > 0)
				put(ans, tmp, (size_t)n);
			else if (n == 0 || (errno != EAGAIN && errno != EINTR))
				eof = true;
		}
		if (!closes && mn_sent && ans->n >= 4 && memcmp(ans->p + ans->n - 4, "MN\r\n", 4) == 0 &&
		    count(ans, "MN\r\n") > count(req, "mn"))
			break;
	}
	if (!eof && closes)
		put(ans, "<still open>", 12);
	else if (eof && !closes)
		put(ans, "<closed>", 8);
	close(fd);
}

static void print_answer(const struct buf *a)
{
	size_t i;

	for (i = 0; i < a->n; i++) {
		unsigned char ch = (unsigned char)a->p[i];

		if (ch == '\r' && i + 1 < a->n && a->p[i + 1] == '\n') {
			fputs("\\r\\n\n", stdout);
			i++;
		} else if (ch == '\\') {
			fputs("\\\\", stdout);
		} else if (ch < 0x20 || ch >= 0x7f) {
			printf("\\x%02x", ch);
		} else {
			putchar(ch);
		}
	}
	if (a->n && a->p[a->n - 1] != '\n')
		putchar('\n');
}

int main(int argc, char **argv)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	struct buf req = { 0 };
	char name[512] = "";
	bool have = false, closes = false;
	int port;

	if (argc != 2 || (port = atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: proto_client PORT < SCRIPT\n");
		return 2;
	}
	for (;;) {
		len = getline(&line, &cap, stdin);
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len < 0 || strncmp(line, "=== ", 4) == 0) {
			if (have) {
				struct buf ans = { 0 };

				exchange(port, &req, closes, &ans);
				printf("=== %s\n", name);
				print_answer(&ans);
				fflush(stdout);
				free(ans.p);
			}
			if (len < 0)
				break;
			snprintf(name, sizeof(name), "%s", line + 4);
			closes = strstr(name, " close") != NULL;
			req.n = 0;
			nsplit = 0;
			have = true;
			continue;
		}
		if (!have || line[0] == '#')
			continue;
		unescape(line, &req);
	}
	free(line);
	free(req.p);
	return 0;
}
