/* SPDX-License-Identifier: MIT */
/*
 * The three soft-limit policies on the seed scenarios: who gives memory
 * back, and how much, when reclaim runs from the root (docs/reclaim.md); the
 * numbers are the README's tables.
 *
 * Every scenario is a small tree whose groups all have a reclaim callback
 * (a "host" that frees what it is asked, as far as it holds).  GUARANTEE
 * and GATEKEEPER are pinned to the unit; PROTECTION, which reclaims in
 * rounds like the kernel, within 10% of the expected value (the kernel's
 * own selftest allows as much).  Each test runs with the default batch and
 * with SL_BATCH_NONE (the loop index _i): stocks must not change outcomes,
 * since reclaim drains the scope's stocks first.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <softlimit/softlimit.h>

#define NBATCH 2
#define MAXN 16
#define MIB ((uint64_t)1 << 20)

static uint64_t batch_of(int i)
{
	return i == 0 ? 0 /* SL_BATCH_DEFAULT */ : SL_BATCH_NONE;
}

/* ---- the host: a group's ctx holds what the host keeps charged to it ---- */

struct host {
	uint64_t held;
	unsigned calls;
};

static uint64_t host_reclaim(sl_group *g, uint64_t target, void *ctx)
{
	struct host *h = ctx;
	uint64_t freed = target < h->held ? target : h->held;

	h->calls++;
	h->held -= freed;
	if (freed)
		ck_assert_int_eq(sl_uncharge(g, freed), 0);
	return freed;
}

/* One group of a scenario: parent is an index into the same table, -1 for the root. */
struct spec {
	const char *name;
	int parent;
	uint64_t min, soft, usage;
	int no_callback;
};

struct world {
	sl_tree *t;
	sl_group *root;
	size_t n;
	sl_group *g[MAXN];
	struct host h[MAXN];
};

/* Build the scenario with amounts multiplied by unit, charging each group's usage to it. */
static void world_build(struct world *w, enum sl_policy policy, uint64_t batch, const struct spec *sp,
			size_t n, uint64_t unit)
{
	const struct sl_ops ops = { .reclaim = host_reclaim };
	struct sl_tree_opts opts;
	size_t i;

	ck_assert_uint_le(n, MAXN);
	memset(w, 0, sizeof(*w));
	sl_tree_opts_init(&opts);
	opts.policy = policy;
	opts.batch = batch;
	ck_assert_int_eq(sl_tree_create(&opts, &w->t), 0);
	w->root = sl_tree_root(w->t);
	w->n = n;
	for (i = 0; i < n; i++) {
		struct sl_limits lim;
		sl_group *parent;

		ck_assert_int_lt(sp[i].parent, (int)i);
		parent = sp[i].parent < 0 ? w->root : w->g[sp[i].parent];
		sl_limits_init(&lim);
		lim.min = sp[i].min * unit;
		lim.soft = sp[i].soft * unit;
		ck_assert_int_eq(sl_group_create(parent, sp[i].name, &lim, sp[i].no_callback ? NULL : &ops,
						 &w->h[i], &w->g[i]),
				 0);
	}
	for (i = 0; i < n; i++) {
		if (!sp[i].usage)
			continue;
		ck_assert_int_eq(sl_charge(w->g[i], sp[i].usage * unit, 0), 0);
		w->h[i].held = sp[i].usage * unit;
	}
}

static void world_free(struct world *w)
{
	size_t i;

	ck_assert_int_eq(sl_tree_check(w->t), 0);
	for (i = 0; i < w->n; i++)
		if (w->h[i].held)
			ck_assert_int_eq(sl_uncharge(w->g[i], w->h[i].held), 0);
	ck_assert_int_eq(sl_tree_check(w->t), 0);
	sl_tree_destroy(w->t);
}

static struct sl_stats stats_of(sl_group *g)
{
	struct sl_stats s;

	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(sl_group_stats(g, &s), 0);
	return s;
}

static uint64_t usage_of(sl_group *g)
{
	return stats_of(g).usage;
}

static uint64_t low_events(sl_group *g)
{
	return stats_of(g).events_low;
}

/* Reclaim target from the root; everything the scenarios ask for is there to take. */
static void reclaim_root(struct world *w, uint64_t target)
{
	uint64_t before = usage_of(w->root), got;

	got = sl_reclaim(w->root, target, 0);
	ck_assert_uint_eq(got, target);
	ck_assert_uint_eq(usage_of(w->root), before - target);
}

/* Group i's usage is exactly want units, and the host agrees. */
static void assert_usage(struct world *w, size_t i, uint64_t want)
{
	uint64_t u = usage_of(w->g[i]);

	ck_assert_msg(u == want, "%s: usage %" PRIu64 ", want %" PRIu64, sl_group_name(w->g[i]), u, want);
}

/* Group i's usage is within pct percent of want. */
static void assert_usage_near(struct world *w, size_t i, uint64_t want, unsigned pct)
{
	uint64_t u = usage_of(w->g[i]);
	uint64_t tol = want / 100 * pct;

	ck_assert_msg(u + tol >= want && u <= want + tol,
		      "%s: usage %" PRIu64 ", want %" PRIu64 " +-%u%%", sl_group_name(w->g[i]), u, want,
		      pct);
}

/* ---- (a) a parent over its soft limit, one child over, one within ---- */

static const struct spec seed_a[] = {
	{ "P", -1, 0, 100, 0, 0 },
	{ "A", 0, 0, 30, 90, 0 },
	{ "B", 0, 0, 70, 60, 0 },
};
enum { A_P, A_A, A_B };

START_TEST(guarantee_takes_the_child_over_its_soft_limit_and_spares_the_one_within)
{
	struct world w;

	world_build(&w, SL_POLICY_GUARANTEE, batch_of(_i), seed_a, 3, 1);
	reclaim_root(&w, 50);
	assert_usage(&w, A_A, 40);
	assert_usage(&w, A_B, 60);
	assert_usage(&w, A_P, 100);
	ck_assert_uint_eq(w.h[A_B].calls, 0);
	ck_assert_uint_eq(low_events(w.g[A_A]), 0);
	ck_assert_uint_eq(low_events(w.g[A_B]), 0);
	ck_assert_uint_eq(low_events(w.g[A_P]), 0);
	world_free(&w);
}
END_TEST

START_TEST(gatekeeper_opens_the_parent_and_cuts_both_children_by_usage)
{
	struct world w;

	world_build(&w, SL_POLICY_GATEKEEPER, batch_of(_i), seed_a, 3, 1);
	reclaim_root(&w, 50);
	assert_usage(&w, A_A, 60);
	assert_usage(&w, A_B, 40);
	/* B was reclaimed while within its own soft limit. */
	ck_assert_uint_eq(low_events(w.g[A_B]), 1);
	ck_assert_uint_eq(low_events(w.g[A_A]), 0);
	world_free(&w);
}
END_TEST

START_TEST(protection_takes_only_from_the_child_above_its_effective_low)
{
	struct world w;

	world_build(&w, SL_POLICY_PROTECTION, batch_of(_i), seed_a, 3, MIB);
	reclaim_root(&w, 50 * MIB);
	assert_usage_near(&w, A_A, 40 * MIB, 10);
	assert_usage_near(&w, A_B, 60 * MIB, 10);
	ck_assert_uint_eq(low_events(w.g[A_A]), 0);
	ck_assert_uint_eq(low_events(w.g[A_B]), 0);
	world_free(&w);
}
END_TEST

/* ---- (b) a misconfigured parent: over its soft limit, every child within ---- */

static const struct spec seed_b[] = {
	{ "P", -1, 0, 100, 0, 0 },
	{ "A", 0, 0, 90, 90, 0 },
	{ "B", 0, 0, 60, 60, 0 },
};
enum { B_P, B_A, B_B };

START_TEST(guarantee_shares_a_misconfigured_parent_by_usage)
{
	struct world w;

	world_build(&w, SL_POLICY_GUARANTEE, batch_of(_i), seed_b, 3, 1);
	reclaim_root(&w, 50);
	assert_usage(&w, B_A, 60);
	assert_usage(&w, B_B, 40);
	assert_usage(&w, B_P, 100);
	world_free(&w);
}
END_TEST

START_TEST(gatekeeper_shares_a_misconfigured_parent_by_usage)
{
	struct world w;

	world_build(&w, SL_POLICY_GATEKEEPER, batch_of(_i), seed_b, 3, 1);
	reclaim_root(&w, 50);
	assert_usage(&w, B_A, 60);
	assert_usage(&w, B_B, 40);
	ck_assert_uint_eq(low_events(w.g[B_A]), 1);
	ck_assert_uint_eq(low_events(w.g[B_B]), 1);
	world_free(&w);
}
END_TEST

START_TEST(protection_scales_the_childrens_claims_down_to_the_parents)
{
	struct world w;

	world_build(&w, SL_POLICY_PROTECTION, batch_of(_i), seed_b, 3, MIB);
	reclaim_root(&w, 50 * MIB);
	assert_usage_near(&w, B_A, 60 * MIB, 10);
	assert_usage_near(&w, B_B, 40 * MIB, 10);
	world_free(&w);
}
END_TEST

/* ---- (c) the cgroup v2 documentation's tree (Documentation/admin-guide/cgroup-v2.rst) ---- */

static const struct spec seed_c[] = {
	{ "A", -1, 0, 2048, 0, 0 },
	{ "B", 0, 0, 3072, 2048, 0 },
	{ "C", 0, 0, 1024, 2048, 0 },
	{ "D", 0, 0, 0, 2048, 0 },
	{ "E", 0, 0, 10240, 0, 0 },
};
enum { C_A, C_B, C_C, C_D, C_E };

START_TEST(guarantee_on_the_cgroup_v2_tree_takes_unclaimed_then_excess_then_shares)
{
	struct world w;

	world_build(&w, SL_POLICY_GUARANTEE, batch_of(_i), seed_c, 5, MIB);
	reclaim_root(&w, 4096 * MIB);
	/* Pass 1: D's 2048 (no claim) and C's excess 1024; pass 2: the last
	 * 1024 from B (2048) and C (1024) in proportion, 683 and 341. */
	assert_usage(&w, C_A, 2048 * MIB);
	assert_usage(&w, C_B, 2048 * MIB - (1024 * MIB * 2 + 2) / 3);
	assert_usage(&w, C_C, 1024 * MIB - (1024 * MIB + 1) / 3);
	ck_assert_uint_eq(usage_of(w.g[C_B]) + usage_of(w.g[C_C]), 2048 * MIB);
	assert_usage(&w, C_D, 0);
	assert_usage(&w, C_E, 0);
	/* B and C lost memory in pass 2 while within their soft limits. */
	ck_assert_uint_eq(low_events(w.g[C_B]), 1);
	ck_assert_uint_eq(low_events(w.g[C_C]), 1);
	ck_assert_uint_eq(low_events(w.g[C_D]), 0);
	world_free(&w);
}
END_TEST

START_TEST(guarantee_on_the_cgroup_v2_tree_in_small_units_rounds_by_largest_remainder)
{
	struct world w;

	world_build(&w, SL_POLICY_GUARANTEE, batch_of(_i), seed_c, 5, 1);
	reclaim_root(&w, 4096);
	assert_usage(&w, C_A, 2048);
	assert_usage(&w, C_B, 1365);
	assert_usage(&w, C_C, 683);
	assert_usage(&w, C_D, 0);
	assert_usage(&w, C_E, 0);
	world_free(&w);
}
END_TEST

START_TEST(gatekeeper_on_the_cgroup_v2_tree_cuts_every_child_by_usage)
{
	struct world w;

	world_build(&w, SL_POLICY_GATEKEEPER, batch_of(_i), seed_c, 5, 1);
	reclaim_root(&w, 4096);
	assert_usage(&w, C_A, 2048);
	assert_usage(&w, C_B, 683);
	assert_usage(&w, C_C, 683);
	assert_usage(&w, C_D, 682);
	assert_usage(&w, C_E, 0);
	ck_assert_uint_eq(low_events(w.g[C_B]), 1);
	ck_assert_uint_eq(low_events(w.g[C_C]), 0);
	ck_assert_uint_eq(low_events(w.g[C_D]), 0);
	world_free(&w);
}
END_TEST

START_TEST(protection_on_the_cgroup_v2_tree_shares_the_parents_low_by_protected_usage)
{
	struct world w;
	struct sl_stats b, c, d, e;

	world_build(&w, SL_POLICY_PROTECTION, batch_of(_i), seed_c, 5, MIB);
	reclaim_root(&w, 4096 * MIB);
	assert_usage_near(&w, C_B, 1174 * MIB, 10);
	assert_usage_near(&w, C_C, 874 * MIB, 10);
	assert_usage(&w, C_D, 0);
	assert_usage(&w, C_E, 0);
	ck_assert_uint_eq(usage_of(w.g[C_A]), 2048 * MIB);

	/* The effective protection the reclaim computed is reported. */
	b = stats_of(w.g[C_B]);
	c = stats_of(w.g[C_C]);
	d = stats_of(w.g[C_D]);
	e = stats_of(w.g[C_E]);
	ck_assert_uint_le(b.esoft + c.esoft + d.esoft + e.esoft, 2048 * MIB);
	ck_assert_uint_le(b.esoft, b.usage);
	ck_assert_uint_le(c.esoft, c.limits.soft);
	ck_assert_uint_gt(b.esoft, 0);
	ck_assert_uint_eq(d.esoft, 0);
	ck_assert_uint_eq(e.esoft, 0);
	ck_assert_uint_eq(stats_of(w.g[C_A]).esoft, 2048 * MIB);
	world_free(&w);
}
END_TEST

/* ---- (d) the kernel selftest's tree (tools/testing/selftests/cgroup/test_memcontrol.c) ---- */

static const struct spec seed_d[] = {
	{ "A", -1, 0, 50, 0, 0 },
	{ "C0", 0, 0, 75, 50, 0 },
	{ "C1", 0, 0, 25, 50, 0 },
	{ "C2", 0, 0, 0, 50, 0 },
	{ "C3", 0, 0, 500, 0, 0 },
};
enum { D_A, D_C0, D_C1, D_C2, D_C3 };

/* a within one unit of b. */
static void assert_within_one(uint64_t a, uint64_t b, const char *what)
{
	ck_assert_msg(a + 1 >= b && a <= b + 1, "%s: %" PRIu64 ", want %" PRIu64 " +-1", what, a, b);
}

START_TEST(protection_on_the_kernel_selftest_tree_matches_the_kernels_expectation)
{
	struct world w;

	world_build(&w, SL_POLICY_PROTECTION, batch_of(_i), seed_d, 5, MIB);
	reclaim_root(&w, 100 * MIB);
	assert_usage_near(&w, D_C0, 29 * MIB, 10);
	assert_usage_near(&w, D_C1, 21 * MIB, 10);
	assert_usage(&w, D_C2, 0);
	assert_usage(&w, D_C3, 0);
	assert_usage(&w, D_A, 50 * MIB);
	world_free(&w);
}
END_TEST

START_TEST(guarantee_on_the_kernel_selftest_tree_keeps_c0_twice_c1)
{
	struct world w;

	world_build(&w, SL_POLICY_GUARANTEE, batch_of(_i), seed_d, 5, MIB);
	reclaim_root(&w, 100 * MIB);
	/* Pass 1: C2's 50M and C1's excess 25M; pass 2: 25M from C0 (50M) and C1 (25M). */
	assert_within_one(usage_of(w.g[D_C0]), 50 * MIB * 2 / 3, "C0");
	assert_within_one(usage_of(w.g[D_C1]), 50 * MIB / 3, "C1");
	ck_assert_uint_eq(usage_of(w.g[D_C0]) + usage_of(w.g[D_C1]), 50 * MIB);
	assert_usage(&w, D_C2, 0);
	assert_usage(&w, D_C3, 0);
	ck_assert_uint_eq(low_events(w.g[D_C0]), 1);
	ck_assert_uint_eq(low_events(w.g[D_C1]), 1);
	ck_assert_uint_eq(low_events(w.g[D_C2]), 0);
	world_free(&w);
}
END_TEST

START_TEST(gatekeeper_on_the_kernel_selftest_tree_cuts_the_three_children_equally)
{
	struct world w;

	world_build(&w, SL_POLICY_GATEKEEPER, batch_of(_i), seed_d, 5, MIB);
	reclaim_root(&w, 100 * MIB);
	assert_within_one(usage_of(w.g[D_C0]), 50 * MIB / 3, "C0");
	assert_within_one(usage_of(w.g[D_C1]), 50 * MIB / 3, "C1");
	assert_within_one(usage_of(w.g[D_C2]), 50 * MIB / 3, "C2");
	assert_usage(&w, D_A, 50 * MIB);
	assert_usage(&w, D_C3, 0);
	ck_assert_uint_eq(low_events(w.g[D_C0]), 1);
	ck_assert_uint_eq(low_events(w.g[D_C1]), 0);
	ck_assert_uint_eq(low_events(w.g[D_C2]), 0);
	world_free(&w);
}
END_TEST

/* ---- rules every policy keeps ---- */

/* Loop tests over every policy and batch: _i = policy * NBATCH + batch index. */
#define NPOLICY 3
static enum sl_policy policy_of(int i)
{
	return (enum sl_policy)(i / NBATCH);
}

START_TEST(min_is_never_reclaimed_even_when_pass_2_runs_out_of_everything_else)
{
	static const struct spec sp[] = {
		{ "M", -1, 40, 0, 40, 0 },   /* min = usage, no soft claim */
		{ "S", -1, 30, 100, 30, 0 }, /* min = usage, within soft */
		{ "P", -1, 25, 10, 0, 0 }, /* over its soft; its min covers Y's */
		{ "X", 2, 0, 0, 70, 0 },
		{ "Y", 2, 25, 50, 25, 0 }, /* min = usage below a parent over its soft */
	};
	struct world w;
	uint64_t got;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 5, 1);
	got = sl_reclaim(w.root, 1000, 0);
	ck_assert_uint_eq(got, 70);
	assert_usage(&w, 0, 40);
	assert_usage(&w, 1, 30);
	assert_usage(&w, 3, 0);
	assert_usage(&w, 4, 25);
	ck_assert_uint_eq(w.h[0].held, 40);
	ck_assert_uint_eq(w.h[1].held, 30);
	ck_assert_uint_eq(w.h[4].held, 25);
	/* Nothing more to take: a second reclaim frees nothing. */
	ck_assert_uint_eq(sl_reclaim(w.root, 1000, 0), 0);
	world_free(&w);
}
END_TEST

START_TEST(an_ancestors_min_is_never_reclaimed_from_its_children)
{
	/* GUARANTEE and GATEKEEPER measure min at every level below the scope. */
	static const struct spec sp[] = {
		{ "P", -1, 50, 0, 0, 0 },
		{ "X", 0, 0, 0, 30, 0 },
		{ "Y", 0, 0, 0, 30, 0 },
		{ "Z", -1, 0, 0, 20, 0 },
	};
	struct world w;

	world_build(&w, (enum sl_policy)(_i / NBATCH), batch_of(_i % NBATCH), sp, 4, 1);
	ck_assert_uint_eq(sl_reclaim(w.root, 1000, 0), 30);
	assert_usage(&w, 0, 50);
	assert_usage(&w, 3, 0);
	world_free(&w);
}
END_TEST

START_TEST(a_group_without_a_soft_limit_gives_its_own_charges_first)
{
	static const struct spec sp[] = {
		{ "free", -1, 0, 0, 30, 0 },    /* no claim */
		{ "kept", -1, 0, 100, 100, 0 }, /* within its soft limit */
		{ "free2", -1, 0, 0, 20, 0 },   /* no claim */
	};
	struct world w;
	size_t i;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 3, 1);
	reclaim_root(&w, 50);
	assert_usage(&w, 0, 0);
	assert_usage(&w, 1, 100);
	assert_usage(&w, 2, 0);
	ck_assert_uint_eq(w.h[1].calls, 0);
	for (i = 0; i < 3; i++)
		ck_assert_uint_eq(low_events(w.g[i]), 0);
	world_free(&w);
}
END_TEST

START_TEST(a_soft_limit_of_0_opens_no_gate_and_is_never_misconfigured)
{
	/* GUARANTEE and GATEKEEPER: P is "over" a soft limit of 0, but that is
	 * no claim, so only P's own charges are eligible, not Q's. */
	static const struct spec sp[] = {
		{ "P", -1, 0, 0, 20, 0 },
		{ "Q", 0, 0, 200, 150, 0 },
		{ "R", -1, 0, 100, 130, 0 },
	};
	struct world w;

	world_build(&w, (enum sl_policy)(_i / NBATCH), batch_of(_i % NBATCH), sp, 3, 1);
	reclaim_root(&w, 50);
	assert_usage(&w, 0, 150);
	assert_usage(&w, 1, 150);
	assert_usage(&w, 2, 100);
	ck_assert_uint_eq(w.h[1].calls, 0);
	ck_assert_uint_eq(low_events(w.g[1]), 0);
	world_free(&w);
}
END_TEST

START_TEST(a_group_without_a_callback_holds_its_charges)
{
	static const struct spec sp[] = {
		{ "holds", -1, 0, 0, 80, 1 },
		{ "gives", -1, 0, 0, 30, 0 },
		{ "P", -1, 0, 10, 40, 1 },
		{ "Q", 2, 0, 0, 20, 0 },
	};
	struct world w;
	uint64_t got;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 4, 1);
	got = sl_reclaim(w.root, 1000, 0);
	ck_assert_uint_eq(got, 50);
	assert_usage(&w, 0, 80);
	assert_usage(&w, 1, 0);
	assert_usage(&w, 2, 40);
	assert_usage(&w, 3, 0);
	ck_assert_uint_eq(stats_of(w.g[0]).reclaimed, 0);
	ck_assert_uint_eq(stats_of(w.g[1]).reclaimed, 30);
	ck_assert_uint_eq(stats_of(w.g[3]).reclaimed, 20);
	ck_assert_uint_eq(stats_of(w.root).usage, 120);
	world_free(&w);
}
END_TEST

START_TEST(the_scopes_own_soft_limit_does_not_shield_it_from_its_own_reclaim)
{
	static const struct spec sp[] = {
		{ "S", -1, 0, 1000, 60, 0 },
		{ "X", 0, 0, 500, 40, 0 },
	};
	struct world w;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 2, 1);
	ck_assert_uint_eq(sl_reclaim(w.g[0], 100, 0), 100);
	assert_usage(&w, 0, 0);
	world_free(&w);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc;

	tc = tcase_create("parent over, one child over, one within");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, guarantee_takes_the_child_over_its_soft_limit_and_spares_the_one_within, 0,
			    NBATCH);
	tcase_add_loop_test(tc, gatekeeper_opens_the_parent_and_cuts_both_children_by_usage, 0, NBATCH);
	tcase_add_loop_test(tc, protection_takes_only_from_the_child_above_its_effective_low, 0, NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("misconfigured parent");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, guarantee_shares_a_misconfigured_parent_by_usage, 0, NBATCH);
	tcase_add_loop_test(tc, gatekeeper_shares_a_misconfigured_parent_by_usage, 0, NBATCH);
	tcase_add_loop_test(tc, protection_scales_the_childrens_claims_down_to_the_parents, 0, NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("cgroup v2 documentation tree");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, guarantee_on_the_cgroup_v2_tree_takes_unclaimed_then_excess_then_shares, 0,
			    NBATCH);
	tcase_add_loop_test(tc, guarantee_on_the_cgroup_v2_tree_in_small_units_rounds_by_largest_remainder,
			    0, NBATCH);
	tcase_add_loop_test(tc, gatekeeper_on_the_cgroup_v2_tree_cuts_every_child_by_usage, 0, NBATCH);
	tcase_add_loop_test(tc, protection_on_the_cgroup_v2_tree_shares_the_parents_low_by_protected_usage,
			    0, NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("kernel selftest tree");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, protection_on_the_kernel_selftest_tree_matches_the_kernels_expectation, 0,
			    NBATCH);
	tcase_add_loop_test(tc, guarantee_on_the_kernel_selftest_tree_keeps_c0_twice_c1, 0, NBATCH);
	tcase_add_loop_test(tc, gatekeeper_on_the_kernel_selftest_tree_cuts_the_three_children_equally, 0,
			    NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("every policy");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, min_is_never_reclaimed_even_when_pass_2_runs_out_of_everything_else, 0,
			    NPOLICY * NBATCH);
	tcase_add_loop_test(tc, an_ancestors_min_is_never_reclaimed_from_its_children, 0,
			    2 * NBATCH /* GUARANTEE, GATEKEEPER */);
	tcase_add_loop_test(tc, a_group_without_a_soft_limit_gives_its_own_charges_first, 0,
			    NPOLICY * NBATCH);
	tcase_add_loop_test(tc, a_soft_limit_of_0_opens_no_gate_and_is_never_misconfigured, 0,
			    2 * NBATCH /* GUARANTEE, GATEKEEPER */);
	tcase_add_loop_test(tc, a_group_without_a_callback_holds_its_charges, 0, NPOLICY * NBATCH);
	tcase_add_loop_test(tc, the_scopes_own_soft_limit_does_not_shield_it_from_its_own_reclaim, 0,
			    NPOLICY * NBATCH);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(policy_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
