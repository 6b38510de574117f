/* SPDX-License-Identifier: MIT */
/*
 * etcd://HOST:PORT[,HOST:PORT...]/PREFIX: a fleet's budgets in etcd (v3 API,
 * JSON gateway; the HTTP layer is etcd_http.c).  Keys under PREFIX:
 *
 *   incarnation               a random id, created when absent: with the
 *                             cluster id of every answer, the store's
 *                             incarnation (a wiped cluster restarted with the
 *                             same members keeps its cluster id, not this key)
 *   budgets/NAME              the limits, JSON
 *   budgets/NAME/version      rewritten by every write that makes something
 *                             count for more: its mod_revision is the view's
 *                             version, compared by such writes in a txn
 *   budgets/NAME/rec/ID       a participant's record, under the participant's
 *                             own etcd lease (the TTL): it goes when the
 *                             participant stops renewing
 *   budgets/NAME/floor/ID     its floor, under no lease, removed on leave: a
 *                             participant whose record expired still counts
 *                             at its floor (state FENCED in the view)
 *
 * A record is counted in full while its key exists.  etcd revokes expired
 * leases in a background loop, and a newly elected leader extends every
 * lease: both only keep a record longer, which counts for more, never less.
 * The holder's own view of its lease ends first (lease.c: from before the
 * renewal was sent, less a margin); here every renewal (keepalive) is sent
 * after that instant, so the store's lease ends at least ttl later.
 */
#define _GNU_SOURCE /* gethostname */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "etcd_http.h"
#include "etcd_store.h"
#include "store.h"

static bool prefix_char_ok(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '.' || ch == '-' || ch == ':' || ch == '_' || ch == '/';
}

/* The node's name as part of a participant id: [A-Za-z0-9_.:-], '_' for the rest. */
static void set_node(struct sl__etcd_store *st, const char *node)
{
	char host[256] = "node";
	size_t i;

	if (!node || !*node) {
		if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
			strcpy(host, "node");
		host[sizeof(host) - 1] = '\0';
		node = host;
	}
	for (i = 0; node[i] && i < sizeof(st->node) - 1; i++)
		st->node[i] = (prefix_char_ok(node[i]) && node[i] != '/') ? node[i] : '_';
	st->node[i] = '\0';
}

static int etcd_open(const char *rest, const struct sl_lease_store_opts *opts, void **state)
{
	struct sl__etcd_store *st;
	const char *hosts, *slash, *prefix, *query;
	char url[512];
	size_t plen;
	uint32_t timeout = opts && opts->timeout_ms ? opts->timeout_ms : 1000;
	int rc;

	if (!rest || !state)
		return -EINVAL;
	/* "?coordinated": the coordinated protocol (store_etcd_coord.h).  No
	 * other query: an older library rejects the '?' (a prefix character
	 * it does not allow), so a fleet never mixes the two protocols
	 * because one node runs an older release. */
	query = strchr(rest, '?');
	if (query && strcmp(query, "?coordinated") != 0)
		return -EINVAL;
	if (query && (size_t)(query - rest) >= sizeof(url))
		return -EINVAL;
	if (query) {
		memcpy(url, rest, (size_t)(query - rest));
		url[query - rest] = '\0';
		rest = url;
	}
	hosts = rest;
	if (strncmp(hosts, "//", 2) == 0)
		hosts += 2;
	slash = strchr(hosts, '/');
	prefix = slash ? slash + 1 : "";
	plen = strlen(prefix);
	while (plen > 0 && prefix[plen - 1] == '/')
		plen--;
	if (plen == 0) {
		/* No PREFIX: the default, so that a bare etcd://HOST:PORT works. */
		prefix = "softlimit";
		plen = strlen(prefix);
	}
	if (plen > 200 || prefix[0] == '/')
		return -EINVAL;
	for (size_t i = 0; i < plen; i++) {
		if (!prefix_char_ok(prefix[i]))
			return -EINVAL;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	rc = sl__etcd_conn_init(&st->conn, hosts, slash ? (size_t)(slash - hosts) : strlen(hosts),
				timeout);
	if (rc) {
		free(st);
		return rc;
	}
	memcpy(st->prefix, prefix, plen);
	st->prefix[plen] = '\0';
	st->coordinated = query != NULL;
	st->hosts_len = slash ? (size_t)(slash - hosts) : strlen(hosts);
	st->hosts = strndup(hosts, st->hosts_len);
	if (!st->hosts) {
		sl__etcd_conn_fini(&st->conn);
		free(st);
		return -ENOMEM;
	}
	set_node(st, opts ? opts->node : NULL);
	if (getrandom(&st->nonce, sizeof(st->nonce), 0) != (ssize_t)sizeof(st->nonce))
		st->nonce = (uint64_t)sl__etcd_wall_ms() ^ ((uint64_t)getpid() << 40);
	pthread_mutex_init(&st->lock, NULL);
	*state = st;
	return 0;
}

static void etcd_close(void *state)
{
	struct sl__etcd_store *st = state;

	if (!st)
		return;
	/* Leases still held expire on their own: leave revokes them early. */
	sl__etcd_conn_fini(&st->conn);
	sl__etcd_store_free_rec_state(st);
	free(st->hosts);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/*
 * sl_lease_store_remove(): the store's keys, PREFIX/incarnation and every
 * key under PREFIX/budgets/, in one txn, so that no holder reads the
 * budgets gone and the old incarnation still there.  Not a range over all
 * of PREFIX/: a store whose PREFIX is this one's followed by "/NAME" is
 * another store, and keeps its keys.  Holders' next read finds no
 * incarnation, creates a new one and so sees the store wiped (a write with
 * the old one fails its compare, -ESTALE).  The records' etcd leases are
 * left to run out: they are their holders', and hold no key any more.
 * -ENOENT when neither held a key (also when a member applied the txn and
 * its answer was lost, and the retry on another found nothing: the store
 * is gone either way).  The call is bounded by the store's
 * timeout, and fails as every other call of the store does when etcd
 * cannot be reached (sl__etcd_call(): -ECONNREFUSED, -ETIMEDOUT, -EIO).
 */
static int etcd_remove_store(const char *rest, const struct sl_lease_store_opts *opts)
{
	struct sl__etcd_store *st;
	char ikey[SL__ETCD_KEY_MAX], base[SL__ETCD_KEY_MAX], end[SL__ETCD_KEY_MAX];
	char cbase[SL__ETCD_KEY_MAX], cend[SL__ETCD_KEY_MAX];
	char gbase[SL__ETCD_KEY_MAX], gend[SL__ETCD_KEY_MAX];
	json_t *req, *resp = NULL;
	int64_t deleted = 0;
	void *state;
	int rc;

	rc = etcd_open(rest, opts, &state);
	if (rc)
		return rc;
	st = state;
	sl__etcd_key(st, ikey, NULL, NULL, NULL);
	sl__etcd_key(st, base, "", NULL, NULL); /* "PREFIX/budgets/" */
	sl__etcd_prefix_end(end, base);
	/* The coordinated protocol's coord/ and grants/ go too (empty for a
	 * store that never ran it). */
	snprintf(cbase, sizeof(cbase), "%s/coord/", st->prefix);
	sl__etcd_prefix_end(cend, cbase);
	snprintf(gbase, sizeof(gbase), "%s/grants/", st->prefix);
	sl__etcd_prefix_end(gend, gbase);
	req = json_pack("{s:[{s:{s:o}},{s:{s:o,s:o}},{s:{s:o,s:o}},{s:{s:o,s:o}}]}", "success",
			"request_delete_range", "key", sl__etcd_b64s(ikey), "request_delete_range",
			"key", sl__etcd_b64s(base), "range_end", sl__etcd_b64s(end),
			"request_delete_range", "key", sl__etcd_b64s(cbase), "range_end",
			sl__etcd_b64s(cend), "request_delete_range", "key", sl__etcd_b64s(gbase),
			"range_end", sl__etcd_b64s(gend));
	rc = req ? sl__etcd_call(&st->conn, "/v3/kv/txn", req, &resp, NULL) : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < 4; i++) {
		json_t *r = json_array_get(json_object_get(resp, "responses"), i);
		int64_t n;

		/* The gateway leaves a count of 0 out. */
		r = json_object_get(r, "response_delete_range");
		if (!r || sl__etcd_get_int(json_object_get(r, "deleted"), 0, &n) || n < 0)
			rc = -EIO;
		else
			deleted += n;
	}
	if (rc == 0 && deleted == 0)
		rc = -ENOENT;
	json_decref(req);
	json_decref(resp);
	etcd_close(st);
	return rc;
}

/* ---- keys and values --------------------------------------------------- */

void sl__etcd_key(const struct sl__etcd_store *st, char *out, const char *name, const char *kind,
		  const char *id)
{
	if (!name)
		snprintf(out, SL__ETCD_KEY_MAX, "%s/incarnation", st->prefix);
	else if (!kind)
		snprintf(out, SL__ETCD_KEY_MAX, "%s/budgets/%s", st->prefix, name);
	else if (!id)
		snprintf(out, SL__ETCD_KEY_MAX, "%s/budgets/%s/%s", st->prefix, name, kind);
	else
		snprintf(out, SL__ETCD_KEY_MAX, "%s/budgets/%s/%s/%s", st->prefix, name, kind, id);
}

void sl__etcd_prefix_end(char *out, const char *prefix)
{
	size_t n = strlen(prefix);

	memcpy(out, prefix, n + 1);
	/* Every prefix here ends in '/': its successor byte ends the range. */
	out[n - 1]++;
}

json_t *sl__etcd_txn_kvs(json_t *txn_resp, size_t i)
{
	json_t *r = json_array_get(json_object_get(txn_resp, "responses"), i);

	return json_object_get(json_object_get(r, "response_range"), "kvs");
}

json_t *sl__etcd_txn_kv(json_t *txn_resp, size_t i)
{
	return json_array_get(sl__etcd_txn_kvs(txn_resp, i), 0);
}

int sl__etcd_get_u64(json_t *obj, const char *field, uint64_t *out)
{
	const char *s = json_string_value(json_object_get(obj, field));
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EIO;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end ? -EIO : 0;
}

int sl__etcd_set_u64(json_t *obj, const char *field, uint64_t v)
{
	char s[24];

	/* Strings: JSON numbers lose precision above 2^53 in many readers. */
	snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
	return json_object_set_new(obj, field, json_string(s)) ? -ENOMEM : 0;
}

json_t *sl__etcd_kv_json(json_t *kv)
{
	size_t len;
	char *v = sl__etcd_unb64(json_object_get(kv, "value"), &len);
	json_t *doc;

	if (!v)
		return NULL;
	doc = json_loadb(v, len, 0, NULL);
	free(v);
	if (doc && !json_is_object(doc)) {
		json_decref(doc);
		doc = NULL;
	}
	return doc;
}

char *sl__etcd_limits_json(const struct sl_limits *lim)
{
	json_t *o = json_object();
	char *s = NULL;

	if (o && !sl__etcd_set_u64(o, "max", lim->max) && !sl__etcd_set_u64(o, "soft", lim->soft) &&
	    !sl__etcd_set_u64(o, "min", lim->min))
		s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

int sl__etcd_parse_limits(json_t *kv, struct sl_limits *out)
{
	json_t *o = sl__etcd_kv_json(kv);
	struct sl_limits lim;
	int rc = -EIO;

	sl_limits_init(&lim);
	if (o && !sl__etcd_get_u64(o, "max", &lim.max) && !sl__etcd_get_u64(o, "soft", &lim.soft) &&
	    !sl__etcd_get_u64(o, "min", &lim.min)) {
		*out = lim;
		rc = 0;
	}
	json_decref(o);
	return rc;
}

/* ---- budgets ----------------------------------------------------------- */

static int etcd_budget_set(void *state, const char *name, const struct sl_limits *lim)
{
	struct sl__etcd_store *st = state;
	char key[SL__ETCD_KEY_MAX], vkey[SL__ETCD_KEY_MAX];
	json_t *req, *resp = NULL;
	char *limits;
	int rc;

	if (!sl__lease_name_ok(name) || !lim)
		return -EINVAL;
	limits = sl__etcd_limits_json(lim);
	if (!limits)
		return -ENOMEM;
	sl__etcd_key(st, key, name, NULL, NULL);
	sl__etcd_key(st, vkey, name, "version", NULL);
	/* A changed max or min is new room (or less of it): bump the version so
	 * a grow computed on the old limits fails its compare. */
	req = json_pack("{s:[{s:{s:o,s:o}},{s:{s:o,s:o}}]}", "success", "request_put", "key",
			sl__etcd_b64s(key), "value", sl__etcd_b64s(limits), "request_put", "key",
			sl__etcd_b64s(vkey), "value", sl__etcd_b64s(""));
	free(limits);
	if (!req)
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	rc = sl__etcd_call(&st->conn, "/v3/kv/txn", req, &resp, NULL);
	pthread_mutex_unlock(&st->lock);
	json_decref(req);
	json_decref(resp);
	return rc;
}

static int etcd_budget_get(void *state, const char *name, struct sl_limits *out)
{
	struct sl__etcd_store *st = state;
	char key[SL__ETCD_KEY_MAX];
	json_t *req, *resp = NULL, *kvs;
	int rc;

	if (!sl__lease_name_ok(name) || !out)
		return -EINVAL;
	sl__etcd_key(st, key, name, NULL, NULL);
	req = json_pack("{s:o}", "key", sl__etcd_b64s(key));
	if (!req)
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	rc = sl__etcd_call(&st->conn, "/v3/kv/range", req, &resp, NULL);
	pthread_mutex_unlock(&st->lock);
	json_decref(req);
	if (rc == 0) {
		kvs = json_object_get(resp, "kvs");
		if (json_array_size(kvs) == 0)
			rc = -ENOENT;
		else
			rc = sl__etcd_parse_limits(json_array_get(kvs, 0), out);
	}
	json_decref(resp);
	return rc;
}

static int etcd_budget_delete(void *state, const char *name)
{
	struct sl__etcd_store *st = state;
	char key[SL__ETCD_KEY_MAX], sub[SL__ETCD_KEY_MAX], end[SL__ETCD_KEY_MAX];
	json_t *req, *resp = NULL;
	int rc;

	if (!sl__lease_name_ok(name))
		return -EINVAL;
	sl__etcd_key(st, key, name, NULL, NULL);
	sl__etcd_key(st, sub, name, "", NULL);
	sl__etcd_prefix_end(end, sub);
	req = json_pack("{s:[{s:o,s:s,s:s,s:o}],s:[{s:{s:o}},{s:{s:o,s:o}}]}", "compare", "key",
			sl__etcd_b64s(key), "target", "CREATE", "result", "GREATER",
			"create_revision", sl__etcd_int(0), "success", "request_delete_range", "key",
			sl__etcd_b64s(key), "request_delete_range", "key", sl__etcd_b64s(sub),
			"range_end", sl__etcd_b64s(end));
	if (!req)
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	rc = sl__etcd_call(&st->conn, "/v3/kv/txn", req, &resp, NULL);
	pthread_mutex_unlock(&st->lock);
	json_decref(req);
	if (rc == 0 && !json_is_true(json_object_get(resp, "succeeded")))
		rc = -ENOENT;
	json_decref(resp);
	return rc;
}

/* Is the key @k (@klen bytes) at or past @start (@slen bytes), as etcd
 * orders keys (bytewise, a prefix first)? */
static bool at_or_past(const char *k, size_t klen, const char *start, size_t slen)
{
	int c = memcmp(k, start, klen < slen ? klen : slen);

	return c > 0 || (c == 0 && klen >= slen);
}

/*
 * Budget names, sorted, one range request per name: keys_only, limit 1,
 * each next start past the last name's own keys, so that a fleet's
 * thousands of records are never listed for it.
 */
static int etcd_budget_list(void *state, char (*names)[SL_LEASE_NAME_MAX], size_t cap,
			    size_t *count)
{
	struct sl__etcd_store *st = state;
	char start[SL__ETCD_KEY_MAX + 2], base[SL__ETCD_KEY_MAX], end[SL__ETCD_KEY_MAX];
	size_t blen, slen, n = 0;
	int rc = 0;

	if (!st || !count || (!names && cap > 0))
		return -EINVAL;
	sl__etcd_key(st, base, "", NULL, NULL); /* "PREFIX/budgets/" */
	blen = strlen(base);
	sl__etcd_prefix_end(end, base);
	memcpy(start, base, blen);
	slen = blen;
	pthread_mutex_lock(&st->lock);
	for (;;) {
		json_t *req, *resp = NULL, *kv;
		char *k, *slash;
		size_t klen;

		req = json_pack("{s:o,s:o,s:b,s:i}", "key", sl__etcd_b64(start, slen), "range_end",
				sl__etcd_b64s(end), "keys_only", 1, "limit", 1);
		if (!req) {
			rc = -ENOMEM;
			break;
		}
		rc = sl__etcd_call(&st->conn, "/v3/kv/range", req, &resp, NULL);
		json_decref(req);
		if (rc)
			break;
		kv = json_array_get(json_object_get(resp, "kvs"), 0);
		k = kv ? sl__etcd_unb64(json_object_get(kv, "key"), &klen) : NULL;
		json_decref(resp);
		if (!kv)
			break;
		/* A key outside the range asked for, or not past where this
		 * round started, is a bad answer: without the check a gateway
		 * that answers one key again and again kept the loop (and the
		 * store's lock, so every lease's renewals) forever. */
		if (!k || klen <= blen || klen >= SL__ETCD_KEY_MAX || memchr(k, '\0', klen) ||
		    memcmp(k, base, blen) != 0 || !at_or_past(k, klen, start, slen)) {
			free(k);
			rc = -EIO;
			break;
		}
		slash = strchr(k + blen, '/');
		if (slash) {
			/* NAME/...: past every key under NAME/ ('0' follows '/'). */
			slen = (size_t)(slash - k);
			memcpy(start, k, slen);
			start[slen++] = '0';
		} else {
			if (sl__lease_name_ok(k + blen)) {
				if (n < cap)
					snprintf(names[n], SL_LEASE_NAME_MAX, "%s", k + blen);
				n++;
			}
			/* Next: the first key after this one, "NAME\0". */
			memcpy(start, k, klen);
			start[klen] = '\0';
			slen = klen + 1;
		}
		free(k);
	}
	pthread_mutex_unlock(&st->lock);
	if (rc < 0)
		return rc;
	*count = n;
	return 0;
}

bool sl__etcd_coordinated(void *state)
{
	return ((struct sl__etcd_store *)state)->coordinated;
}

const struct sl__lease_store_ops sl__lease_store_etcd = {
	.scheme = "etcd",
	.open = etcd_open,
	.close = etcd_close,
	.remove_store = etcd_remove_store,
	.budget_set = etcd_budget_set,
	.budget_get = etcd_budget_get,
	.budget_delete = etcd_budget_delete,
	.budget_list = etcd_budget_list,
	.read = sl__etcd_read,
	.write = sl__etcd_write,
	.remove = sl__etcd_remove,
	.make_id = sl__etcd_make_id,
};
