/* SPDX-License-Identifier: MIT */
/*
 * shm:NAME, the store's operations (store.h) on the object that
 * store_shm_object.c maps and locks: every operation copies entries in or
 * out under the mutex and does anything slower (allocation, /proc reads)
 * outside it.  Participant ids are "node:pid:start:n".
 */
#include "store_shm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int find_budget(const struct shm_state *st, const char *name)
{
	uint32_t i;

	for (i = 0; i < st->nb; i++) {
		const struct shm_budget_data *d = bcur(&budgets(st)[i]);

		if (sl__shm_budget_ok(d) && !strcmp(d->name, name))
			return (int)i;
	}
	return -ENOENT;
}

static int find_slot(const struct shm_state *st, uint32_t budget, const char *id)
{
	uint32_t i;

	for (i = 0; i < st->ns; i++) {
		const struct shm_slot_data *d = scur(&slots(st)[i]);

		if (sl__shm_slot_ok(st, d) && d->budget == budget &&
		    !strncmp(d->id, id, sizeof(d->id)))
			return (int)i;
	}
	return -ENOENT;
}

static void free_slot(struct shm_state *st, uint32_t i)
{
	struct shm_header *h = st->h;
	struct shm_slot *sl = &slots(st)[i];
	struct shm_slot_data z, *d = scur(sl);

	memset(&z, 0, sizeof(z));
	z.gen = d->gen + 1;
	if (d->budget < st->nb && budgets(st)[d->budget].nrec)
		budgets(st)[d->budget].nrec--;
	if (h->slots_used)
		h->slots_used--;
	sput(sl, &z);
}

/* ---- the operations ---- */

static int shm_open_store(const char *rest, const struct sl_lease_store_opts *opts, void **state)
{
	struct shm_state *st;
	int rc;

	if (!sl__lease_name_ok(rest))
		return -EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	snprintf(st->name, sizeof(st->name), "/softlimit-%s", rest);
	st->fd = -1;
	st->timeout_ms = opts->timeout_ms;
	st->slots = opts->slots;
	if (opts->node) {
		snprintf(st->node, sizeof(st->node), "%s", opts->node);
	} else {
		size_t i;

		if (gethostname(st->node, SL__LEASE_NODE_MAX + 1) < 0 || !st->node[0])
			snprintf(st->node, sizeof(st->node), "localhost");
		st->node[SL__LEASE_NODE_MAX] = '\0';
		/* A participant id is "node:pid:start:n": keep ':' out of node. */
		for (i = 0; st->node[i]; i++)
			if (st->node[i] == ':')
				st->node[i] = '_';
	}
	rc = sl__shm_attach(st);
	if (rc) {
		free(st);
		return rc;
	}
	*state = st;
	return 0;
}

static void shm_close_store(void *state)
{
	struct shm_state *st = state;

	sl__shm_detach(st);
	free(st);
}

static int shm_budget_set(void *state, const char *name, const struct sl_limits *lim)
{
	struct shm_state *st = state;
	struct shm_budget_data d;
	struct shm_header *h;
	int rc = sl__shm_enter(st), i;

	if (rc)
		return rc;
	h = st->h;
	i = find_budget(st, name);
	if (i < 0) {
		uint32_t j;

		/* A corrupt entry is free space: taking it repairs it. */
		for (j = 0; j < st->nb && sl__shm_budget_ok(bcur(&budgets(st)[j])); j++)
			;
		if (j == st->nb) {
			sl__shm_unlock(st);
			return -ENOSPC;
		}
		i = (int)j;
		/* Slots left pointing here (by a crash or a scribble) would
		 * become the new budget's records: records first, as in delete. */
		for (j = 0; j < st->ns; j++) {
			struct shm_slot_data *sd = scur(&slots(st)[j]);

			if (sd->used && sd->budget == (uint32_t)i)
				free_slot(st, j);
		}
		memset(&d, 0, sizeof(d));
		d.used = 1;
		snprintf(d.name, sizeof(d.name), "%s", name);
		budgets(st)[i].nrec = 0;
		h->budgets_used++;
	} else {
		d = *bcur(&budgets(st)[i]);
	}
	d.lim = *lim;
	/* New limits change what is free: a grow computed on the old ones
	 * must fail its compare. */
	d.version = ++h->version_seq;
	bput(&budgets(st)[i], &d);
	sl__shm_unlock(st);
	return 0;
}

static int shm_budget_get(void *state, const char *name, struct sl_limits *out)
{
	struct shm_state *st = state;
	int rc = sl__shm_enter(st), i;

	if (rc)
		return rc;
	i = find_budget(st, name);
	if (i >= 0)
		*out = bcur(&budgets(st)[i])->lim;
	sl__shm_unlock(st);
	return i < 0 ? i : 0;
}

static int shm_budget_delete(void *state, const char *name)
{
	struct shm_state *st = state;
	struct shm_budget_data z;
	struct shm_header *h;
	uint32_t j;
	int rc = sl__shm_enter(st), i;

	if (rc)
		return rc;
	h = st->h;
	i = find_budget(st, name);
	if (i < 0) {
		sl__shm_unlock(st);
		return i;
	}
	/* Records first: a crash between leaves a budget with fewer records,
	 * never records of no budget. */
	for (j = 0; j < st->ns; j++) {
		struct shm_slot_data *d = scur(&slots(st)[j]);

		if (d->used && d->budget == (uint32_t)i)
			free_slot(st, j);
	}
	memset(&z, 0, sizeof(z));
	bput(&budgets(st)[i], &z);
	if (h->budgets_used)
		h->budgets_used--;
	sl__shm_unlock(st);
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int shm_budget_list(void *state, char (*names)[SL_LEASE_NAME_MAX], size_t cap, size_t *count)
{
	struct shm_state *st = state;
	char (*all)[SL_LEASE_NAME_MAX];
	uint32_t i, n = 0;
	int rc = sl__shm_ensure_current(st);

	if (rc)
		return rc;
	all = calloc(st->nb ? st->nb : 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	rc = sl__shm_lock(st);
	if (rc) {
		free(all);
		return rc;
	}
	for (i = 0; i < st->nb; i++) {
		const struct shm_budget_data *d = bcur(&budgets(st)[i]);

		if (sl__shm_budget_ok(d))
			memcpy(all[n++], d->name, SL_LEASE_NAME_MAX);
	}
	sl__shm_unlock(st);
	qsort(all, n, sizeof(*all), name_cmp);
	for (i = 0; i < n && i < cap; i++)
		memcpy(names[i], all[i], SL_LEASE_NAME_MAX);
	*count = n;
	free(all);
	return 0;
}

struct raw_slot {
	uint32_t index;
	struct shm_slot_data d;
};

/* Free the slots of dead processes found by a read, each only if unchanged. */
static void reap(struct shm_state *st, const struct raw_slot *dead, size_t n)
{
	size_t i;

	if (!n || sl__shm_lock(st))
		return;
	for (i = 0; i < n; i++) {
		struct shm_slot_data *d = scur(&slots(st)[dead[i].index]);

		if (d->used && d->gen == dead[i].d.gen)
			free_slot(st, dead[i].index);
	}
	sl__shm_unlock(st);
}

static int shm_read(void *state, const char *budget, struct sl__lease_view *out)
{
	struct shm_state *st = state;
	struct raw_slot *raw;
	size_t n = 0, nlive = 0, ndead = 0, k;
	int64_t now;
	uint32_t i;
	int rc = sl__shm_ensure_current(st), b;

	if (rc)
		return rc;
	raw = calloc(st->ns ? st->ns : 1, sizeof(*raw));
	if (!raw)
		return -ENOMEM;
	rc = sl__shm_lock(st);
	if (rc) {
		free(raw);
		return rc;
	}
	out->incarnation = st->h->incarnation;
	b = find_budget(st, budget);
	if (b < 0) {
		sl__shm_unlock(st);
		free(raw);
		return b;
	}
	out->limits = bcur(&budgets(st)[b])->lim;
	out->version = bcur(&budgets(st)[b])->version;
	for (i = 0; i < st->ns; i++) {
		const struct shm_slot_data *d = scur(&slots(st)[i]);

		if (sl__shm_slot_ok(st, d) && d->budget == (uint32_t)b) {
			raw[n].index = i;
			raw[n].d = *d;
			n++;
		}
	}
	sl__shm_unlock(st);

	out->recs = calloc(n ? n : 1, sizeof(*out->recs));
	if (!out->recs) {
		free(raw);
		return -ENOMEM;
	}
	now = sl__lease_now_ns();
	/* Liveness outside the lock (it reads /proc); dead slots go to the
	 * front of raw, live records to out. */
	for (k = 0; k < n; k++) {
		struct sl__lease_rec *r;
		int64_t left;

		if (!sl__shm_proc_alive(st, raw[k].d.pid, raw[k].d.start)) {
			raw[ndead++] = raw[k];
			continue;
		}
		r = &out->recs[nlive++];
		memcpy(r->id, raw[k].d.id, sizeof(r->id));
		r->id[sizeof(r->id) - 1] = '\0';
		r->held = raw[k].d.held;
		r->floor = raw[k].d.floor;
		r->usage = raw[k].d.usage;
		r->demand = raw[k].d.demand;
		/* Both are >= 0 (sl__shm_slot_ok()): no overflow. */
		left = raw[k].d.expires_ns - now;
		r->expires_ms = left > 0 ? left / 1000000 : left / 1000000 - 1;
		/* One host: a live process past its lease still holds its memory. */
		r->state = raw[k].d.expires_ns > now ? SL_LEASE_HELD : SL_LEASE_STALLED;
	}
	out->n = nlive;
	reap(st, raw, ndead);
	free(raw);
	return 0;
}

static int shm_write(void *state, const char *budget, const struct sl__lease_rec *rec,
		     uint32_t ttl_ms, bool grows, uint64_t version, uint64_t incarnation)
{
	struct shm_state *st = state;
	struct shm_budget_data bd;
	struct shm_slot_data d;
	struct shm_header *h;
	int64_t expires = sl__lease_now_ns() + (int64_t)ttl_ms * 1000000;
	uint64_t start = sl__shm_self_start();
	int rc = sl__shm_enter(st), b, i;

	if (rc)
		return rc;
	h = st->h;
	if (h->incarnation != incarnation) {
		sl__shm_unlock(st);
		return -ESTALE;
	}
	b = find_budget(st, budget);
	if (b < 0) {
		sl__shm_unlock(st);
		return b;
	}
	bd = *bcur(&budgets(st)[b]);
	if (grows && bd.version != version) {
		sl__shm_unlock(st);
		return -EAGAIN;
	}
	i = find_slot(st, (uint32_t)b, rec->id);
	if (i < 0) {
		uint32_t j;

		/* A new record counts for more than none: only by a grow. */
		if (!grows) {
			sl__shm_unlock(st);
			return -ENOENT;
		}
		/* A corrupt slot is free space. */
		for (j = 0; j < st->ns && sl__shm_slot_ok(st, scur(&slots(st)[j])); j++)
			;
		if (j == st->ns) {
			sl__shm_unlock(st);
			return -ENOSPC;
		}
		i = (int)j;
		budgets(st)[b].nrec++;
		h->slots_used++;
	}
	memset(&d, 0, sizeof(d));
	d.used = 1;
	d.budget = (uint32_t)b;
	d.pid = (int32_t)getpid();
	d.start = start;
	d.gen = scur(&slots(st)[i])->gen + 1;
	memcpy(d.id, rec->id, sizeof(d.id));
	d.id[sizeof(d.id) - 1] = '\0';
	d.held = rec->held;
	d.floor = rec->floor;
	d.usage = rec->usage;
	d.demand = rec->demand;
	d.expires_ns = expires;
	sput(&slots(st)[i], &d);
	if (grows) {
		bd.version = ++h->version_seq;
		bput(&budgets(st)[b], &bd);
	}
	sl__shm_unlock(st);
	return 0;
}

static int shm_remove(void *state, const char *budget, const char *id)
{
	struct shm_state *st = state;
	int rc = sl__shm_enter(st), b, i;

	if (rc)
		return rc;
	b = find_budget(st, budget);
	i = b < 0 ? b : find_slot(st, (uint32_t)b, id);
	if (i >= 0)
		free_slot(st, (uint32_t)i);
	sl__shm_unlock(st);
	return i < 0 ? i : 0;
}

static int shm_make_id(void *state, char id[SL_LEASE_ID_MAX])
{
	/* Process-wide, so two stores of one process never give one id. */
	static atomic_uint_fast64_t seq;
	struct shm_state *st = state;

	snprintf(id, SL_LEASE_ID_MAX, "%s:%d:%llu:%llu", st->node, (int)getpid(),
		 (unsigned long long)sl__shm_self_start(),
		 (unsigned long long)atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed));
	return 0;
}

const struct sl__lease_store_ops sl__lease_store_shm = {
	.scheme = "shm",
	.open = shm_open_store,
	.close = shm_close_store,
	.budget_set = shm_budget_set,
	.budget_get = shm_budget_get,
	.budget_delete = shm_budget_delete,
	.budget_list = shm_budget_list,
	.read = shm_read,
	.write = shm_write,
	.remove = shm_remove,
	.remove_store = sl__shm_remove_store,
	.make_id = shm_make_id,
	.counts_while_alive = true,
};

/* ---- test hooks (lease_int.h) ---- */

int sl__lease_shm_test_lock(sl_lease_store *s)
{
	return s->ops == &sl__lease_store_shm ? sl__shm_enter(s->state) : -EINVAL;
}

int sl__lease_shm_test_totals(sl_lease_store *s, uint32_t kept[2], uint32_t counted[2])
{
	struct shm_state *st = s->state;
	uint32_t i;
	int rc;

	if (s->ops != &sl__lease_store_shm)
		return -EINVAL;
	rc = sl__shm_enter(st);
	if (rc)
		return rc;
	kept[0] = st->h->budgets_used;
	kept[1] = st->h->slots_used;
	counted[0] = counted[1] = 0;
	for (i = 0; i < st->nb; i++)
		counted[0] += bcur(&budgets(st)[i])->used != 0;
	for (i = 0; i < st->ns; i++)
		counted[1] += scur(&slots(st)[i])->used != 0;
	sl__shm_unlock(st);
	return 0;
}

void sl__lease_shm_test_crash_locked(sl_lease_store *s)
{
	struct shm_state *st = s->state;
	struct shm_header *h = st->h;
	uint32_t i;

	/* What a crash in the middle of a write leaves: wrong totals, and the
	 * next copy of every slot in use half-written. */
	h->budgets_used = 7777;
	h->slots_used = 9999;
	for (i = 0; i < st->nb; i++)
		budgets(st)[i].nrec = 4242;
	for (i = 0; i < st->ns; i++) {
		struct shm_slot *sl = &slots(st)[i];
		uint32_t next = (atomic_load_explicit(&sl->cur, memory_order_relaxed) & 1) ^ 1;

		if (scur(sl)->used)
			memset(&sl->d[next], 0xa5, sizeof(sl->d[next]));
	}
	_exit(0);
}
