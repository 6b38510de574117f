/* SPDX-License-Identifier: MIT */
/*
 * Leases: join, leave, stats, and the step that renews a lease, moves its
 * share and applies it to the group (the protocol of lease.h's "Safety").
 * The loop that runs the steps is in lease_run.c.
 *
 * The order of two things carries the whole promise, so it is said once
 * here: a share that shrinks is lowered on the group BEFORE the store hears
 * of it (and what the store then counts is at least the usage read after
 * lowering); a share that grows is raised on the group only AFTER the store
 * has granted it.  A floor follows the same rule.  So at every instant the
 * store counts at least what each group may hold.
 */
#include "lease_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

struct sl_lease {
	sl_lease_store *s;
	sl_group *g;
	struct sl_lease_opts opts;
	char budget[SL_LEASE_NAME_MAX];
	char id[SL_LEASE_ID_MAX];
	struct sl_limits orig; /* the group's limits at join: leave restores them */
	struct sl_limits blim; /* the budget's limits, as last read */

	/* Protocol state, under s->lock. */
	bool registered;       /* a record of ours is in the store's incarnation */
	uint64_t incarnation;
	uint64_t held, floor;  /* as the store has them (floor: as low as any the store may have) */
	uint64_t applied;      /* the share the group's max follows now */
	uint64_t usage, demand; /* as last reported */
	uint64_t events_max;   /* the group's events_max at the last step */
	int64_t expiry_ns;     /* the end of our own view of the lease (CLOCK_MONOTONIC) */
	int64_t next_ns;       /* when the run loop steps it next */
	enum sl_lease_state state;
	struct sl_lease_stats counts; /* the counters; the rest is filled by publish() */

	/* Under s->stat_lock: what sl_lease_stats() reads. */
	struct sl_lease_stats pub;
	int64_t pub_expiry_ns;
	bool pub_registered;

	struct sl_lease *next;  /* s->leases */
	struct sl_lease *gnext; /* leased */
};

/* Every lease of the process, so that a group joins one budget at most. */
static pthread_mutex_t leased_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sl_lease *leased;

#define NS_PER_MS INT64_C(1000000)
/* A join tries this many times when other grows keep winning the compare. */
#define JOIN_TRIES 8
/* The longest ttl a lease may ask for: one hour. */
#define TTL_MAX_MS 3600000u

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static void publish(struct sl_lease *l)
{
	sl_lease_store *s = l->s;

	pthread_mutex_lock(&s->stat_lock);
	l->pub = l->counts;
	l->pub.share = l->applied;
	l->pub.floor = l->floor;
	l->pub.usage = l->usage;
	l->pub.demand = l->demand;
	l->pub.state = l->state;
	l->pub_expiry_ns = l->expiry_ns;
	l->pub_registered = l->registered;
	pthread_mutex_unlock(&s->stat_lock);
}

static void group_read(sl_group *g, uint64_t *counter, uint64_t *events_max)
{
	struct sl_stats st;

	memset(&st, 0, sizeof(st));
	sl_group_stats(g, &st);
	/* Units in stocks are charged to the group: they count as held. */
	*counter = sat_add(st.usage, st.stocked);
	if (events_max)
		*events_max = st.events_max;
}

/* Make the group's limits follow @share: its max (never above its own max
 * at join), its part of the budget's soft, its min where it still fits. */
static int apply(struct sl_lease *l, uint64_t share)
{
	struct sl_limits lim = l->orig;
	uint64_t soft = 0;
	int rc;

	lim.max = min_u64(share, l->orig.max);
	if (l->blim.max && l->blim.soft)
		soft = (uint64_t)((unsigned __int128)l->blim.soft * share / l->blim.max);
	lim.soft = min_u64(soft, lim.max);
	lim.min = min_u64(l->orig.min, lim.max);
	rc = sl_group_set_limits(l->g, &lim);
	/* -EBUSY: the new max is in force, reclaim did not reach it yet; the
	 * group's usage is read after this and reported as it is. */
	if (rc == -EBUSY)
		rc = 0;
	if (!rc)
		l->applied = share;
	return rc;
}

/* Our own view of the lease ended (or the store lost us): fall to the floor. */
static void fence(struct sl_lease *l)
{
	if (l->state == SL_LEASE_FENCED && l->applied <= l->floor)
		return;
	apply(l, min_u64(l->applied, l->floor));
	l->state = SL_LEASE_FENCED;
	l->counts.fences++;
}

/* The store was wiped or replaced: our record is gone with it. */
static void store_reset(struct sl_lease *l)
{
	l->counts.store_resets++;
	fence(l);
	l->registered = false;
}

static const struct sl__lease_rec *find_rec(const struct sl__lease_view *v, const char *id)
{
	size_t i;

	for (i = 0; i < v->n; i++)
		if (!strncmp(v->recs[i].id, id, SL_LEASE_ID_MAX))
			return &v->recs[i];
	return NULL;
}

static bool live(const struct sl__lease_rec *r)
{
	return r->state == SL_LEASE_HELD || r->state == SL_LEASE_STALLED;
}

/* What the store counts for everyone but @id, and how many of them are live. */
static uint64_t counted_others(const struct sl__lease_view *v, const char *id, size_t *nlive)
{
	uint64_t sum = 0;
	size_t i, n = 0;

	for (i = 0; i < v->n; i++) {
		if (!strncmp(v->recs[i].id, id, SL_LEASE_ID_MAX))
			continue;
		sum = sat_add(sum, sl__lease_rec_counted(&v->recs[i]));
		n += live(&v->recs[i]);
	}
	if (nlive)
		*nlive = n;
	return sum;
}

/*
 * Register (join, or rejoin after a deletion or a wipe): a record holding
 * the group's usage, or its floor if more, from the room no one holds.
 * -EBUSY (with *@free set) when that does not fit.
 */
static int register_rec(struct sl_lease *l, const struct sl__lease_view *v, uint64_t *free_out)
{
	struct sl__lease_rec rec;
	size_t n;
	uint64_t others = counted_others(v, l->id, &n), free, floor0, held0, c;
	int64_t sent;
	int rc;

	free = v->limits.max > others ? v->limits.max - others : 0;
	if (free_out)
		*free_out = free;
	floor0 = min_u64(v->limits.min / (n + 1), free);
	group_read(l->g, &c, &l->events_max);
	held0 = max_u64(floor0, c);
	if (held0 > free)
		return -EBUSY;
	memset(&rec, 0, sizeof(rec));
	memcpy(rec.id, l->id, sizeof(rec.id));
	rec.held = held0;
	rec.floor = floor0;
	rec.usage = c;
	rec.demand = c;
	sent = sl__lease_now_ns();
	rc = sl__store_write(l->s, l->budget, &rec, l->opts.ttl_ms, true, v->version, v->incarnation);
	if (rc)
		return rc;
	l->registered = true;
	l->incarnation = v->incarnation;
	l->held = held0;
	l->floor = floor0;
	l->usage = c;
	l->demand = c;
	l->blim = v->limits;
	l->expiry_ns = sent + ((int64_t)l->opts.ttl_ms - (int64_t)l->opts.margin_ms) * NS_PER_MS;
	return 0;
}

/* A step that finds us without a record: claim one, or shrink to fit. */
static void rejoin(struct sl_lease *l, const struct sl__lease_view *v)
{
	uint64_t free = 0;
	int rc = register_rec(l, v, &free);

	if (!rc) {
		apply(l, l->held);
		l->state = SL_LEASE_HELD;
		l->counts.renewals++;
		return;
	}
	if (rc == -EBUSY) {
		/* Never claim more than is free: shrink toward it and claim
		 * what the group then holds, a later period. */
		l->blim = v->limits;
		if (l->applied > free)
			apply(l, free);
		return;
	}
	if (rc != -EAGAIN)
		l->counts.store_errors++;
}

/* What the host says the memory is worth, turned into a demand. */
static uint64_t my_demand(struct sl_lease *l, uint64_t c, uint64_t events_max, uint64_t budget_max)
{
	struct sl_lease_demand d = { UINT64_MAX, 0, 0 };

	if (l->opts.demand)
		l->opts.demand(l, &d, l->opts.demand_ctx);
	else
		d.evicted = events_max - l->events_max;
	l->events_max = events_max;
	return sl__lease_demand(l->applied, c, l->floor, budget_max, d.idle_ms, l->opts.idle_ms,
				d.evicted, d.refaulted);
}

/* Our target: max-min fair over the live participants, from this view;
 * every participant computes the same from the same view. */
static uint64_t target_of(const struct sl__lease_view *v, const char *id, uint64_t my_demand,
			  uint64_t *floor_target)
{
	struct sl__lease_alloc_in *in;
	uint64_t *out, budget = v->limits.max, t;
	size_t i, n = 0, me = 0;

	in = calloc(v->n + 1, sizeof(*in));
	out = calloc(v->n + 1, sizeof(*out));
	if (!in || !out) {
		free(in);
		free(out);
		*floor_target = 0;
		return 0;
	}
	for (i = 0; i < v->n; i++) {
		const struct sl__lease_rec *r = &v->recs[i];
		bool mine = !strncmp(r->id, id, SL_LEASE_ID_MAX);

		if (!mine && !live(r)) {
			/* An expired holder counts at its floor: not ours to share. */
			budget = budget > r->floor ? budget - r->floor : 0;
			continue;
		}
		if (mine)
			me = n;
		in[n++].demand = mine ? my_demand : r->demand;
	}
	*floor_target = v->limits.min / (n ? n : 1);
	for (i = 0; i < n; i++)
		in[i].floor = *floor_target;
	sl__lease_alloc_maxmin(budget, n, in, out);
	t = out[me];
	free(in);
	free(out);
	return t;
}

/* One period of a registered lease whose record is in @v. */
static void renew(struct sl_lease *l, const struct sl__lease_view *v, const struct sl__lease_rec *me,
		  int64_t now)
{
	struct sl__lease_rec rec;
	uint64_t c, ev, t, ft, h = sl__lease_rec_counted(me), held2, floor2;
	bool grows = false;
	int64_t sent;
	int rc;

	/* Waking after a stall past our own view: the floor first. */
	if (now >= l->expiry_ns && l->state != SL_LEASE_FENCED)
		fence(l);
	l->blim = v->limits;
	group_read(l->g, &c, &ev);
	l->demand = my_demand(l, c, ev, v->limits.max);
	t = target_of(v, l->id, l->demand, &ft);

	if (t < h) {
		/* Shrink: the group first, then report what it holds. */
		if (l->applied > t)
			apply(l, t);
		group_read(l->g, &c, NULL);
		held2 = max_u64(t, min_u64(c, h));
	} else if (t > h) {
		uint64_t all = sat_add(counted_others(v, l->id, NULL), h);
		uint64_t room = v->limits.max > all ? v->limits.max - all : 0;

		held2 = h + min_u64(t - h, room);
		grows = held2 > h;
	} else {
		held2 = h;
	}
	floor2 = min_u64(ft, held2);
	if (floor2 > me->floor)
		grows = true;
	else if (floor2 < l->floor)
		l->floor = floor2; /* a lower floor applies here before the store has it */

	memset(&rec, 0, sizeof(rec));
	memcpy(rec.id, l->id, sizeof(rec.id));
	rec.floor = floor2;
	rec.held = held2;
	rec.usage = c;
	rec.demand = l->demand;
	sent = sl__lease_now_ns();
	rc = sl__store_write(l->s, l->budget, &rec, l->opts.ttl_ms, grows, v->version, l->incarnation);
	if (rc == -EAGAIN) {
		/* Another grow won the compare: renew without growing. */
		rec.held = held2 = min_u64(held2, h);
		rec.floor = floor2 = min_u64(floor2, me->floor);
		sent = sl__lease_now_ns();
		rc = sl__store_write(l->s, l->budget, &rec, l->opts.ttl_ms, false, 0, l->incarnation);
	}
	if (rc == -ESTALE) {
		store_reset(l);
		return;
	}
	if (rc == -ENOENT)
		return; /* deleted since the read: the next read says so */
	if (rc) {
		l->counts.store_errors++;
		if (sl__lease_now_ns() >= l->expiry_ns)
			fence(l);
		return;
	}
	l->expiry_ns = sent + ((int64_t)l->opts.ttl_ms - (int64_t)l->opts.margin_ms) * NS_PER_MS;
	l->counts.renewals++;
	if (held2 > h)
		l->counts.grants++;
	else if (held2 < h)
		l->counts.shrinks++;
	l->held = held2;
	l->floor = floor2;
	l->usage = c;
	/* Granted (or still counted): the group may now follow it. */
	if (l->applied != min_u64(t, held2))
		apply(l, min_u64(t, held2));
	l->state = SL_LEASE_HELD;
}

void sl__lease_step(struct sl_lease *l)
{
	struct sl__lease_view v;
	const struct sl__lease_rec *me;
	int64_t now = sl__lease_now_ns();
	int rc = sl__store_read(l->s, l->budget, &v);

	if (rc == -ENOENT) {
		if (l->registered && v.incarnation && v.incarnation != l->incarnation) {
			store_reset(l);
		} else if (l->registered) {
			/* Deleted: keep the last share, frozen, counting nowhere. */
			l->registered = false;
			l->state = SL_LEASE_ORPHANED;
		}
		publish(l);
		return;
	}
	if (rc) {
		l->counts.store_errors++;
		if (l->registered && now >= l->expiry_ns)
			fence(l);
		publish(l);
		return;
	}
	if (l->registered && v.incarnation != l->incarnation)
		store_reset(l);
	me = l->registered ? find_rec(&v, l->id) : NULL;
	if (l->registered && !me)
		l->registered = false; /* deleted and set again since our last read */
	if (!l->registered)
		rejoin(l, &v);
	else
		renew(l, &v, me, now);
	sl__lease_view_free(&v);
	publish(l);
}

/* ---- the public calls ---- */

void sl_lease_opts_init(struct sl_lease_opts *opts)
{
	if (!opts)
		return;
	memset(opts, 0, sizeof(*opts));
	opts->size = sizeof(*opts);
	opts->period_ms = 200;
	opts->ttl_ms = 3000;
	opts->margin_ms = 1000;
	opts->idle_ms = 30000;
}

static int opts_ok(const struct sl_lease_opts *o)
{
	if (o->size != sizeof(*o) || (o->flags & ~(uint32_t)SL_LEASE_DEFERRED))
		return -EINVAL;
	if (o->period_ms == 0 || o->ttl_ms > TTL_MAX_MS || o->margin_ms >= o->ttl_ms)
		return -EINVAL;
	/* A period longer than the lease's own view would let it lapse
	 * between every two renewals. */
	if (o->period_ms > o->ttl_ms - o->margin_ms)
		return -EINVAL;
	return 0;
}

static int claim_group(struct sl_lease *l)
{
	struct sl_lease *p;

	pthread_mutex_lock(&leased_lock);
	for (p = leased; p; p = p->gnext) {
		if (p->g == l->g) {
			pthread_mutex_unlock(&leased_lock);
			return -EEXIST;
		}
	}
	l->gnext = leased;
	leased = l;
	pthread_mutex_unlock(&leased_lock);
	return 0;
}

static void release_group(struct sl_lease *l)
{
	struct sl_lease **pp;

	pthread_mutex_lock(&leased_lock);
	for (pp = &leased; *pp; pp = &(*pp)->gnext) {
		if (*pp == l) {
			*pp = l->gnext;
			break;
		}
	}
	pthread_mutex_unlock(&leased_lock);
}

/* Register at once, on the caller's thread. */
static int join_now(struct sl_lease *l)
{
	struct sl__lease_view v;
	int rc = -EAGAIN, i;

	for (i = 0; i < JOIN_TRIES && rc == -EAGAIN; i++) {
		rc = sl__store_read(l->s, l->budget, &v);
		if (rc)
			return rc;
		rc = register_rec(l, &v, NULL);
		sl__lease_view_free(&v);
	}
	if (rc)
		return rc;
	rc = apply(l, l->held);
	if (rc) {
		sl__store_remove(l->s, l->budget, l->id);
		l->registered = false;
		return rc;
	}
	l->state = SL_LEASE_HELD;
	l->counts.renewals++;
	return 0;
}

int sl_lease_join(sl_lease_store *s, const char *budget, sl_group *g,
		  const struct sl_lease_opts *opts, sl_lease **out)
{
	struct sl_lease *l;
	int rc;

	if (!s || !g || !out || !sl__lease_name_ok(budget))
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	if (opts)
		l->opts = *opts;
	else
		sl_lease_opts_init(&l->opts);
	rc = opts_ok(&l->opts);
	if (rc)
		goto fail;
	l->s = s;
	l->g = g;
	snprintf(l->budget, sizeof(l->budget), "%s", budget);
	rc = sl_group_limits(g, &l->orig);
	if (rc)
		goto fail;
	rc = claim_group(l);
	if (rc)
		goto fail;
	rc = sl__store_make_id(s, l->id);
	if (rc)
		goto fail_release;

	pthread_mutex_lock(&s->lock);
	l->state = SL_LEASE_JOINING;
	if (l->opts.flags & SL_LEASE_DEFERRED) {
		/* Nothing is ours until the run thread registers us. */
		rc = apply(l, 0);
	} else {
		rc = join_now(l);
	}
	if (rc) {
		pthread_mutex_unlock(&s->lock);
		goto fail_release;
	}
	l->next_ns = sl__lease_now_ns();
	l->next = s->leases;
	s->leases = l;
	publish(l);
	pthread_mutex_unlock(&s->lock);
	*out = l;
	return 0;

fail_release:
	release_group(l);
fail:
	free(l);
	return rc;
}

int sl_lease_leave(sl_lease *l)
{
	sl_lease_store *s;
	struct sl_lease **pp;
	int rc = 0;

	if (!l)
		return 0;
	s = l->s;
	pthread_mutex_lock(&s->lock);
	for (pp = &s->leases; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	/* The record first: once the group's limits are back, what it holds
	 * must no longer be promised to the budget. */
	if (l->registered) {
		rc = sl__store_remove(s, l->budget, l->id);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (sl_group_set_limits(l->g, &l->orig) == -EINVAL && !rc)
		rc = -EINVAL;
	pthread_mutex_unlock(&s->lock);
	release_group(l);
	free(l);
	return rc;
}

void sl__lease_leave_all(sl_lease_store *s)
{
	for (;;) {
		struct sl_lease *l;

		pthread_mutex_lock(&s->lock);
		l = s->leases;
		pthread_mutex_unlock(&s->lock);
		if (!l)
			return;
		sl_lease_leave(l);
	}
}

int sl_lease_stats(const sl_lease *l, struct sl_lease_stats *out)
{
	sl_lease_store *s;
	int64_t left;

	if (!l || !out)
		return -EINVAL;
	s = l->s;
	pthread_mutex_lock(&s->stat_lock);
	*out = l->pub;
	left = l->pub_expiry_ns - sl__lease_now_ns();
	if (!l->pub_registered)
		out->expires_ms = -1;
	else
		out->expires_ms = left > 0 ? left / NS_PER_MS : left / NS_PER_MS - 1;
	pthread_mutex_unlock(&s->stat_lock);
	return 0;
}

sl_group *sl_lease_group(const sl_lease *l)
{
	return l ? l->g : NULL;
}

int64_t sl__lease_period_ns(const struct sl_lease *l)
{
	return (int64_t)l->opts.period_ms * NS_PER_MS;
}

int64_t *sl__lease_next_ns(struct sl_lease *l)
{
	return &l->next_ns;
}

struct sl_lease *sl__lease_next(struct sl_lease *l)
{
	return l->next;
}
