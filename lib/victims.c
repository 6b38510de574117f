/* SPDX-License-Identifier: MIT */
/*
 * Victims by excess: the candidates that the over-soft index holds inside a
 * reclaim's scope, ranked largest excess first, and the reclaim that
 * GUARANTEE and GATEKEEPER share around their own pass 1: the scope's own
 * charges, the policy's pick of candidates, then pass 2.
 */
#include "internal.h"

#include <stdlib.h>

/* Take the whole index (we are its only consumer while holding
 * reclaim_lock) and keep the candidates inside the scope.  false: no memory
 * for the candidates (everything stays in the index). */
static bool victims_take(struct sl__reclaim *r, struct sl__victims *v)
{
	sl_group *g = sl__over_take_all(r->t), *next;
	size_t cap = 16;

	v->c = sl__malloc(cap * sizeof(*v->c));
	v->n = v->pos = 0;
	v->outside = NULL;
	v->outside_tail = NULL;
	for (; g; g = next) {
		next = sl__load(&g->over_next, SL_RELAXED);
		if (v->c && v->n == cap) {
			struct sl__cand *nc = sl__realloc(v->c, 2 * cap * sizeof(*v->c));

			if (nc) {
				v->c = nc;
				cap *= 2;
			}
		}
		if (!v->c || v->n == cap || !sl__is_ancestor(r->scope, g) || g == r->scope) {
			/* Not ours to judge (or no memory): keep as it is. */
			sl__store(&g->over_next, v->outside, SL_RELAXED);
			if (!v->outside)
				v->outside_tail = g;
			v->outside = g;
			continue;
		}
		v->c[v->n].g = g;
		v->c[v->n].done = false;
		v->n++;
	}
	return v->c != NULL;
}

/* Put back what is still over its soft limit; forget the rest. */
static void victims_give_back(struct sl__reclaim *r, struct sl__victims *v)
{
	sl_group *head = v->outside, *tail = v->outside_tail, *g;
	size_t i;

	for (i = 0; i < v->n; i++) {
		g = v->c[i].g;
		if (sl__usage_of(g) > sl__soft_of(g)) {
			sl__store(&g->over_next, head, SL_RELAXED);
			head = g;
			if (!tail)
				tail = g;
		} else {
			sl__store(&g->over_flag, 0, SL_RELAXED);
		}
	}
	sl__over_put_back(r->t, head, tail);
	/* A group that went over between our look and the flag's clearing
	 * saw the flag still set and did not push itself: push it now. */
	for (i = 0; i < v->n; i++)
		if (!sl__load(&v->c[i].g->over_flag, SL_RELAXED))
			sl__over_check(v->c[i].g, sl__usage_of(v->c[i].g));
	free(v->c);
}

/* What pass 1 may take from candidate g: its own charges when it sets no
 * claim (soft 0), else its excess over its soft limit. */
static uint64_t excess_of(const sl_group *g)
{
	uint64_t soft = sl__soft_of(g), usage = sl__usage_of(g);

	if (!soft)
		return g->reclaim_fn ? sl__own_of(g) : 0;
	return usage > soft ? usage - soft : 0;
}

bool sl__over_soft(const sl_group *g)
{
	uint64_t soft = sl__soft_of(g);

	return soft && sl__usage_of(g) > soft;
}

/* The candidate strictly below `below` with the largest excess, now. */
struct sl__cand *sl__victims_largest_below(struct sl__victims *v, const sl_group *below, uint64_t *excess)
{
	struct sl__cand *best = NULL;
	uint64_t be = 0;
	size_t i;

	for (i = 0; i < v->n; i++) {
		struct sl__cand *c = &v->c[i];
		uint64_t e;

		if (c->done || c->g == below || !sl__is_ancestor(below, c->g))
			continue;
		e = excess_of(c->g);
		if (!e) {
			c->done = true;
			continue;
		}
		if (e > be) {
			be = e;
			best = c;
		}
	}
	*excess = be;
	return best;
}

static int cand_cmp(const void *pa, const void *pb)
{
	const struct sl__cand *a = pa, *b = pb;

	return a->key < b->key ? 1 : a->key > b->key ? -1 : 0;
}

/*
 * The next candidate, largest excess first.  Keys are sorted once; a key
 * that has gone stale (a shrink of an ancestor took from it) is refreshed
 * when its turn comes and the candidate moves back to its new place, so the
 * whole pass costs O(k log k) for k candidates, not a scan per pick.
 */
struct sl__cand *sl__victims_next(struct sl__victims *v, uint64_t *excess)
{
	struct sl__cand *c = v->c;

	while (v->pos < v->n) {
		struct sl__cand *x = &c[v->pos];
		uint64_t e;
		size_t j;

		if (x->done) {
			v->pos++;
			continue;
		}
		e = excess_of(x->g);
		if (!e) {
			x->done = true;
			v->pos++;
			continue;
		}
		if (v->pos + 1 < v->n && e < c[v->pos + 1].key) {
			struct sl__cand tmp = *x;

			tmp.key = e;
			for (j = v->pos; j + 1 < v->n && c[j + 1].key > e; j++)
				c[j] = c[j + 1];
			c[j] = tmp;
			continue;
		}
		x->key = e;
		*excess = e;
		v->pos++;
		return x;
	}
	return NULL;
}

/*
 * Pass 1 by excess, then pass 2: the scope's own charges are always
 * eligible (its soft limit does not shield it from its own reclaim), then
 * the policy's pick of the candidates, then everyone in proportion.
 */
void sl__reclaim_by_excess(struct sl__reclaim *r, void (*pass1)(struct sl__reclaim *, struct sl__victims *))
{
	struct sl__victims v;
	bool have = victims_take(r, &v);
	size_t i;

	sl__reclaim_group(r, r->scope, sl__min_u64(sl__own_of(r->scope), r->target), 0);
	if (have && r->freed < r->target) {
		for (i = 0; i < v.n; i++)
			v.c[i].key = excess_of(v.c[i].g);
		qsort(v.c, v.n, sizeof(*v.c), cand_cmp);
		pass1(r, &v);
	}
	victims_give_back(r, &v);
	if (r->freed < r->target)
		sl__proportional(r, r->scope, r->target - r->freed);
}
