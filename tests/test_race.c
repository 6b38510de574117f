/* SPDX-License-Identifier: MIT */
/*
 * Groups created and destroyed while other threads charge: the header says
 * sl_group_create() and sl_group_destroy() are thread-safe against charges,
 * uncharges and creates elsewhere in the tree.  Each test runs for
 * SL_RACE_SECONDS per batch setting (default 0.5), and on until every
 * thread did the work it asserts on (helpers.h, run_more()).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "helpers.h"

#include <sched.h>

#define CHARGERS 3
#define LEAVES 2

struct race {
	sl_group *root, *p;
	sl_group *own[CHARGERS];
	sl_group *leaf[CHARGERS][LEAVES];
	double until;
	atomic_ulong charger_ops, churn_cycles, shared_wins, shared_eexist;
};

struct charger_arg {
	struct race *r;
	int id;
};

static void *charger(void *arg)
{
	struct charger_arg *a = arg;
	struct race *r = a->r;
	uint64_t rng = 0x1234567u + (uint64_t)a->id * 7919u;
	uint64_t held[LEAVES + 1] = { 0 };
	unsigned long ops = 0;
	int k;

	while (run_more(r->until, ops > 0)) {
		for (k = 0; k < 64; k++) {
			int slot = (int)rng_range(&rng, 0, LEAVES);
			sl_group *g = slot == LEAVES ? r->own[a->id] : r->leaf[a->id][slot];

			if (held[slot] < 100000 && rng_range(&rng, 0, 1)) {
				uint64_t amount = rng_range(&rng, 1, 5000);
				int rc = sl_charge(g, amount, 0);

				T_CHECK(rc == 0, "charger %d: charge %" PRIu64 ": %d", a->id, amount, rc);
				if (rc == 0)
					held[slot] += amount;
			} else if (held[slot]) {
				uint64_t amount = rng_range(&rng, 1, held[slot]);
				int rc = sl_uncharge(g, amount);

				T_CHECK(rc == 0, "charger %d: uncharge %" PRIu64 ": %d", a->id, amount, rc);
				held[slot] -= amount;
			}
			ops++;
		}
	}
	for (k = 0; k <= LEAVES; k++) {
		sl_group *g = k == LEAVES ? r->own[a->id] : r->leaf[a->id][k];

		if (held[k])
			T_CHECK(sl_uncharge(g, held[k]) == 0, "charger %d: final uncharge", a->id);
	}
	atomic_fetch_add(&r->charger_ops, ops);
	return NULL;
}

/* Creates a group (and a child) under the shared parent, charges both,
 * uncharges, destroys, over and over; also adds and removes an empty child
 * under each charger's hot group. */
static void *churner(void *arg)
{
	struct race *r = arg;
	uint64_t rng = 0xfeedbeefu;
	unsigned long cycles = 0;

	while (run_more(r->until, cycles > 0)) {
		char name[32];
		sl_group *tmp = NULL, *leaf = NULL, *side = NULL;
		sl_group *hot = r->own[cycles % CHARGERS];
		struct sl_limits lim;
		uint64_t a1 = rng_range(&rng, 1, 50000), a2 = rng_range(&rng, 1, 50000);
		int rc;

		snprintf(name, sizeof(name), "tmp%lu", cycles % 4);
		sl_limits_init(&lim);
		lim.max = 1000000;
		rc = sl_group_create(r->p, name, &lim, NULL, NULL, &tmp);
		T_CHECK(rc == 0, "create %s: %d", name, rc);
		if (rc)
			break;
		rc = sl_group_create(tmp, "leaf", NULL, NULL, NULL, &leaf);
		T_CHECK(rc == 0, "create %s/leaf: %d", name, rc);
		if (rc)
			break;
		T_CHECK(sl_charge(leaf, a1, 0) == 0, "charge leaf");
		T_CHECK(sl_charge(tmp, a2, 0) == 0, "charge tmp");
		T_CHECK(sl_group_destroy(tmp) == -EBUSY, "destroy of a busy group");
		T_CHECK(sl_uncharge(leaf, a1) == 0, "uncharge leaf");
		T_CHECK(sl_uncharge(tmp, a2) == 0, "uncharge tmp");
		/* this thread's stocks of leaf and tmp are given back by destroy */
		T_CHECK(sl_group_destroy(leaf) == 0, "destroy leaf");
		T_CHECK(sl_group_destroy(tmp) == 0, "destroy tmp");

		rc = sl_group_create(hot, "side", NULL, NULL, NULL, &side);
		T_CHECK(rc == 0, "create side under a hot group: %d", rc);
		if (rc == 0)
			T_CHECK(sl_group_destroy(side) == 0, "destroy side");
		cycles++;
	}
	atomic_fetch_add(&r->churn_cycles, cycles);
	return NULL;
}

/* Two of these race to create the same name: one wins, the other sees
 * -EEXIST; the winner charges, uncharges and destroys it. */
static void *name_racer(void *arg)
{
	struct race *r = arg;
	unsigned long eexist = 0;

	/* Until one of the two won at least once. */
	while (run_more(r->until, atomic_load(&r->shared_wins) > 0)) {
		sl_group *g = NULL;
		int rc = sl_group_create(r->p, "shared", NULL, NULL, NULL, &g);

		T_CHECK(rc == 0 || rc == -EEXIST, "create shared: %d", rc);
		if (rc == 0) {
			T_CHECK(sl_charge(g, 10, 0) == 0, "charge shared");
			T_CHECK(sl_uncharge(g, 10) == 0, "uncharge shared");
			T_CHECK(sl_group_destroy(g) == 0, "destroy shared");
			atomic_fetch_add(&r->shared_wins, 1);
		} else {
			eexist++;
		}
	}
	atomic_fetch_add(&r->shared_eexist, eexist);
	return NULL;
}

START_TEST(groups_come_and_go_while_other_threads_charge)
{
	struct race r;
	struct charger_arg args[CHARGERS];
	pthread_t th[CHARGERS + 3];
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	int i, k, n = 0;

	thread_failure_reset();
	memset(&r, 0, sizeof(r));
	atomic_init(&r.charger_ops, 0);
	atomic_init(&r.churn_cycles, 0);
	atomic_init(&r.shared_wins, 0);
	atomic_init(&r.shared_eexist, 0);
	r.root = sl_tree_root(t);
	r.p = group_new(r.root, "p", 100000000);
	for (i = 0; i < CHARGERS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "c%d", i);
		r.own[i] = group_new(r.p, name, SL_UNLIMITED);
		for (k = 0; k < LEAVES; k++) {
			snprintf(name, sizeof(name), "l%d", k);
			r.leaf[i][k] = group_new(r.own[i], name, SL_UNLIMITED);
		}
	}
	r.until = now_seconds() + test_seconds("SL_RACE_SECONDS", 0.5);

	for (i = 0; i < CHARGERS; i++) {
		args[i].r = &r;
		args[i].id = i;
		start_thread(&th[n++], charger, &args[i]);
	}
	start_thread(&th[n++], churner, &r);
	start_thread(&th[n++], name_racer, &r);
	start_thread(&th[n++], name_racer, &r);
	for (i = 0; i < n; i++)
		join_thread(th[i]);
	ASSERT_NO_THREAD_FAILURE();

	ck_assert_uint_gt(atomic_load(&r.charger_ops), 0);
	ck_assert_uint_gt(atomic_load(&r.churn_cycles), 0);
	ck_assert_uint_gt(atomic_load(&r.shared_wins), 0);
	for (i = 0; i < CHARGERS; i++) {
		assert_empty(r.own[i], "charger group");
		for (k = 0; k < LEAVES; k++)
			assert_empty(r.leaf[i][k], "charger leaf");
	}
	assert_empty(r.p, "shared parent");
	assert_empty(r.root, "root");
	ck_assert_uint_eq(stats_of(r.p).events_max, 0);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/*
 * Regression: lowering max raced with a charge that had read the old max
 * before its CAS, so the charge landed after sl_group_set_limits() had
 * returned 0 ("in force when the call returns").  Chargers push against
 * the max while it is lowered to exactly the count; whenever the call
 * returns 0, the chargers are paused and the count must be within it.
 */
#define MAX_CHARGERS 2

struct max_race {
	sl_group *g;
	atomic_int stop, pause, paused;
};

static void *max_charger(void *arg)
{
	struct max_race *m = arg;
	uint64_t held = 0;

	while (!atomic_load(&m->stop)) {
		if (atomic_load(&m->pause)) {
			atomic_fetch_add(&m->paused, 1);
			while (atomic_load(&m->pause))
				sched_yield();
			atomic_fetch_sub(&m->paused, 1);
			continue;
		}
		if (held < 64 && sl_charge(m->g, 1, SL_NORECLAIM) == 0) {
			held++;
		} else if (held >= 64) {
			if (sl_uncharge(m->g, held) != 0)
				T_CHECK(0, "uncharge of %" PRIu64 " held units failed", held);
			held = 0;
		}
	}
	T_CHECK(!held || sl_uncharge(m->g, held) == 0, "final uncharge of %" PRIu64 " failed", held);
	return NULL;
}

START_TEST(a_lowered_max_is_in_force_when_set_limits_returns)
{
	struct max_race m = { 0 };
	pthread_t th[MAX_CHARGERS];
	unsigned long rounds = 0, in_force = 0, over = 0;
	double until = now_seconds() + test_seconds("SL_RACE_SECONDS", 0.5);
	struct sl_limits hi, lo;
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	int i;

	m.g = group_new(sl_tree_root(t), "g", 1000000);
	sl_limits_init(&hi);
	hi.max = 1000000;
	for (i = 0; i < MAX_CHARGERS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, max_charger, &m), 0);
	while (run_more(until, in_force > 0)) {
		struct sl_stats st = stats_of(m.g);

		sl_limits_init(&lo);
		lo.max = st.usage + st.stocked ? st.usage + st.stocked : 1;
		rounds++;
		if (sl_group_set_limits(m.g, &lo) == 0) {
			in_force++;
			atomic_store(&m.pause, 1);
			while (atomic_load(&m.paused) != MAX_CHARGERS)
				sched_yield();
			st = stats_of(m.g);
			if (st.usage + st.stocked > lo.max)
				over++;
			atomic_store(&m.pause, 0);
		}
		ck_assert_int_eq(sl_group_set_limits(m.g, &hi), 0);
	}
	atomic_store(&m.stop, 1);
	for (i = 0; i < MAX_CHARGERS; i++)
		pthread_join(th[i], NULL);
	printf("set_max race (%s): %lu rounds, %lu returned 0, %lu found over the new max\n",
	       test_batch_name(_i), rounds, in_force, over);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_eq(over, 0);
	ck_assert_uint_gt(in_force, 0);
	ck_assert_uint_eq(stats_of(m.g).usage, 0);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/*
 * A read of a group's usage (sl_group_stats(), and the claims of
 * sl_reclaim()) while another thread's stock of that group refills and is
 * flushed: units on their way between the counters and a slot are never
 * counted as the host's usage, so usage never shows more than the host
 * holds, and a reclaim never asks a callback below min (proof/reclaim.pml,
 * CFG_CLAIM_REFILL, found the case the code had missed).
 */
#define TRANSIT_MIN 100
#define TRANSIT_HELD 150
#define TRANSIT_OTHERS 9 /* more groups than a stock has slots: rebinds */

struct transit {
	sl_group *a, *other[TRANSIT_OTHERS];
	atomic_uint stop;
	atomic_ulong cycles;
	uint64_t held;        /* units of a the main thread holds (its own thread) */
	unsigned long asked, below_min;
};

static uint64_t transit_reclaim(sl_group *g, uint64_t target, void *ctx)
{
	struct transit *x = ctx;
	uint64_t give = target < x->held ? target : x->held;

	(void)g;
	x->asked++;
	/* The churner holds 0 or 1 unit of a: after giving target, the host
	 * must still hold min. */
	if (x->held + 1 < target + TRANSIT_MIN)
		x->below_min++;
	if (give && sl_uncharge(x->a, give) == 0)
		x->held -= give;
	return give;
}

/* Charges and uncharges 1 unit of a, then of every other group, so that its
 * slot of a is refilled, evicted and flushed over and over. */
static void *transit_churner(void *arg)
{
	struct transit *x = arg;
	unsigned long cycles = 0;
	int k;

	while (!atomic_load(&x->stop)) {
		if (sl_charge(x->a, 1, SL_NORECLAIM) == 0)
			T_CHECK(sl_uncharge(x->a, 1) == 0, "uncharge of a");
		for (k = 0; k < TRANSIT_OTHERS; k++) {
			T_CHECK(sl_charge(x->other[k], 1, 0) == 0, "charge of other %d", k);
			T_CHECK(sl_uncharge(x->other[k], 1) == 0, "uncharge of other %d", k);
		}
		/* Relaxed: read by the main thread's loop condition only. */
		atomic_store_explicit(&x->cycles, ++cycles, memory_order_relaxed);
	}
	return NULL;
}

START_TEST(a_usage_read_never_counts_units_in_transit)
{
	struct transit x = { 0 };
	struct sl_tree_opts opts;
	struct sl_ops ops = { .reclaim = transit_reclaim };
	struct sl_limits lim;
	unsigned long reads = 0, over = 0;
	double until = now_seconds() + test_seconds("SL_RACE_SECONDS", 0.5);
	pthread_t th;
	sl_tree *t;
	int k;

	sl_tree_opts_init(&opts);
	opts.batch = _i == 0 ? 16 : SL_BATCH_NONE; /* small: many refills */
	ck_assert_int_eq(sl_tree_create(&opts, &t), 0);
	sl_limits_init(&lim);
	lim.min = TRANSIT_MIN;
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "a", &lim, &ops, &x, &x.a), 0);
	for (k = 0; k < TRANSIT_OTHERS; k++) {
		char name[16];

		snprintf(name, sizeof(name), "o%d", k);
		x.other[k] = group_new(sl_tree_root(t), name, SL_UNLIMITED);
	}
	start_thread(&th, transit_churner, &x);
	while (run_more(until, x.asked > 0 && atomic_load_explicit(&x.cycles, memory_order_relaxed) > 0)) {
		uint64_t usage;

		if (x.held < TRANSIT_HELD) {
			ck_assert_int_eq(sl_charge(x.a, TRANSIT_HELD - x.held, SL_NORECLAIM), 0);
			x.held = TRANSIT_HELD;
		}
		usage = stats_of(x.a).usage;
		reads++;
		if (usage > x.held + 1)
			over++;
		sl_reclaim(sl_tree_root(t), 1000, 0);
	}
	atomic_store(&x.stop, 1);
	join_thread(th);
	printf("usage in transit (%s): %lu reads, %lu over the host's; %lu callbacks, %lu below min; "
	       "%lu churn cycles\n",
	       opts.batch == SL_BATCH_NONE ? "batch none" : "batch 16", reads, over, x.asked, x.below_min,
	       atomic_load(&x.cycles));
	fflush(stdout);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_eq(over, 0);
	ck_assert_uint_eq(x.below_min, 0);
	ck_assert_uint_gt(x.asked, 0);
	ck_assert_uint_gt(atomic_load(&x.cycles), 0);
	ck_assert_int_eq(sl_uncharge(x.a, x.held), 0);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

static Suite *race_suite(void)
{
	Suite *s = suite_create("race");
	TCase *tc = tcase_create("create and destroy under charges");

	tcase_add_loop_test(tc, groups_come_and_go_while_other_threads_charge, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, a_lowered_max_is_in_force_when_set_limits_returns, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, a_usage_read_never_counts_units_in_transit, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(race_suite());
}
