/* SPDX-License-Identifier: MIT */
/*
 * sl_refault() and SL_POLICY_REFAULT: refault reports are counted (stats,
 * every policy), and under REFAULT pass 1 takes from the over-limit group
 * with the fewest recent refaults, never below a soft limit or min, while
 * GUARANTEE on the same tree takes the largest excess first.
 *
 * Every group has a host that frees exactly what it is asked, as far as it
 * holds.  Each test runs with the default batch and with SL_BATCH_NONE (the
 * loop index _i): reclaim drains the scope's stocks first, so stocks must
 * not change who gives.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <softlimit/softlimit.h>

#include "helpers.h"

struct host {
	sl_group *g;
	uint64_t held;
};

static uint64_t host_free(sl_group *g, uint64_t target, void *ctx)
{
	struct host *h = ctx;
	uint64_t n = target < h->held ? target : h->held;

	(void)g;
	if (n && sl_uncharge(h->g, n) == 0)
		h->held -= n;
	return n;
}

static sl_tree *policy_tree(enum sl_policy policy, int i, uint64_t root_max)
{
	struct sl_tree_opts o;
	sl_tree *t = NULL;

	sl_tree_opts_init(&o);
	o.policy = policy;
	o.batch = test_batch(i);
	o.reclaim_batch = 0;
	o.root.max = root_max;
	ck_assert_int_eq(sl_tree_create(&o, &t), 0);
	return t;
}

static void host_new(struct host *h, sl_group *parent, const char *name, uint64_t soft, uint64_t min)
{
	struct sl_limits lim;
	struct sl_ops ops = { .reclaim = host_free };

	sl_limits_init(&lim);
	lim.soft = soft;
	lim.min = min;
	h->held = 0;
	ck_assert_int_eq(sl_group_create(parent, name, &lim, &ops, h, &h->g), 0);
}

static void host_charge(struct host *h, uint64_t n)
{
	ck_assert_int_eq(sl_charge(h->g, n, SL_NORECLAIM), 0);
	h->held += n;
}

/* Evict `evict` units of h, report `back` refaults, and charge the
 * evicted units again. */
static void history(struct host *h, uint64_t evict, uint64_t back)
{
	ck_assert_uint_eq(sl_reclaim(h->g, evict, 0), evict);
	if (back)
		ck_assert_int_eq(sl_refault(h->g, back), 0);
	host_charge(h, evict);
}

static void host_drop(struct host *h)
{
	if (h->held)
		ck_assert_int_eq(sl_uncharge(h->g, h->held), 0);
	h->held = 0;
	ck_assert_int_eq(sl_group_destroy(h->g), 0);
}

START_TEST(refault_reports_are_counted_and_bad_input_refused)
{
	sl_tree *t = policy_tree(SL_POLICY_GUARANTEE, _i, SL_UNLIMITED);
	struct host a, b;
	struct sl_stats st;

	host_new(&a, sl_tree_root(t), "a", 0, 0);
	host_new(&b, a.g, "b", 0, 0);
	ck_assert_int_eq(sl_refault(NULL, 1), -EINVAL);
	ck_assert_int_eq(sl_refault(b.g, 0), 0);
	ck_assert_uint_eq(stats_of(b.g).refaults, 0);
	ck_assert_int_eq(sl_refault(b.g, 100), 0);
	ck_assert_int_eq(sl_refault(b.g, 23), 0);
	ck_assert_uint_eq(stats_of(b.g).refaults, 123);
	/* A group's own reports only: the parent's count is its own. */
	ck_assert_uint_eq(stats_of(a.g).refaults, 0);
	/* Saturates instead of wrapping. */
	ck_assert_int_eq(sl_refault(a.g, UINT64_MAX), 0);
	ck_assert_int_eq(sl_refault(a.g, UINT64_MAX), 0);
	ck_assert_int_eq(sl_group_stats(a.g, &st), 0);
	ck_assert_uint_eq(st.refaults, UINT64_MAX);
	for (unsigned k = 0; k < sizeof(st.reserved) / sizeof(st.reserved[0]); k++)
		ck_assert_uint_eq(st.reserved[k], 0);
	/* Refaults move no usage. */
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	host_drop(&b);
	host_drop(&a);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(refault_tree_is_created_and_reports_its_policy)
{
	sl_tree *t = policy_tree(SL_POLICY_REFAULT, _i, 1000);

	ck_assert_int_eq(sl_tree_policy(t), SL_POLICY_REFAULT);
	sl_tree_destroy(t);
}
END_TEST

/*
 * a (soft 100) holds 300, b (soft 100) holds 200; a's last evictions came
 * back (50 refaults), b's never did.  A reclaim of 60 from the root: REFAULT takes
 * it from b, GUARANTEE from a (the larger excess).
 */
static void two_tenants(enum sl_policy policy, int i, uint64_t target, uint64_t want_a, uint64_t want_b)
{
	sl_tree *t = policy_tree(policy, i, 1000);
	struct host a, b;

	host_new(&a, sl_tree_root(t), "a", 100, 0);
	host_new(&b, sl_tree_root(t), "b", 100, 0);
	host_charge(&a, 300);
	host_charge(&b, 200);
	history(&a, 50, 50);
	history(&b, 50, 0);
	ck_assert_uint_eq(sl_reclaim(sl_tree_root(t), target, 0), target);
	ck_assert_uint_eq(usage_of(a.g), want_a);
	ck_assert_uint_eq(usage_of(b.g), want_b);
	ck_assert_uint_eq(a.held, want_a);
	ck_assert_uint_eq(b.held, want_b);
	host_drop(&a);
	host_drop(&b);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}

START_TEST(refault_takes_first_from_the_group_with_the_fewest_refaults)
{
	two_tenants(SL_POLICY_REFAULT, _i, 60, 300, 140);
}
END_TEST

START_TEST(guarantee_on_the_same_tree_takes_the_largest_excess)
{
	two_tenants(SL_POLICY_GUARANTEE, _i, 60, 240, 200);
}
END_TEST

START_TEST(refault_pass_one_stops_at_soft_limits_then_goes_on_to_the_next)
{
	/* b gives its whole excess (100), then a gives the rest of pass 1. */
	two_tenants(SL_POLICY_REFAULT, _i, 150, 250, 100);
}
END_TEST

START_TEST(refault_pass_two_keeps_min)
{
	sl_tree *t = policy_tree(SL_POLICY_REFAULT, _i, 1000);
	struct host a, b;

	host_new(&a, sl_tree_root(t), "a", 100, 80);
	host_new(&b, sl_tree_root(t), "b", 100, 80);
	host_charge(&a, 300);
	host_charge(&b, 200);
	/* Pass 1 frees 300 (both excesses), pass 2 the rest down to the mins. */
	ck_assert_uint_eq(sl_reclaim(sl_tree_root(t), 1000, 0), 500 - 160);
	ck_assert_uint_eq(usage_of(a.g), 80);
	ck_assert_uint_eq(usage_of(b.g), 80);
	host_drop(&a);
	host_drop(&b);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(refault_fewest_refaults_give_first_and_ties_go_to_the_larger_excess)
{
	sl_tree *t = policy_tree(SL_POLICY_REFAULT, _i, 2000);
	struct host a, b, c;

	host_new(&a, sl_tree_root(t), "a", 100, 0);
	host_new(&b, sl_tree_root(t), "b", 100, 0);
	host_new(&c, sl_tree_root(t), "c", 100, 0);
	host_charge(&a, 400);
	host_charge(&b, 150);
	host_charge(&c, 200);
	/* c has refaults; a and b none: a first (the larger excess). */
	ck_assert_int_eq(sl_refault(c.g, 5), 0);
	ck_assert_uint_eq(sl_reclaim(sl_tree_root(t), 30, 0), 30);
	ck_assert_uint_eq(usage_of(a.g), 370);
	ck_assert_uint_eq(usage_of(b.g), 150);
	ck_assert_uint_eq(usage_of(c.g), 200);
	/* a has more refaults than b now: b gives, c still last. */
	ck_assert_int_eq(sl_refault(a.g, 1), 0);
	ck_assert_uint_eq(sl_reclaim(sl_tree_root(t), 20, 0), 20);
	ck_assert_uint_eq(usage_of(a.g), 370);
	ck_assert_uint_eq(usage_of(b.g), 130);
	ck_assert_uint_eq(usage_of(c.g), 200);
	host_drop(&a);
	host_drop(&b);
	host_drop(&c);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/*
 * Old refaults fade: each window of reclaim as large as the tree halves
 * every count, so after ten windows a's 8 old refaults count for less than
 * b's one new one.  Without the halving, b would give first.
 */
START_TEST(refault_counts_halve_with_each_window_of_reclaim)
{
	sl_tree *t = policy_tree(SL_POLICY_REFAULT, _i, 2000);
	struct host a, b, z;
	int w;

	host_new(&a, sl_tree_root(t), "a", 100, 0);
	host_new(&b, sl_tree_root(t), "b", 100, 0);
	host_new(&z, sl_tree_root(t), "z", 0, 0);
	host_charge(&a, 300);
	host_charge(&b, 200);
	ck_assert_int_eq(sl_refault(a.g, 8), 0);
	for (w = 0; w < 10; w++) {
		host_charge(&z, 600);
		ck_assert_uint_eq(sl_reclaim(z.g, 600, 0), 600);
	}
	ck_assert_int_eq(sl_refault(b.g, 1), 0);
	ck_assert_uint_eq(sl_reclaim(sl_tree_root(t), 40, 0), 40);
	ck_assert_uint_eq(usage_of(a.g), 260);
	ck_assert_uint_eq(usage_of(b.g), 200);
	/* Totals do not fade. */
	ck_assert_uint_eq(stats_of(a.g).refaults, 8);
	host_drop(&a);
	host_drop(&b);
	host_drop(&z);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/* Subtree sums: a parent's rank is its subtree's, so the parent whose
 * children refault most gives last. */
START_TEST(refault_ranks_parents_by_their_subtrees)
{
	sl_tree *t = policy_tree(SL_POLICY_REFAULT, _i, 5000);
	struct sl_limits lim;
	sl_group *p1, *p2;
	struct host x, y;

	sl_limits_init(&lim);
	lim.soft = 100;
	p1 = group_new_lim(sl_tree_root(t), "p1", &lim);
	p2 = group_new_lim(sl_tree_root(t), "p2", &lim);
	host_new(&x, p1, "x", 0, 0);
	host_new(&y, p2, "y", 0, 0);
	host_charge(&x, 500);
	host_charge(&y, 300);
	history(&x, 100, 100);
	history(&y, 100, 10);
	ck_assert_uint_eq(sl_reclaim(sl_tree_root(t), 50, 0), 50);
	ck_assert_uint_eq(usage_of(p1), 500);
	ck_assert_uint_eq(usage_of(p2), 250);
	host_drop(&x);
	host_drop(&y);
	ck_assert_int_eq(sl_group_destroy(p1), 0);
	ck_assert_int_eq(sl_group_destroy(p2), 0);
	sl_tree_destroy(t);
}
END_TEST

/* A charge at max under REFAULT reclaims from the group with the fewest
 * refaults, like sl_reclaim(). */
START_TEST(refault_charge_at_max_takes_from_the_fewest_refaults)
{
	sl_tree *t = policy_tree(SL_POLICY_REFAULT, _i, 600);
	struct host a, b, c;

	host_new(&a, sl_tree_root(t), "a", 100, 0);
	host_new(&b, sl_tree_root(t), "b", 100, 0);
	host_new(&c, sl_tree_root(t), "c", 0, 0);
	host_charge(&a, 300);
	host_charge(&b, 200);
	history(&a, 50, 50);
	history(&b, 50, 0);
	/* c charges at max: c's own charges first (none), then pass 1: b. */
	ck_assert_int_eq(sl_charge(c.g, 150, 0), 0);
	c.held = 150;
	ck_assert_uint_eq(usage_of(a.g), 300);
	ck_assert_uint_le(usage_of(b.g), 150);
	ck_assert_uint_le(usage_of(sl_tree_root(t)) + stocked_of(sl_tree_root(t)), 600);
	host_drop(&a);
	host_drop(&b);
	host_drop(&c);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("refault");
	TCase *tc = tcase_create("refault");

	tcase_add_loop_test(tc, refault_reports_are_counted_and_bad_input_refused, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, refault_tree_is_created_and_reports_its_policy, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, refault_takes_first_from_the_group_with_the_fewest_refaults, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, guarantee_on_the_same_tree_takes_the_largest_excess, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, refault_pass_one_stops_at_soft_limits_then_goes_on_to_the_next, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, refault_pass_two_keeps_min, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, refault_fewest_refaults_give_first_and_ties_go_to_the_larger_excess, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, refault_counts_halve_with_each_window_of_reclaim, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, refault_ranks_parents_by_their_subtrees, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, refault_charge_at_max_takes_from_the_fewest_refaults, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
