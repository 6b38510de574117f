/* SPDX-License-Identifier: MIT */
/*
 * The jemalloc adapter: an arena whose extent hooks (hooks.c, which says
 * what "committed" means here and what the charge is) charge a group for
 * the pages the arena commits (softlimit/jemalloc.h).  This file sets the adapter
 * up and takes it down, reclaims for its group, and allocates: at max, it
 * makes room outside jemalloc's locks and tries again.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "adapter.h"

static int je_purge(sl_jemalloc *a)
{
	return mallctlbymib(a->purge_mib, 3, NULL, NULL, NULL, 0) == 0 ? 0 : -EIO;
}

static uint64_t fell_since(sl_jemalloc *a, uint64_t before)
{
	uint64_t now = sl__load(&a->charged, SL_RELAXED);

	return before > now ? before - now : 0;
}

/*
 * The group's reclaim: unused pages first (they cost the host nothing), then
 * the host's objects, whose pages a second purge returns.  The core believes
 * the result only as far as the group's usage fell.
 */
static uint64_t je_reclaim(sl_group *g, uint64_t target, void *ctx)
{
	sl_jemalloc *a = ctx;
	uint64_t before = sl__load(&a->charged, SL_RELAXED);
	uint64_t freed;

	(void)g;
	je_purge(a);
	freed = fell_since(a, before);
	if (freed < target && a->ops.evict != NULL) {
		uint64_t claimed = a->ops.evict(a, target - freed, a->ctx);

		if (claimed > 0)
			sl__fetch_add(&a->evicted, claimed, SL_RELAXED);
		je_purge(a);
		freed = fell_since(a, before);
	}
	return freed;
}

/* Map a mallctl error to the library's convention. */
static int je_err(int r)
{
	switch (r) {
	case 0:
		return 0;
	case ENOENT:
		return -ENOTSUP;
	case EAGAIN:
	case ENOMEM:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

/*
 * jemalloc 5.3's arena_config_t, for experimental.arenas_create_ext: with
 * metadata_use_hooks false the arena's metadata comes from jemalloc's own
 * base allocator, so the hooks see only the arena's extents.  jemalloc checks
 * the size it is given, so a jemalloc with another layout answers EINVAL.
 */
struct je_arena_config {
	extent_hooks_t *extent_hooks;
	bool metadata_use_hooks;
};

static int je_arena_create(sl_jemalloc *a)
{
	struct je_arena_config cfg = {&a->hooks, false};
	extent_hooks_t *hooks = &a->hooks;
	unsigned ind;
	size_t sz = sizeof(ind);
	int r;

	r = mallctl("experimental.arenas_create_ext", &ind, &sz, &cfg, sizeof(cfg));
	if (r == ENOENT || r == EINVAL) {
		/* Older jemalloc: metadata then goes through the hooks, and is charged. */
		sz = sizeof(ind);
		r = mallctl("arenas.create", &ind, &sz, &hooks, sizeof(hooks));
	}
	if (r != 0)
		return je_err(r);
	a->arena = ind;
	a->arena_live = true;
	return 0;
}

int sl_jemalloc_create(sl_group *parent, const char *name, const struct sl_limits *lim,
		       const struct sl_jemalloc_ops *ops, void *ctx, sl_jemalloc **out)
{
	static const struct sl_ops group_ops = {.reclaim = je_reclaim};
	sl_jemalloc *a;
	size_t sz, miblen = 3;
	int r;

	if (out == NULL)
		return -EINVAL;
	*out = NULL;
	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return -ENOMEM;
	if (ops != NULL)
		a->ops = *ops;
	a->ctx = ctx;

	sz = sizeof(a->dflt);
	r = je_err(mallctl("arena.0.extent_hooks", &a->dflt, &sz, NULL, 0));
	if (r == 0 && a->dflt->alloc == NULL)
		r = -ENOTSUP;
	sz = sizeof(a->page);
	if (r == 0)
		r = je_err(mallctl("arenas.page", &a->page, &sz, NULL, 0));
	if (r == 0)
		r = je_err(mallctlnametomib("arena.0.purge", a->purge_mib, &miblen));
	if (r != 0 || miblen != 3) {
		free(a);
		return r != 0 ? r : -ENOTSUP;
	}
	sl__je_hooks_init(a);

	/* The group first: the arena's first hook may charge it. */
	r = sl_group_create(parent, name, lim, &group_ops, a, &a->group);
	if (r != 0) {
		free(a);
		return r;
	}
	r = je_arena_create(a);
	if (r != 0) {
		sl_group_destroy(a->group);
		free(a);
		return r;
	}
	a->purge_mib[1] = a->arena;
	a->flags = MALLOCX_ARENA(a->arena) | MALLOCX_TCACHE_NONE;
	*out = a;
	return 0;
}

static int je_refresh(void)
{
	uint64_t epoch = 1;
	size_t sz = sizeof(epoch);

	return je_err(mallctl("epoch", &epoch, &sz, &epoch, sz));
}

static int je_arena_stat(sl_jemalloc *a, const char *leaf, uint64_t *out)
{
	char name[64];
	size_t v, sz = sizeof(v);
	int r;

	snprintf(name, sizeof(name), "stats.arenas.%u.%s", a->arena, leaf);
	r = mallctl(name, &v, &sz, NULL, 0);
	if (r != 0)
		return je_err(r);
	*out = v;
	return 0;
}

static int count_children(sl_group *g, unsigned depth, void *arg)
{
	(void)g;
	if (depth > 0)
		++*(unsigned *)arg;
	return 0;
}

int sl_jemalloc_destroy(sl_jemalloc *a)
{
	unsigned children = 0;
	struct sl_stats st;
	char name[64];
	uint64_t active = 0, left;
	int r;

	if (a == NULL)
		return 0;
	if (a->arena_live) {
		/* jemalloc built without stats cannot tell; then trust the caller. */
		if (je_refresh() == 0 && je_arena_stat(a, "pactive", &active) == 0 && active > 0)
			return -EBUSY;
		r = sl_group_walk(a->group, count_children, &children);
		if (r == 0)
			r = sl_group_stats(a->group, &st);
		if (r != 0)
			return r;
		if (children > 0 || st.usage != sl__load(&a->charged, SL_RELAXED))
			return -EBUSY;

		snprintf(name, sizeof(name), "arena.%u.destroy", a->arena);
		r = mallctl(name, NULL, NULL, NULL, 0);
		if (r != 0)
			return je_err(r) == -EIO ? -EBUSY : je_err(r);
		a->arena_live = false;
		/* The destroy hooks gave everything back; anything left is jemalloc's to forget. */
		left = sl__load(&a->charged, SL_RELAXED);
		if (left > 0)
			sl__je_uncharge(a, left);
	}
	/* -EBUSY only if called inside a reclaim callback or while the group
	 * is held (sl_group_hold()): the arena is gone, call again. */
	r = sl_group_destroy(a->group);
	if (r != 0)
		return r;
	free(a);
	return 0;
}

/* Rounds in a row in which reclaim made no room before an allocation falls
 * back on sl_charge()'s own rule (the core's count, SL__RECLAIM_RETRIES). */
#define JE_IDLE_ROUNDS 16
/* Rounds in which only the host's evict claims progress (the arena's usage
 * did not fall): believed this often per allocation, so that an evict
 * that claims frees it does not make cannot keep an allocation spinning. */
#define JE_CLAIM_ROUNDS 64

/* The highest group from a's up whose max the charge of need does not fit
 * under: where a charge would reclaim.  a's own group if none (the room
 * appeared meanwhile). */
static sl_group *in_the_way(sl_jemalloc *a, uint64_t need)
{
	sl_group *g, *top = a->group;
	struct sl_stats st;

	for (g = a->group; g != NULL; g = sl_group_parent(g)) {
		if (sl_group_stats(g, &st) != 0 || st.limits.max == SL_UNLIMITED)
			continue;
		if (st.usage + st.stocked > st.limits.max || st.limits.max - st.usage - st.stocked < need)
			top = g;
	}
	return top;
}

/*
 * Is reclaim worth a round: could need fit under the max of a's group and
 * of every ancestor once reclaim freed all it may (sl_charge_can_fit(),
 * the core's own judgement at max)?  When it could not (an allocation
 * larger than a max, or than what a max leaves once everything reclaimable
 * is gone), a round would purge and evict the host's objects for nothing,
 * and yield while nobody else makes room: the allocation goes straight to
 * the last word instead, whose charge reclaims nothing either.  Judged
 * once per amount refused (*judged: the last amount found to fit).
 */
static bool worth_reclaiming(sl_jemalloc *a, uint64_t need, uint64_t *judged)
{
	if (need == *judged)
		return true;
	if (sl_charge_can_fit(a->group, need) == 0)
		return false;
	*judged = need;
	return true;
}

/*
 * The allocation has failed: a charge that is no try says so, and counts
 * the oom event (every earlier charge of it was SL_TRY: the hooks', and
 * those between the tries, which failed only for then).  Should room have
 * appeared at this last moment, the charge takes it for one more try.
 */
static void *last_word(sl_jemalloc *a, size_t size, uint64_t need)
{
	if (sl_charge(a->group, need, SL_NORECLAIM) != 0)
		return NULL;
	sl__je_tls = (struct sl__je_tls){.a = a, .reserved = sl__je_tls.reserved + need};
	return mallocx(size, a->flags);
}

/*
 * The calling thread's allocation was refused pages at the group's max (or
 * an ancestor's).  Make room and retry until it fits, for as long as a
 * charge would keep trying: while reclaim makes progress.
 *
 * Progress comes in two kinds here.  Room under the max: then a charge of
 * what was refused succeeds; it is kept as this thread's reservation,
 * which only its retry's hooks consume, so no other thread can take it.
 * And room inside the arena: the host's evict frees objects, whose regions
 * the retry can reuse without new pages, though the arena's usage did not
 * fall (its slabs still hold other objects).  A charge at max sees only the
 * first kind, and would evict round after round without trying the
 * arena again; so reclaim goes one round at a time, the allocation retried
 * after each.  When neither kind appears JE_IDLE_ROUNDS times in a row (or
 * evict's claims stop being believed), or at once when no reclaim could
 * make room (worth_reclaiming()), the last word is sl_charge()'s with
 * reclaim allowed: its rule and OOM handler; its oom event only once the
 * allocation has failed for good (last_word()).
 *
 * Runs outside jemalloc's locks (between mallocx() calls), so reclaim may
 * call the host's evict.  Hooks that reclaim runs here (frees, purges) are
 * not this allocation's: they see no reservation.
 */
static void *alloc_at_max(sl_jemalloc *a, size_t size)
{
	unsigned idle = 0, claims = 0;
	uint64_t reserved = sl__je_tls.reserved, judged = 0;
	void *p = NULL;

	while (sl__je_tls.refused > sl__je_tls.reserved) {
		uint64_t need = sl__je_tls.refused - sl__je_tls.reserved;

		reserved = sl__je_tls.reserved;
		sl__je_tls.a = NULL;
		if (sl_charge(a->group, need, SL_NORECLAIM | SL_TRY) == 0) {
			reserved += need;
		} else if (idle < JE_IDLE_ROUNDS && claims < JE_CLAIM_ROUNDS &&
			   worth_reclaiming(a, need, &judged)) {
			/* Relaxed: a tally, compared only with itself. */
			uint64_t evicted = sl__load(&a->evicted, SL_RELAXED);

			if (sl_reclaim(in_the_way(a, need), need, 0) > 0) {
				idle = 0;
			} else if (sl__load(&a->evicted, SL_RELAXED) != evicted) {
				claims++;
			} else {
				idle++;
				sched_yield(); /* reclaims of others may be in flight */
			}
		} else {
			if (sl_charge(a->group, need, SL_TRY) != 0) {
				/* That charge's reclaims may still have left
				 * room inside the arena: one last try. */
				sl__je_tls = (struct sl__je_tls){.a = a, .reserved = reserved};
				p = mallocx(size, a->flags);
				if (p == NULL)
					p = last_word(a, size, need);
				break;
			}
			reserved += need;
			idle = 0;
			claims = 0;
		}
		sl__je_tls = (struct sl__je_tls){.a = a, .reserved = reserved};
		p = mallocx(size, a->flags);
		if (p != NULL)
			break;
	}
	reserved = sl__je_tls.reserved;
	sl__je_tls.reserved = 0;
	if (reserved > 0)
		sl_uncharge(a->group, reserved);
	return p;
}

void *sl_jemalloc_alloc(sl_jemalloc *a, size_t size)
{
	struct sl__je_tls saved = sl__je_tls;
	void *p;

	if (a == NULL || !a->arena_live) {
		errno = EINVAL;
		return NULL;
	}
	if (size == 0)
		size = 1; /* mallocx(0) is undefined */

	sl__je_tls = (struct sl__je_tls){.a = a};
	p = mallocx(size, a->flags);
	if (p == NULL && sl__je_tls.refused > 0)
		p = alloc_at_max(a, size);
	sl__je_tls = saved;
	sl__je_tls.refused_by = NULL;
	if (p == NULL)
		errno = ENOMEM;
	return p;
}

void sl_jemalloc_free(sl_jemalloc *a, void *p)
{
	(void)a;
	if (p != NULL)
		dallocx(p, MALLOCX_TCACHE_NONE);
}

size_t sl_jemalloc_usable_size(const void *p)
{
	return p != NULL ? sallocx(p, 0) : 0;
}

sl_group *sl_jemalloc_group(sl_jemalloc *a)
{
	return a != NULL ? a->group : NULL;
}

unsigned sl_jemalloc_arena(sl_jemalloc *a)
{
	return a != NULL ? a->arena : 0;
}

void *sl_jemalloc_ctx(sl_jemalloc *a)
{
	return a != NULL ? a->ctx : NULL;
}

int sl_jemalloc_purge(sl_jemalloc *a)
{
	if (a == NULL || !a->arena_live)
		return -EINVAL;
	return je_purge(a);
}

int sl_jemalloc_stats(sl_jemalloc *a, struct sl_jemalloc_stats *out)
{
	uint64_t pactive = 0, pdirty = 0, pmuzzy = 0, small = 0, large = 0;
	int r;

	if (a == NULL || out == NULL || !a->arena_live)
		return -EINVAL;
	*out = (struct sl_jemalloc_stats){0};
	r = je_refresh();
	if (r == 0)
		r = je_arena_stat(a, "pactive", &pactive);
	if (r == 0)
		r = je_arena_stat(a, "pdirty", &pdirty);
	if (r == 0)
		r = je_arena_stat(a, "pmuzzy", &pmuzzy);
	if (r == 0)
		r = je_arena_stat(a, "retained", &out->retained);
	if (r == 0)
		r = je_arena_stat(a, "small.allocated", &small);
	if (r == 0)
		r = je_arena_stat(a, "large.allocated", &large);
	/* Read last, so that with no allocation in flight it matches what was just read. */
	out->charged = sl__load(&a->charged, SL_RELAXED);
	if (r != 0) {
		out->retained = 0;
		return r;
	}
	out->active = pactive * a->page;
	out->dirty = pdirty * a->page;
	out->muzzy = pmuzzy * a->page;
	out->allocated = small + large;
	return 0;
}
