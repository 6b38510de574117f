/* SPDX-License-Identifier: MIT */
/*
 * Charging and uncharging on one thread (and one helper thread): the
 * hierarchy, max at every level, events, SL_FORCE, high, over-uncharge,
 * overflow, peak, and exact usage against a simple model (softlimit(7)).
 *
 * Most tests run under both the default batch and SL_BATCH_NONE: the loop
 * index _i picks the batch (test_batch()).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "helpers.h"

/* ---- the hierarchy ---- */

START_TEST(charge_shows_in_usage_of_the_group_and_every_ancestor)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	sl_group *a = group_new(root, "a", SL_UNLIMITED);
	sl_group *b = group_new(a, "b", SL_UNLIMITED);
	sl_group *c = group_new(b, "c", SL_UNLIMITED);
	sl_group *other = group_new(root, "other", SL_UNLIMITED);

	ck_assert_int_eq(sl_charge(c, 100, 0), 0);
	ck_assert_uint_eq(usage_of(c), 100);
	ck_assert_uint_eq(usage_of(b), 100);
	ck_assert_uint_eq(usage_of(a), 100);
	ck_assert_uint_eq(usage_of(root), 100);
	ck_assert_uint_eq(usage_of(other), 0);

	ck_assert_int_eq(sl_charge(a, 50, 0), 0);
	ck_assert_int_eq(sl_charge(other, 7, 0), 0);
	ck_assert_uint_eq(usage_of(c), 100);
	ck_assert_uint_eq(usage_of(b), 100);
	ck_assert_uint_eq(usage_of(a), 150);
	ck_assert_uint_eq(usage_of(other), 7);
	ck_assert_uint_eq(usage_of(root), 157);

	ck_assert_int_eq(sl_charge(root, 3, 0), 0);
	ck_assert_uint_eq(usage_of(root), 160);
	ck_assert_uint_eq(usage_of(a), 150);

	ck_assert_int_eq(sl_uncharge(c, 100), 0);
	ck_assert_uint_eq(usage_of(b), 0);
	ck_assert_uint_eq(usage_of(a), 50);
	ck_assert_uint_eq(usage_of(root), 60);
	ck_assert_int_eq(sl_uncharge(a, 50), 0);
	ck_assert_int_eq(sl_uncharge(other, 7), 0);
	ck_assert_int_eq(sl_uncharge(root, 3), 0);
	/* with stocks, this thread may still hold pre-charged units: usage is 0 */
	ck_assert_uint_eq(usage_of(c), 0);
	ck_assert_uint_eq(usage_of(b), 0);
	ck_assert_uint_eq(usage_of(a), 0);
	ck_assert_uint_eq(usage_of(other), 0);
	ck_assert_uint_eq(usage_of(root), 0);
	if (test_batch(_i) == SL_BATCH_NONE) {
		assert_empty(c, "c");
		assert_empty(b, "b");
		assert_empty(a, "a");
		assert_empty(other, "other");
		assert_empty(root, "root");
	}
	sl_tree_destroy(t);
}
END_TEST

START_TEST(charges_are_exact_when_a_batch_does_not_fit_under_max)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", 1000);
	struct sl_stats s;

	ck_assert_int_eq(sl_charge(g, 10, 0), 0);
	s = stats_of(g);
	ck_assert_uint_eq(s.usage, 10);
	ck_assert_uint_eq(s.stocked, 0);
	ck_assert_uint_eq(stocked_of(sl_tree_root(t)), 0);
	ck_assert_int_eq(sl_charge(g, 990, 0), 0); /* exactly max */
	s = stats_of(g);
	ck_assert_uint_eq(s.usage, 1000);
	ck_assert_uint_eq(s.peak, 1000);
	ck_assert_int_eq(sl_uncharge(g, 1000), 0);
	ck_assert_uint_eq(usage_of(g), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	sl_tree_destroy(t);
}
END_TEST

/* ---- max at every level ---- */

#define CHAIN 4 /* root, l1, l2, l3 */

/* root -> l1 -> l2 -> l3, with max @tight_max at @tight and no max elsewhere. */
static sl_tree *chain_new(uint64_t batch, int tight, uint64_t tight_max, sl_group *lv[CHAIN])
{
	static const char *const names[CHAIN] = { "", "l1", "l2", "l3" };
	sl_tree *t = tree_new(batch, tight == 0 ? tight_max : SL_UNLIMITED);
	int i;

	lv[0] = sl_tree_root(t);
	for (i = 1; i < CHAIN; i++)
		lv[i] = group_new(lv[i - 1], names[i], i == tight ? tight_max : SL_UNLIMITED);
	return t;
}

static void snapshot_chain(sl_group *lv[CHAIN], struct sl_stats s[CHAIN])
{
	int i;

	for (i = 0; i < CHAIN; i++)
		s[i] = stats_of(lv[i]);
}

/* Every counter on every level is as in @before, except events_max and
 * events_oom at @tight, which grew by @dmax and @doom. */
static void assert_chain_unchanged_but_events(sl_group *lv[CHAIN], const struct sl_stats before[CHAIN],
					      int tight, uint64_t dmax, uint64_t doom)
{
	int i;

	for (i = 0; i < CHAIN; i++) {
		struct sl_stats now = stats_of(lv[i]);
		struct sl_stats want = before[i];
		char what[64];

		snprintf(what, sizeof(what), "level %d (max at level %d)", i, tight);
		if (i == tight) {
			want.events_max += dmax;
			want.events_oom += doom;
		}
		assert_stats_same(&want, &now, what);
	}
}

/* _i = batch index * CHAIN + the level whose max is tight. */
START_TEST(charge_fails_at_the_max_of_any_level_and_changes_nothing)
{
	int batch = _i / CHAIN, tight = _i % CHAIN;
	sl_group *lv[CHAIN];
	sl_tree *t = chain_new(test_batch(batch), tight, 1000, lv);
	struct sl_stats before[CHAIN];
	int i;

	ck_assert_int_eq(sl_charge(lv[3], 600, 0), 0);
	ck_assert_int_eq(sl_charge(lv[3], 400, 0), 0);
	snapshot_chain(lv, before);
	for (i = 0; i < CHAIN; i++) {
		ck_assert_uint_eq(before[i].usage, 1000);
		ck_assert_uint_eq(before[i].peak, 1000);
		ck_assert_uint_eq(before[i].events_max, 0);
	}

	ck_assert_int_eq(sl_charge(lv[3], 1, 0), -ENOMEM);
	assert_chain_unchanged_but_events(lv, before, tight, 1, 1);
	ck_assert_int_eq(sl_charge(lv[3], 1, SL_NORECLAIM), -ENOMEM);
	assert_chain_unchanged_but_events(lv, before, tight, 2, 2);
	ck_assert_int_eq(sl_charge(lv[3], 5000, 0), -ENOMEM);
	assert_chain_unchanged_but_events(lv, before, tight, 3, 3);
	assert_tree_ok(t);
	/* a charge to a group above the tight one is not limited by it */
	if (tight > 0) {
		ck_assert_int_eq(sl_charge(lv[tight - 1], 1, 0), 0);
		ck_assert_int_eq(sl_uncharge(lv[tight - 1], 1), 0);
	}
	sl_tree_destroy(t);
}
END_TEST

START_TEST(forced_charge_passes_max_and_counts_max_but_not_oom)
{
	int batch = _i / CHAIN, tight = _i % CHAIN;
	sl_group *lv[CHAIN];
	sl_tree *t = chain_new(test_batch(batch), tight, 1000, lv);
	struct sl_stats s;
	int i;

	ck_assert_int_eq(sl_charge(lv[3], 1000, 0), 0);
	ck_assert_int_eq(sl_charge(lv[3], 1, SL_FORCE), 0);
	ck_assert_int_eq(sl_charge(lv[3], 99, SL_FORCE | SL_NORECLAIM), 0);
	for (i = 0; i < CHAIN; i++) {
		s = stats_of(lv[i]);
		ck_assert_uint_eq(s.usage, 1100);
		ck_assert_uint_eq(s.peak, 1100);
		/* nothing is pre-charged past max */
		ck_assert_uint_eq(s.stocked, 0);
		ck_assert_uint_eq(s.events_max, i == tight ? 2 : 0);
		ck_assert_uint_eq(s.events_oom, 0);
	}
	/* over max, unforced charges still fail */
	ck_assert_int_eq(sl_charge(lv[3], 1, 0), -ENOMEM);
	ck_assert_uint_eq(stats_of(lv[tight]).events_oom, 1);
	ck_assert_int_eq(sl_uncharge(lv[3], 1100), 0);
	for (i = 0; i < CHAIN; i++) {
		s = stats_of(lv[i]);
		ck_assert_uint_eq(s.usage, 0);
		ck_assert_uint_eq(s.peak, 1100);
	}
	sl_tree_destroy(t);
}
END_TEST

START_TEST(charge_to_a_sibling_fails_at_the_shared_parent_max)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *p = group_new(sl_tree_root(t), "p", 1000);
	sl_group *a = group_new(p, "a", SL_UNLIMITED);
	sl_group *b = group_new(p, "b", 800);
	struct sl_stats sa, sb, sp, sr;

	ck_assert_int_eq(sl_charge(a, 700, 0), 0);
	sa = stats_of(a);
	sb = stats_of(b);
	sp = stats_of(p);
	sr = stats_of(sl_tree_root(t));
	ck_assert_int_eq(sl_charge(b, 400, 0), -ENOMEM);
	sp.events_max++;
	sp.events_oom++;
	{
		struct sl_stats now;

		now = stats_of(a);
		assert_stats_same(&sa, &now, "a");
		now = stats_of(b);
		assert_stats_same(&sb, &now, "b (charged, max not hit)");
		now = stats_of(p);
		assert_stats_same(&sp, &now, "p (max hit)");
		now = stats_of(sl_tree_root(t));
		assert_stats_same(&sr, &now, "root");
	}
	ck_assert_int_eq(sl_charge(b, 300, 0), 0);
	ck_assert_uint_eq(usage_of(p), 1000);
	ck_assert_int_eq(sl_uncharge(a, 700), 0);
	ck_assert_int_eq(sl_uncharge(b, 300), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	sl_tree_destroy(t);
}
END_TEST

/* ---- high ---- */

START_TEST(charge_past_high_succeeds_and_counts_high_on_that_group)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	struct sl_limits lim;
	sl_group *p, *c;
	struct sl_stats s;

	sl_limits_init(&lim);
	lim.high = 500;
	p = group_new_lim(sl_tree_root(t), "p", &lim);
	c = group_new(p, "c", SL_UNLIMITED);

	ck_assert_int_eq(sl_charge(c, 400, 0), 0);
	ck_assert_int_eq(sl_charge(c, 100, 0), 0); /* exactly high: not past it */
	s = stats_of(p);
	ck_assert_uint_eq(s.events_high, 0);
	ck_assert_uint_eq(s.usage, 500);
	/* pre-charged stock never takes a group past high either */
	ck_assert_uint_eq(s.stocked, 0);

	ck_assert_int_eq(sl_charge(c, 1, 0), 0);
	s = stats_of(p);
	ck_assert_uint_eq(s.usage, 501);
	ck_assert_uint_eq(s.events_high, 1);
	ck_assert_uint_eq(s.events_max, 0);
	ck_assert_uint_eq(stats_of(c).events_high, 0);
	ck_assert_uint_eq(stats_of(sl_tree_root(t)).events_high, 0);

	ck_assert_int_eq(sl_charge(c, 100, 0), 0);
	ck_assert_uint_ge(stats_of(p).events_high, 1);
	ck_assert_uint_eq(usage_of(p), 601);
	ck_assert_int_eq(sl_uncharge(c, 601), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	sl_tree_destroy(t);
}
END_TEST

/* ---- over-uncharge ---- */

START_TEST(uncharge_past_the_groups_charges_is_einval_and_clamps_to_zero)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	sl_group *a = group_new(root, "a", SL_UNLIMITED);
	sl_group *s = group_new(root, "s", SL_UNLIMITED);

	ck_assert_int_eq(sl_charge(s, 70, 0), 0);
	ck_assert_int_eq(sl_charge(a, 100, 0), 0);
	ck_assert_int_eq(sl_uncharge(a, 150), -EINVAL);
	ck_assert_uint_eq(usage_of(a), 0);
	ck_assert_uint_eq(usage_of(s), 70);
	ck_assert_uint_eq(usage_of(root), 70);
	/* never wraps */
	ck_assert_int_eq(sl_uncharge(a, 1), -EINVAL);
	ck_assert_int_eq(sl_uncharge(a, UINT64_MAX), -EINVAL);
	ck_assert_uint_eq(usage_of(a), 0);
	ck_assert_uint_eq(usage_of(root), 70);
	/* the group is usable afterwards */
	ck_assert_int_eq(sl_charge(a, 5, 0), 0);
	ck_assert_uint_eq(usage_of(root), 75);
	ck_assert_int_eq(sl_uncharge(a, 5), 0);
	ck_assert_int_eq(sl_uncharge(s, 70), 0);
	ck_assert_uint_eq(usage_of(root), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(uncharge_takes_only_what_is_charged_to_the_group_itself)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *p = group_new(sl_tree_root(t), "p", SL_UNLIMITED);
	sl_group *c = group_new(p, "c", SL_UNLIMITED);

	ck_assert_int_eq(sl_charge(c, 100, 0), 0);
	/* p's usage includes c's 100, but p itself holds nothing */
	ck_assert_int_eq(sl_uncharge(p, 100), -EINVAL);
	ck_assert_uint_eq(usage_of(c), 100);
	ck_assert_uint_eq(usage_of(p), 100);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 100);

	ck_assert_int_eq(sl_charge(p, 30, 0), 0);
	ck_assert_int_eq(sl_uncharge(p, 50), -EINVAL); /* p's own 30 go, c's stay */
	ck_assert_uint_eq(usage_of(c), 100);
	ck_assert_uint_eq(usage_of(p), 100);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 100);
	ck_assert_int_eq(sl_uncharge(c, 100), 0);
	ck_assert_uint_eq(usage_of(p), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	sl_tree_destroy(t);
}
END_TEST

struct elsewhere {
	sl_group *sibling, *child;
	struct gate charged, release;
};

static void *charge_elsewhere_and_wait(void *arg)
{
	struct elsewhere *e = arg;

	T_CHECK(sl_charge(e->sibling, 500, 0) == 0, "charge sibling");
	T_CHECK(sl_charge(e->child, 40, 0) == 0, "charge child");
	gate_open(&e->charged);
	gate_wait(&e->release);
	T_CHECK(sl_uncharge(e->sibling, 500) == 0, "uncharge sibling");
	T_CHECK(sl_uncharge(e->child, 40) == 0, "uncharge child");
	return NULL;
}

START_TEST(over_uncharge_leaves_other_threads_charges_alone)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	sl_group *a = group_new(root, "a", SL_UNLIMITED);
	sl_group *s = group_new(root, "s", SL_UNLIMITED);
	struct elsewhere e;
	pthread_t th;

	thread_failure_reset();
	e.sibling = s;
	e.child = group_new(a, "child", SL_UNLIMITED);
	gate_init(&e.charged);
	gate_init(&e.release);
	ck_assert_int_eq(sl_charge(s, 70, 0), 0);
	start_thread(&th, charge_elsewhere_and_wait, &e);
	gate_wait(&e.charged);

	ck_assert_int_eq(sl_charge(a, 100, 0), 0);
	ck_assert_int_eq(sl_uncharge(a, 150), -EINVAL);
	ck_assert_uint_eq(usage_of(e.child), 40);
	ck_assert_uint_eq(usage_of(a), 40);
	ck_assert_uint_eq(usage_of(s), 570);
	ck_assert_uint_eq(usage_of(root), 610);

	gate_open(&e.release);
	join_thread(th);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_int_eq(sl_uncharge(s, 70), 0);
	assert_empty(e.child, "child");
	ck_assert_uint_eq(usage_of(a), 0);
	ck_assert_uint_eq(usage_of(root), 0);
	gate_destroy(&e.charged);
	gate_destroy(&e.release);
	sl_tree_destroy(t);
}
END_TEST

/* ---- bad amounts and flags ---- */

START_TEST(overflowing_amount_is_einval_with_or_without_force_and_changes_nothing)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	sl_group *g = group_new(root, "g", SL_UNLIMITED);
	sl_group *h = group_new(root, "h", SL_UNLIMITED);
	sl_group *capped = group_new(root, "capped", 1000);
	static const unsigned flags[] = { 0, SL_NORECLAIM, SL_FORCE, SL_FORCE | SL_NORECLAIM };
	struct sl_stats b_root, b_g, b_h, b_c, now;
	size_t i;

	ck_assert_int_eq(sl_charge(g, 10, 0), 0);
	ck_assert_int_eq(sl_charge(capped, 10, 0), 0);
	b_root = stats_of(root);
	b_g = stats_of(g);
	b_h = stats_of(h);
	b_c = stats_of(capped);
	for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		/* overflows g's own counters */
		ck_assert_int_eq(sl_charge(g, UINT64_MAX - 5, flags[i]), -EINVAL);
		ck_assert_int_eq(sl_charge(g, UINT64_MAX, flags[i]), -EINVAL);
		/* h holds nothing, but root would overflow */
		ck_assert_int_eq(sl_charge(h, UINT64_MAX - 5, flags[i]), -EINVAL);
		/* overflow beats max: -EINVAL, not -ENOMEM, and no event */
		ck_assert_int_eq(sl_charge(capped, UINT64_MAX - 5, flags[i]), -EINVAL);
	}
	now = stats_of(root);
	assert_stats_same(&b_root, &now, "root");
	now = stats_of(g);
	assert_stats_same(&b_g, &now, "g");
	now = stats_of(h);
	assert_stats_same(&b_h, &now, "h");
	now = stats_of(capped);
	assert_stats_same(&b_c, &now, "capped");

	ck_assert_int_eq(sl_uncharge(g, 10), 0);
	ck_assert_int_eq(sl_uncharge(capped, 10), 0);
	ck_assert_uint_eq(usage_of(root), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(zero_amount_succeeds_and_does_nothing)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", 100);
	sl_group *empty = group_new(sl_tree_root(t), "empty", SL_UNLIMITED);
	struct sl_stats bg, be, br, now;

	ck_assert_int_eq(sl_charge(g, 100, 0), 0); /* at max */
	bg = stats_of(g);
	be = stats_of(empty);
	br = stats_of(sl_tree_root(t));
	ck_assert_int_eq(sl_charge(g, 0, 0), 0);
	ck_assert_int_eq(sl_charge(g, 0, SL_NORECLAIM), 0);
	ck_assert_int_eq(sl_charge(g, 0, SL_FORCE), 0);
	ck_assert_int_eq(sl_uncharge(g, 0), 0);
	ck_assert_int_eq(sl_uncharge(empty, 0), 0);
	ck_assert_int_eq(sl_charge(empty, 0, 0), 0);
	now = stats_of(g);
	assert_stats_same(&bg, &now, "g");
	now = stats_of(empty);
	assert_stats_same(&be, &now, "empty");
	now = stats_of(sl_tree_root(t));
	assert_stats_same(&br, &now, "root");
	ck_assert_int_eq(sl_uncharge(g, 100), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(unknown_flags_are_einval_and_change_nothing)
{
	static const unsigned bad[] = { 1u << 4, 1u << 31, ~0u, SL_FORCE | (1u << 5),
					SL_NORECLAIM | (1u << 3), SL_TRY | (1u << 6) };
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", 1000);
	struct sl_stats bg, br, now;
	size_t i;

	ck_assert_int_eq(sl_charge(g, 10, 0), 0);
	bg = stats_of(g);
	br = stats_of(sl_tree_root(t));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(sl_charge(g, 1, bad[i]), -EINVAL);
		ck_assert_int_eq(sl_charge(g, 5000, bad[i]), -EINVAL); /* would hit max too */
	}
	now = stats_of(g);
	assert_stats_same(&bg, &now, "g");
	now = stats_of(sl_tree_root(t));
	assert_stats_same(&br, &now, "root");
	ck_assert_int_eq(sl_charge(g, 1, SL_NORECLAIM), 0);
	ck_assert_int_eq(sl_uncharge(g, 11), 0);
	sl_tree_destroy(t);
}
END_TEST

/*
 * SL_TRY: a first try that fails counts its max event but no oom event (the
 * caller goes on another way); the same charge without it, failing for
 * good, counts one.  Either way nothing else moves, and a try that fits is
 * an ordinary charge.
 */
START_TEST(a_failed_try_counts_no_oom_event)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", 1000);
	struct sl_stats s;

	ck_assert_int_eq(sl_charge(g, 900, SL_TRY), 0);
	ck_assert_int_eq(sl_charge(g, 200, SL_TRY | SL_NORECLAIM), -ENOMEM);
	ck_assert_int_eq(sl_charge(g, 200, SL_TRY), -ENOMEM);
	s = stats_of(g);
	ck_assert_uint_eq(s.usage, 900);
	ck_assert_uint_eq(s.events_max, 2);
	ck_assert_uint_eq(s.events_oom, 0);
	ck_assert_int_eq(sl_charge(g, 200, SL_NORECLAIM), -ENOMEM);
	s = stats_of(g);
	ck_assert_uint_eq(s.events_max, 3);
	ck_assert_uint_eq(s.events_oom, 1);
	ck_assert_int_eq(sl_charge(g, 200, SL_TRY | SL_FORCE), 0);
	ck_assert_uint_eq(usage_of(g), 1100);
	ck_assert_int_eq(sl_uncharge(g, 1100), 0);
	sl_tree_destroy(t);
}
END_TEST

/* ---- peak ---- */

START_TEST(peak_tracks_the_highest_usage_and_ignores_failed_charges)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", 1000);
	sl_group *u = group_new(sl_tree_root(t), "u", SL_UNLIMITED);
	struct sl_stats s;

	ck_assert_int_eq(sl_charge(g, 300, 0), 0);
	ck_assert_int_eq(sl_uncharge(g, 200), 0);
	ck_assert_uint_eq(stats_of(g).peak, 300);
	ck_assert_int_eq(sl_charge(g, 100, 0), 0);
	s = stats_of(g);
	ck_assert_uint_eq(s.usage, 200);
	ck_assert_uint_eq(s.peak, 300);
	ck_assert_int_eq(sl_charge(g, 700, 0), 0);
	ck_assert_uint_eq(stats_of(g).peak, 900);
	ck_assert_int_eq(sl_charge(g, 2000, 0), -ENOMEM);
	ck_assert_uint_eq(stats_of(g).peak, 900);
	ck_assert_int_eq(sl_uncharge(g, 900), 0);
	s = stats_of(g);
	ck_assert_uint_eq(s.usage, 0);
	ck_assert_uint_eq(s.peak, 900);

	/* with stocks, peak covers what the stock pre-charged */
	ck_assert_int_eq(sl_charge(u, 10, 0), 0);
	s = stats_of(u);
	ck_assert_uint_ge(s.peak, s.usage + s.stocked);
	ck_assert_uint_ge(s.peak, 10);
	if (test_batch(_i) == SL_BATCH_NONE) {
		ck_assert_uint_eq(s.peak, 10);
		ck_assert_uint_eq(s.stocked, 0);
	}
	s = stats_of(sl_tree_root(t));
	ck_assert_uint_ge(s.peak, 900);
	ck_assert_uint_ge(s.peak, s.usage + s.stocked);
	ck_assert_int_eq(sl_uncharge(u, 10), 0);
	sl_tree_destroy(t);
}
END_TEST

/* ---- exact usage against a model ---- */

#define MODEL_GROUPS 6

struct model {
	sl_group *g[MODEL_GROUPS];
	int parent[MODEL_GROUPS]; /* index, -1 for the root */
	uint64_t max[MODEL_GROUPS];
	uint64_t own[MODEL_GROUPS];   /* charged to the group itself */
	uint64_t usage[MODEL_GROUPS]; /* own + descendants */
	uint64_t peak[MODEL_GROUPS];
};

static void model_build(struct model *m, sl_tree **t, uint64_t batch)
{
	/* root(300000) -> a(200000) -> b(50000); root -> c(1000); root -> d; a -> e */
	static const char *const names[MODEL_GROUPS] = { "", "a", "b", "c", "d", "e" };
	static const int parent[MODEL_GROUPS] = { -1, 0, 1, 0, 0, 1 };
	static const uint64_t max[MODEL_GROUPS] = { 300000, 200000, 50000, 1000, SL_UNLIMITED,
						    SL_UNLIMITED };
	int i;

	memset(m, 0, sizeof(*m));
	*t = tree_new(batch, max[0]);
	m->g[0] = sl_tree_root(*t);
	for (i = 0; i < MODEL_GROUPS; i++) {
		m->parent[i] = parent[i];
		m->max[i] = max[i];
		if (i > 0)
			m->g[i] = group_new(m->g[parent[i]], names[i], max[i]);
	}
}

static int model_fits(const struct model *m, int i, uint64_t amount)
{
	for (; i >= 0; i = m->parent[i])
		if (m->usage[i] + amount > m->max[i])
			return 0;
	return 1;
}

static void model_add(struct model *m, int i, uint64_t amount, int sign)
{
	if (sign > 0)
		m->own[i] += amount;
	else
		m->own[i] -= amount;
	for (; i >= 0; i = m->parent[i]) {
		if (sign > 0)
			m->usage[i] += amount;
		else
			m->usage[i] -= amount;
		if (m->usage[i] > m->peak[i])
			m->peak[i] = m->usage[i];
	}
}

static void model_check(const struct model *m, uint64_t batch, long step)
{
	int i;

	for (i = 0; i < MODEL_GROUPS; i++) {
		struct sl_stats s = stats_of(m->g[i]);

		ck_assert_msg(s.usage == m->usage[i], "step %ld group %d: usage %" PRIu64 ", want %" PRIu64,
			      step, i, s.usage, m->usage[i]);
		ck_assert_msg(s.usage + s.stocked <= m->max[i],
			      "step %ld group %d: usage %" PRIu64 " + stocked %" PRIu64 " > max %" PRIu64,
			      step, i, s.usage, s.stocked, m->max[i]);
		ck_assert_msg(s.peak >= m->peak[i] && s.peak >= s.usage + s.stocked,
			      "step %ld group %d: peak %" PRIu64 " below usage seen %" PRIu64, step, i,
			      s.peak, m->peak[i]);
		ck_assert_msg(s.peak <= m->max[i], "step %ld group %d: peak %" PRIu64 " > max", step, i,
			      s.peak);
		if (batch == SL_BATCH_NONE) {
			ck_assert_msg(s.stocked == 0, "step %ld group %d: stocked %" PRIu64 " without stocks",
				      step, i, s.stocked);
			ck_assert_msg(s.peak == m->peak[i], "step %ld group %d: peak %" PRIu64 ", want %" PRIu64,
				      step, i, s.peak, m->peak[i]);
		}
		/* nothing is forced: every oom is a max event; with stocks, a charge
		 * that met max only because of stocks and then drained them may count
		 * a max event and succeed */
		if (batch == SL_BATCH_NONE)
			ck_assert_uint_eq(s.events_oom, s.events_max);
		else
			ck_assert_uint_le(s.events_oom, s.events_max);
	}
}

/* Random charges and uncharges on one thread, each result and every counter
 * compared with a model that has no stocks: a charge succeeds exactly when it
 * fits under every max on the path by real usage. */
START_TEST(usage_is_exact_and_results_match_a_model_without_stocks)
{
	uint64_t batch = test_batch(_i);
	uint64_t rng = 0x9e3779b97f4a7c15u;
	struct model m;
	sl_tree *t;
	long step, steps = 4000;
	uint64_t failures = 0, successes = 0;
	int i;

	model_build(&m, &t, batch);
	for (step = 0; step < steps; step++) {
		int gi = (int)rng_range(&rng, 0, MODEL_GROUPS - 1);
		uint64_t r = rng_range(&rng, 0, 99);

		if (r < 55 || m.own[gi] == 0) {
			uint64_t amount = r < 5 ? rng_range(&rng, 10000, 70000) : rng_range(&rng, 1, 3000);
			unsigned flags = (r % 3 == 0) ? SL_NORECLAIM : 0;
			int want = model_fits(&m, gi, amount) ? 0 : -ENOMEM;
			int rc = sl_charge(m.g[gi], amount, flags);

			ck_assert_msg(rc == want, "step %ld: charge %" PRIu64 " to group %d (%s): %d, want %d",
				      step, amount, gi, test_batch_name(_i), rc, want);
			if (rc == 0) {
				model_add(&m, gi, amount, +1);
				successes++;
			} else {
				failures++;
			}
		} else {
			uint64_t amount = rng_range(&rng, 1, m.own[gi]);

			ck_assert_int_eq(sl_uncharge(m.g[gi], amount), 0);
			model_add(&m, gi, amount, -1);
		}
		if (step % 7 == 0)
			model_check(&m, batch, step);
		if (step % 101 == 0)
			assert_tree_ok(t);
	}
	model_check(&m, batch, step);
	ck_assert_uint_gt(failures, 0);
	ck_assert_uint_gt(successes, 0);
	{
		uint64_t ooms = 0;

		/* each failed charge counts one oom, on the one group whose max it hit */
		for (i = 0; i < MODEL_GROUPS; i++)
			ooms += stats_of(m.g[i]).events_oom;
		ck_assert_uint_eq(ooms, failures);
	}
	for (i = MODEL_GROUPS - 1; i >= 0; i--) {
		if (m.own[i])
			ck_assert_int_eq(sl_uncharge(m.g[i], m.own[i]), 0);
		model_add(&m, i, m.own[i], -1);
	}
	model_check(&m, batch, step);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/* The stock's counters are narrower than 64 bits; totals far beyond them stay exact. */
START_TEST(usage_stays_exact_far_beyond_a_stocks_width)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	sl_group *h = group_new(sl_tree_root(t), "h", SL_UNLIMITED);
	uint64_t total = 0;
	int i;

	for (i = 0; i < 6000; i++) {
		ck_assert_int_eq(sl_charge(g, 1000, 0), 0);
		total += 1000;
	}
	ck_assert_uint_eq(usage_of(g), total);
	ck_assert_int_eq(sl_charge(h, UINT64_C(10000000000), 0), 0); /* one charge of 10^10 */
	ck_assert_uint_eq(usage_of(h), UINT64_C(10000000000));
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), total + UINT64_C(10000000000));
	while (total >= 999) {
		ck_assert_int_eq(sl_uncharge(g, 999), 0);
		total -= 999;
	}
	ck_assert_int_eq(sl_uncharge(g, total), 0);
	ck_assert_uint_eq(usage_of(g), 0);
	ck_assert_int_eq(sl_uncharge(g, 1), -EINVAL);
	ck_assert_int_eq(sl_uncharge(h, UINT64_C(10000000000)), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	sl_tree_destroy(t);
}
END_TEST

static Suite *charge_suite(void)
{
	Suite *s = suite_create("charge");
	TCase *tc;

	tc = tcase_create("hierarchy");
	tcase_add_loop_test(tc, charge_shows_in_usage_of_the_group_and_every_ancestor, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, charges_are_exact_when_a_batch_does_not_fit_under_max, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("max");
	tcase_add_loop_test(tc, charge_fails_at_the_max_of_any_level_and_changes_nothing, 0,
			    SL_TEST_NBATCH * CHAIN);
	tcase_add_loop_test(tc, forced_charge_passes_max_and_counts_max_but_not_oom, 0,
			    SL_TEST_NBATCH * CHAIN);
	tcase_add_loop_test(tc, charge_to_a_sibling_fails_at_the_shared_parent_max, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("high");
	tcase_add_loop_test(tc, charge_past_high_succeeds_and_counts_high_on_that_group, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("uncharge");
	tcase_add_loop_test(tc, uncharge_past_the_groups_charges_is_einval_and_clamps_to_zero, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, uncharge_takes_only_what_is_charged_to_the_group_itself, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, over_uncharge_leaves_other_threads_charges_alone, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad amounts and flags");
	tcase_add_loop_test(tc, overflowing_amount_is_einval_with_or_without_force_and_changes_nothing, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, zero_amount_succeeds_and_does_nothing, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, unknown_flags_are_einval_and_change_nothing, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, a_failed_try_counts_no_oom_event, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("exact");
	tcase_add_loop_test(tc, peak_tracks_the_highest_usage_and_ignores_failed_charges, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, usage_is_exact_and_results_match_a_model_without_stocks, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, usage_stays_exact_far_beyond_a_stocks_width, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(charge_suite());
}
