/* SPDX-License-Identifier: MIT */
/*
 * Reading a group's counters.
 */
#include "internal.h"

#include <string.h>

int sl_group_stats(const sl_group *g, struct sl_stats *out)
{
	uint64_t stocked, count;

	if (!sl__group_valid(g) || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	/* Stocks first, then the counter: a refill racing with this read can
	 * only make usage look larger for an instant, never wrap. */
	stocked = g->tree->batch ? sl__stock_units(g) : 0;
	count = sl__load(&g->count, SL_RELAXED);
	if (stocked > count)
		stocked = count;
	out->usage = count - stocked;
	out->stocked = stocked;
	out->peak = sl__load(&g->peak, SL_RELAXED);
	sl_group_limits(g, &out->limits);
	g->tree->policy->effective(g, &out->emin, &out->esoft);
	out->events_low = sl__load(&g->events_low, SL_RELAXED);
	out->events_high = sl__load(&g->events_high, SL_RELAXED);
	out->events_max = sl__load(&g->events_max, SL_RELAXED);
	out->events_oom = sl__load(&g->events_oom, SL_RELAXED);
	out->reclaimed = sl__load(&g->reclaimed, SL_RELAXED);
	out->refaults = sl__load(&sl__refault_of(g)->total, SL_RELAXED);
	out->headroom = sl__load(&g->headroom, SL_RELAXED);
	return 0;
}
