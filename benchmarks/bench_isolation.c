/* SPDX-License-Identifier: MIT */
/*
 * bench_isolation: what each tenant of a multi-tenant cache keeps, under a
 * plain shared LRU, static partitioning, and softlimit's three policies.
 *
 * A trace (a synthetic mix, or a file: see isolation_trace.h for the format)
 * is replayed in process, single-threaded and deterministically, on
 * examples/lru_cache: each request is a get, and a miss is followed by a set.
 * The same trace runs under five variants:
 *
 *   shared      lru_cache_create_shared(budget): one LRU, no accounting;
 *   static      softlimit tree, root max = budget, every tenant that holds
 *               items max = its soft limit and soft 0 (tenants with soft 0
 *               share what the soft limits leave of the budget, equally);
 *   guarantee,
 *   gatekeeper,
 *   protection  softlimit tree under that policy, root max = budget, soft
 *               limits set, every other max unlimited;
 *   refault     the same under SL_POLICY_REFAULT, every tenant that holds
 *               items keeping ghosts (lru_tenant_set_ghosts()) with the same
 *               reach, budget / tenants, charged to it.
 *
 * Each tenant with a soft limit is also replayed alone (its own requests
 * only) in a shared LRU whose capacity is its soft limit: "alone", the hit
 * ratio its soft limit buys it with the cache to itself.  Hits are counted
 * after the warm-up (the first 20% of a synthetic trace).
 *
 * Output: one JSON object per line on stdout (per tenant and variant, per
 * variant, per goal); progress, tables and goals on stderr (unless
 * --json-only).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <softlimit/softlimit.h>

#include "isolation_trace.h"
#include "lru_cache.h"
#include "twitter_mix.h"

#define MiB ((uint64_t)1 << 20)

enum variant { V_SHARED, V_STATIC, V_GUARANTEE, V_GATEKEEPER, V_PROTECTION, V_REFAULT, V_COUNT };

static const char *const variant_names[V_COUNT] = {
	"shared", "static", "guarantee", "gatekeeper", "protection", "refault",
};

/* The goals (README, "bench_isolation"). */
#define GOAL_KEEP 0.95   /* a tenant keeps >= 95% of its alone hit ratio   */
#define GOAL_POINTS 0.02 /* whole cache within 2 points of the shared LRU  */
#define GOAL_REFAULT_SHARED 0.03 /* refault: whole cache >= shared LRU + 3 points */
#define GOAL_REFAULT_BEST 0.01   /* ... and >= the best other policy + 1 point    */

static bool g_json_only;
/* --server-ttl: expire as memcached and slcache do (below). */
static bool g_server_ttl;

static void fatal(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("bench_isolation: FATAL: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void progress(const char *fmt, ...)
{
	va_list ap;

	if (g_json_only)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ----------------------------------------------------------------- results */

struct tenant_result {
	uint64_t gets, hits, set_fails;
	uint64_t expired; /* items found expired (and deleted)             */
	uint64_t bytes;  /* held at the end                               */
	uint64_t low;    /* events_low: reclaimed within its soft limit    */
	uint64_t ghosts; /* ghosts held at the end (refault variant)      */
	uint64_t refaults; /* refaults reported (refault variant)         */
};

struct mix_result {
	struct iso_trace *trace;
	struct tenant_result *r[V_COUNT]; /* [variant][node] */
	struct tenant_result *alone;      /* [node]; gets 0 when no soft limit */
	double seconds[V_COUNT];
	double total[V_COUNT];
};

static double ratio(uint64_t hits, uint64_t gets)
{
	return gets ? (double)hits / (double)gets : 0.0;
}

/* Tenants the goals speak for: they hold items, have a soft limit, and
 * their soft limit buys them some hits alone. */
static bool goal_tenant(const struct mix_result *m, int i)
{
	const struct iso_node *n = &m->trace->nodes[i];

	return n->holds && n->soft > 0 && m->alone[i].gets > 0 && m->alone[i].hits > 0;
}

/* ------------------------------------------------------------------ replay */

static unsigned char *g_value;
static size_t g_value_len;

static void value_buffer(uint32_t max_size)
{
	size_t want = max_size ? max_size : 1;

	if (want > LRU_VALUE_MAX)
		want = LRU_VALUE_MAX;
	if (want <= g_value_len)
		return;
	free(g_value);
	g_value = calloc(1, want);
	if (!g_value)
		fatal("out of memory (value buffer of %zu bytes)", want);
	g_value_len = want;
}

/*
 * TTLs.  lru_cache has no expiry of its own, so the replay keeps each
 * item's expiry time beside it, keyed by a hash of (tenant, key), and
 * expires lazily as memcached does without its crawler: an expired item
 * stays charged until a request finds it, which then deletes it.  The map
 * only grows while a trace stores items with a TTL: a trace without TTLs
 * never touches it, and replays as it did before TTLs existed.
 */
struct expiry_map {
	uint64_t *keys;  /* hash | 1, 0 = empty */
	uint64_t *when;  /* expiry, trace ms; 0 = never */
	size_t cap, used;
};

static uint64_t item_hash(uint32_t node, const char *key, size_t len)
{
	uint64_t h = UINT64_C(14695981039346656037) ^ node;

	while (len--) {
		h ^= (unsigned char)*key++;
		h *= UINT64_C(1099511628211);
	}
	h ^= h >> 29;
	return h | 1;
}

static uint64_t *expiry_slot(struct expiry_map *m, uint64_t h, bool add)
{
	size_t i;

	if (add && (m->used + 1) * 2 > m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 4096;
		uint64_t *k = calloc(cap, sizeof(*k)), *w = calloc(cap, sizeof(*w));

		if (!k || !w)
			fatal("out of memory (expiry map of %zu entries)", cap);
		for (size_t j = 0; j < m->cap; j++) {
			if (!m->keys[j])
				continue;
			for (i = (size_t)(m->keys[j] >> 7) & (cap - 1); k[i]; i = (i + 1) & (cap - 1))
				;
			k[i] = m->keys[j];
			w[i] = m->when[j];
		}
		free(m->keys);
		free(m->when);
		m->keys = k;
		m->when = w;
		m->cap = cap;
	}
	if (!m->cap)
		return NULL;
	for (i = (size_t)(h >> 7) & (m->cap - 1); m->keys[i]; i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == h)
			return &m->when[i];
	if (!add)
		return NULL;
	m->keys[i] = h;
	m->used++;
	return &m->when[i];
}

static void expiry_free(struct expiry_map *m)
{
	free(m->keys);
	free(m->when);
	memset(m, 0, sizeof(*m));
}

/*
 * Records that the item under @h was stored at @now with @ttl_ms.  With
 * --server-ttl, as a memcached-protocol server sees it: the TTL is sent in
 * whole seconds rounded up, and added to a clock that counts whole seconds,
 * so the item is gone once the clock's second reaches floor(now) + ceil(ttl):
 * a 0.3 s TTL lives 0 to 1 s.  trace_replay's figures are comparable with
 * these.
 */
static void expiry_store(struct expiry_map *m, uint64_t h, uint64_t now, uint64_t ttl_ms)
{
	uint64_t *w = expiry_slot(m, h, ttl_ms != 0);

	if (!w)
		return;
	if (!ttl_ms)
		*w = 0;
	else if (g_server_ttl)
		*w = now / 1000 * 1000 + (ttl_ms + 999) / 1000 * 1000;
	else
		*w = now + ttl_ms;
}

/* The clock expiry is compared with: whole seconds with --server-ttl. */
static uint64_t expiry_clock(uint64_t now)
{
	return g_server_ttl ? now / 1000 * 1000 : now;
}

static void visit_len(void *arg, struct lru_meta *meta, const void *value, size_t vlen)
{
	(void)meta;
	(void)value;
	if (arg)
		*(size_t *)arg = vlen;
}

/*
 * True when @key is in @t and has not expired; an expired item is deleted
 * (and counted), before the cache is asked: a key that would have expired
 * is no refault.  A lookup moves the item to the front of its LRU, as
 * memcached bumps an item that a command finds.  @read: a read (lru_get(),
 * a miss of a key a ghost remembers is a refault), else a write's look
 * (uncounted).  @vlen receives its length.
 */
static bool present(struct lru_tenant *t, struct expiry_map *m, uint64_t h, const char *key,
		    size_t keylen, uint64_t now, size_t *vlen, struct tenant_result *res, bool read)
{
	uint64_t *w = m->used ? expiry_slot(m, h, false) : NULL;
	int rc;

	if (w && *w && expiry_clock(now) >= *w) {
		rc = lru_delete(t, key, keylen);
		if (rc != 0 && rc != -ENOENT)
			fatal("lru_delete of an expired item = %d", rc);
		*w = 0;
		res->expired += rc == 0;
		return false;
	}
	rc = read ? lru_get(t, key, keylen, NULL, 0, vlen)
		  : lru_visit(t, key, keylen, LRU_VISIT_NOSTATS, visit_len, vlen);
	if (rc == -ENOENT)
		return false;
	if (rc != 0)
		fatal("lru_get = %d", rc);
	return true;
}

/* Stores @size bytes under @key; counts a failure that did not fit. */
static void store(struct lru_tenant *t, struct expiry_map *m, uint64_t h, const char *key,
		  size_t keylen, uint64_t size, uint64_t now, uint64_t ttl_ms, bool keep_expiry,
		  struct tenant_result *res)
{
	int rc;

	if (size > LRU_VALUE_MAX) {
		res->set_fails++;
		return;
	}
	if (size > g_value_len)
		value_buffer((uint32_t)(size < UINT32_MAX ? size : UINT32_MAX));
	rc = lru_set(t, key, keylen, g_value, (size_t)size);
	if (rc == -ENOMEM) {
		res->set_fails++;
		return;
	}
	if (rc != 0)
		fatal("lru_set = %d", rc);
	if (!keep_expiry && (m->used || ttl_ms))
		expiry_store(m, h, now, ttl_ms);
}

/*
 * One request of the trace (isolation_trace.h gives each op's meaning).
 * Only reads count hits and misses; a getset's fill and every write that
 * does not fit count set_fails.  Returns true on a read hit.
 */
static bool request(struct lru_tenant *t, struct expiry_map *m, const struct iso_trace *tr,
		    const struct iso_req *q, struct tenant_result *res, bool count)
{
	const char *key = tr->pool + q->key_off;
	uint64_t h = m->used || q->ttl_ms ? item_hash(q->node, key, q->keylen) : 0;
	size_t vlen = 0;
	bool hit = false;

	switch ((enum iso_op)q->op) {
	case ISO_GETSET:
	case ISO_GET:
	case ISO_GETS:
		hit = present(t, m, h, key, q->keylen, q->time_ms, NULL, res, true);
		if (count) {
			res->gets++;
			res->hits += hit;
		}
		if (!hit && q->op == ISO_GETSET)
			store(t, m, h, key, q->keylen, q->size, q->time_ms, q->ttl_ms, false, res);
		break;
	case ISO_SET:
		store(t, m, h, key, q->keylen, q->size, q->time_ms, q->ttl_ms, false, res);
		break;
	case ISO_ADD:
		if (!present(t, m, h, key, q->keylen, q->time_ms, NULL, res, false))
			store(t, m, h, key, q->keylen, q->size, q->time_ms, q->ttl_ms, false, res);
		break;
	case ISO_REPLACE:
	case ISO_CAS: /* no contention in a replay: a cas succeeds when the item is there */
		if (present(t, m, h, key, q->keylen, q->time_ms, NULL, res, false))
			store(t, m, h, key, q->keylen, q->size, q->time_ms, q->ttl_ms, false, res);
		break;
	case ISO_APPEND:
	case ISO_PREPEND: /* the item grows and keeps its expiry */
		if (present(t, m, h, key, q->keylen, q->time_ms, &vlen, res, false))
			store(t, m, h, key, q->keylen, (uint64_t)vlen + q->size, q->time_ms, 0, true,
			      res);
		break;
	case ISO_DELETE: {
		int rc = lru_delete(t, key, q->keylen);

		if (rc != 0 && rc != -ENOENT)
			fatal("lru_delete = %d", rc);
		break;
	}
	case ISO_INCR:
	case ISO_DECR: /* in place: the size does not change */
		present(t, m, h, key, q->keylen, q->time_ms, NULL, res, false);
		break;
	case ISO_TOUCH:
		if (present(t, m, h, key, q->keylen, q->time_ms, NULL, res, false) && (m->used || q->ttl_ms))
			expiry_store(m, h ? h : item_hash(q->node, key, q->keylen), q->time_ms,
				     q->ttl_ms);
		break;
	default:
		fatal("bad op %u", (unsigned)q->op);
	}
	return hit;
}

static struct tenant_result *results_alloc(int n)
{
	struct tenant_result *r = calloc((size_t)n, sizeof(*r));

	if (!r)
		fatal("out of memory");
	return r;
}

/* Every tenant's ghosts reach as far back: the budget over the tenants
 * that hold items, over GHOST_DIV (a quarter of a fair share: enough
 * refaults to rank by, little memory; each ghost is charged). */
#define GHOST_DIV 4

static uint64_t ghost_reach(const struct iso_trace *tr)
{
	uint64_t k = 0;

	for (int i = 0; i < tr->nnodes; i++)
		k += tr->nodes[i].holds;
	return tr->budget / (k ? k : 1) / GHOST_DIV;
}

static void run_variant(struct mix_result *m, enum variant v)
{
	const struct iso_trace *tr = m->trace;
	struct tenant_result *res = results_alloc(tr->nnodes);
	struct lru_tenant **ten = calloc((size_t)tr->nnodes, sizeof(*ten));
	struct lru_cache *c;
	struct expiry_map exp = {0};
	uint64_t soft_sum = 0, share = 0, hits = 0, gets = 0;
	int nzero = 0, rc;
	double t0 = now_s();

	if (!ten)
		fatal("out of memory");
	if (v == V_SHARED) {
		rc = lru_cache_create_shared(tr->budget, &c);
	} else {
		struct sl_tree_opts o;

		sl_tree_opts_init(&o);
		o.policy = v == V_GATEKEEPER ? SL_POLICY_GATEKEEPER
			 : v == V_PROTECTION ? SL_POLICY_PROTECTION
			 : v == V_REFAULT    ? SL_POLICY_REFAULT
					     : SL_POLICY_GUARANTEE;
		o.root.max = tr->budget;
		rc = lru_cache_create(&o, &c);
	}
	if (rc != 0)
		fatal("creating the %s cache = %d", variant_names[v], rc);

	/* Static: what the soft limits leave is shared by the tenants without one. */
	for (int i = 0; i < tr->nnodes; i++) {
		if (!tr->nodes[i].holds)
			continue;
		soft_sum += tr->nodes[i].soft;
		nzero += tr->nodes[i].soft == 0;
	}
	if (nzero && soft_sum < tr->budget)
		share = (tr->budget - soft_sum) / (uint64_t)nzero;

	for (int i = 0; i < tr->nnodes; i++) {
		const struct iso_node *n = &tr->nodes[i];
		struct sl_limits lim;

		sl_limits_init(&lim);
		if (v == V_STATIC) {
			if (n->holds)
				lim.max = n->soft ? n->soft : share;
		} else if (v != V_SHARED) {
			lim.soft = n->soft;
		}
		rc = lru_tenant_create(c, n->parent >= 0 ? ten[n->parent] : NULL, n->name, &lim,
				       &ten[i]);
		if (rc != 0)
			fatal("lru_tenant_create(%s) = %d", n->path, rc);
		if (v == V_REFAULT && n->holds &&
		    (rc = lru_tenant_set_ghosts(ten[i], ghost_reach(tr))) != 0)
			fatal("lru_tenant_set_ghosts(%s) = %d", n->path, rc);
	}

	for (size_t q = 0; q < tr->nreqs; q++) {
		const struct iso_req *r = &tr->reqs[q];

		request(ten[r->node], &exp, tr, r, &res[r->node], q >= tr->warmup);
	}
	expiry_free(&exp);

	for (int i = 0; i < tr->nnodes; i++) {
		struct lru_stats ls;
		struct sl_stats ss;

		lru_tenant_stats(ten[i], &ls);
		res[i].bytes = ls.bytes;
		res[i].ghosts = ls.ghosts;
		res[i].refaults = ls.refaults;
		if (lru_tenant_group(ten[i]) && sl_group_stats(lru_tenant_group(ten[i]), &ss) == 0)
			res[i].low = ss.events_low;
		hits += res[i].hits;
		gets += res[i].gets;
	}
	if (v != V_SHARED) {
		rc = sl_tree_check(lru_cache_tree(c));
		if (rc != 0)
			fatal("%s: sl_tree_check = %d after the replay", variant_names[v], rc);
	}
	lru_cache_destroy(c);
	free(ten);
	m->r[v] = res;
	m->total[v] = ratio(hits, gets);
	m->seconds[v] = now_s() - t0;
}

/* Every tenant with a soft limit, alone in a shared LRU of that capacity:
 * one cache each, one pass over the trace. */
static void run_alone(struct mix_result *m)
{
	const struct iso_trace *tr = m->trace;
	struct lru_cache **caches = calloc((size_t)tr->nnodes, sizeof(*caches));
	struct lru_tenant **ten = calloc((size_t)tr->nnodes, sizeof(*ten));
	struct expiry_map exp = {0};
	int rc;

	m->alone = results_alloc(tr->nnodes);
	if (!caches || !ten)
		fatal("out of memory");
	for (int i = 0; i < tr->nnodes; i++) {
		if (!tr->nodes[i].holds || tr->nodes[i].soft == 0)
			continue;
		rc = lru_cache_create_shared(tr->nodes[i].soft, &caches[i]);
		if (rc == 0)
			rc = lru_tenant_create(caches[i], NULL, tr->nodes[i].name, NULL, &ten[i]);
		if (rc != 0)
			fatal("alone cache for %s = %d", tr->nodes[i].path, rc);
	}
	for (size_t q = 0; q < tr->nreqs; q++) {
		const struct iso_req *r = &tr->reqs[q];

		if (ten[r->node])
			request(ten[r->node], &exp, tr, r, &m->alone[r->node], q >= tr->warmup);
	}
	expiry_free(&exp);
	for (int i = 0; i < tr->nnodes; i++)
		lru_cache_destroy(caches[i]);
	free(caches);
	free(ten);
}

/* ------------------------------------------------------------------ report */

static void print_json(const struct mix_result *m)
{
	const struct iso_trace *tr = m->trace;

	for (int v = 0; v < V_COUNT; v++) {
		for (int i = 0; i < tr->nnodes; i++) {
			const struct iso_node *n = &tr->nodes[i];
			const struct tenant_result *r = &m->r[v][i];
			double h = ratio(r->hits, r->gets);

			if (!n->holds)
				continue;
			printf("{\"bench\":\"isolation\",\"mix\":\"%s\",\"variant\":\"%s\",\"tenant\":\"%s\","
			       "\"soft\":%" PRIu64 ",\"gets\":%" PRIu64 ",\"hit_ratio\":%.4f,",
			       tr->name, variant_names[v], n->path, n->soft, r->gets, h);
			if (m->alone[i].gets) {
				double a = ratio(m->alone[i].hits, m->alone[i].gets);

				printf("\"alone_hit_ratio\":%.4f,", a);
				if (a > 0)
					printf("\"ratio_to_alone\":%.4f,", h / a);
				else
					printf("\"ratio_to_alone\":null,");
			} else {
				printf("\"alone_hit_ratio\":null,\"ratio_to_alone\":null,");
			}
			if (tr->has_ttl)
				printf("\"expired\":%" PRIu64 ",", r->expired);
			if (v == V_REFAULT)
				printf("\"ghosts\":%" PRIu64 ",\"ghost_bytes\":%" PRIu64 ",\"refaults\":%" PRIu64 ",",
				       r->ghosts, r->ghosts * LRU_GHOST_SIZE, r->refaults);
			printf("\"bytes\":%" PRIu64 ",\"set_fails\":%" PRIu64 ",\"low_events\":%" PRIu64 "}\n",
			       r->bytes, r->set_fails, r->low);
		}
	}
	for (int v = 0; v < V_COUNT; v++)
		printf("{\"bench\":\"isolation_total\",\"mix\":\"%s\",\"variant\":\"%s\",\"hit_ratio\":%.4f,"
		       "\"requests\":%zu,\"warmup\":%zu,\"budget\":%" PRIu64 ",\"seconds\":%.2f}\n",
		       tr->name, variant_names[v], m->total[v], tr->nreqs, tr->warmup, tr->budget,
		       m->seconds[v]);
	fflush(stdout);
}

/* The worst ratio to alone over the goal tenants under @v; -1 if none. */
static double worst_keep(const struct mix_result *m, enum variant v, int *who)
{
	double worst = -1;

	*who = -1;
	for (int i = 0; i < m->trace->nnodes; i++) {
		double k;

		if (!goal_tenant(m, i))
			continue;
		k = ratio(m->r[v][i].hits, m->r[v][i].gets) / ratio(m->alone[i].hits, m->alone[i].gets);
		if (worst < 0 || k < worst) {
			worst = k;
			*who = i;
		}
	}
	return worst;
}

struct goal_tally {
	int met, total;
};

static void goal_line(const struct mix_result *m, const char *goal, enum variant v, double value,
		      const char *target, bool met, const char *extra, struct goal_tally *tally)
{
	printf("{\"bench\":\"isolation_goal\",\"mix\":\"%s\",\"goal\":\"%s\",\"variant\":\"%s\","
	       "\"value\":%.4f,\"target\":\"%s\",\"met\":%s%s}\n",
	       m->trace->name, goal, variant_names[v], value, target, met ? "true" : "false", extra);
	tally->total++;
	tally->met += met;
}

static void print_goals(const struct mix_result *m, struct goal_tally *tally)
{
	char extra[256], target[32];
	int who;

	/* 1. Tenants with a soft limit keep >= 95% of alone, under GUARANTEE and PROTECTION. */
	for (int v = V_SHARED; v < V_COUNT; v++) {
		double w = worst_keep(m, (enum variant)v, &who), ws;
		int who_s;
		bool met;

		if (who < 0)
			break;
		ws = worst_keep(m, V_SHARED, &who_s);
		met = w >= GOAL_KEEP;
		snprintf(target, sizeof(target), ">= %.2f", GOAL_KEEP);
		snprintf(extra, sizeof(extra), ",\"worst_tenant\":\"%s\",\"shared_value\":%.4f",
			 m->trace->nodes[who].path, ws);
		if (v == V_GUARANTEE || v == V_PROTECTION || v == V_REFAULT) {
			goal_line(m, "keep_95pct_of_alone", (enum variant)v, w, target, met, extra, tally);
			progress("  goal: every tenant with a soft limit keeps >= 95%% of its alone hit ratio "
				 "under %-10s worst %.3f (%s; shared LRU: %.3f)  %s\n",
				 variant_names[v], w, m->trace->nodes[who].path, ws,
				 met ? "met" : "NOT MET");
		} else if (v != V_SHARED) {
			progress("  (for comparison, %-10s worst %.3f (%s))\n", variant_names[v], w,
				 m->trace->nodes[who].path);
		}
	}
	/* 2. The whole cache within 2 points of the shared LRU, and above static. */
	for (int v = V_GUARANTEE; v < V_REFAULT; v++) {
		double d = m->total[v] - m->total[V_SHARED], ds = m->total[v] - m->total[V_STATIC];
		bool met = d >= -GOAL_POINTS;

		snprintf(target, sizeof(target), ">= %.2f", -GOAL_POINTS);
		snprintf(extra, sizeof(extra), ",\"hit_ratio\":%.4f,\"shared\":%.4f", m->total[v],
			 m->total[V_SHARED]);
		goal_line(m, "total_within_2pts_of_shared", (enum variant)v, d, target, met, extra,
			  tally);
		progress("  goal: whole cache under %-10s %.3f, within 2 points of shared LRU's %.3f "
			 "(%+.1f points)  %s\n", variant_names[v], m->total[v], m->total[V_SHARED],
			 100 * d, met ? "met" : "NOT MET");
		met = ds > 0;
		snprintf(extra, sizeof(extra), ",\"hit_ratio\":%.4f,\"static\":%.4f", m->total[v],
			 m->total[V_STATIC]);
		goal_line(m, "total_above_static", (enum variant)v, ds, "> 0", met, extra, tally);
		progress("  goal: whole cache under %-10s %.3f, above static partitioning's %.3f "
			 "(%+.1f points)  %s\n", variant_names[v], m->total[v], m->total[V_STATIC],
			 100 * ds, met ? "met" : "NOT MET");
	}
	/* 3. Refault: the whole cache 3 points above the shared LRU and 1 above
	 * the best of static and the three other policies. */
	{
		enum variant best = V_STATIC;
		double d, db;
		bool met;

		for (int v = V_GUARANTEE; v < V_REFAULT; v++)
			if (m->total[v] > m->total[best])
				best = (enum variant)v;
		d = m->total[V_REFAULT] - m->total[V_SHARED];
		db = m->total[V_REFAULT] - m->total[best];
		met = d >= GOAL_REFAULT_SHARED - 1e-9;
		snprintf(target, sizeof(target), ">= %.2f", GOAL_REFAULT_SHARED);
		snprintf(extra, sizeof(extra), ",\"hit_ratio\":%.4f,\"shared\":%.4f", m->total[V_REFAULT],
			 m->total[V_SHARED]);
		goal_line(m, "refault_3pts_above_shared", V_REFAULT, d, target, met, extra, tally);
		progress("  goal: whole cache under refault    %.3f, >= 3 points above shared LRU's %.3f "
			 "(%+.1f points)  %s\n", m->total[V_REFAULT], m->total[V_SHARED], 100 * d,
			 met ? "met" : "NOT MET");
		met = db >= GOAL_REFAULT_BEST - 1e-9;
		snprintf(target, sizeof(target), ">= %.2f", GOAL_REFAULT_BEST);
		snprintf(extra, sizeof(extra), ",\"hit_ratio\":%.4f,\"best\":\"%s\",\"best_hit_ratio\":%.4f",
			 m->total[V_REFAULT], variant_names[best], m->total[best]);
		goal_line(m, "refault_1pt_above_best_policy", V_REFAULT, db, target, met, extra, tally);
		progress("  goal: whole cache under refault    %.3f, >= 1 point above the best other (%s %.3f) "
			 "(%+.1f points)  %s\n", m->total[V_REFAULT], variant_names[best], m->total[best],
			 100 * db, met ? "met" : "NOT MET");
	}
	fflush(stdout);
}

static void fmt_bytes(char *buf, size_t len, uint64_t b)
{
	if (b >= MiB)
		snprintf(buf, len, "%.1fM", (double)b / (double)MiB);
	else if (b >= 1024)
		snprintf(buf, len, "%.0fK", (double)b / 1024.0);
	else
		snprintf(buf, len, "%" PRIu64, b);
}

static void print_table(const struct mix_result *m)
{
	const struct iso_trace *tr = m->trace;
	char sb[32];

	fmt_bytes(sb, sizeof(sb), tr->budget);
	fprintf(stderr, "\n%s: budget %s, %zu requests (first %zu not counted)\n", tr->name, sb,
		tr->nreqs, tr->warmup);
	fprintf(stderr, "hit ratio (ratio to alone)\n%-16s %7s %6s", "tenant", "soft", "alone");
	for (int v = 0; v < V_COUNT; v++)
		fprintf(stderr, " %14s", variant_names[v]);
	fputc('\n', stderr);
	for (int i = 0; i < tr->nnodes; i++) {
		const struct iso_node *n = &tr->nodes[i];
		double a = ratio(m->alone[i].hits, m->alone[i].gets);

		if (!n->holds)
			continue;
		fmt_bytes(sb, sizeof(sb), n->soft);
		fprintf(stderr, "%-16s %7s", n->path, sb);
		if (m->alone[i].gets)
			fprintf(stderr, " %6.3f", a);
		else
			fprintf(stderr, " %6s", "-");
		for (int v = 0; v < V_COUNT; v++) {
			double h = ratio(m->r[v][i].hits, m->r[v][i].gets);

			if (m->alone[i].gets && a > 0)
				fprintf(stderr, "  %5.3f (%4.2f)", h, h / a);
			else
				fprintf(stderr, "  %5.3f       ", h);
		}
		fputc('\n', stderr);
	}
	fprintf(stderr, "%-16s %7s %6s", "whole cache", "", "");
	for (int v = 0; v < V_COUNT; v++)
		fprintf(stderr, "  %5.3f       ", m->total[v]);
	fputc('\n', stderr);
}

/* -------------------------------------------------------------------- main */

static void run_mix(struct iso_trace *tr, struct goal_tally *tally, int idx, int count)
{
	struct mix_result m;
	char sb[32];

	memset(&m, 0, sizeof(m));
	m.trace = tr;
	value_buffer(tr->max_size);
	fmt_bytes(sb, sizeof(sb), tr->budget);
	progress("[%d/%d] %s: %d tenants, budget %s, %zu requests\n", idx, count, tr->name,
		 tr->nnodes, sb, tr->nreqs);
	progress("  alone ...");
	{
		double t0 = now_s();

		run_alone(&m);
		progress(" %.2f s\n", now_s() - t0);
	}
	for (int v = 0; v < V_COUNT; v++) {
		progress("  %-10s ...", variant_names[v]);
		run_variant(&m, (enum variant)v);
		progress(" %.2f s, whole cache hit ratio %.3f\n", m.seconds[v], m.total[v]);
	}
	print_json(&m);
	if (!g_json_only)
		print_table(&m);
	print_goals(&m, tally);
	for (int v = 0; v < V_COUNT; v++)
		free(m.r[v]);
	free(m.alone);
}

/* The mixes: the synthetic ones, then the Twitter-shaped ones. */
static int mix_count(void)
{
	return iso_mix_count() + tw_mix_count();
}

static const char *mix_name(int k)
{
	return k < iso_mix_count() ? iso_mix_name(k) : tw_mix_name(k - iso_mix_count());
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_isolation [--quick] [--json-only] [--mix NAME]... [--requests N]\n"
		"                       [--budget BYTES] [--seed N] [--help]\n"
		"       bench_isolation --trace FILE [--budget BYTES] [--soft TENANT=BYTES]...\n"
		"                       [--warmup N] [--json-only]\n"
		"\n"
		"Replays a multi-tenant cache trace on examples/lru_cache under a shared LRU,\n"
		"static partitioning, and softlimit's guarantee, gatekeeper and protection\n"
		"policies; reports each tenant's hit ratio and how it compares with the tenant\n"
		"alone in an LRU the size of its soft limit.\n"
		"\n"
		"  --quick         16 MiB budget, 300000 requests per mix (default 64 MiB, 2000000)\n"
		"  --mix NAME      run only this mix (repeatable):");
	for (int i = 0; i < mix_count(); i++)
		fprintf(f, "%s%s", i == iso_mix_count() ? "\n                  " : " ", mix_name(i));
	fprintf(f,
		"\n"
		"  --stats FILE    the Twitter cluster table for the twitter-* mixes\n"
		"                  (default %s)\n"
		"  --requests N    requests per mix\n"
		"  --budget BYTES  the cache's budget (suffixes K, M, G)\n"
		"  --seed N        the mixes' seed (default 1)\n"
		"  --trace FILE    replay FILE instead (\"time tenant key size [op [ttl]]\" per line;\n"
		"                  '-' is stdin)\n"
		"  --soft T=BYTES  tenant T's soft limit (with --trace; overrides '# soft:' lines)\n"
		"  --warmup N      requests not counted (with --trace; default '# warmup:' or 0)\n"
		"  --server-ttl    expire as a memcached-protocol server does: TTLs rounded up to\n"
		"                  whole seconds on a clock of whole seconds (compare with trace_replay)\n"
		"  --json-only     only the JSON lines on stdout\n"
		"  --help          this text\n"
		"\n"
		"stdout: one JSON object per line, e.g.\n"
		"  {\"bench\":\"isolation\",\"mix\":\"zipf-mix\",\"variant\":\"guarantee\",\"tenant\":\"custA/ns1\",\n"
		"   ...,\"hit_ratio\":0.91,\"alone_hit_ratio\":0.93,\"ratio_to_alone\":0.98,...}\n"
		"  {\"bench\":\"isolation_total\",\"mix\":\"zipf-mix\",\"variant\":\"guarantee\",\"hit_ratio\":0.80,...}\n"
		"  {\"bench\":\"isolation_goal\",\"mix\":\"zipf-mix\",\"goal\":\"...\",\"value\":...,\"met\":true,...}\n"
		"Exit status: 0 done (goals met or not), 1 an error, 2 bad arguments.\n",
		SL_TWITTER_STATS);
}

static int parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	if (*end == 'K' || *end == 'k')
		mul = 1024, end++;
	else if (*end == 'M' || *end == 'm')
		mul = MiB, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1024 * MiB, end++;
	if (*end || (v && mul > UINT64_MAX / v))
		return -1;
	*out = (uint64_t)v * mul;
	return 0;
}

#define MAX_ARGS 64

int main(int argc, char **argv)
{
	bool quick = false;
	const char *trace_file = NULL, *mix_only[MAX_ARGS], *stats = SL_TWITTER_STATS;
	struct tw_table tab = {0};
	const char *soft_args[MAX_ARGS];
	int n_mix_only = 0, n_soft = 0, count = 0, idx = 0;
	uint64_t budget = 0, seed = 1, requests = 0, warmup = 0;
	bool warmup_given = false;
	struct goal_tally tally = {0, 0};
	double t_start = now_s();

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--quick") == 0) {
			quick = true;
		} else if (strcmp(a, "--json-only") == 0) {
			g_json_only = true;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (val && strcmp(a, "--mix") == 0 && n_mix_only < MAX_ARGS) {
			bool known = false;

			for (int k = 0; k < mix_count(); k++)
				known |= strcmp(mix_name(k), val) == 0;
			if (!known) {
				fprintf(stderr, "bench_isolation: unknown mix '%s'\n", val);
				usage(stderr);
				return 2;
			}
			mix_only[n_mix_only++] = val;
			i++;
		} else if (strcmp(a, "--server-ttl") == 0) {
			g_server_ttl = true;
		} else if (val && strcmp(a, "--stats") == 0) {
			stats = val;
			i++;
		} else if (val && strcmp(a, "--trace") == 0) {
			trace_file = val;
			i++;
		} else if (val && strcmp(a, "--soft") == 0 && n_soft < MAX_ARGS && strchr(val, '=')) {
			soft_args[n_soft++] = val;
			i++;
		} else if (val && strcmp(a, "--budget") == 0 && parse_bytes(val, &budget) == 0 &&
			   budget > 0) {
			i++;
		} else if (val && strcmp(a, "--requests") == 0 && parse_bytes(val, &requests) == 0 &&
			   requests > 0) {
			i++;
		} else if (val && strcmp(a, "--seed") == 0 && parse_bytes(val, &seed) == 0) {
			i++;
		} else if (val && strcmp(a, "--warmup") == 0 && parse_bytes(val, &warmup) == 0) {
			warmup_given = true;
			i++;
		} else {
			fprintf(stderr, "bench_isolation: bad argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (!trace_file && (n_soft || warmup_given)) {
		fprintf(stderr, "bench_isolation: --soft and --warmup go with --trace\n");
		return 2;
	}

	progress("bench_isolation: softlimit %s, %s\n", sl_version(),
		 trace_file ? "trace file" : quick ? "quick mode" : "full mode");
#ifndef __OPTIMIZE__
	progress("bench_isolation: warning: built without optimisation; use -DCMAKE_BUILD_TYPE=Release\n");
#endif

	if (trace_file) {
		struct iso_trace tr;
		char err[512];

		iso_trace_init(&tr);
		progress("reading %s ...", trace_file);
		if (iso_trace_load(&tr, trace_file, err, sizeof(err)) != 0) {
			fprintf(stderr, "\nbench_isolation: %s\n", err);
			return 1;
		}
		progress(" %zu requests, %d tenants\n", tr.nreqs, tr.nnodes);
		for (int i = 0; i < n_soft; i++) {
			const char *eq = strrchr(soft_args[i], '=');
			uint64_t v;
			int node = -1;

			for (int k = 0; k < tr.nnodes; k++)
				if (strlen(tr.nodes[k].path) == (size_t)(eq - soft_args[i]) &&
				    strncmp(tr.nodes[k].path, soft_args[i], (size_t)(eq - soft_args[i])) == 0)
					node = k;
			if (node < 0 || parse_bytes(eq + 1, &v) != 0) {
				fprintf(stderr, "bench_isolation: --soft %s: no such tenant in the trace, "
					"or bad size\n", soft_args[i]);
				return 2;
			}
			tr.nodes[node].soft = v;
			tr.nodes[node].soft_set = true;
		}
		if (n_soft) {
			/* Recompute inner sums with the new leaves. */
			for (int k = 0; k < tr.nnodes; k++) {
				bool inner = false;

				for (int c = 0; c < tr.nnodes; c++)
					inner |= tr.nodes[c].parent == k;
				if (inner && !tr.nodes[k].soft_set)
					tr.nodes[k].soft = 0;
			}
			iso_trace_finish(&tr);
		}
		if (budget)
			tr.budget = budget;
		else if (!tr.budget_set)
			tr.budget = 64 * MiB;
		if (warmup_given)
			tr.warmup = (size_t)warmup;
		run_mix(&tr, &tally, 1, 1);
		iso_trace_free(&tr);
	} else {
		if (!budget)
			budget = quick ? 16 * MiB : 64 * MiB;
		if (!requests)
			requests = quick ? 300000 : 2000000;
		for (int k = 0; k < mix_count(); k++) {
			bool on = n_mix_only == 0;

			for (int j = 0; j < n_mix_only; j++)
				on |= strcmp(mix_only[j], mix_name(k)) == 0;
			count += on;
			if (on && k >= iso_mix_count() && !tab.n) {
				char err[512];

				if (tw_table_load(&tab, stats, err, sizeof(err)) != 0)
					fatal("%s (the twitter-* mixes need the table: --stats FILE)", err);
			}
		}
		for (int k = 0; k < mix_count(); k++) {
			struct iso_trace tr;
			bool on = n_mix_only == 0;
			char err[512];

			for (int j = 0; j < n_mix_only; j++)
				on |= strcmp(mix_only[j], mix_name(k)) == 0;
			if (!on)
				continue;
			iso_trace_init(&tr);
			if (k < iso_mix_count()) {
				if (iso_trace_generate(&tr, mix_name(k), budget, (size_t)requests, seed) != 0)
					fatal("generating mix %s", mix_name(k));
			} else if (tw_mix_generate(&tr, &tab, mix_name(k), budget, (size_t)requests, seed,
						   TW_DEFAULT_RATE, err, sizeof(err)) != 0) {
				fatal("generating mix %s: %s", mix_name(k), err);
			}
			run_mix(&tr, &tally, ++idx, count);
			iso_trace_free(&tr);
		}
		tw_table_free(&tab);
	}
	progress("\nbench_isolation: %d of %d goals met; total %.1f s\n", tally.met, tally.total,
		 now_s() - t_start);
	free(g_value);
	return 0;
}
