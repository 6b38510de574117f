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
 * Keep one protected usage of g in its parent's sum: the exchange makes
 * each change land once, whatever the order of concurrent ones.
 */
static bool propagate(sl_atomic64 *mine, uint64_t now, sl_atomic64 *sum)
{
	uint64_t old;

	/* seq_cst: see sl__counter_protect(). */
	if (sl__load(mine, SL_SEQ_CST) == now)
		return false;
	old = sl__exchange(mine, now, SL_SEQ_CST);
	if (old != now && sum)
		sl__fetch_add(sum, now - old, SL_RELAXED); /* mod 2^64: the sum is exact once quiet */
	return old != now;
}

/*
 * PROTECTION trees: after g's count changed, keep min(count, min) and
 * min(count, soft) in g and in its parent's children sums (the kernel's
 * propagate_protected_usage()), and index the parent if its children now
 * protect more than its soft limit.  Every count change calls this, and
 * it loops until what it stored matches a count read after its exchange:
 * of concurrent callers the one that exchanges last reads the final count,
 * so once the tree is quiet every stored value and every sum is exact.
 * The count's change and our load are seq_cst, as are the exchange and
 * the count's load after it: either a concurrent caller sees our count,
 * or we see its stored value (Dekker).
 */
void sl__counter_protect(sl_group *g)
{
	struct sl__prot *pr = g->prot, *pp = g->parent ? g->parent->prot : NULL;

	for (;;) {
		uint64_t count = sl__load(&g->count, SL_SEQ_CST);
		uint64_t min = sl__load(&g->min, SL_RELAXED), soft = sl__load(&g->soft, SL_RELAXED);
		bool changed = propagate(&pr->min_usage, count < min ? count : min, pp ? &pp->children_min : NULL);

		if (propagate(&pr->low_usage, count < soft ? count : soft, pp ? &pp->children_low : NULL)) {
			changed = true;
			if (pp)
				sl__oc_push(g->parent);
		}
		if (!changed)
			return;
	}
}

/* Take amount back from one level.  prot: the tree keeps protected
 * usages (asked of the tree, whose line a charge reads anyway, not of the
 * group, whose pointer sits on a line charges do not touch). */
static uint64_t level_sub(sl_group *p, uint64_t amount, bool prot)
{
	uint64_t now;

	if (!prot) {
		/* Relaxed: each counter is exact by itself, and no other
		 * memory is published through it. */
		return sl__fetch_sub(&p->count, amount, SL_RELAXED) - amount;
	}
	/* seq_cst: see sl__counter_protect(). */
	now = sl__fetch_sub(&p->count, amount, SL_SEQ_CST) - amount;
	sl__counter_protect(p);
	return now;
}

/*
 * The limit a level's new count must be within, read again after the
 * count's CAS: max, and high too for a charge that stocks units.  max
 * first, seq_cst (see sl__counter_try()); high after it, relaxed: the
 * setter stores high before it exchanges max, so a max read that sees the
 * exchange sees the new high too (the exchange is a release, our load an
 * acquire).
 */
static inline uint64_t recheck_limit(const sl_group *p, uint64_t stocked)
{
	uint64_t max = sl__load(&p->max, SL_SEQ_CST);

	return stocked ? sl__min_u64(max, sl__load(&p->high, SL_RELAXED)) : max;
}

/*
 * Charge amount to g and every ancestor, each level by a CAS that refuses to
 * pass its max: a counter never passes the max the charge read, not even
 * for an instant, unless SL_FORCE.  stocked is the part of amount that goes
 * into a stock rather than to the host: a charge with one must not pass
 * high either (a stock never takes a group past high).  On failure the
 * levels already charged are undone and *fail names the group in the way.
 *
 * A max lowered while we charge: after its CAS each level reads max again
 * (and high, for units bound for a stock), and sl__counter_set_limits()
 * reads the count again after its exchange (the kernel's
 * page_counter_set_max() rule), so either the setter sees our charge or we
 * see its limits and take the charge back.  Both sides seq_cst: a store
 * then a load on each side, which only seq_cst orders.  A setter that sees
 * our charge and finds the count over a new limit takes the stocked part
 * back from the slot (sl__stock_drain_limited()).
 */
int sl__counter_try(sl_group *g, uint64_t amount, unsigned flags, uint64_t stocked, sl_group **fail)
{
	uint64_t now[SL_DEPTH_MAX + 1];
	bool force = flags & SL_FORCE, prot = g->tree->prot;
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
		if (!force && cur + amount > recheck_limit(p, stocked)) {
			/* A limit fell under us: take this level back, try again. */
			cur = level_sub(p, amount, prot);
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
		if (prot)
			sl__counter_protect(p);
	}
	return 0;
undo:
	for (q = g; q != p; q = q->parent)
		level_sub(q, amount, prot);
	if (fail)
		*fail = p;
	return rc;
}

/* Take amount back from g and every ancestor. */
void sl__counter_cancel(sl_group *g, uint64_t amount)
{
	bool prot = g->tree->prot;

	for (; g; g = g->parent)
		level_sub(g, amount, prot);
}

/*
 * Every level on g's path has room for amount more under its max and its
 * high: a refill of a batch would fit now.  Relaxed: a hint for a stock
 * that would keep units, which are counted already (stock.c); a max or
 * high that changes meanwhile is handled as for a refill that raced it.
 */
bool sl__counter_room(const sl_group *g, uint64_t amount)
{
	for (; g; g = g->parent) {
		uint64_t lim = sl__min_u64(sl__load(&g->max, SL_RELAXED), sl__load(&g->high, SL_RELAXED));
		uint64_t count = sl__load(&g->count, SL_RELAXED);

		if (count > lim || lim - count < amount)
			return false;
	}
	return true;
}

/*
 * Every level on g's path is within its max and its high now: units just
 * put into a stock (sl__stock_keep()) may stay there, although a limit
 * changed since its room check.  max seq_cst and first, high after it, as
 * in recheck_limit(): a setter exchanged max before it bumped the number
 * that sent the keeper here.
 */
bool sl__counter_within(const sl_group *g)
{
	for (; g; g = g->parent)
		if (sl__load(&g->count, SL_RELAXED) > recheck_limit(g, 1))
			return false;
	return true;
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
	if (g->prot) {
		/* New settings change what g protects, and a lower soft limit
		 * may leave its children claiming more than it has. */
		sl__counter_protect(g);
		sl__oc_push(g);
	}
	return count;
}
