/* SPDX-License-Identifier: MIT */
/*
 * sl_lease_run() and sl_lease_stop(): the thread the host gives the store,
 * and what it does for each lease once a period (the step of lease.h's
 * protocol: read the budget, compute every share from that one view, apply
 * our own).  Between periods the thread sleeps on a condition variable that
 * sl_lease_stop() signals, so a stop never waits for a period to end.
 * The order that carries the promise is lease.c's: lower the group before
 * reporting a shrink, raise it only after a grant.
 */
#include "lease_int.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "alloc.h"
#ifdef SL_HAVE_ETCD
#include "store_etcd_coord.h"
#endif

/* Has our own view of the lease ended?  Never where the store counts our
 * record for as long as this process lives (shm): a holder that was
 * stopped, or whose store was slow, still has everything counted there. */
static bool view_ended(const struct sl_lease *l, int64_t now)
{
	return l->registered && !l->s->ops->counts_while_alive && now >= l->expiry_ns;
}

/* The store was wiped or replaced: our record is gone with it. */
static void store_reset(struct sl_lease *l)
{
	l->counts.store_resets++;
	sl__lease_fence(l);
	l->registered = false;
}

/* A step that finds us without a record: claim one, or shrink to fit. */
static void rejoin(struct sl_lease *l, const struct sl__lease_view *v)
{
	uint64_t free = 0;
	int rc = sl__lease_register(l, v, &free);

	if (!rc) {
		sl__lease_apply(l, l->held);
		l->state = SL_LEASE_HELD;
		l->counts.renewals++;
		return;
	}
	if (rc == -EBUSY) {
		/* Never claim more than is free: shrink toward it and claim
		 * what the group then holds, a later period. */
		l->blim = v->limits;
		if (l->applied > free)
			sl__lease_apply(l, free);
		return;
	}
	if (rc != -EAGAIN)
		l->counts.store_errors++;
}

/* What the host says the memory is worth, turned into a demand.  A host
 * that reports reuse is judged by it (alloc.h: the live memory, the idle
 * horizon); one that does not, by its evictions and idle time. */
uint64_t sl__lease_my_demand(struct sl_lease *l, uint64_t c, uint64_t events_max,
			     uint64_t budget_max)
{
	struct sl_lease_demand d = { UINT64_MAX, 0, 0 };
	int64_t now = sl__lease_now_ns();
	uint64_t elapsed_ms;

	l->reported = false;
	if (l->opts.demand)
		l->opts.demand(l, &d, l->opts.demand_ctx);
	else
		d.evicted = events_max - l->events_max;
	l->events_max = events_max;
	/* What the report covers: since the hook last ran (a retried step
	 * runs sooner than a period), a period the first time. */
	elapsed_ms = l->demand_ns ? (uint64_t)(now - l->demand_ns) / NS_PER_MS : l->opts.period_ms;
	l->demand_ns = now;
	if (!l->reported)
		return sl__lease_demand(l->applied, c, l->floor, budget_max, d.idle_ms,
					l->opts.idle_ms, d.evicted, d.refaulted);
	sl__lease_reuse_fold(&l->reuse, l->reused, l->reuse_ms, elapsed_ms);
	return sl__lease_demand_reuse(&l->reuse, l->applied, c, l->floor, budget_max, d.idle_ms,
				      l->opts.idle_ms, d.evicted, d.refaulted);
}

/* Our target into *@t: max-min fair over the live participants, from this
 * view; every participant computes the same from the same view. */
static int target_of(const struct sl__lease_view *v, const char *id, uint64_t my_demand,
		     uint64_t *t, uint64_t *floor_target)
{
	struct sl__lease_alloc_in *in;
	uint64_t *out, budget = v->limits.max;
	size_t i, n = 0, me = 0;

	in = calloc(v->n + 1, sizeof(*in));
	out = calloc(v->n + 1, sizeof(*out));
	if (!in || !out) {
		free(in);
		free(out);
		return -ENOMEM;
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
	*t = out[me];
	free(in);
	free(out);
	return 0;
}

/* One period of a registered lease whose record is in @v. */
static void renew(struct sl_lease *l, const struct sl__lease_view *v, const struct sl__lease_rec *me)
{
	struct sl__lease_rec rec;
	uint64_t c, ev, t, ft, h = sl__lease_rec_counted(me), held2, floor2;
	bool grows = false, lapsed;
	int64_t sent;
	int rc;

	/* The store never counts less than the group may hold (it cannot,
	 * but a store that says so is obeyed first). */
	if (l->applied > h)
		sl__lease_apply(l, h);
	l->blim = v->limits;
	sl__lease_group_read(l->g, &c, &ev);
	l->demand = sl__lease_my_demand(l, c, ev, v->limits.max);
	if (target_of(v, l->id, l->demand, &t, &ft)) {
		/* Out of memory: renew as we are, move nothing. */
		t = h;
		ft = me->floor;
	}

	if (t < h) {
		/* Shrink: the group first, then report what it holds. */
		if (l->applied > t)
			sl__lease_apply(l, t);
		sl__lease_group_read(l->g, &c, NULL);
		held2 = max_u64(t, min_u64(c, h));
	} else if (t > h) {
		uint64_t all = sat_add(sl__lease_counted_others(v, l->id, NULL), h);
		uint64_t room = v->limits.max > all ? v->limits.max - all : 0;

		held2 = h + min_u64(t - h, room);
		grows = held2 > h;
	} else {
		held2 = h;
	}
	floor2 = min_u64(ft, held2);
	if (floor2 > me->floor)
		grows = true;
	else if (floor2 < l->floor) {
		l->floor = floor2; /* a lower floor applies here before the store has it */
		sl__lease_publish(l);
	}

	memset(&rec, 0, sizeof(rec));
	memcpy(rec.id, l->id, sizeof(rec.id));
	rec.floor = floor2;
	rec.held = held2;
	rec.usage = c;
	rec.demand = l->demand;
	sent = sl__lease_now_ns();
	/* Our own view ended since the read (a stall in this very step): the
	 * floor first, and the store may count only our floor by now, so
	 * anything above it is a grow (etcd: the record's lease ran out). */
	lapsed = view_ended(l, sent);
	if (lapsed) {
		sl__lease_fence(l);
		grows = true;
	}
	rc = sl__store_write(l->s, l->budget, &rec, l->opts.ttl_ms, grows, v->version, l->incarnation);
	if (rc == -EAGAIN && lapsed)
		return; /* fenced: a fresh view next period, and a grow on it */
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
		l->retry = true;
		if (view_ended(l, sl__lease_now_ns()))
			sl__lease_fence(l);
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
		sl__lease_apply(l, min_u64(t, held2));
	l->state = SL_LEASE_HELD;
}

void sl__lease_step(struct sl_lease *l)
{
	struct sl__lease_view v;
	const struct sl__lease_rec *me;
	int rc;

	l->retry = false;
	/* Our own view ended (waking after a stall, a slow store): the floor
	 * first, before a store round trip, which may take the whole margin. */
	if (view_ended(l, sl__lease_now_ns()))
		sl__lease_fence(l);
	rc = sl__store_read(l->s, l->budget, &v);
	if (rc == -ENOENT) {
		if (l->registered && v.incarnation && v.incarnation != l->incarnation) {
			store_reset(l);
		} else if (l->registered) {
			/* Deleted: keep the last share, frozen, counting nowhere. */
			l->registered = false;
			l->state = SL_LEASE_ORPHANED;
		}
		sl__lease_publish(l);
		return;
	}
	if (rc) {
		l->counts.store_errors++;
		l->retry = true;
		if (view_ended(l, sl__lease_now_ns()))
			sl__lease_fence(l);
		sl__lease_publish(l);
		return;
	}
	if (v.coordinated) {
		/* The coordinated protocol's budget: its coordinator does not
		 * hear our records, so we never grow here; the floor once our
		 * own view ends, as for any store we cannot use. */
		sl__lease_view_free(&v);
		l->counts.store_errors++;
		if (view_ended(l, sl__lease_now_ns()))
			sl__lease_fence(l);
		sl__lease_publish(l);
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
		renew(l, &v, me);
	sl__lease_view_free(&v);
	sl__lease_publish(l);
}

/* A step that failed on the store is tried again after period / RETRY_DIV. */
#define RETRY_DIV 4

/* The longest sleep with no lease joined: a join is seen this soon. */
#define IDLE_NS INT64_C(100000000)

void sl__lease_sleep_until(sl_lease_store *s, int64_t deadline_ns)
{
	struct timespec ts = { (time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000) };

	pthread_mutex_lock(&s->wake_lock);
	/* Acquire: pairs with sl_lease_stop()'s release. */
	while (!atomic_load_explicit(&s->stop, memory_order_acquire) &&
	       !atomic_exchange_explicit(&s->kick, false, memory_order_acq_rel) &&
	       sl__lease_now_ns() < deadline_ns)
		pthread_cond_timedwait(&s->wake, &s->wake_lock, &ts);
	pthread_mutex_unlock(&s->wake_lock);
}

int sl_lease_run(sl_lease_store *s)
{
	if (!s)
		return -EINVAL;
	if (sl__lease_inherited(s))
		return -ECHILD;
	if (atomic_exchange_explicit(&s->running, true, memory_order_acq_rel))
		return -EBUSY;
#ifdef SL_HAVE_ETCD
	if (s->coord) {
		int rc = sl__coord_run(s);

		atomic_store_explicit(&s->running, false, memory_order_release);
		return rc;
	}
#endif
	/* Acquire: pairs with sl_lease_stop()'s release. */
	while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
		int64_t now = sl__lease_now_ns(), wake = now + IDLE_NS;
		struct sl_lease *l;

		pthread_mutex_lock(&s->lock);
		sl__lease_take_pending(s);
		for (l = s->leases; l; l = l->next) {
			int64_t period = (int64_t)l->opts.period_ms * NS_PER_MS;

			if (now >= l->next_ns) {
				sl__lease_step(l);
				/* From this period's start: a slow store call
				 * does not push every later period back. */
				l->next_ns += period;
				if (l->next_ns <= now)
					l->next_ns = now + period;
				/* A failed store call is tried again within the
				 * period, while the lease still runs: a node
				 * falls to its floor only when the store was
				 * out of reach for the whole of its own view. */
				if (l->retry) {
					int64_t soon = sl__lease_now_ns() + period / RETRY_DIV;

					if (soon < l->next_ns)
						l->next_ns = soon;
				}
			}
			if (l->next_ns < wake)
				wake = l->next_ns;
		}
		pthread_mutex_unlock(&s->lock);
		sl__lease_sleep_until(s, wake);
	}
	atomic_store_explicit(&s->running, false, memory_order_release);
	return 0;
}

void sl_lease_stop(sl_lease_store *s)
{
	if (!s)
		return;
	if (sl__lease_inherited(s)) {
		/* No run thread of this handle exists in a fork()ed child, and
		 * wake_lock may have been held by the parent's at the fork. */
		atomic_store_explicit(&s->stop, true, memory_order_release);
		return;
	}
	pthread_mutex_lock(&s->wake_lock);
	/* Release: pairs with the loop's acquire. */
	atomic_store_explicit(&s->stop, true, memory_order_release);
	pthread_cond_broadcast(&s->wake);
	pthread_mutex_unlock(&s->wake_lock);
}
