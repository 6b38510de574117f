/* SPDX-License-Identifier: MIT */
/*
 * SL_POLICY_PROTECTION: cgroup v2's memory.min and memory.low.  A group's
 * effective protection is its setting capped by what its parent can give,
 * shared out in proportion to protected usage; reclaim takes from every
 * group in proportion to its usage above that, in rounds, recomputing as
 * usages fall (the kernel's answer is the limit of many small steps, not
 * one proportional cut).  Pass 1 spares effective low, pass 2 only
 * effective min.
 */
#include "internal.h"

#include <stdlib.h>

/* Rounds of about 1/ROUND_DIV of what is reclaimable. */
#define ROUND_DIV 8
#define MAX_ROUNDS 512

/* cgroup v2's effective protection of a child: its protected usage, scaled
 * down when the siblings together claim more than the parent has. */
static uint64_t effective_of(uint64_t usage, uint64_t setting, uint64_t parent_e, uint64_t siblings)
{
	uint64_t protected = sl__min_u64(usage, setting);

	if (siblings > parent_e)
		return siblings ? sl__muldiv(protected, parent_e, siblings) : 0;
	return protected;
}

/* Effective min and low of every node of the snapshot; node 0 is the
 * reclaim's scope, whose own protection does not count. */
static void compute_protection(struct sl__node *v, size_t n)
{
	size_t i, j;

	v[0].emin = v[0].elow = 0;
	for (i = 0; i < n; i++) {
		uint64_t smin = 0, slow = 0;

		for (j = i + 1; j < v[i].end; j = v[j].end) {
			smin += sl__min_u64(v[j].usage, sl__load(&v[j].g->min, SL_RELAXED));
			slow += sl__min_u64(v[j].usage, sl__soft_of(v[j].g));
		}
		for (j = i + 1; j < v[i].end; j = v[j].end) {
			uint64_t m = sl__load(&v[j].g->min, SL_RELAXED), s = sl__soft_of(v[j].g);

			if (i == 0) {
				/* Children of the scope get their settings as they are. */
				v[j].emin = m;
				v[j].elow = s;
			} else {
				v[j].emin = effective_of(v[j].usage, m, v[i].emin, smin);
				v[j].elow = effective_of(v[j].usage, s, v[i].elow, slow);
			}
		}
	}
	/* For stats; written only when changed, so that a reclaim of a big
	 * subtree does not dirty a cache line per group per round. */
	for (i = 0; i < n; i++) {
		if (sl__load(&v[i].g->emin, SL_RELAXED) != v[i].emin)
			sl__store(&v[i].g->emin, v[i].emin, SL_RELAXED);
		if (sl__load(&v[i].g->esoft, SL_RELAXED) != v[i].elow)
			sl__store(&v[i].g->esoft, v[i].elow, SL_RELAXED);
	}
}

/* What a group keeps in this pass: effective low and min in pass 1, min in pass 2. */
static uint64_t prot_of(const struct sl__node *x, bool low_too)
{
	return low_too && x->elow > x->emin ? x->elow : x->emin;
}

/* Reclaim in rounds from every group in proportion to its own charges'
 * share of its usage above protection (elow in pass 1, emin in pass 2). */
static void protection_pass(struct sl__reclaim *r, struct sl__node *v, size_t n, bool low_too)
{
	uint64_t *want = sl__malloc(n * sizeof(*want)), *w = sl__malloc(n * sizeof(*w));
	int round;
	size_t i;

	if (!want || !w)
		goto out;
	for (round = 0; round < MAX_ROUNDS && r->freed < r->target; round++) {
		uint64_t total = 0, left = r->target - r->freed, step, got = 0;

		sl__snapshot_refresh(v, n);
		compute_protection(v, n);
		for (i = 0; i < n; i++) {
			uint64_t prot = prot_of(&v[i], low_too);

			/* A callback that freed nothing is not asked again in
			 * this pass: its share goes to the others. */
			w[i] = v[i].usage > prot && !v[i].done ? sl__muldiv(v[i].own, v[i].usage - prot, v[i].usage)
							       : 0;
			total += w[i];
		}
		if (!total)
			break;
		step = total / ROUND_DIV;
		if (step < left / 16)
			step = left / 16;
		step = sl__min_u64(sl__min_u64(step ? step : 1, left), total);
		sl__split(step, w, want, n);
		for (i = 0; i < n; i++) {
			uint64_t one;

			if (!want[i])
				continue;
			one = sl__reclaim_group(r, v[i].g, want[i], prot_of(&v[i], low_too), low_too ? 0 : v[i].elow);
			if (!one)
				v[i].done = true;
			got += one;
		}
		if (!got)
			break;
	}
out:
	free(want);
	free(w);
}

static void reclaim(struct sl__reclaim *r)
{
	struct sl__node *v;
	size_t n, i;

	v = sl__snapshot(r->t, r->scope, &n);
	if (!v)
		return;
	protection_pass(r, v, n, true);
	for (i = 0; i < n; i++)
		v[i].done = false;
	if (r->freed < r->target)
		protection_pass(r, v, n, false);
	sl__snapshot_free(v, n);
}

/* The value the last reclaim computed (relative to its scope). */
static void effective(const sl_group *g, uint64_t *emin, uint64_t *esoft)
{
	*emin = sl__load(&g->emin, SL_RELAXED);
	*esoft = sl__load(&g->esoft, SL_RELAXED);
}

const struct sl__policy sl__policy_protection = {
	.name = "protection",
	.reclaim = reclaim,
	.effective = effective,
	.min_on_path = false,
};
