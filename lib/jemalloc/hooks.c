/* SPDX-License-Identifier: MIT */
/*
 * The jemalloc adapter's extent hooks: they charge a group for the pages
 * its arena commits (the setup and the allocation path are sl_jemalloc.c).
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
#include <errno.h>

#include "adapter.h"

_Thread_local struct sl__je_tls sl__je_tls __attribute__((tls_model("initial-exec")));

static inline sl_jemalloc *from_hooks(extent_hooks_t *h)
{
	return (sl_jemalloc *)(void *)h;
}

/* Charge n bytes for pages the arena is about to commit; true = refused
 * (jemalloc's error sense).  A try: the allocation goes on at max
 * (sl_jemalloc.c), and only it knows if it failed for good. */
static bool je_charge(sl_jemalloc *a, uint64_t n)
{
	struct sl__je_tls *t = &sl__je_tls;
	uint64_t take = 0;

	if (t->a == a) {
		take = t->reserved < n ? t->reserved : n;
		t->reserved -= take;
	}
	if (n > take && sl_charge(a->group, n - take, SL_NORECLAIM | SL_TRY) != 0) {
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

void sl__je_uncharge(sl_jemalloc *a, uint64_t n)
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
	if (!want_commit && sl__je_tls.refused_by == a) {
		/* A grow of retained memory right after a refused commit (see struct sl__je_tls). */
		sl__je_tls.refused_by = NULL;
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
			sl__je_uncharge(a, size);
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
		sl__je_uncharge(a, size);
	return false;
}

static void je_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed, unsigned arena_ind)
{
	sl_jemalloc *a = from_hooks(h);

	if (a->dflt->destroy != NULL)
		a->dflt->destroy(a->dflt, addr, size, committed, arena_ind);
	if (committed)
		sl__je_uncharge(a, size);
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
	sl__je_uncharge(a, length);
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

void sl__je_hooks_init(sl_jemalloc *a)
{
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
}
