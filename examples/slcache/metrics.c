/* SPDX-License-Identifier: MIT */
/*
 * metrics.c: --metrics-port, the OpenMetrics text of the whole softlimit
 * tree (sl_group_dump(SL_DUMP_OPENMETRICS) on the root) over HTTP/1.0, for
 * Prometheus to scrape as it scrapes a memcached exporter.
 *
 * One small thread serves every scrape connection at once from a poll()
 * loop, so a slow client (one that sends a byte a second, or never reads
 * its answer) delays no scrape and no cache client.  Each connection
 * answers one request and is closed.  What slow clients can hold is
 * bounded: at most CLIENTS_MAX connections (a new one pushes out the
 * oldest), REQ_MAX bytes of request each, answers of at most ANSWERS_MAX
 * bytes in all (a new answer pushes out the oldest unread one), and a
 * connection that does not finish its request within HEAD_DEADLINE_MS,
 * or leaves its answer untouched for IDLE_DEADLINE_MS, is dropped.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <softlimit/softlimit.h>

#include "lease.h"
#include "metrics.h"
#include "net.h"
#include "slcache.h"

#define REQ_MAX 4096              /* request line and headers: a scraper sends ~200 bytes */
#define CLIENTS_MAX 128           /* connections at once                                  */
#define ANSWERS_MAX (4u << 20)    /* answer bytes held for clients that read slowly       */
#define HEAD_DEADLINE_MS 10000    /* to send the whole request head                       */
#define IDLE_DEADLINE_MS 10000    /* to take some of the answer, or to close after it     */
#define DRAIN_MAX (256 * 1024)    /* what is read and dropped after the answer            */

#define CONTENT_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"

static struct {
	int lfd, stopfd;
	pthread_t th;
	bool running;
	sl_group *(*scope)(void);
} ms = { .lfd = -1, .stopfd = -1 };

/* One scrape connection: reading its request, then sending its answer,
 * then reading what the client still sends until it closes: closing with
 * unread input would reset the connection, and a reset may discard the
 * answer before the client reads it. */
enum mstate { M_HEAD, M_SEND, M_DRAIN };

struct mclient {
	int fd;
	enum mstate state;
	int64_t since;   /* ms: accepted, or the answer last moved */
	size_t len;      /* request bytes (M_HEAD), or bytes drained (M_DRAIN) */
	char req[REQ_MAX + 1];
	char *out;       /* the whole answer, head and body */
	size_t olen, ooff;
};

static struct mclient *clients[CLIENTS_MAX];
static unsigned nclients;
static size_t answers_held;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void client_drop(unsigned i)
{
	struct mclient *m = clients[i];

	close(m->fd);
	answers_held -= m->olen;
	free(m->out);
	free(m);
	clients[i] = clients[--nclients];
}

/* The oldest connection (in @state, or any when @state < 0): the one a
 * newcomer pushes out. */
static int client_oldest(int state)
{
	int best = -1;

	for (unsigned i = 0; i < nclients; i++)
		if ((state < 0 || clients[i]->state == (enum mstate)state) &&
		    (best < 0 || clients[i]->since < clients[best]->since))
			best = (int)i;
	return best;
}

/* The answer: @status, @extra headers and a body (a short text of the
 * status when @body is NULL).  It stays with the client until sent. */
static void answer(struct mclient *m, const char *status, const char *extra,
		   const char *ctype, const char *body, size_t blen)
{
	char head[512], text[64];
	int n;

	if (!body) {
		blen = (size_t)snprintf(text, sizeof(text), "%s\n", status);
		body = text;
	}
	n = snprintf(head, sizeof(head),
		     "HTTP/1.0 %s\r\nContent-Type: %s\r\n%sContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n", status, ctype, extra, blen);
	m->state = M_SEND;
	m->since = now_ms();
	if (n <= 0 || (size_t)n >= sizeof(head))
		return;
	/* Room first: the answers of the slowest readers go (their
	 * connections are closed on their next turn in the loop). */
	while (answers_held + (size_t)n + blen > ANSWERS_MAX) {
		int old = client_oldest(M_SEND);

		if (old < 0 || clients[old] == m)
			break;
		answers_held -= clients[old]->olen;
		free(clients[old]->out);
		clients[old]->out = NULL;
		clients[old]->olen = clients[old]->ooff = 0;
		clients[old]->state = M_DRAIN;
		clients[old]->since = INT64_MIN / 2;
	}
	m->out = malloc((size_t)n + blen);
	if (!m->out)
		return;
	memcpy(m->out, head, (size_t)n);
	memcpy(m->out + n, body, blen);
	m->olen = (size_t)n + blen;
	answers_held += m->olen;
}

static void answer_status(struct mclient *m, const char *status, const char *extra)
{
	answer(m, status, extra, "text/plain; charset=utf-8", NULL, 0);
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

/* A whole request head is in m->req: answer it. */
static void serve(struct mclient *m)
{
	char *req = m->req, *sp1, *sp2, *eol, *body;
	size_t blen = 0;

	/* "METHOD SP TARGET SP HTTP/1.x" */
	eol = strpbrk(req, "\r\n");
	*eol = '\0';
	sp1 = strchr(req, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp2 == sp1 + 1 || strchr(sp2 + 1, ' ') ||
	    strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || sp2[8] < '0' || sp2[8] > '9' || sp2[9]) {
		answer_status(m, "400 Bad Request", "");
		return;
	}
	*sp1 = *sp2 = '\0';
	if (strcmp(req, "GET") != 0) {
		answer_status(m, "405 Method Not Allowed", "Allow: GET\r\n");
		return;
	}
	/* The path, with any query string (Prometheus may add one) ignored. */
	sp1[1 + strcspn(sp1 + 1, "?")] = '\0';
	if (strcmp(sp1 + 1, "/metrics") != 0) {
		answer_status(m, "404 Not Found", "");
		return;
	}
	body = dump(&blen);
	if (body && lease_metrics(&body, &blen) != 0) { /* --lease-store's families */
		free(body);
		body = NULL;
	}
	if (!body) {
		answer_status(m, "500 Internal Server Error", "");
		return;
	}
	answer(m, "200 OK", "", CONTENT_TYPE, body, blen);
	free(body);
}

/* Reads what the client sent; false when the connection is done with. */
static bool client_read(struct mclient *m)
{
	char buf[4096];
	ssize_t k;

	if (m->state == M_DRAIN) {
		k = recv(m->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (k > 0)
			m->len += (size_t)k;
		return !(k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR) || m->len > DRAIN_MAX);
	}
	k = recv(m->fd, m->req + m->len, REQ_MAX - m->len, MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (k <= 0) { /* the client went away, or shut its side before the end */
		answer_status(m, "400 Bad Request", "");
		return true;
	}
	m->len += (size_t)k;
	m->req[m->len] = '\0';
	if (strstr(m->req, "\r\n\r\n") || strstr(m->req, "\n\n"))
		serve(m);
	else if (m->len == REQ_MAX)
		answer_status(m, "400 Bad Request", "");
	return true;
}

/* Sends what it can of the answer; false when the connection is done with. */
static bool client_send(struct mclient *m)
{
	while (m->ooff < m->olen) {
		ssize_t k = send(m->fd, m->out + m->ooff, m->olen - m->ooff,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (k <= 0)
			return false;
		m->ooff += (size_t)k;
		m->since = now_ms();
	}
	/* The answer ends here (HTTP/1.0); what the client still sends is drained. */
	shutdown(m->fd, SHUT_WR);
	answers_held -= m->olen;
	free(m->out);
	m->out = NULL;
	m->olen = m->ooff = m->len = 0;
	m->state = M_DRAIN;
	m->since = now_ms();
	return true;
}

static void client_accept(void)
{
	struct mclient *m;
	int fd = accept4(ms.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	if (nclients == CLIENTS_MAX)
		client_drop((unsigned)client_oldest(-1));
	m = calloc(1, sizeof(*m));
	if (!m) {
		close(fd);
		return;
	}
	m->fd = fd;
	m->since = now_ms();
	clients[nclients++] = m;
}

static void *metrics_main(void *arg)
{
	struct pollfd pf[CLIENTS_MAX + 2];

	(void)arg;
	for (;;) {
		unsigned n = nclients, i;
		int64_t now;

		pf[0] = (struct pollfd){ .fd = ms.lfd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = ms.stopfd, .events = POLLIN };
		for (i = 0; i < n; i++)
			pf[i + 2] = (struct pollfd){ .fd = clients[i]->fd,
						     .events = clients[i]->state == M_SEND ? POLLOUT
											 : POLLIN };
		if (poll(pf, n + 2, 1000) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		/* Backwards: a dropped client is replaced by the last one. */
		now = now_ms();
		for (i = n; i-- > 0;) {
			struct mclient *m = clients[i];
			bool ok = true;

			if (pf[i + 2].revents & (POLLIN | POLLHUP | POLLERR) && m->state != M_SEND)
				ok = client_read(m);
			if (ok && m->state == M_SEND)
				ok = client_send(m);
			if (ok && now - m->since > (m->state == M_HEAD ? HEAD_DEADLINE_MS
								       : IDLE_DEADLINE_MS)) {
				if (m->state == M_HEAD) /* too slow: told so, once, if it reads */
					answer_status(m, "408 Request Timeout", "");
				else
					ok = false;
			}
			if (!ok)
				client_drop(i);
		}
		if (pf[0].revents & POLLIN)
			client_accept();
	}
	while (nclients)
		client_drop(nclients - 1);
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
