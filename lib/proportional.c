/* SPDX-License-Identifier: MIT */
/*
 * Subtree snapshots and the proportional cut: reclaim from a subtree in
 * proportion to what each group holds above its floor (its min).  Pass 2
 * of every policy but PROTECTION, GUARANTEE's misconfigured parent and
 * GATEKEEPER's opened gate.
 */
#include "internal.h"

#include <stdlib.h>

/* A few rounds, in case some callbacks free less than asked. */
#define PROPORTIONAL_ROUNDS 8

/* Pre-order snapshot of top's subtree, under the topology lock.  Every
 * group in it is pinned, so the pointers stay good after the lock is
 * dropped, until sl__snapshot_free(). */
struct sl__node *sl__snapshot(sl_tree *t, sl_group *top, size_t *n_out)
{
	size_t n = 0, cap = 64;
	struct sl__node *v = sl__malloc(cap * sizeof(*v));
	sl_group *g = top;
	uint32_t parent = UINT32_MAX;

	if (!v)
		return NULL;
	pthread_mutex_lock(&t->lock);
	while (g) {
		if (n == cap) {
			struct sl__node *nv =
				cap < SIZE_MAX / 2 / sizeof(*v) ? sl__realloc(v, 2 * cap * sizeof(*v)) : NULL;

			if (!nv) {
				pthread_mutex_unlock(&t->lock);
				sl__snapshot_free(v, n);
				return NULL;
			}
			v = nv;
			cap *= 2;
		}
		v[n] = (struct sl__node){ .g = g, .parent = parent };
		sl__pin(g);
		if (g->first_child) {
			parent = (uint32_t)n++;
			g = g->first_child;
			continue;
		}
		v[n].end = (uint32_t)(n + 1);
		n++;
		/* Climb until a sibling exists, closing subtrees on the way. */
		while (g != top && !g->next_sibling) {
			g = g->parent;
			v[parent].end = (uint32_t)n;
			parent = v[parent].parent;
		}
		g = g == top ? NULL : g->next_sibling;
	}
	pthread_mutex_unlock(&t->lock);
	*n_out = n;
	return v;
}

void sl__snapshot_free(struct sl__node *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		sl__unpin(v[i].g);
	free(v);
}

/* Usage and own charges of every node, now. */
void sl__snapshot_refresh(struct sl__node *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		v[i].usage = sl__usage_of(v[i].g);
		v[i].own = v[i].g->reclaim_fn ? sl__own_of(v[i].g) : 0;
		if (v[i].own > v[i].usage)
			v[i].own = v[i].usage;
	}
}

/* rec(i) = min(usage - floor, own + sum of children's rec), bottom-up. */
static void compute_rec(struct sl__node *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		v[i].acc = v[i].own;
	for (i = n; i-- > 0;) {
		uint64_t cap = v[i].usage > v[i].floor ? v[i].usage - v[i].floor : 0;

		v[i].rec = sl__min_u64(v[i].acc, cap);
		if (i > 0)
			v[v[i].parent].acc += v[i].rec;
	}
}

/* Take amount from subtree i in proportion to what each part can give. */
static uint64_t take_subtree(struct sl__reclaim *r, struct sl__node *v, size_t i, uint64_t amount)
{
	uint64_t stackw[16], stacko[16], *w = stackw, *o = stacko, got = 0;
	size_t k = 1, j, p;

	amount = sl__min_u64(amount, v[i].rec);
	if (!amount)
		return 0;
	for (j = i + 1; j < v[i].end; j = v[j].end)
		k++;
	if (k > 16) {
		w = sl__malloc(2 * k * sizeof(*w));
		if (!w) /* frees less: only this group's own part */
			return sl__reclaim_group(r, v[i].g, sl__min_u64(amount, v[i].own), 0, sl__soft_of(v[i].g));
		o = w + k;
	}
	w[0] = v[i].own;
	for (j = i + 1, p = 1; j < v[i].end; j = v[j].end)
		w[p++] = v[j].rec;
	sl__split(amount, w, o, k);
	got += sl__reclaim_group(r, v[i].g, o[0], 0, sl__soft_of(v[i].g));
	for (j = i + 1, p = 1; j < v[i].end; j = v[j].end, p++)
		got += take_subtree(r, v, j, o[p]);
	if (w != stackw)
		free(w);
	return got;
}

/* The floors of policies that floor every group at its min (all but
 * PROTECTION): struct sl__policy's floors. */
void sl__floors_min(struct sl__node *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		v[i].floor = sl__load(&v[i].g->min, SL_RELAXED);
}

/*
 * What no reclaim of top's subtree may take: kept(g) = min(count(g),
 * max(floor(g), the children's kept + g's own charges if g has no
 * callback)), the floor being the policy's (min, or effective min under
 * PROTECTION).  Stock units count as given back.  Children are read before
 * their parent, so a charge or uncharge in flight makes this too small
 * rather than too large, and a charge that needs more room than max less
 * this can never fit by reclaim.  0 when it cannot be told (no memory).
 */
uint64_t sl__kept(sl_tree *t, sl_group *top)
{
	struct sl__node *v;
	uint64_t kept;
	size_t n, i;

	v = sl__snapshot(t, top, &n);
	if (!v)
		return 0;
	for (i = n; i-- > 0;)
		v[i].usage = sl__usage_of(v[i].g);
	t->policy->floors(v, n);
	/* acc: the children's usage; rec: what the children keep, then what
	 * g keeps. */
	for (i = 0; i < n; i++)
		v[i].acc = v[i].rec = 0;
	for (i = n; i-- > 0;) {
		uint64_t own = v[i].usage - sl__min_u64(v[i].usage, v[i].acc);
		uint64_t k = v[i].rec + (v[i].g->reclaim_fn ? 0 : own);

		v[i].rec = sl__min_u64(v[i].usage, k > v[i].floor ? k : v[i].floor);
		if (i > 0) {
			v[v[i].parent].acc += v[i].usage;
			v[v[i].parent].rec += v[i].rec;
		}
	}
	kept = v[0].rec;
	sl__snapshot_free(v, n);
	return kept;
}

/*
 * Reclaim up to amount from top's subtree in proportion to what each group
 * holds above its min.
 */
uint64_t sl__proportional(struct sl__reclaim *r, sl_group *top, uint64_t amount)
{
	uint64_t got = 0;
	struct sl__node *v;
	size_t n, i;
	int round;

	v = sl__snapshot(r->t, top, &n);
	if (!v)
		return 0;
	for (round = 0; round < PROPORTIONAL_ROUNDS && got < amount && r->freed < r->target; round++) {
		uint64_t step;

		sl__snapshot_refresh(v, n);
		for (i = 0; i < n; i++)
			v[i].floor = sl__load(&v[i].g->min, SL_RELAXED);
		compute_rec(v, n);
		step = take_subtree(r, v, 0, amount - got);
		if (!step)
			break;
		got += step;
	}
	sl__snapshot_free(v, n);
	return got;
}
