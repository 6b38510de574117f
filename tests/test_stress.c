/* SPDX-License-Identifier: MIT */
/*
 * Multi-thread stress: 4 threads charge and uncharge at random over a
 * three-level tree with maxes at several levels, while a monitor samples
 * every group.  No unforced charge may ever take a group past its max (peak
 * is the witness); failures leave no trace (the ledgers balance to 0 at the
 * end); every failure is one oom event.  Forced charges go to a subtree of
 * their own, so the unforced one stays checkable.
 *
 * Runs for SL_STRESS_SECONDS per batch setting (default 1, so 2 s in all).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "helpers.h"

#define WORKERS 4

/*
 *   root (unlimited)
 *   +- u (200000)                unforced subtree
 *   |  +- u1 (80000)
 *   |  |  +- u1a (50000)
 *   |  |  +- u1b
 *   |  +- u2 (120000)
 *   |     +- u2a (30000)
 *   |     +- u2b (100000)
 *   +- f (100000)                forced charges allowed here
 *      +- f1 (40000)
 *      +- f2
 */
enum { G_ROOT, G_U, G_U1, G_U1A, G_U1B, G_U2, G_U2A, G_U2B, G_F, G_F1, G_F2, NGROUPS };

static const struct {
	const char *name;
	int parent;
	uint64_t max;
	int forced; /* in the forced subtree */
} shape[NGROUPS] = {
	[G_ROOT] = { "", -1, SL_UNLIMITED, 0 },
	[G_U] = { "u", G_ROOT, 200000, 0 },
	[G_U1] = { "u1", G_U, 80000, 0 },
	[G_U1A] = { "u1a", G_U1, 50000, 0 },
	[G_U1B] = { "u1b", G_U1, SL_UNLIMITED, 0 },
	[G_U2] = { "u2", G_U, 120000, 0 },
	[G_U2A] = { "u2a", G_U2, 30000, 0 },
	[G_U2B] = { "u2b", G_U2, 100000, 0 },
	[G_F] = { "f", G_ROOT, 100000, 1 },
	[G_F1] = { "f1", G_F, 40000, 1 },
	[G_F2] = { "f2", G_F, SL_UNLIMITED, 1 },
};

struct stress {
	sl_group *g[NGROUPS];
	double until;
	atomic_int workers_left;
	atomic_ulong ops, enomem_u, enomem_f, forced;
	atomic_ulong samples;
};

struct worker_arg {
	struct stress *s;
	int id;
};

static void *worker(void *arg)
{
	struct worker_arg *a = arg;
	struct stress *s = a->s;
	uint64_t rng = 0x51ed2701u * (uint64_t)(a->id + 1) + 12345u;
	uint64_t held[NGROUPS] = { 0 }, total = 0;
	unsigned long ops = 0, enomem_u = 0, enomem_f = 0, forced = 0;
	int i;

	/* Until the maxes were really hit (see the test), each worker having
	 * done some work. */
	while (run_more(s->until, ops > 0 && atomic_load(&s->enomem_u) > 0)) {
		for (i = 0; i < 32; i++, ops++) {
			int gi = (int)rng_range(&rng, 1, NGROUPS - 1);
			uint64_t r = rng_range(&rng, 0, 99);

			if ((r < 55 && total < 150000) || held[gi] == 0) {
				uint64_t amount = r < 10 ? rng_range(&rng, 5000, 40000) : rng_range(&rng, 1, 3000);
				unsigned flags = (r % 4 == 0) ? SL_NORECLAIM : 0;
				int rc;

				if (total >= 300000)
					continue; /* forced charges are bounded too */
				if (shape[gi].forced && r % 5 == 0)
					flags |= SL_FORCE;
				rc = sl_charge(s->g[gi], amount, flags);
				if (flags & SL_FORCE) {
					T_CHECK(rc == 0, "forced charge %" PRIu64 " to %s: %d", amount, shape[gi].name, rc);
					forced++;
				} else {
					T_CHECK(rc == 0 || rc == -ENOMEM, "charge to %s: %d", shape[gi].name, rc);
				}
				if (rc == 0) {
					held[gi] += amount;
					total += amount;
				} else if (rc == -ENOMEM) {
					if (shape[gi].forced)
						enomem_f++;
					else if (!enomem_u++)
						atomic_fetch_add(&s->enomem_u, 1);
				}
			} else {
				uint64_t amount = r < 70 ? held[gi] : rng_range(&rng, 1, held[gi]);
				int rc = sl_uncharge(s->g[gi], amount);

				T_CHECK(rc == 0, "uncharge %" PRIu64 " of %" PRIu64 " from %s: %d", amount, held[gi],
					shape[gi].name, rc);
				held[gi] -= amount;
				total -= amount;
			}
		}
	}
	for (i = 1; i < NGROUPS; i++)
		if (held[i])
			T_CHECK(sl_uncharge(s->g[i], held[i]) == 0, "final uncharge from %s", shape[i].name);
	atomic_fetch_add(&s->ops, ops);
	atomic_fetch_add(&s->enomem_u, enomem_u ? enomem_u - 1 : 0);
	atomic_fetch_add(&s->enomem_f, enomem_f);
	atomic_fetch_add(&s->forced, forced);
	atomic_fetch_sub(&s->workers_left, 1);
	return NULL;
}

/* Samples every group while workers run: in the unforced subtree, neither
 * peak nor usage ever passes max; nowhere does a counter wrap. */
static void *monitor(void *arg)
{
	struct stress *s = arg;
	unsigned long samples = 0;

	/* At least one sample, however late this thread runs. */
	do {
		int i;

		for (i = 0; i < NGROUPS; i++) {
			struct sl_stats st;

			if (sl_group_stats(s->g[i], &st)) {
				T_CHECK(0, "stats of %s failed", shape[i].name);
				continue;
			}
			T_CHECK(st.usage < (UINT64_C(1) << 40) && st.stocked < (UINT64_C(1) << 40),
				"%s: usage %" PRIu64 " stocked %" PRIu64 " look wrapped", shape[i].name, st.usage,
				st.stocked);
			T_CHECK(st.peak < (UINT64_C(1) << 40), "%s: peak %" PRIu64 " looks wrapped", shape[i].name,
				st.peak);
			if (!shape[i].forced) {
				T_CHECK(st.peak <= shape[i].max, "%s: peak %" PRIu64 " > max %" PRIu64, shape[i].name,
					st.peak, shape[i].max);
				T_CHECK(st.usage <= shape[i].max, "%s: usage %" PRIu64 " > max %" PRIu64, shape[i].name,
					st.usage, shape[i].max);
			}
		}
		samples++;
	} while (atomic_load(&s->workers_left) > 0);
	atomic_fetch_add(&s->samples, samples);
	return NULL;
}

START_TEST(random_charges_from_four_threads_never_pass_max_and_balance_to_zero)
{
	struct stress s;
	struct worker_arg args[WORKERS];
	pthread_t th[WORKERS], mon;
	sl_tree *t = tree_new(test_batch(_i), shape[G_ROOT].max);
	uint64_t oom_u = 0, max_u = 0, oom_f = 0;
	int i;

	thread_failure_reset();
	memset(&s, 0, sizeof(s));
	atomic_init(&s.workers_left, WORKERS);
	atomic_init(&s.ops, 0);
	atomic_init(&s.enomem_u, 0);
	atomic_init(&s.enomem_f, 0);
	atomic_init(&s.forced, 0);
	atomic_init(&s.samples, 0);
	s.g[G_ROOT] = sl_tree_root(t);
	for (i = 1; i < NGROUPS; i++)
		s.g[i] = group_new(s.g[shape[i].parent], shape[i].name, shape[i].max);
	s.until = now_seconds() + test_seconds("SL_STRESS_SECONDS", 1.0);

	for (i = 0; i < WORKERS; i++) {
		args[i].s = &s;
		args[i].id = i;
		start_thread(&th[i], worker, &args[i]);
	}
	start_thread(&mon, monitor, &s);
	for (i = 0; i < WORKERS; i++)
		join_thread(th[i]);
	join_thread(mon);
	ASSERT_NO_THREAD_FAILURE();

	ck_assert_uint_gt(atomic_load(&s.ops), 0);
	ck_assert_uint_gt(atomic_load(&s.samples), 0);
	ck_assert_uint_gt(atomic_load(&s.enomem_u), 0); /* the maxes were really hit */
	for (i = 0; i < NGROUPS; i++) {
		struct sl_stats st = stats_of(s.g[i]);

		ck_assert_msg(st.usage == 0, "%s: usage %" PRIu64 " after every ledger balanced", shape[i].name,
			      st.usage);
		ck_assert_msg(st.stocked == 0, "%s: stocked %" PRIu64 " after every worker exited", shape[i].name,
			      st.stocked);
		if (shape[i].forced) {
			oom_f += st.events_oom;
		} else {
			ck_assert_msg(st.peak <= shape[i].max, "%s: peak %" PRIu64 " > max %" PRIu64, shape[i].name,
				      st.peak, shape[i].max);
			oom_u += st.events_oom;
			max_u += st.events_max;
		}
	}
	/* each failed charge is one oom event on the one group whose max it hit */
	ck_assert_uint_eq(oom_u, atomic_load(&s.enomem_u));
	ck_assert_uint_eq(oom_f, atomic_load(&s.enomem_f));
	ck_assert_uint_ge(max_u, oom_u);
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

static Suite *stress_suite(void)
{
	Suite *s = suite_create("stress");
	TCase *tc = tcase_create("random charges");

	tcase_add_loop_test(tc, random_charges_from_four_threads_never_pass_max_and_balance_to_zero, 0,
			    SL_TEST_NBATCH);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(stress_suite());
}
