/* SPDX-License-Identifier: MIT */
/*
 * Reclaim: the two passes, reclaim at max, the safe point for high, the OOM
 * handler, and the index of groups over their soft limits.
 *
 * Reclaims of one tree are serialised by tree->reclaim_lock, callbacks
 * included, so that two reclaims never both take a group's excess (which
 * would push it below what the policy grants).  The lock is never taken by
 * a charge that fits, by an uncharge, or by anything a callback may call:
 * inside a callback charges do not reclaim and reclaim does not nest.
 *
 * Progress is measured, not believed: a callback's return value counts only
 * as far as the group's own charge really fell, and a callback that frees
 * nothing is not asked again in the same pass.  Every loop is bounded.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Set while this thread holds some tree's reclaim_lock. */
_Thread_local unsigned sl__tls_reclaim_owner;
/* A charge by this thread went past some group's high. */
static _Thread_local bool tls_high_pending;

/* PROTECTION reclaims in rounds of about 1/ROUND_DIV of what is reclaimable,
 * recomputing effective protection between rounds (see NOTES: the kernel's
 * answer is the limit of many small steps, not one proportional cut). */
#define ROUND_DIV 8
#define MAX_ROUNDS 512
#define PROPORTIONAL_ROUNDS 8

typedef unsigned __int128 sl_u128;

struct rc {
	sl_tree *t;
	sl_group *scope;
	uint64_t target;
	uint64_t freed;
};

/* One group of a subtree snapshot, in pre-order: its subtree is [i, end). */
struct node {
	sl_group *g;
	uint32_t parent;
	uint32_t end;
	uint64_t usage, own, floor;
	uint64_t rec;   /* what the subtree can give above its floors */
	uint64_t emin, elow;
	uint64_t acc;
	bool done;      /* PROTECTION: freed nothing when asked in this pass */
};

/* ---- the over-soft index ---- */

void sl__over_push(sl_group *g)
{
	sl_tree *t = g->tree;
	uint32_t zero = 0;
	sl_group *head;

	if (!sl__cas_strong(&g->over_flag, &zero, 1, SL_RELAXED, SL_RELAXED))
		return;
	head = sl__load(&t->over_head, SL_RELAXED);
	do {
		sl__store(&g->over_next, head, SL_RELAXED);
		/* Release: pairs with the acquire exchange in take_index(),
		 * which then sees g->over_next. */
	} while (!sl__cas_weak(&t->over_head, &head, g, SL_RELEASE, SL_RELAXED));
}

/* Unlink g from the index; caller holds reclaim_lock (the only remover). */
void sl__over_forget(sl_group *g)
{
	sl_tree *t = g->tree;
	sl_group *head, *p;

	if (!sl__load(&g->over_flag, SL_RELAXED))
		return;
	head = sl__load(&t->over_head, SL_ACQUIRE);
	if (head == g) {
		sl_group *next = sl__load(&g->over_next, SL_RELAXED);

		/* Fails only if a push went in first: then g is inside. */
		if (sl__cas_strong(&t->over_head, &head, next, SL_ACQ_REL, SL_ACQUIRE))
			goto out;
	}
	for (p = head; p; p = sl__load(&p->over_next, SL_RELAXED)) {
		if (sl__load(&p->over_next, SL_RELAXED) == g) {
			sl__store(&p->over_next, sl__load(&g->over_next, SL_RELAXED), SL_RELAXED);
			break;
		}
	}
out:
	sl__store(&g->over_flag, 0, SL_RELAXED);
}

/* ---- measuring ---- */

static uint64_t usage_of(sl_group *g)
{
	return sl__load(&g->count, SL_RELAXED);
}

static uint64_t own_of(sl_group *g)
{
	return sl__load(&g->local, SL_RELAXED) + sl__stock_my_ledger(g);
}

static uint64_t soft_of(sl_group *g)
{
	return sl__load(&g->soft, SL_RELAXED);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* a * b / c without overflow; c > 0. */
static uint64_t muldiv(uint64_t a, uint64_t b, uint64_t c)
{
	return (uint64_t)((sl_u128)a * b / c);
}

/*
 * How far g's own charges may fall before g or an ancestor up to the scope
 * would go under its min: min is never reclaimed, not even by the scope's
 * own reclaim (the scope's ancestors only see the scope's usage fall, as
 * its own limit demands).  PROTECTION does not use it: there the effective
 * min, already capped by the parents, is the floor, and as in cgroup v2 the
 * scope's own protection does not shield it from its own reclaim.
 */
static uint64_t min_headroom(struct rc *rc, sl_group *g)
{
	uint64_t room = UINT64_MAX;
	sl_group *end = rc->scope->parent;

	for (; g && g != end; g = g->parent) {
		uint64_t min = sl__load(&g->min, SL_RELAXED), usage;

		if (!min)
			continue;
		/* Real usage: units that stocks refilled since the drain (a
		 * callback's own charges, other threads) are not usage. */
		usage = usage_of(g);
		usage -= min_u64(usage, rc->t->batch ? sl__stock_units(g) : 0);
		room = min_u64(room, usage > min ? usage - min : 0);
	}
	return room;
}

/*
 * Ask g's callback for up to want units (never more than what remains of
 * the target, never into a min).  Returns what the callback freed, as far as g's own charge
 * really fell.  within: g counts a low event if its usage is at or below it.
 */
static uint64_t reclaim_group(struct rc *rc, sl_group *g, uint64_t want, uint64_t within)
{
	uint64_t before, after, ret, fell, got, usage;

	/* A callback may free more than asked: the target can be met early. */
	if (rc->freed >= rc->target || !g->reclaim_fn)
		return 0;
	want = min_u64(want, rc->target - rc->freed);
	if (!want)
		return 0;
	if (rc->t->policy != SL_POLICY_PROTECTION)
		want = min_u64(want, min_headroom(rc, g));
	if (!want)
		return 0;
	usage = usage_of(g);
	before = own_of(g);
	sl__tls_in_reclaim++;
	ret = g->reclaim_fn(g, want, g->ctx);
	sl__tls_in_reclaim--;
	after = own_of(g);
	fell = before > after ? before - after : 0;
	got = min_u64(ret, fell);
	if (!got)
		return 0;
	sl__fetch_add(&g->reclaimed, got, SL_RELAXED);
	if (within && usage <= within && g->low_seq != rc->t->reclaim_seq) {
		g->low_seq = rc->t->reclaim_seq;
		sl__count(&g->events_low);
	}
	rc->freed += got;
	return got;
}

/* ---- subtree snapshots and proportional reclaim ---- */

/* Pre-order snapshot of top's subtree, under the topology lock.  Groups
 * cannot be destroyed while we hold reclaim_lock, so the pointers stay
 * good after the lock is dropped. */
static struct node *snapshot(sl_tree *t, sl_group *top, size_t *n_out)
{
	size_t n = 0, cap = 64;
	struct node *v = sl__malloc(cap * sizeof(*v));
	sl_group *g = top;
	uint32_t parent = UINT32_MAX;

	if (!v)
		return NULL;
	pthread_mutex_lock(&t->lock);
	while (g) {
		if (n == cap) {
			struct node *nv = cap < SIZE_MAX / 2 / sizeof(*v) ? sl__realloc(v, 2 * cap * sizeof(*v)) : NULL;

			if (!nv) {
				pthread_mutex_unlock(&t->lock);
				free(v);
				return NULL;
			}
			v = nv;
			cap *= 2;
		}
		v[n] = (struct node){ .g = g, .parent = parent };
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

static void refresh(struct node *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		v[i].usage = usage_of(v[i].g);
		v[i].own = v[i].g->reclaim_fn ? own_of(v[i].g) : 0;
		if (v[i].own > v[i].usage)
			v[i].own = v[i].usage;
	}
}

/* rec(i) = min(usage - floor, own + sum of children's rec), bottom-up. */
static void compute_rec(struct node *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		v[i].acc = v[i].own;
	for (i = n; i-- > 0;) {
		uint64_t cap = v[i].usage > v[i].floor ? v[i].usage - v[i].floor : 0;

		v[i].rec = min_u64(v[i].acc, cap);
		if (i > 0)
			v[v[i].parent].acc += v[i].rec;
	}
}

/* Order of parts for the remainder: larger fractional share first, then
 * larger weight, then position, so that the split is deterministic. */
struct frac {
	uint64_t rem, w;
	size_t i;
};

static int frac_cmp(const void *pa, const void *pb)
{
	const struct frac *a = pa, *b = pb;

	if (a->rem != b->rem)
		return a->rem < b->rem ? 1 : -1;
	if (a->w != b->w)
		return a->w < b->w ? 1 : -1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/*
 * Split amount over parts of weights w[0..k) in proportion, each at most its
 * weight, rounding by largest remainder so that no part is favoured by its
 * position (small steps add up, as PROTECTION's rounds do).
 */
static void split(uint64_t amount, const uint64_t *w, uint64_t *out, size_t k)
{
	uint64_t sum = 0, given = 0;
	struct frac *f;
	size_t i, nf = 0;

	for (i = 0; i < k; i++)
		sum += w[i];
	if (!sum) {
		memset(out, 0, k * sizeof(*out));
		return;
	}
	if (amount > sum)
		amount = sum;
	for (i = 0; i < k; i++) {
		sl_u128 num = (sl_u128)amount * w[i];

		out[i] = (uint64_t)(num / sum);
		given += out[i];
	}
	if (given == amount)
		return;
	f = sl__malloc(k * sizeof(*f));
	for (i = 0; i < k; i++) {
		if (out[i] >= w[i])
			continue;
		if (f) {
			f[nf].rem = (uint64_t)(((sl_u128)amount * w[i]) % sum);
			f[nf].w = w[i];
			f[nf].i = i;
		}
		nf++;
	}
	if (f)
		qsort(f, nf, sizeof(*f), frac_cmp);
	/* Each part is short of its exact share by less than one unit, and
	 * fewer than k units remain: one unit each, in order. */
	for (i = 0; given < amount && i < nf; i++, given++)
		out[f ? f[i].i : i]++;
	/* Without memory for the order: any part with room, in position. */
	for (i = 0; given < amount && i < k; i++) {
		uint64_t more = w[i] - out[i] < amount - given ? w[i] - out[i] : amount - given;

		out[i] += more;
		given += more;
	}
	free(f);
}

/* Take amount from subtree i in proportion to what each part can give. */
static uint64_t take_subtree(struct rc *rc, struct node *v, size_t i, uint64_t amount)
{
	uint64_t stackw[16], stacko[16], *w = stackw, *o = stacko, got = 0;
	size_t k = 1, j, p;

	amount = min_u64(amount, v[i].rec);
	if (!amount)
		return 0;
	for (j = i + 1; j < v[i].end; j = v[j].end)
		k++;
	if (k > 16) {
		w = sl__malloc(2 * k * sizeof(*w));
		if (!w)
			return reclaim_group(rc, v[i].g, min_u64(amount, v[i].own), soft_of(v[i].g));
		o = w + k;
	}
	w[0] = v[i].own;
	for (j = i + 1, p = 1; j < v[i].end; j = v[j].end)
		w[p++] = v[j].rec;
	split(amount, w, o, k);
	got += reclaim_group(rc, v[i].g, o[0], soft_of(v[i].g));
	for (j = i + 1, p = 1; j < v[i].end; j = v[j].end, p++)
		got += take_subtree(rc, v, j, o[p]);
	if (w != stackw)
		free(w);
	return got;
}

/*
 * Reclaim up to amount from top's subtree in proportion to what each group
 * holds above its min, a few rounds in case some callbacks free less than
 * asked.
 */
static uint64_t proportional(struct rc *rc, sl_group *top, uint64_t amount)
{
	uint64_t got = 0;
	struct node *v;
	size_t n, i;
	int round;

	v = snapshot(rc->t, top, &n);
	if (!v)
		return 0;
	for (round = 0; round < PROPORTIONAL_ROUNDS && got < amount && rc->freed < rc->target; round++) {
		uint64_t step;

		refresh(v, n);
		for (i = 0; i < n; i++)
			v[i].floor = sl__load(&v[i].g->min, SL_RELAXED);
		compute_rec(v, n);
		step = take_subtree(rc, v, 0, amount - got);
		if (!step)
			break;
		got += step;
	}
	free(v);
	return got;
}

/* ---- candidates from the index ---- */

struct cand {
	sl_group *g;
	uint64_t key; /* excess when last looked at; only ever falls */
	bool done;    /* dealt with, freed nothing when asked, or not over any more */
};

/* Take the whole index (we are its only consumer while holding
 * reclaim_lock) and keep the candidates inside the scope. */
static struct cand *take_index(struct rc *rc, size_t *n_out, sl_group **outside)
{
	sl_group *g = sl__exchange(&rc->t->over_head, NULL, SL_ACQUIRE), *next;
	size_t n = 0, cap = 16;
	struct cand *c = sl__malloc(cap * sizeof(*c));

	*outside = NULL;
	for (; g; g = next) {
		next = sl__load(&g->over_next, SL_RELAXED);
		if (!c || !sl__is_ancestor(rc->scope, g) || g == rc->scope) {
			/* Not ours to judge (or no memory): keep as it is. */
			sl__store(&g->over_next, *outside, SL_RELAXED);
			*outside = g;
			continue;
		}
		if (n == cap) {
			struct cand *nc = sl__realloc(c, 2 * cap * sizeof(*c));

			if (!nc) {
				sl__store(&g->over_next, *outside, SL_RELAXED);
				*outside = g;
				continue;
			}
			c = nc;
			cap *= 2;
		}
		c[n].g = g;
		c[n].done = false;
		n++;
	}
	*n_out = n;
	return c;
}

/* Put back what is still over its soft limit; forget the rest. */
static void give_back_index(struct rc *rc, struct cand *c, size_t n, sl_group *outside)
{
	sl_tree *t = rc->t;
	sl_group *head = outside, *tail = NULL, *g, *h;
	size_t i;

	for (g = outside; g; g = sl__load(&g->over_next, SL_RELAXED))
		tail = g;
	for (i = 0; i < n; i++) {
		g = c[i].g;
		if (usage_of(g) > soft_of(g)) {
			sl__store(&g->over_next, head, SL_RELAXED);
			head = g;
			if (!tail)
				tail = g;
		} else {
			sl__store(&g->over_flag, 0, SL_RELAXED);
		}
	}
	if (head) {
		h = sl__load(&t->over_head, SL_RELAXED);
		do {
			sl__store(&tail->over_next, h, SL_RELAXED);
			/* Release: pairs with the next take_index()'s acquire. */
		} while (!sl__cas_weak(&t->over_head, &h, head, SL_RELEASE, SL_RELAXED));
	}
	/* A group that went over between our look and the flag's clearing
	 * saw the flag still set and did not push itself: push it now. */
	for (i = 0; i < n; i++)
		if (!sl__load(&c[i].g->over_flag, SL_RELAXED))
			sl__over_check(c[i].g, usage_of(c[i].g));
	free(c);
}

/* What pass 1 may take from candidate g: its own charges when it sets no
 * claim (soft 0), else its excess over its soft limit. */
static uint64_t excess_of(sl_group *g)
{
	uint64_t soft = soft_of(g), usage = usage_of(g);

	if (!soft)
		return g->reclaim_fn ? own_of(g) : 0;
	return usage > soft ? usage - soft : 0;
}

static struct cand *largest(struct cand *c, size_t n, sl_group *below, uint64_t *excess)
{
	struct cand *best = NULL;
	uint64_t be = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t e;

		if (c[i].done || (below && (c[i].g == below || !sl__is_ancestor(below, c[i].g))))
			continue;
		e = excess_of(c[i].g);
		if (!e) {
			c[i].done = true;
			continue;
		}
		if (e > be) {
			be = e;
			best = &c[i];
		}
	}
	*excess = be;
	return best;
}

/* ---- SL_POLICY_GUARANTEE ---- */

/* Bring candidate c back by need: its own charges, then its over-limit
 * descendants largest excess first; only if none is over, all its children
 * in proportion to usage above min (a misconfigured parent). */
static uint64_t guarantee_shrink(struct rc *rc, struct cand *cs, size_t n, struct cand *c, uint64_t need)
{
	sl_group *g = c->g;
	uint64_t got, e;
	bool any_over = false;
	struct cand *d;

	if (!soft_of(g))
		return reclaim_group(rc, g, min_u64(own_of(g), need), 0);
	got = reclaim_group(rc, g, min_u64(own_of(g), need), 0);
	while (got < need && rc->freed < rc->target && (d = largest(cs, n, g, &e))) {
		uint64_t step = guarantee_shrink(rc, cs, n, d, min_u64(e, need - got));

		any_over = true;
		if (!step)
			d->done = true;
		got += step;
	}
	if (!any_over && got < need && rc->freed < rc->target)
		got += proportional(rc, g, need - got);
	return got;
}

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;

	return a->key < b->key ? 1 : a->key > b->key ? -1 : 0;
}

/*
 * The next candidate, largest excess first.  Keys are sorted once; a key
 * that has gone stale (a shrink of an ancestor took from it) is refreshed
 * when its turn comes and the candidate moves back to its new place, so the
 * whole pass costs O(k log k) for k candidates, not a scan per pick.
 */
static struct cand *next_cand(struct cand *c, size_t n, size_t *pos, uint64_t *excess)
{
	while (*pos < n) {
		struct cand *x = &c[*pos];
		uint64_t e;
		size_t j;

		if (x->done) {
			(*pos)++;
			continue;
		}
		e = excess_of(x->g);
		if (!e) {
			x->done = true;
			(*pos)++;
			continue;
		}
		if (*pos + 1 < n && e < c[*pos + 1].key) {
			struct cand tmp = *x;

			tmp.key = e;
			for (j = *pos; j + 1 < n && c[j + 1].key > e; j++)
				c[j] = c[j + 1];
			c[j] = tmp;
			continue;
		}
		x->key = e;
		*excess = e;
		(*pos)++;
		return x;
	}
	return NULL;
}

static void sort_cands(struct cand *c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		c[i].key = excess_of(c[i].g);
	qsort(c, n, sizeof(*c), cand_cmp);
}

static void pass1_guarantee(struct rc *rc, struct cand *c, size_t n)
{
	struct cand *x;
	size_t pos = 0;
	uint64_t e;

	sort_cands(c, n);
	while (rc->freed < rc->target && (x = next_cand(c, n, &pos, &e))) {
		guarantee_shrink(rc, c, n, x, min_u64(e, rc->target - rc->freed));
		x->done = true;
	}
}

/* ---- SL_POLICY_GATEKEEPER ---- */

static bool over_soft(sl_group *g)
{
	uint64_t soft = soft_of(g);

	return soft && usage_of(g) > soft;
}

/* Inside a gate opened by an ancestor strictly below the scope. */
static bool inside_gate(struct rc *rc, sl_group *g)
{
	for (g = g->parent; g && g != rc->scope; g = g->parent)
		if (over_soft(g))
			return true;
	return false;
}

static void pass1_gatekeeper(struct rc *rc, struct cand *c, size_t n)
{
	struct cand *x;
	size_t pos = 0;
	uint64_t e;

	sort_cands(c, n);
	while (rc->freed < rc->target && (x = next_cand(c, n, &pos, &e))) {
		/* Inside an opened gate: the gate's proportional cut covers it. */
		if (inside_gate(rc, x->g))
			continue;
		e = min_u64(e, rc->target - rc->freed);
		if (soft_of(x->g))
			proportional(rc, x->g, e); /* open the gate */
		else
			reclaim_group(rc, x->g, e, 0);
		x->done = true;
	}
}

/* ---- SL_POLICY_PROTECTION ---- */

/* cgroup v2's effective protection of a child: its protected usage, scaled
 * down when the siblings together claim more than the parent has. */
static uint64_t effective(uint64_t usage, uint64_t setting, uint64_t parent_e, uint64_t siblings)
{
	uint64_t protected = min_u64(usage, setting);

	if (siblings > parent_e)
		return siblings ? muldiv(protected, parent_e, siblings) : 0;
	return protected;
}

/* Effective min and low of every node of the snapshot; node 0 is the
 * reclaim's scope, whose own protection does not count. */
static void compute_protection(struct node *v, size_t n)
{
	size_t i, j;

	v[0].emin = v[0].elow = 0;
	for (i = 0; i < n; i++) {
		uint64_t smin = 0, slow = 0;

		for (j = i + 1; j < v[i].end; j = v[j].end) {
			smin += min_u64(v[j].usage, sl__load(&v[j].g->min, SL_RELAXED));
			slow += min_u64(v[j].usage, soft_of(v[j].g));
		}
		for (j = i + 1; j < v[i].end; j = v[j].end) {
			uint64_t m = sl__load(&v[j].g->min, SL_RELAXED), s = soft_of(v[j].g);

			if (i == 0) {
				/* Children of the scope get their settings as they are. */
				v[j].emin = m;
				v[j].elow = s;
			} else {
				v[j].emin = effective(v[j].usage, m, v[i].emin, smin);
				v[j].elow = effective(v[j].usage, s, v[i].elow, slow);
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

/* Reclaim in rounds from every group in proportion to its own charges'
 * share of its usage above protection (elow in pass 1, emin in pass 2). */
static void protection_pass(struct rc *rc, struct node *v, size_t n, bool low_too)
{
	uint64_t *want = sl__malloc(n * sizeof(*want)), *w = sl__malloc(n * sizeof(*w));
	int round;
	size_t i;

	if (!want || !w)
		goto out;
	for (round = 0; round < MAX_ROUNDS && rc->freed < rc->target; round++) {
		uint64_t total = 0, left = rc->target - rc->freed, step, got = 0;

		refresh(v, n);
		compute_protection(v, n);
		for (i = 0; i < n; i++) {
			uint64_t prot = low_too ? (v[i].emin > v[i].elow ? v[i].emin : v[i].elow) : v[i].emin;

			/* A callback that freed nothing is not asked again in
			 * this pass: its share goes to the others. */
			w[i] = v[i].usage > prot && !v[i].done ? muldiv(v[i].own, v[i].usage - prot, v[i].usage) : 0;
			total += w[i];
		}
		if (!total)
			break;
		step = total / ROUND_DIV;
		if (step < left / 16)
			step = left / 16;
		step = min_u64(min_u64(step ? step : 1, left), total);
		split(step, w, want, n);
		for (i = 0; i < n; i++) {
			uint64_t one;

			if (!want[i])
				continue;
			one = reclaim_group(rc, v[i].g, want[i], low_too ? 0 : v[i].elow);
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

static void reclaim_protection(struct rc *rc)
{
	struct node *v;
	size_t n, i;

	v = snapshot(rc->t, rc->scope, &n);
	if (!v)
		return;
	protection_pass(rc, v, n, true);
	for (i = 0; i < n; i++)
		v[i].done = false;
	if (rc->freed < rc->target)
		protection_pass(rc, v, n, false);
	free(v);
}

/* ---- the reclaim itself ---- */

static void lock_reclaim(sl_tree *t)
{
	pthread_mutex_lock(&t->reclaim_lock);
	sl__tls_reclaim_owner++;
	t->reclaim_seq++;
}

static void unlock_reclaim(sl_tree *t)
{
	sl__tls_reclaim_owner--;
	pthread_mutex_unlock(&t->reclaim_lock);
}

/* Caller holds reclaim_lock. */
static uint64_t do_reclaim(sl_group *scope, uint64_t target)
{
	struct rc rc = { .t = scope->tree, .scope = scope, .target = target };
	struct cand *c;
	sl_group *outside;
	size_t n;

	/* Decide on real usage: idle stock units are not anyone's usage. */
	sl__stock_drain(scope, SL__DRAIN_SUBTREE);
	if (rc.t->policy == SL_POLICY_PROTECTION) {
		reclaim_protection(&rc);
		return rc.freed;
	}
	c = take_index(&rc, &n, &outside);
	/* The scope's own charges are always eligible: its soft limit does
	 * not shield it from its own reclaim. */
	reclaim_group(&rc, scope, min_u64(own_of(scope), target), 0);
	if (c && rc.freed < target) {
		if (rc.t->policy == SL_POLICY_GUARANTEE)
			pass1_guarantee(&rc, c, n);
		else
			pass1_gatekeeper(&rc, c, n);
	}
	give_back_index(&rc, c, c ? n : 0, outside);
	if (rc.freed < target)
		proportional(&rc, scope, target - rc.freed);
	return rc.freed;
}

uint64_t sl_reclaim(sl_group *scope, uint64_t target, unsigned flags)
{
	uint64_t freed;

	if (!sl__group_valid(scope) || !target || flags || sl__tls_in_reclaim || sl__tls_reclaim_owner)
		return 0;
	lock_reclaim(scope->tree);
	freed = do_reclaim(scope, target);
	unlock_reclaim(scope->tree);
	return freed;
}

/* A charge of need units did not fit under at's max: reclaim what is
 * missing.  Returns true when the charge should be tried again. */
uint64_t sl__reclaim_for_charge(sl_group *at, uint64_t need)
{
	uint64_t count, max, freed;

	if (sl__tls_in_reclaim || sl__tls_reclaim_owner)
		return 0;
	lock_reclaim(at->tree);
	/* Another reclaim may have made room while we waited; idle stock
	 * units are not usage either. */
	sl__stock_drain(at, SL__DRAIN_SUBTREE);
	count = usage_of(at);
	max = sl__load(&at->max, SL_RELAXED);
	if (max >= need && count <= max - need) {
		unlock_reclaim(at->tree);
		return 1;
	}
	freed = need > max ? 0 : do_reclaim(at, count - (max - need));
	unlock_reclaim(at->tree);
	return freed;
}

bool sl__oom(sl_group *at, uint64_t need)
{
	sl_tree *t = at->tree;
	sl_oom_fn fn;
	void *ctx;
	int again;

	pthread_mutex_lock(&t->lock);
	fn = t->oom_fn;
	ctx = t->oom_ctx;
	pthread_mutex_unlock(&t->lock);
	if (!fn)
		return false;
	sl__tls_in_reclaim++;
	again = fn(at, need, ctx);
	sl__tls_in_reclaim--;
	return again != 0;
}

int sl_tree_set_oom_handler(sl_tree *t, sl_oom_fn fn, void *ctx)
{
	if (!t)
		return -EINVAL;
	if (sl__tls_walk_tree == t) { /* inside a walk: the lock is ours */
		t->oom_fn = fn;
		t->oom_ctx = ctx;
		return 0;
	}
	pthread_mutex_lock(&t->lock);
	t->oom_fn = fn;
	t->oom_ctx = ctx;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* ---- high ---- */

void sl__high_note(void)
{
	tls_high_pending = true;
}

int sl_high_pending(void)
{
	return tls_high_pending;
}

uint64_t sl_handle_over_high(sl_group *g)
{
	uint64_t freed = 0;
	sl_tree *t;

	if (!sl__group_valid(g) || sl__tls_in_reclaim || sl__tls_reclaim_owner)
		return 0;
	tls_high_pending = false;
	t = g->tree;
	lock_reclaim(t);
	for (; g; g = g->parent) {
		uint64_t high = sl__load(&g->high, SL_RELAXED), usage;

		if (high == SL_UNLIMITED || usage_of(g) <= high)
			continue;
		sl__stock_drain(g, SL__DRAIN_SUBTREE);
		usage = usage_of(g);
		if (usage > high)
			freed += do_reclaim(g, usage - high);
	}
	unlock_reclaim(t);
	return freed;
}

/* ---- limits ---- */

int sl__shrink_to_max(sl_group *g)
{
	uint64_t max = sl__load(&g->max, SL_RELAXED), usage;
	int round;

	if (usage_of(g) <= max)
		return 0;
	if (sl__tls_in_reclaim || sl__tls_reclaim_owner)
		return -EBUSY;
	lock_reclaim(g->tree);
	for (round = 0; round < 4; round++) {
		sl__stock_drain(g, SL__DRAIN_SUBTREE);
		usage = usage_of(g);
		if (usage <= max || !do_reclaim(g, usage - max))
			break;
	}
	usage = usage_of(g);
	unlock_reclaim(g->tree);
	return usage <= max ? 0 : -EBUSY;
}

/* ---- what the policy grants, for stats ---- */

void sl__effective(sl_group *g, uint64_t *emin, uint64_t *esoft)
{
	sl_tree *t = g->tree;

	*emin = sl__load(&g->min, SL_RELAXED);
	*esoft = soft_of(g);
	switch (t->policy) {
	case SL_POLICY_GUARANTEE:
		return;
	case SL_POLICY_GATEKEEPER: {
		sl_group *p;

		for (p = g->parent; p && p->parent; p = p->parent)
			if (over_soft(p))
				*esoft = 0;
		return;
	}
	case SL_POLICY_PROTECTION:
		break;
	}
	/* The value the last reclaim computed (relative to its scope). */
	*emin = sl__load(&g->emin, SL_RELAXED);
	*esoft = sl__load(&g->esoft, SL_RELAXED);
}
