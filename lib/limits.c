/* SPDX-License-Identifier: MIT */
/*
 * Limits set and read whole (sl_group_set_limits(), sl_group_limits()), and
 * bringing usage back under a limit: a max lowered by
 * sl_group_set_limits(), and high at the host's safe point
 * (sl_handle_over_high()).
 */
#include "internal.h"

/* Reclaim g's subtree under its max; -EBUSY if it cannot be done now. */
static int shrink_to_max(sl_group *g, uint64_t count)
{
	uint64_t max = sl__load(&g->max, SL_RELAXED), usage;
	int round;

	if (count <= max)
		return 0;
	if (sl__reclaim_forbidden())
		return -EBUSY;
	for (round = 0; round < 4; round++) {
		sl__stock_drain_subtree(g);
		usage = sl__usage_of(g);
		if (usage <= max || !sl__reclaim(g, usage - max, usage - max, false))
			break;
	}
	return sl__usage_of(g) <= max ? 0 : -EBUSY;
}

/*
 * A set of limits is applied whole.  Setters take turns under the tree's
 * limits_lock, so two setters of one group never leave a mix of their
 * fields (a soft or min of one above the max of the other), and each
 * stores its fields while limits_seq is odd, so that sl_group_limits()
 * reads one whole set without the lock (a seqlock: the writer's release
 * fence after the odd number, the reader's acquire fence before its second
 * look).  Charges read each limit on their own, as ever, and look at
 * neither.  Returns the count sl__counter_set_limits() read after the new
 * max was in place.
 */
static uint64_t store_limits(sl_group *g, const struct sl_limits *lim)
{
	sl_tree *t = g->tree;
	uint64_t count;
	uint32_t seq;

	pthread_mutex_lock(&t->limits_lock);
	seq = sl__load(&t->limits_seq, SL_RELAXED);
	sl__store(&t->limits_seq, seq + 1, SL_RELAXED);
	sl__fence(SL_RELEASE);
	count = sl__counter_set_limits(g, lim);
	sl__store(&t->limits_seq, seq + 2, SL_RELEASE);
	pthread_mutex_unlock(&t->limits_lock);
	return count;
}

static void read_limits(const sl_group *g, struct sl_limits *out)
{
	out->min = sl__load(&g->min, SL_RELAXED);
	out->soft = sl__load(&g->soft, SL_RELAXED);
	out->high = sl__load(&g->high, SL_RELAXED);
	out->max = sl__load(&g->max, SL_RELAXED);
}

int sl_group_limits(const sl_group *g, struct sl_limits *out)
{
	sl_tree *t;
	uint32_t seq;

	if (!sl__group_valid(g) || !out)
		return -EINVAL;
	t = g->tree;
	/* Acquire: pairs with the setter's last store; then every field
	 * read is that setter's or a later one's. */
	seq = sl__load(&t->limits_seq, SL_ACQUIRE);
	if (!(seq & 1)) {
		read_limits(g, out);
		sl__fence(SL_ACQUIRE);
		if (sl__load(&t->limits_seq, SL_RELAXED) == seq)
			return 0;
	}
	/* A setter is at work: wait for it rather than spin. */
	pthread_mutex_lock(&t->limits_lock);
	read_limits(g, out);
	pthread_mutex_unlock(&t->limits_lock);
	return 0;
}

/*
 * The count read after the new max is in place includes every charge that
 * passed the old one (counter.c).  Units in stocks are handed out without a
 * look at any limit, so when that count is above the new max or high, the
 * stocks of g's subtree give theirs back first, in every context (a walk
 * or a callback too, where no reclaim follows): then every later charge
 * meets the new limits on the counters, as the header promises.
 */
int sl_group_set_limits(sl_group *g, const struct sl_limits *lim)
{
	uint64_t count;

	if (!sl__group_valid(g) || !lim || !sl__limits_valid(lim))
		return -EINVAL;
	count = store_limits(g, lim);
	if (count > sl__min_u64(lim->max, lim->high) && g->tree->batch) {
		sl__stock_drain_limited(g);
		count = sl__counter_usage(g);
	}
	return shrink_to_max(g, count);
}

int sl_high_pending(void)
{
	return sl__tls_high_pending;
}

uint64_t sl_handle_over_high(sl_group *g)
{
	uint64_t freed = 0;

	if (!sl__group_valid(g) || sl__reclaim_forbidden())
		return 0;
	sl__tls_high_pending = false;
	for (; g; g = g->parent) {
		uint64_t high = sl__load(&g->high, SL_RELAXED), usage;

		if (high == SL_UNLIMITED || sl__usage_of(g) <= high)
			continue;
		sl__stock_drain_subtree(g);
		usage = sl__usage_of(g);
		if (usage > high)
			freed += sl__reclaim(g, usage - high, usage - high, false);
	}
	return freed;
}
