/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by the Check suites: building trees and groups that
 * must succeed, stats snapshots, the batch settings key tests loop over,
 * time-bounded loops, and failure reporting from threads other than the
 * test's own (Check's ck_assert may only run on the test's thread).
 *
 * Every helper is static inline so that a suite that does not use one gets
 * no unused-function warning.
 */
#ifndef SL_TESTS_HELPERS_H
#define SL_TESTS_HELPERS_H

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <softlimit/softlimit.h>

/* ---- batch settings ---- */

/* The batch settings that key tests run under; a loop test's _i indexes them. */
#define SL_TEST_NBATCH 2

static inline uint64_t test_batch(int i)
{
	return i == 0 ? 0 /* SL_BATCH_DEFAULT */ : SL_BATCH_NONE;
}

static inline const char *test_batch_name(int i)
{
	return i == 0 ? "batch default" : "batch none";
}

/* ---- trees and groups that must be created ---- */

static inline sl_tree *tree_new(uint64_t batch, uint64_t root_max)
{
	struct sl_tree_opts opts;
	sl_tree *t = NULL;

	sl_tree_opts_init(&opts);
	opts.batch = batch;
	/* Exact reclaim at max, so that tests can state what each charge at
	 * max frees; the reclaim batch has tests of its own. */
	opts.reclaim_batch = 0;
	opts.root.max = root_max;
	ck_assert_int_eq(sl_tree_create(&opts, &t), 0);
	ck_assert_ptr_nonnull(t);
	return t;
}

static inline sl_group *group_new_lim(sl_group *parent, const char *name, const struct sl_limits *lim)
{
	sl_group *g = NULL;

	ck_assert_int_eq(sl_group_create(parent, name, lim, NULL, NULL, &g), 0);
	ck_assert_ptr_nonnull(g);
	return g;
}

static inline sl_group *group_new(sl_group *parent, const char *name, uint64_t max)
{
	struct sl_limits lim;

	sl_limits_init(&lim);
	lim.max = max;
	return group_new_lim(parent, name, &lim);
}

/* ---- stats ---- */

static inline struct sl_stats stats_of(sl_group *g)
{
	struct sl_stats s;

	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(sl_group_stats(g, &s), 0);
	return s;
}

static inline uint64_t usage_of(sl_group *g)
{
	return stats_of(g).usage;
}

static inline uint64_t stocked_of(sl_group *g)
{
	return stats_of(g).stocked;
}

#define ASSERT_STAT_FIELD_EQ(a, b, field, what)                                                   \
	ck_assert_msg((a)->field == (b)->field, "%s: " #field " was %" PRIu64 ", now %" PRIu64,  \
		      (what), (a)->field, (b)->field)

/* Every counter and limit of two snapshots is the same. */
static inline void assert_stats_same(const struct sl_stats *before, const struct sl_stats *after,
				     const char *what)
{
	ASSERT_STAT_FIELD_EQ(before, after, usage, what);
	ASSERT_STAT_FIELD_EQ(before, after, stocked, what);
	ASSERT_STAT_FIELD_EQ(before, after, peak, what);
	ASSERT_STAT_FIELD_EQ(before, after, limits.min, what);
	ASSERT_STAT_FIELD_EQ(before, after, limits.soft, what);
	ASSERT_STAT_FIELD_EQ(before, after, limits.high, what);
	ASSERT_STAT_FIELD_EQ(before, after, limits.max, what);
	ASSERT_STAT_FIELD_EQ(before, after, events_low, what);
	ASSERT_STAT_FIELD_EQ(before, after, events_high, what);
	ASSERT_STAT_FIELD_EQ(before, after, events_max, what);
	ASSERT_STAT_FIELD_EQ(before, after, events_oom, what);
	ASSERT_STAT_FIELD_EQ(before, after, reclaimed, what);
}

/* usage 0 and stocked 0: what every group shows once all charges are returned
 * and every thread that charged has exited. */
static inline void assert_empty(sl_group *g, const char *what)
{
	struct sl_stats s = stats_of(g);

	ck_assert_msg(s.usage == 0, "%s: usage %" PRIu64 ", want 0", what, s.usage);
	ck_assert_msg(s.stocked == 0, "%s: stocked %" PRIu64 ", want 0", what, s.stocked);
}

/* The library's own invariant check of a quiet tree (no charge in flight). */
static inline void assert_tree_ok(sl_tree *t)
{
	ck_assert_int_eq(sl_tree_check(t), 0);
}

/* ---- time ---- */

static inline double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * How long a test waits for something that must happen (a thread's first
 * operation, a background reclaim, a server's answer) before it calls it a
 * failure: generous, since a loaded 2-core machine may give a thread no CPU
 * for seconds; a passing test never waits it out.
 */
#define SL_TEST_DEADLINE 30.0

/*
 * The condition of a loop that runs for a while: go on until @until, and
 * after it while what the test asserts on is not @done yet, up to
 * SL_TEST_DEADLINE more.  So the assertions count operations, never what a
 * time window held: on a busy machine the window may pass before a thread
 * ever ran.
 */
static inline int run_more(double until, int done)
{
	double now = now_seconds();

	return now < until || (!done && now < until + SL_TEST_DEADLINE);
}

/* Seconds a time-bounded test runs: @env if set to a positive number, else @dflt. */
static inline double test_seconds(const char *env, double dflt)
{
	const char *v = getenv(env);
	char *end = NULL;
	double d;

	if (!v || !*v)
		return dflt;
	d = strtod(v, &end);
	return (end && *end == '\0' && d > 0) ? d : dflt;
}

/* A small deterministic PRNG (xorshift64*), one state per thread. */
static inline uint64_t rng_next(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * UINT64_C(2685821657736338717);
}

/* rng_next() below @n (0 for 0). */
static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

/* Check logs every ck_assert it passes (a write per call): random rounds
 * that check thousands of facts call this instead, which aborts only on
 * failure. */
#define REQUIRE(cond, ...)                                                                         \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg(__VA_ARGS__);                                                 \
	} while (0)

/* Uniform-ish in [lo, hi]. */
static inline uint64_t rng_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
	return lo + rng_next(state) % (hi - lo + 1);
}

/* ---- failures seen by threads other than the test's ---- */

struct thread_failure {
	pthread_mutex_t lock;
	atomic_int count;
	char first[512];
};

static inline struct thread_failure *thread_failure(void)
{
	static struct thread_failure f = { PTHREAD_MUTEX_INITIALIZER, 0, "" };

	return &f;
}

static inline void thread_fail(const char *file, int line, const char *fmt, ...)
{
	struct thread_failure *f = thread_failure();
	va_list ap;

	pthread_mutex_lock(&f->lock);
	if (atomic_fetch_add_explicit(&f->count, 1, memory_order_relaxed) == 0) {
		int n = snprintf(f->first, sizeof(f->first), "%s:%d: ", file, line);

		if (n > 0 && (size_t)n < sizeof(f->first)) {
			va_start(ap, fmt);
			vsnprintf(f->first + n, sizeof(f->first) - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	pthread_mutex_unlock(&f->lock);
}

/* Check @cond on any thread; the test's thread asserts with ASSERT_NO_THREAD_FAILURE(). */
#define T_CHECK(cond, ...)                                                    \
	do {                                                                  \
		if (!(cond))                                                  \
			thread_fail(__FILE__, __LINE__, __VA_ARGS__);         \
	} while (0)

static inline int thread_failures(void)
{
	return atomic_load_explicit(&thread_failure()->count, memory_order_relaxed);
}

/* Forget failures of an earlier test (one process runs them all with CK_FORK=no). */
static inline void thread_failure_reset(void)
{
	struct thread_failure *f = thread_failure();

	pthread_mutex_lock(&f->lock);
	atomic_store_explicit(&f->count, 0, memory_order_relaxed);
	f->first[0] = '\0';
	pthread_mutex_unlock(&f->lock);
}

/* Copies the first message under the lock, then asserts outside it: a failed
 * ck_assert leaves the test by longjmp when CK_FORK=no. */
#define ASSERT_NO_THREAD_FAILURE()                                                      \
	do {                                                                             \
		struct thread_failure *tf_ = thread_failure();                           \
		char first_[sizeof(tf_->first)];                                         \
		int n_;                                                                  \
		pthread_mutex_lock(&tf_->lock);                                          \
		n_ = atomic_load(&tf_->count);                                           \
		memcpy(first_, tf_->first, sizeof(first_));                              \
		pthread_mutex_unlock(&tf_->lock);                                        \
		ck_assert_msg(n_ == 0, "%d failure(s) in threads; first: %s", n_, first_); \
	} while (0)

static inline void start_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	ck_assert_int_eq(pthread_create(th, NULL, fn, arg), 0);
}

static inline void join_thread(pthread_t th)
{
	ck_assert_int_eq(pthread_join(th, NULL), 0);
}

/* ---- a one-shot gate: a thread waits until the test opens it ---- */

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open;
};

static inline void gate_init(struct gate *g)
{
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	g->open = 0;
}

static inline void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = 1;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

static inline void gate_wait(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static inline void gate_destroy(struct gate *g)
{
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

/* ---- running a suite ---- */

/* Runs @s with the fork mode CK_FORK asks for; the process's exit status. */
static inline int run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* SL_TESTS_HELPERS_H */
