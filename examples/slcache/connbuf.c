/* SPDX-License-Identifier: MIT */
/*
 * connbuf.c: a connection's read and write buffers, and the answers written
 * into them (ob_*), all taken from the connection pool (connmem.c).  net.c
 * moves the bytes between them and the socket.
 */
#define _GNU_SOURCE

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "connmem.h"
#include "slcache.h"

#define PAGE 4096
#define KEEP_ALIGN 64 /* a kept partial request or answer: its size, to this */

/* ---- buffers, taken from the connection pool (connmem.c) ----
 *
 * An idle connection holds no buffer.  While it is served, it reads into
 * and answers from its worker's scratch buffers (borrowed); only what is
 * left when the event is done (a partial request, a value being received,
 * output the socket did not take) moves to buffers of its own, taken from
 * the pool.  So memory follows what clients have in flight, not how many
 * are connected.  When the pool is spent nothing is forced past it: a
 * value is refused, a multiget waits, and a connection whose partial
 * request or answer cannot be kept is closed.
 */

/* Grows *buf to @cap bytes, taking the difference from the pool for @o
 * (recorded in @h; @past_max, connmem_hold()'s).  False, nothing changed,
 * when the pool or the allocation fails. */
static bool buf_resize(char **buf, size_t *bcap, size_t cap, struct cm_hold *h,
		       struct cm_owner *o, bool past_max)
{
	size_t more = cap - *bcap;
	char *nb;

	if (!connmem_hold(h, o, more, past_max))
		return false;
	nb = realloc(*buf, cap);
	if (!nb) {
		connmem_unhold(h, o, more);
		return false;
	}
	*buf = nb;
	*bcap = cap;
	return true;
}

void conn_buf_free(char **buf, size_t *bcap, struct cm_hold *h)
{
	free(*buf);
	connmem_release(h);
	*buf = NULL;
	*bcap = 0;
}

/* Whom the output being written serves: the tenant of the key being
 * answered (protocol.c sets it), else the anonymous owner. */
static struct cm_owner *ans_owner(const struct conn *c)
{
	return connmem_owner(c->ans_key, c->ans_keylen);
}

/* Whom the input held serves: the tenant of its first request's key, once
 * read (protocol.c reads it), else the anonymous owner. */
static struct cm_owner *read_owner(const struct conn *c)
{
	size_t len = 0;
	const char *key = proto_read_key(c, &len);

	return connmem_owner(key, len);
}

/* ---- the output buffer ---- */

/* Output comes from the pool like the rest (it never reclaims: answers are
 * formatted under a tenant's lock).  What bounds it per connection is
 * WBUF_HIGH: past it no further request runs and a multiget stops before
 * its next key, so a connection holds at most that and one value.  The
 * pool bounds the sum: a multiget that finds it spent waits, as it would
 * for its socket. */
bool ob_try_reserve(struct conn *c, size_t n)
{
	size_t cap;

	if (c->wcap - c->wend >= n)
		return true;
	if (c->wstart > 0) {
		memmove(c->wbuf, c->wbuf + c->wstart, c->wend - c->wstart);
		c->wend -= c->wstart;
		c->wstart = 0;
		if (c->wcap - c->wend >= n)
			return true;
	}
	/* Doubling for small answers; a large one (a value) takes its size,
	 * as doubling would hold up to twice it. */
	cap = c->wcap ? c->wcap * 2 : WBUF_MIN;
	if (cap - c->wend < n)
		cap = (c->wend + n + PAGE - 1) / PAGE * PAGE;
	if (c->wborrowed) {
		char *own = NULL;
		size_t ocap = 0;

		if (!buf_resize(&own, &ocap, cap, &c->whold, ans_owner(c), false))
			return false;
		memcpy(own, c->wbuf, c->wend);
		c->wbuf = own;
		c->wcap = ocap;
		c->wborrowed = false;
		return true;
	}
	return buf_resize(&c->wbuf, &c->wcap, cap, &c->whold, ans_owner(c), false);
}

bool ob_reserve(struct conn *c, size_t n)
{
	if (!c->ob_short && ob_try_reserve(c, n))
		return true;
	if (!c->ob_short)
		logv("connection %d: no memory for the answer", c->fd);
	c->ob_short = true;
	return false;
}

void ob_put(struct conn *c, const void *p, size_t n)
{
	if (ob_reserve(c, n)) {
		memcpy(c->wbuf + c->wend, p, n);
		c->wend += n;
	}
}

void ob_str(struct conn *c, const char *s)
{
	ob_put(c, s, strlen(s));
}

void ob_printf(struct conn *c, const char *fmt, ...)
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

/* Makes room to read: the whole data block of a pending storage command
 * must fit; a command line (or bytes swallowed) needs half of RBUF_MIN
 * beside what it has.  A partial request small enough goes back into the
 * worker's scratch buffer (so a client that trickles a line holds only its
 * bytes between events).  A data block that does not fit in the pool is
 * refused (and then swallowed); a command line that does not closes the
 * connection.  Only a line longer than RBUF_MIN / 2 can meet that: a short
 * one that straddles two reads reads on in the scratch buffer, and takes
 * no more pool memory than its own kept bytes, which a pool spent by
 * others still has room for.  (With RBUF_MIN free bytes asked for, any
 * partial line needed a buffer of its own, and under a spent pool a
 * client that pipelines sets was closed.) */
bool conn_rbuf_room(struct conn *c)
{
	size_t need = proto_read_need(c), used = c->rend - c->rstart, cap;

	if (c->state != CS_DATA && need > RBUF_MIN / 2)
		need = RBUF_MIN / 2;
	if (!c->rborrowed && used + need <= RBUF_MIN && used <= RBUF_MIN / 2) {
		if (used)
			memcpy(c->scratch->r, c->rbuf + c->rstart, used);
		conn_buf_free(&c->rbuf, &c->rcap, &c->rhold);
		c->rbuf = c->scratch->r;
		c->rcap = RBUF_MIN;
		c->rstart = 0;
		c->rend = used;
		c->rborrowed = true;
		return true;
	}
	if (c->rcap - c->rend >= need)
		return true;
	if (c->rstart > 0) {
		memmove(c->rbuf, c->rbuf + c->rstart, used);
		c->rend = used;
		c->rstart = 0;
		if (c->rcap - c->rend >= need)
			return true;
	}
	if (c->state == CS_DATA && c->rend + need > RBUF_MIN) {
		/* Exactly the value (to the page): doubling would charge up to twice it. */
		cap = (c->rend + need + PAGE - 1) / PAGE * PAGE;
	} else {
		for (cap = c->rcap > RBUF_MIN ? c->rcap : RBUF_MIN; cap - c->rend < need; cap *= 2)
			;
	}
	if (c->rborrowed) {
		char *own = NULL;
		size_t ocap = 0;

		if (buf_resize(&own, &ocap, cap, &c->rhold, read_owner(c), false)) {
			memcpy(own, c->rbuf, c->rend);
			c->rbuf = own;
			c->rcap = ocap;
			c->rborrowed = false;
			return true;
		}
	} else if (buf_resize(&c->rbuf, &c->rcap, cap, &c->rhold, read_owner(c), false)) {
		return true;
	}
	if (c->state != CS_DATA) {
		logv("connection %d: no memory to read a command: closing", c->fd);
		return false;
	}
	proto_refuse_value(c); /* swallows what is buffered: room again */
	return conn_rbuf_room(c);    /* now for the swallowing: at most RBUF_MIN */
}

/* Gives a borrowed scratch buffer back; with @keep, what is left in it
 * moves to a buffer of the connection's own, of its size to @align, taken
 * from the pool for @o, past its max if need be: at most a scratch buffer,
 * already read or answered, of a connection that may well read (one that
 * does not is closed when others wait).  False when that fails (the
 * connection is then closed). */
static bool unborrow(char **buf, size_t *cap, size_t *start, size_t *end, bool *borrowed,
		     size_t align, bool keep, struct cm_hold *h, struct cm_owner *o)
{
	const char *scratch = *buf;
	size_t left = *end - *start;
	bool ok = true;

	*buf = NULL;
	*cap = 0;
	*borrowed = false;
	if (keep && left && buf_resize(buf, cap, (left + align - 1) / align * align, h, o, true)) {
		memcpy(*buf, scratch + *start, left);
	} else {
		ok = !keep || !left;
	}
	*start = 0;
	*end = left;
	return ok;
}

/* At the end of an event: scratch buffers go back to the worker, and an
 * emptied read buffer of the connection's own is freed.  False when the
 * pool has no room to keep what is in flight.  Output first: the key it
 * is charged to (c->ans_key) may be in the read buffer. */
bool conn_settle(struct conn *c, bool keep)
{
	bool ok = true;

	if (c->wborrowed && !unborrow(&c->wbuf, &c->wcap, &c->wstart, &c->wend, &c->wborrowed,
				      KEEP_ALIGN, keep, &c->whold,
				      keep && c->wend > c->wstart ? ans_owner(c) : NULL))
		ok = false;
	if (c->rborrowed) {
		if (!unborrow(&c->rbuf, &c->rcap, &c->rstart, &c->rend, &c->rborrowed, KEEP_ALIGN,
			      keep, &c->rhold, keep && c->rend > c->rstart ? read_owner(c) : NULL))
			ok = false;
	} else if (keep && c->rstart == c->rend && c->rcap) {
		conn_buf_free(&c->rbuf, &c->rcap, &c->rhold);
		c->rstart = c->rend = 0;
	}
	c->ans_key = NULL; /* it points into the read buffer of this event */
	return ok;
}

void conn_wbuf_borrow(struct conn *c)
{
	if (c->wcap == 0) {
		c->wbuf = c->scratch->w;
		c->wcap = WBUF_MIN;
		c->wborrowed = true;
	}
}
