/* SPDX-License-Identifier: MIT */
/*
 * The coordinated etcd protocol, node side (store_etcd_coord.h): one
 * session (one etcd lease, one keepalive) for every lease of the store
 * handle, the reports of all of them in one txn per period (only those that
 * changed), and their grants from one watch.  The coordinator side is
 * store_etcd_leader.c; the plan it follows is coord.c.
 *
 * The order that keeps the budget (lease.c's, unchanged): a grant that
 * shrinks is lowered on the group before the report says so, and the
 * report then says at least the usage read after lowering; a grant is
 * raised on the group only once seen, and it counts in the store from the
 * moment it was written.  A grant made for another session of ours (an
 * earlier one, which ran out) is never applied: the store counts only its
 * floor for us until the coordinator grants the new session.  Our own view
 * of the session ends margin_ms before etcd's (counted from the send time
 * of the last keepalive that was answered), and when it does every lease
 * falls to its floor before any other store call.
 */
#define _GNU_SOURCE
#include "store_etcd_coord.h"

#include "coord.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TXN_OPS SL__COORD_TXN_OPS
/* Raises acknowledged in one txn: two puts and a compare each at most. */
#define RAISES_PER_TXN 60

/* ---- JSON and txn helpers ------------------------------------------------ */

json_t *sl__coord_op_put(const char *key, const char *value, int64_t lease)
{
	json_t *put = json_pack("{s:o,s:o}", "key", sl__etcd_b64s(key), "value",
				sl__etcd_b64s(value));

	if (put && lease && json_object_set_new(put, "lease", sl__etcd_int(lease))) {
		json_decref(put);
		return NULL;
	}
	return put ? json_pack("{s:o}", "request_put", put) : NULL;
}

json_t *sl__coord_op_del(const char *key)
{
	return json_pack("{s:{s:o}}", "request_delete_range", "key", sl__etcd_b64s(key));
}

json_t *sl__coord_cmp(const char *key, const char *target, const char *field, const char *result,
		      int64_t v)
{
	return json_pack("{s:o,s:s,s:s,s:o}", "key", sl__etcd_b64s(key), "target", target, "result",
			 result, field, sl__etcd_int(v));
}

/* A txn of @cmp, @ops on success and @fail (may be NULL) on failure. */
static int txn_call(struct sl__etcd_conn *conn, json_t *cmp, json_t *ops, json_t *fail, bool *ok,
		    int64_t *rev, json_t **resp)
{
	json_t *req, *r = NULL;
	struct sl__etcd_hdr hdr = { 0, 0 };
	int rc;

	if (!cmp || !ops) {
		json_decref(cmp);
		json_decref(ops);
		json_decref(fail);
		return -ENOMEM;
	}
	req = json_pack("{s:o,s:o}", "compare", cmp, "success", ops);
	if (!req) {
		json_decref(fail);
		return -ENOMEM;
	}
	if (fail && json_object_set_new(req, "failure", fail)) {
		json_decref(req);
		return -ENOMEM;
	}
	rc = sl__etcd_call(conn, "/v3/kv/txn", req, &r, &hdr);
	json_decref(req);
	if (rc)
		return rc;
	if (ok)
		*ok = json_is_true(json_object_get(r, "succeeded"));
	if (rev)
		*rev = hdr.revision;
	if (resp)
		*resp = r;
	else
		json_decref(r);
	return 0;
}

json_t *sl__coord_watch_read(const char *key, const char *end)
{
	return json_pack("{s:o,s:o,s:b}", "key", sl__etcd_b64s(key), "range_end",
			 sl__etcd_b64s(end), "serializable", 1);
}

int sl__coord_txn(struct sl__etcd_conn *conn, json_t *cmp, json_t *ops, bool *ok, int64_t *rev,
		  json_t **resp)
{
	return txn_call(conn, cmp, ops, NULL, ok, rev, resp);
}

int sl__coord_wtxn(struct sl__coord_node *c, json_t *cmp, json_t *ops, bool *ok, int64_t *rev,
		   json_t **resp)
{
	int64_t t0 = sl__lease_now_ns();
	int rc = sl__coord_txn(&c->conn, cmp, ops, ok, rev, resp);

	sl__coord_note_lat(c, t0, rc);
	return rc;
}

void sl__coord_note_lat(struct sl__coord_node *c, int64_t t0, int rc)
{
	int64_t dt = sl__lease_now_ns() - t0;

	if (dt > c->lat_ns)
		c->lat_ns = dt;
	if (rc && rc != -ENOMEM)
		c->lat_failed = true;
}

void sl__coord_pace_begin(struct sl__coord_node *c)
{
	c->lat_ns = -1;
	c->lat_failed = false;
}

/* @p after a round whose slowest write took @lat_ns (@failed: a call
 * failed). */
static void pace_note(struct sl__coord_node *c, struct sl__coord_pace *p, int64_t lat_ns,
		      bool failed)
{
	int64_t cap = sl__coord_pace_cap(((int64_t)c->ttl_ms - (int64_t)c->margin_ms) * NS_PER_MS);

	c->rnd = c->rnd * 6364136223846793005ull + 1442695040888963407ull;
	sl__coord_pace_done(p, sl__lease_now_ns(), lat_ns, failed,
			    (int64_t)c->period_ms * NS_PER_MS, cap, c->rnd >> 16);
}

void sl__coord_pace_end(struct sl__coord_node *c, struct sl__coord_pace *p)
{
	if (c->lat_ns < 0 && !c->lat_failed)
		return; /* nothing written: nothing learnt */
	pace_note(c, p, c->lat_ns, c->lat_failed);
}

static int get_i64(json_t *o, const char *f, int64_t *out)
{
	uint64_t v;
	int rc = sl__etcd_get_u64(o, f, &v);

	*out = (int64_t)v;
	return rc;
}

int sl__coord_parse_grant(const char *v, size_t len, struct sl__cgrant *g, char *budget)
{
	json_t *o = json_loadb(v, len, 0, NULL);
	const char *b;
	int rc = -EIO;

	memset(g, 0, sizeof(*g));
	if (!o)
		return -EIO;
	b = json_string_value(json_object_get(o, "budget"));
	if (b && sl__lease_name_ok(b) && !sl__etcd_get_u64(o, "held", &g->held) &&
	    !sl__etcd_get_u64(o, "floor", &g->floor) && !sl__etcd_get_u64(o, "term", &g->term) &&
	    !get_i64(o, "session", &g->session) && !sl__etcd_get_u64(o, "max", &g->lim.max) &&
	    !sl__etcd_get_u64(o, "soft", &g->lim.soft) && !sl__etcd_get_u64(o, "min", &g->lim.min) &&
	    g->floor <= g->held) {
		if (budget)
			snprintf(budget, SL_LEASE_NAME_MAX, "%s", b);
		g->present = true;
		rc = 0;
	}
	json_decref(o);
	return rc;
}

long sl__coord_id_num(const struct sl__coord_node *c, const char *id)
{
	size_t n = strlen(c->idprefix);
	char *end;
	long v;

	if (strncmp(id, c->idprefix, n) != 0 || id[n] < '0' || id[n] > '9')
		return -1;
	errno = 0;
	v = strtol(id + n, &end, 10);
	return errno || *end || v < 0 || v > (1L << 30) ? -1 : v;
}

static void grants_key(const struct sl__coord_node *c, char *out, const char *id)
{
	snprintf(out, SL__ETCD_KEY_MAX, "%s/grants/%s", c->st->prefix, id);
}

void sl__coord_kick(struct sl__coord_node *c)
{
	sl_lease_store *s = c->s;

	pthread_mutex_lock(&s->wake_lock);
	atomic_store_explicit(&s->kick, true, memory_order_release);
	pthread_cond_broadcast(&s->wake);
	pthread_mutex_unlock(&s->wake_lock);
}

/* ---- our grants, from the watch ----------------------------------------- */

/* The slot of lease number @num, grown as needed (under tlock). */
static struct sl__cgrant *grant_slot(struct sl__coord_node *c, long num)
{
	if ((size_t)num >= c->ngrants) {
		size_t n = c->ngrants ? c->ngrants : 16;
		struct sl__cgrant *p;

		while (n <= (size_t)num)
			n *= 2;
		p = realloc(c->grants, n * sizeof(*p));
		if (!p)
			return NULL;
		memset(p + c->ngrants, 0, (n - c->ngrants) * sizeof(*p));
		c->grants = p;
		c->ngrants = n;
	}
	return &c->grants[num];
}

static void note_grant(struct sl__coord_node *c, const char *key, bool deleted, const char *v,
		       size_t len, int64_t rev)
{
	size_t plen = strlen(c->st->prefix) + strlen("/grants/");
	struct sl__cgrant g, *slot;
	long num;

	if (strlen(key) <= plen)
		return;
	num = sl__coord_id_num(c, key + plen);
	if (num < 0)
		return;
	memset(&g, 0, sizeof(g));
	/* A value this library did not write is no grant: nothing is applied
	 * from it, and the store counts at most what we report. */
	if (!deleted && sl__coord_parse_grant(v, len, &g, NULL))
		memset(&g, 0, sizeof(g));
	g.rev = rev;
	slot = grant_slot(c, num);
	if (slot)
		*slot = g;
}

static void grants_events(void *ctx, const struct sl__etcd_event *ev, size_t n, int64_t rev)
{
	struct sl__coord_node *c = ctx;
	size_t i;

	(void)rev;
	pthread_mutex_lock(&c->tlock);
	for (i = 0; i < n; i++)
		note_grant(c, ev[i].key, ev[i].deleted, ev[i].value, ev[i].value_len,
			   ev[i].mod_revision);
	c->kicked = true;
	pthread_mutex_unlock(&c->tlock);
	sl__coord_kick(c);
}

void sl__coord_lost(struct sl__coord_node *c, bool *flag)
{
	pthread_mutex_lock(&c->tlock);
	*flag = true;
	pthread_mutex_unlock(&c->tlock);
	sl__coord_kick(c);
}

void sl__coord_each_kv(json_t *kvs,
		       void (*fn)(void *ctx, const char *k, const char *v, size_t vl, int64_t rev),
		       void *ctx)
{
	json_t *kv;
	size_t i;

	json_array_foreach(kvs, i, kv) {
		size_t kl, vl = 0;
		char *k = sl__etcd_unb64(json_object_get(kv, "key"), &kl);
		/* The gateway leaves an empty value out. */
		json_t *jv = json_object_get(kv, "value");
		char *v = jv ? sl__etcd_unb64(jv, &vl) : strdup("");
		int64_t rev = 0;

		sl__etcd_get_int(json_object_get(kv, "mod_revision"), 0, &rev);
		if (k && v)
			fn(ctx, k, v, vl, rev);
		free(k);
		free(v);
	}
}

static void grants_reset(void *ctx, int err)
{
	struct sl__coord_node *c = ctx;

	(void)err;
	sl__coord_lost(c, &c->gw_lost);
}

static void grant_kv(void *ctx, const char *k, const char *v, size_t vl, int64_t rev)
{
	note_grant(ctx, k, false, v, vl, rev);
}

/* Read our grants and watch them from there on. */
static int grants_watch_start(struct sl__coord_node *c)
{
	char key[SL__ETCD_KEY_MAX], end[SL__ETCD_KEY_MAX];
	struct sl__etcd_watch_cbs cbs = { grants_events, grants_reset, c };
	json_t *req, *resp = NULL;
	struct sl__etcd_hdr hdr = { 0, 0 };
	int rc;

	grants_key(c, key, c->idprefix);
	/* The prefix ends in ':': the range end is its successor. */
	memcpy(end, key, strlen(key) + 1);
	end[strlen(end) - 1]++;
	/* Serializable (sl__coord_watch_read()): the watch from its revision
	 * on brings whatever a member behind had not yet applied. */
	req = sl__coord_watch_read(key, end);
	if (!req)
		return -ENOMEM;
	rc = sl__etcd_call(&c->conn, "/v3/kv/range", req, &resp, &hdr);
	json_decref(req);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->tlock);
	sl__coord_each_kv(json_object_get(resp, "kvs"), grant_kv, c);
	c->gw_lost = false;
	pthread_mutex_unlock(&c->tlock);
	json_decref(resp);
	return sl__etcd_watch_start(&c->gw, c->st->hosts, c->st->hosts_len,
				    c->st->conn.timeout_ms, key, end, hdr.revision + 1, &cbs);
}

/* ---- the session --------------------------------------------------------- */

/* A failed store call is tried again after a quarter period, doubling with
 * each failure in a row up to a quarter of the lease's own view: a cluster
 * that is slow to answer is not asked again and again by every node. */
static int64_t backoff(int64_t first, int64_t cap, unsigned *fails)
{
	int64_t d = first;

	for (unsigned i = 0; i < *fails && d < cap; i++)
		d *= 2;
	if (d > cap && cap > 0)
		d = cap;
	if (*fails < 16)
		(*fails)++;
	return d;
}

static void retry_later(struct sl__coord_node *c)
{
	c->retry_ns = sl__lease_now_ns() +
		      backoff((int64_t)c->period_ms * NS_PER_MS / 4,
			      ((int64_t)c->ttl_ms - (int64_t)c->margin_ms) * NS_PER_MS / 4, &c->fails);
}

static int64_t keep_ms(const struct sl__coord_node *c)
{
	uint32_t k = (c->ttl_ms - c->margin_ms) / 3;

	return k > c->period_ms ? k : c->period_ms;
}

static uint32_t ttl_s(const struct sl__coord_node *c)
{
	return c->ttl_ms < 2000 ? 2 : (uint32_t)((c->ttl_ms + 999ull) / 1000);
}

/* ---- the keeper ---------------------------------------------------------- */

static void fence_all(struct sl__coord_node *c);

/* Hand the session (c->session, 0: none) and its view over to the keeper
 * (the run thread's, under s->lock). */
static void keeper_hand(struct sl__coord_node *c)
{
	pthread_mutex_lock(&c->klock);
	if (c->k_session != c->session) {
		c->k_session = c->session;
		c->k_view_end_ns = c->view_end_ns;
		c->k_view_ns = ((int64_t)c->ttl_ms - (int64_t)c->margin_ms) * NS_PER_MS;
		c->k_keep_ns = keep_ms(c) * NS_PER_MS;
		c->k_retry_ns = (int64_t)c->period_ms * NS_PER_MS / 4;
		c->k_next_ns = c->keep_next_ns;
		c->k_fails = 0;
		c->k_gone = false;
		pthread_cond_signal(&c->kcond);
	}
	pthread_mutex_unlock(&c->klock);
}

/* A keepalive of @id on @conn: 0 (etcd has it), -ENOENT (it ended), or a
 * store error. */
static int keepalive_call(struct sl__etcd_conn *conn, int64_t id)
{
	json_t *req = json_pack("{s:o}", "ID", sl__etcd_int(id)), *resp = NULL;
	int64_t v = 0;
	int rc;

	if (!req)
		return -ENOMEM;
	rc = sl__etcd_call(conn, "/v3/lease/keepalive", req, &resp, NULL);
	json_decref(req);
	/* An expired lease answers without a TTL. */
	if (rc == 0 && (sl__etcd_get_int(json_object_get(resp, "TTL"), 0, &v) || v <= 0))
		rc = -ENOENT;
	json_decref(resp);
	return rc;
}

/* The keeper's thread: a keepalive every k_keep_ns of the session handed
 * over; a failed one again after a quarter period, doubling up to a
 * quarter of the view.  Our own view starts at the send time of the
 * last keepalive answered (etcd's at its answer). */
static void *keeper_main(void *arg)
{
	struct sl__coord_node *c = arg;

	pthread_mutex_lock(&c->klock);
	while (!c->k_stop) {
		int64_t now = sl__lease_now_ns(), id, sent;
		int rc;

		if (!c->k_session || c->k_gone) {
			pthread_cond_wait(&c->kcond, &c->klock);
			continue;
		}
		if (now < c->k_next_ns) {
			struct timespec ts = { (time_t)(c->k_next_ns / 1000000000),
					       (long)(c->k_next_ns % 1000000000) };

			pthread_cond_timedwait(&c->kcond, &c->klock, &ts);
			continue;
		}
		id = c->k_session;
		pthread_mutex_unlock(&c->klock);
		sent = sl__lease_now_ns();
		rc = keepalive_call(&c->kconn, id);
		pthread_mutex_lock(&c->klock);
		if (c->k_session != id)
			continue; /* handed over meanwhile */
		if (rc == 0) {
			c->k_fails = 0;
			if (sent + c->k_view_ns > c->k_view_end_ns)
				c->k_view_end_ns = sent + c->k_view_ns;
			c->k_next_ns = sent + c->k_keep_ns;
		} else if (rc == -ENOENT) {
			c->k_gone = true;
		} else {
			c->k_next_ns = sl__lease_now_ns() +
				       backoff(c->k_retry_ns, c->k_view_ns / 4, &c->k_fails);
		}
		if (rc) {
			/* The run thread counts it (a store error each lease,
			 * or the fall), and slows its writes down. */
			c->k_errors++;
			pthread_mutex_unlock(&c->klock);
			sl__coord_kick(c);
			pthread_mutex_lock(&c->klock);
		}
	}
	pthread_mutex_unlock(&c->klock);
	return NULL;
}

static int keeper_start(struct sl__coord_node *c)
{
	int rc;

	pthread_mutex_lock(&c->klock);
	c->k_stop = false;
	pthread_mutex_unlock(&c->klock);
	rc = pthread_create(&c->keeper, NULL, keeper_main, c);
	if (rc)
		return -rc;
	c->keeper_on = true;
	return 0;
}

static void keeper_stop(struct sl__coord_node *c)
{
	if (!c->keeper_on)
		return;
	pthread_mutex_lock(&c->klock);
	c->k_stop = true;
	pthread_cond_signal(&c->kcond);
	pthread_mutex_unlock(&c->klock);
	pthread_join(c->keeper, NULL);
	c->keeper_on = false;
}

/* Under s->lock: every lease registered in this session was renewed with
 * it, to c->view_end_ns. */
static void renewed(struct sl__coord_node *c)
{
	struct sl_lease *l;

	for (l = c->s->leases; l; l = l->next) {
		if (l->c_session != c->session)
			continue;
		l->counts.renewals++;
		l->expiry_ns = c->view_end_ns;
		sl__lease_publish(l);
	}
}

/* On the run thread: @p as after a failed round, at once.  A gap already
 * running grows by what the gap grew; it does not start again. */
static void slowed(struct sl__coord_node *c, struct sl__coord_pace *p, int64_t now)
{
	int64_t next = p->next_ns, gap = p->gap_ns;

	/* Not sl__coord_pace_due(): time spent waiting on a slow answer is
	 * not quiet time, and would shorten the gap. */
	pace_note(c, p, 0, true);
	if (next > now)
		p->next_ns = next + (p->gap_ns - gap);
}

/* Under s->lock: what the keeper found since.  A renewal moves our view
 * (and every lease's of this session); an end etcd said, or errors, are
 * counted here. */
static void keeper_sync(struct sl__coord_node *c)
{
	int64_t view = 0;
	unsigned errors = 0;
	bool gone = false;
	struct sl_lease *l;

	pthread_mutex_lock(&c->klock);
	if (c->session && c->k_session == c->session) {
		gone = c->k_gone;
		if (c->k_view_end_ns > c->view_end_ns)
			view = c->k_view_end_ns;
	}
	errors = c->k_errors;
	c->k_errors = 0;
	pthread_mutex_unlock(&c->klock);
	if (gone) {
		/* The timing assumption broke (a stall longer than the
		 * margin): fall now; nothing of the old session is ours. */
		fence_all(c);
		return;
	}
	if (errors) {
		for (l = c->s->leases; l; l = l->next) {
			l->counts.store_errors += errors;
			sl__lease_publish(l);
		}
		/* A keepalive failed: etcd's leader answers "unavailable"
		 * when it is more than a second behind in applying, and a
		 * session that cannot be renewed for its ttl is lost.  Every
		 * node hears it within a keepalive interval, sooner than its
		 * own writes queued behind that second answer: both paces
		 * take it as a slow round, at most once a second (the
		 * leader waits that long before it answers; the fleet model
		 * of tests/test_lease_coord.c lost every session when it
		 * was once a keepalive interval). */
		int64_t now = sl__lease_now_ns();

		if (now >= c->kslow_ns) {
			slowed(c, &c->pace, now);
			slowed(c, &c->lpace, now);
			c->kslow_ns = now + 1000 * NS_PER_MS;
		}
	}
	if (!view)
		return;
	c->fails = 0;
	c->view_end_ns = view;
	renewed(c);
}

/* Under s->lock: every lease to its floor, the session gone (our own view
 * of it ended, or etcd says it did). */
static void fence_all(struct sl__coord_node *c)
{
	struct sl_lease *l;

	for (l = c->s->leases; l; l = l->next) {
		sl__lease_fence(l);
		l->registered = false;
	}
	c->session = 0;
	c->lost_session = true;
	keeper_hand(c);
}

/*
 * Grant a session (I/O, no lock: c's session fields are the run thread's;
 * the keeper keeps it alive from then).  The send time, taken before the
 * call, is where our own view starts: etcd's starts when it answers.
 */
static int session_call(struct sl__coord_node *c, int64_t *sent)
{
	int64_t v = 0;
	json_t *req, *resp = NULL;
	int rc;

	*sent = sl__lease_now_ns();
	if (c->asked_session) {
		/* A grant whose answer was lost may have been applied: the id
		 * is ours, so a keepalive tells (a retried grant would leave
		 * a lease behind each time, each a raft entry). */
		rc = keepalive_call(&c->conn, c->asked_session);
		if (rc == 0) {
			c->new_session = c->asked_session;
			c->asked_session = 0;
			return 0;
		}
		if (rc != -ENOENT)
			return rc;
	}
	/* Our own id (positive, not 0), kept until the grant is seen. */
	if (!c->asked_session)
		c->asked_session = (int64_t)((c->rnd = c->rnd * 6364136223846793005ull +
							1442695040888963407ull) >> 2) + 1;
	req = json_pack("{s:I,s:o}", "TTL", (json_int_t)ttl_s(c), "ID",
			sl__etcd_int(c->asked_session));
	if (!req)
		return -ENOMEM;
	rc = sl__etcd_call(&c->conn, "/v3/lease/grant", req, &resp, NULL);
	json_decref(req);
	if (rc == 0) {
		if (sl__etcd_get_int(json_object_get(resp, "ID"), 0, &v) || v != c->asked_session)
			rc = -EIO;
		else
			c->new_session = v;
		c->asked_session = 0;
	}
	json_decref(resp);
	return rc;
}

/* Under s->lock: what session_call() found. */
static void session_done(struct sl__coord_node *c, int rc, int64_t sent)
{
	struct sl_lease *l;

	if (rc == -ENOENT) {
		/* The timing assumption broke (a stall longer than the
		 * margin): fall now; nothing of the old session is ours. */
		fence_all(c);
		return;
	}
	if (rc) {
		for (l = c->s->leases; l; l = l->next) {
			l->counts.store_errors++;
			sl__lease_publish(l);
		}
		retry_later(c);
		return;
	}
	c->fails = 0;
	if (c->new_session) {
		c->session = c->new_session;
		c->new_session = 0;
	}
	c->view_end_ns = sent + ((int64_t)c->ttl_ms - (int64_t)c->margin_ms) * NS_PER_MS;
	c->keep_next_ns = sent + keep_ms(c) * NS_PER_MS;
	keeper_hand(c);
	renewed(c);
}

/* ---- the work of one round: decided under s->lock, sent without it ------- */

/* A report to write, or a claim to make by a compare. */
struct cwrite {
	long num;                /* the lease's, to find it again after the I/O   */
	char budget[SL_LEASE_NAME_MAX];
	char id[SL_LEASE_ID_MAX];
	uint64_t held, usage, demand;
	uint64_t base;           /* claims: what the store counts for us already  */
	bool member;             /* the member key is to be written too            */
	bool claim;              /* a claim (join_compare()), not a batched report */
	bool limits;             /* a read of the budget's limits, not a write      */
	bool raise;              /* it acknowledges a raise: sent alone, comparing  */
	int64_t g_rev;           /* the revision of the grant it saw               */
	bool mfloor;             /* the member key's floor changes to floor         */
	uint64_t floor;
	int rc;                  /* the outcome                                    */
	struct sl_limits lim;    /* claims: the budget's limits as read            */
};

struct round {
	struct cwrite *w;
	size_t n, cap;
	int64_t session;
	char (*budgets)[SL_LEASE_NAME_MAX]; /* our registered budgets: campaigns */
	size_t nb;
};

static struct cwrite *round_add(struct round *r)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 32;
		struct cwrite *p = realloc(r->w, cap * sizeof(*p));

		if (!p)
			return NULL;
		r->w = p;
		r->cap = cap;
	}
	memset(&r->w[r->n], 0, sizeof(r->w[0]));
	return &r->w[r->n++];
}

static int queue(struct round *r, const struct sl_lease *l, uint64_t held, uint64_t usage,
		 uint64_t demand, bool claim, uint64_t base)
{
	struct cwrite *w = round_add(r);

	if (!w)
		return -ENOMEM;
	w->num = l->c_num;
	snprintf(w->budget, sizeof(w->budget), "%s", l->budget);
	snprintf(w->id, sizeof(w->id), "%s", l->id);
	w->held = held;
	w->usage = usage;
	w->demand = demand;
	w->member = !l->c_member;
	w->claim = claim;
	w->base = base;
	return 0;
}

static char *rep_json(uint64_t held, uint64_t usage, uint64_t demand, int64_t session)
{
	json_t *o = json_object();
	char *s = NULL;

	if (o && !sl__etcd_set_u64(o, "held", held) && !sl__etcd_set_u64(o, "usage", usage) &&
	    !sl__etcd_set_u64(o, "demand", demand) &&
	    !sl__etcd_set_u64(o, "session", (uint64_t)session))
		s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

/* Under s->lock: register @l in this session: claim what the store counts
 * for us already, or our usage if more (from room, by a compare). */
static void lease_register(struct sl_lease *l, struct round *r)
{
	/* What the store counts for us whatever our grant says: the floor
	 * our member key acknowledges.  Not the grant's floor: the grant we
	 * last saw may be stale and of an older session, and a coordinator
	 * may have cut it since (proof/coord.pml's gap-coord-rejoin-grant-
	 * floor: a claim of that floor counted past max). */
	uint64_t base = l->c_mfloor, cnt, ev, claim, demand;
	struct cwrite *w;

	sl__lease_group_read(l->g, &cnt, &ev);
	if (!l->c_lim && cnt <= base) {
		/* The budget's limits first (read_limits()): a join then
		 * reports what it asks for, and its first grant is its share,
		 * not one for no demand followed by another. */
		w = round_add(r);
		if (!w) {
			l->counts.store_errors++;
			return;
		}
		w->num = l->c_num;
		w->limits = true;
		w->rc = -EAGAIN; /* until read_limits() reads it */
		snprintf(w->budget, sizeof(w->budget), "%s", l->budget);
		return;
	}
	/* A claim reads the limits itself (join_compare()). */
	/* Lower first: from here the group holds at most the claim. */
	if (l->applied > max_u64(base, cnt))
		sl__lease_apply(l, max_u64(base, cnt));
	sl__lease_group_read(l->g, &cnt, NULL);
	claim = max_u64(base, cnt);
	demand = max_u64(sl__lease_my_demand(l, cnt, ev, l->blim.max), claim);
	l->demand = demand;
	if (queue(r, l, claim, cnt, demand, claim > base, base))
		l->counts.store_errors++;
}

/* Under s->lock: one period of @l, or its answer to a new grant. */
static void lease_step(struct sl__coord_node *c, struct sl_lease *l, struct round *r)
{
	struct sl__coord_lease x;
	struct sl__cgrant g;
	uint64_t cnt, ev, target, held, floor_to;

	memset(&g, 0, sizeof(g));
	pthread_mutex_lock(&c->tlock);
	if (l->c_num >= 0 && (size_t)l->c_num < c->ngrants)
		g = c->grants[l->c_num];
	pthread_mutex_unlock(&c->tlock);
	if (g.present)
		l->blim = g.lim;
	if (l->c_session != c->session) {
		lease_register(l, r);
		return;
	}
	x.applied = l->applied;
	x.rep_held = l->c_rep_held;
	x.rep_demand = l->c_rep_demand;
	x.grant_current = g.present && g.session == c->session;
	x.g_held = g.held;
	x.view_ended = sl__lease_now_ns() >= c->view_end_ns;
	sl__lease_group_read(l->g, &cnt, &ev);
	l->demand = sl__lease_my_demand(l, cnt, ev, l->blim.max);
	/* coord.h: a cut applies now, before the report says so; a raise
	 * waits for our own report of it (round_done()): the grant alone is
	 * not enough, since the coordinator may shrink a grant we have not
	 * acknowledged, counting us then at what our report says. */
	target = sl__coord_lease_target(&x);
	if (target < l->applied)
		sl__lease_apply(l, target);
	if (target < l->c_rep_held)
		sl__lease_group_read(l->g, &cnt, NULL);
	held = sl__coord_lease_held(target, cnt, l->c_rep_held);
	/* Our fence's floor is the one our member key acknowledges: the store
	 * counts it for us whatever the grant says.  A lower floor of the
	 * grant applies here first (we fence to it from now), then is
	 * acknowledged; a higher one is acknowledged first, comparing the
	 * grant it comes from, and fenced to after. */
	floor_to = x.grant_current ? g.floor : l->c_mfloor;
	if (floor_to < l->floor) {
		l->floor = floor_to;
		sl__lease_publish(l);
	} else if (min_u64(floor_to, l->c_mfloor) > l->floor) {
		/* Back up to what the store counts for us in any case (a
		 * lower floor not yet acknowledged, raised again). */
		l->floor = min_u64(floor_to, l->c_mfloor);
		sl__lease_publish(l);
	}
	/* A lower floor is acknowledged with the next report made for
	 * another reason: until then the store counts the higher one, which
	 * is only more than it need (when a join takes a budget past a power
	 * of two, every member's floor falls: a write each would be as many
	 * as the join's). */
	if (sl__coord_lease_report(&x, held, l->demand) || floor_to > l->c_mfloor) {
		struct cwrite *w;

		if (queue(r, l, held, cnt, l->demand, false, 0)) {
			l->counts.store_errors++;
			return;
		}
		w = &r->w[r->n - 1];
		w->mfloor = floor_to != l->c_mfloor;
		w->floor = floor_to;
		/* It counts us for more than our keys did: only if the grant
		 * is still the one we saw (a grant shrunk meanwhile counts us
		 * at what our keys say). */
		if (held > l->c_rep_held || floor_to > l->c_mfloor) {
			w->raise = true;
			w->g_rev = g.rev;
		}
	} else if (target > l->applied) {
		/* Reported already (a raise whose apply failed): apply it. */
		sl__lease_apply(l, target);
	} else {
		l->usage = cnt;
		l->expiry_ns = c->view_end_ns;
		sl__lease_publish(l);
	}
}

/* No lock: send the batched reports, each txn under no compare (no report
 * makes anyone count for more; a claim goes through join_compare()). */
static void send_reports(struct sl__coord_node *c, struct round *r)
{
	size_t i = 0;

	while (i < r->n) {
		json_t *ops = json_array();
		size_t first = i, k = 0;
		bool ok = false;
		int rc = -ENOMEM;

		for (; i < r->n && k + 2 <= TXN_OPS; i++) {
			struct cwrite *w = &r->w[i];
			char key[SL__ETCD_KEY_MAX], *v;

			if (w->claim || w->raise || w->limits)
				continue;
			v = rep_json(w->held, w->usage, w->demand, r->session);
			if (!v || !ops)
				break;
			sl__etcd_key(c->st, key, w->budget, "rep", w->id);
			json_array_append_new(ops, sl__coord_op_put(key, v, r->session));
			free(v);
			k++;
			if (w->member || w->mfloor) {
				char mv[48];

				snprintf(mv, sizeof(mv), "{\"floor\":\"%llu\"}",
					 (unsigned long long)(w->mfloor ? w->floor : 0));
				sl__etcd_key(c->st, key, w->budget, "member", w->id);
				json_array_append_new(ops, sl__coord_op_put(key, mv, 0));
				k++;
			}
		}
		if (k)
			rc = sl__coord_wtxn(c, json_array(), ops, &ok, NULL, NULL);
		else
			json_decref(ops);
		if (rc == 0 && !ok)
			rc = -EIO;
		for (; first < i; first++)
			if (!r->w[first].claim && !r->w[first].raise && !r->w[first].limits)
				r->w[first].rc = k ? rc : 0;
		if (k && rc)
			break;
	}
	for (; i < r->n; i++)
		if (!r->w[i].claim && !r->w[i].raise && !r->w[i].limits)
			r->w[i].rc = -EAGAIN; /* not sent: again next round */
}

/* No lock: the limits of the budgets of the round's joins, read in txns of
 * ranges (a read: no write for etcd to apply). */
static void read_limits(struct sl__coord_node *c, struct round *r)
{
	size_t i = 0;

	while (i < r->n) {
		json_t *ops = json_array(), *resp = NULL;
		size_t at[TXN_OPS], k = 0, j;
		bool ok = false;
		int rc = -ENOMEM;

		for (; i < r->n && k < TXN_OPS && ops; i++) {
			char key[SL__ETCD_KEY_MAX];

			if (!r->w[i].limits)
				continue;
			sl__etcd_key(c->st, key, r->w[i].budget, NULL, NULL);
			/* Serializable: the limits only size the report's
			 * demand (a claim compares the version), and a
			 * linearizable read waits for etcd's apply, which a
			 * join storm puts behind. */
			json_array_append_new(ops, json_pack("{s:{s:o,s:b}}", "request_range", "key",
							     sl__etcd_b64s(key), "serializable", 1));
			at[k++] = i;
		}
		if (!k) {
			json_decref(ops);
			return;
		}
		if (ops)
			rc = sl__coord_txn(&c->conn, json_array(), ops, &ok, NULL, &resp);
		else
			json_decref(ops);
		for (j = 0; j < k; j++) {
			struct cwrite *w = &r->w[at[j]];
			json_t *kv = rc ? NULL : sl__etcd_txn_kv(resp, j);

			if (rc)
				w->rc = rc;
			else if (!kv)
				w->rc = -ENOENT;
			else
				w->rc = sl__etcd_parse_limits(kv, &w->lim) ? -EIO : 0;
		}
		json_decref(resp);
		if (rc)
			return;
	}
}

/* No lock: a report that acknowledges a raise, alone, comparing the
 * grant's revision with the one it was decided on. */
/* Append @w's writes (its report, its member key's floor if it moves)
 * and the compare of the grant it was decided on to @ops and @cmp. */
static int raise_ops(struct sl__coord_node *c, const struct cwrite *w, int64_t session,
		     json_t *ops, json_t *cmp, json_t *fail)
{
	char key[SL__ETCD_KEY_MAX], *v;
	int rc;

	/* Every append checked: a raise written without its compare would
	 * count us for more than the store allows (rule 2).  The failure
	 * branch reads the same grant (send_raises() reads its answers by
	 * index: one for each write). */
	grants_key(c, key, w->id);
	if (json_array_append_new(cmp, sl__coord_cmp(key, "MOD", "mod_revision", "EQUAL", w->g_rev)) ||
	    json_array_append_new(fail, json_pack("{s:{s:o,s:b}}", "request_range", "key",
						  sl__etcd_b64s(key), "keys_only", 1)))
		return -ENOMEM;
	v = rep_json(w->held, w->usage, w->demand, session);
	if (!v)
		return -ENOMEM;
	sl__etcd_key(c->st, key, w->budget, "rep", w->id);
	rc = json_array_append_new(ops, sl__coord_op_put(key, v, session));
	free(v);
	if (rc)
		return -ENOMEM;
	if (w->mfloor) {
		char mv[48];

		snprintf(mv, sizeof(mv), "{\"floor\":\"%llu\"}", (unsigned long long)w->floor);
		sl__etcd_key(c->st, key, w->budget, "member", w->id);
		if (json_array_append_new(ops, sl__coord_op_put(key, mv, 0)))
			return -ENOMEM;
	}
	return 0;
}

/* Send the writes @w[0..n) that acknowledge raises: one txn, each with the
 * compare of its grant.  A txn that fails (a grant moved) reads the grants'
 * revisions instead, and the writes whose grant did not move are sent again
 * together: one moved grant holds back no other, at the cost of one more
 * txn, not one a write (etcd's cost is per txn). */
static void send_raises(struct sl__coord_node *c, struct cwrite **w, size_t n, int64_t session)
{
	json_t *ops = json_array(), *cmp = json_array(), *fail = json_array(), *resp = NULL;
	int64_t t0 = sl__lease_now_ns();
	size_t i, k = 0;
	bool ok = false;
	int rc = 0;

	if (!ops || !cmp || !fail)
		rc = -ENOMEM;
	for (i = 0; i < n && !rc; i++)
		rc = raise_ops(c, w[i], session, ops, cmp, fail);
	if (rc) {
		json_decref(ops);
		json_decref(cmp);
		json_decref(fail);
	} else {
		rc = txn_call(&c->conn, cmp, ops, fail, &ok, NULL, &resp);
		sl__coord_note_lat(c, t0, rc);
	}
	if (rc || ok) {
		for (i = 0; i < n; i++)
			w[i]->rc = rc;
		json_decref(resp);
		return;
	}
	/* The grants that did not move, first in @w; the others again when
	 * their new grant is seen. */
	for (i = 0; i < n; i++) {
		json_t *kv = sl__etcd_txn_kv(resp, i);
		int64_t mod = 0; /* no key: etcd compares a revision of 0 */
		struct cwrite *x = w[i];

		if (kv)
			sl__etcd_get_int(json_object_get(kv, "mod_revision"), 0, &mod);
		if (mod == x->g_rev) {
			w[i] = w[k];
			w[k++] = x;
		} else {
			x->rc = -EAGAIN;
		}
	}
	json_decref(resp);
	if (k == n) {
		/* None moved, so the failure came between: later. */
		for (i = 0; i < n; i++)
			w[i]->rc = -EAGAIN;
		return;
	}
	if (k)
		send_raises(c, w, k, session);
}

/*
 * No lock: a claim that makes us count for more than the store counts for
 * us now (a join with usage, a new session above the old grant's floor):
 * from room the budget's version says no one holds, by a compare on it.
 */
static int join_compare(struct sl__coord_node *c, struct cwrite *w, int64_t session)
{
	char bkey[SL__ETCD_KEY_MAX], vkey[SL__ETCD_KEY_MAX], rkey[SL__ETCD_KEY_MAX];
	char mkey[SL__ETCD_KEY_MAX], vbuf[48];
	json_t *ops, *resp = NULL, *kv, *doc;
	uint64_t counted = 0, grow = w->held - w->base;
	int64_t vrev = 0;
	bool ok = false;
	char *rep;
	int rc;

	sl__etcd_key(c->st, bkey, w->budget, NULL, NULL);
	sl__etcd_key(c->st, vkey, w->budget, "version", NULL);
	ops = json_pack("[{s:{s:o}},{s:{s:o}}]", "request_range", "key", sl__etcd_b64s(bkey),
			"request_range", "key", sl__etcd_b64s(vkey));
	rc = sl__coord_wtxn(c, json_array(), ops, &ok, NULL, &resp);
	if (rc)
		return rc;
	kv = sl__etcd_txn_kv(resp, 0);
	if (!kv || sl__etcd_parse_limits(kv, &w->lim)) {
		json_decref(resp);
		return -ENOENT;
	}
	kv = sl__etcd_txn_kv(resp, 1);
	if (kv) {
		doc = sl__etcd_kv_json(kv);
		/* The decentralized protocol's version key carries no sum: no
		 * room is known free until a coordinator has written one. */
		if (!doc || sl__etcd_get_u64(doc, "counted", &counted))
			counted = UINT64_MAX;
		json_decref(doc);
		sl__etcd_get_int(json_object_get(kv, "mod_revision"), 0, &vrev);
	}
	json_decref(resp);
	if (counted > w->lim.max || grow > w->lim.max - counted)
		return -EBUSY;
	snprintf(vbuf, sizeof(vbuf), "{\"counted\":\"%llu\"}", (unsigned long long)(counted + grow));
	rep = rep_json(w->held, w->usage, w->demand, session);
	if (!rep)
		return -ENOMEM;
	sl__etcd_key(c->st, rkey, w->budget, "rep", w->id);
	sl__etcd_key(c->st, mkey, w->budget, "member", w->id);
	ops = json_pack("[o,o]", sl__coord_op_put(rkey, rep, session), sl__coord_op_put(vkey, vbuf, 0));
	free(rep);
	/* A new member's key, acknowledging no floor; an old one's stays. */
	if (ops && w->member)
		json_array_append_new(ops, sl__coord_op_put(mkey, "{}", 0));
	rc = sl__coord_wtxn(c,
			    json_pack("[o]", sl__coord_cmp(vkey, "MOD", "mod_revision", "EQUAL", vrev)),
			   ops, &ok, NULL, NULL);
	if (rc)
		return rc;
	return ok ? 0 : -EAGAIN;
}

static struct sl_lease *lease_of(sl_lease_store *s, long num)
{
	struct sl_lease *l;

	for (l = s->leases; l; l = l->next)
		if (l->c_num == num)
			return l;
	return NULL;
}

/* Under s->lock: what the store said to the round's writes.  A lease left
 * in the meantime is not found (its number is never reused). */
static void round_done(struct sl__coord_node *c, struct round *r)
{
	size_t i;

	for (i = 0; i < r->n; i++) {
		struct cwrite *w = &r->w[i];
		struct sl_lease *l = lease_of(c->s, w->num);

		if (!l || r->session != c->session)
			continue;
		if (w->limits) {
			/* Read: the join is made next round (at once). */
			if (w->rc == 0) {
				l->blim = w->lim;
				l->c_lim = true;
				l->next_ns = 0;
			} else if (w->rc != -ENOENT && w->rc != -EAGAIN) {
				l->counts.store_errors++;
				if (!c->retry_ns)
					retry_later(c);
			}
			continue;
		}
		if (w->rc == -EBUSY) {
			/* No room for our usage: shrink toward the floor the
			 * store counts for us, and claim again later. */
			l->blim = w->lim;
			if (l->applied > w->base)
				sl__lease_apply(l, w->base);
			continue;
		}
		if (w->rc) {
			if (w->rc != -EAGAIN && w->rc != -ENOENT) {
				l->counts.store_errors++;
				if (!c->retry_ns)
					retry_later(c);
			}
			sl__lease_publish(l);
			continue;
		}
		if (w->claim) {
			/* join_compare() read them. */
			l->blim = w->lim;
			l->c_lim = true;
		}
		if (l->c_session != r->session)
			l->counts.renewals++;
		if (w->held > l->c_rep_held && l->c_session == r->session)
			l->counts.grants++;
		else if (w->held < l->c_rep_held && l->c_session == r->session)
			l->counts.shrinks++;
		if (w->member)
			l->c_mfloor = 0;
		if (w->mfloor) {
			/* Acknowledged: our fence's floor from now on. */
			l->c_mfloor = w->floor;
			l->floor = w->floor;
		}
		l->c_member = true;
		l->c_session = r->session;
		l->registered = true;
		l->c_rep_held = l->held = w->held;
		l->c_rep_demand = w->demand;
		l->usage = w->usage;
		l->expiry_ns = c->view_end_ns;
		l->state = SL_LEASE_HELD;
		/* What our report says is counted now: a claim, or a raise
		 * to a grant, which the group may take while the grant (for
		 * this session) still says so and our view lasts. */
		if (l->applied < w->held) {
			uint64_t to = w->held;

			if (!w->claim) {
				struct sl__cgrant g = { .present = false };

				pthread_mutex_lock(&c->tlock);
				if ((size_t)l->c_num < c->ngrants)
					g = c->grants[l->c_num];
				pthread_mutex_unlock(&c->tlock);
				to = g.present && g.session == r->session ? min_u64(to, g.held)
									   : l->applied;
			}
			if (to > l->applied && sl__lease_now_ns() < c->view_end_ns)
				sl__lease_apply(l, to);
		}
		sl__lease_publish(l);
	}
}

/* ---- the loop ------------------------------------------------------------ */

/* Under s->lock: the session follows the leases' options: the shortest ttl
 * and period, the longest margin. */
static void session_opts(struct sl__coord_node *c)
{
	struct sl_lease *l;
	bool first = true;

	for (l = c->s->leases; l; l = l->next) {
		if (first || l->opts.ttl_ms < c->ttl_ms)
			c->ttl_ms = l->opts.ttl_ms;
		if (first || l->opts.period_ms < c->period_ms)
			c->period_ms = l->opts.period_ms;
		if (first || l->opts.margin_ms > c->margin_ms)
			c->margin_ms = l->opts.margin_ms;
		first = false;
	}
	if (c->margin_ms >= c->ttl_ms)
		c->margin_ms = c->ttl_ms / 2;
}

/* Under s->lock: the budgets we hold a lease of, for the elections. */
static void note_budgets(struct sl__coord_node *c, struct round *r)
{
	struct sl_lease *l;
	size_t nl = 0;

	for (l = c->s->leases; l; l = l->next)
		nl++;
	r->budgets = calloc(nl + 1, sizeof(*r->budgets));
	for (l = c->s->leases; l && r->budgets; l = l->next)
		if (l->c_member && l->c_session == c->session)
			snprintf(r->budgets[r->nb++], SL_LEASE_NAME_MAX, "%s", l->budget);
}

/* Under s->lock: the leases due (all of them after a grant arrived) step,
 * until their writes fill the pace's window.  A lease steps once a sweep:
 * the rest stay due and step in the next rounds before any lease steps
 * again, so that every lease has its turn whatever the list's order.
 * Returns whether the window stopped the sweep. */
static bool collect(struct sl__coord_node *c, struct round *r, bool kicked, int64_t now)
{
	struct sl_lease *l;
	size_t ops = 0;

	r->session = c->session;
	if (!c->sweep)
		c->sweep = 1; /* a new lease's c_sweep is 0 */
	for (l = c->s->leases; l; l = l->next) {
		size_t before = r->n, i;

		if (!kicked && now < l->next_ns)
			continue;
		if (l->c_sweep == c->sweep)
			continue; /* stepped in this sweep already */
		if (ops >= c->pace.window)
			return true; /* full: the rest wait for the next round */
		if (now >= l->next_ns) {
			l->next_ns += (int64_t)l->opts.period_ms * NS_PER_MS;
			if (l->next_ns <= now)
				l->next_ns = now + (int64_t)l->opts.period_ms * NS_PER_MS;
		}
		l->c_sweep = c->sweep;
		lease_step(c, l, r);
		/* A read of the limits writes nothing. */
		for (i = before; i < r->n; i++)
			if (!r->w[i].limits)
				ops += 1 + (r->w[i].member || r->w[i].mfloor) + 2 * r->w[i].claim;
	}
	c->sweep = c->sweep + 1 ? c->sweep + 1 : 1;
	return false;
}

/* No lock: the watches, started (again) when they are not running. */
static int watches(struct sl__coord_node *c)
{
	bool lost;

	pthread_mutex_lock(&c->tlock);
	lost = c->gw_lost || !c->gw;
	pthread_mutex_unlock(&c->tlock);
	if (lost) {
		sl__etcd_watch_stop(c->gw);
		c->gw = NULL;
		if (grants_watch_start(c))
			return -EAGAIN;
	}
	pthread_mutex_lock(&c->tlock);
	lost = c->cw_lost || !c->cw;
	pthread_mutex_unlock(&c->tlock);
	if (lost) {
		sl__etcd_watch_stop(c->cw);
		c->cw = NULL;
		if (sl__coord_elect_start(c))
			return -EAGAIN;
	}
	return 0;
}

int sl__coord_run(sl_lease_store *s)
{
	struct sl__coord_node *c = s->coord;
	int krc;

	if (atomic_load_explicit(&s->stop, memory_order_acquire))
		return 0;
	krc = keeper_start(c);
	if (krc)
		return krc;

	while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
		int64_t now = sl__lease_now_ns(), wake = now + INT64_C(100000000), sent = 0;
		struct round r = { NULL, 0, 0, 0, NULL, 0 };
		int64_t lead = 0;
		bool kicked, renew, any, drop;
		struct sl_lease *l;
		size_t i;
		int rc = 0;

		/* 1. Under the lock: the leases joined since, and the floors
		 * first if our own view of the session ended. */
		pthread_mutex_lock(&s->lock);
		sl__lease_take_pending(s);
		any = s->leases != NULL;
		if (any && (!c->session || !c->ttl_ms))
			session_opts(c);
		keeper_sync(c);
		if (c->session && now >= c->view_end_ns)
			fence_all(c);
		drop = c->lost_session;
		c->lost_session = false;
		/* A session to grant: the keeper keeps it alive from then. */
		renew = any && (!c->retry_ns || now >= c->retry_ns) && !c->session;
		pthread_mutex_unlock(&s->lock);
		/* Coordinators that went with the session: dropped before any
		 * store call (their writes would fail their compare anyway). */
		if (drop)
			sl__coord_drop_all(c);

		/* 2. The session, with no lock held. */
		if (renew)
			rc = session_call(c, &sent);
		if (any && (!c->retry_ns || now >= c->retry_ns) && watches(c)) {
			/* Again in a quarter period, not at once. */
			pthread_mutex_lock(&s->lock);
			retry_later(c);
			pthread_mutex_unlock(&s->lock);
		}

		/* 3. Under the lock: the session's answer; every lease due
		 * decides its report (lowering its group first). */
		pthread_mutex_lock(&s->lock);
		if (renew)
			session_done(c, rc, sent);
		drop = c->lost_session;
		c->lost_session = false;
		now = sl__lease_now_ns();
		if (c->retry_ns && now >= c->retry_ns)
			c->retry_ns = 0; /* a retry due: whatever the pace says */
		if (c->session && !c->retry_ns) {
			/* The coordinator's work follows its own pace. */
			note_budgets(c, &r);
			lead = c->session;
		}
		if (c->session && !c->retry_ns && sl__coord_pace_due(&c->pace, now)) {
			/* A grant seen while paced waits for this round. */
			pthread_mutex_lock(&c->tlock);
			kicked = c->kicked;
			c->kicked = false;
			pthread_mutex_unlock(&c->tlock);
			if (collect(c, &r, kicked, now) && kicked) {
				pthread_mutex_lock(&c->tlock);
				c->kicked = true;
				pthread_mutex_unlock(&c->tlock);
			}
		}
		pthread_mutex_unlock(&s->lock);
		if (drop)
			sl__coord_drop_all(c);

		/* 4. The store calls, with no lock a join, leave or stats takes. */
		if (r.session) {
			read_limits(c, &r);
			sl__coord_pace_begin(c);
			send_reports(c, &r);
			struct cwrite *raises[RAISES_PER_TXN];
			size_t nr = 0;

			for (i = 0; i < r.n; i++) {
				if (r.w[i].claim)
					r.w[i].rc = join_compare(c, &r.w[i], r.session);
				else if (r.w[i].raise)
					raises[nr++] = &r.w[i];
				if (nr == RAISES_PER_TXN || (nr && i + 1 == r.n)) {
					send_raises(c, raises, nr, r.session);
					nr = 0;
				}
			}
			sl__coord_pace_end(c, &c->pace);
		}
		if (lead)
			sl__coord_lead(c, sl__lease_now_ns(), r.budgets, r.nb, lead);

		/* 5. Under the lock: what the store said. */
		pthread_mutex_lock(&s->lock);
		round_done(c, &r);
		/* The leases' periods count only while they can step: without
		 * a session, or waiting to retry, a lease past its period
		 * would wake the loop at once, again and again. */
		now = sl__lease_now_ns();
		if (c->session && !c->retry_ns && now < c->pace.next_ns) {
			/* Paced: nothing is written before then. */
			if (c->pace.next_ns < wake)
				wake = c->pace.next_ns;
		} else if (c->session && !c->retry_ns) {
			for (l = s->leases; l; l = l->next)
				if (l->next_ns < wake)
					wake = l->next_ns;
			pthread_mutex_lock(&c->tlock);
			if (c->kicked)
				wake = now;
			pthread_mutex_unlock(&c->tlock);
		}
		if (c->session && c->view_end_ns < wake)
			wake = c->view_end_ns;
		if (c->retry_ns && c->retry_ns < wake)
			wake = c->retry_ns > now ? c->retry_ns : now;
		if (c->plan_wake_ns && c->plan_wake_ns < wake)
			wake = c->plan_wake_ns;
		c->plan_wake_ns = 0;
		pthread_mutex_unlock(&s->lock);
		free(r.w);
		free(r.budgets);
		sl__lease_sleep_until(s, wake);
	}
	keeper_stop(c);
	return 0;
}

/* ---- open, close, leave -------------------------------------------------- */

int sl__coord_open(sl_lease_store *s)
{
	struct sl__coord_node *c = calloc(1, sizeof(*c));
	char id[SL_LEASE_ID_MAX], *colon;
	pthread_condattr_t ca;
	int rc;

	if (!c)
		return -ENOMEM;
	c->s = s;
	c->st = s->state;
	rc = sl__etcd_make_id(c->st, id);
	colon = rc ? NULL : strrchr(id, ':');
	if (!colon) {
		free(c);
		return rc ? rc : -EIO;
	}
	colon[1] = '\0';
	snprintf(c->idprefix, sizeof(c->idprefix), "%s", id);
	/* The run thread's own connection: a leave or a budget call on the
	 * store's never waits for the run thread's calls. */
	rc = sl__etcd_conn_init(&c->conn, c->st->hosts, c->st->hosts_len, c->st->conn.timeout_ms);
	if (rc) {
		free(c);
		return rc;
	}
	/* The run thread's writes are paced by their latency: a slow answer
	 * is waited for, not sent again to another member (etcd_http.h). */
	c->conn.patient = true;
	rc = sl__etcd_conn_init(&c->kconn, c->st->hosts, c->st->hosts_len, c->st->conn.timeout_ms);
	if (rc) {
		sl__etcd_conn_fini(&c->conn);
		free(c);
		return rc;
	}
	/* Nodes start on different members (the connection fails over from
	 * there): a fleet's sessions spread over the cluster. */
	c->conn.current = (size_t)(c->st->nonce % c->conn.n_endpoints);
	c->kconn.current = c->conn.current;
	c->rnd = (uint64_t)sl__lease_now_ns() ^ c->st->nonce;
	pthread_mutex_init(&c->tlock, NULL);
	pthread_mutex_init(&c->klock, NULL);
	/* The keeper waits for CLOCK_MONOTONIC deadlines (sl__lease_now_ns()). */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->kcond, &ca);
	pthread_condattr_destroy(&ca);
	s->coord = c;
	return 0;
}

void sl__coord_close(sl_lease_store *s)
{
	struct sl__coord_node *c = s->coord;
	struct sl__celect *e;

	if (!c)
		return;
	if (sl__lease_inherited(s)) {
		/* A fork()ed child: the watch threads are the parent's, and so
		 * is the session; only the child's copy of the memory goes. */
		free(c->grants);
		free(c);
		s->coord = NULL;
		return;
	}
	sl__etcd_watch_stop(c->gw);
	sl__etcd_watch_stop(c->cw);
	sl__coord_drop_all(c);
	/* The session's keys go with it at once, not a ttl later (the run
	 * thread is stopped: its connection is ours). */
	if (c->session) {
		json_t *req = json_pack("{s:o}", "ID", sl__etcd_int(c->session)), *resp = NULL;

		if (req && sl__etcd_call(&c->conn, "/v3/lease/revoke", req, &resp, NULL) == 0)
			json_decref(resp);
		json_decref(req);
	}
	while ((e = c->elect)) {
		c->elect = e->next;
		free(e);
	}
	sl__etcd_conn_fini(&c->conn);
	sl__etcd_conn_fini(&c->kconn);
	free(c->grants);
	pthread_mutex_destroy(&c->tlock);
	pthread_mutex_destroy(&c->klock);
	pthread_cond_destroy(&c->kcond);
	free(c);
	s->coord = NULL;
}

/* On the caller's thread, with the store's own connection: the run thread
 * may be in a store call of its own. */
int sl__coord_leave(struct sl_lease *l)
{
	struct sl__coord_node *c = l->s->coord;
	char k[4][SL__ETCD_KEY_MAX];
	bool ok = false;
	int rc;

	if (!l->c_member && !l->c_session)
		return 0;
	sl__etcd_key(c->st, k[0], l->budget, "rep", l->id);
	sl__etcd_key(c->st, k[1], l->budget, "member", l->id);
	sl__etcd_key(c->st, k[2], l->budget, "grant", l->id);
	grants_key(c, k[3], l->id);
	pthread_mutex_lock(&c->st->lock);
	rc = sl__coord_txn(&c->st->conn, json_array(),
			   json_pack("[o,o,o,o]", sl__coord_op_del(k[0]), sl__coord_op_del(k[1]),
				     sl__coord_op_del(k[2]), sl__coord_op_del(k[3])),
			   &ok, NULL, NULL);
	pthread_mutex_unlock(&c->st->lock);
	if (rc == 0) {
		pthread_mutex_lock(&c->tlock);
		if (l->c_num >= 0 && (size_t)l->c_num < c->ngrants)
			memset(&c->grants[l->c_num], 0, sizeof(c->grants[0]));
		pthread_mutex_unlock(&c->tlock);
	}
	return rc;
}
