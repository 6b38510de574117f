/* SPDX-License-Identifier: MIT */
/*
 * SL_POLICY_GUARANTEE: a soft limit is a promise.  Pass 1 takes groups over
 * their own soft limit, largest excess first, each only down to it; a parent
 * over its soft limit is brought back through its over-limit descendants,
 * and only a misconfigured parent (over, with no descendant over) opens all
 * its children, in proportion to their usage above min.
 *
 * SL_POLICY_REFAULT is this policy with another order: fewest recent
 * refaults first (victims.c ranks; refault.c counts).
 */
#include "internal.h"

/* Bring candidate c back by need: its own charges, then its over-limit
 * descendants in rank order (largest excess first); only if none is over,
 * all its children in proportion to usage above min (a misconfigured
 * parent). */
static uint64_t shrink(struct sl__reclaim *r, struct sl__victims *v, struct sl__cand *c, uint64_t need)
{
	sl_group *g = c->g;
	struct sl__floor frame = { .g = g, .floor = sl__soft_of(g), .prev = r->floors };
	uint64_t got, e;
	bool any_over = false;
	struct sl__cand *d;

	/* Nothing this step takes, here or below, brings g under its soft
	 * limit, whatever concurrent reclaims do. */
	r->floors = &frame;
	got = sl__reclaim_group(r, g, sl__min_u64(sl__own_of(g), need), frame.floor, 0);
	if (!frame.floor)
		goto out;
	while (got < need && r->freed < r->target && (d = sl__victims_first_below(v, g, &e))) {
		uint64_t step = shrink(r, v, d, sl__min_u64(e, need - got));

		any_over = true;
		if (!step)
			d->done = true;
		got += step;
	}
	if (!any_over && got < need && r->freed < r->target)
		got += sl__proportional(r, g, need - got);
out:
	r->floors = frame.prev;
	return got;
}

static void pass1(struct sl__reclaim *r, struct sl__victims *v)
{
	struct sl__cand *x;
	uint64_t e;

	while (r->freed < r->target && (x = sl__victims_next(v, &e))) {
		shrink(r, v, x, sl__min_u64(e, r->target - r->freed));
		x->done = true;
	}
}

static void reclaim(struct sl__reclaim *r)
{
	sl__reclaim_by_excess(r, pass1);
}

/* What it grants is what is set. */
static void effective(const sl_group *g, uint64_t *emin, uint64_t *esoft)
{
	*emin = sl__load(&g->min, SL_RELAXED);
	*esoft = sl__soft_of(g);
}

const struct sl__policy sl__policy_guarantee = {
	.name = "guarantee",
	.reclaim = reclaim,
	.effective = effective,
	.floors = sl__floors_min,
	.min_on_path = true,
};

/* SL_POLICY_REFAULT: the same promises and passes; victims.c ranks the
 * candidates (and a parent's over-limit descendants) by refaults. */
const struct sl__policy sl__policy_refault = {
	.name = "refault",
	.reclaim = reclaim,
	.effective = effective,
	.floors = sl__floors_min,
	.min_on_path = true,
	.by_refault = true,
};
