/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the lease suites (test_lease.c, test_lease_shm.c): a unique
 * shm: store per test, budgets and groups that must be made, the store's
 * invariant checked on a participants snapshot, and waits for an event
 * with a generous deadline (never a time window).
 */
#ifndef SL_TESTS_LEASE_HELPERS_H
#define SL_TESTS_LEASE_HELPERS_H

/* setenv() and the like: this header comes first in the lease suites. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <softlimit/lease.h>

#include "helpers.h"

/* Every wait for an event gives up after this long (a loaded 2-core box). */
#define LEASE_DEADLINE_S 60.0

/* The suite's process: every store name of a run starts "t<run>.", so that
 * lease_cleanup() finds what a failed test (which never reached its own
 * unlink) left behind. */
static inline long lease_run_id(void)
{
	const char *v = getenv("SL_LEASE_TEST_RUN");

	return v ? atol(v) : (long)getpid();
}

/* A store name no other test uses: "t<run>.<pid>.<n>". */
static inline void lease_name(char *buf, size_t size)
{
	static int n;

	snprintf(buf, size, "t%ld.%d.%d", lease_run_id(), (int)getpid(), n++);
}

/* In main(): before the tests, name the run; after them, remove its stores. */
static inline void lease_run_begin(void)
{
	char v[32];

	snprintf(v, sizeof(v), "%ld", (long)getpid());
	setenv("SL_LEASE_TEST_RUN", v, 1);
}

static inline void lease_run_end(void)
{
	char prefix[64];
	DIR *d = opendir("/dev/shm");
	struct dirent *e;

	if (!d)
		return;
	snprintf(prefix, sizeof(prefix), "softlimit-t%ld.", lease_run_id());
	while ((e = readdir(d)) != NULL) {
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			char path[300];

			snprintf(path, sizeof(path), "/%s", e->d_name);
			shm_unlink(path);
		}
	}
	closedir(d);
}

/* main() of a lease suite: name the run, run @s as every suite runs
 * (run_suite()), remove the run's stores. */
static inline int lease_main(Suite *s)
{
	int rc;

	lease_run_begin();
	rc = run_suite(s);
	lease_run_end();
	return rc;
}

static inline void lease_url(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "shm:%s", name);
}

static inline void lease_unlink(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/softlimit-%s", name);
	shm_unlink(path);
}

static inline bool lease_object_exists(const char *name)
{
	char path[128];
	struct stat sb;

	snprintf(path, sizeof(path), "/dev/shm/softlimit-%s", name);
	return stat(path, &sb) == 0;
}

static inline sl_lease_store *lease_open(const char *name, uint32_t timeout_ms)
{
	struct sl_lease_store_opts o;
	sl_lease_store *s = NULL;
	char url[128];

	sl_lease_store_opts_init(&o);
	o.timeout_ms = timeout_ms;
	o.node = "test";
	lease_url(url, sizeof(url), name);
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

static inline void budget_make(sl_lease_store *s, const char *name, uint64_t max, uint64_t soft,
			       uint64_t min)
{
	struct sl_limits lim;

	sl_limits_init(&lim);
	lim.max = max;
	lim.soft = soft;
	lim.min = min;
	ck_assert_int_eq(sl_lease_budget_set(s, name, &lim), 0);
}

/* Fast leases for tests: a period of 20 ms, a ttl of 1 s. */
static inline void lease_fast_opts(struct sl_lease_opts *o)
{
	sl_lease_opts_init(o);
	o->period_ms = 20;
	o->ttl_ms = 1000;
	o->margin_ms = 300;
	o->idle_ms = 1000;
}

/* Fast leases that do not lapse while the test runs: for cases that count
 * fences.  With lease_fast_opts the lease's own view ends 700 ms after a
 * renewal is sent; a run thread kept off the CPU longer on a loaded
 * machine (it was, beside busy loops) fences its lease to the floor, as it
 * must.  Here that takes a minute: longer than any of the tests' waits. */
static inline void lease_steady_opts(struct sl_lease_opts *o)
{
	lease_fast_opts(o);
	o->ttl_ms = 60000;
	o->margin_ms = 1000;
}

#define LEASE_MAXP 16

/* The participants now; fails the test on a store error. */
static inline size_t lease_parts(sl_lease_store *s, const char *budget,
				 struct sl_lease_participant *p)
{
	size_t n = 0;

	ck_assert_int_eq(sl_lease_budget_participants(s, budget, p, LEASE_MAXP, &n), 0);
	ck_assert_uint_le(n, LEASE_MAXP);
	return n;
}

/*
 * The store's invariant on one snapshot: the sum of what it counts is at
 * most @max, and every holder's reported usage is within what it holds.
 * Returns the sum.
 */
static inline uint64_t lease_check_parts(const struct sl_lease_participant *p, size_t n,
					 uint64_t max)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		ck_assert_msg(p[i].usage <= p[i].share || p[i].state == SL_LEASE_FENCED,
			      "participant %s reports usage %" PRIu64 " above its share %" PRIu64,
			      p[i].id, p[i].usage, p[i].share);
		ck_assert_uint_le(p[i].floor, p[i].share);
		sum += p[i].share;
	}
	ck_assert_msg(sum <= max, "the store counts %" PRIu64 ", above max %" PRIu64, sum, max);
	return sum;
}

static inline uint64_t lease_check(sl_lease_store *s, const char *budget, uint64_t max)
{
	struct sl_lease_participant p[LEASE_MAXP];

	return lease_check_parts(p, lease_parts(s, budget, p), max);
}

/* A thread's body for pthread_create(): sl_lease_run() on the store @arg. */
static inline void *lease_run_thread(void *arg)
{
	sl_lease_run(arg);
	return NULL;
}

static inline struct sl_lease_stats lease_stats_of(const sl_lease *l)
{
	struct sl_lease_stats st;

	ck_assert_int_eq(sl_lease_stats(l, &st), 0);
	return st;
}

static inline void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Wait (polling every 5 ms) until @cond holds; fail after the deadline. */
#define WAIT_FOR(cond, what)                                                                  \
	do {                                                                                  \
		double wait_end_ = now_seconds() + LEASE_DEADLINE_S;                          \
		while (!(cond)) {                                                             \
			ck_assert_msg(now_seconds() < wait_end_, "timed out waiting for %s",  \
				      (what));                                                \
			nap_ms(5);                                                            \
		}                                                                             \
	} while (0)

static inline struct sl_limits limits_of(sl_group *g)
{
	struct sl_limits lim;

	ck_assert_int_eq(sl_group_limits(g, &lim), 0);
	return lim;
}

static inline void assert_limits_eq(const struct sl_limits *a, const struct sl_limits *b)
{
	ck_assert_uint_eq(a->max, b->max);
	ck_assert_uint_eq(a->soft, b->soft);
	ck_assert_uint_eq(a->min, b->min);
	ck_assert_uint_eq(a->high, b->high);
}

#endif /* SL_TESTS_LEASE_HELPERS_H */
