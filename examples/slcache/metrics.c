/* SPDX-License-Identifier: MIT */
/*
 * metrics.c: --metrics-port, the OpenMetrics text of the whole softlimit
 * tree (sl_group_dump(SL_DUMP_OPENMETRICS) on the root) over HTTP/1.0, for
 * Prometheus to scrape as it scrapes a memcached exporter.
 *
 * One small thread serves one scrape at a time: a scrape is rare (seconds
 * apart) and short, so it needs neither the workers' event loops nor
 * their buffers, and a slow scraper never delays a cache client.  Each
 * connection answers one request and is closed; a client that sends
 * nothing for IO_TIMEOUT_S is dropped, so one cannot hold the thread.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <softlimit/softlimit.h>

#include "lease.h"
#include "metrics.h"
#include "net.h"
#include "slcache.h"

#define REQ_MAX 4096    /* request line and headers: a scraper sends ~200 bytes */
#define IO_TIMEOUT_S 2  /* per read or write of one scrape connection          */

#define CONTENT_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"

static struct {
	int lfd, stopfd;
	pthread_t th;
	bool running;
	sl_group *(*scope)(void);
} ms = { .lfd = -1, .stopfd = -1 };

static bool send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

static void send_status(int fd, const char *status, const char *extra)
{
	char buf[256];
	int n;

	n = snprintf(buf, sizeof(buf),
		     "HTTP/1.0 %s\r\nContent-Type: text/plain; charset=utf-8\r\n%s"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
		     status, extra, strlen(status) + 1, status);
	if (n > 0 && (size_t)n < sizeof(buf))
		send_all(fd, buf, (size_t)n);
}

/* The dump of the tree, in a buffer that grows to fit; NULL when memory
 * runs out or there is no tree. */
static char *dump(size_t *len)
{
	sl_group *root = ms.scope();
	size_t cap = 64 * 1024, needed = 0;
	char *buf = NULL;
	int rc;

	if (!root)
		return NULL;
	for (int tries = 0; tries < 4; tries++) {
		char *nb = realloc(buf, cap);

		if (!nb)
			break;
		buf = nb;
		rc = sl_group_dump(root, SL_DUMP_OPENMETRICS, buf, cap, &needed);
		if (rc == 0) {
			*len = needed;
			return buf;
		}
		if (rc != -ENOSPC)
			break;
		/* Groups may be created between two calls: leave some room. */
		cap = needed + 1 + needed / 8;
	}
	free(buf);
	return NULL;
}

/* Reads the request head (up to the blank line); its length, or 0 when the
 * client went away, timed out or sent more than REQ_MAX. */
static size_t read_head(int fd, char *req, size_t cap)
{
	size_t len = 0;

	while (len + 1 < cap) {
		ssize_t k = recv(fd, req + len, cap - 1 - len, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return 0;
		len += (size_t)k;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			return len;
	}
	return 0;
}

static void serve(int fd)
{
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
	char req[REQ_MAX + 1], *sp1, *sp2, *eol;
	char head[256];
	size_t len, blen = 0;
	char *body;
	int n;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	len = read_head(fd, req, sizeof(req));
	if (len == 0) {
		send_status(fd, "400 Bad Request", "");
		return;
	}
	/* "METHOD SP TARGET SP HTTP/1.x" */
	eol = strpbrk(req, "\r\n");
	*eol = '\0';
	sp1 = strchr(req, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp2 == sp1 + 1 || strchr(sp2 + 1, ' ') ||
	    strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || sp2[8] < '0' || sp2[8] > '9' || sp2[9]) {
		send_status(fd, "400 Bad Request", "");
		return;
	}
	*sp1 = *sp2 = '\0';
	if (strcmp(req, "GET") != 0) {
		send_status(fd, "405 Method Not Allowed", "Allow: GET\r\n");
		return;
	}
	/* The path, with any query string (Prometheus may add one) ignored. */
	sp1[1 + strcspn(sp1 + 1, "?")] = '\0';
	if (strcmp(sp1 + 1, "/metrics") != 0) {
		send_status(fd, "404 Not Found", "");
		return;
	}
	body = dump(&blen);
	if (body && lease_metrics(&body, &blen) != 0) { /* --lease-store's families */
		free(body);
		body = NULL;
	}
	if (!body) {
		send_status(fd, "500 Internal Server Error", "");
		return;
	}
	n = snprintf(head, sizeof(head),
		     "HTTP/1.0 200 OK\r\nContent-Type: " CONTENT_TYPE "\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
	if (n > 0 && (size_t)n < sizeof(head) && send_all(fd, head, (size_t)n))
		send_all(fd, body, blen);
	free(body);
}

/* Reads what the client still sends (a refused request's rest), briefly:
 * closing with unread input would reset the connection, and a reset may
 * discard the answer before the client reads it. */
static void drain(int fd)
{
	struct timeval tv = { .tv_usec = 200 * 1000 };
	char buf[4096];
	size_t total = 0;
	ssize_t k;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (total < 256 * 1024 && (k = recv(fd, buf, sizeof(buf), 0)) > 0)
		total += (size_t)k;
}

static void *metrics_main(void *arg)
{
	struct pollfd pf[2] = { { .fd = ms.lfd, .events = POLLIN },
				{ .fd = ms.stopfd, .events = POLLIN } };

	(void)arg;
	for (;;) {
		int fd;

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents)
			break;
		fd = accept4(ms.lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve(fd);
		shutdown(fd, SHUT_WR); /* the answer ends here: HTTP/1.0 */
		drain(fd);
		close(fd);
	}
	return NULL;
}

int metrics_start(sl_group *(*scope)(void))
{
	if (!opt.metrics_port)
		return 0;
	ms.scope = scope;
	ms.lfd = net_listen(opt.addr, opt.metrics_port);
	if (ms.lfd < 0)
		return -1;
	ms.stopfd = eventfd(0, EFD_CLOEXEC);
	if (ms.stopfd < 0 || pthread_create(&ms.th, NULL, metrics_main, NULL) != 0) {
		fprintf(stderr, "slcache: cannot start the metrics thread\n");
		if (ms.stopfd >= 0)
			close(ms.stopfd);
		close(ms.lfd);
		ms.lfd = ms.stopfd = -1;
		return -1;
	}
	ms.running = true;
	fprintf(stderr, "slcache: metrics on http://%s:%s/metrics\n", opt.addr, opt.metrics_port);
	return 0;
}

void metrics_stop(void)
{
	uint64_t one = 1;

	if (!ms.running)
		return;
	if (write(ms.stopfd, &one, sizeof(one)) < 0)
		logv("metrics: eventfd write: %s", strerror(errno));
	pthread_join(ms.th, NULL);
	close(ms.stopfd);
	close(ms.lfd);
	ms.running = false;
	ms.lfd = ms.stopfd = -1;
}
