/* SPDX-License-Identifier: MIT */
/*
 * net.c: slcache's networking.  The main thread accepts and hands
 * connections round-robin to -t worker threads, each with its own
 * level-triggered epoll; sockets are non-blocking with per-connection read
 * and write buffers, so partial reads and writes and pipelined requests
 * just work.  SIGINT and SIGTERM, read from a signalfd, stop the server:
 * workers close their connections and exit, then net_run() returns.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "connmem.h"
#include "metrics.h"
#include "net.h"
#include "slcache.h"
#include "tenants.h"

#define MEMWAIT_POLL_MS 10  /* how often a waiting multiget looks for room, and
			     * a parked write for its lease's share           */

struct worker {
	pthread_t th;
	int epfd;
	int evfd;
	_Atomic int stop;
	pthread_mutex_t qlock;
	int *queue;
	size_t qlen, qcap;
	struct conn *conns;
	unsigned nwait; /* its connections waiting for room (conn->memwait) */
	unsigned nparked; /* and for a lease's share (conn->parked)           */
	struct wstats st;
	struct scratch scratch; /* lent to the connection being served */
};

static struct worker *workers;
static _Atomic uint64_t curr_conns, total_conns, rejected_conns;

void net_stats(struct net_stats *out)
{
	unsigned i;

	memset(out, 0, sizeof(*out));
	out->curr_conns = atomic_load(&curr_conns);
	out->total_conns = atomic_load(&total_conns);
	out->rejected_conns = atomic_load(&rejected_conns);
	for (i = 0; workers && i < opt.threads; i++) {
#define SUM_FIELD(name) \
	STAT_ADD(&out->sum, name, atomic_load_explicit(&workers[i].st.name, memory_order_relaxed));
		WSTATS(SUM_FIELD)
#undef SUM_FIELD
	}
}

static int64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/* ---- connections ---- */

static void conn_memwait(struct conn *c, bool wait)
{
	if (c->memwait == wait)
		return;
	c->memwait = wait;
	c->w->nwait += wait ? 1u : -1u;
	connmem_wait(wait ? 1 : -1);
}

/* A write waits for a starting lease's share (protocol.c's lease_gate()):
 * the worker polls it, as a multiget waiting for room. */
static void conn_park(struct conn *c, bool park)
{
	if (c->parked == park)
		return;
	c->parked = park;
	c->w->nparked += park ? 1u : -1u;
}

static void conn_close(struct conn *c)
{
	struct worker *w = c->w;

	logv("connection %d closed", c->fd);
	conn_memwait(c, false);
	conn_park(c, false);
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (!c->rborrowed)
		conn_buf_free(&c->rbuf, &c->rcap, &c->rhold);
	if (!c->wborrowed)
		conn_buf_free(&c->wbuf, &c->wcap, &c->whold);
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
			c->last_tx = now_s();
			STAT_ADD(c->st, bytes_written, (uint64_t)n);
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
		if (!c->wborrowed && c->wcap) /* all sent: an idle connection holds nothing */
			conn_buf_free(&c->wbuf, &c->wcap, &c->whold);
	}
	return true;
}

/* Reads what the socket has; false when the connection is dead.  A client
 * that shut down its side (nc -q1, printf | nc) is still answered: what it
 * sent runs, then the connection closes once its output is out. */
static bool conn_read(struct conn *c)
{
	ssize_t n;

	if (!conn_rbuf_room(c))
		return false;
	n = recv(c->fd, c->rbuf + c->rend, c->rcap - c->rend, 0);
	if (n > 0) {
		c->rend += (size_t)n;
		c->last_rx = now_s();
		STAT_ADD(c->st, bytes_read, (uint64_t)n);
	} else if (n == 0) {
		c->rd_eof = true;
	} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		return false;
	}
	return true;
}

/* Runs what was read; when output drains below the mark, goes on with the
 * multiget being answered and the requests read behind it.  Output the
 * socket does not take waits, and holds back further requests, past
 * WBUF_HIGH or while the pool is short. */
static bool conn_run(struct conn *c)
{
	for (;;) {
		size_t left = c->rend - c->rstart, at = c->get_at;

		if (!conn_flush(c))
			return false;
		conn_wbuf_borrow(c);
		proto_input(c);
		if (!conn_flush(c))
			return false;
		conn_memwait(c, c->get_at && c->get_nomem && c->wend == c->wstart);
		conn_park(c, c->lease_wait);
		if (c->close_after)
			return true;
		if (c->get_at && !c->memwait && c->wend == c->wstart)
			continue; /* all sent: the multiget goes on */
		if (c->rend == c->rstart || (c->rend - c->rstart == left && c->get_at == at) ||
		    c->wend - c->wstart >= WBUF_HIGH ||
		    (c->wend > c->wstart && connmem_short(WBUF_HIGH)))
			return true;
	}
}

static void conn_event(struct conn *c, uint32_t ev)
{
	bool ok = true;
	uint32_t want;

	if (c->wstart == c->wend)
		c->last_tx = now_s();
	if (ev & EPOLLERR)
		ok = false;
	else if ((ev & (EPOLLIN | EPOLLHUP)) && !c->rd_eof)
		ok = conn_read(c);
	else if ((ev & EPOLLHUP) && c->rd_eof)
		ok = false; /* both ways shut: nobody to answer */
	if (ok)
		ok = conn_run(c);
	if (!conn_settle(c, ok)) {
		logv("connection %d: no memory to keep its input or output: closing", c->fd);
		ok = false;
	}
	/* Done: closed, or shut by the client with nothing more to answer (what
	 * is left of its input is a request that can never complete). */
	if (!ok || (c->wstart == c->wend &&
		    (c->close_after || (c->rd_eof && !c->get_at && !c->parked)))) {
		conn_close(c);
		return;
	}
	/* Read only while answers keep up: a multiget being answered, a
	 * parked write, or output past the mark, stops reading (backpressure). */
	want = c->rd_eof || c->close_after || c->get_at || c->parked ||
		       c->wend - c->wstart >= WBUF_HIGH
		       ? 0
		       : EPOLLIN;
	if (c->wstart < c->wend)
		want |= EPOLLOUT;
	conn_watch(c, want);
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
	c->st = &w->st;
	c->scratch = &w->scratch;
	c->events = EPOLLIN;
	c->last_rx = c->last_tx = now_s();
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

/* Closes the connections that stopped in the middle of a value: each
 * holds a buffer of up to the value's size that only its client can
 * complete (or, refused, a socket that only its client can drain).  While
 * other connections wait for room in the pool, also those that hold pool
 * memory and did not move for as long: a partial request that stopped, an
 * answer its client does not read.  Such a one is reset (SO_LINGER 0), so
 * that the kernel drops what it holds for it too. */
static void close_stalled(struct worker *w, int64_t now)
{
	static const struct linger reset = { .l_onoff = 1, .l_linger = 0 };
	struct conn *c = w->conns, *next;
	bool contended = connmem_contended();

	for (; c; c = next) {
		int64_t since = now - (c->last_rx > c->last_tx ? c->last_rx : c->last_tx);
		int unread = 0;

		next = c->next;
		if (c->parked) /* waits for the lease, not its client */
			continue;
		if ((c->state == CS_DATA || c->state == CS_SWALLOW) &&
		    now - c->last_rx >= (int64_t)opt.stall_timeout) {
			/* Bytes waiting unread are the worker's delay, not the
			 * client's stall (a loaded machine). */
			if (ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0)
				continue;
			logv("connection %d: no data for %u s in the middle of a value: closing",
			     c->fd, opt.stall_timeout);
		} else if (contended && !c->memwait && (c->rcap || c->wcap) &&
			   since >= (int64_t)opt.stall_timeout) {
			/* Unread requests behind an answer that does not move
			 * are its client's: it pipelines and does not read (it
			 * was once spared for them, and held the pool for ever).
			 * Without output, they are the worker's delay. */
			if (c->wend == c->wstart && ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0)
				continue;
			logv("connection %d: holds memory others wait for, still for %u s: closing",
			     c->fd, opt.stall_timeout);
			setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
		} else {
			continue;
		}
		STAT_ADD(c->st, stalled_closed, 1);
		conn_close(c);
	}
}

/* Gives the multigets that wait for room in the pool, and the writes that
 * wait for a lease's share, another try. */
static void retry_waiting(struct worker *w)
{
	struct conn *c = w->conns, *next;

	for (; c && (w->nwait || w->nparked); c = next) {
		next = c->next;
		if (c->memwait || c->parked)
			conn_event(c, 0);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[128];
	int64_t swept = now_s();

	while (!atomic_load(&w->stop)) {
		int n = epoll_wait(w->epfd, evs, 128,
				   w->nwait || w->nparked ? MEMWAIT_POLL_MS
				   : opt.stall_timeout ? 1000 : -1), i;

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
		retry_waiting(w);
		/* After the events: a connection closed here must not be one
		 * that this round's events still point to. */
		if (opt.stall_timeout && now_s() != swept) {
			swept = now_s();
			close_stalled(w, swept);
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

int net_listen(const char *addr, const char *port)
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

int net_run(void)
{
	struct epoll_event e, evs[16];
	sigset_t mask;
	int lfd, sfd, epfd;
	unsigned i, next = 0;
	bool running = true;

	signal(SIGPIPE, SIG_IGN);
	lfd = net_listen(opt.addr, opt.port);
	if (lfd < 0)
		return 1;

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
	if (connmem_start() != 0)
		return 1;
	/* After the mask: the metrics thread must not take SIGTERM either. */
	if (metrics_start(connmem_scope) != 0)
		return 1;

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
	fprintf(stderr, "slcache: listening on %s:%s, %" PRIu64 " MiB, %s, %u threads\n", opt.addr,
		opt.port, opt.max_bytes >> 20,
		opt.accounting ? policy_name(opt.policy) : "no accounting (shared LRU)", opt.threads);
	if (opt.accounting)
		logv("item memory: %s", tenants_backend());

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
	metrics_stop();
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
	connmem_stop();
	close(epfd);
	close(sfd);
	return 0;
}
