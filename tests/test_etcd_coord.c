/* SPDX-License-Identifier: MIT */
/*
 * The coordinated etcd protocol (etcd://...?coordinated, issue Scale)
 * through the public API, against a real etcd that tests/etcd_cluster.py
 * started (SL_ETCD_ENDPOINTS): nodes (store handles, each with its run
 * thread) share a budget, one of them coordinates it, shares follow demand,
 * the coordinator's loss elects another, and the store never counts more
 * than the budget (read at one revision, every few milliseconds, by a
 * checker thread, as sl_lease_budget_participants() shows it).
 */
#include "lease_helpers.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_http.h"
#include "lease_int.h"

#define MAX 30000
#define NODES 3

static const char *endpoints(void)
{
	const char *e = getenv("SL_ETCD_ENDPOINTS");

	ck_assert_msg(e && *e, "run under tests/etcd_cluster.py (SL_ETCD_ENDPOINTS)");
	return e;
}

/* A prefix per test: "sltest-PID-TAG". */
static void coord_url(char *buf, size_t size, const char *tag, const char *query)
{
	snprintf(buf, size, "etcd://%s/sltest-%ld-%s%s", endpoints(), (long)getpid(), tag, query);
}

/* What each node's demand hook reports as evicted each period: a node that
 * evicts asks for more than its share, one that does not (and uses
 * nothing) asks for nothing. */
static _Atomic uint64_t want[NODES + 1];

static void demand_hook(sl_lease *l, struct sl_lease_demand *d, void *ctx)
{
	(void)l;
	d->evicted = atomic_load(&want[(uintptr_t)ctx]);
	d->idle_ms = 0;
}

struct node {
	sl_lease_store *s;
	sl_tree *t;
	sl_group *g;
	sl_lease *l;
	pthread_t run;
	bool open;
};

static void node_start(struct node *n, const char *url, const char *budget, uintptr_t idx)
{
	struct sl_lease_store_opts so;
	struct sl_lease_opts o;

	sl_lease_store_opts_init(&so);
	so.timeout_ms = 30000;
	ck_assert_int_eq(sl_lease_store_open(url, &so, &n->s), 0);
	n->t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	n->g = group_new(sl_tree_root(n->t), "g", SL_UNLIMITED);
	/* A ttl no stall of a loaded machine reaches: these cases are about
	 * shares and elections, not fences. */
	sl_lease_opts_init(&o);
	o.period_ms = 50;
	o.ttl_ms = 60000;
	o.margin_ms = 2000;
	o.demand = demand_hook;
	o.demand_ctx = (void *)idx;
	ck_assert_int_eq(sl_lease_join(n->s, budget, n->g, &o, &n->l), 0);
	ck_assert_int_eq(pthread_create(&n->run, NULL, lease_run_thread, n->s), 0);
	n->open = true;
}

static void node_stop(struct node *n)
{
	if (!n->open)
		return;
	sl_lease_stop(n->s);
	pthread_join(n->run, NULL);
	ck_assert_int_eq(sl_lease_leave(n->l), 0);
	sl_lease_store_close(n->s);
	sl_tree_destroy(n->t);
	n->open = false;
}

static uint64_t share_of(const struct node *n)
{
	return lease_stats_of(n->l).share;
}

/* ---- the checker: the store's sum, at one revision, all along ---- */

struct checker {
	sl_lease_store *s;
	const char *budget;
	atomic_bool stop;
	uint64_t reads, worst;
	pthread_t t;
};

static void *check_loop(void *arg)
{
	struct checker *k = arg;

	while (!atomic_load(&k->stop)) {
		struct sl_lease_participant p[LEASE_MAXP];
		size_t n = 0;
		uint64_t sum = 0;

		if (sl_lease_budget_participants(k->s, k->budget, p, LEASE_MAXP, &n) == 0) {
			for (size_t i = 0; i < n && i < LEASE_MAXP; i++)
				sum += p[i].share;
			if (sum > k->worst)
				k->worst = sum;
			k->reads++;
		}
		nap_ms(2);
	}
	return NULL;
}

static void checker_start(struct checker *k, const char *url, const char *budget)
{
	memset(k, 0, sizeof(*k));
	ck_assert_int_eq(sl_lease_store_open(url, NULL, &k->s), 0);
	k->budget = budget;
	ck_assert_int_eq(pthread_create(&k->t, NULL, check_loop, k), 0);
}

static void checker_stop(struct checker *k)
{
	atomic_store(&k->stop, true);
	pthread_join(k->t, NULL);
	sl_lease_store_close(k->s);
	ck_assert_uint_gt(k->reads, 0);
	ck_assert_msg(k->worst <= MAX, "the store counted %" PRIu64 ", above max %d", k->worst, MAX);
}

static void budget_make_at(const char *url, const char *budget, uint64_t max, uint64_t min)
{
	sl_lease_store *s;
	struct sl_limits lim;

	ck_assert_int_eq(sl_lease_store_open(url, NULL, &s), 0);
	sl_limits_init(&lim);
	lim.max = max;
	lim.soft = max / 2;
	lim.min = min;
	ck_assert_int_eq(sl_lease_budget_set(s, budget, &lim), 0);
	sl_lease_store_close(s);
}

/* The node that coordinates @budget, by the pid-free part of its id, or -1. */
static int coordinator(const char *tag, const char *budget, struct node *nodes, int n)
{
	struct sl__etcd_conn conn;
	char key[256];
	json_t *req, *resp = NULL, *kv;
	int who = -1;

	ck_assert_int_eq(sl__etcd_conn_init(&conn, endpoints(), strlen(endpoints()), 30000), 0);
	snprintf(key, sizeof(key), "sltest-%ld-%s/coord/%s", (long)getpid(), tag, budget);
	req = json_pack("{s:o}", "key", sl__etcd_b64s(key));
	ck_assert_int_eq(sl__etcd_call(&conn, "/v3/kv/range", req, &resp, NULL), 0);
	kv = json_array_get(json_object_get(resp, "kvs"), 0);
	if (kv) {
		json_t *doc;
		size_t len;
		char *v = sl__etcd_unb64(json_object_get(kv, "value"), &len);
		const char *node;

		ck_assert_ptr_nonnull(v);
		doc = json_loads(v, 0, NULL);
		node = json_string_value(json_object_get(doc, "node"));
		ck_assert_ptr_nonnull(node);
		/* A lease's id starts with its node's id. */
		for (int i = 0; i < n; i++)
			if (nodes[i].open && !strncmp(nodes[i].l->id, node, strlen(node)))
				who = i;
		json_decref(doc);
		free(v);
	}
	json_decref(resp);
	json_decref(req);
	sl__etcd_conn_fini(&conn);
	return who;
}

static bool all_held(struct node *nodes, int n)
{
	for (int i = 0; i < n; i++)
		if (nodes[i].open && lease_stats_of(nodes[i].l).state != SL_LEASE_HELD)
			return false;
	return true;
}

static uint64_t sum_shares(struct node *nodes, int n)
{
	uint64_t s = 0;

	for (int i = 0; i < n; i++)
		if (nodes[i].open)
			s += share_of(&nodes[i]);
	return s;
}

START_TEST(shares_fill_and_follow_demand)
{
	struct node nodes[NODES];
	struct checker k;
	char url[512];
	int i;

	memset(nodes, 0, sizeof(nodes));
	for (i = 0; i < NODES; i++)
		atomic_store(&want[i], 0);
	coord_url(url, sizeof(url), "demand", "?coordinated");
	budget_make_at(url, "b", MAX, 0);
	checker_start(&k, url, "b");
	for (i = 0; i < NODES; i++)
		node_start(&nodes[i], url, "b", (uintptr_t)i);
	WAIT_FOR(all_held(nodes, NODES), "every node holds its lease");
	/* Everyone asks: the budget is shared. */
	for (i = 0; i < NODES; i++)
		atomic_store(&want[i], MAX);
	WAIT_FOR(sum_shares(nodes, NODES) >= MAX * 9 / 10, "the shares fill 90% of the budget");
	/* Only node 0 evicts: it gets most of the budget, from the others. */
	atomic_store(&want[1], 0);
	atomic_store(&want[2], 0);
	WAIT_FOR(share_of(&nodes[0]) >= MAX * 8 / 10, "node 0's share follows its demand");
	/* Then node 2 instead. */
	atomic_store(&want[0], 0);
	atomic_store(&want[2], MAX);
	WAIT_FOR(share_of(&nodes[2]) >= MAX * 8 / 10, "node 2's share follows its demand");
	lease_check(k.s, "b", MAX);
	for (i = 0; i < NODES; i++)
		node_stop(&nodes[i]);
	checker_stop(&k);
	ck_assert_int_eq(sl_lease_store_remove(url, NULL), 0);
}
END_TEST

START_TEST(coordinator_lost_another_elected)
{
	struct node nodes[NODES];
	struct checker k;
	char url[512];
	int i, c0, c1, other;

	memset(nodes, 0, sizeof(nodes));
	for (i = 0; i < NODES; i++)
		atomic_store(&want[i], 0);
	coord_url(url, sizeof(url), "failover", "?coordinated");
	budget_make_at(url, "b", MAX, 0);
	checker_start(&k, url, "b");
	for (i = 0; i < NODES; i++)
		node_start(&nodes[i], url, "b", (uintptr_t)i);
	WAIT_FOR(all_held(nodes, NODES), "every node holds its lease");
	WAIT_FOR((c0 = coordinator("failover", "b", nodes, NODES)) >= 0, "a coordinator");
	/* The coordinator leaves and closes: its session, and with it its
	 * coord key, goes at once. */
	node_stop(&nodes[c0]);
	WAIT_FOR((c1 = coordinator("failover", "b", nodes, NODES)) >= 0, "another coordinator");
	ck_assert_int_ne(c1, c0);
	/* The new one moves the shares: to the node that is not it. */
	other = (c1 + 1) % NODES == c0 ? (c1 + 2) % NODES : (c1 + 1) % NODES;
	atomic_store(&want[other], MAX);
	WAIT_FOR(share_of(&nodes[other]) >= MAX * 8 / 10, "the other node's share follows demand");
	for (i = 0; i < NODES; i++)
		node_stop(&nodes[i]);
	checker_stop(&k);
	ck_assert_int_eq(sl_lease_store_remove(url, NULL), 0);
}
END_TEST

START_TEST(leave_removes_the_member)
{
	struct node nodes[2];
	struct sl_lease_participant p[LEASE_MAXP];
	char url[512];

	memset(nodes, 0, sizeof(nodes));
	atomic_store(&want[0], 0);
	atomic_store(&want[1], 0);
	coord_url(url, sizeof(url), "leave", "?coordinated");
	budget_make_at(url, "b", MAX, 0);
	node_start(&nodes[0], url, "b", 0);
	node_start(&nodes[1], url, "b", 1);
	WAIT_FOR(all_held(nodes, 2) && lease_parts(nodes[0].s, "b", p) == 2, "two members");
	node_stop(&nodes[1]);
	ck_assert_uint_eq(lease_parts(nodes[0].s, "b", p), 1);
	/* The one left gets the whole budget when it asks. */
	atomic_store(&want[0], MAX);
	WAIT_FOR(share_of(&nodes[0]) >= MAX * 9 / 10, "the member left has the room");
	node_stop(&nodes[0]);
	ck_assert_int_eq(sl_lease_store_remove(url, NULL), 0);
}
END_TEST

START_TEST(urls_and_protocols_do_not_mix)
{
	struct node n;
	sl_lease_store *s;
	sl_tree *t;
	sl_group *g;
	sl_lease *l;
	char url[512], plain[512];

	memset(&n, 0, sizeof(n));
	coord_url(url, sizeof(url), "mix", "?bogus");
	ck_assert_int_eq(sl_lease_store_open(url, NULL, &s), -EINVAL);
	coord_url(url, sizeof(url), "mix", "?coordinated&x");
	ck_assert_int_eq(sl_lease_store_open(url, NULL, &s), -EINVAL);
	coord_url(url, sizeof(url), "mix", "?coordinated");
	coord_url(plain, sizeof(plain), "mix", "");
	budget_make_at(url, "b", MAX, 0);
	atomic_store(&want[0], 0);
	node_start(&n, url, "b", 0);
	WAIT_FOR(all_held(&n, 1), "the coordinated node holds its lease");
	/* A node of the other protocol does not join a coordinated budget. */
	ck_assert_int_eq(sl_lease_store_open(plain, NULL, &s), 0);
	t = tree_new(SL_BATCH_NONE, SL_UNLIMITED);
	g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	ck_assert_int_eq(sl_lease_join(s, "b", g, NULL, &l), -EPROTO);
	sl_lease_store_close(s);
	sl_tree_destroy(t);
	node_stop(&n);
	/* remove takes the coordinated keys too: nothing is left. */
	ck_assert_int_eq(sl_lease_store_remove(url, NULL), 0);
	ck_assert_int_eq(sl_lease_store_remove(url, NULL), -ENOENT);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("etcd_coord");
	TCase *tc = tcase_create("coordinated");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, shares_fill_and_follow_demand);
	tcase_add_test(tc, coordinator_lost_another_elected);
	tcase_add_test(tc, leave_removes_the_member);
	tcase_add_test(tc, urls_and_protocols_do_not_mix);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(suite());
}
