/* SPDX-License-Identifier: MIT */
/*
 * Writing the etcd:// store (keys: store_etcd.c): a participant's record
 * under its own etcd lease, grows compared on the budget's version key,
 * the quarantine of a wiped store, and leaves.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd_store.h"

/* ---- the etcd leases of this process's participants ---------------------- */

static void *grow_array(void *p, size_t *cap, size_t n, size_t size)
{
	size_t c;

	if (n < *cap)
		return p;
	c = *cap ? *cap * 2 : 8;
	p = realloc(p, c * size);
	if (p)
		*cap = c;
	return p;
}

static struct sl__etcd_lease *lease_slot(struct sl__etcd_store *st, const char *id, bool create)
{
	struct sl__etcd_lease *l;

	for (size_t i = 0; i < st->n_leases; i++) {
		if (strcmp(st->leases[i].id, id) == 0)
			return &st->leases[i];
	}
	if (!create)
		return NULL;
	l = grow_array(st->leases, &st->cap_leases, st->n_leases, sizeof(*l));
	if (!l)
		return NULL;
	st->leases = l;
	l = &st->leases[st->n_leases++];
	memset(l, 0, sizeof(*l));
	snprintf(l->id, sizeof(l->id), "%s", id);
	return l;
}

static void lease_drop(struct sl__etcd_store *st, struct sl__etcd_lease *l)
{
	*l = st->leases[--st->n_leases];
}

void sl__etcd_store_free_rec_state(struct sl__etcd_store *st)
{
	free(st->leases);
	st->leases = NULL;
	st->n_leases = st->cap_leases = 0;
}

/* ---- write --------------------------------------------------------------- */

/* Keep @l's etcd lease alive, or grant a new one (the old one ran out). */
static int lease_renew(struct sl__etcd_store *st, struct sl__etcd_lease *l, uint32_t ttl_s)
{
	json_t *req, *resp = NULL;
	int64_t v;
	int rc;

	if (l->lease && l->ttl_s >= ttl_s) {
		req = json_pack("{s:o}", "ID", sl__etcd_int(l->lease));
		if (!req)
			return -ENOMEM;
		rc = sl__etcd_call(&st->conn, "/v3/lease/keepalive", req, &resp, NULL);
		json_decref(req);
		/* An expired lease answers without a TTL (0), or "not found". */
		if (rc == 0 && (sl__etcd_get_int(json_object_get(resp, "TTL"), 0, &v) || v <= 0))
			rc = -ENOENT;
		json_decref(resp);
		if (rc != -ENOENT)
			return rc;
		l->lease = 0;
	}
	req = json_pack("{s:I}", "TTL", (json_int_t)ttl_s);
	if (!req)
		return -ENOMEM;
	rc = sl__etcd_call(&st->conn, "/v3/lease/grant", req, &resp, NULL);
	json_decref(req);
	if (rc == 0 && (sl__etcd_get_int(json_object_get(resp, "ID"), 0, &v) || v == 0))
		rc = -EIO;
	if (rc == 0) {
		l->lease = v;
		l->ttl_s = ttl_s;
	}
	json_decref(resp);
	return rc;
}

static json_t *cmp_value(const char *key, const char *value, size_t len)
{
	return json_pack("{s:o,s:s,s:s,s:o}", "key", sl__etcd_b64s(key), "target", "VALUE",
			 "result", "EQUAL", "value", sl__etcd_b64(value, len));
}

static json_t *cmp_rev(const char *key, const char *target, const char *field,
		       const char *result, int64_t v)
{
	return json_pack("{s:o,s:s,s:s,s:o}", "key", sl__etcd_b64s(key), "target", target, "result",
			 result, field, sl__etcd_int(v));
}

static json_t *op_put(const char *key, const char *value, int64_t lease)
{
	json_t *put = json_pack("{s:o,s:o}", "key", sl__etcd_b64s(key), "value",
				sl__etcd_b64s(value));

	if (put && lease && json_object_set_new(put, "lease", sl__etcd_int(lease))) {
		json_decref(put);
		return NULL;
	}
	return json_pack("{s:o}", "request_put", put);
}

static json_t *op_range(const char *key)
{
	return json_pack("{s:{s:o}}", "request_range", "key", sl__etcd_b64s(key));
}

struct write_keys {
	char inc[SL__ETCD_KEY_MAX], budget[SL__ETCD_KEY_MAX], version[SL__ETCD_KEY_MAX];
	char rec[SL__ETCD_KEY_MAX], floor[SL__ETCD_KEY_MAX], fresh[SL__ETCD_KEY_MAX];
	char *rec_json, *floor_json;
};

static int record_json(struct write_keys *k, const struct sl__lease_rec *rec, uint32_t ttl_s)
{
	json_t *r = json_object(), *f = json_object();
	int rc = -ENOMEM;

	if (r && f && !sl__etcd_set_u64(r, "held", rec->held) &&
	    !sl__etcd_set_u64(r, "floor", rec->floor) && !sl__etcd_set_u64(r, "usage", rec->usage) &&
	    !sl__etcd_set_u64(r, "demand", rec->demand) &&
	    !sl__etcd_set_u64(r, "exp", (uint64_t)(sl__etcd_wall_ms() + (int64_t)ttl_s * 1000)) &&
	    !sl__etcd_set_u64(f, "floor", rec->floor)) {
		k->rec_json = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
		k->floor_json = json_dumps(f, JSON_COMPACT);
		if (k->rec_json && k->floor_json)
			rc = 0;
	}
	json_decref(r);
	json_decref(f);
	return rc;
}

/*
 * Send one write txn: the store's incarnation and the budget must be
 * there, plus the compares in @guards (an array); on success put the
 * record (under @lease), the floor, the version key when @bump, and @extra
 * (an array of ops, or NULL).  *@ok says whether the compares held; on
 * failure *@fail holds the failure ranges' answer: [incarnation, budget,
 * floor].
 */
static int write_txn(struct sl__etcd_store *st, const struct write_keys *k, json_t *guards,
		     json_t *extra, int64_t lease, bool bump, bool *ok, json_t **fail)
{
	json_t *req, *resp = NULL, *ops;
	struct sl__etcd_hdr hdr;
	int rc;

	*fail = NULL;
	ops = json_pack("[o,o]", op_put(k->rec, k->rec_json, lease), op_put(k->floor, k->floor_json, 0));
	if (ops && ((bump && json_array_append_new(ops, op_put(k->version, "", 0))) ||
		    (extra && json_array_extend(ops, extra)))) {
		json_decref(ops);
		ops = NULL;
	}
	req = json_pack("{s:[o,o],s:o,s:[o,o,o]}", "compare",
			cmp_value(k->inc, st->inc_value, strlen(st->inc_value)),
			cmp_rev(k->budget, "CREATE", "create_revision", "GREATER", 0), "success", ops,
			"failure", op_range(k->inc), op_range(k->budget), op_range(k->floor));
	if (req && json_array_extend(json_object_get(req, "compare"), guards)) {
		json_decref(req);
		req = NULL;
	}
	if (!req)
		return -ENOMEM;
	rc = sl__etcd_call(&st->conn, "/v3/kv/txn", req, &resp, &hdr);
	json_decref(req);
	if (rc)
		return rc;
	if (hdr.cluster_id != st->cluster_id) {
		/* Another cluster answered (restored from a backup, rebuilt):
		 * whatever it did, the caller's view is of a store that is gone. */
		json_decref(resp);
		return -ESTALE;
	}
	*ok = json_is_true(json_object_get(resp, "succeeded"));
	if (*ok)
		json_decref(resp);
	else
		*fail = resp;
	return 0;
}

/* Why a write's compares failed: -ESTALE, -ENOENT, or 0 (the guard). */
static int write_failed(struct sl__etcd_store *st, json_t *fail)
{
	json_t *kv = sl__etcd_txn_kv(fail, 0);
	size_t len;
	char *inc = kv ? sl__etcd_unb64(json_object_get(kv, "value"), &len) : NULL;
	int rc = 0;

	if (!inc || strcmp(inc, st->inc_value) != 0)
		rc = -ESTALE;
	else if (!sl__etcd_txn_kv(fail, 1))
		rc = -ENOENT;
	free(inc);
	return rc;
}

/*
 * A write that does not grow, of a record whose lease ran out (the store
 * counts its floor, F): the record may come back as long as it counts no
 * more than F, guarded by the floor key's value being the one just read.
 */
static int rewrite_expired(struct sl__etcd_store *st, const struct write_keys *k,
			   const struct sl__lease_rec *rec, json_t *fail, int64_t lease)
{
	json_t *kv = sl__etcd_txn_kv(fail, 2), *guard, *doc;
	uint64_t stored = 0;
	char *raw = NULL;
	size_t len = 0;
	bool ok = false;
	json_t *again = NULL;
	int rc;

	if (kv) {
		raw = sl__etcd_unb64(json_object_get(kv, "value"), &len);
		doc = sl__etcd_kv_json(kv);
		rc = raw && doc ? sl__etcd_get_u64(doc, "floor", &stored) : -EIO;
		json_decref(doc);
		if (rc) {
			free(raw);
			return rc;
		}
	}
	if (rec->held > stored || rec->floor > stored) {
		free(raw);
		return -EAGAIN;
	}
	guard = json_pack("[o]", kv ? cmp_value(k->floor, raw, len)
				    : cmp_rev(k->floor, "CREATE", "create_revision", "EQUAL", 0));
	free(raw);
	if (!guard)
		return -ENOMEM;
	rc = write_txn(st, k, guard, NULL, lease, false, &ok, &again);
	json_decref(guard);
	if (rc == 0 && !ok) {
		rc = write_failed(st, again);
		json_decref(again);
		return rc ? rc : -EAGAIN;
	}
	return rc;
}

/*
 * A store that came back empty (wiped) has lost the floors its old holders
 * fell to: they still hold that memory, and nothing in the new store
 * counts it until each holder registers again.  So the first of them to
 * register puts budgets/NAME/fresh under an etcd lease of three ttls, and
 * while it is there registrations go through but no record grows: the old
 * holders, which all read the new incarnation within a period or two of
 * each other, are counted before anyone takes more.  (A holder that cannot
 * register within the quarantine, stalled or cut off, is not protected.)
 */
static int quarantine(struct sl__etcd_store *st, const struct write_keys *k, uint32_t ttl_s,
		      json_t **extra)
{
	json_t *req, *resp = NULL;
	int64_t id = 0;
	int rc;

	req = json_pack("{s:I}", "TTL", (json_int_t)ttl_s * 3);
	if (!req)
		return -ENOMEM;
	rc = sl__etcd_call(&st->conn, "/v3/lease/grant", req, &resp, NULL);
	json_decref(req);
	if (rc == 0 && (sl__etcd_get_int(json_object_get(resp, "ID"), 0, &id) || id == 0))
		rc = -EIO;
	json_decref(resp);
	if (rc == 0) {
		*extra = json_pack("[o]", op_put(k->fresh, "", id));
		if (!*extra)
			rc = -ENOMEM;
	}
	return rc;
}

/*
 * The compares of a write beyond the incarnation and the budget.  A grow:
 * no other grow since the caller's read (the version), and no quarantine
 * unless it is this participant's first record in this incarnation (a
 * registration).  Otherwise: the record is still live under this lease (if
 * it ran out, the store counts only its floor and a full record would count
 * for more).
 */
static json_t *write_guards(const struct write_keys *k, const struct sl__etcd_lease *l, bool grows,
			    uint64_t version, uint64_t incarnation)
{
	json_t *g;

	if (!grows)
		return json_pack("[o]", cmp_rev(k->rec, "LEASE", "lease", "EQUAL", l->lease));
	g = json_pack("[o]", cmp_rev(k->version, "MOD", "mod_revision", "EQUAL", (int64_t)version));
	if (g && l->incarnation == incarnation &&
	    json_array_append_new(g, cmp_rev(k->fresh, "CREATE", "create_revision", "EQUAL", 0))) {
		json_decref(g);
		g = NULL;
	}
	return g;
}

int sl__etcd_write(void *state, const char *budget, const struct sl__lease_rec *rec,
		   uint32_t ttl_ms, bool grows, uint64_t version, uint64_t incarnation)
{
	struct sl__etcd_store *st = state;
	struct write_keys k = { .rec_json = NULL };
	struct sl__etcd_lease *l;
	uint32_t ttl_s = ttl_ms < 2000 ? 2 : (uint32_t)((ttl_ms + 999ull) / 1000);
	json_t *guard = NULL, *fail = NULL, *extra = NULL;
	bool ok = false;
	int rc;

	if (!st || !rec || !sl__lease_name_ok(budget) || !rec->id[0] ||
	    !memchr(rec->id, '\0', sizeof(rec->id)) || strchr(rec->id, '/') || rec->floor > rec->held)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	if (!st->have_inc || incarnation != st->incarnation) {
		rc = -ESTALE;
		goto out;
	}
	sl__etcd_key(st, k.inc, NULL, NULL, NULL);
	sl__etcd_key(st, k.budget, budget, NULL, NULL);
	sl__etcd_key(st, k.version, budget, "version", NULL);
	sl__etcd_key(st, k.rec, budget, "rec", rec->id);
	sl__etcd_key(st, k.floor, budget, "floor", rec->id);
	sl__etcd_key(st, k.fresh, budget, "fresh", NULL);
	l = lease_slot(st, rec->id, true);
	rc = l ? record_json(&k, rec, ttl_s) : -ENOMEM;
	/* The keepalive goes after the caller took its send time: the store's
	 * lease ends at least ttl after it. */
	if (rc == 0)
		rc = lease_renew(st, l, ttl_s);
	if (rc == 0 && grows && l->incarnation && l->incarnation != st->incarnation)
		rc = quarantine(st, &k, ttl_s, &extra);
	if (rc)
		goto out;
	guard = write_guards(&k, l, grows, version, st->incarnation);
	rc = guard ? write_txn(st, &k, guard, extra, l->lease, grows, &ok, &fail) : -ENOMEM;
	if (rc == 0 && !ok) {
		rc = write_failed(st, fail);
		if (rc == 0)
			rc = grows ? -EAGAIN : rewrite_expired(st, &k, rec, fail, l->lease);
	}
	if (rc == 0)
		l->incarnation = st->incarnation;
out:
	pthread_mutex_unlock(&st->lock);
	json_decref(guard);
	json_decref(fail);
	json_decref(extra);
	free(k.rec_json);
	free(k.floor_json);
	return rc;
}

/* ---- remove, ids --------------------------------------------------------- */

int sl__etcd_remove(void *state, const char *budget, const char *id)
{
	struct sl__etcd_store *st = state;
	char rkey[SL__ETCD_KEY_MAX], fkey[SL__ETCD_KEY_MAX];
	json_t *req, *resp = NULL, *r;
	struct sl__etcd_lease *l;
	int64_t deleted = 0, d;
	size_t i;
	int rc;

	if (!st || !sl__lease_name_ok(budget) || !id || !*id || strchr(id, '/') ||
	    strlen(id) >= SL_LEASE_ID_MAX)
		return -EINVAL;
	sl__etcd_key(st, rkey, budget, "rec", id);
	sl__etcd_key(st, fkey, budget, "floor", id);
	req = json_pack("{s:[{s:{s:o}},{s:{s:o}}]}", "success", "request_delete_range", "key",
			sl__etcd_b64s(rkey), "request_delete_range", "key", sl__etcd_b64s(fkey));
	if (!req)
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	rc = sl__etcd_call(&st->conn, "/v3/kv/txn", req, &resp, NULL);
	json_decref(req);
	if (rc == 0) {
		json_array_foreach(json_object_get(resp, "responses"), i, r) {
			r = json_object_get(r, "response_delete_range");
			if (sl__etcd_get_int(json_object_get(r, "deleted"), 0, &d) == 0)
				deleted += d;
		}
		if (deleted == 0)
			rc = -ENOENT;
	}
	json_decref(resp);
	l = lease_slot(st, id, false);
	if (l) {
		/* Its keys are gone; the lease would only expire later. */
		if (l->lease && rc != -ETIMEDOUT) {
			req = json_pack("{s:o}", "ID", sl__etcd_int(l->lease));
			resp = NULL;
			if (req && sl__etcd_call(&st->conn, "/v3/lease/revoke", req, &resp, NULL) == 0)
				json_decref(resp);
			json_decref(req);
		}
		lease_drop(st, l);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int sl__etcd_make_id(void *state, char id[SL_LEASE_ID_MAX])
{
	struct sl__etcd_store *st = state;
	uint64_t n;

	if (!st || !id)
		return -EINVAL;
	/* Not st->lock: it is held across I/O, and an id must not wait for
	 * a store call in flight (store.h). */
	n = atomic_fetch_add_explicit(&st->ids, 1, memory_order_relaxed) + 1;
	/* node:pid:nonce:n — unique per join in this process, across the
	 * processes of a node by the pid, and across nodes by the nonce: two
	 * nodes given one name (or hostnames alike in their first 40 bytes),
	 * each with its process at pid 1, once shared a record and held the
	 * budget twice over. */
	snprintf(id, SL_LEASE_ID_MAX, "%.40s:%ld:%012llx:%llu", st->node, (long)getpid(),
		 (unsigned long long)(st->nonce & 0xffffffffffffull), (unsigned long long)n);
	return 0;
}
