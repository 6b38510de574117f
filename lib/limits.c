/* SPDX-License-Identifier: MIT */
/*
 * Bringing usage back under a limit: a max lowered by
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
	count = sl__counter_set_limits(g, lim);
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
