/* SPDX-License-Identifier: MIT */
/*
 * conn.h: a client connection, between net.c (sockets, buffers, threads)
 * and protocol.c (what the bytes mean).  A connection belongs to one worker
 * thread for its whole life: nothing in it is shared.
 */
#ifndef SLCACHE_CONN_H
#define SLCACHE_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "connmem.h"
#include "storage.h"

/* Per-worker counters: written by their worker only, read by stats. */
#define WSTATS(X) \
	X(cmd_get) X(cmd_set) X(cmd_flush) X(cmd_touch) X(get_hits) X(get_misses) \
	X(get_expired) X(get_flushed) X(delete_hits) X(delete_misses) X(incr_hits) \
	X(incr_misses) X(decr_hits) X(decr_misses) X(cas_hits) X(cas_misses) X(cas_badval) \
	X(touch_hits) X(touch_misses) X(bytes_read) X(bytes_written) X(total_items) \
	X(oom_errors) X(meta_cmds) X(stalled_closed)

#define WSTATS_FIELD(name) _Atomic uint64_t name;
struct wstats {
	WSTATS(WSTATS_FIELD)
};
#undef WSTATS_FIELD

/* Only the owning worker writes: a relaxed load and store, no RMW. */
#define STAT_ADD(st, field, n) \
	atomic_store_explicit(&(st)->field, \
			      atomic_load_explicit(&(st)->field, memory_order_relaxed) + (n), \
			      memory_order_relaxed)
#define BUMP(c, field) STAT_ADD((c)->st, field, 1)

enum cstate { CS_CMD, CS_DATA, CS_SWALLOW, CS_CLOSE };

/* A worker's scratch buffers, lent to the connection it serves. */
#define RBUF_MIN (16 * 1024)
#define WBUF_MIN 4096
struct scratch {
	char r[RBUF_MIN];
	char w[WBUF_MIN];
};
/* Unsent output past which a connection runs no further request, nor the
 * next key of a multiget: with one value, what a client that does not read
 * can make the server hold. */
#define WBUF_HIGH (256 * 1024)

/* A storage command (classic or ms) waiting for its data block. */
struct pending {
	enum store_mode mode;
	char key[STORE_KEY_MAX + 1];
	size_t keylen;
	uint32_t flags;
	int64_t exptime;
	size_t vlen;
	uint64_t cas;
	bool noreply;
	bool meta;           /* an ms: answer with meta codes                  */
	bool mquiet;         /* ms q: no HD                                    */
	bool mret_cas;       /* ms c: return the cas                           */
	bool mbinkey;        /* ms b: a binary key (mg k and me show base64)   */
	char mret[320];      /* ms's k, O and b return flags, " "-prefixed     */
	size_t mret_len;
};

struct worker;

struct conn {
	int fd;
	struct worker *w;
	struct wstats *st;
	struct scratch *scratch; /* its worker's */
	struct conn *prev, *next;
	char *rbuf;
	size_t rcap, rstart, rend;
	char *wbuf;
	size_t wcap, wstart, wend;
	struct cm_hold rhold, whold; /* what the buffers hold of the pool, by tenant */
	/* The key being answered: its tenant is charged for the output buffer
	 * (NULL: the anonymous owner).  Valid during the event only. */
	const char *ans_key;
	size_t ans_keylen;
	bool ob_short;    /* an answer found no room: it is taken back (protocol.c) */
	enum cstate state;
	uint64_t swallow;
	const char *swallow_reply; /* sent once the swallow ends (memcached holds it) */
	bool close_after; /* quit, or a fatal error: close once the output is out */
	bool noreply;     /* the command being answered said noreply            */
	uint32_t events;  /* what epoll watches now */
	int64_t last_rx;  /* monotonic second of the last byte read */
	bool rborrowed;   /* rbuf is the worker's scratch, for this event only */
	bool wborrowed;   /* wbuf likewise                                       */
	bool rd_eof;      /* the client shut down its side: answer, then close   */
	bool memwait;     /* a multiget waits for room in the connection pool    */
	int64_t last_tx;  /* monotonic second output last moved (or was empty)   */
	size_t get_at;    /* a multiget paused: offset of its next key; 0, none  */
	bool get_nomem;   /* ... because the pool had no room for that value     */
	int64_t get_exptime; /* and its exptime (gat, gats)                      */
	/* A write waits for a starting lease's share (lease_write_wait()): the
	 * connection is parked, reads nothing, and net.c runs it again. */
	bool lease_wait;
	bool parked;        /* net.c's count of it (struct worker's nparked)    */
	int64_t lease_since; /* when the write began to wait; 0, it does not   */
	/* The tenant of the first key the connection used (store_bind()):
	 * its flush_all flushes that tenant only.  NULL: no key yet. */
	struct lru_tenant *tenant;
	struct pending p;
};

/* ---- connbuf.c: the buffers ---- */

/** Makes room to read (a pending value whole, else RBUF_MIN / 2); false, to
 * close the connection, when a command line cannot be kept.  A value that
 * does not fit is refused (proto_refuse_value()). */
bool conn_rbuf_room(struct conn *c);
/** Lends the worker's scratch write buffer when the connection has none. */
void conn_wbuf_borrow(struct conn *c);
/** At the end of an event: scratch buffers go back; with @keep, what is in
 * flight moves to buffers of the connection's own.  False when the pool
 * has no room for it. */
bool conn_settle(struct conn *c, bool keep);
void conn_buf_free(char **buf, size_t *bcap, struct cm_hold *h);

/** Room for @n more bytes at c->wbuf + c->wend; false when memory runs
 * out, and then c->ob_short is set: until protocol.c takes the answer back,
 * nothing more is written (an answer goes out whole, or not at all). */
bool ob_reserve(struct conn *c, size_t n);
/** The same, but false leaves the connection as it was (a multiget then
 * waits for room: its answer is produced as the socket drains). */
bool ob_try_reserve(struct conn *c, size_t n);
void ob_put(struct conn *c, const void *p, size_t n);
void ob_str(struct conn *c, const char *s);
void ob_printf(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- net.c: server-wide figures for stats ---- */

struct net_stats {
	uint64_t curr_conns, total_conns, rejected_conns;
	struct wstats sum; /* over every worker */
};
void net_stats(struct net_stats *out);

/* ---- protocol.c ---- */

/** Runs every complete request in c's read buffer. */
void proto_input(struct conn *c);

/** How many bytes the read buffer must be able to take next. */
size_t proto_read_need(const struct conn *c);

/** The key of the first request in the read buffer (its length in *len),
 * or as much of it as names its tenant (the prefix and ':'); NULL before
 * that is read.  The read buffer is charged to that key's tenant. */
const char *proto_read_key(const struct conn *c, size_t *len);

/** The data block being read has no room (connection memory is full):
 * answer "SERVER_ERROR out of memory storing object", as memcached does
 * when it cannot allocate the item, and swallow the data. */
void proto_refuse_value(struct conn *c);

#endif /* SLCACHE_CONN_H */
