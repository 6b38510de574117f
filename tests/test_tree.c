/* SPDX-License-Identifier: MIT */
/*
 * Trees and groups: defaults, creation, names, topology accessors, destroy
 * rules and holds, whether a charge could fit, limits round trips and the
 * version (softlimit.h).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "helpers.h"

/* ---- defaults ---- */

START_TEST(limits_init_gives_no_protection_and_no_limits)
{
	struct sl_limits lim;

	memset(&lim, 0x5a, sizeof(lim));
	sl_limits_init(&lim);
	ck_assert_uint_eq(lim.min, 0);
	ck_assert_uint_eq(lim.soft, 0);
	ck_assert_uint_eq(lim.high, SL_UNLIMITED);
	ck_assert_uint_eq(lim.max, SL_UNLIMITED);
	ck_assert_uint_eq(SL_UNLIMITED, UINT64_MAX);
	sl_limits_init(NULL); /* ignored */
}
END_TEST

START_TEST(tree_opts_init_gives_guarantee_default_batch_and_unlimited_root)
{
	struct sl_tree_opts opts;

	memset(&opts, 0x5a, sizeof(opts));
	sl_tree_opts_init(&opts);
	ck_assert_int_eq(opts.policy, SL_POLICY_GUARANTEE);
	ck_assert_uint_eq(opts.batch, SL_BATCH_DEFAULT);
	ck_assert_uint_eq(opts.root.min, 0);
	ck_assert_uint_eq(opts.root.soft, 0);
	ck_assert_uint_eq(opts.root.high, SL_UNLIMITED);
	ck_assert_uint_eq(opts.root.max, SL_UNLIMITED);
	ck_assert_uint_eq(SL_BATCH_DEFAULT, 32768);
	sl_tree_opts_init(NULL); /* ignored */
}
END_TEST

START_TEST(tree_create_with_null_opts_uses_the_defaults)
{
	sl_tree *t = NULL;
	struct sl_limits lim;

	ck_assert_int_eq(sl_tree_create(NULL, &t), 0);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(sl_tree_policy(t), SL_POLICY_GUARANTEE);
	ck_assert_uint_eq(sl_tree_batch(t), SL_BATCH_DEFAULT);
	ck_assert_int_eq(sl_group_limits(sl_tree_root(t), &lim), 0);
	ck_assert_uint_eq(lim.min, 0);
	ck_assert_uint_eq(lim.soft, 0);
	ck_assert_uint_eq(lim.high, SL_UNLIMITED);
	ck_assert_uint_eq(lim.max, SL_UNLIMITED);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(tree_keeps_its_policy)
{
	static const enum sl_policy policies[] = { SL_POLICY_GUARANTEE, SL_POLICY_GATEKEEPER,
						   SL_POLICY_PROTECTION };
	struct sl_tree_opts opts;
	sl_tree *t = NULL;

	sl_tree_opts_init(&opts);
	opts.policy = policies[_i];
	ck_assert_int_eq(sl_tree_create(&opts, &t), 0);
	ck_assert_int_eq(sl_tree_policy(t), policies[_i]);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(tree_batch_zero_means_default_and_none_means_no_stock)
{
	static const struct {
		uint64_t asked, effective;
	} cases[] = {
		{ 0, SL_BATCH_DEFAULT },
		{ SL_BATCH_NONE, 0 },
		{ 1, 1 },
		{ 1000, 1000 },
		{ SL_BATCH_DEFAULT, SL_BATCH_DEFAULT },
		{ SL_BATCH_MAX, SL_BATCH_MAX },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sl_tree_opts opts;
		sl_tree *t = NULL;

		sl_tree_opts_init(&opts);
		opts.batch = cases[i].asked;
		ck_assert_int_eq(sl_tree_create(&opts, &t), 0);
		ck_assert_msg(sl_tree_batch(t) == cases[i].effective,
			      "batch %" PRIu64 " -> %" PRIu64 ", want %" PRIu64, cases[i].asked,
			      sl_tree_batch(t), cases[i].effective);
		sl_tree_destroy(t);
	}
}
END_TEST

/* ---- the root ---- */

START_TEST(root_has_empty_name_no_parent_no_ctx_and_knows_its_tree)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);

	ck_assert_ptr_nonnull(root);
	ck_assert_ptr_eq(sl_tree_root(t), root);
	ck_assert_str_eq(sl_group_name(root), "");
	ck_assert_ptr_null(sl_group_parent(root));
	ck_assert_ptr_null(sl_group_ctx(root));
	ck_assert_ptr_eq(sl_group_tree(root), t);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(root_limits_come_from_opts)
{
	struct sl_tree_opts opts;
	struct sl_limits lim;
	struct sl_stats s;
	sl_tree *t = NULL;

	sl_tree_opts_init(&opts);
	opts.root.min = 10;
	opts.root.soft = 20;
	opts.root.high = 30;
	opts.root.max = 40;
	ck_assert_int_eq(sl_tree_create(&opts, &t), 0);
	ck_assert_int_eq(sl_group_limits(sl_tree_root(t), &lim), 0);
	ck_assert_uint_eq(lim.min, 10);
	ck_assert_uint_eq(lim.soft, 20);
	ck_assert_uint_eq(lim.high, 30);
	ck_assert_uint_eq(lim.max, 40);
	s = stats_of(sl_tree_root(t));
	ck_assert_uint_eq(s.limits.max, 40);
	ck_assert_uint_eq(s.usage, 0);
	ck_assert_uint_eq(s.stocked, 0);
	ck_assert_uint_eq(s.peak, 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(two_trees_are_independent)
{
	sl_tree *t1 = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_tree *t2 = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *a1 = group_new(sl_tree_root(t1), "a", SL_UNLIMITED);
	sl_group *a2 = group_new(sl_tree_root(t2), "a", SL_UNLIMITED); /* same name, other tree */

	ck_assert_ptr_eq(sl_group_tree(a1), t1);
	ck_assert_ptr_eq(sl_group_tree(a2), t2);
	ck_assert_int_eq(sl_charge(a1, 100, 0), 0);
	ck_assert_int_eq(sl_charge(a2, 7, 0), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t1)), 100);
	ck_assert_uint_eq(usage_of(sl_tree_root(t2)), 7);

	/* Destroying t1 while this thread holds stocks of both trees leaves t2 exact. */
	sl_tree_destroy(t1);
	ck_assert_int_eq(sl_charge(a2, 3, 0), 0);
	ck_assert_uint_eq(usage_of(a2), 10);
	ck_assert_uint_eq(usage_of(sl_tree_root(t2)), 10);
	ck_assert_int_eq(sl_uncharge(a2, 10), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t2)), 0);
	sl_tree_destroy(t2);
}
END_TEST

/* A new tree often lands at the address of one just destroyed: the thread's
 * stock of the old tree must not leak into it. */
START_TEST(tree_destroy_empties_stocks_so_a_new_tree_starts_clean)
{
	int round;

	for (round = 0; round < 8; round++) {
		sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
		sl_group *a = group_new(sl_tree_root(t), "a", SL_UNLIMITED);
		sl_group *b = group_new(a, "b", SL_UNLIMITED);
		struct sl_stats s;

		s = stats_of(b);
		ck_assert_uint_eq(s.usage, 0);
		ck_assert_uint_eq(s.stocked, 0);
		ck_assert_uint_eq(s.peak, 0);
		assert_empty(sl_tree_root(t), "fresh root");
		ck_assert_int_eq(sl_charge(b, 10, 0), 0);
		ck_assert_int_eq(sl_charge(a, 5, 0), 0);
		ck_assert_uint_eq(usage_of(b), 10);
		ck_assert_uint_eq(usage_of(a), 15);
		ck_assert_uint_eq(usage_of(sl_tree_root(t)), 15);
		assert_tree_ok(t);
		/* every other round, leave the charges in the tree */
		if (round % 2) {
			ck_assert_int_eq(sl_uncharge(b, 10), 0);
			ck_assert_int_eq(sl_uncharge(a, 5), 0);
			ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
		}
		sl_tree_destroy(t);
	}
}
END_TEST

/* ---- groups ---- */

START_TEST(group_create_gives_a_child_with_its_name_parent_tree_ctx_and_limits)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	struct sl_limits lim, got;
	struct sl_ops ops = { .reclaim = NULL };
	int ctx_obj;
	sl_group *g = NULL, *h = NULL;

	lim.min = 1;
	lim.soft = 2;
	lim.high = 3;
	lim.max = 4;
	ck_assert_int_eq(sl_group_create(root, "tenant-1", &lim, &ops, &ctx_obj, &g), 0);
	ck_assert_ptr_nonnull(g);
	ck_assert_str_eq(sl_group_name(g), "tenant-1");
	ck_assert_ptr_eq(sl_group_parent(g), root);
	ck_assert_ptr_eq(sl_group_tree(g), t);
	ck_assert_ptr_eq(sl_group_ctx(g), &ctx_obj);
	ck_assert_int_eq(sl_group_limits(g, &got), 0);
	ck_assert_uint_eq(got.min, 1);
	ck_assert_uint_eq(got.soft, 2);
	ck_assert_uint_eq(got.high, 3);
	ck_assert_uint_eq(got.max, 4);

	/* NULL lim and ops: default limits, no ctx */
	ck_assert_int_eq(sl_group_create(g, "db", NULL, NULL, NULL, &h), 0);
	ck_assert_ptr_eq(sl_group_parent(h), g);
	ck_assert_ptr_null(sl_group_ctx(h));
	ck_assert_int_eq(sl_group_limits(h, &got), 0);
	ck_assert_uint_eq(got.min, 0);
	ck_assert_uint_eq(got.soft, 0);
	ck_assert_uint_eq(got.high, SL_UNLIMITED);
	ck_assert_uint_eq(got.max, SL_UNLIMITED);

	ck_assert_int_eq(sl_group_destroy(h), 0);
	ck_assert_int_eq(sl_group_destroy(g), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(group_name_is_copied)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	char buf[SL_NAME_MAX + 1];
	sl_group *g = NULL, *h = NULL;

	strcpy(buf, "alpha");
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), buf, NULL, NULL, NULL, &g), 0);
	memset(buf, 'z', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	ck_assert_str_eq(sl_group_name(g), "alpha");

	/* the longest name, SL_NAME_MAX bytes, is kept whole */
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), buf, NULL, NULL, NULL, &h), 0);
	ck_assert_uint_eq(strlen(sl_group_name(h)), SL_NAME_MAX);
	ck_assert_str_eq(sl_group_name(h), buf);
	buf[0] = 'q';
	ck_assert_int_eq(sl_group_name(h)[0], 'z');
	sl_tree_destroy(t);
}
END_TEST

START_TEST(sibling_with_the_same_name_is_eexist)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *a = group_new(sl_tree_root(t), "a", SL_UNLIMITED);
	sl_group *dup = NULL;

	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "a", NULL, NULL, NULL, &dup), -EEXIST);
	/* a prefix or an extension of the name is another name */
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "ab", NULL, NULL, NULL, &dup), 0);
	ck_assert_int_eq(sl_group_destroy(dup), 0);
	/* the original is untouched and still destroyable */
	ck_assert_str_eq(sl_group_name(a), "a");
	ck_assert_int_eq(sl_group_destroy(a), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(same_name_under_different_parents_is_allowed)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	sl_group *a = group_new(root, "a", SL_UNLIMITED);
	sl_group *b = group_new(root, "b", SL_UNLIMITED);
	sl_group *ax = group_new(a, "x", SL_UNLIMITED);
	sl_group *bx = group_new(b, "x", SL_UNLIMITED);
	sl_group *xx = group_new(ax, "x", SL_UNLIMITED);
	sl_group *top_x = group_new(root, "x", SL_UNLIMITED);

	ck_assert_ptr_ne(ax, bx);
	ck_assert_ptr_eq(sl_group_parent(ax), a);
	ck_assert_ptr_eq(sl_group_parent(bx), b);
	ck_assert_ptr_eq(sl_group_parent(xx), ax);
	ck_assert_ptr_eq(sl_group_parent(top_x), root);
	ck_assert_int_eq(sl_group_destroy(ax), -EBUSY);
	ck_assert_int_eq(sl_group_destroy(xx), 0);
	ck_assert_int_eq(sl_group_destroy(ax), 0);
	ck_assert_int_eq(sl_group_destroy(bx), 0);
	ck_assert_int_eq(sl_group_destroy(top_x), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(destroyed_group_name_can_be_reused)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	int round;

	for (round = 0; round < 16; round++) {
		sl_group *g = group_new(sl_tree_root(t), "reused", 1000);
		struct sl_stats s = stats_of(g);

		/* a group at a recycled address starts from zero */
		ck_assert_uint_eq(s.usage, 0);
		ck_assert_uint_eq(s.stocked, 0);
		ck_assert_uint_eq(s.peak, 0);
		ck_assert_uint_eq(s.events_max, 0);
		ck_assert_int_eq(sl_charge(g, 1000, 0), 0);
		ck_assert_int_eq(sl_charge(g, 1, 0), -ENOMEM);
		ck_assert_int_eq(sl_uncharge(g, 1000), 0);
		ck_assert_int_eq(sl_group_destroy(g), 0);
		assert_empty(sl_tree_root(t), "root after destroy");
	}
	sl_tree_destroy(t);
}
END_TEST

START_TEST(many_children_can_be_created_and_destroyed)
{
	enum { N = 1000 };
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group **g = calloc(N, sizeof(*g));
	char name[32];
	int i;

	ck_assert_ptr_nonnull(g);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "g%d", i);
		g[i] = group_new(sl_tree_root(t), name, SL_UNLIMITED);
	}
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "g%d", i);
		ck_assert_str_eq(sl_group_name(g[i]), name);
		ck_assert_int_eq(sl_group_create(sl_tree_root(t), name, NULL, NULL, NULL, &g[i]), -EEXIST);
	}
	/* destroy in an order unlike creation */
	for (i = 0; i < N; i += 2)
		ck_assert_int_eq(sl_group_destroy(g[i]), 0);
	for (i = N - 1; i > 0; i -= 2)
		ck_assert_int_eq(sl_group_destroy(g[i]), 0);
	free(g);
	sl_tree_destroy(t);
}
END_TEST

/* ---- destroy rules ---- */

START_TEST(destroy_with_children_is_ebusy)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *p = group_new(sl_tree_root(t), "p", SL_UNLIMITED);
	sl_group *c = group_new(p, "c", SL_UNLIMITED);

	ck_assert_int_eq(sl_group_destroy(p), -EBUSY);
	ck_assert_ptr_eq(sl_group_parent(c), p);
	ck_assert_str_eq(sl_group_name(p), "p");
	ck_assert_int_eq(sl_group_destroy(c), 0);
	ck_assert_int_eq(sl_group_destroy(p), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(destroy_with_charges_is_ebusy_until_uncharged)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *p = group_new(sl_tree_root(t), "p", SL_UNLIMITED);
	sl_group *g = group_new(p, "g", SL_UNLIMITED);

	ck_assert_int_eq(sl_charge(g, 1, 0), 0);
	ck_assert_int_eq(sl_group_destroy(g), -EBUSY);
	ck_assert_uint_eq(usage_of(g), 1);
	ck_assert_uint_eq(usage_of(p), 1);
	ck_assert_int_eq(sl_uncharge(g, 1), 0);
	/* the stock this thread still holds for g does not count as a charge */
	ck_assert_int_eq(sl_group_destroy(g), 0);
	assert_empty(p, "parent after destroy");
	assert_empty(sl_tree_root(t), "root after destroy");

	/* a parent whose own charges remain is busy too, even with no children */
	ck_assert_int_eq(sl_charge(p, 5, 0), 0);
	ck_assert_int_eq(sl_group_destroy(p), -EBUSY);
	ck_assert_int_eq(sl_uncharge(p, 5), 0);
	ck_assert_int_eq(sl_group_destroy(p), 0);
	assert_empty(sl_tree_root(t), "root at the end");
	sl_tree_destroy(t);
}
END_TEST

START_TEST(destroy_root_is_einval)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);

	ck_assert_int_eq(sl_group_destroy(sl_tree_root(t)), -EINVAL);
	ck_assert_str_eq(sl_group_name(sl_tree_root(t)), "");
	ck_assert_int_eq(sl_group_destroy(NULL), -EINVAL);
	sl_tree_destroy(t);
}
END_TEST

/* Run under ASan: whatever groups still hold, the tree frees them all. */
START_TEST(tree_destroy_frees_groups_that_are_still_charged)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *a = group_new(sl_tree_root(t), "a", SL_UNLIMITED);
	sl_group *b = group_new(a, "b", 1000);
	sl_group *c = group_new(b, "c", SL_UNLIMITED);

	group_new(sl_tree_root(t), "empty", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(c, 300, 0), 0);
	ck_assert_int_eq(sl_charge(a, 12345, 0), 0);
	ck_assert_int_eq(sl_charge(b, 800, SL_FORCE), 0);
	assert_tree_ok(t);
	sl_tree_destroy(t);
	sl_tree_destroy(NULL); /* ignored */
}
END_TEST

/* ---- holds ---- */

/* Regression (a lease's group destroyed under its run thread): a held
 * group is not destroyed, and is once released. */
START_TEST(destroy_of_a_held_group_is_ebusy_until_released)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *p = group_new(sl_tree_root(t), "p", SL_UNLIMITED);
	sl_group *g = group_new(p, "g", 1000);
	sl_group *found = NULL;

	ck_assert_int_eq(sl_group_hold(g), 0);
	ck_assert_int_eq(sl_group_destroy(g), -EBUSY);
	/* Nothing changed: the group is there and works. */
	ck_assert_int_eq(sl_group_lookup(sl_tree_root(t), "p/g", &found), 0);
	ck_assert_ptr_eq(found, g);
	ck_assert_int_eq(sl_charge(g, 10, 0), 0);
	ck_assert_int_eq(sl_uncharge(g, 10), 0);
	ck_assert_int_eq(sl_group_unhold(g), 0);
	ck_assert_int_eq(sl_group_destroy(g), 0);
	ck_assert_int_eq(sl_group_lookup(sl_tree_root(t), "p/g", &found), -ENOENT);
	ck_assert_int_eq(sl_group_destroy(p), 0);
	assert_empty(sl_tree_root(t), "root");
	sl_tree_destroy(t);
}
END_TEST

START_TEST(holds_count_each_holder_releases_its_own)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);

	ck_assert_int_eq(sl_group_hold(g), 0);
	ck_assert_int_eq(sl_group_hold(g), 0);
	ck_assert_int_eq(sl_group_unhold(g), 0);
	ck_assert_int_eq(sl_group_destroy(g), -EBUSY); /* one holder left */
	ck_assert_int_eq(sl_group_unhold(g), 0);
	ck_assert_int_eq(sl_group_unhold(g), -EINVAL); /* no hold left to give back */
	ck_assert_int_eq(sl_group_destroy(g), 0);
	sl_tree_destroy(t);
}
END_TEST

/* A held parent keeps its children free to go; the root may be held, and
 * still only goes with its tree. */
START_TEST(holds_are_of_one_group_and_the_root_may_be_held)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *p = group_new(sl_tree_root(t), "p", SL_UNLIMITED);
	sl_group *c = group_new(p, "c", SL_UNLIMITED);

	ck_assert_int_eq(sl_group_hold(p), 0);
	ck_assert_int_eq(sl_group_destroy(c), 0);
	ck_assert_int_eq(sl_group_destroy(p), -EBUSY);
	ck_assert_int_eq(sl_group_unhold(p), 0);
	ck_assert_int_eq(sl_group_destroy(p), 0);

	ck_assert_int_eq(sl_group_hold(sl_tree_root(t)), 0);
	ck_assert_int_eq(sl_group_destroy(sl_tree_root(t)), -EINVAL);
	ck_assert_int_eq(sl_group_unhold(sl_tree_root(t)), 0);
	sl_tree_destroy(t);
}
END_TEST

static int hold_and_release_visitor(sl_group *g, unsigned depth, void *arg)
{
	(void)arg;
	if (depth == 0)
		return 0;
	if (sl_group_hold(g) != 0 || sl_group_destroy(g) != -EBUSY || sl_group_unhold(g) != 0)
		return 1;
	return 0;
}

/* Inside a walk the tree's lock is the walker's: holds do not deadlock. */
START_TEST(holds_work_inside_a_walk)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);

	ck_assert_int_eq(sl_group_walk(sl_tree_root(t), hold_and_release_visitor, NULL), 0);
	ck_assert_int_eq(sl_group_destroy(g), 0);
	sl_tree_destroy(t);
}
END_TEST

/* Run under ASan: the tree frees held groups too (the host stops holders first). */
START_TEST(tree_destroy_frees_held_groups)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);

	ck_assert_int_eq(sl_group_hold(g), 0);
	ck_assert_int_eq(sl_group_hold(g), 0);
	ck_assert_int_eq(sl_charge(g, 100, 0), 0);
	sl_tree_destroy(t);
}
END_TEST

/* ---- could a charge fit ---- */

struct counted {
	sl_group *g;
	unsigned calls;
};

static uint64_t counted_reclaim(sl_group *g, uint64_t target, void *ctx)
{
	struct counted *c = ctx;

	(void)g, (void)target;
	c->calls++;
	return 0;
}

static sl_group *reclaimable_new(sl_group *parent, const char *name, const struct sl_limits *lim,
				 struct counted *c)
{
	const struct sl_ops ops = { .reclaim = counted_reclaim };
	sl_group *g = NULL;

	ck_assert_int_eq(sl_group_create(parent, name, lim, &ops, c, &g), 0);
	c->g = g;
	return g;
}

static int can_fit_visitor(sl_group *g, unsigned depth, void *arg)
{
	uint64_t *amount = arg;

	(void)depth;
	return sl_charge_can_fit(g, *amount) + 10; /* 0 would go on walking */
}

/* The core's judgement at max, asked ahead: what reclaim may take counts
 * as room, what it may not (min, groups without a callback) does not. */
START_TEST(charge_can_fit_counts_what_reclaim_may_free)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	struct sl_limits lim;
	struct counted rc = { 0 }, rm = { 0 };
	sl_group *p, *r, *m, *plain;
	uint64_t amount;

	sl_limits_init(&lim);
	lim.max = 100;
	p = group_new(root, "p", 100);
	r = reclaimable_new(p, "r", &lim, &rc);
	lim.min = 20;
	m = reclaimable_new(root, "m", &lim, &rm);
	plain = group_new(root, "plain", 100);

	ck_assert_int_eq(sl_charge(r, 30, 0), 0);
	ck_assert_int_eq(sl_charge(m, 30, 0), 0);
	ck_assert_int_eq(sl_charge(plain, 30, 0), 0);
	ck_assert_int_eq(sl_charge_can_fit(r, 0), 1);
	ck_assert_int_eq(sl_charge_can_fit(r, 70), 1);  /* room now */
	ck_assert_int_eq(sl_charge_can_fit(r, 100), 1); /* once r's 30 are reclaimed */
	ck_assert_int_eq(sl_charge_can_fit(r, 101), 0); /* above max */
	ck_assert_int_eq(sl_charge_can_fit(m, 80), 1);  /* m's min is 20 of its 30 */
	ck_assert_int_eq(sl_charge_can_fit(m, 81), 0);
	ck_assert_int_eq(sl_charge_can_fit(plain, 70), 1);
	ck_assert_int_eq(sl_charge_can_fit(plain, 71), 0); /* no callback: its 30 stay */

	/* An ancestor's max, with a sibling that holds its charges. */
	ck_assert_int_eq(sl_group_destroy(plain), -EBUSY);
	ck_assert_int_eq(sl_uncharge(plain, 30), 0);
	ck_assert_int_eq(sl_group_destroy(plain), 0);
	plain = group_new(p, "plain", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(plain, 50, 0), 0);
	ck_assert_int_eq(sl_charge_can_fit(r, 20), 1);
	ck_assert_int_eq(sl_charge_can_fit(r, 50), 1);  /* once r's 30 are reclaimed */
	ck_assert_int_eq(sl_charge_can_fit(r, 51), 0);  /* plain's 50 stay under p's 100 */
	/* Inside a walk no charge reclaims: only room now counts. */
	amount = 20;
	ck_assert_int_eq(sl_group_walk(r, can_fit_visitor, &amount), 11);
	amount = 30; /* fits once r's 30 are reclaimed, not now */
	ck_assert_int_eq(sl_group_walk(r, can_fit_visitor, &amount), 10);
	/* Nor the root's max. */
	sl_limits_init(&lim);
	lim.max = 110;
	ck_assert_int_eq(sl_group_set_limits(root, &lim), 0);
	ck_assert_int_eq(sl_charge_can_fit(r, 50), 0);  /* m's min 20 and plain's 50 stay under 110 */
	ck_assert_int_eq(sl_charge_can_fit(r, 40), 1);

	/* It only looks: nothing was reclaimed, no callback ran, no counter moved. */
	ck_assert_uint_eq(rc.calls, 0);
	ck_assert_uint_eq(rm.calls, 0);
	ck_assert_uint_eq(usage_of(r), 30);
	ck_assert_uint_eq(usage_of(m), 30);
	ck_assert_uint_eq(usage_of(plain), 50);
	ck_assert_uint_eq(stats_of(r).events_max, 0);
	assert_tree_ok(t);
	ck_assert_int_eq(sl_uncharge(r, 30), 0);
	ck_assert_int_eq(sl_uncharge(m, 30), 0);
	ck_assert_int_eq(sl_uncharge(plain, 50), 0);
	sl_tree_destroy(t);
}
END_TEST

/* ---- limits ---- */

START_TEST(set_limits_round_trips_through_limits_and_stats)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	struct sl_limits lim, got;
	struct sl_stats s;

	lim.min = 100;
	lim.soft = 200;
	lim.high = 300;
	lim.max = 400;
	ck_assert_int_eq(sl_group_set_limits(g, &lim), 0);
	lim.max = 1; /* the caller's struct is not kept */
	ck_assert_int_eq(sl_group_limits(g, &got), 0);
	ck_assert_uint_eq(got.min, 100);
	ck_assert_uint_eq(got.soft, 200);
	ck_assert_uint_eq(got.high, 300);
	ck_assert_uint_eq(got.max, 400);
	s = stats_of(g);
	ck_assert_uint_eq(s.limits.min, 100);
	ck_assert_uint_eq(s.limits.soft, 200);
	ck_assert_uint_eq(s.limits.high, 300);
	ck_assert_uint_eq(s.limits.max, 400);

	/* min == soft == max is consistent; so is the root's own set */
	lim.min = lim.soft = lim.high = lim.max = 50;
	ck_assert_int_eq(sl_group_set_limits(g, &lim), 0);
	sl_limits_init(&lim);
	lim.max = 999;
	ck_assert_int_eq(sl_group_set_limits(sl_tree_root(t), &lim), 0);
	ck_assert_int_eq(sl_group_limits(sl_tree_root(t), &got), 0);
	ck_assert_uint_eq(got.max, 999);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(max_lowered_below_usage_is_ebusy_but_holds_for_further_charges)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", 1000);
	struct sl_limits lim;

	ck_assert_int_eq(sl_charge(g, 500, 0), 0);
	sl_limits_init(&lim);
	lim.max = 300;
	/* no reclaim callback can bring usage down: -EBUSY, but the new max holds */
	ck_assert_int_eq(sl_group_set_limits(g, &lim), -EBUSY);
	ck_assert_uint_eq(stats_of(g).limits.max, 300);
	ck_assert_uint_eq(usage_of(g), 500);
	ck_assert_int_eq(sl_charge(g, 1, 0), -ENOMEM);
	ck_assert_int_eq(sl_charge(g, 1, SL_NORECLAIM), -ENOMEM);
	ck_assert_uint_eq(usage_of(g), 500);
	ck_assert_int_eq(sl_uncharge(g, 300), 0);
	ck_assert_int_eq(sl_charge(g, 100, 0), 0); /* 300 again: at max, not past */
	ck_assert_int_eq(sl_charge(g, 1, 0), -ENOMEM);
	/* raising max lets charges through again */
	lim.max = 301;
	ck_assert_int_eq(sl_group_set_limits(g, &lim), 0);
	ck_assert_int_eq(sl_charge(g, 1, 0), 0);
	ck_assert_uint_eq(usage_of(g), 301);
	assert_tree_ok(t);
	ck_assert_int_eq(sl_uncharge(g, 301), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	sl_tree_destroy(t);
}
END_TEST

/* ---- version ---- */

START_TEST(version_at_run_time_matches_the_header)
{
	char want[32];

	ck_assert_ptr_nonnull(sl_version());
	ck_assert_str_eq(sl_version(), SL_VERSION_STRING);
	ck_assert_uint_eq(sl_version_number(), SL_VERSION_NUMBER);
	snprintf(want, sizeof(want), "%d.%d.%d", SL_VERSION_MAJOR, SL_VERSION_MINOR,
		 SL_VERSION_PATCH);
	ck_assert_str_eq(SL_VERSION_STRING, want);
	ck_assert_uint_eq(SL_VERSION_NUMBER,
			  ((unsigned)SL_VERSION_MAJOR << 16) | ((unsigned)SL_VERSION_MINOR << 8) |
				  (unsigned)SL_VERSION_PATCH);
}
END_TEST

static Suite *tree_suite(void)
{
	Suite *s = suite_create("tree");
	TCase *tc;

	tc = tcase_create("defaults");
	tcase_add_test(tc, limits_init_gives_no_protection_and_no_limits);
	tcase_add_test(tc, tree_opts_init_gives_guarantee_default_batch_and_unlimited_root);
	tcase_add_test(tc, tree_create_with_null_opts_uses_the_defaults);
	tcase_add_loop_test(tc, tree_keeps_its_policy, 0, 3);
	tcase_add_test(tc, tree_batch_zero_means_default_and_none_means_no_stock);
	suite_add_tcase(s, tc);

	tc = tcase_create("topology");
	tcase_add_test(tc, root_has_empty_name_no_parent_no_ctx_and_knows_its_tree);
	tcase_add_test(tc, root_limits_come_from_opts);
	tcase_add_loop_test(tc, two_trees_are_independent, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, tree_destroy_empties_stocks_so_a_new_tree_starts_clean, 0,
			    SL_TEST_NBATCH);
	tcase_add_test(tc, group_create_gives_a_child_with_its_name_parent_tree_ctx_and_limits);
	tcase_add_test(tc, group_name_is_copied);
	tcase_add_test(tc, sibling_with_the_same_name_is_eexist);
	tcase_add_test(tc, same_name_under_different_parents_is_allowed);
	tcase_add_loop_test(tc, destroyed_group_name_can_be_reused, 0, SL_TEST_NBATCH);
	tcase_add_test(tc, many_children_can_be_created_and_destroyed);
	suite_add_tcase(s, tc);

	tc = tcase_create("destroy");
	tcase_add_test(tc, destroy_with_children_is_ebusy);
	tcase_add_loop_test(tc, destroy_with_charges_is_ebusy_until_uncharged, 0, SL_TEST_NBATCH);
	tcase_add_test(tc, destroy_root_is_einval);
	tcase_add_loop_test(tc, tree_destroy_frees_groups_that_are_still_charged, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("holds");
	tcase_add_loop_test(tc, destroy_of_a_held_group_is_ebusy_until_released, 0, SL_TEST_NBATCH);
	tcase_add_test(tc, holds_count_each_holder_releases_its_own);
	tcase_add_test(tc, holds_are_of_one_group_and_the_root_may_be_held);
	tcase_add_test(tc, holds_work_inside_a_walk);
	tcase_add_loop_test(tc, tree_destroy_frees_held_groups, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("can fit");
	tcase_add_loop_test(tc, charge_can_fit_counts_what_reclaim_may_free, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_test(tc, set_limits_round_trips_through_limits_and_stats);
	tcase_add_loop_test(tc, max_lowered_below_usage_is_ebusy_but_holds_for_further_charges, 0,
			    SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("version");
	tcase_add_test(tc, version_at_run_time_matches_the_header);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(tree_suite());
}
