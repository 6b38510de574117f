/* SPDX-License-Identifier: MIT */
/*
 * Victims by rank: the candidates that the over-soft index holds inside a
 * reclaim's scope, ranked largest excess first (or, under REFAULT, fewest
 * recent refaults first, then largest excess), and the reclaim that GUARANTEE,
 * GATEKEEPER and REFAULT share around their own pass 1: the scope's own
 * charges, the policy's pick of candidates, then pass 2.
 */
#include "internal.h"

#include <stdlib.h>

/* One candidate from the index, pinned; on no memory it is left out (the
 * reclaim then frees less, never more). */
static void add_cand(sl_group *g, void *arg)
{
	struct sl__victims *v = arg;

	if (v->n == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 16;
		struct sl__cand *c = cap < SIZE_MAX / sizeof(*c) ? sl__realloc(v->c, cap * sizeof(*c)) : NULL;

		if (!c)
			return;
		v->c = c;
		v->cap = cap;
	}
	sl__pin(g);
	v->c[v->n].g = g;
	v->c[v->n].done = false;
	v->n++;
}

static void victims_release(struct sl__victims *v)
{
	size_t i;

	for (i = 0; i < v->n; i++)
		sl__unpin(v->c[i].g);
	free(v->c);
}

/* What pass 1 may take from candidate g: its own charges when it sets no
 * claim (soft 0), else its excess over its soft limit; what concurrent
 * reclaims claimed in its subtree is theirs. */
static uint64_t excess_of(const sl_group *g)
{
	uint64_t soft = sl__soft_of(g), usage = sl__usage_of(g), claimed = sl__load(&g->claimed, SL_RELAXED);

	if (!soft)
		return g->reclaim_fn ? sl__own_of(g) : 0;
	usage -= sl__min_u64(usage, claimed);
	return usage > soft ? usage - soft : 0;
}

bool sl__over_soft(const sl_group *g)
{
	uint64_t soft = sl__soft_of(g);

	return soft && sl__usage_of(g) > soft;
}

/* c's rank now, into c's keys; returns its excess (0: nothing to take). */
static uint64_t rank(const struct sl__victims *v, struct sl__cand *c)
{
	uint64_t e = excess_of(c->g);

	if (v->by_refault) {
		c->key = sl__refault_rank(c->g);
		c->key2 = e;
	} else {
		c->key = e;
		c->key2 = 0;
	}
	return e;
}

/* a gives before b. */
static bool before(const struct sl__cand *a, const struct sl__cand *b)
{
	return a->key != b->key ? a->key > b->key : a->key2 > b->key2;
}

/* The candidate strictly below `below` that gives first, now. */
struct sl__cand *sl__victims_first_below(struct sl__victims *v, const sl_group *below, uint64_t *excess)
{
	struct sl__cand *best = NULL;
	uint64_t be = 0;
	size_t i;

	for (i = 0; i < v->n; i++) {
		struct sl__cand *c = &v->c[i];
		uint64_t e;

		if (c->done || c->g == below || !sl__is_ancestor(below, c->g))
			continue;
		e = rank(v, c);
		if (!e) {
			c->done = true;
			continue;
		}
		if (!best || before(c, best)) {
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

	return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/*
 * The next candidate, first to give first.  Ranks are sorted once; a rank
 * that has gone stale (a shrink of an ancestor took from it, its refaults
 * moved) is refreshed when its turn comes and the candidate moves back to
 * its new place, so the whole pass costs O(k log k) for k candidates, not
 * a scan per pick (a rank that rose keeps its turn).
 */
struct sl__cand *sl__victims_next(struct sl__victims *v, uint64_t *excess)
{
	struct sl__cand *c = v->c;
	size_t moves = 0;

	while (v->pos < v->n) {
		struct sl__cand *x = &c[v->pos];
		uint64_t e;
		size_t j;

		if (x->done) {
			v->pos++;
			continue;
		}
		e = rank(v, x);
		if (!e) {
			x->done = true;
			v->pos++;
			continue;
		}
		/* Bounded: ranks that concurrent reclaims keep moving cannot
		 * send candidates round for ever. */
		if (v->pos + 1 < v->n && before(&c[v->pos + 1], x) && moves++ < v->n) {
			struct sl__cand tmp = *x;

			for (j = v->pos; j + 1 < v->n && before(&c[j + 1], &tmp); j++)
				c[j] = c[j + 1];
			c[j] = tmp;
			continue;
		}
		*excess = e;
		v->pos++;
		return x;
	}
	return NULL;
}

/*
 * Pass 1 by rank, then pass 2: the scope's own charges are always
 * eligible (its soft limit does not shield it from its own reclaim), then
 * the policy's pick of the candidates, then everyone in proportion.
 */
void sl__reclaim_by_excess(struct sl__reclaim *r, void (*pass1)(struct sl__reclaim *, struct sl__victims *))
{
	struct sl__victims v = { .by_refault = r->t->policy->by_refault };
	size_t i;

	sl__reclaim_group(r, r->scope, sl__min_u64(sl__own_of(r->scope), r->target), 0, 0);
	if (r->freed < r->target) {
		sl__over_collect(r->t, r->scope, add_cand, &v);
		for (i = 0; i < v.n; i++)
			rank(&v, &v.c[i]);
		if (v.n)
			qsort(v.c, v.n, sizeof(*v.c), cand_cmp);
		pass1(r, &v);
		victims_release(&v);
	}
	if (sl__pass2_begin(r))
		sl__proportional(r, r->scope, r->target - r->freed);
}
