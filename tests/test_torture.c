/* SPDX-License-Identifier: MIT */
/*
 * Torture: eight threads charge, uncharge, reclaim, change limits and create
 * and destroy groups at once, under every policy, with reclaim callbacks that
 * re-enter the library, while a background reclaimer keeps the root under
 * its headroom.  Each policy runs with its own reclaim batch (the default, 0,
 * a small one).  A monitor samples the counters meanwhile.  At the end every
 * counter reconciles to zero, every stock is back, the tree's invariants
 * hold, the root never passed its max, and a group whose min is all it holds
 * kept every unit.
 *
 * Bounded by SL_TORTURE_SECONDS (default 2, split across the policies); run
 * it for minutes by hand, under TSan:
 *   SL_TORTURE_SECONDS=600 build/tsan/tests/test_torture
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <softlimit/softlimit.h>

#define CUSTOMERS 4
#define SLOTS 4 /* namespaces per customer, created and destroyed as we go */
#define WORKERS 8
#define ROOT_MAX (1u << 20)
#define ROOT_HEADROOM (128u << 10)
#define KEEP (64u << 10) /* the keeper's min and all it holds */

/* What the host holds for a group: never more than is charged to it. */
struct host {
	pthread_mutex_t lock;
	uint64_t held;
};

struct slot {
	pthread_rwlock_t life; /* readers use the group; the writer creates/destroys it */
	sl_group *g;           /* NULL when absent */
	struct host host;
	unsigned gen;
};

struct world {
	sl_tree *tree;
	sl_group *cust[CUSTOMERS];
	struct host chost[CUSTOMERS];
	struct slot slot[CUSTOMERS][SLOTS];
	sl_group *keeper; /* min KEEP, charged KEEP, has a callback: never reclaimed */
	struct host khost;
	int bg_rc;
	atomic_bool stop;
	atomic_ulong ops, reclaimed_said, failures;
	atomic_ulong errors; /* anything that must not happen */
	char first_error[160];
	pthread_mutex_t err_lock;
};

static struct world W;

static void bad(const char *what, long a, long b)
{
	pthread_mutex_lock(&W.err_lock);
	if (!atomic_fetch_add(&W.errors, 1))
		snprintf(W.first_error, sizeof(W.first_error), "%s (%ld, %ld)", what, a, b);
	pthread_mutex_unlock(&W.err_lock);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void host_add(struct host *h, uint64_t n)
{
	pthread_mutex_lock(&h->lock);
	h->held += n;
	pthread_mutex_unlock(&h->lock);
}

static uint64_t host_take(struct host *h, uint64_t n)
{
	uint64_t f;

	pthread_mutex_lock(&h->lock);
	f = n < h->held ? n : h->held;
	h->held -= f;
	pthread_mutex_unlock(&h->lock);
	return f;
}

/*
 * Evict up to target, then re-enter: charge a little to a customer (never
 * reclaims inside a callback), read stats, and try a nested reclaim and a
 * destroy, which must refuse.
 */
static uint64_t evict(sl_group *g, uint64_t target, void *ctx)
{
	struct host *h = ctx;
	uint64_t f = host_take(h, target), seed = (uintptr_t)g ^ target;
	struct sl_stats st;
	int c = (int)(rnd(&seed) % CUSTOMERS), rc;

	if (f && (rc = sl_uncharge(g, f)) != 0)
		bad("uncharge of held units in a callback", rc, (long)f);
	if (sl_charge(W.cust[c], 8, SL_NORECLAIM) == 0)
		host_add(&W.chost[c], 8);
	if (sl_group_stats(g, &st) != 0)
		bad("stats in a callback", 0, 0);
	if (sl_reclaim(g, 1, 0) != 0)
		bad("nested sl_reclaim returned nonzero", 0, 0);
	if (sl_group_destroy(g) != -EBUSY)
		bad("destroy inside a callback did not return -EBUSY", 0, 0);
	return f;
}

static const struct sl_ops ops = { .reclaim = evict };

static void charge_into(sl_group *g, struct host *h, uint64_t n, unsigned flags)
{
	int rc = sl_charge(g, n, flags);

	if (rc == 0)
		host_add(h, n);
	else if (rc == -ENOMEM && !(flags & SL_FORCE))
		atomic_fetch_add(&W.failures, 1);
	else
		bad("charge", rc, (long)n);
}

static void uncharge_from(sl_group *g, struct host *h, uint64_t n)
{
	uint64_t f = host_take(h, n);
	int rc;

	if (f && (rc = sl_uncharge(g, f)) != 0)
		bad("uncharge of held units", rc, (long)f);
}

static void slot_create(struct slot *s, int c, uint64_t *seed)
{
	struct sl_limits l;
	char name[32];
	int rc;

	sl_limits_init(&l);
	l.soft = rnd(seed) % 4 ? (rnd(seed) % 64) * 1024 : 0;
	l.max = rnd(seed) % 2 ? SL_UNLIMITED : l.soft + 64 * 1024;
	snprintf(name, sizeof(name), "ns%d-%u", (int)(s - W.slot[c]), s->gen++);
	rc = sl_group_create(W.cust[c], name, &l, &ops, &s->host, &s->g);
	if (rc)
		bad("namespace create", rc, c);
}

static void slot_destroy(struct slot *s)
{
	int rc;

	uncharge_from(s->g, &s->host, UINT64_MAX);
	rc = sl_group_destroy(s->g);
	if (rc)
		bad("destroy of an emptied namespace", rc, 0);
	s->g = NULL;
}

static void *worker(void *arg)
{
	uint64_t seed = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;

	while (!atomic_load(&W.stop)) {
		int c = (int)(rnd(&seed) % CUSTOMERS), k = (int)(rnd(&seed) % SLOTS);
		struct slot *s = &W.slot[c][k];
		unsigned op = (unsigned)(rnd(&seed) % 100);
		uint64_t n = 1 + rnd(&seed) % 8192;

		atomic_fetch_add(&W.ops, 1);
		if (op < 4) { /* create or destroy a namespace */
			pthread_rwlock_wrlock(&s->life);
			if (s->g)
				slot_destroy(s);
			else
				slot_create(s, c, &seed);
			pthread_rwlock_unlock(&s->life);
			continue;
		}
		if (op < 8) { /* change a customer's limits */
			struct sl_limits l;
			int rc;

			sl_limits_init(&l);
			l.soft = (rnd(&seed) % 256) * 1024;
			l.min = rnd(&seed) % 4 ? 0 : l.soft / 4;
			l.high = rnd(&seed) % 2 ? SL_UNLIMITED : l.soft + 128 * 1024;
			l.max = l.soft + (64 + rnd(&seed) % 512) * 1024;
			rc = sl_group_set_limits(W.cust[c], &l);
			if (rc && rc != -EBUSY)
				bad("set_limits", rc, c);
			continue;
		}
		if (op < 12) { /* reclaim somewhere */
			sl_group *scope = rnd(&seed) % 2 ? sl_tree_root(W.tree) : W.cust[c];

			atomic_fetch_add(&W.reclaimed_said, sl_reclaim(scope, n, 0));
			continue;
		}
		if (op < 14) { /* the safe point for high; a refault report */
			if (op == 13 && sl_refault(W.cust[c], n) != 0)
				bad("refault", -1, c);
			else if (sl_high_pending())
				sl_handle_over_high(W.cust[c]);
			continue;
		}
		if (op < 30) { /* charge or uncharge a customer directly */
			if (op < 22)
				charge_into(W.cust[c], &W.chost[c], n, op == 12 ? SL_NORECLAIM : 0);
			else
				uncharge_from(W.cust[c], &W.chost[c], n);
			continue;
		}
		pthread_rwlock_rdlock(&s->life);
		if (s->g) {
			if (op == 30 && sl_refault(s->g, n) != 0)
				bad("refault", -1, c);
			else if (op < 70)
				charge_into(s->g, &s->host, n, op % 7 == 0 ? SL_NORECLAIM : 0);
			else
				uncharge_from(s->g, &s->host, n + n / 2);
		}
		pthread_rwlock_unlock(&s->life);
	}
	return NULL;
}

/* The root's max never changes and nobody forces: it must always hold. */
static void *monitor(void *arg)
{
	(void)arg;
	while (!atomic_load(&W.stop)) {
		struct sl_stats st;

		if (sl_group_stats(sl_tree_root(W.tree), &st) != 0)
			bad("root stats", 0, 0);
		else if (st.usage + st.stocked > ROOT_MAX || st.peak > ROOT_MAX)
			bad("root above its max", (long)(st.usage + st.stocked), (long)st.peak);
		sched_yield();
	}
	return NULL;
}

static void *background(void *arg)
{
	(void)arg;
	W.bg_rc = sl_background_run(W.tree);
	return NULL;
}

static double seconds_budget(void)
{
	const char *e = getenv("SL_TORTURE_SECONDS");
	double s = e ? atof(e) : 2.0;

	return s > 0 ? s : 2.0;
}

static void run_policy(enum sl_policy policy, uint64_t reclaim_batch, double seconds)
{
	struct sl_tree_opts o;
	struct sl_limits kl;
	pthread_t th[WORKERS], mon, bg;
	struct timespec ts;
	struct sl_stats st;
	int c, k, i;

	sl_tree_opts_init(&o);
	o.policy = policy;
	o.root.max = ROOT_MAX;
	o.reclaim_batch = reclaim_batch;
	ck_assert_int_eq(sl_tree_create(&o, &W.tree), 0);
	ck_assert_int_eq(sl_group_set_headroom(sl_tree_root(W.tree), ROOT_HEADROOM), 0);
	sl_limits_init(&kl);
	kl.min = KEEP;
	ck_assert_int_eq(sl_group_create(sl_tree_root(W.tree), "keeper", &kl, &ops, &W.khost, &W.keeper), 0);
	ck_assert_int_eq(sl_charge(W.keeper, KEEP, 0), 0);
	W.khost.held = KEEP;
	for (c = 0; c < CUSTOMERS; c++) {
		struct sl_limits l;
		char name[16];

		sl_limits_init(&l);
		l.soft = (uint64_t)(c + 1) * 64 * 1024;
		l.max = ROOT_MAX / 2;
		snprintf(name, sizeof(name), "cust%d", c);
		ck_assert_int_eq(sl_group_create(sl_tree_root(W.tree), name, &l, &ops, &W.chost[c], &W.cust[c]), 0);
		for (k = 0; k < SLOTS; k++)
			W.slot[c][k].g = NULL;
	}
	atomic_store(&W.stop, false);
	ck_assert_int_eq(pthread_create(&mon, NULL, monitor, NULL), 0);
	W.bg_rc = 1;
	ck_assert_int_eq(pthread_create(&bg, NULL, background, NULL), 0);
	for (i = 0; i < WORKERS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1 + 16 * policy)), 0);
	/* Long runs (by hand) say how far they are every 10 s. */
	for (double done = 0; done < seconds;) {
		double step = seconds - done < 10 ? seconds - done : 10;

		ts.tv_sec = (time_t)step;
		ts.tv_nsec = (long)((step - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
		done += step;
		if (seconds >= 30 && done < seconds)
			fprintf(stderr, "torture policy %d: %.0f of %.0f s, %lu ops, %lu errors\n", policy, done,
				seconds, atomic_load(&W.ops), atomic_load(&W.errors));
	}
	atomic_store(&W.stop, true);
	for (i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);
	pthread_join(mon, NULL);
	sl_background_stop(W.tree);
	pthread_join(bg, NULL);
	ck_assert_int_eq(W.bg_rc, 0);

	ck_assert_msg(atomic_load(&W.errors) == 0, "%lu errors, first: %s", atomic_load(&W.errors),
		      W.first_error);
	/* Reconcile: the workers' stocks went back when they exited. */
	for (c = 0; c < CUSTOMERS; c++) {
		for (k = 0; k < SLOTS; k++) {
			if (!W.slot[c][k].g)
				continue;
			ck_assert_int_eq(sl_group_stats(W.slot[c][k].g, &st), 0);
			ck_assert_uint_eq(st.usage, W.slot[c][k].host.held);
			ck_assert_uint_eq(st.stocked, 0);
			slot_destroy(&W.slot[c][k]);
		}
		ck_assert_int_eq(sl_group_stats(W.cust[c], &st), 0);
		ck_assert_uint_eq(st.usage, W.chost[c].held);
		uncharge_from(W.cust[c], &W.chost[c], UINT64_MAX);
	}
	/* min is never reclaimed: the keeper holds all it had. */
	ck_assert_int_eq(sl_group_stats(W.keeper, &st), 0);
	ck_assert_uint_eq(W.khost.held, KEEP);
	ck_assert_uint_eq(st.usage, KEEP);
	ck_assert_uint_eq(st.reclaimed, 0);
	uncharge_from(W.keeper, &W.khost, UINT64_MAX);
	ck_assert_int_eq(sl_group_destroy(W.keeper), 0);
	ck_assert_int_eq(sl_tree_check(W.tree), 0);
	ck_assert_int_eq(sl_group_stats(sl_tree_root(W.tree), &st), 0);
	ck_assert_uint_eq(st.usage, 0);
	ck_assert_uint_le(st.peak, ROOT_MAX);
	ck_assert_msg(atomic_load(&W.errors) == 0, "%lu errors, first: %s", atomic_load(&W.errors),
		      W.first_error);
	fprintf(stderr,
		"torture policy %d, reclaim batch %lu: %lu ops in %.1f s, %lu charges refused at max, "
		"%lu units reclaimed by sl_reclaim\n",
		policy, (unsigned long)reclaim_batch, atomic_load(&W.ops), seconds, atomic_load(&W.failures),
		atomic_load(&W.reclaimed_said));
	atomic_store(&W.ops, 0);
	atomic_store(&W.failures, 0);
	atomic_store(&W.reclaimed_said, 0);
	sl_tree_destroy(W.tree);
}

START_TEST(everything_at_once_reconciles_to_zero_under_every_policy)
{
	double s = seconds_budget() / 4;

	run_policy(SL_POLICY_GUARANTEE, SL_RECLAIM_BATCH_DEFAULT, s);
	run_policy(SL_POLICY_GATEKEEPER, 0, s);
	run_policy(SL_POLICY_PROTECTION, 16 * 1024, s);
	run_policy(SL_POLICY_REFAULT, SL_RECLAIM_BATCH_DEFAULT, s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("torture");
	TCase *tc = tcase_create("all at once");
	SRunner *sr;
	int c, k, failed;

	pthread_mutex_init(&W.err_lock, NULL);
	for (c = 0; c < CUSTOMERS; c++) {
		pthread_mutex_init(&W.chost[c].lock, NULL);
		if (c == 0)
			pthread_mutex_init(&W.khost.lock, NULL);
		for (k = 0; k < SLOTS; k++) {
			pthread_rwlock_init(&W.slot[c][k].life, NULL);
			pthread_mutex_init(&W.slot[c][k].host.lock, NULL);
		}
	}
	tcase_set_timeout(tc, seconds_budget() * 20 + 60);
	tcase_add_test(tc, everything_at_once_reconciles_to_zero_under_every_policy);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
