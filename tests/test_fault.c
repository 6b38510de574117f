/* SPDX-License-Identifier: MIT */
/*
 * Fault injection: the library's own allocations fail on demand, and every
 * public call then fails cleanly with -ENOMEM, or goes on without the
 * memory where its contract says so (stocks, reclaim's scratch), leaving the
 * tree exactly as it was.  Links the static library to reach the test hook.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <inttypes.h>
#include <string.h>

#include <softlimit/softlimit.h>

/* Hidden in the shared library, reachable from the archive. */
#include "testing.h"

static int count_groups(sl_group *g, unsigned depth, void *arg)
{
	(void)g;
	(void)depth;
	++*(int *)arg;
	return 0;
}

static int groups_in(sl_tree *t)
{
	int n = 0;

	sl_group_walk(sl_tree_root(t), count_groups, &n);
	return n;
}

static uint64_t usage_of(sl_group *g)
{
	struct sl_stats st;

	ck_assert_int_eq(sl_group_stats(g, &st), 0);
	return st.usage;
}

START_TEST(tree_create_fails_cleanly_at_every_allocation)
{
	long n;

	for (n = 0; n < 8; n++) {
		sl_tree *t = (sl_tree *)0x1;
		int rc;

		sl__fault_inject(n, false);
		rc = sl_tree_create(NULL, &t);
		sl__fault_inject(-1, false);
		if (rc == 0) {
			ck_assert_int_eq(sl_tree_check(t), 0);
			sl_tree_destroy(t);
			break;
		}
		ck_assert_int_eq(rc, -ENOMEM);
		/* The caller's pointer is untouched on failure. */
		ck_assert_ptr_eq(t, (sl_tree *)0x1);
	}
	ck_assert_int_lt(n, 8);
}
END_TEST

START_TEST(group_create_fails_with_enomem_and_leaves_the_tree_as_it_was)
{
	sl_tree *t;
	sl_group *a, *b = NULL;
	int before;

	ck_assert_int_eq(sl_tree_create(NULL, &t), 0);
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "a", NULL, NULL, NULL, &a), 0);
	before = groups_in(t);
	sl__fault_inject(0, true);
	ck_assert_int_eq(sl_group_create(a, "b", NULL, NULL, NULL, &b), -ENOMEM);
	sl__fault_inject(-1, false);
	ck_assert_ptr_null(b);
	ck_assert_int_eq(groups_in(t), before);
	ck_assert_int_eq(sl_group_lookup(sl_tree_root(t), "a/b", &b), -ENOENT);
	ck_assert_int_eq(sl_tree_check(t), 0);
	/* The name is free: the same create works once memory is back. */
	ck_assert_int_eq(sl_group_create(a, "b", NULL, NULL, NULL, &b), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(many_groups_still_work_when_the_name_index_cannot_grow)
{
	sl_tree *t;
	sl_group *g;
	char name[32];
	int i;

	ck_assert_int_eq(sl_tree_create(NULL, &t), 0);
	for (i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "g%d", i);
		/* Group allocations succeed; the index's growth fails. */
		sl__fault_inject(1, false);
		ck_assert_int_eq(sl_group_create(sl_tree_root(t), name, NULL, NULL, NULL, &g), 0);
		sl__fault_inject(-1, false);
	}
	for (i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "g%d", i);
		ck_assert_int_eq(sl_group_lookup(sl_tree_root(t), name, &g), 0);
	}
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "g7", NULL, NULL, NULL, &g), -EEXIST);
	ck_assert_int_eq(sl_tree_check(t), 0);
	sl_tree_destroy(t);
}
END_TEST

static void *charge_without_stock_memory(void *arg)
{
	sl_group *g = arg;
	int i;

	/* This thread's first charge wants a stock: it cannot have one. */
	sl__fault_inject(0, true);
	for (i = 0; i < 100; i++)
		if (sl_charge(g, 10, 0) != 0)
			return (void *)1;
	sl__fault_inject(-1, false);
	for (i = 0; i < 50; i++)
		if (sl_uncharge(g, 10) != 0)
			return (void *)1;
	return NULL;
}

START_TEST(charges_stay_exact_when_a_stock_cannot_be_allocated)
{
	struct sl_stats st;
	sl_tree *t;
	sl_group *g;
	pthread_t th;
	void *ret;

	ck_assert_int_eq(sl_tree_create(NULL, &t), 0);
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "g", NULL, NULL, NULL, &g), 0);
	/* A fresh thread: its first charge is the one that allocates a stock. */
	ck_assert_int_eq(pthread_create(&th, NULL, charge_without_stock_memory, g), 0);
	ck_assert_int_eq(pthread_join(th, &ret), 0);
	ck_assert_ptr_null(ret);
	ck_assert_int_eq(sl_group_stats(g, &st), 0);
	ck_assert_uint_eq(st.usage, 500);
	ck_assert_uint_eq(st.stocked, 0);
	ck_assert_int_eq(sl_uncharge(g, 500), 0);
	ck_assert_int_eq(sl_tree_check(t), 0);
	sl_tree_destroy(t);
}
END_TEST

struct host {
	uint64_t held;
};

static uint64_t evict(sl_group *g, uint64_t target, void *ctx)
{
	struct host *h = ctx;
	uint64_t f = target < h->held ? target : h->held;

	h->held -= f;
	sl_uncharge(g, f);
	return f;
}

START_TEST(reclaim_without_scratch_memory_frees_no_more_than_asked_and_stays_exact)
{
	static const enum sl_policy policies[] = { SL_POLICY_GUARANTEE, SL_POLICY_GATEKEEPER,
						   SL_POLICY_PROTECTION };
	struct sl_ops ops = { .reclaim = evict };
	unsigned p;

	for (p = 0; p < 3; p++) {
		struct sl_tree_opts o;
		struct host h[4] = { { 0 } };
		sl_group *g[4];
		struct sl_limits l;
		sl_tree *t;
		uint64_t freed, total = 0;
		int i;
		long n;

		sl_tree_opts_init(&o);
		o.policy = policies[p];
		o.batch = SL_BATCH_NONE;
		ck_assert_int_eq(sl_tree_create(&o, &t), 0);
		for (i = 0; i < 4; i++) {
			char name[8];

			sl_limits_init(&l);
			l.soft = (uint64_t)i * 100;
			snprintf(name, sizeof(name), "t%d", i);
			ck_assert_int_eq(sl_group_create(sl_tree_root(t), name, &l, &ops, &h[i], &g[i]), 0);
			h[i].held = 300;
			ck_assert_int_eq(sl_charge(g[i], 300, 0), 0);
		}
		/* Fail from the first, second, ... allocation reclaim makes. */
		for (n = 0; n < 6; n++) {
			sl__fault_inject(n, true);
			freed = sl_reclaim(sl_tree_root(t), 50, 0);
			sl__fault_inject(-1, false);
			ck_assert_uint_le(freed, 50);
			total += freed;
		}
		for (i = 0; i < 4; i++)
			ck_assert_uint_eq(usage_of(g[i]), h[i].held);
		ck_assert_uint_eq(1200 - usage_of(sl_tree_root(t)), total);
		ck_assert_int_eq(sl_tree_check(t), 0);
		sl_tree_destroy(t);
	}
}
END_TEST

/*
 * Regression: without memory for the split's order, the remainder went to
 * parts by position, weight or not, so a group at its min lost units (under
 * PROTECTION, min 5 at usage 5 ended at 0).  Parts b, c, d of weight 1 each
 * share a step of 2: every part rounds to 0, two units remain, and the
 * first positions are the scope and a, which may give nothing.
 */
START_TEST(reclaim_without_scratch_memory_never_takes_min)
{
	static const enum sl_policy policies[] = { SL_POLICY_GUARANTEE, SL_POLICY_GATEKEEPER,
						   SL_POLICY_PROTECTION };
	struct sl_ops ops = { .reclaim = evict };
	unsigned p;
	long n;

	for (p = 0; p < 3; p++) {
		for (n = 0; n < 12; n++) {
			static const char *const names[] = { "b", "c", "d", "a" };
			struct sl_tree_opts o;
			struct host h[4] = { { 0 } };
			sl_group *g[4];
			struct sl_limits l;
			sl_tree *t;
			int i;

			sl_tree_opts_init(&o);
			o.policy = policies[p];
			o.batch = SL_BATCH_NONE;
			ck_assert_int_eq(sl_tree_create(&o, &t), 0);
			/* a is created last, so it comes first among the children. */
			for (i = 0; i < 4; i++) {
				sl_limits_init(&l);
				l.min = i == 3 ? 5 : 0;
				ck_assert_int_eq(sl_group_create(sl_tree_root(t), names[i], &l, &ops, &h[i], &g[i]), 0);
				h[i].held = i == 3 ? 5 : 1;
				ck_assert_int_eq(sl_charge(g[i], h[i].held, 0), 0);
			}
			sl__fault_inject(n, true);
			sl_reclaim(sl_tree_root(t), 32, 0);
			sl__fault_inject(-1, false);
			ck_assert_msg(usage_of(g[3]) == 5, "policy %u, allocation %ld failed: a at %" PRIu64 " of min 5",
				      p, n, usage_of(g[3]));
			ck_assert_uint_eq(usage_of(g[3]), h[3].held);
			ck_assert_int_eq(sl_tree_check(t), 0);
			sl_tree_destroy(t);
		}
	}
}
END_TEST

START_TEST(dump_fails_with_enomem_or_succeeds_whole)
{
	char buf[8192];
	sl_tree *t;
	sl_group *a, *b;
	char longname[200];
	long n;
	size_t need;

	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(sl_tree_create(NULL, &t), 0);
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), longname, NULL, NULL, NULL, &a), 0);
	ck_assert_int_eq(sl_group_create(a, longname, NULL, NULL, NULL, &b), 0);
	ck_assert_int_eq(sl_group_create(b, longname, NULL, NULL, NULL, &a), 0);
	for (n = 0; n < 4; n++) {
		int rc;

		sl__fault_inject(n, true);
		rc = sl_group_dump(sl_tree_root(t), SL_DUMP_JSON, buf, sizeof(buf), &need);
		sl__fault_inject(-1, false);
		ck_assert(rc == 0 || rc == -ENOMEM);
	}
	ck_assert_int_eq(sl_group_dump(sl_tree_root(t), SL_DUMP_JSON, buf, sizeof(buf), &need), 0);
	ck_assert_ptr_nonnull(strstr(buf, longname));
	sl_tree_destroy(t);
}
END_TEST

static Suite *fault_suite(void)
{
	Suite *s = suite_create("fault");
	TCase *tc = tcase_create("allocation failures");

	tcase_add_test(tc, tree_create_fails_cleanly_at_every_allocation);
	tcase_add_test(tc, group_create_fails_with_enomem_and_leaves_the_tree_as_it_was);
	tcase_add_test(tc, many_groups_still_work_when_the_name_index_cannot_grow);
	tcase_add_test(tc, charges_stay_exact_when_a_stock_cannot_be_allocated);
	tcase_add_test(tc, reclaim_without_scratch_memory_frees_no_more_than_asked_and_stays_exact);
	tcase_add_test(tc, reclaim_without_scratch_memory_never_takes_min);
	tcase_add_test(tc, dump_fails_with_enomem_or_succeeds_whole);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fault_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
