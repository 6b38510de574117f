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

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A txn carries at most this many operations (etcd's --max-txn-ops, 128 by
 * default), the compares apart. */
#define TXN_OPS 126

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

int sl__coord_txn(struct sl__etcd_store *st, json_t *cmp, json_t *ops, bool *ok, int64_t *rev,
		  json_t **resp)
{
	json_t *req, *r = NULL;
	struct sl__etcd_hdr hdr = { 0, 0 };
	int rc;

	if (!cmp || !ops) {
		json_decref(cmp);
		json_decref(ops);
		return -ENOMEM;
	}
	req = json_pack("{s:o,s:o}", "compare", cmp, "success", ops);
	if (!req)
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	rc = sl__etcd_call(&st->conn, "/v3/kv/txn", req, &r, &hdr);
	pthread_mutex_unlock(&st->lock);
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
		       size_t len)
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
		note_grant(c, ev[i].key, ev[i].deleted, ev[i].value, ev[i].value_len);
	c->kicked = true;
	pthread_mutex_unlock(&c->tlock);
	sl__coord_kick(c);
}

static void grants_reset(void *ctx, int err)
{
	struct sl__coord_node *c = ctx;

	(void)err;
	pthread_mutex_lock(&c->tlock);
	c->gw_lost = true;
	pthread_mutex_unlock(&c->tlock);
	sl__coord_kick(c);
}

/* Read our grants and watch them from there on. */
static int grants_watch_start(struct sl__coord_node *c)
{
	char key[SL__ETCD_KEY_MAX], end[SL__ETCD_KEY_MAX];
	struct sl__etcd_watch_cbs cbs = { grants_events, grants_reset, c };
	json_t *req, *resp = NULL, *kv;
	struct sl__etcd_hdr hdr = { 0, 0 };
	size_t i;
	int rc;

	grants_key(c, key, c->idprefix);
	/* The prefix ends in ':': the range end is its successor. */
	memcpy(end, key, strlen(key) + 1);
	end[strlen(end) - 1]++;
	req = json_pack("{s:o,s:o}", "key", sl__etcd_b64s(key), "range_end", sl__etcd_b64s(end));
	if (!req)
		return -ENOMEM;
	pthread_mutex_lock(&c->st->lock);
	rc = sl__etcd_call(&c->st->conn, "/v3/kv/range", req, &resp, &hdr);
	pthread_mutex_unlock(&c->st->lock);
	json_decref(req);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->tlock);
	json_array_foreach(json_object_get(resp, "kvs"), i, kv) {
		size_t kl, vl;
		char *k = sl__etcd_unb64(json_object_get(kv, "key"), &kl);
		/* The gateway leaves an empty value out. */
		json_t *jv = json_object_get(kv, "value");
		char *v = jv ? sl__etcd_unb64(jv, &vl) : strdup("");

		if (!jv)
			vl = 0;

		if (k && v)
			note_grant(c, k, false, v, vl);
		free(k);
		free(v);
	}
	c->gw_lost = false;
	pthread_mutex_unlock(&c->tlock);
	json_decref(resp);
	return sl__etcd_watch_start(&c->gw, c->st->hosts, c->st->hosts_len,
				    c->st->conn.timeout_ms, key, end, hdr.revision + 1, &cbs);
}

/* ---- the session --------------------------------------------------------- */

static int64_t keep_ms(const struct sl__coord_node *c)
{
	uint32_t k = (c->ttl_ms - c->margin_ms) / 3;

	return k > c->period_ms ? k : c->period_ms;
}

static uint32_t ttl_s(const struct sl__coord_node *c)
{
	return c->ttl_ms < 2000 ? 2 : (uint32_t)((c->ttl_ms + 999ull) / 1000);
}

/* Every lease to its floor: our view of the session ended. */
static void fence_all(struct sl__coord_node *c)
{
	struct sl_lease *l;

	for (l = c->s->leases; l; l = l->next) {
		sl__lease_fence(l);
		l->registered = false;
	}
	c->session = 0;
	sl__coord_drop_all(c);
}

/* Grant a session, or keep ours alive.  The send time, taken before the
 * call, is where our own view starts: etcd's starts when it answers. */
static int session_renew(struct sl__coord_node *c)
{
	int64_t sent = sl__lease_now_ns(), v = 0;
	struct sl_lease *l;
	json_t *req, *resp = NULL;
	int rc;

	if (c->session)
		req = json_pack("{s:o}", "ID", sl__etcd_int(c->session));
	else
		req = json_pack("{s:I}", "TTL", (json_int_t)ttl_s(c));
	if (!req)
		return -ENOMEM;
	pthread_mutex_lock(&c->st->lock);
	rc = sl__etcd_call(&c->st->conn, c->session ? "/v3/lease/keepalive" : "/v3/lease/grant",
			   req, &resp, NULL);
	pthread_mutex_unlock(&c->st->lock);
	json_decref(req);
	if (rc == 0 && c->session) {
		/* An expired lease answers without a TTL. */
		if (sl__etcd_get_int(json_object_get(resp, "TTL"), 0, &v) || v <= 0)
			rc = -ENOENT;
	} else if (rc == 0) {
		if (sl__etcd_get_int(json_object_get(resp, "ID"), 0, &v) || v == 0)
			rc = -EIO;
		else
			c->session = v;
	}
	json_decref(resp);
	if (rc == -ENOENT) {
		/* etcd's lease ended before our view did: the timing
		 * assumption broke (a stall longer than the margin).  Fall
		 * now; nothing the old session held is ours any more. */
		fence_all(c);
		return rc;
	}
	if (rc)
		return rc;
	c->view_end_ns = sent + ((int64_t)c->ttl_ms - (int64_t)c->margin_ms) * NS_PER_MS;
	c->keep_next_ns = sent + keep_ms(c) * NS_PER_MS;
	/* Every lease registered in this session was renewed with it. */
	for (l = c->s->leases; l; l = l->next) {
		if (l->c_session != c->session)
			continue;
		l->counts.renewals++;
		l->expiry_ns = c->view_end_ns;
		sl__lease_publish(l);
	}
	return 0;
}

/* ---- one lease's step ---------------------------------------------------- */

struct batch {
	json_t *ops;
	struct sl_lease *who[TXN_OPS];
	uint64_t held[TXN_OPS], demand[TXN_OPS], usage[TXN_OPS];
	size_t n;
};

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

/* Append @l's report (and its member key when it has none) to @b. */
static int batch_add(struct sl__coord_node *c, struct batch *b, struct sl_lease *l, uint64_t held,
		     uint64_t usage, uint64_t demand)
{
	char key[SL__ETCD_KEY_MAX];
	char *v = rep_json(held, usage, demand, c->session);
	int rc = 0;

	if (!v)
		return -ENOMEM;
	if (!b->ops)
		b->ops = json_array();
	sl__etcd_key(c->st, key, l->budget, "rep", l->id);
	if (!b->ops || json_array_append_new(b->ops, sl__coord_op_put(key, v, c->session)))
		rc = -ENOMEM;
	if (!rc && !l->c_member) {
		sl__etcd_key(c->st, key, l->budget, "member", l->id);
		if (json_array_append_new(b->ops, sl__coord_op_put(key, "{}", 0)))
			rc = -ENOMEM;
	}
	free(v);
	if (rc)
		return rc;
	b->who[b->n] = l;
	b->held[b->n] = held;
	b->usage[b->n] = usage;
	b->demand[b->n] = demand;
	b->n++;
	return 0;
}

/* Send @b: one txn, the reports under the session. */
static void batch_flush(struct sl__coord_node *c, struct batch *b)
{
	bool ok = false;
	size_t i;
	int rc;

	if (!b->n) {
		json_decref(b->ops);
		b->ops = NULL;
		return;
	}
	/* Under no compare: no report here makes anyone count for more (a
	 * grow goes through join_compare()). */
	rc = sl__coord_txn(c->st, json_array(), b->ops, &ok, NULL, NULL);
	b->ops = NULL;
	for (i = 0; i < b->n; i++) {
		struct sl_lease *l = b->who[i];

		if (rc || !ok) {
			l->counts.store_errors++;
			c->retry_ns = sl__lease_now_ns() + (int64_t)c->period_ms * NS_PER_MS / 4;
			sl__lease_publish(l);
			continue;
		}
		if (l->c_session != c->session)
			l->counts.renewals++;
		l->c_member = true;
		l->c_session = c->session;
		l->registered = true;
		if (b->held[i] > l->c_rep_held)
			l->counts.grants++;
		else if (b->held[i] < l->c_rep_held)
			l->counts.shrinks++;
		l->c_rep_held = l->held = b->held[i];
		l->c_rep_demand = b->demand[i];
		l->usage = b->usage[i];
		l->expiry_ns = c->view_end_ns;
		if (l->state != SL_LEASE_HELD) {
			l->state = SL_LEASE_HELD;
		}
		sl__lease_publish(l);
	}
	b->n = 0;
}

/*
 * A claim that makes us count for more than the store counts for us now
 * (a join with usage, a new session above the old grant's floor): from
 * room the budget's version says no one holds, by a compare on it.
 */
static int join_compare(struct sl__coord_node *c, struct sl_lease *l, uint64_t claim,
			uint64_t base, uint64_t usage)
{
	char bkey[SL__ETCD_KEY_MAX], vkey[SL__ETCD_KEY_MAX], rkey[SL__ETCD_KEY_MAX];
	char mkey[SL__ETCD_KEY_MAX], vbuf[48];
	struct sl_limits lim;
	json_t *ops, *resp = NULL, *kv, *doc;
	uint64_t counted = 0, grow = claim - base;
	int64_t vrev = 0, mrev;
	bool ok = false;
	char *rep;
	int rc;

	sl__etcd_key(c->st, bkey, l->budget, NULL, NULL);
	sl__etcd_key(c->st, vkey, l->budget, "version", NULL);
	ops = json_pack("[{s:{s:o}},{s:{s:o}}]", "request_range", "key", sl__etcd_b64s(bkey),
			"request_range", "key", sl__etcd_b64s(vkey));
	rc = sl__coord_txn(c->st, json_array(), ops, &ok, NULL, &resp);
	if (rc)
		return rc;
	kv = sl__etcd_txn_kv(resp, 0);
	if (!kv || sl__etcd_parse_limits(kv, &lim)) {
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
		sl__etcd_get_int(json_object_get(kv, "mod_revision"), 0, &mrev);
		vrev = mrev;
	}
	json_decref(resp);
	l->blim = lim;
	if (counted > lim.max || grow > lim.max - counted)
		return -EBUSY;
	snprintf(vbuf, sizeof(vbuf), "{\"counted\":\"%llu\"}", (unsigned long long)(counted + grow));
	rep = rep_json(claim, usage, claim, c->session);
	if (!rep)
		return -ENOMEM;
	sl__etcd_key(c->st, rkey, l->budget, "rep", l->id);
	sl__etcd_key(c->st, mkey, l->budget, "member", l->id);
	ops = json_pack("[o,o,o]", sl__coord_op_put(rkey, rep, c->session),
			sl__coord_op_put(mkey, "{}", 0), sl__coord_op_put(vkey, vbuf, 0));
	free(rep);
	rc = sl__coord_txn(c->st,
			   json_pack("[o]", sl__coord_cmp(vkey, "MOD", "mod_revision", "EQUAL", vrev)),
			   ops, &ok, NULL, NULL);
	if (rc)
		return rc;
	return ok ? 0 : -EAGAIN;
}

/* Register @l in this session: claim what the store counts for us already,
 * or our usage if more (from room, by a compare). */
static void lease_register(struct sl__coord_node *c, struct sl_lease *l,
			   const struct sl__cgrant *g, struct batch *b)
{
	uint64_t base = g->present ? g->floor : 0, cnt, claim;
	int rc;

	sl__lease_group_read(l->g, &cnt, NULL);
	/* Lower first: from here the group holds at most the claim. */
	if (l->applied > max_u64(base, cnt))
		sl__lease_apply(l, max_u64(base, cnt));
	sl__lease_group_read(l->g, &cnt, NULL);
	claim = max_u64(base, cnt);
	if (claim <= base) {
		if (batch_add(c, b, l, claim, cnt, claim))
			l->counts.store_errors++;
		return;
	}
	rc = join_compare(c, l, claim, base, cnt);
	if (rc == 0) {
		l->counts.renewals++;
		l->c_member = true;
		l->c_session = c->session;
		l->registered = true;
		l->c_rep_held = l->held = claim;
		l->usage = cnt;
		l->expiry_ns = c->view_end_ns;
		l->state = SL_LEASE_HELD;
		if (l->applied < claim)
			sl__lease_apply(l, claim);
		sl__lease_publish(l);
		return;
	}
	if (rc == -EBUSY) {
		/* Not room for our usage: shrink toward the floor the store
		 * counts for us, and claim what is left a later period. */
		if (l->applied > base)
			sl__lease_apply(l, base);
		return;
	}
	if (rc != -EAGAIN && rc != -ENOENT) {
		l->counts.store_errors++;
		c->retry_ns = sl__lease_now_ns() + (int64_t)c->period_ms * NS_PER_MS / 4;
	}
}

static void lease_step(struct sl__coord_node *c, struct sl_lease *l, struct batch *b)
{
	struct sl__cgrant g;
	uint64_t cnt, ev, target, held;
	bool cur;

	memset(&g, 0, sizeof(g));
	pthread_mutex_lock(&c->tlock);
	if (l->c_num >= 0 && (size_t)l->c_num < c->ngrants)
		g = c->grants[l->c_num];
	pthread_mutex_unlock(&c->tlock);
	if (g.present) {
		l->blim = g.lim;
		/* What the store counts for us once our report is gone. */
		if (g.floor != l->floor) {
			if (g.floor < l->floor && l->applied > g.floor && l->state == SL_LEASE_FENCED)
				sl__lease_apply(l, g.floor);
			l->floor = g.floor;
			sl__lease_publish(l);
		}
	}
	if (l->c_session != c->session) {
		lease_register(c, l, &g, b);
		return;
	}
	cur = g.present && g.session == c->session;
	sl__lease_group_read(l->g, &cnt, &ev);
	l->demand = sl__lease_my_demand(l, cnt, ev, l->blim.max);
	/* Without a grant for this session we hold what we reported. */
	target = cur ? g.held : l->c_rep_held;
	if (target != l->applied)
		sl__lease_apply(l, target);
	if (target < l->c_rep_held)
		sl__lease_group_read(l->g, &cnt, NULL);
	held = max_u64(target, min_u64(cnt, l->c_rep_held));
	/* Report a held that moved, or a demand that moved by more than an
	 * eighth of the share: small moves are not worth a write. */
	if (held != l->c_rep_held ||
	    (l->demand > l->c_rep_demand ? l->demand - l->c_rep_demand
					 : l->c_rep_demand - l->demand) > max_u64(l->applied / 8, 1)) {
		if (batch_add(c, b, l, held, cnt, l->demand))
			l->counts.store_errors++;
	} else {
		l->usage = cnt;
		l->expiry_ns = c->view_end_ns;
		sl__lease_publish(l);
	}
}

/* ---- the loop ------------------------------------------------------------ */

/* The session follows the leases' options: the shortest ttl and period,
 * the longest margin. */
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

static void node_step(struct sl__coord_node *c, bool kicked)
{
	struct batch b = { NULL, { NULL }, { 0 }, { 0 }, { 0 }, 0 };
	int64_t now = sl__lease_now_ns();
	struct sl_lease *l;
	bool lost;

	if (!c->s->leases)
		return;
	if (!c->session || !c->ttl_ms)
		session_opts(c);
	/* Our own view ended (a stall, a store out of reach): the floors
	 * first, before any store call. */
	if (c->session && now >= c->view_end_ns)
		fence_all(c);
	if (c->retry_ns && now < c->retry_ns && !kicked)
		return;
	c->retry_ns = 0;
	pthread_mutex_lock(&c->tlock);
	lost = c->gw_lost || !c->gw;
	pthread_mutex_unlock(&c->tlock);
	if (lost) {
		sl__etcd_watch_stop(c->gw);
		c->gw = NULL;
		if (grants_watch_start(c)) {
			c->retry_ns = now + (int64_t)c->period_ms * NS_PER_MS / 4;
			return;
		}
	}
	if (!c->session || now >= c->keep_next_ns) {
		int rc = session_renew(c);

		if (rc) {
			for (l = c->s->leases; l; l = l->next) {
				l->counts.store_errors++;
				sl__lease_publish(l);
			}
			c->retry_ns = sl__lease_now_ns() + (int64_t)c->period_ms * NS_PER_MS / 4;
			return;
		}
	}
	for (l = c->s->leases; l; l = l->next) {
		if (!kicked && now < l->next_ns)
			continue;
		if (now >= l->next_ns) {
			l->next_ns += (int64_t)l->opts.period_ms * NS_PER_MS;
			if (l->next_ns <= now)
				l->next_ns = now + (int64_t)l->opts.period_ms * NS_PER_MS;
		}
		lease_step(c, l, &b);
		if (b.n >= TXN_OPS / 2)
			batch_flush(c, &b);
	}
	batch_flush(c, &b);
}

int sl__coord_run(sl_lease_store *s)
{
	struct sl__coord_node *c = s->coord;

	while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
		int64_t now = sl__lease_now_ns(), wake = now + INT64_C(100000000);
		bool kicked;
		struct sl_lease *l;

		pthread_mutex_lock(&s->lock);
		sl__lease_take_pending(s);
		pthread_mutex_lock(&c->tlock);
		kicked = c->kicked;
		c->kicked = false;
		pthread_mutex_unlock(&c->tlock);
		node_step(c, kicked);
		if (c->session)
			sl__coord_lead(c, sl__lease_now_ns());
		for (l = s->leases; l; l = l->next)
			if (l->next_ns < wake)
				wake = l->next_ns;
		if (c->session && c->keep_next_ns < wake)
			wake = c->keep_next_ns;
		if (c->session && c->view_end_ns < wake)
			wake = c->view_end_ns;
		if (c->retry_ns && c->retry_ns < wake)
			wake = c->retry_ns;
		pthread_mutex_unlock(&s->lock);
		sl__lease_sleep_until(s, wake);
	}
	return 0;
}

/* ---- open, close, leave -------------------------------------------------- */

int sl__coord_open(sl_lease_store *s)
{
	struct sl__coord_node *c = calloc(1, sizeof(*c));
	char id[SL_LEASE_ID_MAX], *colon;
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
	c->rnd = (uint64_t)sl__lease_now_ns() ^ c->st->nonce;
	pthread_mutex_init(&c->tlock, NULL);
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
	/* The session's keys go with it at once, not a ttl later. */
	if (c->session) {
		json_t *req = json_pack("{s:o}", "ID", sl__etcd_int(c->session)), *resp = NULL;

		pthread_mutex_lock(&c->st->lock);
		if (req && sl__etcd_call(&c->st->conn, "/v3/lease/revoke", req, &resp, NULL) == 0)
			json_decref(resp);
		pthread_mutex_unlock(&c->st->lock);
		json_decref(req);
	}
	while ((e = c->elect)) {
		c->elect = e->next;
		free(e);
	}
	free(c->grants);
	pthread_mutex_destroy(&c->tlock);
	free(c);
	s->coord = NULL;
}

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
	rc = sl__coord_txn(c->st, json_array(),
			   json_pack("[o,o,o,o]", sl__coord_op_del(k[0]), sl__coord_op_del(k[1]),
				     sl__coord_op_del(k[2]), sl__coord_op_del(k[3])),
			   &ok, NULL, NULL);
	if (rc == 0) {
		pthread_mutex_lock(&c->tlock);
		if (l->c_num >= 0 && (size_t)l->c_num < c->ngrants)
			memset(&c->grants[l->c_num], 0, sizeof(c->grants[0]));
		pthread_mutex_unlock(&c->tlock);
	}
	return rc;
}
