/* SPDX-License-Identifier: MIT */
/*
 * SL_POLICY_PROTECTION: cgroup v2's memory.min and memory.low.  A group's
 * effective protection is its setting capped by what its parent can give,
 * shared out in proportion to protected usage; reclaim takes from every
 * group in proportion to its usage above that, in rounds, recomputing as
 * usages fall (the kernel's answer is the limit of many small steps, not
 * one proportional cut).  Pass 1 spares effective low, pass 2 only
 * effective min.
 *
 * Pass 1 does not walk the subtree.  Every group keeps what it protects
 * and what its children protect (struct sl__prot, kept by counter.c as the
 * kernel's page counters keep theirs), so one group's effective protection
 * is computed along its path to the scope.  And only two kinds of group
 * can hold usage above effective low: those over their own soft limit (the
 * over-soft index) and those below a group whose children protect more
 * than its soft limit, where effective low is cut (the overcommit index:
 * the topmost group where the cut starts is always in it, since above it
 * nothing is cut).  Pass 1's candidates are those, with the scope itself;
 * its cost follows them, not the tree's size, and it works in per-thread
 * scratch that is kept between reclaims.  Pass 2, reached only when pass 1
 * cannot free enough, takes from every group above effective min and so
 * snapshots the subtree.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Rounds of about 1/ROUND_DIV of what is reclaimable. */
#define ROUND_DIV 8
#define MAX_ROUNDS 512

/* One round asks for about 1/ROUND_DIV of what is reclaimable, at least
 * 1/16 of what is left to free, never more than either. */
static uint64_t round_step(uint64_t total, uint64_t left)
{
	uint64_t step = total / ROUND_DIV;

	if (step < left / 16)
		step = left / 16;
	return sl__min_u64(sl__min_u64(step ? step : 1, left), total);
}

/* cgroup v2's effective protection of a child: its protected usage, scaled
 * down when the siblings together claim more than the parent has. */
static uint64_t effective_of(uint64_t usage, uint64_t setting, uint64_t parent_e, uint64_t siblings)
{
	uint64_t protected = sl__min_u64(usage, setting);

	if (siblings > parent_e)
		return siblings ? sl__muldiv(protected, parent_e, siblings) : 0;
	return protected;
}

/* g's effective min and low relative to scope, now, along the path; the
 * scope's own protection does not count, its children get their settings
 * as they are.  g == scope: nothing. */
static void effective_now(const sl_group *scope, const sl_group *g, uint64_t *emin, uint64_t *elow)
{
	const sl_group *path[SL_DEPTH_MAX + 1];
	uint64_t pmin = 0, plow = 0;
	size_t n = 0;

	for (; g != scope; g = g->parent)
		path[n++] = g;
	while (n--) {
		const sl_group *x = path[n];
		uint64_t m = sl__load(&x->min, SL_RELAXED), s = sl__soft_of(x);

		if (x->parent == scope) {
			pmin = m;
			plow = s;
		} else {
			uint64_t usage = sl__usage_of(x), pcount = sl__usage_of(x->parent);
			const struct sl__prot *pp = x->parent->prot;

			pmin = effective_of(usage, m, pmin, sl__prot_sum(&pp->children_min, pcount));
			plow = effective_of(usage, s, plow, sl__prot_sum(&pp->children_low, pcount));
		}
	}
	*emin = pmin;
	*elow = plow;
}

/* ---- pass 1 ---- */

struct cand {
	sl_group *g;
	uint64_t prot;  /* effective low or min, whichever is larger */
	uint64_t elow;
	bool done;      /* freed nothing when asked */
};

/* Per-thread scratch, kept between reclaims (a thread runs one reclaim at
 * a time: callbacks may not reclaim). */
struct scratch {
	struct cand *c;
	uint64_t *w, *want;
	size_t n, cap;
};
static _Thread_local struct scratch tls_scratch;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_key_ok;

static void scratch_release(void *arg)
{
	struct scratch *s = arg;

	free(s->c);
	free(s->w);
	free(s->want);
	memset(s, 0, sizeof(*s));
}

static void scratch_key_init(void)
{
	scratch_key_ok = pthread_key_create(&scratch_key, scratch_release) == 0;
}

/* Room for one more candidate; false (it is left out, and the reclaim
 * frees less, never more) when memory is short. */
static bool scratch_room(struct scratch *s)
{
	size_t cap;
	struct cand *c;
	uint64_t *w, *want;

	if (s->n < s->cap)
		return true;
	pthread_once(&scratch_once, scratch_key_init);
	if (!scratch_key_ok)
		return false;
	cap = s->cap ? 2 * s->cap : 64;
	if (cap > SIZE_MAX / sizeof(*c))
		return false;
	c = sl__realloc(s->c, cap * sizeof(*c));
	if (c)
		s->c = c;
	w = c ? sl__realloc(s->w, cap * sizeof(*w)) : NULL;
	if (w)
		s->w = w;
	want = w ? sl__realloc(s->want, cap * sizeof(*want)) : NULL;
	if (!want)
		return false;
	s->want = want;
	s->cap = cap;
	/* Freed when the thread exits. */
	pthread_setspecific(scratch_key, s);
	return true;
}

/* Add g, pinned (the caller holds the lock that destroy takes). */
static void add_cand(sl_group *g, void *arg)
{
	struct scratch *s = arg;

	if (!scratch_room(s))
		return;
	sl__pin(g);
	s->c[s->n++] = (struct cand){ .g = g };
}

static int cand_cmp(const void *pa, const void *pb)
{
	uintptr_t a = (uintptr_t)((const struct cand *)pa)->g, b = (uintptr_t)((const struct cand *)pb)->g;

	return a < b ? -1 : a > b;
}

/* Every descendant of top, pinned, under the topology lock. */
static void add_subtree(struct scratch *s, sl_group *top)
{
	sl_group *g = top->first_child;

	while (g) {
		add_cand(g, s);
		if (g->first_child) {
			g = g->first_child;
			continue;
		}
		while (g != top && !g->next_sibling)
			g = g->parent;
		g = g == top ? NULL : g->next_sibling;
	}
}

/* Pass 1's candidates: the scope, the over-soft groups and everything
 * below an overcommitted group, each once. */
static void collect(struct sl__reclaim *r, struct scratch *s)
{
	size_t i, j, n_oc;

	s->n = 0;
	add_cand(r->scope, s);
	/* Overcommitted groups: their subtrees are added below, and each
	 * is itself a candidate only if it is over (the over-soft index). */
	sl__oc_collect(r->t, r->scope, add_cand, s);
	n_oc = s->n;
	if (n_oc > 1) {
		pthread_mutex_lock(&r->t->lock);
		for (i = 1; i < n_oc; i++)
			add_subtree(s, s->c[i].g);
		pthread_mutex_unlock(&r->t->lock);
	}
	sl__over_collect(r->t, r->scope, add_cand, s);
	if (n_oc <= 1 || s->n < 2)
		return; /* the over-soft index holds each group once */
	qsort(s->c, s->n, sizeof(*s->c), cand_cmp);
	for (i = j = 0; i < s->n; i++) {
		if (j && s->c[j - 1].g == s->c[i].g)
			sl__unpin(s->c[i].g);
		else
			s->c[j++] = s->c[i];
	}
	s->n = j;
}

static void release(struct scratch *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		sl__unpin(s->c[i].g);
	s->n = 0;
}

/* Reclaim in rounds from every candidate in proportion to its own charges'
 * share of its usage above max(effective low, effective min). */
static void pass1(struct sl__reclaim *r)
{
	struct scratch *s = &tls_scratch;
	int round;
	size_t i;

	collect(r, s);
	for (round = 0; round < MAX_ROUNDS && r->freed < r->target; round++) {
		uint64_t total = 0, left = r->target - r->freed, step, got = 0;

		for (i = 0; i < s->n; i++) {
			struct cand *c = &s->c[i];
			uint64_t usage = sl__usage_of(c->g), own, emin = 0;

			own = c->g->reclaim_fn ? sl__min_u64(sl__own_of(c->g), usage) : 0;
			c->elow = 0;
			if (c->g != r->scope)
				effective_now(r->scope, c->g, &emin, &c->elow);
			c->prot = sl__min_u64(c->elow > emin ? c->elow : emin, usage);
			/* A callback that freed nothing is not asked again in
			 * this pass: its share goes to the others. */
			s->w[i] = usage > c->prot && !c->done ? sl__muldiv(own, usage - c->prot, usage) : 0;
			total += s->w[i];
		}
		if (!total)
			break;
		step = round_step(total, left);
		sl__split(step, s->w, s->want, s->n);
		for (i = 0; i < s->n; i++) {
			uint64_t one;

			if (!s->want[i])
				continue;
			one = sl__reclaim_group(r, s->c[i].g, s->want[i], s->c[i].prot, 0);
			if (!one)
				s->c[i].done = true;
			got += one;
		}
		if (!got)
			break;
	}
	release(s);
}

/* ---- pass 2 ---- */

/* Effective min of every node of the snapshot; node 0 is the reclaim's
 * scope, whose own protection does not count. */
static void compute_emin(struct sl__node *v, size_t n)
{
	size_t i, j;

	v[0].emin = 0;
	for (i = 0; i < n; i++) {
		uint64_t smin = 0;

		for (j = i + 1; j < v[i].end; j = v[j].end)
			smin += sl__min_u64(v[j].usage, sl__load(&v[j].g->min, SL_RELAXED));
		for (j = i + 1; j < v[i].end; j = v[j].end) {
			uint64_t m = sl__load(&v[j].g->min, SL_RELAXED);

			/* Children of the scope get their settings as they are. */
			v[j].emin = i == 0 ? m : effective_of(v[j].usage, m, v[i].emin, smin);
		}
	}
}

/* Reclaim in rounds from every group in proportion to its own charges'
 * share of its usage above effective min. */
static void pass2(struct sl__reclaim *r)
{
	uint64_t *want, *w;
	struct sl__node *v;
	size_t n, i;
	int round;

	v = sl__snapshot(r->t, r->scope, &n);
	if (!v)
		return;
	want = sl__malloc(n * sizeof(*want));
	w = sl__malloc(n * sizeof(*w));
	if (!want || !w)
		goto out;
	for (round = 0; round < MAX_ROUNDS && r->freed < r->target; round++) {
		uint64_t total = 0, left = r->target - r->freed, step, got = 0;

		sl__snapshot_refresh(v, n);
		compute_emin(v, n);
		for (i = 0; i < n; i++) {
			uint64_t elow = 0, emin;

			/* A callback that freed nothing is not asked again in
			 * this pass: its share goes to the others. */
			w[i] = v[i].usage > v[i].emin && !v[i].done
				       ? sl__muldiv(v[i].own, v[i].usage - v[i].emin, v[i].usage)
				       : 0;
			total += w[i];
			/* What pass 1 spared, for the low events. */
			if (w[i] && i)
				effective_now(r->scope, v[i].g, &emin, &elow);
			v[i].elow = elow;
		}
		if (!total)
			break;
		step = round_step(total, left);
		sl__split(step, w, want, n);
		for (i = 0; i < n; i++) {
			uint64_t one;

			if (!want[i])
				continue;
			one = sl__reclaim_group(r, v[i].g, want[i], v[i].emin, v[i].elow);
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
	sl__snapshot_free(v, n);
}

/* No reclaim takes a group below its effective min. */
static void floors(struct sl__node *v, size_t n)
{
	size_t i;

	compute_emin(v, n);
	for (i = 0; i < n; i++)
		v[i].floor = v[i].emin;
}

static void reclaim(struct sl__reclaim *r)
{
	pass1(r);
	if (sl__pass2_begin(r))
		pass2(r);
}

/* What the policy grants g now, relative to the root (whose own
 * protection, as any scope's, does not count). */
static void effective(const sl_group *g, uint64_t *emin, uint64_t *esoft)
{
	const sl_group *root = g;

	while (root->parent)
		root = root->parent;
	*emin = *esoft = 0;
	if (g != root)
		effective_now(root, g, emin, esoft);
}

const struct sl__policy sl__policy_protection = {
	.name = "protection",
	.reclaim = reclaim,
	.effective = effective,
	.floors = floors,
	.min_on_path = false,
};
