/* SPDX-License-Identifier: MIT */
/*
 * A watch on a range of etcd keys through the JSON gateway (POST /v3/watch,
 * an answer that streams one JSON object per response), on a thread of its
 * own.  The coordinated etcd store watches its grants and its elections
 * (docs/leases.md, "Scale"): changes arrive within a round trip, and a
 * quiet range costs the cluster nothing.
 *
 * The thread connects to the first endpoint that answers, sends one create
 * request (key, range_end, start_revision, prev_kv false, progress_notify
 * true) and hands every event to the callback, in revision order, each
 * once.  When the stream breaks (a member killed, an endpoint refusing or
 * hanging, a stream silent for three of etcd's default progress intervals,
 * 30 minutes, or a dead peer found by TCP keepalive, about a minute) it
 * reconnects, to the next endpoint, resuming from the last revision it
 * delivered + 1 (a watch from now: from the revision it was created at
 * + 1), pausing half a second after a round of endpoints that all failed,
 * so it never spins.  If that revision was compacted (etcd cancels the
 * watch with compact_revision), or on an answer it cannot resume from (an
 * error that another member would repeat, a malformed event, a cancel
 * without a compaction), it calls the reset callback: the owner must read
 * the range again and restart the watch from that read's revision.  An
 * answer that is not JSON at all (not etcd's gateway, or a member going
 * down) is a broken stream: the next endpoint is tried.
 */
#ifndef SL_LEASE_ETCD_WATCH_H
#define SL_LEASE_ETCD_WATCH_H

#include <stddef.h>
#include <stdint.h>

struct sl__etcd_event {
	int deleted;              /* 0: a put, 1: a delete                       */
	const char *key;          /* NUL-terminated (decoded from base64)        */
	size_t key_len;
	const char *value;        /* NUL-terminated; "" for a delete             */
	size_t value_len;
	int64_t mod_revision;
	int64_t create_revision;  /* 0 for a delete                              */
	int64_t lease;            /* the key's etcd lease, 0: none               */
};

struct sl__etcd_watch_cbs {
	/* @n events of one response, valid only during the call, all at
	 * revision <= @revision (the response header's).  All events of one
	 * revision (a txn) come in one call.  @n 0 (@ev NULL): a progress
	 * notify, every event up to @revision has been delivered.  Called on
	 * the watch thread, never concurrently with itself or with reset. */
	void (*events)(void *ctx, const struct sl__etcd_event *ev, size_t n, int64_t revision);
	/* The watch cannot resume: it has stopped delivering and waits for
	 * sl__etcd_watch_stop().  @err: -ESTALE (compacted), -EIO (a bad
	 * answer).  May be NULL. */
	void (*reset)(void *ctx, int err);
	void *ctx;
};

struct sl__etcd_watch;

/*
 * Start watching [@key, @range_end) (@range_end NULL: @key alone) from
 * @start_revision (0: from now) on the cluster "HOST:PORT[,HOST:PORT...]"
 * (@hosts, @hosts_len bytes, parsed as sl__etcd_conn_init() does).
 * @timeout_ms bounds each connection attempt, until etcd answers that the
 * watch is created.  -EINVAL (no @key or an empty one, @start_revision < 0,
 * @timeout_ms 0, no events callback, a malformed @hosts), -ENOMEM, -EAGAIN
 * (no thread).  Returns before the stream is set up: events from
 * @start_revision on are delivered once it is, whenever that is (a watch
 * from now starts when etcd creates it: the owner that must miss nothing
 * gives a revision).
 */
int sl__etcd_watch_start(struct sl__etcd_watch **out, const char *hosts, size_t hosts_len,
			 uint32_t timeout_ms, const char *key, const char *range_end,
			 int64_t start_revision, const struct sl__etcd_watch_cbs *cbs);

/* The last revision delivered, by an event or a progress notify (0: none
 * yet), set before the events callback of that revision is called.  Any
 * thread. */
int64_t sl__etcd_watch_revision(const struct sl__etcd_watch *w);

/*
 * Stop: no callback runs after this returns; the thread is joined within
 * about a second (libcurl's progress callback checks the flag).  Never
 * called from a callback.  NULL is ignored.
 */
void sl__etcd_watch_stop(struct sl__etcd_watch *w);

#endif /* SL_LEASE_ETCD_WATCH_H */
