/* SPDX-License-Identifier: MIT */
/*
 * The etcd watch (lib/lease/etcd_watch.h) against a real etcd that
 * tests/etcd_cluster.py started (SL_ETCD_ENDPOINTS): a 1-member cluster for
 * the cases of one stream, and, with the argument "failover", a 3-member
 * cluster whose member under the watch is killed (SL_ETCD_PIDS).  A stream
 * is broken on demand by a proxy of the test's own between the watch and
 * the member.  Every wait is for an event, with a generous deadline.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd_helpers.h"
#include "etcd_http.h"
#include "etcd_watch.h"
#include "helpers.h"

/* One call to the real etcd (a loaded machine once took a write past 5 s). */
#define CALL_TIMEOUT_MS 30000
/* The bound of one connection attempt of a watch: as long as a call's, so
 * that on a loaded machine the watch stays on the member it tried first. */
#define WATCH_TIMEOUT_MS CALL_TIMEOUT_MS
/* The same, where no member answers (a case waits for two rounds). */
#define DEAD_TIMEOUT_MS 1000
/* Every wait for an event gives up after this long: a hang catcher only. */
#define DEADLINE_S 120.0

/* One wait on @cond of at most a second; false once @end has passed.  The
 * callers loop on their own condition: a hang catcher, not a time window. */
static bool wait_a_while(pthread_cond_t *cond, pthread_mutex_t *lock, double end)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	pthread_cond_timedwait(cond, lock, &ts);
	return now_seconds() < end;
}

/* ---- what a watch delivered ---- */

struct got_ev {
	int deleted;
	char *key, *value;
	int64_t mod, create, lease;
};

struct rec {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct got_ev *ev;
	size_t n, cap;
	size_t progress;  /* calls with no event (progress notifies) */
	int64_t progress_rev; /* the last one's revision */
	bool reset;
	int reset_err;
	bool bad;         /* a call broke the callbacks' contract */
	double first_at;  /* when event number mark_at arrived */
	size_t mark_at;
};

static void rec_init(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->mark_at = SIZE_MAX;
}

static void rec_fini(struct rec *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->ev[i].key);
		free(r->ev[i].value);
	}
	free(r->ev);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
}

static void on_events(void *ctx, const struct sl__etcd_event *ev, size_t n, int64_t revision)
{
	struct rec *r = ctx;

	pthread_mutex_lock(&r->lock);
	if (r->reset)
		r->bad = true;
	if (n == 0) {
		/* Never behind an event delivered before it. */
		if (ev || (r->n > 0 && revision < r->ev[r->n - 1].mod) || revision < r->progress_rev)
			r->bad = true;
		r->progress++;
		r->progress_rev = revision;
	}
	for (size_t i = 0; i < n; i++) {
		struct got_ev *g;

		if (ev[i].mod_revision > revision || ev[i].key[ev[i].key_len] != '\0' ||
		    ev[i].value[ev[i].value_len] != '\0' || strlen(ev[i].key) != ev[i].key_len)
			r->bad = true;
		if (r->n == r->cap) {
			r->cap = r->cap ? 2 * r->cap : 256;
			r->ev = realloc(r->ev, r->cap * sizeof(*r->ev));
			if (!r->ev)
				abort();
		}
		g = &r->ev[r->n++];
		g->deleted = ev[i].deleted;
		g->key = strdup(ev[i].key);
		g->value = strdup(ev[i].value);
		g->mod = ev[i].mod_revision;
		g->create = ev[i].create_revision;
		g->lease = ev[i].lease;
		if (r->n == r->mark_at)
			r->first_at = now_seconds();
	}
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void on_reset(void *ctx, int err)
{
	struct rec *r = ctx;

	pthread_mutex_lock(&r->lock);
	if (r->reset)
		r->bad = true;
	r->reset = true;
	r->reset_err = err;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Note when event number @n (from 1) arrives, in r->first_at. */
static void rec_mark(struct rec *r, size_t n)
{
	pthread_mutex_lock(&r->lock);
	r->mark_at = n;
	pthread_mutex_unlock(&r->lock);
}

/* Until @n events (or a reset, if @or_reset) arrived; false at the deadline. */
static bool rec_wait(struct rec *r, size_t n, bool or_reset)
{
	double end = now_seconds() + DEADLINE_S;
	bool ok;

	pthread_mutex_lock(&r->lock);
	while (r->n < n && !(or_reset && r->reset) && wait_a_while(&r->cond, &r->lock, end))
		;
	ok = r->n >= n || (or_reset && r->reset);
	pthread_mutex_unlock(&r->lock);
	return ok;
}

static struct sl__etcd_watch *watch_within(uint32_t timeout_ms, const char *hosts,
					    const char *key, const char *end, int64_t from,
					    struct rec *r)
{
	struct sl__etcd_watch_cbs cbs = { .events = on_events, .reset = on_reset, .ctx = r };
	struct sl__etcd_watch *w = NULL;

	ck_assert_int_eq(sl__etcd_watch_start(&w, hosts, strlen(hosts), timeout_ms, key, end, from,
					      &cbs), 0);
	return w;
}

static struct sl__etcd_watch *watch_on(const char *hosts, const char *key, const char *end,
				       int64_t from, struct rec *r)
{
	return watch_within(WATCH_TIMEOUT_MS, hosts, key, end, from, r);
}

/*
 * Stop @w on a thread of its own and wait for it with a hang catcher;
 * the time it took, for the report (never asserted: a loaded machine).
 */
struct stopper {
	struct sl__etcd_watch *w;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void *stop_main(void *arg)
{
	struct stopper *s = arg;

	sl__etcd_watch_stop(s->w);
	pthread_mutex_lock(&s->lock);
	s->done = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static double stop_watch(struct sl__etcd_watch *w)
{
	struct stopper s = { .w = w, .lock = PTHREAD_MUTEX_INITIALIZER,
			     .cond = PTHREAD_COND_INITIALIZER };
	double t0 = now_seconds(), end = t0 + DEADLINE_S;
	pthread_t th;

	start_thread(&th, stop_main, &s);
	pthread_mutex_lock(&s.lock);
	while (!s.done && wait_a_while(&s.cond, &s.lock, end))
		;
	pthread_mutex_unlock(&s.lock);
	ck_assert_msg(s.done, "sl__etcd_watch_stop() did not return");
	join_thread(th);
	return now_seconds() - t0;
}

/* ---- writes through the unary client ---- */

static void conn_open(struct sl__etcd_conn *c, const char *hosts)
{
	ck_assert_int_eq(sl__etcd_conn_init(c, hosts, strlen(hosts), CALL_TIMEOUT_MS), 0);
}

/* POST @req (consumed); the revision of the answer's header. */
static int64_t call(struct sl__etcd_conn *c, const char *path, json_t *req, json_t **out)
{
	struct sl__etcd_hdr hdr;
	json_t *resp = NULL;
	int rc = sl__etcd_call(c, path, req, &resp, &hdr);

	ck_assert_msg(rc == 0, "%s: %d", path, rc);
	json_decref(req);
	if (out)
		*out = resp;
	else
		json_decref(resp);
	return hdr.revision;
}

static int64_t put(struct sl__etcd_conn *c, const char *key, const char *value, int64_t lease)
{
	json_t *req = json_pack("{s:o, s:o}", "key", sl__etcd_b64s(key), "value",
				sl__etcd_b64s(value));

	if (lease)
		json_object_set_new(req, "lease", sl__etcd_int(lease));
	return call(c, "/v3/kv/put", req, NULL);
}

static int64_t del(struct sl__etcd_conn *c, const char *key)
{
	return call(c, "/v3/kv/deleterange", json_pack("{s:o}", "key", sl__etcd_b64s(key)), NULL);
}

static int64_t revision_now(struct sl__etcd_conn *c)
{
	return call(c, "/v3/kv/range", json_pack("{s:o}", "key", sl__etcd_b64s("-")), NULL);
}

static void compact(struct sl__etcd_conn *c, int64_t rev)
{
	call(c, "/v3/kv/compaction", json_pack("{s:o, s:b}", "revision", sl__etcd_int(rev),
					       "physical", 1), NULL);
}

static int64_t lease_grant(struct sl__etcd_conn *c)
{
	json_t *resp;
	int64_t id;

	call(c, "/v3/lease/grant", json_pack("{s:s}", "TTL", "600"), &resp);
	ck_assert_int_eq(sl__etcd_get_int(json_object_get(resp, "ID"), 0, &id), 0);
	json_decref(resp);
	ck_assert_int_ne(id, 0);
	return id;
}

/* The range of a case: "wt-PID-TAG/" up to "wt-PID-TAG0" ('/' + 1). */
static void range_of(char *key, char *end, size_t size, const char *tag)
{
	snprintf(key, size, "wt-%ld-%s/", (long)getpid(), tag);
	snprintf(end, size, "wt-%ld-%s0", (long)getpid(), tag);
}

static void assert_ev(const struct got_ev *g, int deleted, const char *key, const char *value,
		      int64_t mod, int64_t create, int64_t lease)
{
	ck_assert_int_eq(g->deleted, deleted);
	ck_assert_str_eq(g->key, key);
	ck_assert_str_eq(g->value, value);
	ck_assert_int_eq(g->mod, mod);
	ck_assert_int_eq(g->create, create);
	ck_assert_int_eq(g->lease, lease);
}

/* Put "@key%02d" = @value for @from <= i < @to, each revision in @revs[i]. */
static void put_keys(struct sl__etcd_conn *c, const char *key, int from, int to,
		     const char *value, int64_t *revs)
{
	char k[96];

	for (int i = from; i < to; i++) {
		snprintf(k, sizeof(k), "%s%02d", key, i);
		revs[i] = put(c, k, value, 0);
	}
}

/* Exactly the puts of revisions @revs, in order, each once. */
static void assert_revisions(struct rec *r, size_t from, const int64_t *revs, size_t n)
{
	pthread_mutex_lock(&r->lock);
	ck_assert_msg(r->n == from + n, "%zu events, expected %zu", r->n, from + n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(r->ev[from + i].mod == revs[i], "event %zu at revision %lld, expected %lld",
			      from + i, (long long)r->ev[from + i].mod, (long long)revs[i]);
	ck_assert(!r->bad);
	pthread_mutex_unlock(&r->lock);
}

/* ---- a proxy that breaks the stream on demand ---- */

struct proxy {
	int lfd, port, upstream;
	int ctl[2];      /* commands in, acknowledgements out */
	pthread_t th;
	int cfd, ufd;    /* the pair relayed now, -1 */
	bool down;       /* connections accepted and closed at once */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t created;  /* answers "created" relayed from the member */
};

static int connect_port(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void proxy_cut(struct proxy *p)
{
	if (p->cfd >= 0)
		close(p->cfd);
	if (p->ufd >= 0)
		close(p->ufd);
	p->cfd = p->ufd = -1;
}

/* Relay what @from has to @to; false when the pair ended.  *@created when
 * it was (or held) the answer that the watch was created. */
static bool relay(int from, int to, bool *created)
{
	char buf[65536];
	ssize_t n = read(from, buf, sizeof(buf));

	if (n <= 0)
		return false;
	*created = memmem(buf, (size_t)n, "\"created\":true", 14) != NULL;
	for (ssize_t off = 0; off < n;) {
		ssize_t m = write(to, buf + off, (size_t)(n - off));

		if (m <= 0)
			return false;
		off += m;
	}
	return true;
}

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;

	for (;;) {
		struct pollfd fds[4] = { { p->ctl[1], POLLIN, 0 }, { p->lfd, POLLIN, 0 },
					 { p->cfd, POLLIN, 0 }, { p->ufd, POLLIN, 0 } };
		char cmd;
		bool created = false;

		if (poll(fds, p->cfd >= 0 ? 4 : 2, -1) < 0)
			continue;
		if (fds[0].revents) {
			if (read(p->ctl[1], &cmd, 1) != 1)
				cmd = 'q';
			if (cmd == 'd' || cmd == 'q')
				proxy_cut(p);
			p->down = cmd == 'd';
			if (write(p->ctl[1], &cmd, 1) != 1 || cmd == 'q')
				return NULL;
			continue;
		}
		if (fds[1].revents) {
			int a = accept(p->lfd, NULL, NULL);

			if (a >= 0 && !p->down) {
				proxy_cut(p);
				p->ufd = connect_port(p->upstream);
				p->cfd = p->ufd >= 0 ? a : -1;
			}
			if (a >= 0 && p->cfd != a)
				close(a);
			continue;
		}
		if (fds[2].revents && !relay(p->cfd, p->ufd, &created))
			proxy_cut(p);
		else if (fds[3].revents && !relay(p->ufd, p->cfd, &created))
			proxy_cut(p);
		else if (created) {
			pthread_mutex_lock(&p->lock);
			p->created++;
			pthread_cond_broadcast(&p->cond);
			pthread_mutex_unlock(&p->lock);
		}
	}
}

/* A proxy to the first endpoint. */
static void proxy_start(struct proxy *p)
{
	const char *e = endpoints(), *colon = strchr(e, ':');

	memset(p, 0, sizeof(*p));
	p->cfd = p->ufd = -1;
	p->upstream = atoi(colon + 1);
	p->lfd = hung_listener(&p->port);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, p->ctl), 0);
	start_thread(&p->th, proxy_main, p);
}

/* 'd': cut the stream and refuse; 'u': relay again; 'q': quit.  Returns
 * once the proxy did it. */
static void proxy_do(struct proxy *p, char cmd)
{
	char ack;

	ck_assert_int_eq(write(p->ctl[0], &cmd, 1), 1);
	ck_assert_int_eq(read(p->ctl[0], &ack, 1), 1);
}

static void proxy_stop(struct proxy *p)
{
	proxy_do(p, 'q');
	join_thread(p->th);
	close(p->ctl[0]);
	close(p->ctl[1]);
	close(p->lfd);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

/* Until the member answered a watch "created" through the proxy. */
static void proxy_wait_created(struct proxy *p)
{
	double end = now_seconds() + DEADLINE_S;

	pthread_mutex_lock(&p->lock);
	while (p->created == 0 && wait_a_while(&p->cond, &p->lock, end))
		;
	ck_assert_msg(p->created > 0, "no watch created through the proxy");
	pthread_mutex_unlock(&p->lock);
}

/* ---- the cases of one member ---- */

START_TEST(events_of_the_range_arrive_in_order_and_no_others)
{
	struct sl__etcd_conn c;
	struct rec r, one;
	struct sl__etcd_watch *w, *w1;
	char key[64], end[64], k[96], out_after[64], out_before[64];
	int64_t lease, rev0, r1, r2, r3, r4, r5;

	conn_open(&c, endpoints());
	range_of(key, end, sizeof(key), "order");
	rec_init(&r);
	rec_init(&one);
	lease = lease_grant(&c);
	rev0 = revision_now(&c);
	w = watch_on(endpoints(), key, end, rev0 + 1, &r);
	snprintf(k, sizeof(k), "%sa", key);
	w1 = watch_on(endpoints(), k, NULL, rev0 + 1, &one);
	/* Just past the end and just before the start of the range. */
	snprintf(out_after, sizeof(out_after), "%s", end);
	snprintf(out_before, sizeof(out_before), "%.*s", (int)strlen(key) - 1, key);

	r1 = put(&c, k, "one", lease);
	put(&c, out_after, "x", 0);
	put(&c, out_before, "x", 0);
	snprintf(k, sizeof(k), "%sab", key); /* not the single key */
	r2 = put(&c, k, "two", 0);
	snprintf(k, sizeof(k), "%sa", key);
	r3 = del(&c, k);
	r4 = put(&c, k, "three", 0);
	snprintf(k, sizeof(k), "%szz", key);
	r5 = put(&c, k, "", 0);

	ck_assert(rec_wait(&r, 5, true));
	ck_assert(rec_wait(&one, 3, true));
	ck_assert(!r.reset && !one.reset && !r.bad && !one.bad);
	/* The keys outside came before the last one: they would be among these. */
	ck_assert_uint_eq(r.n, 5);
	snprintf(k, sizeof(k), "%sa", key);
	assert_ev(&r.ev[0], 0, k, "one", r1, r1, lease);
	snprintf(k, sizeof(k), "%sab", key);
	assert_ev(&r.ev[1], 0, k, "two", r2, r2, 0);
	snprintf(k, sizeof(k), "%sa", key);
	assert_ev(&r.ev[2], 1, k, "", r3, 0, 0);
	assert_ev(&r.ev[3], 0, k, "three", r4, r4, 0);
	snprintf(k, sizeof(k), "%szz", key);
	assert_ev(&r.ev[4], 0, k, "", r5, r5, 0);
	ck_assert_int_eq(sl__etcd_watch_revision(w), r5);

	ck_assert_uint_eq(one.n, 3);
	ck_assert_int_eq(one.ev[0].mod, r1);
	ck_assert_int_eq(one.ev[1].mod, r3);
	ck_assert_int_eq(one.ev[2].mod, r4);
	ck_assert_int_eq(sl__etcd_watch_revision(w1), r4);
	stop_watch(w);
	stop_watch(w1);
	rec_fini(&r);
	rec_fini(&one);
	sl__etcd_conn_fini(&c);
}
END_TEST

START_TEST(a_start_revision_replays_the_history)
{
	struct sl__etcd_conn c;
	struct rec all, part;
	struct sl__etcd_watch *w, *wp;
	char key[64], end[64], k[96];
	int64_t revs[6];

	conn_open(&c, endpoints());
	range_of(key, end, sizeof(key), "replay");
	put_keys(&c, key, 0, 5, "v", revs);
	snprintf(k, sizeof(k), "%s%02d", key, 2);
	revs[5] = del(&c, k);

	rec_init(&all);
	rec_init(&part);
	w = watch_on(endpoints(), key, end, revs[0], &all);
	wp = watch_on(endpoints(), key, end, revs[3], &part);
	ck_assert(rec_wait(&all, 6, true));
	ck_assert(rec_wait(&part, 3, true));
	assert_revisions(&all, 0, revs, 6);
	assert_revisions(&part, 0, revs + 3, 3);
	ck_assert_int_eq(all.ev[5].deleted, 1);
	ck_assert_str_eq(all.ev[5].key, k);
	stop_watch(w);
	stop_watch(wp);
	rec_fini(&all);
	rec_fini(&part);
	sl__etcd_conn_fini(&c);
}
END_TEST

#define TXN_PUTS 100
#define BURST_PUTS 1000

/* The txn's puts at one revision, each key once. */
static void assert_txn(struct rec *r, const char *key, int64_t rev)
{
	bool seen[TXN_PUTS] = { false };

	for (size_t i = 0; i < TXN_PUTS; i++) {
		int idx;

		ck_assert_int_eq(r->ev[i].mod, rev);
		ck_assert(strncmp(r->ev[i].key, key, strlen(key)) == 0);
		idx = atoi(r->ev[i].key + strlen(key) + 1);
		ck_assert(idx >= 0 && idx < TXN_PUTS && !seen[idx]);
		seen[idx] = true;
	}
}

START_TEST(bursts_are_delivered_exactly_once)
{
	struct sl__etcd_conn c;
	struct rec live, replay;
	struct sl__etcd_watch *w, *wr;
	char key[64], end[64], k[96];
	json_t *ops = json_array();
	int64_t rev0, txn_rev, *revs = calloc(BURST_PUTS, sizeof(*revs));

	conn_open(&c, endpoints());
	range_of(key, end, sizeof(key), "burst");
	rec_init(&live);
	rec_init(&replay);
	rev0 = revision_now(&c);
	w = watch_on(endpoints(), key, end, rev0 + 1, &live);
	for (int i = 0; i < TXN_PUTS; i++) {
		snprintf(k, sizeof(k), "%st%03d", key, i);
		json_array_append_new(ops, json_pack("{s:{s:o, s:o}}", "request_put", "key",
						     sl__etcd_b64s(k), "value", sl__etcd_b64s(k)));
	}
	txn_rev = call(&c, "/v3/kv/txn", json_pack("{s:o}", "success", ops), NULL);
	for (int i = 0; i < BURST_PUTS; i++) {
		snprintf(k, sizeof(k), "%sp%04d", key, i);
		revs[i] = put(&c, k, "v", 0);
	}
	/* Live, and replayed from history (answers of many revisions each). */
	wr = watch_on(endpoints(), key, end, rev0 + 1, &replay);
	ck_assert(rec_wait(&live, TXN_PUTS + BURST_PUTS, true));
	ck_assert(rec_wait(&replay, TXN_PUTS + BURST_PUTS, true));
	/* One more: anything repeated would come before it. */
	snprintf(k, sizeof(k), "%slast", key);
	{
		int64_t last = put(&c, k, "v", 0);
		int64_t *all = calloc(BURST_PUTS + 1, sizeof(*all));

		memcpy(all, revs, BURST_PUTS * sizeof(*all));
		all[BURST_PUTS] = last;
		ck_assert(rec_wait(&live, TXN_PUTS + BURST_PUTS + 1, true));
		ck_assert(rec_wait(&replay, TXN_PUTS + BURST_PUTS + 1, true));
		assert_revisions(&live, TXN_PUTS, all, BURST_PUTS + 1);
		assert_revisions(&replay, TXN_PUTS, all, BURST_PUTS + 1);
		free(all);
	}
	snprintf(k, sizeof(k), "%st", key);
	assert_txn(&live, k, txn_rev);
	assert_txn(&replay, k, txn_rev);
	stop_watch(w);
	stop_watch(wr);
	rec_fini(&live);
	rec_fini(&replay);
	free(revs);
	sl__etcd_conn_fini(&c);
}
END_TEST

START_TEST(a_compacted_start_is_a_reset_estale)
{
	struct sl__etcd_conn c;
	struct rec r;
	struct sl__etcd_watch *w;
	char key[64], end[64], k[96];
	int64_t first, last = 0;

	conn_open(&c, endpoints());
	range_of(key, end, sizeof(key), "compacted");
	snprintf(k, sizeof(k), "%sa", key);
	first = put(&c, k, "1", 0);
	for (int i = 0; i < 3; i++)
		last = put(&c, k, "2", 0);
	compact(&c, last);
	rec_init(&r);
	w = watch_on(endpoints(), key, end, first, &r);
	ck_assert(rec_wait(&r, SIZE_MAX, true));
	ck_assert_int_eq(r.reset_err, -ESTALE);
	ck_assert_uint_eq(r.n, 0);
	ck_assert_int_eq(sl__etcd_watch_revision(w), 0);
	stop_watch(w);
	ck_assert(!r.bad);
	rec_fini(&r);
	sl__etcd_conn_fini(&c);
}
END_TEST

START_TEST(a_broken_stream_resumes_after_the_last_revision_delivered)
{
	struct sl__etcd_conn c;
	struct proxy p;
	struct rec r;
	struct sl__etcd_watch *w;
	char key[64], end[64], k[96], hosts[64];
	int64_t revs[21], rev0;
	double up;

	conn_open(&c, endpoints());
	range_of(key, end, sizeof(key), "resume");
	proxy_start(&p);
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", p.port);
	rec_init(&r);
	rev0 = revision_now(&c);
	w = watch_on(hosts, key, end, rev0 + 1, &r);
	put_keys(&c, key, 0, 10, "before", revs);
	ck_assert(rec_wait(&r, 10, true));
	/* Broken, and written to while it is. */
	proxy_do(&p, 'd');
	put_keys(&c, key, 10, 20, "during", revs);
	rec_mark(&r, 11);
	up = now_seconds();
	proxy_do(&p, 'u');
	ck_assert(rec_wait(&r, 20, true));
	printf("resume: first event %.3f s after the member came back\n", r.first_at - up);
	snprintf(k, sizeof(k), "%slast", key);
	revs[20] = put(&c, k, "after", 0);
	ck_assert(rec_wait(&r, 21, true));
	ck_assert(!r.reset);
	assert_revisions(&r, 0, revs, 21);
	ck_assert_str_eq(r.ev[10].value, "during");
	ck_assert_int_eq(sl__etcd_watch_revision(w), revs[20]);
	stop_watch(w);
	proxy_stop(&p);
	rec_fini(&r);
	sl__etcd_conn_fini(&c);
}
END_TEST

/* A watch from now resumes from the revision it was created at: a break
 * before its first event loses none of those written during the break. */
START_TEST(a_watch_from_now_broken_before_its_first_event_loses_none)
{
	struct sl__etcd_conn c;
	struct proxy p;
	struct rec r;
	struct sl__etcd_watch *w;
	char key[64], end[64], hosts[64];
	int64_t revs[5];

	conn_open(&c, endpoints());
	range_of(key, end, sizeof(key), "from-now");
	proxy_start(&p);
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", p.port);
	rec_init(&r);
	w = watch_on(hosts, key, end, 0, &r);
	proxy_wait_created(&p);
	proxy_do(&p, 'd');
	put_keys(&c, key, 0, 5, "during", revs);
	proxy_do(&p, 'u');
	ck_assert(rec_wait(&r, 5, true));
	ck_assert(!r.reset);
	assert_revisions(&r, 0, revs, 5);
	stop_watch(w);
	proxy_stop(&p);
	rec_fini(&r);
	sl__etcd_conn_fini(&c);
}
END_TEST

START_TEST(a_compacted_resume_point_is_a_reset_estale)
{
	struct sl__etcd_conn c;
	struct proxy p;
	struct rec r;
	struct sl__etcd_watch *w;
	char key[64], end[64], k[96], hosts[64];
	int64_t rev0, last = 0;

	conn_open(&c, endpoints());
	range_of(key, end, sizeof(key), "compact-resume");
	proxy_start(&p);
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", p.port);
	rec_init(&r);
	rev0 = revision_now(&c);
	w = watch_on(hosts, key, end, rev0 + 1, &r);
	snprintf(k, sizeof(k), "%sa", key);
	put(&c, k, "1", 0);
	ck_assert(rec_wait(&r, 1, true));
	proxy_do(&p, 'd');
	for (int i = 0; i < 3; i++)
		last = put(&c, k, "2", 0);
	compact(&c, last);
	proxy_do(&p, 'u');
	ck_assert(rec_wait(&r, SIZE_MAX, true));
	ck_assert_int_eq(r.reset_err, -ESTALE);
	ck_assert_uint_eq(r.n, 1);
	stop_watch(w);
	ck_assert(!r.bad);
	proxy_stop(&p);
	rec_fini(&r);
	sl__etcd_conn_fini(&c);
}
END_TEST

START_TEST(stop_returns_with_an_idle_stream)
{
	struct sl__etcd_conn c;
	struct rec r;
	struct sl__etcd_watch *w;
	char key[64], end[64], k[96];
	int64_t rev0;

	conn_open(&c, endpoints());
	range_of(key, end, sizeof(key), "idle");
	rec_init(&r);
	rev0 = revision_now(&c);
	w = watch_on(endpoints(), key, end, rev0 + 1, &r);
	snprintf(k, sizeof(k), "%sa", key);
	put(&c, k, "1", 0);
	ck_assert(rec_wait(&r, 1, true)); /* streaming, and now idle */
	printf("stop of an idle stream: %.3f s\n", stop_watch(w));
	/* Right after the start too, and the bad arguments. */
	w = watch_on(endpoints(), key, end, 0, &r);
	printf("stop right after the start: %.3f s\n", stop_watch(w));
	{
		struct sl__etcd_watch_cbs cbs = { .events = on_events, .ctx = &r }, none = { 0 };
		const char *h = endpoints();

		ck_assert_int_eq(sl__etcd_watch_start(&w, h, strlen(h), 1000, "", NULL, 0, &cbs),
				 -EINVAL);
		ck_assert_int_eq(sl__etcd_watch_start(&w, h, strlen(h), 1000, "k", NULL, -1, &cbs),
				 -EINVAL);
		ck_assert_int_eq(sl__etcd_watch_start(&w, h, strlen(h), 1000, "k", NULL, 0, &none),
				 -EINVAL);
		ck_assert_int_eq(sl__etcd_watch_start(&w, "h", 1, 1000, "k", NULL, 0, &cbs), -EINVAL);
		ck_assert_ptr_null(w);
		sl__etcd_watch_stop(NULL);
	}
	rec_fini(&r);
	sl__etcd_conn_fini(&c);
}
END_TEST

/* Until the hung listener accepts a connection (kept open: hung). */
static int accept_one(int lfd)
{
	struct pollfd pfd = { lfd, POLLIN, 0 };

	ck_assert_int_eq(poll(&pfd, 1, (int)(DEADLINE_S * 1000)), 1);
	return accept(lfd, NULL, NULL);
}

START_TEST(stop_returns_while_reconnecting_to_a_dead_cluster)
{
	struct rec r;
	struct sl__etcd_watch *w;
	char hosts[64];
	int port, lfd = hung_listener(&port), a[3];

	/* Nothing listens on port 1; the other one accepts and never answers. */
	snprintf(hosts, sizeof(hosts), "127.0.0.1:1,127.0.0.1:%d", port);
	rec_init(&r);
	w = watch_within(DEAD_TIMEOUT_MS, hosts, "k", NULL, 0, &r);
	/* Round after round, each through the refusal and the hung member. */
	a[0] = accept_one(lfd);
	a[1] = accept_one(lfd);
	printf("stop while waiting on a hung member: %.3f s\n", stop_watch(w));
	w = watch_within(DEAD_TIMEOUT_MS, "127.0.0.1:1", "k", NULL, 0, &r);
	printf("stop while refused: %.3f s\n", stop_watch(w));
	a[2] = -1;
	for (int i = 0; i < 3; i++)
		if (a[i] >= 0)
			close(a[i]);
	ck_assert_uint_eq(r.n, 0);
	ck_assert(!r.reset);
	close(lfd);
	rec_fini(&r);
}
END_TEST

/* Under etcd_cluster.py --etcd-arg
 * --experimental-watch-progress-notify-interval=1s (argument "progress"). */
START_TEST(a_progress_notify_advances_the_revision_delivered)
{
	struct sl__etcd_conn c;
	struct rec r;
	struct sl__etcd_watch *w;
	char key[64], end[64], k[96];
	int64_t rev0, outside;
	double deadline = now_seconds() + DEADLINE_S;

	conn_open(&c, endpoints());
	range_of(key, end, sizeof(key), "progress");
	rec_init(&r);
	rev0 = revision_now(&c);
	w = watch_on(endpoints(), key, end, rev0 + 1, &r);
	snprintf(k, sizeof(k), "%sa", key);
	put(&c, k, "1", 0);
	outside = put(&c, end, "x", 0);
	pthread_mutex_lock(&r.lock);
	while (r.progress_rev < outside && wait_a_while(&r.cond, &r.lock, deadline))
		;
	ck_assert_int_ge(r.progress_rev, outside);
	ck_assert_uint_eq(r.n, 1);
	ck_assert(!r.bad && !r.reset);
	pthread_mutex_unlock(&r.lock);
	ck_assert_int_ge(sl__etcd_watch_revision(w), outside);
	stop_watch(w);
	rec_fini(&r);
	sl__etcd_conn_fini(&c);
}
END_TEST

/* ---- a member of three killed under the watch ---- */

/* Whether a socket of this process is connected to 127.0.0.1:@port (the
 * members' own gateways connect to their ports too: only our sockets). */
static bool connected_to(int port)
{
	unsigned long inodes[256];
	size_t n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	FILE *f;
	char line[512];
	bool found = false;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL && n < 256) {
		char path[300], link[64];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%lu]", &inodes[n]) == 1)
			n++;
	}
	closedir(d);
	f = fopen("/proc/self/net/tcp", "r");
	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned rport, st;
		unsigned long inode;

		if (sscanf(line, " %*d: %*x:%*x %*x:%x %x %*s %*s %*s %*d %*d %lu", &rport, &st,
			   &inode) != 3)
			continue;
		for (size_t i = 0; i < n && !found; i++)
			found = inodes[i] == inode && (int)rport == port && st == 1 /* ESTABLISHED */;
	}
	fclose(f);
	return found;
}

/* The member that leads now: its index in endpoints(), -1 if none does. */
static int leader_index(char eps[][64], int n)
{
	for (int i = 0; i < n; i++) {
		struct sl__etcd_conn one;
		struct sl__etcd_hdr hdr;
		json_t *req = json_object(), *resp = NULL;
		int64_t leader = 0, me = -1;

		conn_open(&one, eps[i]);
		if (sl__etcd_call(&one, "/v3/maintenance/status", req, &resp, &hdr) == 0) {
			sl__etcd_get_int(json_object_get(resp, "leader"), 0, &leader);
			sl__etcd_get_int(json_object_get(json_object_get(resp, "header"), "member_id"),
					 -1, &me);
		}
		json_decref(req);
		json_decref(resp);
		sl__etcd_conn_fini(&one);
		if (leader == me)
			return i;
	}
	return -1;
}

/*
 * The member under the watch is killed, the leader at that (the harder
 * case: the others elect a new one before they take writes again), and
 * written to while the watch finds another member: every event once, in
 * order, none lost.
 */
START_TEST(events_after_a_member_is_killed_arrive_exactly_once)
{
	const char *pids = getenv("SL_ETCD_PIDS");
	char eps[3][64], hosts[200], others[200], key[64], end[64];
	long pid[3];
	struct sl__etcd_conn c;
	struct rec r;
	struct sl__etcd_watch *w;
	int64_t revs[70], rev0;
	int lead;
	double killed, written = 0;

	ck_assert_msg(pids && sscanf(pids, "%ld,%ld,%ld", &pid[0], &pid[1], &pid[2]) == 3,
		      "run under etcd_cluster.py --members 3");
	ck_assert_int_eq(sscanf(endpoints(), "%63[^,],%63[^,],%63s", eps[0], eps[1], eps[2]), 3);
	lead = leader_index(eps, 3);
	ck_assert_int_ge(lead, 0);
	/* The watch tries the leader first; the writes go to the others. */
	snprintf(hosts, sizeof(hosts), "%s,%s,%s", eps[lead], eps[(lead + 1) % 3],
		 eps[(lead + 2) % 3]);
	snprintf(others, sizeof(others), "%s,%s", eps[(lead + 1) % 3], eps[(lead + 2) % 3]);
	conn_open(&c, others);
	range_of(key, end, sizeof(key), "failover");
	rec_init(&r);
	rev0 = revision_now(&c);
	w = watch_on(hosts, key, end, rev0 + 1, &r);
	put_keys(&c, key, 0, 20, "before", revs);
	ck_assert(rec_wait(&r, 20, true));
	ck_assert_msg(connected_to(atoi(strchr(eps[lead], ':') + 1)),
		      "the watch is not on the leader");
	rec_mark(&r, 21);
	killed = now_seconds();
	ck_assert_int_eq(kill((pid_t)pid[lead], SIGKILL), 0);
	put_keys(&c, key, 20, 21, "after", revs);
	written = now_seconds();
	put_keys(&c, key, 21, 70, "after", revs);
	ck_assert(rec_wait(&r, 70, true));
	/* The write waits out the election; the watch's resumption is the rest. */
	printf("failover: the first write after the kill of the leader took %.3f s, its event "
	       "arrived %.3f s after the kill\n", written - killed, r.first_at - killed);
	ck_assert(!r.reset);
	assert_revisions(&r, 0, revs, 70);
	ck_assert(!connected_to(atoi(strchr(eps[lead], ':') + 1)));
	stop_watch(w);
	rec_fini(&r);
	sl__etcd_conn_fini(&c);
}
END_TEST

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	bool failover = strcmp(mode, "failover") == 0;
	Suite *s = suite_create("etcd_watch");
	TCase *tc = tcase_create(failover ? "failover" : "watch");

	tcase_set_timeout(tc, 300);
	if (failover) {
		tcase_add_test(tc, events_after_a_member_is_killed_arrive_exactly_once);
	} else {
		tcase_add_test(tc, events_of_the_range_arrive_in_order_and_no_others);
		tcase_add_test(tc, a_start_revision_replays_the_history);
		tcase_add_test(tc, bursts_are_delivered_exactly_once);
		tcase_add_test(tc, a_compacted_start_is_a_reset_estale);
		tcase_add_test(tc, a_broken_stream_resumes_after_the_last_revision_delivered);
		tcase_add_test(tc, a_watch_from_now_broken_before_its_first_event_loses_none);
		tcase_add_test(tc, a_compacted_resume_point_is_a_reset_estale);
		tcase_add_test(tc, stop_returns_with_an_idle_stream);
		tcase_add_test(tc, stop_returns_while_reconnecting_to_a_dead_cluster);
		/* The cases above again, with progress notifies among the events. */
		if (strcmp(mode, "progress") == 0)
			tcase_add_test(tc, a_progress_notify_advances_the_revision_delivered);
	}
	suite_add_tcase(s, tc);
	return run_suite(s);
}
