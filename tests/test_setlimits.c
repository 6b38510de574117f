/* SPDX-License-Identifier: MIT */
/*
 * A limit change holds for every later charge (issue 24, defects 1 and 2).
 *
 * A thread that charged holds a stock: units pre-charged to the whole path,
 * handed out later without looking at any limit.  When max or high is
 * lowered below what the path holds, those units must not be handed out
 * past the new limit: a lowered max is not passed by a later unforced
 * charge, stocked or not, and a charge that passes a lowered high counts a
 * high event and sets sl_high_pending().  Each test lowers the limit from
 * every context that may do it: plain code, an sl_group_walk() visitor (no
 * reclaim there: sl_group_set_limits() may return -EBUSY), a reclaim
 * callback (the same), and, in the threaded tests, while another thread
 * holds the stock and goes on charging.
 *
 * The quick tests' loop index is context * 2 + where, where 0 lowers the
 * limit of the group charged and 1 that of its parent (the stock is the
 * child's).  Both stock protocols: scripts/test runs this suite again with
 * SOFTLIMIT_MEMBARRIER=0.  One test lowers max while an uncharge is about
 * to keep its units in the stock (a hidden hook, lib/testing.h), the race
 * the keep's second look settles.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "helpers.h"
#include "testing.h"

#include <sched.h>
#include <stdbool.h>

enum ctx_kind { CTX_PLAIN, CTX_WALK, CTX_CALLBACK, NCTX };

static const char *ctx_name(int c)
{
	return c == CTX_PLAIN ? "plain" : c == CTX_WALK ? "walk visitor" : "reclaim callback";
}

/* What to do once the limit is lowered, in the same context. */
struct lowering {
	sl_group *target;       /* whose limits change */
	struct sl_limits lim;   /* to these */
	int rc;                 /* what sl_group_set_limits() returned */
	uint64_t count_after;   /* target's usage + stocked right after it returned */
	sl_group *charge_in;    /* if set, charge charge_amount here in the same context */
	uint64_t charge_amount;
	int charge_rc;
	int high_pending;       /* sl_high_pending() right after that charge */
	int done;
};

static void lower_now(struct lowering *lw)
{
	struct sl_stats st;

	lw->rc = sl_group_set_limits(lw->target, &lw->lim);
	ck_assert_int_eq(sl_group_stats(lw->target, &st), 0);
	lw->count_after = st.usage + st.stocked;
	if (lw->charge_in) {
		lw->charge_rc = sl_charge(lw->charge_in, lw->charge_amount, 0);
		lw->high_pending = sl_high_pending();
	}
	lw->done++;
}

static int lower_in_walk(sl_group *g, unsigned depth, void *arg)
{
	struct lowering *lw = arg;

	(void)depth;
	if (g == lw->target)
		lower_now(lw);
	return 0;
}

/* The reclaim callback of a helper group: the reclaim asks it, and it
 * lowers the other group's limits (and frees nothing). */
static uint64_t lower_in_callback(sl_group *g, uint64_t target, void *ctx)
{
	struct lowering *lw = ctx;

	(void)g;
	(void)target;
	if (!lw->done) /* pass 2 may ask again */
		lower_now(lw);
	return 0;
}

/*
 * Lower lw->target's limits in context c.  The callback runs in a reclaim
 * of a sibling helper group (a reclaim of the target's own subtree would
 * drain its stocks first and hide the defect).
 */
static void lower_in(int c, sl_tree *t, struct lowering *lw)
{
	struct sl_ops ops = { .reclaim = lower_in_callback };
	sl_group *helper = NULL;

	lw->done = 0;
	switch (c) {
	case CTX_PLAIN:
		lower_now(lw);
		break;
	case CTX_WALK:
		ck_assert_int_eq(sl_group_walk(sl_tree_root(t), lower_in_walk, lw), 0);
		break;
	default:
		ck_assert_int_eq(sl_group_create(sl_tree_root(t), "helper", NULL, &ops, lw, &helper), 0);
		ck_assert_int_eq(sl_charge(helper, 10, 0), 0);
		(void)sl_reclaim(helper, 5, 0);
		ck_assert_int_eq(sl_uncharge(helper, 10), 0);
		ck_assert_int_eq(sl_group_destroy(helper), 0);
		break;
	}
	ck_assert_int_eq(lw->done, 1);
	ck_assert_msg(lw->rc == 0 || lw->rc == -EBUSY, "%s: sl_group_set_limits() returned %d", ctx_name(c), lw->rc);
}

/* A default-batch tree, a parent p and its child g; g has charged 1 unit, so
 * this thread's stock holds a batch for g. */
static sl_tree *tree_with_stock(sl_group **p, sl_group **g)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);

	*p = group_new(sl_tree_root(t), "p", SL_UNLIMITED);
	*g = group_new(*p, "g", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(*g, 1, 0), 0);
	ck_assert_msg(stocked_of(*g) >= 1000, "the stock holds %" PRIu64 ", want a batch", stocked_of(*g));
	return t;
}

static void release(sl_tree *t, sl_group *p, sl_group *g, uint64_t held)
{
	ck_assert_int_eq(sl_uncharge(g, held), 0);
	ck_assert_int_eq(sl_group_destroy(g), 0);
	ck_assert_int_eq(sl_group_destroy(p), 0);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}

START_TEST(a_lowered_max_holds_for_a_charge_from_a_stock)
{
	int c = _i / 2;
	sl_group *p, *g;
	sl_tree *t = tree_with_stock(&p, &g);
	struct lowering lw = { .target = _i % 2 ? p : g, .charge_in = g, .charge_amount = 1000 };
	struct sl_stats st;
	uint64_t held = 1;

	sl_limits_init(&lw.lim);
	lw.lim.max = 100;
	lower_in(c, t, &lw);
	/* In the same context: the stock must not serve it. */
	ck_assert_msg(lw.charge_rc == -ENOMEM, "%s: a 1000-unit charge under max 100 returned %d", ctx_name(c),
		      lw.charge_rc);
	/* And after it, from plain code (which may reclaim: nothing to free). */
	ck_assert_int_eq(sl_charge(g, 1000, 0), -ENOMEM);
	ck_assert_int_eq(sl_charge(g, 1000, SL_NORECLAIM), -ENOMEM);
	/* What fits still fits. */
	ck_assert_int_eq(sl_charge(g, 50, 0), 0);
	held += 50;
	st = stats_of(lw.target);
	ck_assert_msg(st.usage <= 100, "%s: usage %" PRIu64 " above max 100", ctx_name(c), st.usage);
	ck_assert_msg(st.usage + st.stocked <= (lw.count_after > 100 ? lw.count_after : 100),
		      "%s: usage + stocked %" PRIu64 " above max(%" PRIu64 ", 100)", ctx_name(c),
		      st.usage + st.stocked, lw.count_after);
	release(t, p, g, held);
}
END_TEST

START_TEST(a_lowered_high_counts_a_charge_from_a_stock_that_passes_it)
{
	int c = _i / 2;
	sl_group *p, *g;
	sl_tree *t = tree_with_stock(&p, &g);
	struct lowering lw = { .target = _i % 2 ? p : g };
	uint64_t before;

	/* A fresh flag: the charge of 1 did not pass any high. */
	(void)sl_handle_over_high(g);
	ck_assert_int_eq(sl_high_pending(), 0);
	sl_limits_init(&lw.lim);
	lw.lim.high = 10;
	before = stats_of(lw.target).events_high;
	lower_in(c, t, &lw);
	ck_assert_int_eq(lw.rc, 0);
	ck_assert_int_eq(sl_charge(g, 1000, 0), 0);
	ck_assert_msg(sl_high_pending() != 0, "%s: a charge to usage 1001 passed high 10 unseen", ctx_name(c));
	ck_assert_msg(stats_of(lw.target).events_high > before, "%s: events_high did not move", ctx_name(c));
	release(t, p, g, 1001);
}
END_TEST

/* The same inside the context: the charge right after the change. */
START_TEST(a_lowered_high_counts_a_charge_from_a_stock_in_the_same_context)
{
	int c = _i / 2;
	sl_group *p, *g;
	sl_tree *t = tree_with_stock(&p, &g);
	struct lowering lw = { .target = _i % 2 ? p : g, .charge_in = g, .charge_amount = 1000 };
	uint64_t before;

	(void)sl_handle_over_high(g);
	sl_limits_init(&lw.lim);
	lw.lim.high = 10;
	before = stats_of(lw.target).events_high;
	lower_in(c, t, &lw);
	ck_assert_int_eq(lw.charge_rc, 0);
	ck_assert_msg(lw.high_pending != 0, "%s: a charge to usage 1001 passed high 10 unseen", ctx_name(c));
	ck_assert_msg(stats_of(lw.target).events_high > before, "%s: events_high did not move", ctx_name(c));
	release(t, p, g, 1001);
}
END_TEST

/* ---- another thread holds the stock ---- */

/*
 * The charger charges and uncharges through its stock, small amounts and
 * 1000 at a time, and counts its rounds.  Once it has seen the change
 * (lowered, read when it holds nothing), a 1000-unit charge must fail
 * (max 100) or count a high event (high 10; its pending flag has been up
 * since its first charge past high, so it tells nothing here).
 */
struct charger {
	sl_group *g, *target;
	bool high;              /* the change lowers high, not max */
	atomic_int lowered;     /* the change has returned */
	atomic_int stop;
	atomic_uint_fast64_t rounds, rounds_seen; /* all, and after seeing lowered */
};

static void *charger_main(void *arg)
{
	struct charger *ch = arg;
	uint64_t rng = 42;

	while (!atomic_load(&ch->stop)) {
		bool seen = atomic_load(&ch->lowered);
		uint64_t small = rng_range(&rng, 1, 64), before = 0;
		int rc;

		if (sl_charge(ch->g, small, 0) == 0)
			T_CHECK(sl_uncharge(ch->g, small) == 0, "uncharge of %" PRIu64, small);
		if (seen && ch->high) {
			struct sl_stats st;

			T_CHECK(sl_group_stats(ch->target, &st) == 0, "stats");
			before = st.events_high;
		}
		rc = sl_charge(ch->g, 1000, 0);
		if (seen && !ch->high)
			T_CHECK(rc == -ENOMEM, "a 1000-unit charge after max fell to 100 returned %d", rc);
		if (seen && ch->high && rc == 0) {
			struct sl_stats st;

			T_CHECK(sl_group_stats(ch->target, &st) == 0 && st.events_high > before,
				"a charge past high 10 counted no event");
		}
		if (rc == 0)
			T_CHECK(sl_uncharge(ch->g, 1000) == 0, "uncharge of 1000");
		atomic_fetch_add(&ch->rounds, 1);
		if (seen)
			atomic_fetch_add(&ch->rounds_seen, 1);
	}
	return NULL;
}

static void wait_rounds(atomic_uint_fast64_t *n, uint64_t want)
{
	double deadline = now_seconds() + 60;

	while (atomic_load(n) < want && now_seconds() < deadline)
		sched_yield();
	ck_assert_msg(atomic_load(n) >= want, "the charger made %" PRIu64 " rounds in 60 s, want %" PRIu64,
		      (uint64_t)atomic_load(n), want);
}

static void lowered_while_another_thread_charges(int c, bool parent, bool high)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *p = group_new(sl_tree_root(t), "p", SL_UNLIMITED);
	sl_group *g = group_new(p, "g", SL_UNLIMITED);
	struct charger ch = { .g = g, .target = parent ? p : g, .high = high };
	struct lowering lw = { .target = ch.target };
	struct sl_stats st;
	pthread_t th;

	thread_failure_reset();
	sl_limits_init(&lw.lim);
	if (high)
		lw.lim.high = 10;
	else
		lw.lim.max = 100;
	start_thread(&th, charger_main, &ch);
	wait_rounds(&ch.rounds, 200);
	lower_in(c, t, &lw);
	atomic_store(&ch.lowered, 1);
	wait_rounds(&ch.rounds_seen, 200);
	atomic_store(&ch.stop, 1);
	join_thread(th);
	ASSERT_NO_THREAD_FAILURE();
	st = stats_of(ch.target);
	ck_assert_uint_eq(st.usage, 0);
	if (!high)
		ck_assert_msg(st.stocked <= (lw.count_after > 100 ? lw.count_after : 100),
			      "%s: stocked %" PRIu64 " above max(%" PRIu64 ", 100)", ctx_name(c), st.stocked,
			      lw.count_after);
	ck_assert_int_eq(sl_group_destroy(g), 0);
	ck_assert_int_eq(sl_group_destroy(p), 0);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}

START_TEST(a_max_lowered_while_another_thread_holds_a_stock_holds_for_it)
{
	lowered_while_another_thread_charges(_i / 2, _i % 2, false);
}
END_TEST

START_TEST(a_high_lowered_while_another_thread_holds_a_stock_holds_for_it)
{
	lowered_while_another_thread_charges(_i / 2, _i % 2, true);
}
END_TEST

/* ---- a keep racing the change ---- */

struct keep_race {
	sl_group *g;
	int rc;
	int fired;
};

static struct keep_race *keep_race;

static void *lower_max_thread(void *arg)
{
	struct keep_race *kr = arg;
	struct sl_limits lim;

	sl_limits_init(&lim);
	lim.max = 100;
	kr->rc = sl_group_set_limits(kr->g, &lim);
	return NULL;
}

/* Inside the keep, between its room check and its units' CAS into the
 * slot: another thread lowers max (and gives our stock back), and waits. */
static void keep_hook(sl_group *g)
{
	pthread_t th;

	if (!keep_race || g != keep_race->g || keep_race->fired++)
		return;
	if (pthread_create(&th, NULL, lower_max_thread, keep_race) == 0)
		pthread_join(th, NULL);
}

START_TEST(a_max_lowered_during_a_keep_holds_for_the_kept_units)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	struct keep_race kr = { .g = g };
	struct sl_stats st;

	/* A slot for g with units (a refill), and 40000 units charged
	 * exactly (above a batch: into local), so that an uncharge of 100
	 * takes 99 from local and keeps them in the slot, which has room. */
	ck_assert_int_eq(sl_charge(g, 1, 0), 0);
	ck_assert_int_eq(sl_charge(g, 40000, 0), 0);
	keep_race = &kr;
	sl__keep_hook = keep_hook;
	ck_assert_int_eq(sl_uncharge(g, 100), 0);
	sl__keep_hook = NULL;
	keep_race = NULL;
	ck_assert_int_eq(kr.fired, 1);
	ck_assert_int_eq(kr.rc, -EBUSY); /* nothing to reclaim: usage 39901 */
	st = stats_of(g);
	ck_assert_uint_eq(st.usage, 39901);
	/* The kept units went back: none is handed out past max 100. */
	ck_assert_msg(st.stocked == 0, "%" PRIu64 " units kept in a stock above max 100", st.stocked);
	ck_assert_int_eq(sl_charge(g, 50, 0), -ENOMEM);
	ck_assert_int_eq(sl_uncharge(g, 39901), 0);
	ck_assert_int_eq(sl_group_destroy(g), 0);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/* ---- setters of one group, all at once ---- */

/* Two whole sets, each valid, each a mix of the other's fields is not
 * (soft or min of the first above the max of the second, or a set
 * written by nobody). */
static const struct sl_limits big_set = { .min = 80, .soft = 90, .high = 95, .max = 100 };
static const struct sl_limits small_set = { .min = 8, .soft = 9, .high = 10, .max = 10 };

/* Counts, not time: every thread goes on until the others did their
 * share too, so setters and readers overlap however the machine schedules
 * them (a mix lasts a few instructions: the more they overlap, the surer
 * an interleaving store shows). */
enum { SETTERS = 2, READERS = 2, SETS_EACH = 100000, READS_EACH = 200000 };

static bool limits_eq(const struct sl_limits *a, const struct sl_limits *b)
{
	return a->min == b->min && a->soft == b->soft && a->high == b->high && a->max == b->max;
}

static bool limits_written(const struct sl_limits *l)
{
	return limits_eq(l, &big_set) || limits_eq(l, &small_set);
}

struct setters_race {
	sl_group *g;
	struct gate start;
	atomic_int setting; /* setters not done yet */
	atomic_int reading; /* readers not done with their share yet */
	atomic_int ids;     /* numbers the setters */
};

static void *setter_thread(void *arg)
{
	struct setters_race *r = arg;
	/* Each setter starts on its own set, so that they disagree. */
	int id = atomic_fetch_add(&r->ids, 1);

	gate_wait(&r->start);
	for (long i = 0; i < SETS_EACH || atomic_load(&r->reading) > 0; i++) {
		const struct sl_limits *lim = (i + id) % 2 ? &big_set : &small_set;

		T_CHECK(sl_group_set_limits(r->g, lim) == 0, "set %ld failed", i);
	}
	atomic_fetch_sub(&r->setting, 1);
	return NULL;
}

/* One read of g's limits, through both calls that give them. */
static void read_one_set(sl_group *g, long n)
{
	struct sl_limits l;
	struct sl_stats st;

	T_CHECK(sl_group_limits(g, &l) == 0, "sl_group_limits");
	T_CHECK(limits_written(&l),
		"read min %" PRIu64 " soft %" PRIu64 " high %" PRIu64 " max %" PRIu64 ", a set nobody wrote",
		l.min, l.soft, l.high, l.max);
	if (n % 16 == 0) {
		T_CHECK(sl_group_stats(g, &st) == 0, "sl_group_stats");
		T_CHECK(limits_written(&st.limits),
			"stats: min %" PRIu64 " soft %" PRIu64 " high %" PRIu64 " max %" PRIu64
			", a set nobody wrote",
			st.limits.min, st.limits.soft, st.limits.high, st.limits.max);
	}
}

static void *limits_reader_thread(void *arg)
{
	struct setters_race *r = arg;
	long n;

	gate_wait(&r->start);
	for (n = 0; n < READS_EACH; n++)
		read_one_set(r->g, n);
	atomic_fetch_sub(&r->reading, 1);
	for (; atomic_load(&r->setting) > 0; n++)
		read_one_set(r->g, n);
	return NULL;
}

/* Regression: concurrent sl_group_set_limits() of one group stored their
 * fields interleaved, leaving soft or min above max; readers saw mixes. */
START_TEST(concurrent_setters_of_one_group_apply_whole_sets)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *g = group_new_lim(sl_tree_root(t), "g", &big_set);
	struct setters_race r = { .g = g, .setting = SETTERS, .reading = READERS };
	pthread_t th[SETTERS + READERS];
	struct sl_limits end;

	thread_failure_reset();
	gate_init(&r.start);
	for (int i = 0; i < SETTERS + READERS; i++)
		start_thread(&th[i], i < SETTERS ? setter_thread : limits_reader_thread, &r);
	gate_open(&r.start);
	for (int i = 0; i < SETTERS + READERS; i++)
		join_thread(th[i]);
	gate_destroy(&r.start);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_int_eq(sl_group_limits(g, &end), 0);
	ck_assert_msg(limits_written(&end),
		      "%s: the group ended with min %" PRIu64 " soft %" PRIu64 " high %" PRIu64
		      " max %" PRIu64 ", a set nobody wrote",
		      test_batch_name(_i), end.min, end.soft, end.high, end.max);
	ck_assert_int_eq(sl_group_destroy(g), 0);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

static Suite *setlimits_suite(void)
{
	Suite *s = suite_create("setlimits");
	TCase *tc;

	tc = tcase_create("one thread");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, a_lowered_max_holds_for_a_charge_from_a_stock, 0, 2 * NCTX);
	tcase_add_loop_test(tc, a_lowered_high_counts_a_charge_from_a_stock_that_passes_it, 0, 2 * NCTX);
	tcase_add_loop_test(tc, a_lowered_high_counts_a_charge_from_a_stock_in_the_same_context, 0, 2 * NCTX);
	suite_add_tcase(s, tc);

	tc = tcase_create("another thread");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, a_max_lowered_while_another_thread_holds_a_stock_holds_for_it, 0, 2 * NCTX);
	tcase_add_loop_test(tc, a_high_lowered_while_another_thread_holds_a_stock_holds_for_it, 0, 2 * NCTX);
	tcase_add_test(tc, a_max_lowered_during_a_keep_holds_for_the_kept_units);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrent setters");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, concurrent_setters_of_one_group_apply_whole_sets, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(setlimits_suite());
}
