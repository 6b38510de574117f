/* SPDX-License-Identifier: MIT */
/*
 * libsoftlimit-lease's calls that need no run thread (include/softlimit/
 * lease.h): stores by URL, budgets, join and leave, and bad input refused
 * with nothing changed.  Every store is a shm: object of its own, unlinked
 * at the end.  Leases run by sl_lease_run() are test_lease_run.c's;
 * processes apart, test_lease_shm.c's.
 */
#include "lease_helpers.h"

/* ---- stores ---- */

START_TEST(store_open_refuses_bad_urls_and_opts_and_creates_nothing)
{
	struct sl_lease_store_opts o;
	sl_lease_store *s = (sl_lease_store *)&o;
	char name[64], url[160];
	int rc;

	lease_name(name, sizeof(name));
	lease_url(url, sizeof(url), name);
	ck_assert_int_eq(sl_lease_store_open(NULL, NULL, &s), -EINVAL);
	ck_assert_int_eq(sl_lease_store_open(url, NULL, NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_store_open("", NULL, &s), -EINVAL);
	ck_assert_int_eq(sl_lease_store_open("shm", NULL, &s), -EINVAL);
	ck_assert_int_eq(sl_lease_store_open(":x", NULL, &s), -EINVAL);
	ck_assert_int_eq(sl_lease_store_open("shm:", NULL, &s), -EINVAL);
	ck_assert_int_eq(sl_lease_store_open("shm:a/b", NULL, &s), -EINVAL);
	ck_assert_int_eq(sl_lease_store_open("shm:a b", NULL, &s), -EINVAL);
	ck_assert_int_eq(
		sl_lease_store_open("shm:0123456789012345678901234567890123456789012345678901234567890123",
				    NULL, &s),
		-EINVAL);
	ck_assert_int_eq(sl_lease_store_open("S!M:x", NULL, &s), -EINVAL);
	ck_assert_int_eq(sl_lease_store_open("redis://localhost/x", NULL, &s), -EPROTONOSUPPORT);
	ck_assert_int_eq(sl_lease_store_open("nosuch:x", NULL, &s), -EPROTONOSUPPORT);
	/* etcd: -EPROTONOSUPPORT without libcurl and jansson, -EINVAL for an
	 * empty URL with them. */
	rc = sl_lease_store_open("etcd://", NULL, &s);
	ck_assert(rc == -EPROTONOSUPPORT || rc == -EINVAL);

	sl_lease_store_opts_init(&o);
	o.size = 0;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EINVAL);
	sl_lease_store_opts_init(&o);
	o.timeout_ms = 0;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EINVAL);
	sl_lease_store_opts_init(&o);
	o.slots = 0;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EINVAL);
	sl_lease_store_opts_init(&o);
	o.slots = 1u << 30;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EINVAL);
	sl_lease_store_opts_init(&o);
	o.reserved = 1;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EINVAL);
	sl_lease_store_opts_init(&o);
	o.node = "a:b";
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EINVAL);
	o.node = "";
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EINVAL);
	o.node = "n2345678901234567890123456789012345678901"; /* 41 bytes */
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EINVAL);
	ck_assert_ptr_eq(s, (sl_lease_store *)&o);
	ck_assert(!lease_object_exists(name));
}
END_TEST

START_TEST(store_opts_init_sets_the_defaults)
{
	struct sl_lease_store_opts o;
	struct sl_lease_opts lo;

	memset(&o, 0xff, sizeof(o));
	sl_lease_store_opts_init(&o);
	ck_assert_uint_eq(o.size, sizeof(o));
	ck_assert_uint_eq(o.timeout_ms, 1000);
	ck_assert_uint_eq(o.slots, 256);
	ck_assert_uint_eq(o.reserved, 0);
	ck_assert_ptr_null(o.node);
	sl_lease_store_opts_init(NULL);

	memset(&lo, 0xff, sizeof(lo));
	sl_lease_opts_init(&lo);
	ck_assert_uint_eq(lo.size, sizeof(lo));
	ck_assert_uint_eq(lo.flags, 0);
	ck_assert_uint_eq(lo.period_ms, 200);
	ck_assert_uint_eq(lo.ttl_ms, 10000);
	ck_assert_uint_eq(lo.margin_ms, 1000);
	ck_assert_uint_eq(lo.idle_ms, 30000);
	ck_assert_ptr_null(lo.demand);
	ck_assert_ptr_null(lo.demand_ctx);
	sl_lease_opts_init(NULL);
	sl_lease_store_close(NULL);
	sl_lease_stop(NULL);
	ck_assert_int_eq(sl_lease_run(NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_leave(NULL), 0);
	ck_assert_ptr_null(sl_lease_group(NULL));
}
END_TEST

START_TEST(two_handles_of_one_name_share_the_store)
{
	char name[64];
	sl_lease_store *a, *b;
	struct sl_limits lim;

	lease_name(name, sizeof(name));
	a = lease_open(name, 1000);
	ck_assert(lease_object_exists(name));
	b = lease_open(name, 1000);
	budget_make(a, "x", 100, 0, 0);
	ck_assert_int_eq(sl_lease_budget_get(b, "x", &lim), 0);
	ck_assert_uint_eq(lim.max, 100);
	sl_lease_store_close(a);
	sl_lease_store_close(b);
	ck_assert(lease_object_exists(name)); /* it stays for other processes */
	lease_unlink(name);
}
END_TEST

START_TEST(the_longest_node_name_gives_whole_participant_ids)
{
	static const char node[] = "n234567890123456789012345678901234567890"; /* 40 bytes */
	struct sl_lease_participant p[LEASE_MAXP];
	struct sl_lease_store_opts o;
	sl_lease_store *s = NULL;
	sl_lease *l = NULL;
	sl_tree *t;
	sl_group *g;
	char name[64], url[160], *end;
	unsigned long long pid, start, n;

	lease_name(name, sizeof(name));
	lease_url(url, sizeof(url), name);
	sl_lease_store_opts_init(&o);
	o.node = node;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), 0);
	budget_make(s, "b", 100, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, &l), 0);
	ck_assert_uint_eq(lease_parts(s, "b", p), 1);
	/* "node:pid:start:n", every part there. */
	ck_assert(strncmp(p[0].id, node, sizeof(node) - 1) == 0 && p[0].id[sizeof(node) - 1] == ':');
	ck_assert_int_eq(sscanf(p[0].id + sizeof(node), "%llu:%llu:%llu", &pid, &start, &n), 3);
	ck_assert_uint_eq(pid, (unsigned long long)getpid());
	end = strrchr(p[0].id, ':');
	ck_assert_ptr_nonnull(end);
	ck_assert_uint_eq(strtoull(end + 1, NULL, 10), n);
	ck_assert_int_eq(sl_lease_leave(l), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

START_TEST(store_remove_unlinks_the_object_and_refuses_bad_input)
{
	struct sl_lease_store_opts o;
	struct sl_limits lim;
	sl_lease_store *s;
	char name[64], url[160];

	lease_name(name, sizeof(name));
	lease_url(url, sizeof(url), name);
	s = lease_open(name, 1000);
	budget_make(s, "b", 100, 0, 0);
	sl_lease_store_close(s);

	ck_assert_int_eq(sl_lease_store_remove(NULL, NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_store_remove("noscheme", NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_store_remove("shm:", NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_store_remove("shm:a/b", NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_store_remove("nosuch:x", NULL), -EPROTONOSUPPORT);
	sl_lease_store_opts_init(&o);
	o.reserved = 1;
	ck_assert_int_eq(sl_lease_store_remove(url, &o), -EINVAL);
	ck_assert(lease_object_exists(name));

	sl_lease_store_opts_init(&o);
	ck_assert_int_eq(sl_lease_store_remove(url, &o), 0);
	ck_assert(!lease_object_exists(name));
	ck_assert_int_eq(sl_lease_store_remove(url, NULL), -ENOENT);
	/* Opened again: a new, empty store. */
	s = lease_open(name, 1000);
	ck_assert_int_eq(sl_lease_budget_get(s, "b", &lim), -ENOENT);
	sl_lease_store_close(s);
	ck_assert_int_eq(sl_lease_store_remove(url, NULL), 0);
}
END_TEST

/* One lookup for both: whatever open refuses, remove refuses with the same
 * errno, before it touches anything (the store here exists). */
START_TEST(store_remove_refuses_what_open_refuses_with_the_same_errno)
{
	static const char *urls[] = { "", "shm", ":x", "shm:", "shm:a/b", "shm:a b", "S!M:x",
				      "redis://localhost/x", "nosuch:x", "etcd:", "etcd://",
				      "etcd://h:1/bad prefix" };
	struct sl_lease_store_opts o;
	sl_lease_store *s;
	char name[64], url[160];
	int rc;

	lease_name(name, sizeof(name));
	lease_url(url, sizeof(url), name);
	s = lease_open(name, 1000);
	sl_lease_store_close(s);
	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		rc = sl_lease_store_open(urls[i], NULL, &s);
		ck_assert_msg(rc < 0, "open %s: %d", urls[i], rc);
		ck_assert_msg(sl_lease_store_remove(urls[i], NULL) == rc, "remove %s: %d, open %d",
			      urls[i], sl_lease_store_remove(urls[i], NULL), rc);
	}
	for (int bad = 0; bad < 6; bad++) {
		sl_lease_store_opts_init(&o);
		switch (bad) {
		case 0: o.size = 0; break;
		case 1: o.timeout_ms = 0; break;
		case 2: o.timeout_ms = 3600001; break;
		case 3: o.slots = 0; break;
		case 4: o.reserved = 1; break;
		default: o.node = "a:b"; break;
		}
		ck_assert_int_eq(sl_lease_store_open(url, &o, &s), -EINVAL);
		ck_assert_msg(sl_lease_store_remove(url, &o) == -EINVAL, "bad opts %d", bad);
		ck_assert(lease_object_exists(name));
	}
	ck_assert_int_eq(sl_lease_store_remove(url, NULL), 0);
	ck_assert(!lease_object_exists(name));
}
END_TEST

/* ---- budgets ---- */

START_TEST(budget_set_refuses_bad_input_and_changes_nothing)
{
	char name[64];
	sl_lease_store *s;
	struct sl_limits lim, got;
	size_t n = 99;

	lease_name(name, sizeof(name));
	s = lease_open(name, 1000);
	budget_make(s, "b", 1000, 500, 100);

	sl_limits_init(&lim);
	lim.max = 10;
	ck_assert_int_eq(sl_lease_budget_set(NULL, "b", &lim), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_set(s, NULL, &lim), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_set(s, "b", NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_set(s, "", &lim), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_set(s, "a/b", &lim), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_set(s, "a b", &lim), -EINVAL);
	ck_assert_int_eq(
		sl_lease_budget_set(s, "0123456789012345678901234567890123456789012345678901234567890123",
				    &lim),
		-EINVAL);
	lim.max = 0;
	ck_assert_int_eq(sl_lease_budget_set(s, "b", &lim), -EINVAL);
	lim.max = SL_UNLIMITED;
	ck_assert_int_eq(sl_lease_budget_set(s, "b", &lim), -EINVAL);
	lim.max = 10;
	lim.soft = 11;
	ck_assert_int_eq(sl_lease_budget_set(s, "b", &lim), -EINVAL);
	lim.soft = 0;
	lim.min = 11;
	ck_assert_int_eq(sl_lease_budget_set(s, "b", &lim), -EINVAL);
	lim.min = 0;
	lim.high = 5;
	ck_assert_int_eq(sl_lease_budget_set(s, "b", &lim), -EINVAL);

	ck_assert_int_eq(sl_lease_budget_get(s, "b", &got), 0);
	ck_assert_uint_eq(got.max, 1000);
	ck_assert_uint_eq(got.soft, 500);
	ck_assert_uint_eq(got.min, 100);
	ck_assert_uint_eq(got.high, SL_UNLIMITED);
	ck_assert_int_eq(sl_lease_budget_list(s, NULL, 0, &n), 0);
	ck_assert_uint_eq(n, 1);
	sl_lease_store_close(s);
	lease_unlink(name);
}
END_TEST

START_TEST(budgets_are_set_read_listed_sorted_and_deleted)
{
	char name[64], names[2][SL_LEASE_NAME_MAX];
	struct sl_lease_participant p[1];
	sl_lease_store *s;
	struct sl_limits got;
	size_t n = 0;

	lease_name(name, sizeof(name));
	s = lease_open(name, 1000);
	ck_assert_int_eq(sl_lease_budget_list(s, names, 2, &n), 0);
	ck_assert_uint_eq(n, 0);
	budget_make(s, "zeta", 300, 0, 0);
	budget_make(s, "alpha:1", 100, 50, 10);
	budget_make(s, "mid-2.x_y", 200, 0, 0);
	ck_assert_int_eq(sl_lease_budget_list(s, names, 2, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(names[0], "alpha:1");
	ck_assert_str_eq(names[1], "mid-2.x_y");

	budget_make(s, "zeta", 400, 100, 0); /* changes it */
	ck_assert_int_eq(sl_lease_budget_get(s, "zeta", &got), 0);
	ck_assert_uint_eq(got.max, 400);
	ck_assert_uint_eq(got.soft, 100);

	ck_assert_int_eq(sl_lease_budget_get(s, "nosuch", &got), -ENOENT);
	ck_assert_int_eq(sl_lease_budget_get(NULL, "zeta", &got), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_get(s, "zeta", NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_get(s, "bad name", &got), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_delete(s, "nosuch"), -ENOENT);
	ck_assert_int_eq(sl_lease_budget_delete(NULL, "zeta"), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_delete(s, ""), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_list(NULL, names, 2, &n), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_list(s, names, 2, NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_list(s, NULL, 2, &n), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_participants(s, "nosuch", p, 1, &n), -ENOENT);
	ck_assert_int_eq(sl_lease_budget_participants(NULL, "zeta", p, 1, &n), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_participants(s, "zeta", NULL, 1, &n), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_participants(s, "zeta", p, 1, NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_budget_participants(s, "zeta", NULL, 0, &n), 0);
	ck_assert_uint_eq(n, 0);

	ck_assert_int_eq(sl_lease_budget_delete(s, "alpha:1"), 0);
	ck_assert_int_eq(sl_lease_budget_get(s, "alpha:1", &got), -ENOENT);
	ck_assert_int_eq(sl_lease_budget_list(s, names, 2, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(names[0], "mid-2.x_y");
	ck_assert_str_eq(names[1], "zeta");
	sl_lease_store_close(s);
	lease_unlink(name);
}
END_TEST

START_TEST(a_full_budget_table_is_enospc)
{
	struct sl_lease_store_opts o;
	sl_lease_store *s = NULL;
	struct sl_limits lim;
	char name[64], url[160];

	lease_name(name, sizeof(name));
	lease_url(url, sizeof(url), name);
	sl_lease_store_opts_init(&o);
	o.slots = 2;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), 0);
	budget_make(s, "a", 10, 0, 0);
	budget_make(s, "b", 10, 0, 0);
	sl_limits_init(&lim);
	lim.max = 10;
	ck_assert_int_eq(sl_lease_budget_set(s, "c", &lim), -ENOSPC);
	sl_lease_store_close(s);
	lease_unlink(name);
}
END_TEST

/* ---- join and leave ---- */

START_TEST(join_refuses_bad_input_and_changes_nothing)
{
	struct sl_lease_participant p[LEASE_MAXP];
	struct sl_lease_opts o;
	struct sl_limits before;
	sl_lease *l = (sl_lease *)&o;
	sl_lease_store *s;
	sl_tree *t;
	sl_group *g;
	char name[64];

	lease_name(name, sizeof(name));
	s = lease_open(name, 1000);
	budget_make(s, "b", 1000, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", 5000);
	ck_assert_int_eq(sl_charge(g, 1200, 0), 0);
	before = limits_of(g);

	ck_assert_int_eq(sl_lease_join(NULL, "b", g, NULL, &l), -EINVAL);
	ck_assert_int_eq(sl_lease_join(s, NULL, g, NULL, &l), -EINVAL);
	ck_assert_int_eq(sl_lease_join(s, "b", NULL, NULL, &l), -EINVAL);
	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, NULL), -EINVAL);
	ck_assert_int_eq(sl_lease_join(s, "b/c", g, NULL, &l), -EINVAL);
	sl_lease_opts_init(&o);
	o.size = 4;
	ck_assert_int_eq(sl_lease_join(s, "b", g, &o, &l), -EINVAL);
	sl_lease_opts_init(&o);
	o.flags = 1u << 7;
	ck_assert_int_eq(sl_lease_join(s, "b", g, &o, &l), -EINVAL);
	sl_lease_opts_init(&o);
	o.period_ms = 0;
	ck_assert_int_eq(sl_lease_join(s, "b", g, &o, &l), -EINVAL);
	sl_lease_opts_init(&o);
	o.margin_ms = o.ttl_ms;
	ck_assert_int_eq(sl_lease_join(s, "b", g, &o, &l), -EINVAL);
	sl_lease_opts_init(&o);
	o.ttl_ms = 3600001;
	ck_assert_int_eq(sl_lease_join(s, "b", g, &o, &l), -EINVAL);
	sl_lease_opts_init(&o);
	o.period_ms = o.ttl_ms - o.margin_ms + 1; /* it would lapse between renewals */
	ck_assert_int_eq(sl_lease_join(s, "b", g, &o, &l), -EINVAL);
	ck_assert_int_eq(sl_lease_join(s, "nosuch", g, NULL, &l), -ENOENT);
	/* 1200 used, 1000 in the budget: shrink first. */
	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, &l), -EBUSY);
	ck_assert_ptr_eq(l, (sl_lease *)&o);
	{
		struct sl_limits after = limits_of(g);

		assert_limits_eq(&before, &after);
	}
	ck_assert_uint_eq(lease_parts(s, "b", p), 0);
	ck_assert_int_eq(sl_uncharge(g, 1200), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

START_TEST(join_applies_the_share_and_leave_restores_the_limits)
{
	struct sl_lease_participant p[LEASE_MAXP];
	struct sl_limits orig, lim;
	struct sl_lease_stats st;
	sl_lease_store *s;
	sl_lease *l = NULL;
	sl_tree *t;
	sl_group *g;
	char name[64];

	lease_name(name, sizeof(name));
	s = lease_open(name, 1000);
	budget_make(s, "b", 1000, 400, 200);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	sl_limits_init(&orig);
	orig.max = 5000;
	orig.soft = 3000;
	orig.min = 100;
	g = group_new_lim(sl_tree_root(t), "g", &orig);
	ck_assert_int_eq(sl_charge(g, 300, 0), 0);

	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, &l), 0);
	ck_assert_ptr_nonnull(l);
	ck_assert_ptr_eq(sl_lease_group(l), g);
	/* The first of min 200: floor 200; usage 300: share 300. */
	st = lease_stats_of(l);
	ck_assert_int_eq(st.state, SL_LEASE_HELD);
	ck_assert_uint_eq(st.share, 300);
	ck_assert_uint_eq(st.floor, 200);
	ck_assert_uint_eq(st.renewals, 1);
	ck_assert_int_gt(st.expires_ms, 0);
	ck_assert_int_le(st.expires_ms, 10000 - 1000); /* the default ttl and margin */
	lim = limits_of(g);
	ck_assert_uint_eq(lim.max, 300);
	ck_assert_uint_eq(lim.soft, 400 * 300 / 1000);
	ck_assert_uint_eq(lim.min, 100);
	ck_assert_uint_eq(lease_parts(s, "b", p), 1);
	ck_assert_uint_eq(p[0].share, 300);
	ck_assert_uint_eq(p[0].floor, 200);
	ck_assert_uint_eq(p[0].usage, 300);
	ck_assert_int_eq(p[0].state, SL_LEASE_HELD);
	ck_assert(strncmp(p[0].id, "test:", 5) == 0);
	ck_assert_int_eq(sl_lease_stats(NULL, &st), -EINVAL);
	ck_assert_int_eq(sl_lease_report_reuse(NULL, 1, 1), -EINVAL);
	ck_assert_int_eq(sl_lease_stats(l, NULL), -EINVAL);

	ck_assert_int_eq(sl_lease_leave(l), 0);
	lim = limits_of(g);
	assert_limits_eq(&lim, &orig);
	ck_assert_uint_eq(lease_parts(s, "b", p), 0);
	ck_assert_int_eq(sl_uncharge(g, 300), 0);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

START_TEST(a_group_holds_one_lease_and_a_full_store_is_enospc)
{
	struct sl_lease_store_opts o;
	struct sl_lease_participant p[LEASE_MAXP];
	sl_lease_store *s = NULL, *s2;
	sl_lease *l = NULL, *l2 = NULL;
	sl_tree *t;
	sl_group *g, *h;
	char name[64], url[160];

	lease_name(name, sizeof(name));
	lease_url(url, sizeof(url), name);
	sl_lease_store_opts_init(&o);
	o.slots = 1;
	ck_assert_int_eq(sl_lease_store_open(url, &o, &s), 0);
	s2 = lease_open(name, 1000);
	budget_make(s, "b", 1000, 0, 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	h = group_new(sl_tree_root(t), "h", SL_UNLIMITED);
	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, &l), 0);
	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, &l2), -EEXIST);
	ck_assert_int_eq(sl_lease_join(s2, "b", g, NULL, &l2), -EEXIST);
	ck_assert_ptr_null(l2);
	ck_assert_int_eq(sl_lease_join(s2, "b", h, NULL, &l2), -ENOSPC);
	ck_assert_uint_eq(lease_parts(s, "b", p), 1);
	ck_assert_uint_eq(limits_of(h).max, SL_UNLIMITED);
	/* Closing a store leaves its leases. */
	sl_lease_store_close(s);
	ck_assert_uint_eq(lease_parts(s2, "b", p), 0);
	ck_assert_uint_eq(limits_of(g).max, SL_UNLIMITED);
	ck_assert_int_eq(sl_lease_join(s2, "b", h, NULL, &l2), 0);
	ck_assert_int_eq(sl_lease_leave(l2), 0);
	sl_lease_store_close(s2);
	sl_tree_destroy(t);
	lease_unlink(name);
}
END_TEST

static Suite *lease_suite(void)
{
	Suite *s = suite_create("lease");
	TCase *tc = tcase_create("lease");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, store_open_refuses_bad_urls_and_opts_and_creates_nothing);
	tcase_add_test(tc, store_opts_init_sets_the_defaults);
	tcase_add_test(tc, two_handles_of_one_name_share_the_store);
	tcase_add_test(tc, the_longest_node_name_gives_whole_participant_ids);
	tcase_add_test(tc, store_remove_unlinks_the_object_and_refuses_bad_input);
	tcase_add_test(tc, store_remove_refuses_what_open_refuses_with_the_same_errno);
	tcase_add_test(tc, budget_set_refuses_bad_input_and_changes_nothing);
	tcase_add_test(tc, budgets_are_set_read_listed_sorted_and_deleted);
	tcase_add_test(tc, a_full_budget_table_is_enospc);
	tcase_add_test(tc, join_refuses_bad_input_and_changes_nothing);
	tcase_add_test(tc, join_applies_the_share_and_leave_restores_the_limits);
	tcase_add_test(tc, a_group_holds_one_lease_and_a_full_store_is_enospc);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return lease_main(lease_suite());
}
