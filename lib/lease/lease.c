/* SPDX-License-Identifier: MIT */
/*
 * Leases: join, leave, stats, and what the run thread's step (lease_run.c)
 * builds on: registering a record, applying a share to the group, falling
 * to the floor (the protocol of lease.h's "Safety").
 *
 * The order of two things carries the whole promise, so it is said once
 * here: a share that shrinks is lowered on the group BEFORE the store hears
 * of it (and what the store then counts is at least the usage read after
 * lowering); a share that grows is raised on the group only AFTER the store
 * has granted it.  A floor follows the same rule.  So at every instant the
 * store counts at least what each group may hold.
 */
#include "lease_int.h"
#ifdef SL_HAVE_ETCD
#include "store_etcd_coord.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every lease of the process, so that a group joins one budget at most. */
static pthread_mutex_t leased_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sl_lease *leased;

/* A join tries this many times when other grows keep winning the compare. */
#define JOIN_TRIES 8
/* The longest ttl a lease may ask for: one hour. */
#define TTL_MAX_MS 3600000u

void (*sl__lease_publish_hook)(struct sl_lease *l);

/*
 * What sl_lease_stats() reads, published at every change of the share, the
 * floor or the state, not only at the end of a step: a raise shows before
 * the group may use it and a cut or a lowered floor before the store hears
 * of it, so the figures never show less than the group may hold nor more
 * than the store counts for it.
 */
void sl__lease_publish(struct sl_lease *l)
{
	sl_lease_store *s = l->s;

	pthread_mutex_lock(&s->stat_lock);
	l->pub = l->counts;
	l->pub.share = max_u64(l->applied, l->raising);
	l->pub.floor = l->floor;
	l->pub.usage = l->usage;
	l->pub.demand = l->demand;
	l->pub.state = l->state;
	l->pub_expiry_ns = l->expiry_ns;
	l->pub_registered = l->registered;
	pthread_mutex_unlock(&s->stat_lock);
	if (sl__lease_publish_hook)
		sl__lease_publish_hook(l);
}

void sl__lease_group_read(sl_group *g, uint64_t *counter, uint64_t *events_max)
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
int sl__lease_apply(struct sl_lease *l, uint64_t share)
{
	struct sl_limits lim = l->orig;
	uint64_t soft = 0;
	int rc;

	lim.max = min_u64(share, l->orig.max);
	if (l->blim.max && l->blim.soft)
		soft = (uint64_t)((unsigned __int128)l->blim.soft * share / l->blim.max);
	lim.soft = min_u64(soft, lim.max);
	lim.min = min_u64(l->orig.min, lim.max);
	if (share > l->applied) {
		l->raising = share;
		sl__lease_publish(l);
	}
	rc = sl_group_set_limits(l->g, &lim);
	/* -EBUSY: the new max is in force, reclaim did not reach it yet; the
	 * group's usage is read after this and reported as it is. */
	if (rc == -EBUSY)
		rc = 0;
	if (!rc)
		l->applied = share;
	l->raising = 0;
	sl__lease_publish(l);
	return rc;
}

/* Our own view of the lease ended (or the store lost us): fall to the floor. */
void sl__lease_fence(struct sl_lease *l)
{
	if (l->state == SL_LEASE_FENCED && l->applied <= l->floor)
		return;
	sl__lease_apply(l, min_u64(l->applied, l->floor));
	l->state = SL_LEASE_FENCED;
	l->counts.fences++;
	sl__lease_publish(l);
}

/* What the store counts for everyone but @id, and how many of them are live. */
uint64_t sl__lease_counted_others(const struct sl__lease_view *v, const char *id, size_t *nlive)
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

/* The group's usage alone, without the units stocked in threads. */
static uint64_t group_usage(sl_group *g)
{
	struct sl_stats st;

	memset(&st, 0, sizeof(st));
	sl_group_stats(g, &st);
	return st.usage;
}

/*
 * Register (join, or rejoin after a deletion or a wipe): claim the group's
 * usage, or its floor if more, from the room no one holds.  The group's max
 * comes down to that claim before the usage that the store will count is
 * read: a charge that lands between the read and the write could otherwise
 * take the group past what the store counts, and no later report would
 * correct it (lease.h's "Safety").  The max only ever comes down here; a
 * raise waits for the store (the caller applies l->held after).
 * -EBUSY (with *@free set) when the claim does not fit.
 */
int sl__lease_register(struct sl_lease *l, const struct sl__lease_view *v, uint64_t *free_out)
{
	struct sl__lease_rec rec;
	size_t n;
	uint64_t others = sl__lease_counted_others(v, l->id, &n), free, floor0, want, held0, c;
	int64_t sent;
	int rc;

	free = v->limits.max > others ? v->limits.max - others : 0;
	if (free_out)
		*free_out = free;
	floor0 = min_u64(v->limits.min / (n + 1), free);
	sl__lease_group_read(l->g, &c, &l->events_max);
	want = max_u64(floor0, c);
	if (want > free && l->applied > free && group_usage(l->g) <= free) {
		/* What does not fit is units stocked in threads, which a lower
		 * max gives back without reclaiming anything. */
		rc = sl__lease_apply(l, free);
		if (rc)
			return rc;
		sl__lease_group_read(l->g, &c, NULL);
		want = max_u64(floor0, c);
	}
	if (want > free)
		return -EBUSY;
	/* Lower first: from here no charge takes the group past the larger
	 * of want and what it holds when the max comes down. */
	if (l->applied > want) {
		rc = sl__lease_apply(l, want);
		if (rc)
			return rc;
	}
	/* Read after: what the group can hold now is at most this. */
	sl__lease_group_read(l->g, &c, NULL);
	held0 = max_u64(want, c);
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

/* ---- the public calls ---- */

void sl_lease_opts_init(struct sl_lease_opts *opts)
{
	if (!opts)
		return;
	memset(opts, 0, sizeof(*opts));
	opts->size = sizeof(*opts);
	opts->period_ms = 200;
	opts->ttl_ms = 10000;
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

/* A fork() while another thread holds leased_lock would leave the child's
 * copy locked for good: hold it across the fork, as glibc does its own. */
static void leased_lock_prepare(void)
{
	pthread_mutex_lock(&leased_lock);
}

static void leased_lock_after(void)
{
	pthread_mutex_unlock(&leased_lock);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_register(void)
{
	pthread_atfork(leased_lock_prepare, leased_lock_after, leased_lock_after);
}

static int claim_group(struct sl_lease *l)
{
	struct sl_lease *p;

	pthread_once(&atfork_once, atfork_register);
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

	/* The group follows no share yet: its own max is in force. */
	l->applied = l->orig.max;
	for (i = 0; i < JOIN_TRIES && rc == -EAGAIN; i++) {
		rc = sl__store_read(l->s, l->budget, &v);
		if (rc)
			break;
		/* A budget of the coordinated protocol: not one to join here. */
		rc = v.coordinated ? -EPROTO : sl__lease_register(l, &v, NULL);
		sl__lease_view_free(&v);
	}
	if (!rc) {
		rc = sl__lease_apply(l, l->held);
		if (rc) {
			sl__store_remove(l->s, l->budget, l->id);
			l->registered = false;
		}
	}
	if (rc) {
		/* Registering may have lowered the group first: give it back
		 * the limits it had. */
		sl_group_set_limits(l->g, &l->orig);
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
	if (sl__lease_inherited(s))
		return -ECHILD;
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
	/* The run thread steps the group until the lease is left: the group
	 * may not be destroyed before (sl_group_destroy() answers -EBUSY). */
	rc = sl_group_hold(g);
	if (rc)
		goto fail_release;
	rc = sl__store_make_id(s, l->id);
	if (rc)
		goto fail_unhold;

	/* Not under s->lock: the lease is no one else's yet, and the run
	 * thread holds that lock across its store calls. */
	l->state = SL_LEASE_JOINING;
#ifdef SL_HAVE_ETCD
	if (s->coord) {
		/* The coordinated protocol registers every lease on the run
		 * thread, in the node's session; until then the group holds
		 * at most what it holds now (0 when deferred). */
		l->c_num = sl__coord_id_num(s->coord, l->id);
		l->applied = l->orig.max;
		if (l->opts.flags & SL_LEASE_DEFERRED) {
			rc = sl__lease_apply(l, 0);
		} else {
			uint64_t c;

			sl__lease_group_read(g, &c, NULL);
			rc = sl__lease_apply(l, c);
		}
	} else
#endif
	if (l->opts.flags & SL_LEASE_DEFERRED) {
		/* Nothing is ours until the run thread registers us. */
		rc = sl__lease_apply(l, 0);
	} else {
		rc = join_now(l);
	}
	if (rc)
		goto fail_unhold;
	l->next_ns = sl__lease_now_ns();
	sl__lease_publish(l);
	pthread_mutex_lock(&s->pending_lock);
	l->next = s->pending;
	s->pending = l;
	pthread_mutex_unlock(&s->pending_lock);
	*out = l;
	return 0;

fail_unhold:
	sl_group_unhold(g);
fail_release:
	release_group(l);
fail:
	free(l);
	return rc;
}

/* Take @l off the list at @head; false if it is not there. */
static bool unlink_from(struct sl_lease **head, struct sl_lease *l)
{
	struct sl_lease **pp;

	for (pp = head; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			return true;
		}
	}
	return false;
}

static void unlink_lease(sl_lease_store *s, struct sl_lease *l)
{
	if (!unlink_from(&s->pending, l))
		unlink_from(&s->leases, l);
}

void sl__lease_take_pending(sl_lease_store *s)
{
	struct sl_lease *l, *next;

	pthread_mutex_lock(&s->pending_lock);
	for (l = s->pending; l; l = next) {
		next = l->next;
		l->next = s->leases;
		s->leases = l;
	}
	s->pending = NULL;
	pthread_mutex_unlock(&s->pending_lock);
}

/* A fork()ed child's copy of a lease: the record and the group's limits
 * stay as they are (the record is the parent's, the store lock may be
 * held by a thread the child does not have); only the handle goes. */
static void forget(struct sl_lease *l)
{
	unlink_lease(l->s, l);
	release_group(l);
	sl_group_unhold(l->g);
	free(l);
}

int sl_lease_leave(sl_lease *l)
{
	sl_lease_store *s;
	bool pending;
	int rc = 0;

	if (!l)
		return 0;
	s = l->s;
	if (sl__lease_inherited(s)) {
		forget(l);
		return 0;
	}
	/* A lease the run loop has not taken yet is the caller's alone: no
	 * wait for the loop's store calls. */
	pthread_mutex_lock(&s->pending_lock);
	pending = unlink_from(&s->pending, l);
	pthread_mutex_unlock(&s->pending_lock);
	if (!pending) {
		pthread_mutex_lock(&s->lock);
		unlink_from(&s->leases, l);
	}
	/* The record first: once the group's limits are back, what it holds
	 * must no longer be promised to the budget. */
#ifdef SL_HAVE_ETCD
	if (s->coord) {
		rc = sl__coord_leave(l);
	} else
#endif
	if (l->registered) {
		rc = sl__store_remove(s, l->budget, l->id);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (sl_group_set_limits(l->g, &l->orig) == -EINVAL && !rc)
		rc = -EINVAL;
	if (!pending)
		pthread_mutex_unlock(&s->lock);
	release_group(l);
	sl_group_unhold(l->g);
	free(l);
	return rc;
}

void sl__lease_leave_all(sl_lease_store *s)
{
	if (sl__lease_inherited(s)) {
		while (s->pending)
			forget(s->pending);
		while (s->leases)
			forget(s->leases);
		return;
	}
	for (;;) {
		struct sl_lease *l;

		pthread_mutex_lock(&s->pending_lock);
		l = s->pending;
		pthread_mutex_unlock(&s->pending_lock);
		if (!l) {
			pthread_mutex_lock(&s->lock);
			l = s->leases;
			pthread_mutex_unlock(&s->lock);
		}
		if (!l)
			return;
		sl_lease_leave(l);
	}
}

int sl_lease_stats(const sl_lease *l, struct sl_lease_stats *out)
{
	sl_lease_store *s;
	int64_t left;

	bool own;

	if (!l || !out)
		return -EINVAL;
	s = l->s;
	/* In a fork()ed child, stat_lock may have been held by a parent's
	 * thread at the fork; nothing changes the child's copy of the figures,
	 * so they are read as they are. */
	own = !sl__lease_inherited(s);
	if (own)
		pthread_mutex_lock(&s->stat_lock);
	*out = l->pub;
	left = l->pub_expiry_ns - sl__lease_now_ns();
	if (!l->pub_registered)
		out->expires_ms = -1;
	else
		out->expires_ms = left > 0 ? left / NS_PER_MS : left / NS_PER_MS - 1;
	if (own)
		pthread_mutex_unlock(&s->stat_lock);
	return 0;
}

int sl_lease_report_reuse(sl_lease *l, uint64_t reused, uint64_t reuse_ms)
{
	if (!l)
		return -EINVAL;
	/* On the run thread, inside the demand hook that my_demand() runs
	 * under s->lock: these fields are that thread's. */
	l->reported = true;
	l->reused = reused;
	l->reuse_ms = reuse_ms;
	return 0;
}

sl_group *sl_lease_group(const sl_lease *l)
{
	return l ? l->g : NULL;
}
