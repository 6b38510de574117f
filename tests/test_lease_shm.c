/* SPDX-License-Identifier: MIT */
/*
 * The shm: store across real processes: fork()ed children share a budget,
 * each with its own tree, group, lease and run thread, steered by the test
 * through a shared control block.  The store's invariant (the sum of what it
 * counts is at most max; every holder's reported usage within its share) is
 * checked on every snapshot the test takes, while shares follow demand, a
 * child is killed (SIGKILL), stopped past its ttl (SIGSTOP) or dies holding
 * the store's mutex, and while the mutex is held by a stopped process.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "lease_helpers.h"
#include "lease_int.h"
#include "store_shm.h"

enum want { WANT_NOTHING_SAID = 0, WANT_MORE = 1, WANT_IDLE = 2 };

#define NCHILD 3

/* What the test and one child share. */
struct child_ctl {
	atomic_int want;
	atomic_int quit;
	atomic_int joined;   /* 1 joined, -errno failed */
	atomic_int failed;   /* a check in the child failed: its line */
	_Atomic uint64_t fences, resets;
	pid_t pid;
};

struct ctl {
	char name[64];
	char budget[16];
	struct child_ctl c[NCHILD];
};

static struct ctl *ctl_new(void)
{
	struct ctl *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			     -1, 0);

	ck_assert(c != MAP_FAILED);
	memset(c, 0, sizeof(*c));
	lease_name(c->name, sizeof(c->name));
	snprintf(c->budget, sizeof(c->budget), "b");
	return c;
}

static void ctl_free(struct ctl *c)
{
	lease_unlink(c->name);
	munmap(c, sizeof(*c));
}

/* ---- a child: a host with one group in the budget ---- */

static uint64_t free_some(sl_group *g, uint64_t target, void *ctx)
{
	struct sl_stats st;
	uint64_t n;

	(void)ctx;
	memset(&st, 0, sizeof(st));
	sl_group_stats(g, &st);
	n = target < st.usage ? target : st.usage;
	return n && sl_uncharge(g, n) == 0 ? n : 0;
}

static void child_demand(sl_lease *l, struct sl_lease_demand *out, void *ctx)
{
	struct child_ctl *cc = ctx;

	(void)l;
	if (atomic_load(&cc->want) == WANT_MORE)
		out->evicted = 1000;
	else if (atomic_load(&cc->want) == WANT_IDLE)
		out->idle_ms = UINT64_MAX - 1;
}

#define CHILD_CHECK(cc, cond)                                                                  \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			atomic_store(&(cc)->failed, __LINE__);                                 \
			_exit(1);                                                              \
		}                                                                              \
	} while (0)

/* In a child: its store, and a group "g" in a tree of its own. */
static void child_setup(struct ctl *c, struct child_ctl *cc, sl_lease_store **s, sl_group **g)
{
	static const struct sl_ops ops = { .reclaim = free_some };
	struct sl_lease_store_opts so;
	struct sl_tree_opts to;
	struct sl_limits lim;
	sl_tree *t = NULL;
	char url[128];

	sl_lease_store_opts_init(&so);
	so.node = "child";
	lease_url(url, sizeof(url), c->name);
	CHILD_CHECK(cc, sl_lease_store_open(url, &so, s) == 0);
	sl_tree_opts_init(&to);
	to.batch = SL_BATCH_NONE;
	CHILD_CHECK(cc, sl_tree_create(&to, &t) == 0);
	sl_limits_init(&lim);
	CHILD_CHECK(cc, sl_group_create(sl_tree_root(t), "g", &lim, &ops, NULL, g) == 0);
}

static void __attribute__((noreturn)) child_main(struct ctl *c, int i)
{
	struct child_ctl *cc = &c->c[i];
	struct sl_lease_opts o;
	struct sl_limits lim;
	sl_lease_store *s = NULL;
	sl_lease *l = NULL;
	sl_group *g = NULL;
	pthread_t th;
	int rc;

	child_setup(c, cc, &s, &g);
	lease_fast_opts(&o);
	o.demand = child_demand;
	o.demand_ctx = cc;
	rc = sl_lease_join(s, c->budget, g, &o, &l);
	atomic_store(&cc->joined, rc ? rc : 1);
	if (rc)
		_exit(2);
	CHILD_CHECK(cc, pthread_create(&th, NULL, lease_run_thread, s) == 0);
	while (!atomic_load(&cc->quit)) {
		struct sl_lease_stats st;
		struct sl_stats gs;

		CHILD_CHECK(cc, sl_group_limits(g, &lim) == 0);
		CHILD_CHECK(cc, sl_group_stats(g, &gs) == 0);
		if (atomic_load(&cc->want) == WANT_MORE && gs.usage < lim.max)
			(void)sl_charge(g, lim.max - gs.usage, SL_NORECLAIM);
		CHILD_CHECK(cc, sl_lease_stats(l, &st) == 0);
		atomic_store(&cc->fences, st.fences);
		atomic_store(&cc->resets, st.store_resets);
		nap_ms(2);
	}
	/* The last figures, so that the test reads them after quit_child(). */
	{
		struct sl_lease_stats st;

		CHILD_CHECK(cc, sl_lease_stats(l, &st) == 0);
		atomic_store(&cc->fences, st.fences);
		atomic_store(&cc->resets, st.store_resets);
	}
	CHILD_CHECK(cc, sl_lease_leave(l) == 0);
	sl_lease_stop(s);
	pthread_join(th, NULL);
	sl_lease_store_close(s);
	_exit(0);
}

/* In a child: it dies with the test.  A check that fails in the test leaves
 * without reaping its children, and a child left running would hold the
 * suite's output open until ctest's timeout. */
static void die_with_parent(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(4);
}

static pid_t spawn(struct ctl *c, int i)
{
	pid_t parent = getpid(), pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		die_with_parent(parent);
		child_main(c, i);
	}
	c->c[i].pid = pid;
	return pid;
}

static void reap_child(struct ctl *c, int i, bool killed)
{
	int status = 0;

	ck_assert_int_eq(waitpid(c->c[i].pid, &status, 0), c->c[i].pid);
	ck_assert_msg(atomic_load(&c->c[i].failed) == 0, "child %d failed at line %d", i,
		      atomic_load(&c->c[i].failed));
	if (!killed)
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "child %d: status %d", i, status);
	c->c[i].pid = 0;
}

static void quit_child(struct ctl *c, int i)
{
	atomic_store(&c->c[i].quit, 1);
	reap_child(c, i, false);
}

/* The participant record of process @pid in @p, or NULL. */
static const struct sl_lease_participant *of_pid(const struct sl_lease_participant *p, size_t n,
						 pid_t pid)
{
	char key[32];
	size_t i;

	snprintf(key, sizeof(key), ":%d:", (int)pid);
	for (i = 0; i < n; i++)
		if (strstr(p[i].id, key))
			return &p[i];
	return NULL;
}

/* One snapshot, checked; the share of @pid's record (0 if none). */
static uint64_t share_of(sl_lease_store *s, struct ctl *c, uint64_t max, pid_t pid)
{
	struct sl_lease_participant p[LEASE_MAXP];
	const struct sl_lease_participant *me;
	size_t n = lease_parts(s, c->budget, p);

	lease_check_parts(p, n, max);
	me = of_pid(p, n, pid);
	return me ? me->share : 0;
}

static void wait_joined(struct ctl *c, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		WAIT_FOR(atomic_load(&c->c[i].joined) != 0, "a child's join");
		ck_assert_int_eq(atomic_load(&c->c[i].joined), 1);
	}
}

static void set_hot(struct ctl *c, int n, int hot)
{
	int i;

	for (i = 0; i < n; i++)
		atomic_store(&c->c[i].want, i == hot ? WANT_MORE : WANT_IDLE);
}

static void processes_share_by_demand(int n)
{
	struct ctl *c = ctl_new();
	sl_lease_store *s;
	int i, hot;

	s = lease_open(c->name, 1000);
	budget_make(s, c->budget, 3000, 0, 300);
	for (i = 0; i < n; i++)
		spawn(c, i);
	wait_joined(c, n);
	for (hot = 0; hot < n; hot++) {
		set_hot(c, n, hot);
		WAIT_FOR(share_of(s, c, 3000, c->c[hot].pid) >= 3000 * 3 / 4, "the hot one's share");
	}
	for (i = 0; i < n; i++)
		quit_child(c, i);
	ck_assert_uint_eq(lease_check(s, c->budget, 3000), 0);
	sl_lease_store_close(s);
	ctl_free(c);
}

START_TEST(two_processes_share_a_budget_by_demand_within_max)
{
	processes_share_by_demand(2);
}
END_TEST

START_TEST(three_processes_share_a_budget_by_demand_within_max)
{
	processes_share_by_demand(3);
}
END_TEST

START_TEST(a_killed_process_share_is_free_at_once_for_the_others)
{
	struct sl_lease_participant p[LEASE_MAXP];
	struct ctl *c = ctl_new();
	sl_lease_store *s;
	size_t n;

	s = lease_open(c->name, 1000);
	budget_make(s, c->budget, 3000, 0, 300);
	spawn(c, 0);
	spawn(c, 1);
	wait_joined(c, 2);
	set_hot(c, 2, 0);
	WAIT_FOR(share_of(s, c, 3000, c->c[0].pid) >= 3000 * 3 / 4, "child 0's share");

	ck_assert_int_eq(kill(c->c[0].pid, SIGKILL), 0);
	/* Dead, not yet reaped (a zombie): its memory is gone, so is its share. */
	WAIT_FOR((n = lease_parts(s, c->budget, p)) == 1, "its record gone");
	ck_assert_ptr_nonnull(of_pid(p, n, c->c[1].pid));
	reap_child(c, 0, true);
	/* Reaped: the first read after its death does not count it. */
	ck_assert_uint_eq(lease_parts(s, c->budget, p), 1);
	set_hot(c, 2, 1);
	WAIT_FOR(share_of(s, c, 3000, c->c[1].pid) >= 3000 * 3 / 4, "child 1's share");
	quit_child(c, 1);
	sl_lease_store_close(s);
	ctl_free(c);
}
END_TEST

/*
 * Stop child @i (hot, with its share) for sure before the test goes on (a
 * step of its own could otherwise still shrink it), and outside the store's
 * mutex.  A stop that lands in the middle of one of its store calls leaves
 * the mutex held, and every other store call times out: the case of
 * a_mutex_held_by_a_stopped_process_times_out_and_holders_keep_their_share, not this
 * one's (seen once, TSan under load).  Then it is woken, allowed its
 * share back (its own view may have ended while the store timed out), and
 * stopped again.
 */
static void stop_outside_the_mutex(sl_lease_store *s, struct ctl *c, int i)
{
	struct sl_lease_participant p[LEASE_MAXP];
	size_t n;
	int tries, rc, status;

	for (tries = 0;; tries++) {
		ck_assert_msg(tries < 100, "child %d stopped inside the store's mutex 100 times", i);
		ck_assert_int_eq(kill(c->c[i].pid, SIGSTOP), 0);
		status = 0;
		ck_assert_int_eq(waitpid(c->c[i].pid, &status, WUNTRACED), c->c[i].pid);
		ck_assert(WIFSTOPPED(status));
		rc = sl_lease_budget_participants(s, c->budget, p, LEASE_MAXP, &n);
		if (rc == 0)
			return;
		ck_assert_int_eq(rc, -ETIMEDOUT);
		fprintf(stderr, "child %d was stopped inside the store's mutex: again\n", i);
		ck_assert_int_eq(kill(c->c[i].pid, SIGCONT), 0);
		WAIT_FOR(share_of(s, c, 3000, c->c[i].pid) >= 3000 * 3 / 4, "the share back");
	}
}

START_TEST(a_stopped_process_keeps_its_share_stalled_until_it_wakes)
{
	struct sl_lease_participant p[LEASE_MAXP];
	const struct sl_lease_participant *me;
	struct ctl *c = ctl_new();
	sl_lease_store *s;
	uint64_t held;
	size_t n;

	s = lease_open(c->name, 1000);
	budget_make(s, c->budget, 3000, 0, 300);
	spawn(c, 0);
	spawn(c, 1);
	wait_joined(c, 2);
	set_hot(c, 2, 0);
	WAIT_FOR(share_of(s, c, 3000, c->c[0].pid) >= 3000 * 3 / 4, "child 0's share");

	/* Stopped past its ttl: alive, so its memory still counts. */
	stop_outside_the_mutex(s, c, 0);
	atomic_store(&c->c[1].want, WANT_MORE);
	WAIT_FOR((n = lease_parts(s, c->budget, p), lease_check_parts(p, n, 3000),
		  (me = of_pid(p, n, c->c[0].pid)) && me->state == SL_LEASE_STALLED),
		 "the stalled state");
	held = me->share;
	ck_assert_int_lt(me->expires_ms, 0);
	ck_assert_uint_ge(held, 3000 * 3 / 4);
	/* The other grows only into room nobody holds, whatever it asks. */
	ck_assert_uint_le(share_of(s, c, 3000, c->c[1].pid), 3000 - held);

	ck_assert_int_eq(kill(c->c[0].pid, SIGCONT), 0);
	WAIT_FOR((n = lease_parts(s, c->budget, p), lease_check_parts(p, n, 3000),
		  (me = of_pid(p, n, c->c[0].pid)) && me->state == SL_LEASE_HELD),
		 "the renewal after waking");
	/* The store counted its share all along: it renews it, with no fall
	 * to its floor (its share moves on by demand from here). */
	quit_child(c, 0);
	quit_child(c, 1);
	ck_assert_uint_eq(atomic_load(&c->c[0].fences), 0);
	sl_lease_store_close(s);
	ctl_free(c);
}
END_TEST

/* A child that only opens the store, takes its mutex, and then dies in
 * the middle of a write or waits to be killed. */
static pid_t spawn_locker(struct ctl *c, bool crash, atomic_int *locked)
{
	pid_t parent = getpid(), pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		sl_lease_store *s = NULL;
		char url[128];

		die_with_parent(parent);
		lease_url(url, sizeof(url), c->name);
		if (sl_lease_store_open(url, NULL, &s))
			_exit(2);
		if (crash) {
			if (sl__lease_shm_test_lock(s))
				_exit(3);
			sl__lease_shm_test_crash_locked(s);
		}
		if (sl__lease_shm_test_lock(s))
			_exit(3);
		atomic_store(locked, 1);
		for (;;)
			pause();
	}
	return pid;
}

START_TEST(a_process_dead_with_the_mutex_held_leaves_the_store_whole)
{
	struct sl_lease_participant before[LEASE_MAXP], after[LEASE_MAXP];
	struct ctl *c = ctl_new();
	sl_lease_store *s;
	sl_lease *l = NULL;
	sl_tree *t;
	sl_group *g;
	uint32_t kept[2], counted[2];
	size_t n, m;
	int status;
	pid_t pid;

	s = lease_open(c->name, 1000);
	budget_make(s, c->budget, 3000, 0, 300);
	budget_make(s, "other", 10, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(g, 700, 0), 0);
	ck_assert_int_eq(sl_lease_join(s, c->budget, g, NULL, &l), 0);
	n = lease_parts(s, c->budget, before);
	ck_assert_uint_eq(n, 1);

	pid = spawn_locker(c, true, NULL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* The next locker repairs: the records as they were, the totals
	 * rebuilt from them. */
	m = lease_parts(s, c->budget, after);
	ck_assert_uint_eq(m, 1);
	ck_assert_str_eq(after[0].id, before[0].id);
	ck_assert_uint_eq(after[0].share, before[0].share);
	ck_assert_uint_eq(after[0].floor, before[0].floor);
	ck_assert_uint_eq(after[0].usage, before[0].usage);
	ck_assert_int_eq(sl__lease_shm_test_totals(s, kept, counted), 0);
	ck_assert_uint_eq(counted[0], 2);
	ck_assert_uint_eq(counted[1], 1);
	ck_assert_uint_eq(kept[0], counted[0]);
	ck_assert_uint_eq(kept[1], counted[1]);
	/* And it works on. */
	budget_make(s, "third", 10, 0, 0);
	ck_assert_int_eq(sl_lease_leave(l), 0);
	ck_assert_uint_eq(lease_parts(s, c->budget, after), 0);
	ck_assert_int_eq(sl_uncharge(g, 700), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	ctl_free(c);
}
END_TEST

START_TEST(a_mutex_held_by_a_stopped_process_times_out_and_holders_keep_their_share)
{
	struct sl_lease_opts o;
	struct sl_lease_stats st;
	struct sl_limits lim;
	struct ctl *c = ctl_new();
	atomic_int *locked = mmap(NULL, sizeof(*locked), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	sl_lease_store *s;
	sl_lease *l = NULL;
	sl_tree *t;
	sl_group *g, *h;
	pthread_t th;
	pid_t pid;
	int status;

	ck_assert(locked != MAP_FAILED);
	atomic_init(locked, 0);
	s = lease_open(c->name, 200);
	budget_make(s, c->budget, 3000, 0, 300);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	h = group_new(sl_tree_root(t), "h", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(g, 100, 0), 0);
	lease_fast_opts(&o);
	ck_assert_int_eq(sl_lease_join(s, c->budget, g, &o, &l), 0);
	pid = spawn_locker(c, false, locked);
	WAIT_FOR(atomic_load(locked), "the locker");
	ck_assert_int_eq(kill(pid, SIGSTOP), 0);
	start_thread(&th, lease_run_thread, s);

	/* Every call gives up after the store's timeout. */
	ck_assert_int_eq(sl_lease_budget_get(s, c->budget, &lim), -ETIMEDOUT);
	sl_limits_init(&lim);
	lim.max = 10;
	ck_assert_int_eq(sl_lease_budget_set(s, "x", &lim), -ETIMEDOUT);
	ck_assert_int_eq(sl_lease_join(s, c->budget, h, NULL, &l), -ETIMEDOUT);
	ck_assert_uint_eq(limits_of(h).max, SL_UNLIMITED);
	/* The holder cannot renew, past its own view of the lease; the
	 * store counts a live process's record whatever its expiry, so the
	 * holder keeps its share, and tries again. */
	WAIT_FOR(lease_stats_of(l).store_errors > 0 && lease_stats_of(l).expires_ms < 0,
		 "store errors past the lease");
	st = lease_stats_of(l);
	ck_assert_int_eq(st.state, SL_LEASE_HELD);
	ck_assert_uint_eq(st.fences, 0);
	ck_assert_uint_ge(st.share, 100);
	ck_assert_uint_eq(limits_of(g).max, st.share);

	/* The locker dies: the next locker recovers and the holder renews. */
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	WAIT_FOR(lease_stats_of(l).renewals > st.renewals && lease_stats_of(l).expires_ms > 0,
		 "the renewal");
	ck_assert_uint_eq(lease_stats_of(l).fences, 0);
	ck_assert_int_eq(sl_lease_budget_get(s, c->budget, &lim), 0);
	ck_assert_uint_eq(lim.max, 3000);
	sl_lease_stop(s);
	join_thread(th);
	ck_assert_int_eq(sl_lease_leave(l), 0);
	ck_assert_int_eq(sl_uncharge(g, 100), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	munmap(locked, sizeof(*locked));
	ctl_free(c);
}
END_TEST

/* ---- the stats at every change of a lease (the publish hook) ---- */

#define WATCHED 3

/* What the hook saw; it runs on the thread that changed the lease. */
static struct watch {
	sl_group *g[WATCHED];
	struct child_ctl want[WATCHED]; /* only .want: the demand's steer */
	uint64_t shown[WATCHED];        /* the share the last publish showed */
	atomic_int bad;                 /* the line of the first failed check */
	char what[200];
	atomic_uint raises_shown, floors_shown_first;
} watch;

#define WATCH_CHECK(cond, ...)                                                                 \
	do {                                                                                   \
		int zero_ = 0;                                                                 \
		if (!(cond) && atomic_compare_exchange_strong(&watch.bad, &zero_, __LINE__))  \
			snprintf(watch.what, sizeof(watch.what), __VA_ARGS__);                 \
	} while (0)

static void watch_publish(struct sl_lease *l)
{
	struct sl_lease_participant p[LEASE_MAXP];
	struct sl_lease_stats st;
	struct sl_limits lim;
	size_t n = 0, i, k;

	for (k = 0; k < WATCHED && watch.g[k] != l->g; k++)
		;
	if (k == WATCHED)
		return;
	if (sl_lease_stats(l, &st) || sl_group_limits(l->g, &lim)) {
		WATCH_CHECK(0, "stats or limits failed");
		return;
	}
	/* The group never holds a max that the stats did not show first. */
	WATCH_CHECK(lim.max <= st.share && lim.max <= watch.shown[k],
		    "group %zu: max %" PRIu64 ", shown %" PRIu64 " now and %" PRIu64 " before", k,
		    lim.max, st.share, watch.shown[k]);
	if (st.share > lim.max)
		atomic_fetch_add(&watch.raises_shown, 1);
	/* The store never counts less than the stats show. */
	if (sl_lease_budget_participants(l->s, l->budget, p, LEASE_MAXP, &n) == 0) {
		for (i = 0; i < n && i < LEASE_MAXP; i++) {
			if (strncmp(p[i].id, l->id, SL_LEASE_ID_MAX))
				continue;
			WATCH_CHECK(p[i].share >= st.share && p[i].floor >= st.floor,
				    "group %zu: the store counts %" PRIu64 " floor %" PRIu64
				    ", the stats show %" PRIu64 " floor %" PRIu64,
				    k, p[i].share, p[i].floor, st.share, st.floor);
			if (p[i].floor > st.floor)
				atomic_fetch_add(&watch.floors_shown_first, 1);
		}
	}
	watch.shown[k] = st.share;
}

/* Charge @g up to its max, as a cache fills its share. */
static void fill_to_max(sl_group *g)
{
	struct sl_limits lim = limits_of(g);
	struct sl_stats gs;

	ck_assert_int_eq(sl_group_stats(g, &gs), 0);
	if (gs.usage < lim.max)
		(void)sl_charge(g, lim.max - gs.usage, SL_NORECLAIM);
}

static uint64_t filled_share(sl_lease *l, int k)
{
	fill_to_max(watch.g[k]);
	return lease_stats_of(l).share;
}

START_TEST(the_stats_show_a_raise_before_the_group_has_it_and_a_cut_before_the_store)
{
	struct sl_ops ops = { .reclaim = free_some };
	struct sl_lease_opts o;
	struct sl_limits lim;
	sl_lease *l[WATCHED] = { NULL };
	sl_lease_store *s;
	sl_tree *t;
	pthread_t th;
	char name[64];
	unsigned raises, floors;
	int k, round, bad;

	lease_name(name, sizeof(name));
	s = lease_open(name, 1000);
	budget_make(s, "b", 1000, 500, 300);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	sl_limits_init(&lim);
	for (k = 0; k < WATCHED; k++) {
		char gname[8];

		snprintf(gname, sizeof(gname), "g%d", k);
		ck_assert_int_eq(sl_group_create(sl_tree_root(t), gname, &lim, &ops, NULL, &watch.g[k]),
				 0);
		watch.shown[k] = UINT64_MAX;
	}
	sl__lease_publish_hook = watch_publish;
	lease_fast_opts(&o);
	/* Deferred: from the first publish on, the lease governs the group. */
	o.flags = SL_LEASE_DEFERRED;
	o.demand = child_demand;
	for (k = 0; k < 2; k++) {
		o.demand_ctx = &watch.want[k];
		ck_assert_int_eq(sl_lease_join(s, "b", watch.g[k], &o, &l[k]), 0);
	}
	start_thread(&th, lease_run_thread, s);
	for (round = 0; round < 3; round++) {
		/* Shares move one way, then the other: raises and cuts. */
		atomic_store(&watch.want[0].want, WANT_MORE);
		atomic_store(&watch.want[1].want, WANT_IDLE);
		WAIT_FOR(filled_share(l[0], 0) >= 600, "the first group's share to grow");
		atomic_store(&watch.want[0].want, WANT_IDLE);
		atomic_store(&watch.want[1].want, WANT_MORE);
		WAIT_FOR(filled_share(l[1], 1) >= 600, "the second group's share to grow");
		/* A third joins: every floor falls (300 / 3), then rises as it leaves. */
		o.demand_ctx = &watch.want[2];
		ck_assert_int_eq(sl_lease_join(s, "b", watch.g[2], &o, &l[2]), 0);
		WAIT_FOR(lease_stats_of(l[0]).floor == 100 && lease_stats_of(l[1]).floor == 100,
			 "the floors to fall");
		ck_assert_int_eq(sl_lease_leave(l[2]), 0);
		watch.shown[2] = UINT64_MAX;
		WAIT_FOR(lease_stats_of(l[0]).floor == 150, "the floors to rise");
	}
	sl_lease_stop(s);
	join_thread(th);
	bad = atomic_load(&watch.bad);
	ck_assert_msg(bad == 0, "line %d: %s", bad, watch.what);
	/* Both orders were exercised, not only checked when they happened. */
	raises = atomic_load(&watch.raises_shown);
	floors = atomic_load(&watch.floors_shown_first);
	ck_assert_uint_gt(raises, 0);
	ck_assert_uint_gt(floors, 0);
	sl__lease_publish_hook = NULL;
	for (k = 0; k < 2; k++)
		ck_assert_int_eq(sl_lease_leave(l[k]), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

/* ---- liveness: a process whose main thread is gone ---- */

/* The state of @pid's main thread (field 3 of /proc/PID/stat), '?' if none. */
static char leader_state(pid_t pid)
{
	char path[64], buf[512];
	const char *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static pid_t headless_parent;

/* The thread that outlives the child's main thread, until told to quit. */
static void *headless_watch(void *arg)
{
	struct child_ctl *cc = arg;

	while (!atomic_load(&cc->quit)) {
		if (getppid() != headless_parent) /* the test is gone */
			_exit(5);
		nap_ms(2);
	}
	_exit(0);
}

/* Join with 2000 in use, start a thread, and end the main thread; with
 * @second, first open a second handle on the store and close it. */
static void __attribute__((noreturn)) headless_main(struct ctl *c, bool second)
{
	struct child_ctl *cc = &c->c[0];
	sl_lease_store *s = NULL, *s2 = NULL;
	sl_lease *l = NULL;
	sl_group *g = NULL;
	pthread_t th;
	char url[128];

	child_setup(c, cc, &s, &g);
	if (second) {
		lease_url(url, sizeof(url), c->name);
		CHILD_CHECK(cc, sl_lease_store_open(url, NULL, &s2) == 0);
	}
	CHILD_CHECK(cc, sl_charge(g, 2000, 0) == 0);
	CHILD_CHECK(cc, sl_lease_join(s, c->budget, g, NULL, &l) == 0);
	sl_lease_store_close(s2);
	CHILD_CHECK(cc, pthread_create(&th, NULL, headless_watch, cc) == 0);
	atomic_store(&cc->joined, 1);
	pthread_exit(NULL);
}

/*
 * A child holds 2000 of a budget of 3000, its main thread gone.  While the
 * process lives, its record counts and its room goes to no joiner; once it
 * is gone (without leaving), both are free.
 */
static void headless_case(bool second)
{
	struct sl_lease_participant p[LEASE_MAXP];
	const struct sl_lease_participant *it;
	struct ctl *c = ctl_new();
	sl_lease_store *s;
	sl_lease *l = NULL;
	sl_tree *t;
	sl_group *g;
	pid_t pid;
	size_t n;

	s = lease_open(c->name, 1000);
	budget_make(s, c->budget, 3000, 0, 0);
	headless_parent = getpid();
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		die_with_parent(headless_parent);
		headless_main(c, second);
	}
	c->c[0].pid = pid;
	wait_joined(c, 1);
	/* Its main thread is gone: /proc shows the leader a zombie, while the
	 * process runs on and holds its 2000. */
	WAIT_FOR(leader_state(pid) == 'Z', "the child's main thread to exit");
	n = lease_parts(s, c->budget, p);
	it = of_pid(p, n, pid);
	ck_assert_msg(it != NULL, "a live process was taken for dead");
	ck_assert_uint_ge(it->share, 2000);
	/* Its room is not granted to a joiner. */
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(g, 2000, 0), 0);
	ck_assert_int_eq(sl_lease_join(s, c->budget, g, NULL, &l), -EBUSY);
	ck_assert_ptr_nonnull(of_pid(p, lease_parts(s, c->budget, p), pid));

	/* The whole process gone (without leaving): its share is free. */
	quit_child(c, 0);
	ck_assert_uint_eq(lease_parts(s, c->budget, p), 0);
	ck_assert_int_eq(sl_lease_join(s, c->budget, g, NULL, &l), 0);
	ck_assert_int_eq(sl_lease_leave(l), 0);
	ck_assert_int_eq(sl_uncharge(g, 2000), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	ctl_free(c);
}

START_TEST(a_process_whose_main_thread_exited_keeps_its_share)
{
	headless_case(false);
}
END_TEST

/* A process's handles on one object share its lock: closing one (its fd
 * with it, were it its own) must not make the process look dead. */
START_TEST(a_process_that_closed_a_second_handle_keeps_its_share)
{
	headless_case(true);
}
END_TEST

/* ---- a corrupt or truncated object ---- */

static void object_path(const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "/dev/shm/softlimit-%s", name);
}

/* Store @name's bytes as a scribbler sees them (store_shm.h's layout). */
struct view {
	struct shm_header *h;
	size_t size;
	uint32_t nb, ns;
};

static struct shm_budget *view_budget(const struct view *v, uint32_t i)
{
	return (struct shm_budget *)(void *)((char *)v->h + sizeof(*v->h)) + i;
}

static struct shm_slot *view_slot(const struct view *v, uint32_t i)
{
	return (struct shm_slot *)(void *)view_budget(v, v->nb) + i;
}

/* Opening the object and closing the fd drops this process's liveness lock
 * on it; only this process uses these stores, and its own slots are judged
 * by its pid. */
static void object_map(const char *name, struct view *v)
{
	char path[128];
	struct stat sb;
	int fd;

	object_path(name, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	v->size = (size_t)sb.st_size;
	v->h = mmap(NULL, v->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert(v->h != MAP_FAILED);
	close(fd);
	v->nb = v->h->nbudgets;
	v->ns = v->h->nslots;
}

static void object_unmap(struct view *v)
{
	munmap(v->h, v->size);
}

static void object_truncate(const char *name, off_t size)
{
	char path[128];

	object_path(name, path, sizeof(path));
	ck_assert_int_eq(truncate(path, size), 0);
}

/* The index of budget @name's entry. */
static uint32_t budget_index(const struct view *v, const char *name)
{
	uint32_t i;

	for (i = 0; i < v->nb; i++) {
		struct shm_budget_data *d = bcur(view_budget(v, i));

		if (d->used && !strncmp(d->name, name, sizeof(d->name)))
			return i;
	}
	ck_abort_msg("no budget %s", name);
	return 0;
}

static struct shm_budget_data *budget_entry(const struct view *v, const char *name)
{
	return bcur(view_budget(v, budget_index(v, name)));
}

static struct shm_slot_data *slot_of_budget(const struct view *v, const char *name)
{
	uint32_t b = budget_index(v, name), i;

	for (i = 0; i < v->ns; i++) {
		struct shm_slot_data *d = scur(view_slot(v, i));

		if (d->used && d->budget == b)
			return d;
	}
	ck_abort_msg("no slot of budget %s", name);
	return NULL;
}

static sl_lease_store *lease_open_slots(const char *name, uint32_t timeout_ms, uint32_t nslots)
{
	struct sl_lease_store_opts o;
	sl_lease_store *s = NULL;
	char url[128];

	sl_lease_store_opts_init(&o);
	o.timeout_ms = timeout_ms;
	o.slots = nslots;
	o.node = "test";
	lease_url(url, sizeof(url), name);
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), 0);
	return s;
}

#define ANSWERS(rc, ...)                                                                       \
	do {                                                                                   \
		const int ok_[] = { 0, __VA_ARGS__ };                                          \
		bool found_ = false;                                                           \
		for (size_t k_ = 0; k_ < sizeof(ok_) / sizeof(ok_[0]); k_++)                   \
			found_ |= (rc) == ok_[k_];                                             \
		ck_assert_msg(found_, "%s answered %d", #rc, (rc));                            \
	} while (0)

/* Every public call answers 0 or a documented error, and whatever list
 * gives is a whole, valid name. */
static void calls_answer(sl_lease_store *s, sl_group *g)
{
	char names[8][SL_LEASE_NAME_MAX];
	struct sl_lease_participant p[LEASE_MAXP];
	struct sl_limits lim;
	sl_lease *l = NULL;
	size_t n = 0, i;
	int rc;

	rc = sl_lease_budget_list(s, names, 8, &n);
	ANSWERS(rc, -EIO, -ETIMEDOUT);
	for (i = 0; rc == 0 && i < n && i < 8; i++) {
		ck_assert_msg(memchr(names[i], '\0', SL_LEASE_NAME_MAX), "an unterminated name");
		ck_assert_msg(sl__lease_name_ok(names[i]), "a bad name: %s", names[i]);
	}
	rc = sl_lease_budget_get(s, "a", &lim);
	ANSWERS(rc, -ENOENT, -EIO, -ETIMEDOUT);
	rc = sl_lease_budget_participants(s, "a", p, LEASE_MAXP, &n);
	ANSWERS(rc, -ENOENT, -EIO, -ETIMEDOUT);
	for (i = 0; rc == 0 && i < n && i < LEASE_MAXP; i++)
		ck_assert(memchr(p[i].id, '\0', sizeof(p[i].id)));
	rc = sl_lease_join(s, "a", g, NULL, &l);
	ANSWERS(rc, -ENOENT, -EBUSY, -ENOSPC, -EIO, -ETIMEDOUT, -EAGAIN);
	if (rc == 0) {
		rc = sl_lease_leave(l);
		ANSWERS(rc, -ENOENT, -EIO, -ETIMEDOUT);
	}
	sl_limits_init(&lim);
	lim.max = 1000;
	rc = sl_lease_budget_set(s, "b", &lim);
	ANSWERS(rc, -ENOSPC, -EIO, -ETIMEDOUT);
	rc = sl_lease_budget_delete(s, "c");
	ANSWERS(rc, -ENOENT, -EIO, -ETIMEDOUT);
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void names_are(sl_lease_store *s, const char *want)
{
	char names[8][SL_LEASE_NAME_MAX], got[8 * SL_LEASE_NAME_MAX] = "";
	size_t n = 0, i;

	ck_assert_int_eq(sl_lease_budget_list(s, names, 8, &n), 0);
	ck_assert_uint_le(n, 8);
	for (i = 0; i < n; i++) {
		ck_assert_msg(memchr(names[i], '\0', SL_LEASE_NAME_MAX), "an unterminated name");
		strcat(got, i ? " " : "");
		strcat(got, names[i]);
	}
	ck_assert_str_eq(got, want);
}

START_TEST(corrupt_entries_are_skipped_and_a_budget_set_repairs_them)
{
	struct sl_lease_participant p[LEASE_MAXP];
	struct view view;
	struct sl_limits lim;
	sl_lease_store *s;
	sl_lease *l = NULL;
	sl_tree *t;
	sl_group *g;
	char name[64];

	lease_name(name, sizeof(name));
	/* Three entries of each table: the corrupt ones are all the room. */
	s = lease_open_slots(name, 1000, 3);
	budget_make(s, "a", 1000, 0, 0);
	budget_make(s, "b", 1000, 0, 0);
	budget_make(s, "c", 1000, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(g, 100, 0), 0);
	ck_assert_int_eq(sl_lease_join(s, "c", g, NULL, &l), 0);
	ck_assert_uint_eq(lease_parts(s, "c", p), 1);

	object_map(name, &view);
	slot_of_budget(&view, "c")->floor = UINT64_MAX; /* above its held */
	memset(budget_entry(&view, "a")->name, 'x', SL_LEASE_NAME_MAX); /* no NUL */
	budget_entry(&view, "b")->used = 7;
	object_unmap(&view);

	/* Never returned, and the store still opens and works. */
	names_are(s, "c");
	ck_assert_uint_eq(lease_parts(s, "c", p), 0);
	ck_assert_int_eq(sl_lease_budget_get(s, "a", &lim), -ENOENT);
	ck_assert_int_eq(sl_lease_budget_get(s, "b", &lim), -ENOENT);
	/* A corrupt entry is free space: setting a budget over it repairs it. */
	budget_make(s, "b", 2000, 0, 0);
	budget_make(s, "a", 3000, 0, 0);
	names_are(s, "a b c");
	ck_assert_int_eq(sl_lease_budget_get(s, "a", &lim), 0);
	ck_assert_uint_eq(lim.max, 3000);
	ck_assert_uint_eq(lease_parts(s, "a", p), 0);
	sl_limits_init(&lim);
	lim.max = 10;
	ck_assert_int_eq(sl_lease_budget_set(s, "d", &lim), -ENOSPC);
	ck_assert_int_eq(sl_lease_leave(l), 0);
	ck_assert_int_eq(sl_uncharge(g, 100), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

START_TEST(random_bytes_over_the_tables_give_only_documented_answers)
{
	struct view view;
	sl_lease_store *s;
	sl_lease *l = NULL;
	sl_tree *t;
	sl_group *g, *h;
	char name[64];
	uint64_t x = 0x9e3779b97f4a7c15u;
	int round, k;

	lease_name(name, sizeof(name));
	s = lease_open_slots(name, 200, 8);
	budget_make(s, "a", 1000, 0, 0);
	budget_make(s, "c", 1000, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	h = group_new(sl_tree_root(t), "h", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(g, 100, 0), 0);
	/* A record to scribble over (calls_answer() joins with g). */
	ck_assert_int_eq(sl_lease_join(s, "a", h, NULL, &l), 0);
	object_map(name, &view);
	for (round = 0; round < 200; round++) {
		char *tables = (char *)view_budget(&view, 0);
		size_t len = view.size - sizeof(struct shm_header);

		/* A few runs of random bytes anywhere in the tables. */
		for (k = 0; k < 4; k++) {
			size_t at = xorshift(&x) % len, n = 1 + xorshift(&x) % 64, i;

			for (i = 0; i < n && at + i < len; i++)
				tables[at + i] = (char)xorshift(&x);
		}
		calls_answer(s, g);
		/* Now and then a budget set over it all. */
		if (round % 10 == 9)
			budget_make(s, "a", 1000, 0, 0);
	}
	object_unmap(&view);
	k = sl_lease_leave(l);
	ANSWERS(k, -ENOENT, -EIO, -ETIMEDOUT);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

START_TEST(a_scribbled_mutex_gives_a_documented_error)
{
	struct view view;
	sl_lease_store *s;
	sl_tree *t;
	sl_group *g;
	char name[64];
	uint64_t x = 0x2545f4914f6cdd1du;
	int round;

	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(g, 100, 0), 0);
	lease_name(name, sizeof(name));
	for (round = 0; round < 40; round++) {
		unsigned char *m;
		size_t i;

		s = lease_open_slots(name, 100, 8);
		budget_make(s, "a", 1000, 0, 0);
		object_map(name, &view);
		m = (unsigned char *)&view.h->mutex;
		/* All ones first, then random bytes (each byte kept or not). */
		for (i = 0; i < sizeof(view.h->mutex); i++)
			if (!round)
				m[i] = 0xff;
			else if (xorshift(&x) & 1)
				m[i] = (unsigned char)xorshift(&x);
		object_unmap(&view);
		calls_answer(s, g);
		sl_lease_store_close(s);
		lease_unlink(name);
	}
	ck_assert_int_eq(sl_uncharge(g, 100), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(a_truncated_object_gives_eio_never_sigbus)
{
	struct sl_lease_participant p[LEASE_MAXP];
	char names[4][SL_LEASE_NAME_MAX];
	struct sl_limits lim;
	sl_lease_store *s;
	sl_lease *l = NULL;
	sl_tree *t;
	sl_group *g;
	char name[64], url[128];
	size_t n;
	off_t sizes[2];
	int i, rc;

	lease_name(name, sizeof(name));
	s = lease_open(name, 1000);
	budget_make(s, "a", 1000, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(g, 100, 0), 0);
	ck_assert_int_eq(sl_lease_join(s, "a", g, NULL, &l), 0);
	/* Short by its last page (the header whole), then empty. */
	sizes[0] = (off_t)object_size(256, 256) - 4096;
	sizes[1] = 0;
	for (i = 0; i < 2; i++) {
		object_truncate(name, sizes[i]);
		ck_assert_int_eq(sl_lease_budget_list(s, names, 4, &n), -EIO);
		ck_assert_int_eq(sl_lease_budget_get(s, "a", &lim), -EIO);
		ck_assert_int_eq(sl_lease_budget_participants(s, "a", p, LEASE_MAXP, &n), -EIO);
		sl_limits_init(&lim);
		lim.max = 10;
		ck_assert_int_eq(sl_lease_budget_set(s, "b", &lim), -EIO);
		ck_assert_int_eq(sl_lease_budget_delete(s, "a"), -EIO);
	}
	rc = sl_lease_leave(l);
	ck_assert_int_eq(rc, -EIO);
	sl_lease_store_close(s);
	/* The way out: remove it; the next open makes a new one. */
	lease_url(url, sizeof(url), name);
	ck_assert_int_eq(sl_lease_store_remove(url, NULL), 0);
	s = lease_open(name, 1000);
	budget_make(s, "a", 1000, 0, 0);
	ck_assert_int_eq(sl_lease_join(s, "a", g, NULL, &l), 0);
	ck_assert_int_eq(sl_lease_leave(l), 0);
	ck_assert_int_eq(sl_uncharge(g, 100), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

/* ---- creation ---- */

/* What a creator that died before marking its object ready leaves. */
static void object_make(const char *name, size_t size, int byte)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/softlimit-%s", name);
	fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	if (size) {
		void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		ck_assert(m != MAP_FAILED);
		memset(m, byte, size);
		munmap(m, size);
	}
	close(fd);
}

START_TEST(an_object_a_dead_creator_left_unready_is_initialised_by_the_next_open)
{
	const size_t sizes[] = { 0, 100, object_size(256, 256), object_size(256, 256) + 4096 };
	const int bytes[] = { 0, 0, 0, 0xa5 };
	struct sl_limits lim;
	sl_lease_store *s;
	char name[64];
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		lease_name(name, sizeof(name));
		object_make(name, sizes[i], bytes[i]);
		s = lease_open(name, 2000);
		budget_make(s, "a", 1000, 0, 0);
		ck_assert_int_eq(sl_lease_budget_get(s, "a", &lim), 0);
		ck_assert_uint_eq(lim.max, 1000);
		sl_lease_store_close(s);
		lease_unlink(name);
	}
}
END_TEST

START_TEST(an_object_marked_ready_but_truncated_gives_eio_at_once)
{
	struct sl_lease_store_opts o;
	sl_lease_store *s;
	char name[64], url[128];

	lease_name(name, sizeof(name));
	s = lease_open(name, 1000);
	budget_make(s, "a", 1000, 0, 0);
	sl_lease_store_close(s);
	object_truncate(name, (off_t)object_size(256, 256) / 2);
	/* A timeout far beyond the test's: -EIO means no wait for it. */
	sl_lease_store_opts_init(&o);
	o.timeout_ms = 3600000;
	lease_url(url, sizeof(url), name);
	s = NULL;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EIO);
	ck_assert_ptr_null(s);
	lease_unlink(name);
}
END_TEST

/* Write the object's ready word, from a process that has no handle on it
 * (closing any fd of the object drops the closer's liveness lock). */
static void object_set_ready(const char *name, uint32_t ready)
{
	char path[128];
	int fd;

	object_path(name, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, &ready, sizeof(ready), (off_t)offsetof(struct shm_header, ready)),
			 (ssize_t)sizeof(ready));
	close(fd);
}

/*
 * An object that is not ready is a creator's unfinished work only if no
 * process uses it: a store whose header was damaged under live holders was
 * once initialised again by the next open, wiping their records.  Now that
 * open answers -EIO, and the holders' budget is still there once the
 * header is whole again.
 */
START_TEST(a_damaged_header_under_live_holders_is_eio_never_a_new_store)
{
	struct ctl *c = ctl_new();
	struct sl_limits lim;
	struct sl_lease_store_opts o;
	sl_lease_store *s = NULL;
	char url[128];

	/* The holder is a child: this process keeps no handle open. */
	s = lease_open(c->name, 2000);
	budget_make(s, c->budget, 3000, 0, 0);
	sl_lease_store_close(s);
	s = NULL;
	spawn(c, 0);
	wait_joined(c, 1);
	object_set_ready(c->name, 0);
	sl_lease_store_opts_init(&o);
	o.timeout_ms = 2000;
	lease_url(url, sizeof(url), c->name);
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EIO);
	ck_assert_ptr_null(s);
	object_set_ready(c->name, 1);
	s = lease_open(c->name, 2000);
	ck_assert_int_eq(sl_lease_budget_get(s, c->budget, &lim), 0);
	sl_lease_store_close(s);
	quit_child(c, 0);
	ctl_free(c);
}
END_TEST

static atomic_int *init_reached;

static void stop_in_init(void)
{
	atomic_store(init_reached, 1);
	for (;;)
		pause();
}

START_TEST(an_initialiser_killed_midway_leaves_an_object_the_next_open_initialises)
{
	struct sl_lease_store_opts o;
	struct sl_limits lim;
	sl_lease_store *s = NULL;
	char name[64], url[128];
	pid_t parent = getpid(), pid;
	int status;

	init_reached = mmap(NULL, sizeof(*init_reached), PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert(init_reached != MAP_FAILED);
	atomic_init(init_reached, 0);
	lease_name(name, sizeof(name));
	lease_url(url, sizeof(url), name);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		die_with_parent(parent);
		sl__lease_shm_test_init_hook = stop_in_init;
		sl_lease_store_open(url, NULL, &s);
		_exit(2);
	}
	WAIT_FOR(atomic_load(init_reached), "the child in the middle of initialising");
	/* A live initialiser holds the init lock: an open waits its timeout. */
	sl_lease_store_opts_init(&o);
	o.timeout_ms = 100;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -ETIMEDOUT);
	/* Killed there: the kernel drops its lock, the next open initialises. */
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	s = lease_open(name, 2000);
	budget_make(s, "a", 1000, 0, 0);
	ck_assert_int_eq(sl_lease_budget_get(s, "a", &lim), 0);
	ck_assert_uint_eq(lim.max, 1000);
	sl_lease_store_close(s);
	lease_unlink(name);
	munmap(init_reached, sizeof(*init_reached));
}
END_TEST

static Suite *lease_shm_suite(void)
{
	Suite *s = suite_create("lease_shm");
	TCase *tc = tcase_create("lease_shm");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, two_processes_share_a_budget_by_demand_within_max);
	tcase_add_test(tc, three_processes_share_a_budget_by_demand_within_max);
	tcase_add_test(tc, a_killed_process_share_is_free_at_once_for_the_others);
	tcase_add_test(tc, a_stopped_process_keeps_its_share_stalled_until_it_wakes);
	tcase_add_test(tc, a_process_dead_with_the_mutex_held_leaves_the_store_whole);
	tcase_add_test(tc, a_mutex_held_by_a_stopped_process_times_out_and_holders_keep_their_share);
	tcase_add_test(tc, the_stats_show_a_raise_before_the_group_has_it_and_a_cut_before_the_store);
	tcase_add_test(tc, a_process_whose_main_thread_exited_keeps_its_share);
	tcase_add_test(tc, a_process_that_closed_a_second_handle_keeps_its_share);
	tcase_add_test(tc, corrupt_entries_are_skipped_and_a_budget_set_repairs_them);
	tcase_add_test(tc, random_bytes_over_the_tables_give_only_documented_answers);
	tcase_add_test(tc, a_scribbled_mutex_gives_a_documented_error);
	tcase_add_test(tc, a_truncated_object_gives_eio_never_sigbus);
	tcase_add_test(tc, an_object_a_dead_creator_left_unready_is_initialised_by_the_next_open);
	tcase_add_test(tc, a_damaged_header_under_live_holders_is_eio_never_a_new_store);
	tcase_add_test(tc, an_object_marked_ready_but_truncated_gives_eio_at_once);
	tcase_add_test(tc, an_initialiser_killed_midway_leaves_an_object_the_next_open_initialises);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return lease_main(lease_shm_suite());
}
