/* SPDX-License-Identifier: MIT */
/*
 * SL_POLICY_GATEKEEPER: the 2013 patch set's rule.  A group over its soft
 * limit is a gate opened over its whole subtree, reclaimed in proportion to
 * usage whatever the descendants' own soft limits; groups over their own
 * soft limit outside any opened gate are taken largest excess first.
 */
#include "internal.h"

/* Inside a gate opened by an ancestor strictly below the scope. */
static bool inside_gate(const struct sl__reclaim *r, const sl_group *g)
{
	for (g = g->parent; g && g != r->scope; g = g->parent)
		if (sl__over_soft(g))
			return true;
	return false;
}

static void pass1(struct sl__reclaim *r, struct sl__victims *v)
{
	struct sl__cand *x;
	uint64_t e;

	while (r->freed < r->target && (x = sl__victims_next(v, &e))) {
		/* Inside an opened gate: the gate's proportional cut covers it. */
		if (inside_gate(r, x->g))
			continue;
		e = sl__min_u64(e, r->target - r->freed);
		if (sl__soft_of(x->g)) {
			/* Open the gate, down to its soft limit at most. */
			struct sl__floor frame = { .g = x->g, .floor = sl__soft_of(x->g), .prev = r->floors };

			r->floors = &frame;
			sl__proportional(r, x->g, e);
			r->floors = frame.prev;
		} else {
			sl__reclaim_group(r, x->g, e, 0, 0);
		}
		x->done = true;
	}
}

static void reclaim(struct sl__reclaim *r)
{
	sl__reclaim_by_excess(r, pass1);
}

/* A group inside a gate that an ancestor (below the root) opened keeps no
 * soft claim. */
static void effective(const sl_group *g, uint64_t *emin, uint64_t *esoft)
{
	const sl_group *p;

	*emin = sl__load(&g->min, SL_RELAXED);
	*esoft = sl__soft_of(g);
	for (p = g->parent; p && p->parent; p = p->parent)
		if (sl__over_soft(p))
			*esoft = 0;
}

const struct sl__policy sl__policy_gatekeeper = {
	.name = "gatekeeper",
	.reclaim = reclaim,
	.effective = effective,
	.floors = sl__floors_min,
	.min_on_path = true,
};
