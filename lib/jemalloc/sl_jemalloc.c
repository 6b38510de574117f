/* SPDX-License-Identifier: MIT */
/*
 * The jemalloc adapter: an arena whose extent hooks charge a group for the
 * pages the arena commits (softlimit/jemalloc.h).
 *
 * What "mapped" means here.  jemalloc moves an extent through active ->
 * dirty -> (muzzy ->) retained; only the last holds no physical memory.  On
 * Linux its default hooks never really decommit (the OS overcommits, so
 * commit/decommit are no-ops that report failure) and purge with
 * MADV_DONTNEED instead, leaving every extent "committed" from mmap to
 * munmap; charging that would charge retained virtual memory, grown in
 * chunks of 2 MiB and more.  So the adapter makes commit mean what it says:
 *
 *  - alloc: when jemalloc lets the extent come back uncommitted (it does
 *    when it grows its retained memory), the fresh, untouched mapping is
 *    reported uncommitted and nothing is charged; when jemalloc asks for
 *    committed memory, the whole extent is charged before it is mapped.
 *  - commit: charges the range.  The mapping is already readable and
 *    writable (see alloc and decommit), so there is nothing else to do.
 *  - decommit: purges the range with the default forced purge (Linux:
 *    MADV_DONTNEED, which leaves demand-zero pages, as a commit must) and
 *    uncharges it.  Without a forced purge it refuses, and the pages stay
 *    committed and charged.
 *  - dalloc/destroy: uncharge the extent if it was committed.
 *  - purge_forced, purge_lazy, split, merge: pass through; none changes what
 *    is committed.  A forced purge does not uncharge: jemalloc keeps such an
 *    extent committed and reuses it without calling commit, so uncharging it
 *    would let its pages be used uncharged.  jemalloc only forces a purge
 *    after a decommit failed, which here means the forced purge fails too.
 *
 * The charge is then active + dirty + muzzy pages: what jemalloc calls
 * committed, and what a tenant's memory really costs the process.
 *
 * Hooks run inside jemalloc, holding its arena locks: they charge with
 * SL_NORECLAIM, never call the host, never allocate from this arena.  (A
 * malloc() inside a hook is safe: jemalloc marks the thread reentrant and
 * serves it from arena 0.)  Reclaim happens outside, between tries of
 * sl_jemalloc_alloc(), which go on while reclaim makes progress
 * (alloc_at_max()).
 */
#include <softlimit/jemalloc.h>

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <jemalloc/jemalloc.h>

#include "atomic.h"

struct sl_jemalloc {
	/* First: the hooks receive &a->hooks and find the adapter from it. */
	extent_hooks_t hooks;
	extent_hooks_t *dflt; /* the default hooks, which ours wrap */
	sl_group *group;
	struct sl_jemalloc_ops ops;
	void *ctx;
	unsigned arena;
	bool arena_live;
	int flags; /* MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE */
	size_t purge_mib[3];
	size_t page;
	/* Bytes the hooks hold charged to group; what sl_jemalloc_stats() reports. */
	sl_atomic64 charged;
	/* Bytes the host's evict said it freed: room in the arena for an
	 * allocation at max even when no page came free (alloc_at_max()). */
	sl_atomic64 evicted;
};

/*
 * The calling thread's allocation in progress: a reservation already charged
 * to the group, which the hooks consume before charging, and the amount a
 * hook was refused.  Only sl_jemalloc_alloc() sets a; hooks running for
 * another adapter, or in a thread that is purging, see a != theirs.
 *
 * refused_by is the adapter whose commit this thread was last refused, until
 * a charge for it succeeds or a grow is declined.  When a commit of retained
 * memory is refused, jemalloc goes on to grow its retained memory, maps a new
 * and larger chunk, is refused its commit too and keeps the chunk: at max,
 * every failed allocation would leave more virtual memory behind (jemalloc
 * 5.3 maps with MAP_NORESERVE, so this is address space and VMAs, not RSS).
 * The alloc hook declines that grow instead.  sl_jemalloc_alloc() clears it
 * first; a host calling mallocx() itself may see one NULL too many after a
 * refusal, never a grow past the max.
 *
 * initial-exec like the core's stocks: no lazy TLS allocation inside a hook.
 */
struct je_tls {
	sl_jemalloc *a;
	uint64_t reserved;
	uint64_t refused;
	sl_jemalloc *refused_by;
};
static _Thread_local struct je_tls je_tls __attribute__((tls_model("initial-exec")));

static inline sl_jemalloc *from_hooks(extent_hooks_t *h)
{
	return (sl_jemalloc *)(void *)h;
}

/* Charge n bytes for pages the arena is about to commit; true = refused (jemalloc's error sense). */
static bool je_charge(sl_jemalloc *a, uint64_t n)
{
	struct je_tls *t = &je_tls;
	uint64_t take = 0;

	if (t->a == a) {
		take = t->reserved < n ? t->reserved : n;
		t->reserved -= take;
	}
	if (n > take && sl_charge(a->group, n - take, SL_NORECLAIM) != 0) {
		if (t->a == a) {
			t->reserved += take;
			t->refused = n;
		}
		t->refused_by = a;
		return true;
	}
	if (t->refused_by == a)
		t->refused_by = NULL;
	sl__fetch_add(&a->charged, n, SL_RELAXED);
	return false;
}

static void je_uncharge(sl_jemalloc *a, uint64_t n)
{
	sl__fetch_sub(&a->charged, n, SL_RELAXED);
	sl_uncharge(a->group, n);
}

static void *je_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t alignment, bool *zero,
		      bool *commit, unsigned arena_ind)
{
	sl_jemalloc *a = from_hooks(h);
	bool want_commit = *commit;
	bool committed = true; /* always map read-write: commit() relies on it */
	void *p;

	if (want_commit && je_charge(a, size))
		return NULL;
	if (!want_commit && je_tls.refused_by == a) {
		/* A grow of retained memory right after a refused commit (see je_tls). */
		je_tls.refused_by = NULL;
		return NULL;
	}
	p = a->dflt->alloc(a->dflt, new_addr, size, alignment, zero, &committed, arena_ind);
	if (p != NULL && !committed) {
		/* The default hooks commit when asked; if one ever did not, commit() could not work. */
		if (a->dflt->destroy != NULL)
			a->dflt->destroy(a->dflt, p, size, false, arena_ind);
		p = NULL;
	}
	if (p == NULL) {
		if (want_commit)
			je_uncharge(a, size);
		return NULL;
	}
	/* Not wanted committed: fresh and untouched, nothing is resident yet. */
	*commit = want_commit;
	return p;
}

static bool je_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned arena_ind)
{
	sl_jemalloc *a = from_hooks(h);

	/* With opt.retain (Linux's default) the default refuses: decommit follows. */
	if (a->dflt->dalloc == NULL || a->dflt->dalloc(a->dflt, addr, size, committed, arena_ind))
		return true;
	if (committed)
		je_uncharge(a, size);
	return false;
}

static void je_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned arena_ind)
{
	sl_jemalloc *a = from_hooks(h);

	if (a->dflt->destroy != NULL)
		a->dflt->destroy(a->dflt, addr, size, committed, arena_ind);
	if (committed)
		je_uncharge(a, size);
}

static bool je_commit(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length,
		      unsigned arena_ind)
{
	(void)addr, (void)size, (void)offset, (void)arena_ind;
	return je_charge(from_hooks(h), length);
}

static bool je_decommit(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length,
			unsigned arena_ind)
{
	sl_jemalloc *a = from_hooks(h);

	if (a->dflt->purge_forced == NULL ||
	    a->dflt->purge_forced(a->dflt, addr, size, offset, length, arena_ind))
		return true;
	je_uncharge(a, length);
	return false;
}

static bool je_purge_lazy(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length,
			  unsigned arena_ind)
{
	sl_jemalloc *a = from_hooks(h);

	return a->dflt->purge_lazy == NULL ||
	       a->dflt->purge_lazy(a->dflt, addr, size, offset, length, arena_ind);
}

static bool je_purge_forced(extent_hooks_t *h, void *addr, size_t size, size_t offset, size_t length,
			    unsigned arena_ind)
{
	sl_jemalloc *a = from_hooks(h);

	return a->dflt->purge_forced == NULL ||
	       a->dflt->purge_forced(a->dflt, addr, size, offset, length, arena_ind);
}

static bool je_split(extent_hooks_t *h, void *addr, size_t size, size_t size_a, size_t size_b,
		     bool committed, unsigned arena_ind)
{
	sl_jemalloc *a = from_hooks(h);

	return a->dflt->split == NULL ||
	       a->dflt->split(a->dflt, addr, size, size_a, size_b, committed, arena_ind);
}

static bool je_merge(extent_hooks_t *h, void *addr_a, size_t size_a, void *addr_b, size_t size_b,
		     bool committed, unsigned arena_ind)
{
	sl_jemalloc *a = from_hooks(h);

	return a->dflt->merge == NULL ||
	       a->dflt->merge(a->dflt, addr_a, size_a, addr_b, size_b, committed, arena_ind);
}

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
	a->hooks = (extent_hooks_t){
		.alloc = je_alloc,
		.dalloc = je_dalloc,
		.destroy = je_destroy,
		.commit = je_commit,
		.decommit = je_decommit,
		.purge_lazy = je_purge_lazy,
		.purge_forced = je_purge_forced,
		.split = je_split,
		.merge = je_merge,
	};

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
			je_uncharge(a, left);
	}
	/* -EBUSY only if called inside a reclaim callback: the arena is gone, call again. */
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
 * evict's claims stop being believed), the last word is sl_charge()'s with
 * reclaim allowed: its rule, OOM handler and oom event.
 *
 * Runs outside jemalloc's locks (between mallocx() calls), so reclaim may
 * call the host's evict.  Hooks that reclaim runs here (frees, purges) are
 * not this allocation's: they see no reservation.
 */
static void *alloc_at_max(sl_jemalloc *a, size_t size)
{
	unsigned idle = 0, claims = 0;
	uint64_t reserved = je_tls.reserved;
	void *p = NULL;

	while (je_tls.refused > je_tls.reserved) {
		uint64_t need = je_tls.refused - je_tls.reserved;

		reserved = je_tls.reserved;
		je_tls.a = NULL;
		if (sl_charge(a->group, need, SL_NORECLAIM) == 0) {
			reserved += need;
		} else if (idle < JE_IDLE_ROUNDS && claims < JE_CLAIM_ROUNDS) {
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
			if (sl_charge(a->group, need, 0) != 0) {
				/* That charge's reclaims may still have left
				 * room inside the arena: one last try. */
				je_tls = (struct je_tls){.a = a, .reserved = reserved};
				p = mallocx(size, a->flags);
				break;
			}
			reserved += need;
			idle = 0;
			claims = 0;
		}
		je_tls = (struct je_tls){.a = a, .reserved = reserved};
		p = mallocx(size, a->flags);
		if (p != NULL)
			break;
	}
	reserved = je_tls.reserved;
	je_tls.reserved = 0;
	if (reserved > 0)
		sl_uncharge(a->group, reserved);
	return p;
}

void *sl_jemalloc_alloc(sl_jemalloc *a, size_t size)
{
	struct je_tls saved = je_tls;
	void *p;

	if (a == NULL || !a->arena_live) {
		errno = EINVAL;
		return NULL;
	}
	if (size == 0)
		size = 1; /* mallocx(0) is undefined */

	je_tls = (struct je_tls){.a = a};
	p = mallocx(size, a->flags);
	if (p == NULL && je_tls.refused > 0)
		p = alloc_at_max(a, size);
	je_tls = saved;
	je_tls.refused_by = NULL;
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
