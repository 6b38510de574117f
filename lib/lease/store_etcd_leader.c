/* SPDX-License-Identifier: MIT */
/*
 * The coordinated etcd protocol, coordinator side (store_etcd_coord.h):
 * elections, and for each budget this node coordinates, a table of its
 * members kept by a watch, a plan (coord.c) on every change, and the grants
 * written in transactions that compare the coordinator's term, so that a
 * deposed coordinator (stopped past its session, then woken) writes
 * nothing.  A transaction that raises anyone also compares the budget's
 * version and rewrites it with what the store then counts: joins, which
 * claim room by the same compare, and grants never take the same room.
 *
 * A new coordinator reads the whole budget (limits, version, members,
 * reports, grants) before it writes anything; every grant it must respect
 * is there, since its predecessor's writes after the election fail.
 */
#define _GNU_SOURCE
#include "store_etcd_coord.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord.h"

/* Each grant is two puts; a txn that grows also puts the version. */
#define GRANTS_PER_TXN 62

static uint64_t rnd_next(struct sl__coord_node *c)
{
	/* xorshift64: only spreads campaigns in time. */
	c->rnd ^= c->rnd << 13;
	c->rnd ^= c->rnd >> 7;
	c->rnd ^= c->rnd << 17;
	return c->rnd;
}

static void coord_key(const struct sl__coord_node *c, char *out, const char *name)
{
	snprintf(out, SL__ETCD_KEY_MAX, "%s/coord/%s", c->st->prefix, name);
}

/* ---- elections ----------------------------------------------------------- */

static struct sl__celect *elect_of(struct sl__coord_node *c, const char *name, bool create)
{
	struct sl__celect *e;

	for (e = c->elect; e; e = e->next)
		if (!strcmp(e->name, name))
			return e;
	if (!create)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->next = c->elect;
	c->elect = e;
	return e;
}

static struct sl__cbudget *led_of(struct sl__coord_node *c, const char *name)
{
	struct sl__cbudget *b;

	for (b = c->led; b; b = b->next)
		if (!strcmp(b->name, name))
			return b;
	return NULL;
}

/* The value of a coord key this node's campaign writes, into @out. */
static void coord_value(const struct sl__coord_node *c, char *out, size_t size)
{
	snprintf(out, size, "{\"node\":\"%s\"}", c->idprefix);
}

/* Under tlock: the coord key of @name is there (its value @v) or gone. */
static void note_coord(struct sl__coord_node *c, const char *key, bool deleted, int64_t rev,
		       const char *v)
{
	char mine[SL_LEASE_ID_MAX + 16];
	size_t plen = strlen(c->st->prefix) + strlen("/coord/");
	struct sl__celect *e;
	struct sl__cbudget *b;

	if (strlen(key) <= plen || !sl__lease_name_ok(key + plen))
		return;
	e = elect_of(c, key + plen, true);
	if (!e)
		return;
	coord_value(c, mine, sizeof(mine));
	e->held = !deleted;
	e->mine = !deleted && v && !strcmp(v, mine);
	e->rev = rev;
	e->campaign_ns = 0;
	b = led_of(c, key + plen);
	/* Ours is gone (our session ended) or another's: we lead no more. */
	if (b && (deleted || b->term == 0))
		b->lost = true;
}

static void coord_events(void *ctx, const struct sl__etcd_event *ev, size_t n, int64_t rev)
{
	struct sl__coord_node *c = ctx;
	size_t i;

	(void)rev;
	pthread_mutex_lock(&c->tlock);
	for (i = 0; i < n; i++) {
		struct sl__cbudget *b;
		size_t plen = strlen(c->st->prefix) + strlen("/coord/");

		note_coord(c, ev[i].key, ev[i].deleted, ev[i].mod_revision ? ev[i].mod_revision : rev,
			   ev[i].value);
		/* A put with another term than ours: deposed. */
		if (!ev[i].deleted && strlen(ev[i].key) > plen) {
			b = led_of(c, ev[i].key + plen);
			if (b && b->term != ev[i].create_revision)
				b->lost = true;
		}
	}
	c->kicked = true;
	pthread_mutex_unlock(&c->tlock);
	sl__coord_kick(c);
}

static void coord_reset(void *ctx, int err)
{
	struct sl__coord_node *c = ctx;

	(void)err;
	sl__coord_lost(c, &c->cw_lost);
}

/* On the run thread's connection. */
static int range_read(struct sl__coord_node *c, json_t *req, json_t **resp, int64_t *rev)
{
	struct sl__etcd_hdr hdr = { 0, 0 };
	int rc;

	if (!req)
		return -ENOMEM;
	rc = sl__etcd_call(&c->conn, "/v3/kv/range", req, resp, &hdr);
	json_decref(req);
	*rev = hdr.revision;
	return rc;
}

struct elect_read {
	struct sl__coord_node *c;
	int64_t rev; /* the range's revision: what says the key is there */
};

static void coord_kv(void *ctx, const char *k, const char *v, size_t vl, int64_t rev)
{
	struct elect_read *r = ctx;

	(void)vl;
	(void)rev;
	note_coord(r->c, k, false, r->rev, v);
}

int sl__coord_elect_start(struct sl__coord_node *c)
{
	char key[SL__ETCD_KEY_MAX], end[SL__ETCD_KEY_MAX];
	struct sl__etcd_watch_cbs cbs = { coord_events, coord_reset, c };
	struct elect_read r;
	struct sl__celect *e;
	json_t *resp = NULL;
	int64_t rev = 0;
	int rc;

	snprintf(key, sizeof(key), "%s/coord/", c->st->prefix);
	sl__etcd_prefix_end(end, key);
	/* Serializable: a key a member behind does not show yet, or shows
	 * gone too late, costs at most a campaign that fails its compare, or
	 * a wait for the watch to say the key went. */
	rc = range_read(c, sl__coord_watch_read(key, end), &resp, &rev);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->tlock);
	for (e = c->elect; e; e = e->next)
		e->held = false;
	r.c = c;
	r.rev = rev;
	sl__coord_each_kv(json_object_get(resp, "kvs"), coord_kv, &r);
	c->cw_lost = false;
	pthread_mutex_unlock(&c->tlock);
	json_decref(resp);
	return sl__etcd_watch_start(&c->cw, c->st->hosts, c->st->hosts_len, c->st->conn.timeout_ms,
				    key, end, rev + 1, &cbs);
}

/* ---- a led budget's table ------------------------------------------------ */

static struct sl__cmember *member_of(struct sl__cbudget *b, const char *id, bool create)
{
	size_t i;

	if (!id[0] || strlen(id) >= SL_LEASE_ID_MAX)
		return NULL;
	for (i = 0; i < b->n; i++)
		if (!strcmp(b->m[i].id, id))
			return &b->m[i];
	if (!create)
		return NULL;
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		struct sl__cmember *p = realloc(b->m, cap * sizeof(*p));

		if (!p)
			return NULL;
		b->m = p;
		b->cap = cap;
	}
	memset(&b->m[b->n], 0, sizeof(b->m[0]));
	snprintf(b->m[b->n].id, SL_LEASE_ID_MAX, "%s", id);
	return &b->m[b->n++];
}

static int parse_rep(const char *v, size_t len, struct sl__crep *r)
{
	json_t *o = json_loadb(v, len, 0, NULL);
	uint64_t session = 0;
	int rc = -EIO;

	memset(r, 0, sizeof(*r));
	if (o && !sl__etcd_get_u64(o, "held", &r->held) && !sl__etcd_get_u64(o, "usage", &r->usage) &&
	    !sl__etcd_get_u64(o, "demand", &r->demand) && !sl__etcd_get_u64(o, "session", &session)) {
		r->session = (int64_t)session;
		r->present = true;
		rc = 0;
	}
	json_decref(o);
	return rc;
}

/* Under tlock: one key of the budget's range changed. */
static void note_key(struct sl__cbudget *b, const char *base, const char *key, bool deleted,
		     const char *v, size_t len, int64_t mod_rev)
{
	size_t blen = strlen(base);
	const char *rest;
	struct sl__cmember *m;
	struct sl_limits lim;

	if (strncmp(key, base, blen) != 0)
		return;
	rest = key + blen;
	if (!*rest) {
		json_t *kv = NULL;
		char *b64 = NULL;

		/* The limits: parsed as the store parses them. */
		b->have_lim = false;
		if (!deleted) {
			json_t *doc = json_loadb(v, len, 0, NULL);

			if (doc && !sl__etcd_get_u64(doc, "max", &lim.max) &&
			    !sl__etcd_get_u64(doc, "soft", &lim.soft) &&
			    !sl__etcd_get_u64(doc, "min", &lim.min)) {
				b->lim = lim;
				b->have_lim = true;
			}
			json_decref(doc);
		}
		(void)kv;
		(void)b64;
		b->dirty = true;
		return;
	}
	if (*rest != '/')
		return; /* another budget whose name starts with ours */
	rest++;
	if (!strcmp(rest, "version")) {
		b->version_rev = deleted ? 0 : mod_rev;
		return;
	}
	if (!strncmp(rest, "member/", 7)) {
		m = member_of(b, rest + 7, !deleted);
		if (m) {
			json_t *doc = deleted ? NULL : json_loadb(v, len, 0, NULL);

			m->member = !deleted;
			/* No floor: 0.  An unreadable one: counted as the
			 * whole budget, so nothing is granted past it. */
			m->m_floor = 0;
			if (doc && json_object_get(doc, "floor") &&
			    sl__etcd_get_u64(doc, "floor", &m->m_floor))
				m->m_floor = UINT64_MAX;
			if (!deleted && !doc)
				m->m_floor = UINT64_MAX;
			json_decref(doc);
		}
	} else if (!strncmp(rest, "rep/", 4)) {
		m = member_of(b, rest + 4, !deleted);
		if (m && (deleted || parse_rep(v, len, &m->rep)))
			memset(&m->rep, 0, sizeof(m->rep));
		if (m && m->rep.present)
			m->rep.rev = mod_rev;
	} else if (!strncmp(rest, "rec/", 4) || !strncmp(rest, "floor/", 6)) {
		bool rec = rest[0] == 'r';
		json_t *doc = deleted ? NULL : json_loadb(v, len, 0, NULL);
		uint64_t x = 0;

		m = member_of(b, rest + (rec ? 4 : 6), !deleted);
		if (m) {
			/* Unreadable: counted as the whole budget, so nothing
			 * is granted until it is gone. */
			if (!deleted && (!doc || sl__etcd_get_u64(doc, rec ? "held" : "floor", &x)))
				x = UINT64_MAX;
			if (rec) {
				m->f_rec = !deleted;
				m->f_held = x;
			} else {
				m->f_floor = !deleted;
				m->f_floorv = x;
			}
		}
		json_decref(doc);
	} else if (!strncmp(rest, "grant/", 6)) {
		m = member_of(b, rest + 6, !deleted);
		if (m && (deleted || sl__coord_parse_grant(v, len, &m->grant, NULL)))
			memset(&m->grant, 0, sizeof(m->grant));
	} else {
		return;
	}
	b->dirty = true;
}

static void budget_base(const struct sl__cbudget *b, char *out)
{
	snprintf(out, SL__ETCD_KEY_MAX, "%s/budgets/%s", b->node->st->prefix, b->name);
}

static void budget_events(void *ctx, const struct sl__etcd_event *ev, size_t n, int64_t rev)
{
	struct sl__cbudget *b = ctx;
	struct sl__coord_node *c = b->node;
	char base[SL__ETCD_KEY_MAX];
	size_t i;

	(void)rev;
	budget_base(b, base);
	pthread_mutex_lock(&c->tlock);
	for (i = 0; i < n; i++)
		note_key(b, base, ev[i].key, ev[i].deleted, ev[i].value, ev[i].value_len,
			 ev[i].mod_revision);
	c->kicked = true;
	pthread_mutex_unlock(&c->tlock);
	sl__coord_kick(c);
}

static void budget_reset(void *ctx, int err)
{
	struct sl__cbudget *b = ctx;

	(void)err;
	pthread_mutex_lock(&b->node->tlock);
	b->lost = true; /* read it all again: campaign anew */
	pthread_mutex_unlock(&b->node->tlock);
	sl__coord_kick(b->node);
}

static void budget_free(struct sl__cbudget *b)
{
	sl__etcd_watch_stop(b->w);
	free(b->m);
	free(b);
}

static void budget_kv(void *ctx, const char *k, const char *v, size_t vl, int64_t rev)
{
	struct sl__cbudget *b = ctx;
	char base[SL__ETCD_KEY_MAX];

	budget_base(b, base);
	note_key(b, base, k, false, v, vl, rev);
}

/* We won @name at @term: read the whole budget, then watch it. */
static int lead_start(struct sl__coord_node *c, const char *name, int64_t term)
{
	struct sl__cbudget *b = calloc(1, sizeof(*b));
	char base[SL__ETCD_KEY_MAX], end[SL__ETCD_KEY_MAX + 1];
	struct sl__etcd_watch_cbs cbs = { budget_events, budget_reset, NULL };
	json_t *req, *resp = NULL;
	int64_t rev = 0;
	int rc;

	if (!b)
		return -ENOMEM;
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->term = term;
	b->node = c;
	cbs.ctx = b;
	budget_base(b, base);
	/* [base, base + '0'): the limits key and everything under base/
	 * (a key is far shorter than SL__ETCD_KEY_MAX: it always fits). */
	memcpy(end, base, strlen(base));
	end[strlen(base)] = '0';
	end[strlen(base) + 1] = '\0';
	req = json_pack("{s:o,s:o}", "key", sl__etcd_b64s(base), "range_end", sl__etcd_b64s(end));
	rc = range_read(c, req, &resp, &rev);
	if (rc) {
		free(b);
		return rc;
	}
	pthread_mutex_lock(&c->tlock);
	sl__coord_each_kv(json_object_get(resp, "kvs"), budget_kv, b);
	b->dirty = true;
	b->next = c->led;
	c->led = b;
	pthread_mutex_unlock(&c->tlock);
	json_decref(resp);
	rc = sl__etcd_watch_start(&b->w, c->st->hosts, c->st->hosts_len, c->st->conn.timeout_ms,
				  base, end, rev + 1, &cbs);
	if (rc) {
		pthread_mutex_lock(&c->tlock);
		b->lost = true;
		pthread_mutex_unlock(&c->tlock);
	}
	return 0;
}

/* When a failed retake of our own coord key goes again: a period later.
 * It is not paced (sl__coord_lead()), and would otherwise go every round. */
static int64_t retake_at(const struct sl__coord_node *c)
{
	return sl__lease_now_ns() + (int64_t)c->period_ms * NS_PER_MS;
}

/*
 * Campaign for @name: create its coord key under our session.  A key that
 * is there already and names us is ours still (a campaign we won whose
 * budget we dropped: its watch was reset, or the read after the election
 * failed): we lead it again under the same term.  Another's is taken as
 * held until the coord watch says it went.
 */
static void campaign(struct sl__coord_node *c, const char *name, int64_t session)
{
	char key[SL__ETCD_KEY_MAX], val[SL_LEASE_ID_MAX + 16];
	struct sl__etcd_hdr hdr = { 0, 0 };
	struct sl__celect *e;
	json_t *req, *resp = NULL, *kv, *doc;
	int64_t rev = 0, term = 0, t0;
	bool ok, ours = false;
	int rc;

	coord_key(c, key, name);
	coord_value(c, val, sizeof(val));
	req = json_pack("{s:[o],s:[o],s:[{s:{s:o}}]}", "compare",
			sl__coord_cmp(key, "CREATE", "create_revision", "EQUAL", 0), "success",
			sl__coord_op_put(key, val, session), "failure", "request_range", "key",
			sl__etcd_b64s(key));
	t0 = sl__lease_now_ns();
	rc = req ? sl__etcd_call(&c->conn, "/v3/kv/txn", req, &resp, &hdr) : -ENOMEM;
	json_decref(req);
	sl__coord_note_lat(c, t0, rc);
	if (rc) {
		pthread_mutex_lock(&c->tlock);
		e = elect_of(c, name, false);
		if (e && e->mine)
			e->campaign_ns = retake_at(c);
		pthread_mutex_unlock(&c->tlock);
		return;
	}
	rev = hdr.revision;
	ok = json_is_true(json_object_get(resp, "succeeded"));
	kv = ok ? NULL : sl__etcd_txn_kv(resp, 0);
	if (kv && (doc = sl__etcd_kv_json(kv)) != NULL) {
		const char *node = json_string_value(json_object_get(doc, "node"));

		ours = node && !strcmp(node, c->idprefix) &&
		       !sl__etcd_get_int(json_object_get(kv, "create_revision"), 0, &term) && term > 0;
		json_decref(doc);
	}
	json_decref(resp);
	/* Won: the txn's revision is the key's create_revision, our term. */
	if (ok || ours) {
		if (lead_start(c, name, ok ? rev : term)) {
			/* Not read: campaign again (and find the key ours). */
			pthread_mutex_lock(&c->tlock);
			e = elect_of(c, name, true);
			if (e) {
				e->held = true;
				e->mine = true;
				e->campaign_ns = retake_at(c);
			}
			pthread_mutex_unlock(&c->tlock);
		}
		return;
	}
	/* Another holds it: so we take it until the coord watch says it is
	 * gone (a campaign lost while the watch lags would otherwise be tried
	 * again every period, by every node, for every budget). */
	pthread_mutex_lock(&c->tlock);
	e = elect_of(c, name, true);
	/* Unless the watch already said it went after our txn. */
	if (e && e->rev <= rev) {
		e->held = true;
		e->mine = false;
		e->rev = rev;
		e->campaign_ns = 0;
	}
	pthread_mutex_unlock(&c->tlock);
}

/* The nodes of a budget campaign in 16 waves a quarter period apart, each
 * node in the wave its id and the budget's name hash to: the first wave's
 * winner is seen by the others (through the coord watch) before they try,
 * so an election costs about a sixteenth of the members' campaigns, not
 * all of them. */
static int64_t campaign_delay(const struct sl__coord_node *c, const char *name, uint64_t rnd)
{
	uint64_t h = 1469598103934665603ull, q = (uint64_t)c->period_ms * NS_PER_MS / 4 + 1;
	const char *p;

	for (p = c->idprefix; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	for (p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return (int64_t)((h % 16) * q + rnd % q);
}

/* ---- the plan and its writes --------------------------------------------- */

static char *grant_json(const char *budget, uint64_t held, uint64_t floor, int64_t term,
			int64_t session, const struct sl_limits *lim)
{
	json_t *o = json_pack("{s:s}", "budget", budget);
	char *s = NULL;

	if (o && !sl__etcd_set_u64(o, "held", held) && !sl__etcd_set_u64(o, "floor", floor) &&
	    !sl__etcd_set_u64(o, "term", (uint64_t)term) &&
	    !sl__etcd_set_u64(o, "session", (uint64_t)session) &&
	    !sl__etcd_set_u64(o, "max", lim->max) && !sl__etcd_set_u64(o, "soft", lim->soft) &&
	    !sl__etcd_set_u64(o, "min", lim->min))
		s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

struct planned {
	char id[SL_LEASE_ID_MAX];
	int64_t session;
	int64_t rep_rev; /* the report the plan read (0: none) */
	bool done;       /* its grant was written                              */
};

/* The report key of member @id into @out. */
static const char *rkey_of(const struct sl__coord_node *c, const struct sl__cbudget *b,
			   const char *id, char *out)
{
	sl__etcd_key(c->st, out, b->name, "rep", id);
	return out;
}

static void set_version_rev(struct sl__coord_node *c, struct sl__cbudget *b, int64_t rev)
{
	pthread_mutex_lock(&c->tlock);
	if (rev > b->version_rev)
		b->version_rev = rev;
	pthread_mutex_unlock(&c->tlock);
}

/*
 * Write the planned grants of @b: the shrinks (and other writes that raise
 * no one) first, then the grows, each txn under the term compare; the grows
 * also under the version compare, rewriting the version with @counted.
 * At most *@allow operations are written (it is lowered by what is): the
 * grants written are marked done.  Returns 0, -EINPROGRESS (the window is
 * full: the rest later), -EAGAIN (a compare failed: deposed, or a join
 * came between), or a store error.
 */
static int write_grants(struct sl__coord_node *c, struct sl__cbudget *b,
			const struct sl__coord_member *m, struct planned *p, size_t n,
			const struct sl_limits *lim, int64_t vrev, uint64_t counted, size_t *allow)
{
	char ckey[SL__ETCD_KEY_MAX], vkey[SL__ETCD_KEY_MAX], k1[SL__ETCD_KEY_MAX],
		k2[SL__ETCD_KEY_MAX], vbuf[48];
	int pass;

	coord_key(c, ckey, b->name);
	sl__etcd_key(c->st, vkey, b->name, "version", NULL);
	for (pass = 0; pass < 2; pass++) {
		size_t i = 0;

		while (i < n) {
			json_t *ops = json_array(), *cmp;
			size_t k = 0, in[GRANTS_PER_TXN], j, most = *allow / 2;
			int64_t rev = 0;
			bool ok = false;
			int rc;

			if (most > GRANTS_PER_TXN)
				most = GRANTS_PER_TXN;

			cmp = json_pack("[o]", sl__coord_cmp(ckey, "CREATE", "create_revision",
							     "EQUAL", b->term));
			for (; i < n && k < GRANTS_PER_TXN; i++) {
				char *v;

				if (!m[i].write || m[i].grows != (pass == 1))
					continue;
				if (k == most)
					break; /* the pace's window is full */
				/* A cut frees room (down to what the member's
				 * report says) only if that report is still the
				 * one the plan read: a report that acknowledged a
				 * raise since would be counted at the old grant. */
				if (m[i].granted && m[i].held < m[i].g_held && p[i].rep_rev && cmp)
					json_array_append_new(cmp, sl__coord_cmp(rkey_of(c, b, p[i].id, k1),
										 "MOD", "mod_revision",
										 "EQUAL", p[i].rep_rev));
				v = grant_json(b->name, m[i].held, m[i].floor, b->term, p[i].session,
					       lim);
				if (!v) {
					json_decref(ops);
					json_decref(cmp);
					return -ENOMEM;
				}
				sl__etcd_key(c->st, k1, b->name, "grant", p[i].id);
				snprintf(k2, sizeof(k2), "%s/grants/%s", c->st->prefix, p[i].id);
				json_array_append_new(ops, sl__coord_op_put(k1, v, 0));
				json_array_append_new(ops, sl__coord_op_put(k2, v, 0));
				free(v);
				in[k++] = i;
			}
			if (!k) {
				json_decref(ops);
				json_decref(cmp);
				if (i < n)
					goto paced;
				continue;
			}
			if (pass == 1) {
				snprintf(vbuf, sizeof(vbuf), "{\"counted\":\"%llu\"}",
					 (unsigned long long)counted);
				json_array_append_new(cmp, sl__coord_cmp(vkey, "MOD", "mod_revision",
									 "EQUAL", vrev));
				json_array_append_new(ops, sl__coord_op_put(vkey, vbuf, 0));
			}
			rc = sl__coord_wtxn(c, cmp, ops, &ok, &rev, NULL);
			if (rc)
				return rc;
			if (!ok)
				return -EAGAIN;
			*allow -= 2 * k;
			for (j = 0; j < k; j++)
				p[in[j]].done = true;
			if (pass == 1) {
				vrev = rev;
				set_version_rev(c, b, rev);
			}
		}
	}
	return 0;
paced:
	/* The rest wait for the next round: the version says at least what
	 * the store counts (the plan's sum, of which only part is written). */
	return -EINPROGRESS;
}

/* Plan @b from its table and write what changed. */
static void lead_one(struct sl__coord_node *c, struct sl__cbudget *b, size_t *allow)
{
	struct sl__coord_budget cb;
	struct sl__coord_member *m = NULL;
	struct planned *p = NULL;
	struct sl_limits lim;
	void *scratch = NULL;
	size_t i, n = 0, nrep = 0, writes;
	uint64_t counted = 0, foreign = 0;
	int64_t vrev;
	int rc;

	pthread_mutex_lock(&c->tlock);
	b->dirty = false;
	if (!b->have_lim) {
		pthread_mutex_unlock(&c->tlock);
		return;
	}
	lim = b->lim;
	vrev = b->version_rev;
	m = calloc(b->n + 1, sizeof(*m));
	p = calloc(b->n + 1, sizeof(*p));
	scratch = malloc(sl__coord_scratch_size(b->n + 1));
	if (!m || !p || !scratch) {
		b->dirty = true;
		pthread_mutex_unlock(&c->tlock);
		goto out;
	}
	for (i = 0; i < b->n; i++) {
		const struct sl__cmember *x = &b->m[i];

		/* The decentralized protocol's records take their room first. */
		if (x->f_rec)
			foreign = sat_add(foreign, x->f_held);
		else if (x->f_floor)
			foreign = sat_add(foreign, x->f_floorv);
		if (!x->member)
			continue;
		m[n].granted = x->grant.present;
		m[n].g_held = x->grant.present ? x->grant.held : 0;
		m[n].g_floor = x->grant.present ? x->grant.floor : 0;
		m[n].reported = x->rep.present;
		m[n].grant_current = x->grant.present && x->rep.present &&
				     x->grant.session == x->rep.session;
		m[n].r_held = x->rep.present ? x->rep.held : 0;
		m[n].m_floor = x->m_floor;
		m[n].demand = x->rep.present ? x->rep.demand : 0;
		snprintf(p[n].id, sizeof(p[n].id), "%s", x->id);
		p[n].session = x->rep.session;
		p[n].rep_rev = x->rep.present ? x->rep.rev : 0;
		nrep += x->rep.present;
		n++;
	}
	pthread_mutex_unlock(&c->tlock);
	cb.max = lim.max > foreign ? lim.max - foreign : 0;
	cb.min = lim.min;
	cb.dead_band = lim.max / (16 * (nrep ? nrep : 1));
	writes = sl__coord_plan(&cb, m, n, scratch);
	if (!writes)
		goto out;
	/* What the store counts once every planned grant is written. */
	counted = foreign;
	for (i = 0; i < n; i++) {
		struct sl__coord_member after = m[i];

		if (m[i].write) {
			after.granted = true;
			after.g_held = m[i].held;
			after.g_floor = m[i].floor;
			after.grant_current = m[i].reported;
		}
		counted = sat_add(counted, sl__coord_counted(&after));
	}
	rc = write_grants(c, b, m, p, n, &lim, vrev, counted, allow);
	pthread_mutex_lock(&c->tlock);
	/* As the watch will say: the next plan starts from here. */
	for (i = 0; i < n; i++) {
		struct sl__cmember *x;

		if (!p[i].done || !(x = member_of(b, p[i].id, false)))
			continue;
		x->grant.present = true;
		x->grant.held = m[i].held;
		x->grant.floor = m[i].floor;
		x->grant.term = (uint64_t)b->term;
		x->grant.session = p[i].session;
		x->grant.lim = lim;
	}
	/* The store failed, or the window was full: again in a quarter
	 * period at the soonest.  A compare that failed (-EAGAIN) means a
	 * write we have not seen came between (a join, a report, or another
	 * coordinator's election): its event is on its way, and the plan is
	 * made again when it arrives, not before. */
	if (rc && rc != -EAGAIN)
		b->dirty = true;
	pthread_mutex_unlock(&c->tlock);
out:
	free(m);
	free(p);
	free(scratch);
}

void sl__coord_drop_all(struct sl__coord_node *c)
{
	struct sl__cbudget *b;

	pthread_mutex_lock(&c->tlock);
	b = c->led;
	c->led = NULL;
	pthread_mutex_unlock(&c->tlock);
	while (b) {
		struct sl__cbudget *next = b->next;

		budget_free(b);
		b = next;
	}
}

void sl__coord_lead(struct sl__coord_node *c, int64_t now, char (*budgets)[SL_LEASE_NAME_MAX],
		    size_t nb, int64_t session)
{
	struct sl__cbudget *b, **pp;
	size_t i, allow;
	bool due;

	/* Budgets we lead no more. */
	pthread_mutex_lock(&c->tlock);
	for (pp = &c->led; (b = *pp);) {
		if (b->lost) {
			*pp = b->next;
			pthread_mutex_unlock(&c->tlock);
			budget_free(b);
			pthread_mutex_lock(&c->tlock);
			continue;
		}
		pp = &b->next;
	}
	pthread_mutex_unlock(&c->tlock);
	/* Campaigns and grants are writes: they follow the pace (coord.h),
	 * and a round writes at most its window.  A thousand nodes joining a
	 * hundred budgets would otherwise send thousands of campaigns at
	 * once, each a raft entry. */
	due = sl__coord_pace_due(&c->lpace, now);
	if (!due && (!c->plan_wake_ns || c->lpace.next_ns < c->plan_wake_ns))
		c->plan_wake_ns = c->lpace.next_ns;
	/* Paced, only our own coord keys are taken back (below): a budget
	 * we still hold the key of has no coordinator until we do. */
	allow = due ? c->lpace.window : 0;
	sl__coord_pace_begin(c);
	/* Campaign for the budgets of our leases that have no coordinator,
	 * each after a random part of a period, so that the first to win is
	 * seen by the others before they try. */
	for (i = 0; i < nb; i++) {
		struct sl__celect *e;
		bool go = false;

		pthread_mutex_lock(&c->tlock);
		e = elect_of(c, budgets[i], true);
		if (e && (!e->held || e->mine) && !led_of(c, budgets[i])) {
			/* Our own key is taken back at once: no one else
			 * can win it. */
			if (!e->campaign_ns)
				e->campaign_ns = e->mine ? now
							 : now + campaign_delay(c, budgets[i], rnd_next(c));
			go = now >= e->campaign_ns;
			if (go && !allow && !e->mine) {
				/* The window is full: at the next round (paced:
				 * when the pace says, as set above). */
				go = false;
				if (due)
					c->plan_wake_ns = now;
			}
			if (go)
				e->campaign_ns = 0;
		}
		pthread_mutex_unlock(&c->tlock);
		if (go) {
			campaign(c, budgets[i], session);
			if (allow)
				allow--;
		}
	}
	if (!due)
		return;
	/* Each budget is planned at most once a quarter period: the changes
	 * of a burst (members joining, reports after a move) are gathered
	 * into one plan, not one plan and its grants each.  Their writes
	 * follow the pace (coord.h): a round writes at most its window. */
	for (b = c->led; b; b = b->next) {
		bool dirty;

		pthread_mutex_lock(&c->tlock);
		dirty = b->dirty && !b->lost;
		pthread_mutex_unlock(&c->tlock);
		if (dirty && now < b->next_plan_ns) {
			if (!c->plan_wake_ns || b->next_plan_ns < c->plan_wake_ns)
				c->plan_wake_ns = b->next_plan_ns;
			continue;
		}
		if (dirty && allow < 2) {
			/* The window is full: at the next round. */
			if (!c->plan_wake_ns || now < c->plan_wake_ns)
				c->plan_wake_ns = now;
			continue;
		}
		if (dirty) {
			b->next_plan_ns = now + (int64_t)c->period_ms * NS_PER_MS / 4;
			lead_one(c, b, &allow);
		}
	}
	sl__coord_pace_end(c, &c->lpace);
}
