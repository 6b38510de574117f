/* SPDX-License-Identifier: MIT */
/*
 * Reading the etcd:// store (keys: store_etcd.c): a budget and its records
 * at one revision, and the store's incarnation, created when absent.
 */
#define _GNU_SOURCE /* getrandom */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "etcd_store.h"

/* ---- the incarnation ---------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t incarnation_of(uint64_t cluster_id, const char *value)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a over the key's value */

	for (const char *p = value; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h = mix64(cluster_id ^ mix64(h));
	return h ? h : 1;
}

/* Record what the cluster's answer says; 0 or -ESTALE when it changed. */
static int note_incarnation(struct sl__etcd_store *st, uint64_t cluster_id, const char *value)
{
	uint64_t inc = incarnation_of(cluster_id, value);
	bool changed = st->have_inc && inc != st->incarnation;

	st->cluster_id = cluster_id;
	snprintf(st->inc_value, sizeof(st->inc_value), "%s", value);
	st->incarnation = inc;
	st->have_inc = true;
	return changed ? -ESTALE : 0;
}

/* Create PREFIX/incarnation unless another node did first; either way note it. */
static int create_incarnation(struct sl__etcd_store *st)
{
	char key[SL__ETCD_KEY_MAX], value[40];
	uint64_t r[2];
	json_t *req, *resp = NULL, *kv;
	struct sl__etcd_hdr hdr;
	char *v;
	size_t len;
	int rc;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -EIO;
	snprintf(value, sizeof(value), "%016llx%016llx", (unsigned long long)r[0],
		 (unsigned long long)r[1]);
	sl__etcd_key(st, key, NULL, NULL, NULL);
	req = json_pack("{s:[{s:o,s:s,s:s,s:o}],s:[{s:{s:o,s:o}}],s:[{s:{s:o}}]}", "compare",
			"key", sl__etcd_b64s(key), "target", "CREATE", "result", "EQUAL",
			"create_revision", sl__etcd_int(0), "success", "request_put", "key",
			sl__etcd_b64s(key), "value", sl__etcd_b64s(value), "failure",
			"request_range", "key", sl__etcd_b64s(key));
	if (!req)
		return -ENOMEM;
	rc = sl__etcd_call(&st->conn, "/v3/kv/txn", req, &resp, &hdr);
	json_decref(req);
	if (rc)
		return rc;
	if (!json_is_true(json_object_get(resp, "succeeded"))) {
		kv = sl__etcd_txn_kv(resp, 0);
		v = kv ? sl__etcd_unb64(json_object_get(kv, "value"), &len) : NULL;
		if (!v) {
			json_decref(resp);
			return -EIO;
		}
		snprintf(value, sizeof(value), "%s", v);
		free(v);
	}
	json_decref(resp);
	note_incarnation(st, hdr.cluster_id, value);
	return 0;
}

int64_t sl__etcd_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- read ---------------------------------------------------------------- */

struct part {
	char id[SL_LEASE_ID_MAX];
	json_t *doc; /* the record's or the floor's JSON */
};

/* Split "KIND/ID" keys under the budget into floors and records (sorted by id). */
static int collect(json_t *kvs, size_t sublen, struct part *floors, size_t *nf,
		   struct part *recs, size_t *nr, int64_t *version)
{
	size_t i;
	json_t *kv;

	json_array_foreach(kvs, i, kv) {
		size_t len;
		char *k = sl__etcd_unb64(json_object_get(kv, "key"), &len);
		const char *rest = k && len > sublen ? k + sublen : "";
		struct part *p = NULL;
		const char *id = NULL;

		if (strcmp(rest, "version") == 0) {
			if (sl__etcd_get_int(json_object_get(kv, "mod_revision"), 0, version)) {
				free(k);
				return -EIO;
			}
		} else if (strncmp(rest, "floor/", 6) == 0) {
			p = &floors[(*nf)++];
			id = rest + 6;
		} else if (strncmp(rest, "rec/", 4) == 0) {
			p = &recs[(*nr)++];
			id = rest + 4;
		}
		if (p) {
			snprintf(p->id, sizeof(p->id), "%s", id);
			p->doc = sl__etcd_kv_json(kv);
			if (!p->doc || strlen(id) >= sizeof(p->id) || !*id) {
				free(k);
				return -EIO;
			}
		}
		free(k);
	}
	return 0;
}

static int fill_rec(struct sl__lease_rec *r, const struct part *rec, const struct part *floor,
		    int64_t now)
{
	uint64_t exp = 0;

	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", rec ? rec->id : floor->id);
	if (!rec) {
		/* The record's lease ran out: only the floor counts. */
		if (sl__etcd_get_u64(floor->doc, "floor", &r->floor))
			return -EIO;
		r->held = r->floor;
		r->expires_ms = -1;
		r->state = SL_LEASE_FENCED;
		return 0;
	}
	if (sl__etcd_get_u64(rec->doc, "held", &r->held) ||
	    sl__etcd_get_u64(rec->doc, "floor", &r->floor) ||
	    sl__etcd_get_u64(rec->doc, "usage", &r->usage) ||
	    sl__etcd_get_u64(rec->doc, "demand", &r->demand) ||
	    sl__etcd_get_u64(rec->doc, "exp", &exp))
		return -EIO;
	/* The writer's wall clock: an estimate, for tools only. */
	r->expires_ms = (int64_t)exp - now;
	r->state = SL_LEASE_HELD;
	return 0;
}

static int build_view(json_t *kvs, size_t sublen, struct sl__lease_view *out)
{
	size_t n = json_array_size(kvs), nf = 0, nr = 0, i = 0, j = 0;
	struct part *floors = calloc(n + 1, sizeof(*floors));
	struct part *recs = calloc(n + 1, sizeof(*recs));
	int64_t version = 0, now = sl__etcd_wall_ms();
	int rc = -ENOMEM;

	out->recs = NULL;
	out->n = 0;
	if (!floors || !recs)
		goto done;
	rc = collect(kvs, sublen, floors, &nf, recs, &nr, &version);
	if (rc)
		goto done;
	out->version = (uint64_t)version;
	out->recs = calloc(nf + nr + 1, sizeof(*out->recs));
	if (!out->recs) {
		rc = -ENOMEM;
		goto done;
	}
	/* Both lists come sorted by id (etcd sorts keys): merge them. */
	while (rc == 0 && (i < nf || j < nr)) {
		int cmp = i == nf ? 1 : j == nr ? -1 : strcmp(floors[i].id, recs[j].id);

		if (cmp < 0)
			rc = fill_rec(&out->recs[out->n++], NULL, &floors[i++], now);
		else if (cmp > 0)
			rc = fill_rec(&out->recs[out->n++], &recs[j++], NULL, now);
		else
			rc = fill_rec(&out->recs[out->n++], &recs[j++], &floors[i++], now);
	}
done:
	for (size_t k = 0; k < n && floors && recs; k++) {
		json_decref(floors[k].doc);
		json_decref(recs[k].doc);
	}
	free(floors);
	free(recs);
	if (rc) {
		free(out->recs);
		out->recs = NULL;
		out->n = 0;
	}
	return rc;
}

/* A member of the coordinated protocol, as read. */
struct cpart {
	char id[SL_LEASE_ID_MAX];
	bool member, rep, grant;
	uint64_t r_held, usage, demand, g_held, g_floor, m_floor;
	int64_t r_session, g_session;
};

static struct cpart *cpart_of(struct cpart *t, size_t *n, const char *id)
{
	size_t i;

	if (!*id || strlen(id) >= SL_LEASE_ID_MAX)
		return NULL;
	for (i = 0; i < *n; i++)
		if (!strcmp(t[i].id, id))
			return &t[i];
	memset(&t[*n], 0, sizeof(t[0]));
	snprintf(t[*n].id, SL_LEASE_ID_MAX, "%s", id);
	return &t[(*n)++];
}

/*
 * The coordinated protocol's members (store_etcd_coord.h), appended to @out
 * as records that count what the store counts for them: their grant and
 * report's larger held while the report (its session) lives and is the
 * grant's, the grant's floor and the report's held otherwise, the floor
 * alone once the report is gone.
 */
static int add_coordinated(json_t *kvs, size_t sublen, struct sl__lease_view *out)
{
	size_t n = json_array_size(kvs), nc = 0, i;
	struct cpart *t = calloc(n + 1, sizeof(*t));
	struct sl__lease_rec *recs;
	json_t *kv;

	if (!t)
		return -ENOMEM;
	json_array_foreach(kvs, i, kv) {
		size_t len;
		char *k = sl__etcd_unb64(json_object_get(kv, "key"), &len);
		const char *rest = k && len > sublen ? k + sublen : "";
		struct cpart *p = NULL;
		json_t *doc = NULL;
		uint64_t session = 0;

		if (!strncmp(rest, "member/", 7) && (p = cpart_of(t, &nc, rest + 7))) {
			p->member = true;
			doc = sl__etcd_kv_json(kv);
			/* No floor: 0; an unreadable one counts the whole budget. */
			if (!doc || (json_object_get(doc, "floor") &&
				     sl__etcd_get_u64(doc, "floor", &p->m_floor)))
				p->m_floor = UINT64_MAX;
		} else if (!strncmp(rest, "rep/", 4) && (p = cpart_of(t, &nc, rest + 4)) &&
			   (doc = sl__etcd_kv_json(kv)) &&
			   !sl__etcd_get_u64(doc, "held", &p->r_held) &&
			   !sl__etcd_get_u64(doc, "usage", &p->usage) &&
			   !sl__etcd_get_u64(doc, "demand", &p->demand) &&
			   !sl__etcd_get_u64(doc, "session", &session)) {
			p->rep = true;
			p->r_session = (int64_t)session;
		} else if (!strncmp(rest, "grant/", 6) && (p = cpart_of(t, &nc, rest + 6)) &&
			   (doc = sl__etcd_kv_json(kv)) &&
			   !sl__etcd_get_u64(doc, "held", &p->g_held) &&
			   !sl__etcd_get_u64(doc, "floor", &p->g_floor) &&
			   !sl__etcd_get_u64(doc, "session", &session)) {
			p->grant = true;
			p->g_session = (int64_t)session;
		}
		json_decref(doc);
		free(k);
	}
	recs = realloc(out->recs, (out->n + nc + 1) * sizeof(*recs));
	if (!recs) {
		free(t);
		return -ENOMEM;
	}
	out->recs = recs;
	for (i = 0; i < nc; i++) {
		struct sl__lease_rec *r;
		const struct cpart *p = &t[i];
		uint64_t floor = p->grant ? p->g_floor : 0;

		/* The floor the member acknowledged counts whatever its grant. */
		if (p->m_floor > floor)
			floor = p->m_floor;

		if (!p->member)
			continue;
		r = &out->recs[out->n++];
		memset(r, 0, sizeof(*r));
		snprintf(r->id, sizeof(r->id), "%s", p->id);
		r->floor = floor;
		r->usage = p->usage;
		r->demand = p->demand;
		if (!p->rep) {
			r->held = floor;
			r->state = SL_LEASE_FENCED;
			r->expires_ms = -1;
		} else {
			uint64_t g = p->grant && p->g_session == p->r_session ? p->g_held : floor;

			if (p->m_floor > g)
				g = p->m_floor;
			r->held = g > p->r_held ? g : p->r_held;
			r->floor = floor < r->held ? floor : r->held;
			r->state = SL_LEASE_HELD;
		}
		out->coordinated++;
	}
	free(t);
	return 0;
}

/*
 * One txn of three ranges, so that the incarnation, the limits and every
 * record are read at one revision.
 */
int sl__etcd_read(void *state, const char *budget, struct sl__lease_view *out)
{
	struct sl__etcd_store *st = state;
	char ikey[SL__ETCD_KEY_MAX], bkey[SL__ETCD_KEY_MAX], sub[SL__ETCD_KEY_MAX];
	char end[SL__ETCD_KEY_MAX];
	json_t *req, *resp = NULL, *kv;
	struct sl__etcd_hdr hdr;
	int rc = -EIO;

	if (!st || !out || !sl__lease_name_ok(budget))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	sl__etcd_key(st, ikey, NULL, NULL, NULL);
	sl__etcd_key(st, bkey, budget, NULL, NULL);
	sl__etcd_key(st, sub, budget, "", NULL);
	sl__etcd_prefix_end(end, sub);
	req = json_pack("{s:[{s:{s:o}},{s:{s:o}},{s:{s:o,s:o}}]}", "success", "request_range",
			"key", sl__etcd_b64s(ikey), "request_range", "key", sl__etcd_b64s(bkey),
			"request_range", "key", sl__etcd_b64s(sub), "range_end", sl__etcd_b64s(end));
	if (!req)
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	for (int attempt = 0; attempt < 2; attempt++) {
		char *inc;
		size_t len;

		json_decref(resp);
		resp = NULL;
		rc = sl__etcd_call(&st->conn, "/v3/kv/txn", req, &resp, &hdr);
		if (rc)
			break;
		kv = sl__etcd_txn_kv(resp, 0);
		if (!kv) {
			/* A new store, or a wiped one: give it an incarnation. */
			rc = create_incarnation(st);
			if (rc)
				break;
			rc = -EIO;
			continue;
		}
		inc = sl__etcd_unb64(json_object_get(kv, "value"), &len);
		if (!inc || len >= sizeof(st->inc_value)) {
			free(inc);
			rc = -EIO;
			break;
		}
		note_incarnation(st, hdr.cluster_id, inc);
		free(inc);
		kv = sl__etcd_txn_kv(resp, 1);
		out->incarnation = st->incarnation;
		if (!kv) {
			/* With the incarnation, so that a budget gone with a wiped
			 * store is told from a deleted one (its holders fence). */
			rc = -ENOENT;
			break;
		}
		rc = sl__etcd_parse_limits(kv, &out->limits);
		if (rc == 0)
			rc = build_view(sl__etcd_txn_kvs(resp, 2), strlen(sub), out);
		if (rc == 0)
			rc = add_coordinated(sl__etcd_txn_kvs(resp, 2), strlen(sub), out);
		break;
	}
	pthread_mutex_unlock(&st->lock);
	json_decref(req);
	json_decref(resp);
	return rc;
}

