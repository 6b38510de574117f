/* SPDX-License-Identifier: MIT */
/*
 * Reading a group's counters.
 */
#include "internal.h"

#include <string.h>

int sl_group_stats(const sl_group *g, struct sl_stats *out)
{
	if (!sl__group_valid(g) || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	sl__stock_usage(g, &out->usage, &out->stocked);
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
