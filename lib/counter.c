/* SPDX-License-Identifier: MIT */
/*
 * Hierarchical counters: a group's count is what is charged to it and its
 * descendants, stocks included, and is what max bounds.  A charge moves
 * every level on the path; nothing here takes a lock.
 */
#include "internal.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

_Thread_local bool sl__tls_high_pending;

/* Above max - headroom: background reclaim has work. */
static bool over_watermark(const sl_group *p, uint64_t count)
{
	uint64_t headroom = sl__load(&p->headroom, SL_RELAXED), max;

	if (!headroom)
		return false;
	max = sl__load(&p->max, SL_RELAXED);
	return count > (max > headroom ? max - headroom : 0);
}

/*
 * Wake the tree's background reclaimer if it sleeps.  seq_cst: our count's
 * CAS, then this load; the sleeper stores its flag, then reads the counts
 * (background.c): either it sees our count or we see its flag.
 */
void sl__counter_wake_background(sl_tree *t)
{
	if (!sl__load(&t->bg_sleeping, SL_SEQ_CST) || !sl__exchange(&t->bg_sleeping, 0, SL_SEQ_CST))
		return;
	/* Release: pairs with the sleeper's acquire read of the word. */
	sl__fetch_add(&t->bg_wake, 1, SL_RELEASE);
	syscall(SYS_futex, (uint32_t *)&t->bg_wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/*
 * Charge amount to g and every ancestor, each level by a CAS that refuses to
 * pass its max: a counter never passes the max the charge read, not even
 * for an instant, unless SL_FORCE.  stocked is the part of amount that goes
 * into a stock rather than to the host: a charge with one must not pass
 * high either (a stock never takes a group past high).  On failure the
 * levels already charged are undone and *fail names the group in the way.
 *
 * A max lowered while we charge: after its CAS each level reads max again,
 * and sl__counter_set_max() reads the count again after its exchange
 * (the kernel's page_counter_set_max() rule), so either the setter sees our
 * charge or we see its max and take the charge back.  Both sides seq_cst:
 * a store then a load on each side, which only seq_cst orders.
 */
int sl__counter_try(sl_group *g, uint64_t amount, unsigned flags, uint64_t stocked, sl_group **fail)
{
	uint64_t now[SL_DEPTH_MAX + 1];
	bool force = flags & SL_FORCE;
	sl_group *p, *q;
	unsigned i = 0;
	int rc;

	for (p = g; p; p = p->parent, i++) {
		uint64_t cur = sl__load(&p->count, SL_RELAXED), lim;

again:
		lim = force ? UINT64_MAX : sl__load(&p->max, SL_RELAXED);
		if (stocked) {
			uint64_t high = sl__load(&p->high, SL_RELAXED);

			if (high < lim)
				lim = high;
		}
		do {
			if (cur > UINT64_MAX - amount) {
				rc = -EINVAL;
				goto undo;
			}
			if (cur + amount > lim) {
				rc = -ENOMEM;
				goto undo;
			}
		} while (!sl__cas_weak(&p->count, &cur, cur + amount, SL_SEQ_CST, SL_RELAXED));
		if (!force && cur + amount > sl__load(&p->max, SL_SEQ_CST)) {
			/* max fell under us: take this level back, try again. */
			cur = sl__fetch_sub(&p->count, amount, SL_RELAXED) - amount;
			goto again;
		}
		now[i] = cur + amount;
	}
	/* Peaks and events only once the whole charge stands. */
	for (p = g, i = 0; p; p = p->parent, i++) {
		sl__max_relaxed(&p->peak, now[i]);
		/* With the stock's units: the index must hold every group
		 * whose usage may pass soft through its stocks; reclaim
		 * drops the ones that turn out not to be over. */
		sl__over_check(p, now[i]);
		if (now[i] > sl__load(&p->high, SL_RELAXED)) {
			sl__count(&p->events_high);
			sl__tls_high_pending = true;
		}
		if (sl__unlikely(over_watermark(p, now[i])))
			sl__counter_wake_background(p->tree);
	}
	return 0;
undo:
	for (q = g; q != p; q = q->parent)
		sl__fetch_sub(&q->count, amount, SL_RELAXED);
	if (fail)
		*fail = p;
	return rc;
}

/* Take amount back from g and every ancestor.  Relaxed: each counter is
 * exact by itself, and no other memory is published through them. */
void sl__counter_cancel(sl_group *g, uint64_t amount)
{
	for (; g; g = g->parent)
		sl__fetch_sub(&g->count, amount, SL_RELAXED);
}

/* The subtree's count: usage plus what its stocks hold. */
uint64_t sl__counter_usage(const sl_group *g)
{
	return sl__load(&g->count, SL_RELAXED);
}

/*
 * Set the limits of a live group; max last, by exchange, then read the
 * count again and return it: a charge that read the old max either shows
 * in that count or sees the new max after its CAS and takes itself back
 * (see sl__counter_try()).  So a returned count within the new max means
 * the max is in force.  Relaxed for min, soft and high: each is read on
 * its own, and a charge racing with the change may see either value.
 */
uint64_t sl__counter_set_limits(sl_group *g, const struct sl_limits *lim)
{
	uint64_t count;

	sl__store(&g->min, lim->min, SL_RELAXED);
	sl__store(&g->soft, lim->soft, SL_RELAXED);
	sl__store(&g->high, lim->high, SL_RELAXED);
	sl__exchange(&g->max, lim->max, SL_SEQ_CST);
	count = sl__load(&g->count, SL_SEQ_CST);
	/* A lower soft limit may put the group over it: index it now. */
	sl__over_check(g, count);
	return count;
}
