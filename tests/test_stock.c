/* SPDX-License-Identifier: MIT */
/*
 * Per-thread stocks across threads: a charge at max drains the idle stock
 * of a blocked thread; a thread that exits and a group or tree that is
 * destroyed give their stock back; units may be uncharged by another
 * thread; a drainer racing an owner that rebinds its stock never moves one
 * group's units to another (docs/stocks.md).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "helpers.h"

/* A helper thread that charges, reports, waits to be released, then runs
 * an epilogue and exits. */
struct holder {
	sl_group *g;
	uint64_t charge, uncharge_before_wait, uncharge_after_wait;
	sl_group *after_group; /* charged and uncharged after the release, if set */
	struct gate charged, release;
};

static void *hold_stock_and_wait(void *arg)
{
	struct holder *h = arg;

	T_CHECK(sl_charge(h->g, h->charge, 0) == 0, "holder charge %" PRIu64, h->charge);
	if (h->uncharge_before_wait)
		T_CHECK(sl_uncharge(h->g, h->uncharge_before_wait) == 0, "holder uncharge");
	gate_open(&h->charged);
	gate_wait(&h->release);
	if (h->uncharge_after_wait)
		T_CHECK(sl_uncharge(h->g, h->uncharge_after_wait) == 0, "holder uncharge after release");
	if (h->after_group) {
		T_CHECK(sl_charge(h->after_group, 5, 0) == 0, "holder charge after release");
		T_CHECK(sl_uncharge(h->after_group, 5) == 0, "holder uncharge after release");
	}
	return NULL;
}

static void holder_init(struct holder *h, sl_group *g, uint64_t charge)
{
	memset(h, 0, sizeof(*h));
	h->g = g;
	h->charge = charge;
	gate_init(&h->charged);
	gate_init(&h->release);
}

static void holder_fini(struct holder *h)
{
	gate_destroy(&h->charged);
	gate_destroy(&h->release);
}

/*
 * _i: 0 - the main thread charges the group whose stock the holder has;
 *     1 - it charges a sibling under the same max (the root's);
 *     2 - the max is a parent's, not the root's.
 */
START_TEST(charge_at_max_drains_the_idle_stock_of_a_blocked_thread)
{
	const uint64_t budget = 100000;
	sl_tree *t = tree_new(0, _i == 2 ? SL_UNLIMITED : budget);
	sl_group *root = sl_tree_root(t);
	sl_group *p = _i == 2 ? group_new(root, "p", budget) : root;
	sl_group *x = group_new(p, "x", SL_UNLIMITED);
	sl_group *y = group_new(p, "y", SL_UNLIMITED);
	sl_group *target = _i == 0 ? x : y;
	struct holder h;
	struct sl_stats s;
	pthread_t th;

	thread_failure_reset();
	holder_init(&h, x, 10);
	h.uncharge_after_wait = 10;
	start_thread(&th, hold_stock_and_wait, &h);
	gate_wait(&h.charged);
	ASSERT_NO_THREAD_FAILURE();

	s = stats_of(p);
	ck_assert_uint_eq(s.usage, 10);
	/* the scenario needs the holder to keep a pre-charged stock */
	ck_assert_msg(s.stocked > 0, "holder kept no stock (stocked %" PRIu64 ")", s.stocked);
	ck_assert_uint_le(s.usage + s.stocked, budget);

	ck_assert_int_eq(sl_charge(target, budget - 10, 0), 0);
	assert_tree_ok(t); /* the holder is blocked: the tree is quiet */
	s = stats_of(p);
	ck_assert_uint_eq(s.usage, budget);
	ck_assert_uint_eq(s.stocked, 0);
	ck_assert_uint_le(s.peak, budget);
	ck_assert_uint_eq(s.events_oom, 0);
	ck_assert_int_eq(sl_charge(target, 1, 0), -ENOMEM);

	ck_assert_int_eq(sl_uncharge(target, budget - 10), 0);
	gate_open(&h.release);
	join_thread(th);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_eq(usage_of(root), 0);
	ck_assert_uint_eq(usage_of(x), 0);
	/* only the main thread may still hold a stock: its own charges are gone */
	ck_assert_uint_le(stats_of(p).peak, budget);
	assert_tree_ok(t);
	holder_fini(&h);
	sl_tree_destroy(t);
}
END_TEST

struct charge_and_exit {
	sl_group *g;
	uint64_t amount;
};

static void *charge_and_exit(void *arg)
{
	struct charge_and_exit *c = arg;

	T_CHECK(sl_charge(c->g, c->amount, 0) == 0, "charge %" PRIu64, c->amount);
	return NULL;
}

START_TEST(exiting_thread_gives_its_stock_back_and_others_may_uncharge_its_units)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *p = group_new(sl_tree_root(t), "p", SL_UNLIMITED);
	sl_group *x = group_new(p, "x", SL_UNLIMITED);
	struct charge_and_exit c = { x, 300 };
	pthread_t th;
	struct sl_stats s;

	thread_failure_reset();
	start_thread(&th, charge_and_exit, &c);
	join_thread(th);
	ASSERT_NO_THREAD_FAILURE();
	s = stats_of(x);
	ck_assert_uint_eq(s.usage, 300);
	ck_assert_uint_eq(s.stocked, 0);
	s = stats_of(sl_tree_root(t));
	ck_assert_uint_eq(s.usage, 300);
	ck_assert_uint_eq(s.stocked, 0);

	/* the main thread uncharges what the dead thread charged */
	ck_assert_int_eq(sl_uncharge(x, 200), 0);
	ck_assert_int_eq(sl_uncharge(x, 100), 0);
	ck_assert_uint_eq(usage_of(x), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	ck_assert_int_eq(sl_uncharge(x, 1), -EINVAL);
	ck_assert_uint_eq(usage_of(x), 0);
	ck_assert_uint_eq(usage_of(p), 0);
	ck_assert_int_eq(sl_group_destroy(x), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(units_charged_by_a_blocked_thread_can_be_uncharged_by_another)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *x = group_new(sl_tree_root(t), "x", SL_UNLIMITED);
	struct holder h;
	pthread_t th;

	thread_failure_reset();
	holder_init(&h, x, 100);
	start_thread(&th, hold_stock_and_wait, &h);
	gate_wait(&h.charged);

	ck_assert_uint_eq(usage_of(x), 100);
	ck_assert_int_eq(sl_uncharge(x, 60), 0);
	ck_assert_int_eq(sl_uncharge(x, 40), 0);
	ck_assert_uint_eq(usage_of(x), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	/* the holder's stock is not charged units: uncharging it is an over-uncharge */
	ck_assert_int_eq(sl_uncharge(x, 1), -EINVAL);
	ck_assert_uint_eq(usage_of(x), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);

	gate_open(&h.release);
	join_thread(th);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_eq(usage_of(x), 0);
	ck_assert_int_eq(sl_group_destroy(x), 0);
	assert_empty(sl_tree_root(t), "root after every thread but main exited");
	holder_fini(&h);
	sl_tree_destroy(t);
}
END_TEST

/* The main thread charges; another thread uncharges (and exits); the main
 * thread's own stock is left as it was and stays consistent. */
struct unchargers {
	sl_group *g;
	uint64_t amount;
	int rc;
};

static void *uncharge_and_exit(void *arg)
{
	struct unchargers *u = arg;

	u->rc = sl_uncharge(u->g, u->amount);
	return NULL;
}

START_TEST(another_thread_can_uncharge_what_this_thread_charged)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *x = group_new(sl_tree_root(t), "x", SL_UNLIMITED);
	struct unchargers u = { x, 70, 1 };
	pthread_t th;

	ck_assert_int_eq(sl_charge(x, 100, 0), 0);
	start_thread(&th, uncharge_and_exit, &u);
	join_thread(th);
	ck_assert_int_eq(u.rc, 0);
	ck_assert_uint_eq(usage_of(x), 30);
	u.amount = 31;
	start_thread(&th, uncharge_and_exit, &u);
	join_thread(th);
	ck_assert_int_eq(u.rc, -EINVAL);
	ck_assert_uint_eq(usage_of(x), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	/* this thread goes on charging from its stock */
	ck_assert_int_eq(sl_charge(x, 5, 0), 0);
	ck_assert_uint_eq(usage_of(x), 5);
	ck_assert_int_eq(sl_uncharge(x, 5), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(group_destroy_gives_back_the_stocks_of_blocked_threads)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	sl_group *p = group_new(root, "p", SL_UNLIMITED);
	sl_group *x = group_new(p, "x", SL_UNLIMITED);
	sl_group *x2;
	struct holder h;
	pthread_t th;

	thread_failure_reset();
	holder_init(&h, x, 10);
	h.uncharge_before_wait = 10;
	start_thread(&th, hold_stock_and_wait, &h);
	gate_wait(&h.charged);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_eq(usage_of(x), 0);
	ck_assert_msg(stocked_of(x) > 0, "holder kept no stock of x");

	ck_assert_int_eq(sl_group_destroy(x), 0);
	assert_empty(p, "parent after destroy");
	assert_empty(root, "root after destroy");

	/* a new group, quite likely at x's address, must not see x's old stock */
	x2 = group_new(p, "x", SL_UNLIMITED);
	assert_empty(x2, "new x");
	h.after_group = x2;
	gate_open(&h.release);
	join_thread(th);
	ASSERT_NO_THREAD_FAILURE();
	assert_empty(x2, "new x after the holder exited");
	assert_empty(p, "parent at the end");
	assert_empty(root, "root at the end");
	holder_fini(&h);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(tree_destroy_empties_the_stocks_of_blocked_threads)
{
	sl_tree *t1 = tree_new(0, SL_UNLIMITED);
	sl_tree *t2 = tree_new(0, SL_UNLIMITED);
	sl_group *x1 = group_new(sl_tree_root(t1), "x", SL_UNLIMITED);
	sl_group *x2 = group_new(sl_tree_root(t2), "x", SL_UNLIMITED);
	struct holder h;
	pthread_t th;

	thread_failure_reset();
	holder_init(&h, x1, 10);
	h.after_group = x2; /* charged after t1 is gone */
	start_thread(&th, hold_stock_and_wait, &h);
	gate_wait(&h.charged);
	sl_tree_destroy(t1);
	gate_open(&h.release);
	join_thread(th);
	ASSERT_NO_THREAD_FAILURE();
	assert_empty(x2, "x in the other tree");
	assert_empty(sl_tree_root(t2), "root of the other tree");
	holder_fini(&h);
	sl_tree_destroy(t2);
}
END_TEST

/* Several threads charge their own groups and exit at once, while the main
 * thread charges too. */
START_TEST(threads_exiting_together_return_every_stock)
{
	enum { N = 8 };
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	struct charge_and_exit c[N];
	pthread_t th[N];
	uint64_t total = 0;
	int i;

	thread_failure_reset();
	for (i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "t%d", i);
		c[i].g = group_new(root, name, SL_UNLIMITED);
		c[i].amount = (uint64_t)(i + 1) * 1000;
		total += c[i].amount;
	}
	for (i = 0; i < N; i++)
		start_thread(&th[i], charge_and_exit, &c[i]);
	ck_assert_int_eq(sl_charge(c[0].g, 1, 0), 0);
	for (i = 0; i < N; i++)
		join_thread(th[i]);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_int_eq(sl_uncharge(c[0].g, 1), 0);
	for (i = 0; i < N; i++) {
		struct sl_stats s = stats_of(c[i].g);

		ck_assert_uint_eq(s.usage, c[i].amount);
		if (i > 0) /* the main thread charged only group 0 */
			ck_assert_uint_eq(s.stocked, 0);
	}
	ck_assert_uint_eq(usage_of(root), total);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(sl_uncharge(c[i].g, c[i].amount), 0);
	ck_assert_uint_eq(usage_of(root), 0);
	sl_tree_destroy(t);
}
END_TEST

/*
 * docs/stocks.md: a drainer must never take one group's units and return them to
 * another while the owner rebinds its stock.  The owner keeps moving 1 unit
 * between x and y (so its stock is rebound all the time); the drainer keeps
 * charging nearly the whole budget to z, which only fits once stocks are
 * drained.  Any mixed-up take shows as usage on x or y far above 1, usage
 * that does not return to 0, or a peak above the budget.
 */
struct rebind_race {
	sl_group *x, *y, *z, *root;
	uint64_t budget;
	double until;
	atomic_int stop;
	uint64_t drainer_ok, drainer_enomem, owner_ops;
};

static void *rebinding_owner(void *arg)
{
	struct rebind_race *r = arg;
	uint64_t ops = 0;

	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		sl_group *g = (ops & 1) ? r->y : r->x;
		int rc = sl_charge(g, 1, 0);

		T_CHECK(rc == 0 || rc == -ENOMEM, "owner charge: %d", rc);
		if (rc == 0)
			T_CHECK(sl_uncharge(g, 1) == 0, "owner uncharge");
		ops++;
	}
	r->owner_ops = ops;
	return NULL;
}

static void *draining_charger(void *arg)
{
	struct rebind_race *r = arg;
	const uint64_t big = r->budget - 2;

	while (now_seconds() < r->until) {
		struct sl_stats sx, sy, sr;
		int rc = sl_charge(r->z, big, 0);

		T_CHECK(rc == 0 || rc == -ENOMEM, "drainer charge: %d", rc);
		if (rc == 0) {
			r->drainer_ok++;
			T_CHECK(sl_uncharge(r->z, big) == 0, "drainer uncharge");
		} else {
			r->drainer_enomem++;
		}
		if (sl_group_stats(r->x, &sx) || sl_group_stats(r->y, &sy) || sl_group_stats(r->root, &sr)) {
			T_CHECK(0, "stats failed");
			break;
		}
		/* Stats read while the owner refills may count refilled units as
		 * usage for an instant (the header's "consistent-enough snapshot":
		 * stocks are summed, then the counter read), a few refills of
		 * amount + batch at most; a unit moved to the wrong group stays. */
		T_CHECK(sx.usage <= 2 * (1 + SL_BATCH_DEFAULT), "x usage %" PRIu64, sx.usage);
		T_CHECK(sy.usage <= 2 * (1 + SL_BATCH_DEFAULT), "y usage %" PRIu64, sy.usage);
		T_CHECK(sr.usage <= 4 * (1 + SL_BATCH_DEFAULT),
			"root usage %" PRIu64 " with the drainer holding nothing", sr.usage);
		T_CHECK(sr.peak <= r->budget, "root peak %" PRIu64 " > budget", sr.peak);
	}
	atomic_store_explicit(&r->stop, 1, memory_order_relaxed);
	return NULL;
}

START_TEST(draining_a_stock_while_its_owner_rebinds_it_keeps_counters_exact)
{
	struct rebind_race r;
	sl_tree *t;
	pthread_t owner, drainer;

	thread_failure_reset();
	memset(&r, 0, sizeof(r));
	r.budget = 200000;
	t = tree_new(0, r.budget);
	r.root = sl_tree_root(t);
	r.x = group_new(r.root, "x", SL_UNLIMITED);
	r.y = group_new(r.root, "y", SL_UNLIMITED);
	r.z = group_new(r.root, "z", SL_UNLIMITED);
	atomic_init(&r.stop, 0);
	r.until = now_seconds() + test_seconds("SL_STOCK_RACE_SECONDS", 0.5);

	start_thread(&owner, rebinding_owner, &r);
	start_thread(&drainer, draining_charger, &r);
	join_thread(drainer);
	join_thread(owner);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_gt(r.owner_ops, 0);
	ck_assert_uint_gt(r.drainer_ok + r.drainer_enomem, 0);
	assert_empty(r.x, "x");
	assert_empty(r.y, "y");
	assert_empty(r.z, "z");
	assert_empty(r.root, "root");
	ck_assert_uint_le(stats_of(r.root).peak, r.budget);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

static Suite *stock_suite(void)
{
	Suite *s = suite_create("stock");
	TCase *tc;

	tc = tcase_create("drain");
	tcase_add_loop_test(tc, charge_at_max_drains_the_idle_stock_of_a_blocked_thread, 0, 3);
	tcase_add_test(tc, draining_a_stock_while_its_owner_rebinds_it_keeps_counters_exact);
	suite_add_tcase(s, tc);

	tc = tcase_create("give back");
	tcase_add_loop_test(tc, exiting_thread_gives_its_stock_back_and_others_may_uncharge_its_units, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, threads_exiting_together_return_every_stock, 0, SL_TEST_NBATCH);
	tcase_add_test(tc, group_destroy_gives_back_the_stocks_of_blocked_threads);
	tcase_add_test(tc, tree_destroy_empties_the_stocks_of_blocked_threads);
	suite_add_tcase(s, tc);

	tc = tcase_create("cross-thread uncharge");
	tcase_add_loop_test(tc, units_charged_by_a_blocked_thread_can_be_uncharged_by_another, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, another_thread_can_uncharge_what_this_thread_charged, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(stock_suite());
}
