/* SPDX-License-Identifier: MIT */
/*
 * The jemalloc adapter (softlimit/jemalloc.h): an arena's growth stops at its group's
 * max with a clean NULL, purging gives pages back, the group's usage is
 * jemalloc's own count of committed pages, many threads share an arena, and
 * reclaim from the tree purges the arena and calls the host's evict.
 *
 * Most tests run under both the default batch and SL_BATCH_NONE: the loop
 * index _i picks the batch (test_batch()).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "helpers.h"

#include <softlimit/jemalloc.h>

#define KiB ((uint64_t)1024)
#define MiB (1024 * KiB)
#define BLOCK (64 * KiB)
/* A 64 KiB block's extent: jemalloc pads large allocations by a page (opt.cache_oblivious). */
#define BLOCK_EXTENT (BLOCK + 4 * KiB)

static sl_jemalloc *adapter_new(sl_group *parent, const char *name, uint64_t max,
				const struct sl_jemalloc_ops *ops, void *ctx)
{
	struct sl_limits lim;
	sl_jemalloc *a = NULL;

	sl_limits_init(&lim);
	lim.max = max;
	ck_assert_int_eq(sl_jemalloc_create(parent, name, &lim, ops, ctx, &a), 0);
	ck_assert_ptr_nonnull(a);
	return a;
}

static struct sl_jemalloc_stats je_stats_of(sl_jemalloc *a)
{
	struct sl_jemalloc_stats s;

	ck_assert_int_eq(sl_jemalloc_stats(a, &s), 0);
	return s;
}

/* With nothing in flight the hooks' charge is what jemalloc counts committed, and the group's usage. */
static void assert_charge_is_jemallocs(sl_jemalloc *a, const char *what)
{
	struct sl_jemalloc_stats s = je_stats_of(a);
	uint64_t committed = s.active + s.dirty + s.muzzy;
	uint64_t usage = usage_of(sl_jemalloc_group(a));

	ck_assert_msg(s.charged == committed,
		      "%s: charged %" PRIu64 ", jemalloc's active %" PRIu64 " + dirty %" PRIu64
		      " + muzzy %" PRIu64 " = %" PRIu64,
		      what, s.charged, s.active, s.dirty, s.muzzy, committed);
	ck_assert_msg(usage == s.charged, "%s: group usage %" PRIu64 ", charged %" PRIu64, what, usage,
		      s.charged);
}

/* ---- the hard limit ---- */

START_TEST(arena_growth_stops_at_the_groups_max_with_a_clean_null)
{
	const uint64_t max = 4 * MiB;
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "tenant", max, NULL, NULL);
	sl_group *g = sl_jemalloc_group(a);
	void *p[256];
	size_t n = 0;
	struct sl_stats s;

	for (;;) {
		ck_assert_uint_lt(n, sizeof(p) / sizeof(p[0]));
		errno = 0;
		p[n] = sl_jemalloc_alloc(a, BLOCK);
		s = stats_of(g);
		ck_assert_msg(s.usage + s.stocked <= max, "usage %" PRIu64 " + stocked %" PRIu64 " past max",
			      s.usage, s.stocked);
		if (p[n] == NULL)
			break;
		memset(p[n], 0xa5, BLOCK); /* the pages are really there */
		n++;
	}
	ck_assert_int_eq(errno, ENOMEM);
	/* The NULL came because one more extent did not fit, not earlier. */
	ck_assert_msg(s.usage + s.stocked + BLOCK_EXTENT > max,
		      "NULL at usage %" PRIu64 " + stocked %" PRIu64 ", max %" PRIu64, s.usage,
		      s.stocked, max);
	ck_assert_uint_ge(n * BLOCK_EXTENT, max - BLOCK_EXTENT);
	/* One allocation failed, so one charge failed for good (issue
	 * Hardening, defect 4: the hooks' refused tries counted too). */
	ck_assert_uint_eq(s.events_oom, 1);
	ck_assert_uint_ge(s.events_max, 1);
	assert_charge_is_jemallocs(a, "at max");

	/* Freeing one block makes room for exactly that block again. */
	sl_jemalloc_free(a, p[0]);
	p[0] = sl_jemalloc_alloc(a, BLOCK);
	ck_assert_ptr_nonnull(p[0]);

	for (size_t i = 0; i < n; i++)
		sl_jemalloc_free(a, p[i]);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	assert_empty(sl_tree_root(t), "root after destroy");
	sl_tree_destroy(t);
}
END_TEST

START_TEST(refused_allocations_leave_no_virtual_memory_behind)
{
	const uint64_t max = 2 * MiB;
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "tenant", max, NULL, NULL);
	void *p[64];
	size_t n = 0;
	uint64_t retained;

	while (n < 64 && (p[n] = sl_jemalloc_alloc(a, BLOCK)) != NULL)
		n++;
	ck_assert_uint_lt(n, 64);
	retained = je_stats_of(a).retained;
	/* jemalloc grows its retained memory when a commit is refused, unless
	 * the hooks decline.  Each refusal is an allocation that fails for
	 * good, after rounds of reclaim that yield the CPU: on a loaded machine
	 * hundreds of them took the suite past ctest's limit, and a few dozen
	 * would show the growth as well. */
	for (int i = 0; i < 64; i++)
		ck_assert_ptr_null(sl_jemalloc_alloc(a, BLOCK + (size_t)(i % 8) * 4 * KiB));
	ck_assert_uint_eq(je_stats_of(a).retained, retained);
	for (int i = 0; i < 16; i++) /* sizes past any retained extent: at most one grow each */
		ck_assert_ptr_null(sl_jemalloc_alloc(a, 3 * MiB));
	ck_assert_uint_le(je_stats_of(a).retained, retained + 8 * MiB);
	for (size_t i = 0; i < n; i++)
		sl_jemalloc_free(a, p[i]);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(small_allocations_stop_at_max_too)
{
	const uint64_t max = 512 * KiB;
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "tenant", max, NULL, NULL);
	sl_group *g = sl_jemalloc_group(a);
	void **p = calloc(1u << 16, sizeof(*p));
	size_t n = 0;

	ck_assert_ptr_nonnull(p);
	while (n < (1u << 16) && (p[n] = sl_jemalloc_alloc(a, 100)) != NULL)
		n++;
	ck_assert_uint_lt(n, 1u << 16);
	ck_assert_uint_le(usage_of(g) + stocked_of(g), max);
	/* 100 bytes are served from 112-byte regions in slabs of 7 pages. */
	ck_assert_uint_ge(n * 112, max - 28 * KiB - 7 * 4 * KiB);
	assert_charge_is_jemallocs(a, "small at max");
	for (size_t i = 0; i < n; i++)
		sl_jemalloc_free(a, p[i]);
	free(p);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(an_ancestors_max_stops_the_arena_as_well)
{
	sl_tree *t = tree_new(test_batch(_i), 2 * MiB);
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "tenant", SL_UNLIMITED, NULL, NULL);
	void *p[64];
	size_t n = 0;

	while (n < 64 && (p[n] = sl_jemalloc_alloc(a, BLOCK)) != NULL)
		n++;
	ck_assert_uint_lt(n, 64);
	ck_assert_uint_le(usage_of(sl_tree_root(t)) + stocked_of(sl_tree_root(t)), 2 * MiB);
	for (size_t i = 0; i < n; i++)
		sl_jemalloc_free(a, p[i]);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	sl_tree_destroy(t);
}
END_TEST

/* ---- purging and jemalloc's own count ---- */

START_TEST(purging_uncharges_every_page_freed)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "tenant", SL_UNLIMITED, NULL, NULL);
	sl_group *g = sl_jemalloc_group(a);
	void *p[32];
	struct sl_jemalloc_stats s;
	uint64_t full;

	for (size_t i = 0; i < 32; i++) {
		p[i] = sl_jemalloc_alloc(a, BLOCK);
		ck_assert_ptr_nonnull(p[i]);
	}
	full = usage_of(g);
	ck_assert_uint_eq(full, 32 * BLOCK_EXTENT);
	for (size_t i = 0; i < 32; i++)
		sl_jemalloc_free(a, p[i]);
	/* Freed pages are dirty: still committed, still charged, until purged. */
	assert_charge_is_jemallocs(a, "freed");
	ck_assert_int_eq(sl_jemalloc_purge(a), 0);
	s = je_stats_of(a);
	ck_assert_uint_eq(s.charged, 0);
	ck_assert_uint_eq(s.active + s.dirty + s.muzzy, 0);
	/* What jemalloc keeps after a purge (with opt.retain, Linux's default) is
	 * retained virtual memory: s.retained, not charged. */
	ck_assert_uint_eq(usage_of(g), 0);

	/* Retained memory is committed, and charged, again when reused. */
	p[0] = sl_jemalloc_alloc(a, BLOCK);
	ck_assert_ptr_nonnull(p[0]);
	ck_assert_uint_eq(usage_of(g), BLOCK_EXTENT);
	sl_jemalloc_free(a, p[0]);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	assert_empty(sl_tree_root(t), "root");
	sl_tree_destroy(t);
}
END_TEST

START_TEST(usage_is_jemallocs_committed_pages_through_a_random_mix)
{
	static const size_t sizes[] = {8, 24, 100, 700, 3000, 9000, 20000, BLOCK, 200000, 3 * MiB};
	enum { LIVE = 400, STEPS = 6000 };
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "tenant", 48 * MiB, NULL, NULL);
	void *p[LIVE] = {0};
	uint64_t rng = 0x9e3779b97f4a7c15u + (uint64_t)_i;
	unsigned nulls = 0;

	for (int step = 1; step <= STEPS; step++) {
		size_t k = (size_t)rng_range(&rng, 0, LIVE - 1);

		if (p[k] != NULL) {
			sl_jemalloc_free(a, p[k]);
			p[k] = NULL;
		} else {
			size_t size = sizes[rng_range(&rng, 0, sizeof(sizes) / sizeof(sizes[0]) - 1)];

			p[k] = sl_jemalloc_alloc(a, size);
			nulls += p[k] == NULL;
			if (p[k] != NULL)
				ck_assert_uint_ge(sl_jemalloc_usable_size(p[k]), size);
		}
		if (step % 500 == 0)
			assert_charge_is_jemallocs(a, "random mix");
		if (step % 2000 == 0)
			ck_assert_int_eq(sl_jemalloc_purge(a), 0);
	}
	(void)nulls; /* some 3 MiB allocations may fail at the 48 MiB max: that is the point */
	for (size_t k = 0; k < LIVE; k++)
		sl_jemalloc_free(a, p[k]);
	assert_charge_is_jemallocs(a, "all freed");
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	assert_empty(sl_tree_root(t), "root");
	sl_tree_destroy(t);
}
END_TEST

/* ---- many threads in one arena ---- */

/* Each thread runs for its seconds and at least THREAD_ALLOCS allocations,
 * and on until some thread's allocation met the max, so that a slow or
 * loaded machine (where threads may not overlap) still checks as much. */
enum { NTHREADS = 4, THREAD_LIVE = 64, THREAD_ALLOCS = 400 };

struct churn {
	sl_jemalloc *a;
	uint64_t max;
	uint64_t seed;
	double seconds;
	unsigned long allocs, nulls;
	atomic_ulong *nulls_all; /* every thread's NULLs so far */
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	sl_group *g = sl_jemalloc_group(c->a);
	void *p[THREAD_LIVE] = {0};
	uint64_t rng = c->seed;
	double end = now_seconds() + c->seconds;

	while (c->allocs < THREAD_ALLOCS || run_more(end, atomic_load(c->nulls_all) > 0)) {
		for (int j = 0; j < 200; j++) {
			size_t k = (size_t)rng_range(&rng, 0, THREAD_LIVE - 1);

			if (p[k] != NULL) {
				T_CHECK(((unsigned char *)p[k])[0] == (unsigned char)k, "block %zu was overwritten", k);
				sl_jemalloc_free(c->a, p[k]);
				p[k] = NULL;
			} else {
				size_t size = (size_t)rng_range(&rng, 1, 160 * KiB);

				p[k] = sl_jemalloc_alloc(c->a, size);
				c->allocs++;
				if (p[k] == NULL && !c->nulls++)
					atomic_fetch_add(c->nulls_all, 1);
				else if (p[k] != NULL)
					memset(p[k], (int)k, size < 256 ? size : 256);
			}
		}
		struct sl_stats s;

		T_CHECK(sl_group_stats(g, &s) == 0, "stats");
		T_CHECK(s.usage <= c->max, "usage %" PRIu64 " past max %" PRIu64, s.usage, c->max);
	}
	for (size_t k = 0; k < THREAD_LIVE; k++)
		sl_jemalloc_free(c->a, p[k]);
	return NULL;
}

START_TEST(threads_sharing_an_arena_never_pass_max_and_leave_it_empty)
{
	const uint64_t max = 6 * MiB;
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "shared", max, NULL, NULL);
	struct churn c[NTHREADS];
	pthread_t th[NTHREADS];
	unsigned long allocs = 0, nulls = 0;
	atomic_ulong nulls_all = 0;

	thread_failure_reset();
	for (int i = 0; i < NTHREADS; i++) {
		c[i] = (struct churn){.a = a, .max = max, .seed = 77 + (uint64_t)i * 1000003u,
				      .seconds = test_seconds("SL_TEST_JEMALLOC_SECONDS", 1.0),
				      .nulls_all = &nulls_all};
		start_thread(&th[i], churn_thread, &c[i]);
	}
	for (int i = 0; i < NTHREADS; i++) {
		join_thread(th[i]);
		allocs += c[i].allocs;
		nulls += c[i].nulls;
	}
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_gt(allocs, 1000);
	ck_assert_uint_gt(nulls, 0); /* 64 blocks of up to 160 KiB per thread do not fit in 6 MiB */
	assert_charge_is_jemallocs(a, "after the threads");
	ck_assert_int_eq(sl_jemalloc_purge(a), 0);
	ck_assert_uint_eq(je_stats_of(a).charged, 0);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	assert_empty(sl_tree_root(t), "root");
	sl_tree_destroy(t);
}
END_TEST

/* ---- reclaim: purge, then the host's evict ---- */

/* A FIFO cache of blocks in one arena, as a host would keep. */
struct cache {
	sl_jemalloc *a;
	void *blocks[1024];
	size_t head, tail;
	unsigned evict_calls;
	uint64_t evict_asked;
};

static uint64_t cache_evict(sl_jemalloc *a, uint64_t target, void *ctx)
{
	struct cache *c = ctx;
	uint64_t freed = 0;

	ck_assert_ptr_eq(c->a, a);
	c->evict_calls++;
	c->evict_asked += target;
	while (freed < target && c->head != c->tail) {
		void *p = c->blocks[c->head++ % 1024];

		freed += sl_jemalloc_usable_size(p);
		sl_jemalloc_free(a, p);
	}
	return freed;
}

static void cache_put(struct cache *c, void *p)
{
	ck_assert_uint_lt(c->tail - c->head, 1024);
	c->blocks[c->tail++ % 1024] = p;
}

static void cache_clear(struct cache *c)
{
	while (c->head != c->tail)
		sl_jemalloc_free(c->a, c->blocks[c->head++ % 1024]);
}

START_TEST(a_second_group_at_the_shared_max_reclaims_the_arena_through_evict)
{
	const uint64_t budget = 8 * MiB;
	const struct sl_jemalloc_ops ops = {.evict = cache_evict};
	sl_tree *t = tree_new(test_batch(_i), budget);
	sl_group *root = sl_tree_root(t);
	struct cache c = {0};
	sl_jemalloc *a = adapter_new(root, "cache", SL_UNLIMITED, &ops, &c);
	sl_group *other = group_new(root, "other", SL_UNLIMITED);
	uint64_t before;

	c.a = a;
	ck_assert_ptr_eq(sl_jemalloc_ctx(a), &c);
	ck_assert_ptr_eq(sl_group_ctx(sl_jemalloc_group(a)), a);
	for (int i = 0; i < 96; i++) { /* 96 * 68 KiB = 6.4 MiB */
		void *p = sl_jemalloc_alloc(a, BLOCK);

		ck_assert_ptr_nonnull(p);
		cache_put(&c, p);
	}
	before = usage_of(sl_jemalloc_group(a));
	ck_assert_uint_eq(c.evict_calls, 0);

	/* 4 MiB more does not fit in 8 MiB: the tree reclaims the arena's group. */
	ck_assert_int_eq(sl_charge(other, 4 * MiB, 0), 0);
	ck_assert_uint_ge(c.evict_calls, 1);
	ck_assert_uint_le(usage_of(sl_jemalloc_group(a)), before - (before + 4 * MiB - budget));
	ck_assert_uint_le(usage_of(root) + stocked_of(root), budget);
	ck_assert_uint_gt(stats_of(sl_jemalloc_group(a)).reclaimed, 0);
	assert_charge_is_jemallocs(a, "after reclaim");

	ck_assert_int_eq(sl_uncharge(other, 4 * MiB), 0);
	cache_clear(&c);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(freed_dirty_pages_are_purged_before_evict_is_asked)
{
	const uint64_t budget = 4 * MiB;
	const struct sl_jemalloc_ops ops = {.evict = cache_evict};
	sl_tree *t = tree_new(test_batch(_i), budget);
	sl_group *root = sl_tree_root(t);
	struct cache c = {0};
	sl_jemalloc *a = adapter_new(root, "cache", SL_UNLIMITED, &ops, &c);
	sl_group *other = group_new(root, "other", SL_UNLIMITED);
	void *p[40];

	c.a = a;
	for (int i = 0; i < 40; i++) { /* 40 * 68 KiB = 2.7 MiB, then all dirty */
		p[i] = sl_jemalloc_alloc(a, BLOCK);
		ck_assert_ptr_nonnull(p[i]);
	}
	for (int i = 0; i < 40; i++)
		sl_jemalloc_free(a, p[i]);
	ck_assert_uint_gt(usage_of(sl_jemalloc_group(a)), 2 * MiB);

	ck_assert_int_eq(sl_charge(other, 3 * MiB, 0), 0);
	ck_assert_uint_eq(c.evict_calls, 0); /* the purge alone made room */
	ck_assert_uint_le(usage_of(root) + stocked_of(root), budget);

	ck_assert_int_eq(sl_uncharge(other, 3 * MiB), 0);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(an_allocation_at_max_gets_room_from_its_own_groups_reclaim)
{
	const uint64_t max = 2 * MiB;
	const struct sl_jemalloc_ops ops = {.evict = cache_evict};
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	struct cache c = {0};
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "cache", max, &ops, &c);
	sl_group *g = sl_jemalloc_group(a);

	c.a = a;
	/* Ten times the max: each allocation that does not fit evicts the oldest blocks. */
	for (int i = 0; i < 300; i++) {
		void *p = sl_jemalloc_alloc(a, BLOCK);

		ck_assert_msg(p != NULL, "allocation %d failed though the cache could evict", i);
		cache_put(&c, p);
		ck_assert_uint_le(usage_of(g) + stocked_of(g), max);
	}
	ck_assert_uint_ge(c.evict_calls, 1);
	ck_assert_uint_gt(c.head, 0);
	/* Regression (issue Hardening, defect 4): allocations at max that
	 * then succeed are no oom; the hooks' refused charges counted one
	 * each. */
	ck_assert_uint_ge(stats_of(g).events_max, 1);
	ck_assert_msg(stats_of(g).events_oom == 0, "events_oom %" PRIu64 " though no allocation failed",
		      stats_of(g).events_oom);
	ck_assert_uint_le(c.tail - c.head, max / BLOCK);
	assert_charge_is_jemallocs(a, "after the churn");
	cache_clear(&c);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	sl_tree_destroy(t);
}
END_TEST

/* Put blocks of BLOCK into the cache (each charges BLOCK_EXTENT). */
static void cache_fill(struct cache *c, int blocks)
{
	for (int i = 0; i < blocks; i++) {
		void *p = sl_jemalloc_alloc(c->a, BLOCK);

		ck_assert_ptr_nonnull(p);
		cache_put(c, p);
	}
}

/* An allocation that cannot fit under at's max fails at once: no
 * eviction, and what the cache held is there. */
static void assert_refused_without_eviction(struct cache *c, sl_group *at, size_t size, const char *what)
{
	size_t held = c->tail - c->head;
	uint64_t usage = usage_of(sl_jemalloc_group(c->a));
	struct sl_stats before = stats_of(sl_jemalloc_group(c->a));
	uint64_t ooms = stats_of(at).events_oom;

	errno = 0;
	ck_assert_ptr_null(sl_jemalloc_alloc(c->a, size));
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_msg(c->evict_calls == 0, "%s: evict called %u times for %" PRIu64 " bytes", what,
		      c->evict_calls, c->evict_asked);
	ck_assert_uint_eq(c->tail - c->head, held);
	/* Nor purged, nor reclaimed through the group's callback. */
	ck_assert_uint_eq(usage_of(sl_jemalloc_group(c->a)), usage);
	ck_assert_uint_eq(stats_of(sl_jemalloc_group(c->a)).reclaimed, before.reclaimed);
	/* It failed for good, once, at the max in the way. */
	ck_assert_uint_eq(stats_of(at).events_oom, ooms + 1);
}

/* Regression: a 16 MiB allocation under an 8 MiB max evicted the tenant's
 * items through evict, round after round, and then failed. */
START_TEST(an_allocation_larger_than_max_fails_at_once_without_evicting)
{
	const struct sl_jemalloc_ops ops = {.evict = cache_evict};
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	struct cache c = {0};

	c.a = adapter_new(sl_tree_root(t), "cache", 8 * MiB, &ops, &c);
	cache_fill(&c, 64);
	assert_refused_without_eviction(&c, sl_jemalloc_group(c.a), 16 * MiB, "16 MiB under an 8 MiB max");
	/* An allocation that fits once evict makes room still gets it. */
	void *p = sl_jemalloc_alloc(c.a, 6 * MiB);

	ck_assert_ptr_nonnull(p);
	ck_assert_uint_ge(c.evict_calls, 1);
	sl_jemalloc_free(c.a, p);
	cache_clear(&c);
	ck_assert_int_eq(sl_jemalloc_destroy(c.a), 0);
	sl_tree_destroy(t);
}
END_TEST

/* The same when the max in the way is an ancestor's, and what it leaves
 * beside a sibling that holds its charges (no callback) is too small even
 * with every item of this arena evicted. */
START_TEST(an_allocation_too_large_for_an_ancestor_fails_at_once_without_evicting)
{
	const struct sl_jemalloc_ops ops = {.evict = cache_evict};
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *parent = group_new(sl_tree_root(t), "parent", 16 * MiB);
	sl_group *other = group_new(parent, "other", SL_UNLIMITED);
	struct cache c = {0};

	c.a = adapter_new(parent, "cache", SL_UNLIMITED, &ops, &c);
	cache_fill(&c, 64);
	/* 10 MiB that no reclaim may take: 6 MiB left for the arena. */
	ck_assert_int_eq(sl_charge(other, 10 * MiB, 0), 0);
	assert_refused_without_eviction(&c, parent, 8 * MiB, "8 MiB in the 6 MiB a parent leaves");
	assert_refused_without_eviction(&c, parent, 32 * MiB, "32 MiB under a 16 MiB parent");
	/* 5 MiB fits once evict makes room. */
	void *p = sl_jemalloc_alloc(c.a, 5 * MiB);

	ck_assert_ptr_nonnull(p);
	ck_assert_uint_ge(c.evict_calls, 1);
	sl_jemalloc_free(c.a, p);
	ck_assert_int_eq(sl_uncharge(other, 10 * MiB), 0);
	cache_clear(&c);
	ck_assert_int_eq(sl_jemalloc_destroy(c.a), 0);
	sl_tree_destroy(t);
}
END_TEST

/*
 * A cache shared by threads, as slcache keeps one per tenant: a FIFO of
 * blocks under a mutex, whose evict frees the oldest.  Allocation happens
 * outside the mutex, so the evict that an allocation at max runs can take it.
 */
/* More threads than cores: allocations at max overlap, each taking the
 * room or the slab regions another's reclaim just made. */
enum { SHARED_SLOTS = 1 << 14, FILL_THREADS = 8 };

struct shared_cache {
	pthread_mutex_t lock;
	sl_jemalloc *a;
	void *blocks[SHARED_SLOTS];
	size_t head, tail;
};

static uint64_t shared_evict(sl_jemalloc *a, uint64_t target, void *ctx)
{
	struct shared_cache *c = ctx;
	uint64_t freed = 0;

	pthread_mutex_lock(&c->lock);
	while (freed < target && c->head != c->tail) {
		void *p = c->blocks[c->head++ % SHARED_SLOTS];

		freed += sl_jemalloc_usable_size(p);
		sl_jemalloc_free(a, p);
	}
	pthread_mutex_unlock(&c->lock);
	return freed;
}

/* Keeps p; a full ring drops its oldest block, as a cache out of slots would. */
static void shared_put(struct shared_cache *c, void *p)
{
	void *old = NULL;

	pthread_mutex_lock(&c->lock);
	if (c->tail - c->head == SHARED_SLOTS)
		old = c->blocks[c->head++ % SHARED_SLOTS];
	c->blocks[c->tail++ % SHARED_SLOTS] = p;
	pthread_mutex_unlock(&c->lock);
	if (old != NULL)
		sl_jemalloc_free(c->a, old);
}

struct filler {
	struct shared_cache *c;
	uint64_t max, seed;
	unsigned allocs;
	unsigned long nulls;
};

static void *filler_thread(void *arg)
{
	struct filler *f = arg;
	sl_group *g = sl_jemalloc_group(f->c->a);
	uint64_t rng = f->seed;

	for (unsigned i = 0; i < f->allocs; i++) {
		/* Items of a few small size classes, as a cache's are: the room
		 * evict makes is mostly free regions in slabs that other items
		 * keep, not pages. */
		size_t size = (size_t)rng_range(&rng, 512, 2 * KiB);
		void *p = sl_jemalloc_alloc(f->c->a, size);

		if (p == NULL) {
			f->nulls++;
			continue;
		}
		memset(p, 0x5a, size < 64 ? size : 64);
		shared_put(f->c, p);
		if (i % 64 == 0) {
			struct sl_stats s;

			T_CHECK(sl_group_stats(g, &s) == 0, "stats");
			T_CHECK(s.usage <= f->max, "usage %" PRIu64 " past max %" PRIu64, s.usage, f->max);
		}
	}
	return NULL;
}

START_TEST(threads_filling_a_full_reclaimable_arena_never_get_null)
{
	const uint64_t max = 512 * KiB;
	const struct sl_jemalloc_ops ops = {.evict = shared_evict};
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	struct shared_cache *c = calloc(1, sizeof(*c));
	struct filler f[FILL_THREADS];
	pthread_t th[FILL_THREADS];
	unsigned long nulls = 0;

	ck_assert_ptr_nonnull(c);
	pthread_mutex_init(&c->lock, NULL);
	c->a = adapter_new(sl_tree_root(t), "full", max, &ops, c);
	thread_failure_reset();
	/* Every thread alone writes several times the max: the arena is full
	 * from early on and each further allocation needs evict's room.  What
	 * is in flight (8 items, a slab each at most) is small against the
	 * max; everything else is in the cache, so room can always be made. */
	for (int i = 0; i < FILL_THREADS; i++) {
		f[i] = (struct filler){.c = c, .max = max, .seed = 4242 + (uint64_t)i * 7919u,
				       .allocs = 20000};
		start_thread(&th[i], filler_thread, &f[i]);
	}
	for (int i = 0; i < FILL_THREADS; i++) {
		join_thread(th[i]);
		nulls += f[i].nulls;
	}
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_msg(nulls == 0, "%lu allocations got NULL though evict could always free", nulls);
	ck_assert_msg(stats_of(sl_jemalloc_group(c->a)).events_oom == 0, "events_oom %" PRIu64 " though no allocation failed",
		      stats_of(sl_jemalloc_group(c->a)).events_oom);
	ck_assert_uint_gt(stats_of(sl_jemalloc_group(c->a)).reclaimed, 0);
	assert_charge_is_jemallocs(c->a, "after the threads");

	while (c->head != c->tail)
		sl_jemalloc_free(c->a, c->blocks[c->head++ % SHARED_SLOTS]);
	ck_assert_int_eq(sl_jemalloc_destroy(c->a), 0);
	assert_empty(sl_tree_root(t), "root");
	pthread_mutex_destroy(&c->lock);
	free(c);
	sl_tree_destroy(t);
}
END_TEST

/* ---- lifetime and bad input ---- */

START_TEST(destroy_is_ebusy_while_allocations_remain)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "tenant", SL_UNLIMITED, NULL, NULL);
	sl_jemalloc *b;
	sl_group *found = NULL;
	void *p = sl_jemalloc_alloc(a, 100);

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sl_jemalloc_destroy(a), -EBUSY);
	ck_assert_int_eq(sl_group_lookup(sl_tree_root(t), "tenant", &found), 0);
	/* The group's name is taken while the adapter lives. */
	ck_assert_int_eq(sl_jemalloc_create(sl_tree_root(t), "tenant", NULL, NULL, NULL, &b), -EEXIST);
	sl_jemalloc_free(a, p);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	ck_assert_int_eq(sl_group_lookup(sl_tree_root(t), "tenant", &found), -ENOENT);
	ck_assert_int_eq(sl_jemalloc_destroy(NULL), 0);
	sl_tree_destroy(t);
}
END_TEST

/* A held group (a lease steering it) outlives the destroy; a later call,
 * once released, finishes it. */
START_TEST(destroy_of_a_held_adapter_finishes_once_released)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_jemalloc *a = adapter_new(sl_tree_root(t), "tenant", SL_UNLIMITED, NULL, NULL);
	sl_group *found = NULL;
	void *p = sl_jemalloc_alloc(a, 5000);

	ck_assert_ptr_nonnull(p);
	sl_jemalloc_free(a, p);
	ck_assert_int_eq(sl_group_hold(sl_jemalloc_group(a)), 0);
	ck_assert_int_eq(sl_jemalloc_destroy(a), -EBUSY);
	ck_assert_int_eq(sl_group_lookup(sl_tree_root(t), "tenant", &found), 0);
	ck_assert_ptr_eq(found, sl_jemalloc_group(a));
	ck_assert_int_eq(sl_group_unhold(sl_jemalloc_group(a)), 0);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	ck_assert_int_eq(sl_group_lookup(sl_tree_root(t), "tenant", &found), -ENOENT);
	assert_empty(sl_tree_root(t), "root");
	sl_tree_destroy(t);
}
END_TEST

START_TEST(arenas_are_recycled_across_create_and_destroy)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);

	/* More than a run of tests would need if destroy leaked arenas (jemalloc has 4095). */
	for (int i = 0; i < 200; i++) {
		sl_jemalloc *a = adapter_new(sl_tree_root(t), "tenant", SL_UNLIMITED, NULL, NULL);
		void *p = sl_jemalloc_alloc(a, 5000);

		ck_assert_ptr_nonnull(p);
		sl_jemalloc_free(a, p);
		ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	}
	assert_empty(sl_tree_root(t), "root");
	sl_tree_destroy(t);
}
END_TEST

START_TEST(bad_arguments_are_rejected_and_change_nothing)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_jemalloc *a = NULL;
	struct sl_jemalloc_stats s;

	ck_assert_int_eq(sl_jemalloc_create(sl_tree_root(t), "x", NULL, NULL, NULL, NULL), -EINVAL);
	ck_assert_int_eq(sl_jemalloc_create(NULL, "x", NULL, NULL, NULL, &a), -EINVAL);
	ck_assert_ptr_null(a);
	ck_assert_int_eq(sl_jemalloc_create(sl_tree_root(t), "a/b", NULL, NULL, NULL, &a), -EINVAL);
	ck_assert_ptr_null(a);
	errno = 0;
	ck_assert_ptr_null(sl_jemalloc_alloc(NULL, 1));
	ck_assert_int_eq(errno, EINVAL);
	sl_jemalloc_free(NULL, NULL);
	ck_assert_uint_eq(sl_jemalloc_usable_size(NULL), 0);
	ck_assert_ptr_null(sl_jemalloc_group(NULL));
	ck_assert_ptr_null(sl_jemalloc_ctx(NULL));
	ck_assert_uint_eq(sl_jemalloc_arena(NULL), 0);
	ck_assert_int_eq(sl_jemalloc_purge(NULL), -EINVAL);
	ck_assert_int_eq(sl_jemalloc_stats(NULL, &s), -EINVAL);

	a = adapter_new(sl_tree_root(t), "a", SL_UNLIMITED, NULL, NULL);
	ck_assert_uint_ne(sl_jemalloc_arena(a), 0);
	ck_assert_int_eq(sl_jemalloc_stats(a, NULL), -EINVAL);
	ck_assert_int_eq(sl_jemalloc_destroy(a), 0);
	assert_empty(sl_tree_root(t), "root");
	sl_tree_destroy(t);
}
END_TEST

static Suite *jemalloc_suite(void)
{
	Suite *s = suite_create("jemalloc");
	TCase *tc;

	tc = tcase_create("max");
	tcase_add_loop_test(tc, arena_growth_stops_at_the_groups_max_with_a_clean_null, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, refused_allocations_leave_no_virtual_memory_behind, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, small_allocations_stop_at_max_too, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, an_ancestors_max_stops_the_arena_as_well, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("accounting");
	tcase_add_loop_test(tc, purging_uncharges_every_page_freed, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, usage_is_jemallocs_committed_pages_through_a_random_mix, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_add_loop_test(tc, threads_sharing_an_arena_never_pass_max_and_leave_it_empty, 0,
			    SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("reclaim");
	tcase_add_loop_test(tc, a_second_group_at_the_shared_max_reclaims_the_arena_through_evict, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, freed_dirty_pages_are_purged_before_evict_is_asked, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, an_allocation_at_max_gets_room_from_its_own_groups_reclaim, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, threads_filling_a_full_reclaimable_arena_never_get_null, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, an_allocation_larger_than_max_fails_at_once_without_evicting, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, an_allocation_too_large_for_an_ancestor_fails_at_once_without_evicting, 0,
			    SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("lifetime");
	tcase_add_loop_test(tc, destroy_is_ebusy_while_allocations_remain, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, destroy_of_a_held_adapter_finishes_once_released, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, arenas_are_recycled_across_create_and_destroy, 0, SL_TEST_NBATCH);
	tcase_add_test(tc, bad_arguments_are_rejected_and_change_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(jemalloc_suite());
}
