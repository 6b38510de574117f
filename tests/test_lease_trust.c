/* SPDX-License-Identifier: MIT */
/*
 * Sequences of ordinary calls that once got around a budget (the lease
 * library's side of it): a join while the group is being charged, a fork()ed
 * child using the handles it inherited, a leased group destroyed under the
 * run thread, a stopped and resumed shm holder.  Each case failed before
 * its fix; none depends on timing (a case that needs a stall makes one and
 * waits for events).
 */
#include "lease_helpers.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/wait.h>

/* ---- join while charged ---- */

struct charger {
	sl_group *g;
	atomic_int stop;
	atomic_ulong charged; /* what this thread holds */
};

/* Charge 64 bytes at a time as fast as the group takes them. */
static void *charge_loop(void *arg)
{
	struct charger *c = arg;

	while (!atomic_load(&c->stop)) {
		if (sl_charge(c->g, 64, SL_NORECLAIM) == 0)
			atomic_fetch_add(&c->charged, 64);
	}
	return NULL;
}

static uint64_t group_held(sl_group *g)
{
	struct sl_stats st;

	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(sl_group_stats(g, &st), 0);
	return st.usage + st.stocked;
}

/*
 * A join reads the group's usage and writes it to the store as its share.
 * Before the fix the group's max came down only after that write, so a
 * charge landing between the read and the write took the group past what
 * the store counted, for good.  With a thread charging all through every
 * join, what the group holds must never pass what the store counts for it.
 */
START_TEST(a_join_never_counts_less_than_a_group_being_charged_holds)
{
	struct sl_lease_participant p[LEASE_MAXP];
	struct sl_limits lim;
	struct charger c;
	pthread_t th;
	sl_lease_store *s;
	sl_tree *t;
	char name[64];
	int round;

	lease_name(name, sizeof(name));
	s = lease_open(name, 10000);
	budget_make(s, "b", 1 << 30, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	sl_limits_init(&lim);
	memset(&c, 0, sizeof(c));
	c.g = group_new_lim(sl_tree_root(t), "g", &lim);
	ck_assert_int_eq(pthread_create(&th, NULL, charge_loop, &c), 0);
	for (round = 0; round < 300; round++) {
		sl_lease *l = NULL;
		uint64_t held, share;
		size_t n;

		ck_assert_int_eq(sl_lease_join(s, "b", c.g, NULL, &l), 0);
		/* The group's max is its share now: charges stop there. */
		n = lease_parts(s, "b", p);
		ck_assert_uint_eq(n, 1);
		share = p[0].share;
		held = group_held(c.g);
		ck_assert_msg(held <= share,
			      "round %d: the group holds %" PRIu64 ", the store counts %" PRIu64,
			      round, held, share);
		ck_assert_int_eq(sl_lease_leave(l), 0);
	}
	atomic_store(&c.stop, 1);
	pthread_join(th, NULL);
	ck_assert_int_eq(sl_uncharge(c.g, atomic_load(&c.charged)), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

/* ---- fork() ---- */

/* Run @fn in a child with the parent's handles; its exit status. */
static int in_child(void (*fn)(sl_lease_store *, sl_lease *), sl_lease_store *s, sl_lease *l)
{
	pid_t pid = fork();
	int status = 0;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fn(s, l);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "child status %d", status);
	return WEXITSTATUS(status);
}

/* What an exit-time cleanup in a child does: leave, close. */
static void child_leaves_and_closes(sl_lease_store *s, sl_lease *l)
{
	if (sl_lease_leave(l) != 0)
		_exit(10);
	sl_lease_store_close(s);
}

/* Every call that would touch the store through an inherited handle. */
static void child_uses_the_handles(sl_lease_store *s, sl_lease *l)
{
	struct sl_lease_participant p[4];
	struct sl_limits lim;
	char names[4][SL_LEASE_NAME_MAX];
	sl_lease *l2 = NULL;
	size_t n;

	(void)l;
	sl_limits_init(&lim);
	lim.max = 10;
	if (sl_lease_budget_set(s, "b", &lim) != -ECHILD)
		_exit(11);
	if (sl_lease_budget_get(s, "b", &lim) != -ECHILD)
		_exit(12);
	if (sl_lease_budget_delete(s, "b") != -ECHILD)
		_exit(13);
	if (sl_lease_budget_list(s, names, 4, &n) != -ECHILD)
		_exit(14);
	if (sl_lease_budget_participants(s, "b", p, 4, &n) != -ECHILD)
		_exit(15);
	if (sl_lease_join(s, "b", sl_lease_group(l), NULL, &l2) != -ECHILD || l2)
		_exit(16);
	if (sl_lease_run(s) != -ECHILD)
		_exit(17);
	/* Neither takes a lock a parent's thread may have held at the fork. */
	sl_lease_stop(s);
	if (sl_lease_stats(l, &(struct sl_lease_stats){ 0 }) != 0)
		_exit(18);
}

/*
 * A record belongs to the process that made it: a child that leaves an
 * inherited lease or closes an inherited store (an atexit handler does)
 * once deleted the parent's live record.  Now the child's calls touch only
 * its own copies, and the store calls answer -ECHILD.
 */
START_TEST(a_forked_child_never_touches_the_parents_record)
{
	struct sl_lease_participant p[LEASE_MAXP];
	struct sl_limits lim;
	sl_lease_store *s;
	sl_lease *l = NULL;
	sl_tree *t;
	sl_group *g;
	char name[64], id[SL_LEASE_ID_MAX];

	lease_name(name, sizeof(name));
	s = lease_open(name, 10000);
	budget_make(s, "b", 1000, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	sl_limits_init(&lim);
	g = group_new_lim(sl_tree_root(t), "g", &lim);
	ck_assert_int_eq(sl_charge(g, 300, 0), 0);
	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, &l), 0);
	ck_assert_uint_eq(lease_parts(s, "b", p), 1);
	memcpy(id, p[0].id, sizeof(id));

	ck_assert_int_eq(in_child(child_leaves_and_closes, s, l), 0);
	ck_assert_uint_eq(lease_parts(s, "b", p), 1);
	ck_assert_int_eq(in_child(child_uses_the_handles, s, l), 0);

	/* The parent's record is there, whole, and its lease still works. */
	ck_assert_uint_eq(lease_parts(s, "b", p), 1);
	ck_assert_str_eq(p[0].id, id);
	ck_assert_uint_eq(p[0].share, 300);
	ck_assert_uint_eq(limits_of(g).max, 300);
	ck_assert_int_eq(sl_lease_leave(l), 0);
	ck_assert_uint_eq(lease_parts(s, "b", p), 0);
	ck_assert_int_eq(sl_uncharge(g, 300), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

/* ---- destroying a leased group ---- */

/*
 * The run thread steps a lease's group every period: destroying the group
 * while the lease holds it freed it under that thread.  Now the destroy
 * answers -EBUSY, as for a group with children, until the lease is left.
 */
START_TEST(a_leased_group_cannot_be_destroyed_until_its_lease_is_left)
{
	struct sl_lease_opts o;
	struct sl_limits lim;
	sl_lease_store *s;
	sl_lease *l = NULL;
	pthread_t th;
	sl_tree *t;
	sl_group *g;
	char name[64];
	uint64_t renewals;

	lease_name(name, sizeof(name));
	s = lease_open(name, 10000);
	budget_make(s, "b", 1000, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	sl_limits_init(&lim);
	g = group_new_lim(sl_tree_root(t), "g", &lim);
	lease_steady_opts(&o);
	ck_assert_int_eq(sl_lease_join(s, "b", g, &o, &l), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, lease_run_thread, s), 0);

	ck_assert_int_eq(sl_group_destroy(g), -EBUSY);
	/* Still a group, still stepped. */
	renewals = lease_stats_of(l).renewals;
	WAIT_FOR(lease_stats_of(l).renewals > renewals + 2, "renewals after the refused destroy");
	ck_assert_int_eq(sl_group_destroy(g), -EBUSY);

	ck_assert_int_eq(sl_lease_leave(l), 0);
	ck_assert_int_eq(sl_group_destroy(g), 0);
	sl_lease_stop(s);
	pthread_join(th, NULL);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

/* ---- units stocked in threads ---- */

/*
 * A group that holds nothing but the units a thread keeps stocked for it
 * (a charge and its uncharge leave them) counted them as usage at join and
 * was refused by a small budget however often it retried.  A lower max gives
 * them back without reclaiming anything: the join does that first.
 */
START_TEST(units_stocked_in_threads_do_not_keep_a_group_out_of_a_budget)
{
	struct sl_lease_participant p[LEASE_MAXP];
	struct sl_tree_opts to;
	struct sl_limits lim;
	struct sl_stats st;
	sl_lease_store *s;
	sl_lease *l = NULL;
	sl_tree *t = NULL;
	sl_group *g;
	char name[64];

	lease_name(name, sizeof(name));
	s = lease_open(name, 10000);
	budget_make(s, "b", 1, 0, 0);
	sl_tree_opts_init(&to); /* the default batch: charges stock units */
	ck_assert_int_eq(sl_tree_create(&to, &t), 0);
	sl_limits_init(&lim);
	g = group_new_lim(sl_tree_root(t), "g", &lim);
	ck_assert_int_eq(sl_charge(g, 5, 0), 0);
	ck_assert_int_eq(sl_uncharge(g, 5), 0);
	ck_assert_int_eq(sl_group_stats(g, &st), 0);
	ck_assert_uint_eq(st.usage, 0);
	ck_assert_uint_gt(st.stocked, 1);

	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, &l), 0);
	ck_assert_uint_eq(lease_parts(s, "b", p), 1);
	ck_assert_uint_le(p[0].share, 1);
	ck_assert_int_eq(sl_lease_leave(l), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

/* ---- closing a store that a thread still runs ---- */

/* sl_lease_store_close() while sl_lease_run() runs on the store: the run
 * thread once read the store after it was freed.  Now close stops it and
 * waits for it to return. */
START_TEST(closing_a_store_stops_its_run_thread_first)
{
	struct sl_limits lim;
	sl_lease_store *s;
	sl_lease *l = NULL;
	pthread_t th;
	sl_tree *t;
	sl_group *g;
	char name[64];

	lease_name(name, sizeof(name));
	s = lease_open(name, 10000);
	budget_make(s, "b", 1000, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	sl_limits_init(&lim);
	g = group_new_lim(sl_tree_root(t), "g", &lim);
	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, &l), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, lease_run_thread, s), 0);
	WAIT_FOR(lease_stats_of(l).renewals > 2, "renewals");
	sl_lease_store_close(s);
	pthread_join(th, NULL);
	ck_assert_uint_eq(limits_of(g).max, SL_UNLIMITED);
	ck_assert_int_eq(sl_group_destroy(g), 0);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

/* ---- a stopped shm holder ---- */

struct holder_status {
	atomic_int joined;
	atomic_int failed;
	atomic_ulong renewals;
	atomic_ulong fences;
	atomic_ulong share;
	atomic_int quit;
};

static void holder_main(const char *name, struct holder_status *hs)
{
	struct sl_lease_opts o;
	struct sl_tree_opts to;
	struct sl_limits lim;
	sl_lease_store *s;
	sl_lease *l = NULL;
	pthread_t th;
	sl_tree *t = NULL;
	sl_group *g = NULL;
	char url[128];

	lease_url(url, sizeof(url), name);
	sl_limits_init(&lim);
	sl_tree_opts_init(&to);
	to.batch = SL_BATCH_NONE; /* no stock: the share is the 600 charged */
	if (sl_lease_store_open(url, NULL, &s) || sl_tree_create(&to, &t) ||
	    sl_group_create(sl_tree_root(t), "g", &lim, NULL, NULL, &g) || sl_charge(g, 600, 0))
		_exit(2);
	/* A short lease: stopped for longer than it runs. */
	lease_fast_opts(&o);
	if (sl_lease_join(s, "b", g, &o, &l) || pthread_create(&th, NULL, lease_run_thread, s))
		_exit(3);
	atomic_store(&hs->joined, 1);
	while (!atomic_load(&hs->quit)) {
		struct sl_lease_stats st;

		if (sl_lease_stats(l, &st))
			_exit(4);
		atomic_store(&hs->renewals, st.renewals);
		atomic_store(&hs->fences, st.fences);
		atomic_store(&hs->share, st.share);
		nap_ms(2);
	}
	sl_lease_stop(s);
	pthread_join(th, NULL);
	sl_lease_leave(l);
	sl_lease_store_close(s);
	_exit(0);
}

/* Is every thread of @pid stopped (state T in each task's stat)? */
static bool all_stopped(pid_t pid)
{
	char path[320], buf[512];
	struct dirent *e;
	bool all = true;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while (all && (e = readdir(d)) != NULL) {
		FILE *f;
		const char *p;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		all = p && p[1] == ' ' && p[2] == 'T';
		fclose(f);
	}
	closedir(d);
	return all;
}

/*
 * The shm store counts a live process's record in full whatever its
 * expiry: a holder stopped past its lease and resumed once fell to its
 * floor (0 here) and dropped its cache, for nothing.  Now it keeps its
 * share: no fence, the same share after as before.
 */
START_TEST(an_shm_holder_stopped_past_its_lease_keeps_its_share)
{
	struct sl_lease_participant p[LEASE_MAXP];
	struct holder_status *hs;
	sl_lease_store *s;
	char name[64];
	unsigned long before;
	pid_t pid, parent = getpid();
	int status = 0;

	lease_name(name, sizeof(name));
	s = lease_open(name, 10000);
	budget_make(s, "b", 1000, 0, 0);
	hs = mmap(NULL, sizeof(*hs), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(hs, MAP_FAILED);
	memset(hs, 0, sizeof(*hs));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(5);
		holder_main(name, hs);
	}
	WAIT_FOR(atomic_load(&hs->joined) || waitpid(pid, &status, WNOHANG) == pid, "the holder's join");
	ck_assert_msg(atomic_load(&hs->joined), "the holder exited with status %d", status);
	WAIT_FOR(atomic_load(&hs->share) >= 600, "the holder's share");
	ck_assert_uint_eq(atomic_load(&hs->fences), 0);

	ck_assert_int_eq(kill(pid, SIGSTOP), 0);
	WAIT_FOR(all_stopped(pid), "the holder to stop");
	/* Past the store's expiry of its record (ttl 1 s). */
	WAIT_FOR(lease_parts(s, "b", p) == 1 && p[0].expires_ms < -100, "the record's expiry");
	ck_assert_uint_ge(p[0].share, 600);
	ck_assert_int_eq(p[0].state, SL_LEASE_STALLED);
	before = atomic_load(&hs->renewals);
	ck_assert_int_eq(kill(pid, SIGCONT), 0);
	WAIT_FOR(atomic_load(&hs->renewals) > before + 2, "renewals after the stop");

	/* Its usage (600) stays counted and allowed all along: no fall. */
	ck_assert_uint_eq(atomic_load(&hs->fences), 0);
	ck_assert_uint_ge(atomic_load(&hs->share), 600);
	ck_assert_uint_eq(lease_parts(s, "b", p), 1);
	ck_assert_uint_ge(p[0].share, 600);
	ck_assert_int_eq(p[0].state, SL_LEASE_HELD);

	atomic_store(&hs->quit, 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "holder status %d", status);
	munmap(hs, sizeof(*hs));
	sl_lease_store_close(s);
	lease_unlink(name);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lease_trust");
	TCase *tc = tcase_create("trust");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, a_join_never_counts_less_than_a_group_being_charged_holds);
	tcase_add_test(tc, a_forked_child_never_touches_the_parents_record);
	tcase_add_test(tc, a_leased_group_cannot_be_destroyed_until_its_lease_is_left);
	tcase_add_test(tc, an_shm_holder_stopped_past_its_lease_keeps_its_share);
	tcase_add_test(tc, units_stocked_in_threads_do_not_keep_a_group_out_of_a_budget);
	tcase_add_test(tc, closing_a_store_stops_its_run_thread_first);
	suite_add_tcase(s, tc);
	return lease_main(s);
}
