/* SPDX-License-Identifier: MIT */
/*
 * The etcd:// store's operations (lib/lease/store.h) against a real etcd
 * that tests/etcd_cluster.py started: SL_ETCD_ENDPOINTS=host:port,...
 * Each test works under its own prefix; sl_lease_store_remove() is tested
 * here too, through the public call, as the etcd:// store answers it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "etcd_helpers.h"
#include "etcd_http.h"
#include "store.h"

static const struct sl__lease_store_ops *ops = &sl__lease_store_etcd;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The longest one call to the real store may take: a loaded machine (an
 * ASan build beside four busy loops) once took a write past 5 s; a passing
 * run never waits it out. */
#define STORE_TIMEOUT_MS 30000

/* The ttl of a record a case needs live through its next calls.  With a
 * ttl of 2 s, a record ran out between a write and the read after it on a
 * loaded machine, and the read showed it at its floor. */
#define LIVE_TTL_MS 600000

/* The ttl of the record a case waits to see run out. */
#define SHORT_TTL_MS 2000

/* The ttl of the registration that starts a wiped store's quarantine, which
 * lasts three ttls (15 s): the case's next calls fall within it unless the
 * machine is very slow, and the case then checks what it still can. */
#define QUARANTINE_TTL_MS 5000

/* A store under a prefix of its own (the test's name and the pid). */
static void *open_at(const char *hosts, const char *tag, uint32_t timeout_ms)
{
	struct sl_lease_store_opts o;
	char rest[512];
	void *st = NULL;

	sl_lease_store_opts_init(&o);
	o.timeout_ms = timeout_ms;
	o.node = "testnode";
	snprintf(rest, sizeof(rest), "//%s/sltest-%ld-%s", hosts, (long)getpid(), tag);
	ck_assert_int_eq(ops->open(rest, &o, &st), 0);
	return st;
}

static struct sl_limits limits(uint64_t max, uint64_t min)
{
	struct sl_limits l;

	sl_limits_init(&l);
	l.max = max;
	l.soft = max / 2;
	l.min = min;
	return l;
}

static struct sl__lease_rec rec_of(void *st, uint64_t held, uint64_t floor)
{
	struct sl__lease_rec r;

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(ops->make_id(st, r.id), 0);
	r.held = held;
	r.floor = floor;
	r.usage = held / 2;
	r.demand = held;
	return r;
}

START_TEST(open_refuses_malformed_urls)
{
	static const char *bad[] = { "", "//", "///p", "//host/p", "//host:/p", "//:1/p",
				     "//h:1x/p", "//h:1,,h:2/p", "//h:1/bad prefix", "//h:1//p",
				     "//h:1/p\"q" };
	void *st = NULL;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(ops->open(bad[i], NULL, &st) == -EINVAL, "%s", bad[i]);
	ck_assert_int_eq(ops->open("//h:1,h:2/p/q/", NULL, &st), 0);
	ops->close(st);
	ck_assert_int_eq(ops->open("//h:1", NULL, &st), 0);
	ops->close(st);
}
END_TEST

START_TEST(budgets_are_set_read_listed_and_deleted)
{
	void *st = open_at(endpoints(), "budgets", STORE_TIMEOUT_MS);
	static const char *names[] = { "b", "a.b", "a", "a-b", "z:1" };
	char list[8][SL_LEASE_NAME_MAX];
	struct sl_limits l = limits(1000, 300), got;
	struct sl__lease_view v;
	struct sl__lease_rec r;
	size_t n = 0;

	ck_assert_int_eq(ops->budget_get(st, "a", &got), -ENOENT);
	ck_assert_int_eq(ops->budget_list(st, list, 8, &n), 0);
	ck_assert_uint_eq(n, 0);
	for (size_t i = 0; i < 5; i++)
		ck_assert_int_eq(ops->budget_set(st, names[i], &l), 0);
	ck_assert_int_eq(ops->budget_get(st, "a", &got), 0);
	ck_assert_uint_eq(got.max, 1000);
	ck_assert_uint_eq(got.soft, 500);
	ck_assert_uint_eq(got.min, 300);
	/* A record under "a" must not show in the list. */
	ck_assert_int_eq(ops->read(st, "a", &v), 0);
	r = rec_of(st, 10, 5);
	ck_assert_int_eq(ops->write(st, "a", &r, LIVE_TTL_MS, true, v.version, v.incarnation), 0);
	sl__lease_view_free(&v);
	ck_assert_int_eq(ops->budget_list(st, list, 8, &n), 0);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(list[0], "a");
	ck_assert_str_eq(list[1], "a-b");
	ck_assert_str_eq(list[2], "a.b");
	ck_assert_str_eq(list[3], "b");
	ck_assert_str_eq(list[4], "z:1");
	ck_assert_int_eq(ops->budget_list(st, list, 2, &n), 0);
	ck_assert_uint_eq(n, 5);
	ck_assert_int_eq(ops->budget_delete(st, "a"), 0);
	ck_assert_int_eq(ops->budget_delete(st, "a"), -ENOENT);
	ck_assert_int_eq(ops->read(st, "a", &v), -ENOENT);
	ck_assert_int_eq(ops->budget_get(st, "a-b", &got), 0);
	ck_assert_int_eq(ops->budget_list(st, list, 8, &n), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_int_eq(ops->budget_get(st, "bad/name", &got), -EINVAL);
	ops->close(st);
}
END_TEST

START_TEST(grows_compare_the_version_and_renewals_do_not)
{
	void *st = open_at(endpoints(), "grow", STORE_TIMEOUT_MS);
	struct sl_limits l = limits(1000, 200);
	struct sl__lease_view v, w;
	struct sl__lease_rec a, b;

	ck_assert_int_eq(ops->budget_set(st, "t", &l), 0);
	ck_assert_int_eq(ops->read(st, "t", &v), 0);
	ck_assert_uint_eq(v.n, 0);
	ck_assert_uint_ne(v.incarnation, 0);
	ck_assert_uint_eq(v.limits.max, 1000);
	a = rec_of(st, 400, 100);
	b = rec_of(st, 300, 100);
	ck_assert_str_ne(a.id, b.id);
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, true, v.version, v.incarnation), 0);
	/* b read before a grew: its grow must fail. */
	ck_assert_int_eq(ops->write(st, "t", &b, LIVE_TTL_MS, true, v.version, v.incarnation), -EAGAIN);
	ck_assert_int_eq(ops->read(st, "t", &w), 0);
	ck_assert_uint_gt(w.version, v.version);
	ck_assert_uint_eq(w.n, 1);
	ck_assert_str_eq(w.recs[0].id, a.id);
	ck_assert_uint_eq(w.recs[0].held, 400);
	ck_assert_uint_eq(w.recs[0].floor, 100);
	ck_assert_uint_eq(w.recs[0].usage, 200);
	ck_assert_uint_eq(w.recs[0].demand, 400);
	ck_assert_int_eq(w.recs[0].state, SL_LEASE_HELD);
	ck_assert_int_gt(w.recs[0].expires_ms, 0);
	ck_assert_int_eq(ops->write(st, "t", &b, LIVE_TTL_MS, true, w.version, w.incarnation), 0);
	/* A renewal or a shrink needs no compare. */
	a.held = 350;
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, false, v.version, w.incarnation), 0);
	sl__lease_view_free(&v);
	ck_assert_int_eq(ops->read(st, "t", &v), 0);
	ck_assert_uint_eq(v.n, 2);
	ck_assert_uint_eq(v.version, w.version + 1);
	/* A changed budget bumps the version: a grow on the old view fails. */
	ck_assert_int_eq(ops->budget_set(st, "t", &l), 0);
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, true, v.version, v.incarnation), -EAGAIN);
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, true, v.version, v.incarnation + 1),
			 -ESTALE);
	ck_assert_int_eq(ops->remove(st, "t", a.id), 0);
	ck_assert_int_eq(ops->remove(st, "t", a.id), -ENOENT);
	sl__lease_view_free(&w);
	ck_assert_int_eq(ops->read(st, "t", &w), 0);
	ck_assert_uint_eq(w.n, 1);
	ck_assert_str_eq(w.recs[0].id, b.id);
	sl__lease_view_free(&v);
	sl__lease_view_free(&w);
	ops->close(st);
}
END_TEST

/* The record of a participant that stops renewing expires; its floor stays. */
START_TEST(an_expired_record_counts_its_floor_and_comes_back_only_within_it)
{
	void *st = open_at(endpoints(), "expire", STORE_TIMEOUT_MS);
	struct sl_limits l = limits(1000, 200);
	struct sl__lease_view v;
	struct sl__lease_rec a;
	int64_t deadline = now_ms() + 60000;
	bool fenced = false;

	ck_assert_int_eq(ops->budget_set(st, "t", &l), 0);
	ck_assert_int_eq(ops->read(st, "t", &v), 0);
	a = rec_of(st, 400, 100);
	ck_assert_int_eq(ops->write(st, "t", &a, SHORT_TTL_MS, true, v.version, v.incarnation), 0);
	sl__lease_view_free(&v);
	while (!fenced && now_ms() < deadline) {
		ck_assert_int_eq(ops->read(st, "t", &v), 0);
		ck_assert_uint_eq(v.n, 1);
		fenced = v.recs[0].state == SL_LEASE_FENCED;
		if (fenced) {
			ck_assert_uint_eq(sl__lease_rec_counted(&v.recs[0]), 100);
			ck_assert_uint_eq(v.recs[0].held, 100);
		} else {
			ck_assert_uint_eq(sl__lease_rec_counted(&v.recs[0]), 400);
		}
		sl__lease_view_free(&v);
		usleep(100000);
	}
	ck_assert_msg(fenced, "the record did not expire within 60 s");
	/* Back at its old share without a compare: refused. */
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, false, 0, v.incarnation), -EAGAIN);
	/* At its floor: accepted, live again. */
	a.held = 100;
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, false, 0, v.incarnation), 0);
	ck_assert_int_eq(ops->read(st, "t", &v), 0);
	ck_assert_int_eq(v.recs[0].state, SL_LEASE_HELD);
	ck_assert_uint_eq(v.recs[0].held, 100);
	/* And it grows again the ordinary way. */
	a.held = 500;
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, true, v.version, v.incarnation), 0);
	sl__lease_view_free(&v);
	ck_assert_int_eq(ops->remove(st, "t", a.id), 0);
	ck_assert_int_eq(ops->read(st, "t", &v), 0);
	ck_assert_uint_eq(v.n, 0);
	sl__lease_view_free(&v);
	ops->close(st);
}
END_TEST

/* Everything under the prefix deleted, as a wiped cluster: a new incarnation. */
START_TEST(a_wiped_store_is_a_new_incarnation)
{
	void *st = open_at(endpoints(), "wipe", STORE_TIMEOUT_MS);
	struct sl_limits l = limits(1000, 200);
	struct sl__lease_view v, w;
	struct sl__lease_rec a, b;
	char cmd[1024];
	int64_t deadline, t0;
	int rc;

	ck_assert_int_eq(ops->budget_set(st, "t", &l), 0);
	ck_assert_int_eq(ops->read(st, "t", &v), 0);
	a = rec_of(st, 400, 100);
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, true, v.version, v.incarnation), 0);
	/* etcdctl's own bound on the call is 5 s: as long as the store's here. */
	snprintf(cmd, sizeof(cmd),
		 "ETCDCTL_API=3 etcdctl --endpoints=%s --dial-timeout=%ds --command-timeout=%ds "
		 "del --prefix sltest-%ld-wipe/ >/dev/null",
		 endpoints(), STORE_TIMEOUT_MS / 1000, STORE_TIMEOUT_MS / 1000, (long)getpid());
	ck_assert_int_eq(system(cmd), 0);
	/* Gone, but not deleted: the view's incarnation says the store is new. */
	ck_assert_int_eq(ops->read(st, "t", &w), -ENOENT);
	ck_assert_uint_ne(w.incarnation, 0);
	ck_assert_uint_ne(w.incarnation, v.incarnation);
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, false, v.version, v.incarnation), -ESTALE);
	ck_assert_int_eq(ops->budget_set(st, "t", &l), 0);
	ck_assert_int_eq(ops->read(st, "t", &w), 0);
	ck_assert_uint_ne(w.incarnation, v.incarnation);
	ck_assert_uint_eq(w.n, 0);
	/* a held a record in the old store: it registers again, and while the
	 * quarantine this starts runs, others register but nothing grows. */
	t0 = now_ms();
	ck_assert_int_eq(ops->write(st, "t", &a, QUARANTINE_TTL_MS, true, w.version, w.incarnation),
			 0);
	sl__lease_view_free(&w);
	ck_assert_int_eq(ops->read(st, "t", &w), 0);
	b = rec_of(st, 100, 100);
	ck_assert_int_eq(ops->write(st, "t", &b, LIVE_TTL_MS, true, w.version, w.incarnation), 0);
	sl__lease_view_free(&w);
	ck_assert_int_eq(ops->read(st, "t", &w), 0);
	ck_assert_uint_eq(w.n, 2);
	a.held = 500;
	rc = ops->write(st, "t", &a, LIVE_TTL_MS, true, w.version, w.incarnation);
	/* Granted after t0, the quarantine cannot have ended before t0 plus
	 * three ttls: a grow that went through sooner is a defect.  (On a
	 * machine slow enough to get here later, the grow may go through.) */
	if (rc == 0)
		ck_assert_msg(now_ms() - t0 >= 3 * QUARANTINE_TTL_MS,
			      "a record grew %lld ms into a quarantine of %d ms",
			      (long long)(now_ms() - t0), 3 * QUARANTINE_TTL_MS);
	else
		ck_assert_int_eq(rc, -EAGAIN);
	deadline = now_ms() + 3 * QUARANTINE_TTL_MS + 60000;
	while ((rc = ops->write(st, "t", &a, LIVE_TTL_MS, true, w.version, w.incarnation)) == -EAGAIN &&
	       now_ms() < deadline)
		usleep(100000);
	ck_assert_int_eq(rc, 0);
	sl__lease_view_free(&v);
	sl__lease_view_free(&w);
	ops->close(st);
}
END_TEST

/* The public URL of a test's store (open_at()'s prefix). */
static void url_of(char *out, size_t cap, const char *hosts, const char *tag)
{
	snprintf(out, cap, "etcd://%s/sltest-%ld-%s", hosts, (long)getpid(), tag);
}

static int remove_at(const char *hosts, const char *tag, uint32_t timeout_ms)
{
	struct sl_lease_store_opts o;
	char url[512];

	sl_lease_store_opts_init(&o);
	o.timeout_ms = timeout_ms;
	url_of(url, sizeof(url), hosts, tag);
	return sl_lease_store_remove(url, &o);
}

/* How many keys etcd holds that start with "sltest-PID-@tag", as etcd
 * itself counts them (not through the store, whose reads create keys). */
static int64_t keys_under(const char *tag)
{
	struct sl__etcd_conn c;
	char key[256], end[256];
	json_t *req, *resp = NULL;
	int64_t n = -1;

	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(sl__etcd_conn_init(&c, endpoints(), strlen(endpoints()), STORE_TIMEOUT_MS),
			 0);
	snprintf(key, sizeof(key), "sltest-%ld-%s", (long)getpid(), tag);
	snprintf(end, sizeof(end), "%s", key);
	end[strlen(end) - 1]++;
	req = json_pack("{s:o,s:o,s:b}", "key", sl__etcd_b64s(key), "range_end", sl__etcd_b64s(end),
			"count_only", 1);
	ck_assert_ptr_nonnull(req);
	ck_assert_int_eq(sl__etcd_call(&c, "/v3/kv/range", req, &resp, NULL), 0);
	ck_assert_int_eq(sl__etcd_get_int(json_object_get(resp, "count"), 0, &n), 0);
	json_decref(req);
	json_decref(resp);
	sl__etcd_conn_fini(&c);
	return n;
}

/* sl_lease_store_remove() of a store with budgets, records and floors:
 * every key of it goes, in one step, and a holder's next read finds the
 * store wiped (a new incarnation), as after a wiped cluster. */
START_TEST(remove_empties_the_store_and_holders_see_it_wiped)
{
	void *st = open_at(endpoints(), "remove", STORE_TIMEOUT_MS);
	void *nested = open_at(endpoints(), "remove/sub", STORE_TIMEOUT_MS);
	void *sibling = open_at(endpoints(), "remove-x", STORE_TIMEOUT_MS);
	struct sl_limits l = limits(1000, 200), got;
	struct sl__lease_view v, w;
	struct sl__lease_rec a;
	char list[4][SL_LEASE_NAME_MAX];
	size_t n = 99;

	ck_assert_int_eq(ops->budget_set(st, "t", &l), 0);
	ck_assert_int_eq(ops->budget_set(st, "u", &l), 0);
	ck_assert_int_eq(ops->read(st, "t", &v), 0);
	a = rec_of(st, 400, 100);
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, true, v.version, v.incarnation), 0);
	ck_assert_int_eq(ops->budget_set(nested, "n", &l), 0);
	ck_assert_int_eq(ops->budget_set(sibling, "s", &l), 0);
	ck_assert_int_gt(keys_under("remove/"), 0);
	ck_assert_int_gt(keys_under("remove/budgets/"), 0);

	ck_assert_int_eq(remove_at(endpoints(), "remove", STORE_TIMEOUT_MS), 0);
	/* The incarnation, the budgets, the record and the floor: all gone;
	 * the store nested under the prefix and the sibling keep theirs. */
	ck_assert_int_eq(keys_under("remove/incarnation"), 0);
	ck_assert_int_eq(keys_under("remove/budgets/"), 0);
	ck_assert_int_eq(ops->budget_get(nested, "n", &got), 0);
	ck_assert_int_eq(ops->budget_get(sibling, "s", &got), 0);

	/* The holder: the budget is gone with the store, which is new. */
	ck_assert_int_eq(ops->read(st, "t", &w), -ENOENT);
	ck_assert_uint_ne(w.incarnation, 0);
	ck_assert_uint_ne(w.incarnation, v.incarnation);
	ck_assert_int_eq(ops->write(st, "t", &a, LIVE_TTL_MS, false, v.version, v.incarnation),
			 -ESTALE);
	ck_assert_int_eq(ops->budget_list(st, list, 4, &n), 0);
	ck_assert_uint_eq(n, 0);

	/* That read made the new incarnation: a remove takes it; then there
	 * is nothing left to remove. */
	ck_assert_int_eq(remove_at(endpoints(), "remove", STORE_TIMEOUT_MS), 0);
	ck_assert_int_eq(keys_under("remove/incarnation"), 0);
	ck_assert_int_eq(remove_at(endpoints(), "remove", STORE_TIMEOUT_MS), -ENOENT);
	ck_assert_int_eq(ops->budget_get(nested, "n", &got), 0);
	sl__lease_view_free(&v);
	ops->close(st);
	ops->close(nested);
	ops->close(sibling);
}
END_TEST

START_TEST(remove_of_nothing_is_enoent_and_bad_urls_are_refused_as_open_does)
{
	static const char *bad[] = { "etcd:", "etcd://", "etcd:///p", "etcd://host/p",
				     "etcd://h:1x/p", "etcd://h:1/bad prefix", "etcd://h:1//p" };
	struct sl_lease_store_opts o;
	sl_lease_store *s;
	char url[512];

	/* A prefix nothing was ever written under. */
	ck_assert_int_eq(remove_at(endpoints(), "never", STORE_TIMEOUT_MS), -ENOENT);
	ck_assert_int_eq(keys_under("never"), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(sl_lease_store_open(bad[i], NULL, &s) == -EINVAL, "open %s", bad[i]);
		ck_assert_msg(sl_lease_store_remove(bad[i], NULL) == -EINVAL, "remove %s", bad[i]);
	}
	/* The options are checked as open checks them, before any I/O. */
	url_of(url, sizeof(url), endpoints(), "never");
	sl_lease_store_opts_init(&o);
	o.timeout_ms = 0;
	ck_assert_int_eq(sl_lease_store_remove(url, &o), -EINVAL);
	sl_lease_store_opts_init(&o);
	o.node = "a:b";
	ck_assert_int_eq(sl_lease_store_remove(url, &o), -EINVAL);
}
END_TEST

START_TEST(calls_are_bounded_and_fail_over_between_endpoints)
{
	char hosts[512];
	struct sl_limits l = limits(1000, 0), got;
	int64_t t0;
	int port, fd = hung_listener(&port);
	void *st;

	/* Nothing listens on port 1. */
	st = open_at("127.0.0.1:1", "down", 500);
	t0 = now_ms();
	ck_assert_int_eq(ops->budget_get(st, "t", &got), -ECONNREFUSED);
	ck_assert_int_lt(now_ms() - t0, 30000);
	ops->close(st);

	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", port);
	st = open_at(hosts, "hung", 500);
	ck_assert_int_eq(ops->budget_get(st, "t", &got), -ETIMEDOUT);
	ops->close(st);

	/* A refusing and a hung member before the real one: it still answers. */
	snprintf(hosts, sizeof(hosts), "127.0.0.1:1,127.0.0.1:%d,%s", port, endpoints());
	st = open_at(hosts, "failover", 5000);
	ck_assert_int_eq(ops->budget_set(st, "t", &l), 0);
	ck_assert_int_eq(ops->budget_get(st, "t", &got), 0);
	ck_assert_uint_eq(got.max, 1000);
	ops->close(st);
	close(fd);
}
END_TEST

/* etcd out of reach: remove answers what every call of the store answers. */
START_TEST(remove_fails_as_other_calls_do_when_etcd_cannot_be_reached)
{
	char hosts[64];
	int port, fd = hung_listener(&port);

	/* Nothing listens on port 1: refused, tried again until the timeout
	 * (long enough that a loaded machine's first try is not cut short). */
	ck_assert_int_eq(remove_at("127.0.0.1:1", "down", 3000), -ECONNREFUSED);
	/* A member that accepts and never answers: the timeout. */
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", port);
	ck_assert_int_eq(remove_at(hosts, "hung", 500), -ETIMEDOUT);
	close(fd);
}
END_TEST

/*
 * Ids were node:pid:n, n counted per handle: two handles of one node name
 * and pid (two stores in one process, or two nodes of one name whose
 * processes are both pid 1, as in containers) made the same record key and
 * held the budget twice over.  Now every handle's ids differ.
 */
START_TEST(two_handles_of_one_node_name_never_make_one_id)
{
	void *a = open_at(endpoints(), "ids", STORE_TIMEOUT_MS);
	void *b = open_at(endpoints(), "ids", STORE_TIMEOUT_MS);
	char ia[SL_LEASE_ID_MAX], ib[SL_LEASE_ID_MAX];

	ck_assert_int_eq(ops->make_id(a, ia), 0);
	ck_assert_int_eq(ops->make_id(b, ib), 0);
	ck_assert_str_ne(ia, ib);
	ck_assert(strncmp(ia, "testnode:", 9) == 0);
	ops->close(a);
	ops->close(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("etcd_store");
	TCase *tc = tcase_create("store");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, open_refuses_malformed_urls);
	tcase_add_test(tc, budgets_are_set_read_listed_and_deleted);
	tcase_add_test(tc, grows_compare_the_version_and_renewals_do_not);
	tcase_add_test(tc, an_expired_record_counts_its_floor_and_comes_back_only_within_it);
	tcase_add_test(tc, a_wiped_store_is_a_new_incarnation);
	tcase_add_test(tc, calls_are_bounded_and_fail_over_between_endpoints);
	tcase_add_test(tc, remove_empties_the_store_and_holders_see_it_wiped);
	tcase_add_test(tc, remove_of_nothing_is_enoent_and_bad_urls_are_refused_as_open_does);
	tcase_add_test(tc, remove_fails_as_other_calls_do_when_etcd_cannot_be_reached);
	tcase_add_test(tc, two_handles_of_one_node_name_never_make_one_id);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
