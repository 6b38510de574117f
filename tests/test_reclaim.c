/* SPDX-License-Identifier: MIT */
/*
 * Reclaim: how much sl_reclaim() frees and reports, callbacks that lie,
 * reclaim at max, the OOM handler, high and its safe point, limit changes,
 * what a callback may call, and reclaims racing charges (docs/reclaim.md).
 *
 * The host behind every group is a struct host (the group's ctx): it holds
 * `held` units charged to the group and frees them when asked, honestly or
 * in one of the ways a buggy host might.  Most tests loop over every policy
 * and both batch settings: _i = policy * NBATCH + batch index.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

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

#define NBATCH 2
#define NPOLICY 3
#define MAXN 16

static uint64_t batch_of(int i)
{
	return i == 0 ? 0 /* SL_BATCH_DEFAULT */ : SL_BATCH_NONE;
}

static enum sl_policy policy_of(int i)
{
	return (enum sl_policy)(i / NBATCH);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* ---- failures seen off the test's thread (ck_assert may only run on it) ---- */

static atomic_int thread_failures;
static char first_failure[256];

static void thread_fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void thread_fail(int line, const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&thread_failures, 1) != 0)
		return;
	snprintf(first_failure, sizeof(first_failure), "line %d: ", line);
	va_start(ap, fmt);
	vsnprintf(first_failure + strlen(first_failure), sizeof(first_failure) - strlen(first_failure), fmt,
		  ap);
	va_end(ap);
}

#define T_CHECK(cond, ...)                                     \
	do {                                                   \
		if (!(cond))                                   \
			thread_fail(__LINE__, __VA_ARGS__);    \
	} while (0)

/* Read after joining every thread (the join orders first_failure's write). */
#define ASSERT_NO_THREAD_FAILURE()                                                             \
	ck_assert_msg(atomic_load(&thread_failures) == 0, "%d failure(s) off the test thread: %s", \
		      atomic_load(&thread_failures), first_failure)

static void failures_reset(void)
{
	atomic_store(&thread_failures, 0);
	first_failure[0] = '\0';
}

/* ---- the host ---- */

enum host_mode {
	HOST_HONEST,      /* frees min(target, held) and says so */
	HOST_OVER_REPORT, /* frees half of that, claims UINT64_MAX */
	HOST_CLAIM_ONLY,  /* frees nothing, claims target */
	HOST_NOTHING,     /* frees nothing, says so */
	HOST_OBJECTS,     /* frees whole objects of obj units: more than asked, and says so */
};

struct host {
	pthread_mutex_t lock;
	uint64_t held;
	enum host_mode mode;
	uint64_t obj;
	unsigned calls;
	uint64_t asked_max;
	uint64_t freed; /* what the callback really freed, over its life */
	/* Run inside the callback before it frees anything. */
	void (*hook)(sl_group *g, struct host *h);
	sl_group *other;
	int rc[8];
	uint64_t r64[4];
};

/* The current single-threaded reclaim's target, to catch asks beyond what remains. */
static struct {
	int active;
	uint64_t target, freed;
	unsigned over_asks;
} budget;

static void budget_start(uint64_t target)
{
	budget.active = 1;
	budget.target = target;
	budget.freed = 0;
	budget.over_asks = 0;
}

static _Thread_local int tls_in_callback;
static atomic_uint nested_callbacks;

static uint64_t host_reclaim(sl_group *g, uint64_t target, void *ctx)
{
	struct host *h = ctx;
	uint64_t freed = 0, ret = 0;
	int rc = 0;

	if (tls_in_callback) {
		/* The library must never call back from inside a callback. */
		atomic_fetch_add(&nested_callbacks, 1);
		return 0;
	}
	tls_in_callback = 1;
	T_CHECK(target > 0, "asked for 0 units");
	if (h->hook)
		h->hook(g, h);
	pthread_mutex_lock(&h->lock);
	h->calls++;
	if (target > h->asked_max)
		h->asked_max = target;
	if (budget.active) {
		uint64_t left = budget.freed < budget.target ? budget.target - budget.freed : 0;

		if (target > left)
			budget.over_asks++;
	}
	switch (h->mode) {
	case HOST_HONEST:
		freed = min_u64(target, h->held);
		ret = freed;
		break;
	case HOST_OVER_REPORT:
		freed = (min_u64(target, h->held) + 1) / 2;
		ret = UINT64_MAX;
		break;
	case HOST_CLAIM_ONLY:
		ret = target;
		break;
	case HOST_NOTHING:
		break;
	case HOST_OBJECTS:
		freed = min_u64((target + h->obj - 1) / h->obj * h->obj, h->held);
		ret = freed;
		break;
	}
	h->held -= freed;
	h->freed += freed;
	if (freed)
		rc = sl_uncharge(g, freed);
	if (budget.active)
		budget.freed += freed;
	pthread_mutex_unlock(&h->lock);
	T_CHECK(rc == 0, "uncharge in callback: %d", rc);
	tls_in_callback = 0;
	return ret;
}

static const struct sl_ops host_ops = { .reclaim = host_reclaim };

static struct sl_stats stats_of(sl_group *g)
{
	struct sl_stats s;

	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(sl_group_stats(g, &s), 0);
	return s;
}

static uint64_t usage_of(sl_group *g)
{
	return stats_of(g).usage;
}

/* ---- small trees ---- */

/* One group: parent indexes the same table (-1: the root); high and max 0 mean unlimited. */
struct spec {
	const char *name;
	int parent;
	uint64_t min, soft, high, max, usage;
	enum host_mode mode;
	int no_callback;
};

struct world {
	sl_tree *t;
	sl_group *root;
	size_t n;
	sl_group *g[MAXN];
	struct host h[MAXN];
};

static void world_build(struct world *w, enum sl_policy policy, uint64_t batch, const struct spec *sp,
			size_t n)
{
	struct sl_tree_opts opts;
	size_t i;

	ck_assert_uint_le(n, MAXN);
	memset(w, 0, sizeof(*w));
	failures_reset();
	atomic_store(&nested_callbacks, 0);
	budget.active = 0;
	sl_tree_opts_init(&opts);
	opts.policy = policy;
	opts.batch = batch;
	opts.reclaim_batch = 0; /* exact: each case states what a charge at max frees */
	ck_assert_int_eq(sl_tree_create(&opts, &w->t), 0);
	w->root = sl_tree_root(w->t);
	w->n = n;
	for (i = 0; i < n; i++) {
		const struct sl_ops *ops = sp[i].no_callback ? NULL : &host_ops;
		sl_group *parent;
		struct sl_limits lim;

		ck_assert_int_lt(sp[i].parent, (int)i);
		parent = sp[i].parent < 0 ? w->root : w->g[sp[i].parent];
		pthread_mutex_init(&w->h[i].lock, NULL);
		w->h[i].mode = sp[i].mode;
		w->h[i].obj = 1;
		sl_limits_init(&lim);
		lim.min = sp[i].min;
		lim.soft = sp[i].soft;
		if (sp[i].high)
			lim.high = sp[i].high;
		if (sp[i].max)
			lim.max = sp[i].max;
		ck_assert_int_eq(sl_group_create(parent, sp[i].name, &lim, ops, &w->h[i], &w->g[i]), 0);
	}
	for (i = 0; i < n; i++) {
		if (!sp[i].usage)
			continue;
		ck_assert_int_eq(sl_charge(w->g[i], sp[i].usage, 0), 0);
		w->h[i].held = sp[i].usage;
	}
}

/* Every host's units back, the ledger exact, the tree gone. */
static void world_free(struct world *w)
{
	size_t i;

	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_eq(atomic_load(&nested_callbacks), 0);
	ck_assert_int_eq(sl_tree_check(w->t), 0);
	for (i = 0; i < w->n; i++) {
		if (!w->g[i])
			continue;
		if (w->h[i].held)
			ck_assert_int_eq(sl_uncharge(w->g[i], w->h[i].held), 0);
	}
	for (i = w->n; i-- > 0;) {
		if (!w->g[i])
			continue;
		ck_assert_int_eq(sl_group_destroy(w->g[i]), 0);
		pthread_mutex_destroy(&w->h[i].lock);
	}
	ck_assert_uint_eq(usage_of(w->root), 0);
	sl_tree_destroy(w->t);
	budget.active = 0;
}

static uint64_t sum_freed(struct world *w)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < w->n; i++)
		sum += w->h[i].freed;
	return sum;
}

static uint64_t sum_reclaimed(struct world *w)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < w->n; i++)
		if (w->g[i])
			sum += stats_of(w->g[i]).reclaimed;
	return sum;
}

static unsigned sum_calls(struct world *w)
{
	unsigned sum = 0;
	size_t i;

	for (i = 0; i < w->n; i++)
		sum += w->h[i].calls;
	return sum;
}

/* ---- how much reclaim frees and reports ---- */

/* 400 units to take, none of them protected by min. */
static const struct spec amount_tree[] = {
	{ .name = "P", .parent = -1, .soft = 50 },
	{ .name = "a", .parent = 0, .soft = 20, .usage = 100 },
	{ .name = "b", .parent = 0, .usage = 100 },
	{ .name = "c", .parent = -1, .soft = 200, .usage = 100 },
	{ .name = "d", .parent = -1, .usage = 100 },
};
#define AMOUNT_N (sizeof(amount_tree) / sizeof(amount_tree[0]))

START_TEST(reclaim_frees_exactly_the_target_when_callbacks_free_what_they_are_asked)
{
	static const uint64_t targets[] = { 1, 7, 50, 150, 299, 400 };
	size_t k, i;

	for (k = 0; k < sizeof(targets) / sizeof(targets[0]); k++) {
		struct world w;
		uint64_t got;

		world_build(&w, policy_of(_i), batch_of(_i % NBATCH), amount_tree, AMOUNT_N);
		budget_start(targets[k]);
		got = sl_reclaim(w.root, targets[k], 0);
		budget.active = 0;
		ck_assert_msg(got == targets[k], "target %" PRIu64 ": got %" PRIu64, targets[k], got);
		ck_assert_uint_eq(sum_freed(&w), targets[k]);
		ck_assert_uint_eq(sum_reclaimed(&w), targets[k]);
		ck_assert_uint_eq(usage_of(w.root), 400 - targets[k]);
		ck_assert_msg(budget.over_asks == 0, "target %" PRIu64 ": %u asks beyond what remained",
			      targets[k], budget.over_asks);
		for (i = 0; i < AMOUNT_N; i++)
			ck_assert_uint_le(w.h[i].asked_max, targets[k]);
		world_free(&w);
	}
}
END_TEST

START_TEST(reclaim_frees_what_there_is_when_the_target_is_larger)
{
	struct world w;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), amount_tree, AMOUNT_N);
	budget_start(1000);
	ck_assert_uint_eq(sl_reclaim(w.root, 1000, 0), 400);
	ck_assert_uint_eq(budget.over_asks, 0);
	budget.active = 0;
	ck_assert_uint_eq(usage_of(w.root), 0);
	ck_assert_uint_eq(sl_reclaim(w.root, 1000, 0), 0);
	ck_assert_uint_eq(sum_reclaimed(&w), 400);
	world_free(&w);
}
END_TEST

START_TEST(reclaim_of_nothing_or_with_bad_arguments_returns_0)
{
	struct world w;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), amount_tree, AMOUNT_N);
	ck_assert_uint_eq(sl_reclaim(w.root, 0, 0), 0);
	ck_assert_uint_eq(sl_reclaim(NULL, 10, 0), 0);
	ck_assert_uint_eq(sl_reclaim(w.root, 10, 1u << 7), 0);
	ck_assert_uint_eq(sum_calls(&w), 0);
	ck_assert_uint_eq(usage_of(w.root), 400);
	world_free(&w);
}
END_TEST

START_TEST(a_callback_that_frees_more_than_asked_is_counted_and_no_one_is_asked_after)
{
	/* Each host evicts whole 10-unit objects: asked for 1, it frees 10.
	 * In the first tree pass 1 does the work; in the second everyone is
	 * within a soft limit, so pass 2 does. */
	static const struct spec unclaimed[] = {
		{ .name = "X", .parent = -1, .usage = 100 },
		{ .name = "Y", .parent = -1, .usage = 100 },
		{ .name = "P", .parent = -1, .soft = 10 },
		{ .name = "Z", .parent = 2, .usage = 100 },
	};
	static const struct spec within[] = {
		{ .name = "X", .parent = -1, .soft = 1000, .usage = 100 },
		{ .name = "Y", .parent = -1, .soft = 1000, .usage = 100 },
		{ .name = "P", .parent = -1, .soft = 1000 },
		{ .name = "Z", .parent = 2, .soft = 1000, .usage = 100 },
	};
	static const uint64_t targets[] = { 1, 2, 25, 101 };
	size_t k, i, tree;

	for (tree = 0; tree < 2; tree++) {
		for (k = 0; k < sizeof(targets) / sizeof(targets[0]); k++) {
			struct world w;
			uint64_t got;

			world_build(&w, policy_of(_i), batch_of(_i % NBATCH), tree ? within : unclaimed, 4);
			for (i = 0; i < 4; i++) {
				w.h[i].mode = HOST_OBJECTS;
				w.h[i].obj = 10;
			}
			budget_start(targets[k]);
			got = sl_reclaim(w.root, targets[k], 0);
			budget.active = 0;
			ck_assert_msg(got == sum_freed(&w),
				      "tree %zu, target %" PRIu64 ": returned %" PRIu64 ", freed %" PRIu64,
				      tree, targets[k], got, sum_freed(&w));
			ck_assert_msg(budget.over_asks == 0,
				      "tree %zu, target %" PRIu64 ": %u asks after the target was met"
				      " (%" PRIu64 " freed)",
				      tree, targets[k], budget.over_asks, got);
			ck_assert_uint_ge(got, targets[k]);
			ck_assert_uint_lt(got, targets[k] + 10);
			ck_assert_uint_eq(sum_reclaimed(&w), got);
			ck_assert_uint_eq(usage_of(w.root), 300 - got);
			world_free(&w);
		}
	}
}
END_TEST

/* ---- callbacks that lie ---- */

/* _i = mode index * (NPOLICY * NBATCH) + policy * NBATCH + batch index. */
static const enum host_mode liar_modes[] = { HOST_OVER_REPORT, HOST_CLAIM_ONLY, HOST_NOTHING };
#define NLIAR 3

START_TEST(a_lying_callback_cannot_make_reclaim_spin_or_over_report)
{
	static const struct spec sp[] = {
		{ .name = "liar", .parent = -1, .usage = 100 },
		{ .name = "honest", .parent = -1, .usage = 100 },
		{ .name = "P", .parent = -1, .soft = 10 },
		{ .name = "liar2", .parent = 2, .soft = 5, .usage = 100 },
	};
	int pb = _i % (NPOLICY * NBATCH);
	enum host_mode mode = liar_modes[_i / (NPOLICY * NBATCH)];
	struct world w;
	uint64_t got, before, freed_before;

	world_build(&w, policy_of(pb), batch_of(pb % NBATCH), sp, 4);
	w.h[0].mode = mode;
	w.h[3].mode = mode;

	got = sl_reclaim(w.root, 150, 0);
	ck_assert_uint_le(got, 150);
	ck_assert_uint_eq(got, sum_freed(&w));
	ck_assert_uint_eq(usage_of(w.root), 300 - got);
	ck_assert_uint_eq(sum_reclaimed(&w), got);
	ck_assert_uint_lt(sum_calls(&w), 5000);
	/* The honest host still gave (nearly) all it had: PROTECTION keeps
	 * asking the liars for their proportional shares each round, and
	 * stops when the honest host's share rounds to nothing. */
	ck_assert_uint_ge(w.h[1].freed, mode == HOST_OVER_REPORT ? 1 : 90);

	/* Liars alone. */
	sl_reclaim(w.g[1], 1000, 0);
	ck_assert_uint_eq(w.h[1].held, 0);
	before = usage_of(w.root);
	freed_before = sum_freed(&w);
	got = sl_reclaim(w.root, 1000, 0);
	ck_assert_uint_eq(got, sum_freed(&w) - freed_before);
	ck_assert_uint_eq(usage_of(w.root), before - got);
	if (mode != HOST_OVER_REPORT)
		ck_assert_uint_eq(got, 0);
	ck_assert_uint_eq(stats_of(w.g[0]).reclaimed, w.h[0].freed);
	ck_assert_uint_eq(stats_of(w.g[3]).reclaimed, w.h[3].freed);
	ck_assert_uint_lt(sum_calls(&w), 10000);
	world_free(&w);
}
END_TEST

/* ---- reclaim at max ---- */

static const struct spec max_tree[] = {
	{ .name = "A", .parent = -1, .max = 100 },
	{ .name = "X", .parent = 0, .usage = 100 },
	{ .name = "Y", .parent = 0, .no_callback = 1 },
};
enum { M_A, M_X, M_Y };

START_TEST(charge_at_max_reclaims_from_the_subtree_and_succeeds)
{
	struct world w;
	struct sl_stats a;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), max_tree, 3);
	ck_assert_int_eq(sl_charge(w.g[M_Y], 10, 0), 0);
	w.h[M_Y].held = 10;
	ck_assert_uint_eq(w.h[M_X].held, 90);
	ck_assert_uint_eq(usage_of(w.g[M_X]), 90);
	ck_assert_uint_eq(usage_of(w.g[M_Y]), 10);
	a = stats_of(w.g[M_A]);
	ck_assert_uint_eq(a.usage, 100);
	ck_assert_uint_eq(a.events_max, 1);
	ck_assert_uint_eq(a.events_oom, 0);
	ck_assert_uint_eq(stats_of(w.g[M_Y]).events_max, 0);
	ck_assert_uint_eq(stats_of(w.g[M_X]).reclaimed, 10);
	world_free(&w);
}
END_TEST

START_TEST(noreclaim_charge_at_max_fails_without_calling_back)
{
	struct world w;
	struct sl_stats a;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), max_tree, 3);
	ck_assert_int_eq(sl_charge(w.g[M_Y], 10, SL_NORECLAIM), -ENOMEM);
	ck_assert_uint_eq(w.h[M_X].calls, 0);
	a = stats_of(w.g[M_A]);
	ck_assert_uint_eq(a.usage, 100);
	ck_assert_uint_eq(a.events_max, 1);
	ck_assert_uint_eq(a.events_oom, 1);
	ck_assert_uint_eq(usage_of(w.g[M_Y]), 0);
	ck_assert_uint_eq(stats_of(w.g[M_Y]).events_oom, 0);
	world_free(&w);
}
END_TEST

START_TEST(forced_charge_makes_room_first_and_passes_max_only_for_the_rest)
{
	struct world w;
	struct sl_stats a;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), max_tree, 3);
	/* Without reclaim: past max at once, no callback. */
	ck_assert_int_eq(sl_charge(w.g[M_Y], 10, SL_FORCE | SL_NORECLAIM), 0);
	w.h[M_Y].held += 10;
	ck_assert_uint_eq(w.h[M_X].calls, 0);
	a = stats_of(w.g[M_A]);
	ck_assert_uint_eq(a.usage, 110);
	ck_assert_uint_eq(a.events_max, 1);
	ck_assert_uint_eq(a.events_oom, 0);

	/* With reclaim: room is made first, so it ends at max. */
	ck_assert_int_eq(sl_uncharge(w.g[M_Y], 10), 0);
	w.h[M_Y].held -= 10;
	ck_assert_int_eq(sl_charge(w.g[M_Y], 10, SL_FORCE), 0);
	w.h[M_Y].held += 10;
	a = stats_of(w.g[M_A]);
	ck_assert_uint_eq(a.usage, 100);
	ck_assert_uint_eq(w.h[M_X].held, 90);
	ck_assert_uint_eq(a.events_max, 2);

	/* Nothing reclaimable: past max. */
	w.h[M_X].mode = HOST_NOTHING;
	ck_assert_int_eq(sl_charge(w.g[M_Y], 5, SL_FORCE), 0);
	w.h[M_Y].held += 5;
	a = stats_of(w.g[M_A]);
	ck_assert_uint_eq(a.usage, 105);
	ck_assert_uint_eq(a.events_max, 3);
	ck_assert_uint_eq(a.events_oom, 0);
	world_free(&w);
}
END_TEST

START_TEST(charge_at_max_fails_after_bounded_retries_when_nothing_is_reclaimable)
{
	/* _i / (NPOLICY * NBATCH): X frees nothing, claims but frees nothing, or has no callback. */
	int pb = _i % (NPOLICY * NBATCH), how = _i / (NPOLICY * NBATCH);
	struct spec sp[3];
	struct world w;
	struct sl_stats a;
	int k;

	memcpy(sp, max_tree, sizeof(sp));
	sp[M_X].mode = how == 0 ? HOST_NOTHING : HOST_CLAIM_ONLY;
	sp[M_X].no_callback = how == 2;
	world_build(&w, policy_of(pb), batch_of(pb % NBATCH), sp, 3);
	for (k = 1; k <= 3; k++) {
		ck_assert_int_eq(sl_charge(w.g[M_Y], 10, 0), -ENOMEM);
		a = stats_of(w.g[M_A]);
		ck_assert_uint_eq(a.usage, 100);
		ck_assert_uint_eq(a.events_oom, (uint64_t)k);
		ck_assert_uint_eq(a.events_max, (uint64_t)k);
	}
	ck_assert_uint_lt(w.h[M_X].calls, 3 * 200);
	ck_assert_uint_eq(usage_of(w.g[M_Y]), 0);
	ck_assert_uint_eq(stats_of(w.g[M_X]).reclaimed, 0);
	world_free(&w);
}
END_TEST

/* ---- the OOM handler ---- */

static const struct spec oom_tree[] = {
	{ .name = "A", .parent = -1, .max = 100 },
	{ .name = "tenant", .parent = 0, .usage = 60, .no_callback = 1 },
	{ .name = "X", .parent = 0, .usage = 40, .mode = HOST_NOTHING },
	{ .name = "Y", .parent = 0, .no_callback = 1 },
};
enum { O_A, O_TENANT, O_X, O_Y };

struct oom {
	struct world *w;
	int ret;
	int drop;   /* uncharge and destroy the tenant */
	int nested; /* try a charge and a reclaim from inside */
	unsigned calls;
	sl_group *at;
	uint64_t need;
	int uncharge_rc, destroy_rc, charge_rc;
	unsigned x_calls_before, x_calls_after;
	uint64_t reclaim_got, high_got;
};

static int oom_handler(sl_group *at, uint64_t need, void *ctx)
{
	struct oom *o = ctx;
	struct world *w = o->w;

	o->calls++;
	o->at = at;
	o->need = need;
	if (o->nested) {
		/* X could now free memory, but a charge here must not reclaim. */
		w->h[O_X].mode = HOST_HONEST;
		o->x_calls_before = w->h[O_X].calls;
		o->charge_rc = sl_charge(w->g[O_Y], 10, 0);
		o->reclaim_got = sl_reclaim(w->g[O_A], 10, 0);
		o->high_got = sl_handle_over_high(w->g[O_Y]);
		o->x_calls_after = w->h[O_X].calls;
	}
	if (o->drop) {
		o->uncharge_rc = sl_uncharge(w->g[O_TENANT], w->h[O_TENANT].held);
		w->h[O_TENANT].held = 0;
		o->destroy_rc = sl_group_destroy(w->g[O_TENANT]);
		if (o->destroy_rc == 0)
			w->g[O_TENANT] = NULL;
	}
	return o->ret;
}

START_TEST(oom_handler_is_called_once_with_the_group_at_max_and_the_amount)
{
	struct world w;
	struct oom o = { .ret = 0 };

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), oom_tree, 4);
	o.w = &w;
	ck_assert_int_eq(sl_tree_set_oom_handler(w.t, oom_handler, &o), 0);
	ck_assert_int_eq(sl_charge(w.g[O_Y], 10, 0), -ENOMEM);
	ck_assert_uint_eq(o.calls, 1);
	ck_assert_ptr_eq(o.at, w.g[O_A]);
	ck_assert_uint_eq(o.need, 10);
	ck_assert_uint_eq(stats_of(w.g[O_A]).events_oom, 1);
	ck_assert_uint_eq(usage_of(w.g[O_A]), 100);

	/* SL_NORECLAIM never reaches the handler. */
	ck_assert_int_eq(sl_charge(w.g[O_Y], 10, SL_NORECLAIM), -ENOMEM);
	ck_assert_uint_eq(o.calls, 1);

	/* Removed: the charge fails without it. */
	ck_assert_int_eq(sl_tree_set_oom_handler(w.t, NULL, NULL), 0);
	ck_assert_int_eq(sl_charge(w.g[O_Y], 10, 0), -ENOMEM);
	ck_assert_uint_eq(o.calls, 1);
	ck_assert_int_eq(sl_tree_set_oom_handler(NULL, oom_handler, &o), -EINVAL);
	world_free(&w);
}
END_TEST

START_TEST(oom_handler_that_drops_a_tenant_lets_the_charge_succeed)
{
	struct world w;
	struct oom o = { .ret = 1, .drop = 1 };

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), oom_tree, 4);
	o.w = &w;
	ck_assert_int_eq(sl_tree_set_oom_handler(w.t, oom_handler, &o), 0);
	ck_assert_int_eq(sl_charge(w.g[O_Y], 10, 0), 0);
	w.h[O_Y].held = 10;
	ck_assert_uint_eq(o.calls, 1);
	ck_assert_int_eq(o.uncharge_rc, 0);
	ck_assert_int_eq(o.destroy_rc, 0);
	ck_assert_ptr_null(w.g[O_TENANT]);
	ck_assert_uint_eq(usage_of(w.g[O_A]), 50);
	ck_assert_uint_eq(stats_of(w.g[O_A]).events_oom, 0);
	ck_assert_uint_eq(stats_of(w.g[O_A]).events_max, 1);
	world_free(&w);
}
END_TEST

START_TEST(oom_handler_that_frees_nothing_and_returns_0_fails_the_charge)
{
	struct world w;
	struct oom o = { .ret = 0, .drop = 1 };

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), oom_tree, 4);
	o.w = &w;
	ck_assert_int_eq(sl_tree_set_oom_handler(w.t, oom_handler, &o), 0);
	/* It freed the tenant but said "do not retry": the charge fails. */
	ck_assert_int_eq(sl_charge(w.g[O_Y], 10, 0), -ENOMEM);
	ck_assert_uint_eq(o.calls, 1);
	ck_assert_uint_eq(stats_of(w.g[O_A]).events_oom, 1);
	ck_assert_uint_eq(usage_of(w.g[O_A]), 40);
	world_free(&w);
}
END_TEST

START_TEST(inside_the_oom_handler_charges_never_reclaim_and_reclaim_does_not_nest)
{
	struct world w;
	struct oom o = { .ret = 0, .nested = 1 };

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), oom_tree, 4);
	o.w = &w;
	ck_assert_int_eq(sl_tree_set_oom_handler(w.t, oom_handler, &o), 0);
	ck_assert_int_eq(sl_charge(w.g[O_Y], 10, 0), -ENOMEM);
	ck_assert_uint_eq(o.calls, 1);
	ck_assert_int_eq(o.charge_rc, -ENOMEM);
	ck_assert_uint_eq(o.reclaim_got, 0);
	ck_assert_uint_eq(o.high_got, 0);
	ck_assert_uint_eq(o.x_calls_after, o.x_calls_before);
	ck_assert_uint_eq(w.h[O_X].held, 40);
	/* Outside the handler, X now gives. */
	ck_assert_int_eq(sl_tree_set_oom_handler(w.t, NULL, NULL), 0);
	ck_assert_int_eq(sl_charge(w.g[O_Y], 10, 0), 0);
	w.h[O_Y].held = 10;
	ck_assert_uint_eq(w.h[O_X].held, 30);
	world_free(&w);
}
END_TEST

/* ---- high ---- */

START_TEST(charge_past_high_succeeds_and_counts_high_without_calling_back)
{
	static const struct spec sp[] = {
		{ .name = "P", .parent = -1, .high = 150 },
		{ .name = "G", .parent = 0, .high = 100 },
	};
	struct world w;
	struct sl_stats g, p;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 2);
	ck_assert_int_eq(sl_charge(w.g[1], 100, 0), 0);
	w.h[1].held = 100;
	ck_assert_uint_eq(stats_of(w.g[1]).events_high, 0);
	ck_assert_int_eq(sl_charge(w.g[1], 60, 0), 0);
	w.h[1].held += 60;
	g = stats_of(w.g[1]);
	p = stats_of(w.g[0]);
	ck_assert_uint_eq(g.usage, 160);
	ck_assert_uint_eq(g.events_high, 1);
	ck_assert_uint_eq(p.events_high, 1);
	ck_assert_uint_eq(g.events_max, 0);
	ck_assert_uint_eq(sum_calls(&w), 0);
	ck_assert_int_ne(sl_high_pending(), 0);
	ck_assert_uint_eq(sl_handle_over_high(w.g[1]), 60);
	ck_assert_int_eq(sl_high_pending(), 0);
	world_free(&w);
}
END_TEST

struct high_thread {
	sl_group *g;
	uint64_t amount;
	int before, after, rc;
};

static void *high_thread_main(void *arg)
{
	struct high_thread *ht = arg;

	ht->before = sl_high_pending();
	ht->rc = ht->amount ? sl_charge(ht->g, ht->amount, 0) : 0;
	ht->after = sl_high_pending();
	if (ht->amount && ht->rc == 0)
		ht->rc = sl_uncharge(ht->g, ht->amount);
	return NULL;
}

START_TEST(high_pending_is_set_only_in_the_thread_that_went_past_high)
{
	static const struct spec sp[] = {
		{ .name = "G", .parent = -1, .high = 100 },
	};
	struct high_thread over = { 0 }, quiet = { 0 };
	struct world w;
	pthread_t th;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 1);
	/* Forget what earlier tests of this process left pending. */
	sl_handle_over_high(w.g[0]);
	ck_assert_int_eq(sl_high_pending(), 0);
	over.g = quiet.g = w.g[0];
	over.amount = 150;
	ck_assert_int_eq(pthread_create(&th, NULL, high_thread_main, &over), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(over.rc, 0);
	ck_assert_int_eq(over.before, 0);
	ck_assert_int_ne(over.after, 0);
	ck_assert_int_eq(sl_high_pending(), 0);
	ck_assert_uint_eq(stats_of(w.g[0]).events_high, 1);
	ck_assert_int_eq(pthread_create(&th, NULL, high_thread_main, &quiet), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(quiet.before, 0);
	ck_assert_int_eq(quiet.after, 0);
	world_free(&w);
}
END_TEST

START_TEST(handle_over_high_reclaims_every_group_on_the_path_back_to_its_high)
{
	static const struct spec sp[] = {
		{ .name = "P", .parent = -1, .high = 100 },
		{ .name = "X", .parent = 0, .high = 50 },
		{ .name = "Y", .parent = 0 },
		{ .name = "Z", .parent = -1, .high = 10, .usage = 5 },
	};
	struct world w;
	uint64_t got;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 4);
	sl_handle_over_high(w.g[3]);
	ck_assert_int_eq(sl_high_pending(), 0);
	ck_assert_int_eq(sl_charge(w.g[1], 80, 0), 0);
	w.h[1].held = 80;
	ck_assert_int_eq(sl_charge(w.g[2], 80, 0), 0);
	w.h[2].held = 80;
	ck_assert_int_ne(sl_high_pending(), 0);
	ck_assert_uint_eq(sum_calls(&w), 0);

	got = sl_handle_over_high(w.g[1]);
	ck_assert_int_eq(sl_high_pending(), 0);
	ck_assert_uint_eq(got, 60);
	ck_assert_uint_le(usage_of(w.g[1]), 50);
	ck_assert_uint_eq(usage_of(w.g[0]), 100);
	ck_assert_uint_eq(usage_of(w.g[3]), 5);
	ck_assert_uint_eq(w.h[3].calls, 0);
	/* Nothing over high any more: nothing to do. */
	ck_assert_uint_eq(sl_handle_over_high(w.g[2]), 0);
	ck_assert_uint_eq(sl_handle_over_high(NULL), 0);
	world_free(&w);
}
END_TEST

/* ---- limit changes ---- */

START_TEST(lowering_max_below_usage_reclaims_until_usage_fits)
{
	static const struct spec sp[] = {
		{ .name = "G", .parent = -1 },
		{ .name = "X", .parent = 0, .usage = 60 },
		{ .name = "Y", .parent = 0, .usage = 40 },
	};
	struct world w;
	struct sl_limits lim;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 3);
	sl_limits_init(&lim);
	lim.max = 70;
	ck_assert_int_eq(sl_group_set_limits(w.g[0], &lim), 0);
	ck_assert_uint_eq(usage_of(w.g[0]), 70);
	ck_assert_uint_eq(w.h[1].held + w.h[2].held, 70);
	ck_assert_int_eq(sl_group_limits(w.g[0], &lim), 0);
	ck_assert_uint_eq(lim.max, 70);
	world_free(&w);
}
END_TEST

START_TEST(lowering_max_that_reclaim_cannot_meet_is_ebusy_and_stays_in_force)
{
	static const struct spec sp[] = {
		{ .name = "G", .parent = -1 },
		{ .name = "X", .parent = 0, .usage = 60, .mode = HOST_NOTHING },
		{ .name = "Y", .parent = 0, .usage = 40, .no_callback = 1 },
	};
	struct world w;
	struct sl_limits lim;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 3);
	sl_limits_init(&lim);
	lim.max = 70;
	ck_assert_int_eq(sl_group_set_limits(w.g[0], &lim), -EBUSY);
	ck_assert_uint_eq(usage_of(w.g[0]), 100);
	ck_assert_int_eq(sl_group_limits(w.g[0], &lim), 0);
	ck_assert_uint_eq(lim.max, 70);
	ck_assert_int_eq(sl_charge(w.g[2], 1, SL_NORECLAIM), -ENOMEM);
	ck_assert_int_eq(sl_charge(w.g[2], 1, 0), -ENOMEM);
	/* Once the host frees on its own, charges fit under the new max again. */
	ck_assert_int_eq(sl_uncharge(w.g[1], 50), 0);
	w.h[1].held -= 50;
	ck_assert_int_eq(sl_charge(w.g[2], 20, 0), 0);
	w.h[2].held += 20;
	ck_assert_int_eq(sl_charge(w.g[2], 1, SL_NORECLAIM), -ENOMEM);
	ck_assert_uint_eq(usage_of(w.g[0]), 70);
	world_free(&w);
}
END_TEST

START_TEST(raising_a_soft_limit_shields_the_group_on_the_next_reclaim)
{
	static const struct spec sp[] = {
		{ .name = "X", .parent = -1, .usage = 100 },
		{ .name = "Y", .parent = -1, .usage = 100 },
	};
	struct world w;
	struct sl_limits lim;

	world_build(&w, SL_POLICY_GUARANTEE, batch_of(_i), sp, 2);
	sl_limits_init(&lim);
	lim.soft = 100;
	ck_assert_int_eq(sl_group_set_limits(w.g[0], &lim), 0);
	ck_assert_uint_eq(sl_reclaim(w.root, 50, 0), 50);
	ck_assert_uint_eq(w.h[0].held, 100);
	ck_assert_uint_eq(w.h[1].held, 50);
	ck_assert_uint_eq(w.h[0].calls, 0);

	/* Lowered again: X's excess (80) is now the largest. */
	lim.soft = 20;
	ck_assert_int_eq(sl_group_set_limits(w.g[0], &lim), 0);
	ck_assert_uint_eq(sl_reclaim(w.root, 80, 0), 80);
	ck_assert_uint_eq(w.h[0].held, 20);
	ck_assert_uint_eq(w.h[1].held, 50);
	ck_assert_uint_eq(stats_of(w.g[0]).events_low, 0);
	world_free(&w);
}
END_TEST

START_TEST(raising_min_protects_the_group_on_the_next_reclaim)
{
	static const struct spec sp[] = {
		{ .name = "X", .parent = -1, .usage = 100 },
		{ .name = "Y", .parent = -1, .usage = 100 },
	};
	struct world w;
	struct sl_limits lim;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 2);
	sl_limits_init(&lim);
	lim.min = 70;
	ck_assert_int_eq(sl_group_set_limits(w.g[0], &lim), 0);
	ck_assert_uint_eq(sl_reclaim(w.root, 1000, 0), 130);
	ck_assert_uint_eq(w.h[0].held, 70);
	ck_assert_uint_eq(w.h[1].held, 0);
	ck_assert_int_eq(sl_group_limits(w.g[0], &lim), 0);
	ck_assert_uint_eq(lim.min, 70);
	world_free(&w);
}
END_TEST

/* ---- what a callback may call ---- */

static void hook_charge_around(sl_group *g, struct host *h)
{
	h->rc[0] = sl_charge(g, 5, 0);
	h->rc[1] = sl_uncharge(g, 5);
	h->rc[2] = sl_charge(h->other, 7, 0);
	h->rc[3] = sl_uncharge(h->other, 7);
	h->rc[4] = sl_charge(h->other, 3, 0);
	h->r64[0] += h->rc[4] == 0 ? 3 : 0; /* kept: released by the test */
}

START_TEST(a_callback_may_charge_and_uncharge_its_own_and_other_groups)
{
	static const struct spec sp[] = {
		{ .name = "X", .parent = -1, .usage = 100 },
		{ .name = "O", .parent = -1, .no_callback = 1 },
	};
	struct world w;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 2);
	w.h[0].hook = hook_charge_around;
	w.h[0].other = w.g[1];
	ck_assert_uint_eq(sl_reclaim(w.root, 30, 0), 30);
	ck_assert_uint_ge(w.h[0].calls, 1);
	ck_assert_int_eq(w.h[0].rc[0], 0);
	ck_assert_int_eq(w.h[0].rc[1], 0);
	ck_assert_int_eq(w.h[0].rc[2], 0);
	ck_assert_int_eq(w.h[0].rc[3], 0);
	ck_assert_int_eq(w.h[0].rc[4], 0);
	w.h[1].held = w.h[0].r64[0];
	ck_assert_uint_eq(usage_of(w.g[0]), 70);
	ck_assert_uint_eq(usage_of(w.g[1]), w.h[1].held);
	world_free(&w);
}
END_TEST

static void hook_charge_at_max(sl_group *g, struct host *h)
{
	/* Before freeing: the group's parent is at its max. */
	if (h->calls == 0)
		h->rc[0] = sl_charge(g, 5, 0);
}

START_TEST(a_charge_inside_a_callback_that_hits_max_fails_instead_of_reclaiming)
{
	static const struct spec sp[] = {
		{ .name = "A", .parent = -1, .max = 100 },
		{ .name = "X", .parent = 0, .usage = 100 },
	};
	struct world w;
	struct sl_stats a;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 2);
	w.h[1].hook = hook_charge_at_max;
	ck_assert_uint_eq(sl_reclaim(w.root, 10, 0), 10);
	ck_assert_int_eq(w.h[1].rc[0], -ENOMEM);
	ck_assert_uint_eq(w.h[1].calls, 1);
	a = stats_of(w.g[0]);
	ck_assert_uint_eq(a.usage, 90);
	ck_assert_uint_eq(a.events_oom, 1);
	world_free(&w);
}
END_TEST

static void hook_nested_reclaim(sl_group *g, struct host *h)
{
	struct sl_limits lim;

	h->r64[0] = sl_reclaim(h->other, 10, 0);
	h->r64[1] = sl_reclaim(g, 10, 0);
	h->r64[2] = sl_handle_over_high(g);
	/* A max below usage from inside a callback: in force, but no reclaim. */
	sl_limits_init(&lim);
	lim.max = 1;
	h->rc[0] = sl_group_set_limits(g, &lim);
	sl_limits_init(&lim);
	h->rc[1] = sl_group_set_limits(g, &lim);
}

/* A host whose eviction allocates: it frees one unit and charges one back
 * (SL_NORECLAIM, as a callback must), so reclaim makes no progress, and the
 * nested charge refills this thread's stock after the charge at max drained
 * it. */
static uint64_t alloc_while_evicting(sl_group *g, uint64_t target, void *ctx)
{
	uint64_t *held = ctx;

	(void)target;
	if (!*held || sl_uncharge(g, 1) != 0)
		return 0;
	if (sl_charge(g, 1, SL_NORECLAIM) != 0)
		--*held;
	return 1;
}

/* Found by the fuzzer: a forced charge that stocks refilled inside reclaim
 * callbacks pushed past a max that real usage is not over. */
START_TEST(a_forced_charge_drains_what_callbacks_restocked_before_passing_max)
{
	struct sl_tree_opts o;
	struct sl_limits l;
	struct sl_ops ops = { .reclaim = alloc_while_evicting };
	struct sl_stats a;
	uint64_t held = 40;
	sl_group *A, *A1;
	sl_tree *t;

	sl_tree_opts_init(&o);
	o.batch = 16;
	o.reclaim_batch = 0;
	o.root.max = 90;
	ck_assert_int_eq(sl_tree_create(&o, &t), 0);
	sl_limits_init(&l);
	l.max = 100;
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "A", &l, &ops, &held, &A), 0);
	ck_assert_int_eq(sl_group_create(A, "A1", NULL, NULL, NULL, &A1), 0);
	ck_assert_int_eq(sl_charge(A, 40, 0), 0);
	/* 100 does not fit under the root's 90, and reclaim frees nothing:
	 * forced past the root's max, but A is only at its own. */
	ck_assert_int_eq(sl_charge(A1, 60, SL_FORCE), 0);
	a = stats_of(A);
	ck_assert_uint_eq(a.usage, held + 60);
	ck_assert_uint_le(a.usage + a.stocked, 100);
	ck_assert_uint_eq(a.events_max, 0);
	ck_assert_uint_eq(stats_of(sl_tree_root(t)).events_max, 1);
	ck_assert_int_eq(sl_uncharge(A1, 60), 0);
	ck_assert_int_eq(sl_uncharge(A, held), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(reclaim_and_limit_changes_inside_a_callback_do_not_nest)
{
	static const struct spec sp[] = {
		{ .name = "X", .parent = -1, .high = 10, .usage = 100 },
	};
	struct world w;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 1);
	w.h[0].hook = hook_nested_reclaim;
	w.h[0].other = w.root;
	ck_assert_uint_eq(sl_reclaim(w.root, 30, 0), 30);
	ck_assert_uint_eq(w.h[0].r64[0], 0);
	ck_assert_uint_eq(w.h[0].r64[1], 0);
	ck_assert_uint_eq(w.h[0].r64[2], 0);
	ck_assert_int_eq(w.h[0].rc[0], -EBUSY);
	ck_assert_int_eq(w.h[0].rc[1], 0);
	ck_assert_uint_eq(usage_of(w.g[0]), 70);
	sl_handle_over_high(w.g[0]); /* clears this thread's pending flag */
	world_free(&w);
}
END_TEST

static void hook_destroy_and_stats(sl_group *g, struct host *h)
{
	struct sl_stats st;

	if (h->calls)
		return; /* PROTECTION calls back in rounds: look only the first time */
	h->rc[0] = sl_group_destroy(h->other);
	h->rc[1] = sl_group_stats(g, &st);
	h->r64[0] = st.usage;
	h->rc[2] = sl_group_stats(sl_group_parent(g), &st);
	h->r64[1] = st.usage;
}

START_TEST(a_callback_may_read_stats_but_not_destroy_groups)
{
	static const struct spec sp[] = {
		{ .name = "X", .parent = -1, .usage = 100 },
		{ .name = "empty", .parent = -1, .no_callback = 1 },
	};
	struct world w;

	world_build(&w, policy_of(_i), batch_of(_i % NBATCH), sp, 2);
	w.h[0].hook = hook_destroy_and_stats;
	w.h[0].other = w.g[1];
	ck_assert_uint_eq(sl_reclaim(w.root, 30, 0), 30);
	ck_assert_int_eq(w.h[0].rc[0], -EBUSY);
	ck_assert_int_eq(w.h[0].rc[1], 0);
	ck_assert_uint_eq(w.h[0].r64[0], 100);
	ck_assert_int_eq(w.h[0].rc[2], 0);
	ck_assert_uint_eq(w.h[0].r64[1], 100);
	/* Outside the callback the empty group goes. */
	ck_assert_int_eq(sl_group_destroy(w.g[1]), 0);
	w.g[1] = NULL;
	world_free(&w);
}
END_TEST

/* ---- reclaims racing charges ---- */

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds each concurrent test iteration runs: SL_TEST_SECONDS if set, else 0.2. */
static double run_seconds(void)
{
	const char *v = getenv("SL_TEST_SECONDS");
	double d = v ? strtod(v, NULL) : 0;

	return d > 0 ? d : 0.2;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * UINT64_C(2685821657736338717);
}

/*
 * root -> P1 (soft 3000) -> a (soft 1000), b, keeper
 *      -> P2 (max, in the "at max" test) -> c, d
 *      -> e
 * keeper and the ballasts are only charged by the test's thread, at the start.
 */
enum { C_P1, C_A, C_B, C_KEEPER, C_BALLAST1, C_P2, C_C, C_D, C_BALLAST2, C_E, C_N };
static const int charged_leaves[] = { C_A, C_B, C_C, C_D, C_E };
#define NLEAVES 5

struct race {
	struct world w;
	atomic_int stop;
	atomic_uint_fast64_t returned, targets, enomem, charges, reclaims;
	int allow_enomem;
	unsigned charge_flags;
};

struct worker {
	struct race *r;
	uint64_t seed;
};

static void *charger_main(void *arg)
{
	struct worker *wk = arg;
	struct race *r = wk->r;
	struct world *w = &r->w;
	uint64_t s = wk->seed, n;

	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		int i = charged_leaves[rng_next(&s) % NLEAVES];
		struct host *h = &w->h[i];
		int rc;

		n = 1 + rng_next(&s) % 2000;
		if (rng_next(&s) % 8 < 5) {
			rc = sl_charge(w->g[i], n, r->charge_flags);
			if (rc == 0) {
				pthread_mutex_lock(&h->lock);
				h->held += n;
				pthread_mutex_unlock(&h->lock);
				atomic_fetch_add_explicit(&r->charges, 1, memory_order_relaxed);
			} else {
				T_CHECK(rc == -ENOMEM && r->allow_enomem, "charge: %d", rc);
				atomic_fetch_add_explicit(&r->enomem, 1, memory_order_relaxed);
			}
		} else {
			pthread_mutex_lock(&h->lock);
			n = min_u64(n, h->held);
			h->held -= n;
			rc = n ? sl_uncharge(w->g[i], n) : 0;
			pthread_mutex_unlock(&h->lock);
			T_CHECK(rc == 0, "uncharge: %d", rc);
		}
	}
	return NULL;
}

static void *reclaimer_main(void *arg)
{
	struct worker *wk = arg;
	struct race *r = wk->r;
	struct world *w = &r->w;
	sl_group *scopes[] = { w->root, w->g[C_P1], w->g[C_P2], w->g[C_A], w->g[C_E] };
	uint64_t s = wk->seed;

	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		sl_group *scope = scopes[rng_next(&s) % 5];
		uint64_t target = 1 + rng_next(&s) % 5000, got;

		got = sl_reclaim(scope, target, 0);
		T_CHECK(got <= target, "reclaim returned %" PRIu64 " for a target of %" PRIu64, got, target);
		atomic_fetch_add_explicit(&r->returned, got, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->targets, target, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->reclaims, 1, memory_order_relaxed);
	}
	return NULL;
}

static void race_build(struct race *r, enum sl_policy policy, uint64_t batch, uint64_t p2_max,
		       uint64_t ballast)
{
	struct spec sp[C_N] = {
		[C_P1] = { .name = "P1", .parent = -1, .soft = 3000 },
		[C_A] = { .name = "a", .parent = C_P1, .soft = 1000 },
		[C_B] = { .name = "b", .parent = C_P1 },
		[C_KEEPER] = { .name = "keeper", .parent = C_P1, .soft = 1000, .usage = 500 },
		[C_BALLAST1] = { .name = "ballast1", .parent = C_P1, .usage = ballast },
		[C_P2] = { .name = "P2", .parent = -1, .max = p2_max },
		[C_C] = { .name = "c", .parent = C_P2, .soft = 500 },
		[C_D] = { .name = "d", .parent = C_P2 },
		[C_BALLAST2] = { .name = "ballast2", .parent = C_P2, .usage = ballast },
		[C_E] = { .name = "e", .parent = -1, .soft = 100 },
	};

	memset(r, 0, sizeof(*r));
	world_build(&r->w, policy, batch, sp, C_N);
}

/* Run nchargers chargers and nreclaimers reclaimers for a while, then reconcile. */
static void race_run(struct race *r, int nchargers, int nreclaimers)
{
	struct worker wk[8];
	pthread_t th[8];
	double end = now_seconds() + run_seconds();
	int i, n = nchargers + nreclaimers;
	uint64_t reclaimed = 0, freed = 0;
	size_t g;

	ck_assert_int_le(n, 8);
	for (i = 0; i < n; i++) {
		wk[i].r = r;
		wk[i].seed = UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(i + 1);
		void *(*fn)(void *) = i < nchargers ? charger_main : reclaimer_main;

		ck_assert_int_eq(pthread_create(&th[i], NULL, fn, &wk[i]), 0);
	}
	/* On a loaded machine a thread may not finish one call in the run's
	 * time: run on (up to 30 s more) until both kinds have done work. */
	while (now_seconds() < end ||
	       ((atomic_load(&r->reclaims) == 0 || atomic_load(&r->charges) == 0) && now_seconds() < end + 30)) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	atomic_store(&r->stop, 1);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_eq(atomic_load(&nested_callbacks), 0);
	ck_assert_uint_gt(atomic_load(&r->reclaims), 0);
	ck_assert_uint_gt(atomic_load(&r->charges), 0);

	/* The ledger: every group's usage is what its host holds. */
	for (g = 0; g < C_N; g++) {
		struct sl_stats st = stats_of(r->w.g[g]);
		uint64_t held = r->w.h[g].held;

		if (g != C_P1 && g != C_P2)
			ck_assert_msg(st.usage == held, "%s: usage %" PRIu64 ", host holds %" PRIu64,
				      sl_group_name(r->w.g[g]), st.usage, held);
		reclaimed += st.reclaimed;
		freed += r->w.h[g].freed;
	}
	ck_assert_uint_eq(usage_of(r->w.g[C_P1]), r->w.h[C_A].held + r->w.h[C_B].held +
							   r->w.h[C_KEEPER].held + r->w.h[C_BALLAST1].held);
	ck_assert_uint_eq(usage_of(r->w.g[C_P2]),
			  r->w.h[C_C].held + r->w.h[C_D].held + r->w.h[C_BALLAST2].held);
	/* Reclaim reports only what really went, and never more than asked. */
	ck_assert_uint_le(atomic_load(&r->returned), atomic_load(&r->targets));
	ck_assert_uint_le(reclaimed, freed);
	if (!r->allow_enomem)
		ck_assert_msg(reclaimed == atomic_load(&r->returned),
			      "stats say %" PRIu64 " reclaimed, sl_reclaim returned %" PRIu64, reclaimed,
			      (uint64_t)atomic_load(&r->returned));
	else
		ck_assert_uint_ge(reclaimed, atomic_load(&r->returned));
	ck_assert_int_eq(sl_tree_check(r->w.t), 0);
}

START_TEST(concurrent_reclaims_and_charges_keep_the_ledger_exact)
{
	struct race r;

	race_build(&r, policy_of(_i), batch_of(_i % NBATCH), 0, 0);
	race_run(&r, 2, 2);
	/* world_free() releases everything and destroys every group: it
	 * fails unless usage is exactly 0 everywhere. */
	world_free(&r.w);
}
END_TEST

START_TEST(concurrent_charges_at_max_and_reclaims_do_not_deadlock)
{
	struct race r;

	race_build(&r, policy_of(_i), batch_of(_i % NBATCH), 20000, 0);
	r.allow_enomem = 1;
	race_run(&r, 3, 2);
	ck_assert_uint_le(usage_of(r.w.g[C_P2]), 20000);
	/* Charges really did reclaim at P2's max, from the charging threads. */
	ck_assert_uint_gt(stats_of(r.w.g[C_P2]).events_max, 0);
	world_free(&r.w);
}
END_TEST

START_TEST(a_group_within_its_soft_limit_keeps_everything_while_others_have_excess)
{
	/* GUARANTEE: the ballasts' excess (no soft limit) never runs out, so
	 * pass 1 always suffices and the keeper is never reclaimed. */
	struct race r;

	race_build(&r, SL_POLICY_GUARANTEE, batch_of(_i), 0, (uint64_t)1 << 40);
	race_run(&r, 2, 2);
	ck_assert_uint_eq(r.w.h[C_KEEPER].calls, 0);
	ck_assert_uint_eq(r.w.h[C_KEEPER].held, 500);
	ck_assert_uint_eq(stats_of(r.w.g[C_KEEPER]).events_low, 0);
	ck_assert_uint_eq(stats_of(r.w.g[C_KEEPER]).reclaimed, 0);
	world_free(&r.w);
}
END_TEST

/* ---- the suite ---- */

static Suite *reclaim_suite(void)
{
	Suite *s = suite_create("reclaim");
	const int all = NPOLICY * NBATCH;
	TCase *tc;

	tc = tcase_create("amount");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, reclaim_frees_exactly_the_target_when_callbacks_free_what_they_are_asked, 0,
			    all);
	tcase_add_loop_test(tc, reclaim_frees_what_there_is_when_the_target_is_larger, 0, all);
	tcase_add_loop_test(tc, reclaim_of_nothing_or_with_bad_arguments_returns_0, 0, all);
	tcase_add_loop_test(tc, a_callback_that_frees_more_than_asked_is_counted_and_no_one_is_asked_after, 0,
			    all);
	suite_add_tcase(s, tc);

	tc = tcase_create("untrusted callbacks");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, a_lying_callback_cannot_make_reclaim_spin_or_over_report, 0, NLIAR * all);
	suite_add_tcase(s, tc);

	tc = tcase_create("at max");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, charge_at_max_reclaims_from_the_subtree_and_succeeds, 0, all);
	tcase_add_loop_test(tc, noreclaim_charge_at_max_fails_without_calling_back, 0, all);
	tcase_add_loop_test(tc, forced_charge_makes_room_first_and_passes_max_only_for_the_rest, 0, all);
	tcase_add_loop_test(tc, charge_at_max_fails_after_bounded_retries_when_nothing_is_reclaimable, 0,
			    3 * all);
	suite_add_tcase(s, tc);

	tc = tcase_create("oom handler");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, oom_handler_is_called_once_with_the_group_at_max_and_the_amount, 0, all);
	tcase_add_loop_test(tc, oom_handler_that_drops_a_tenant_lets_the_charge_succeed, 0, all);
	tcase_add_loop_test(tc, oom_handler_that_frees_nothing_and_returns_0_fails_the_charge, 0, all);
	tcase_add_loop_test(tc, inside_the_oom_handler_charges_never_reclaim_and_reclaim_does_not_nest, 0,
			    all);
	suite_add_tcase(s, tc);

	tc = tcase_create("high");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, charge_past_high_succeeds_and_counts_high_without_calling_back, 0, all);
	tcase_add_loop_test(tc, high_pending_is_set_only_in_the_thread_that_went_past_high, 0, all);
	tcase_add_loop_test(tc, handle_over_high_reclaims_every_group_on_the_path_back_to_its_high, 0, all);
	suite_add_tcase(s, tc);

	tc = tcase_create("limit changes");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, lowering_max_below_usage_reclaims_until_usage_fits, 0, all);
	tcase_add_loop_test(tc, lowering_max_that_reclaim_cannot_meet_is_ebusy_and_stays_in_force, 0, all);
	tcase_add_loop_test(tc, raising_a_soft_limit_shields_the_group_on_the_next_reclaim, 0, NBATCH);
	tcase_add_loop_test(tc, raising_min_protects_the_group_on_the_next_reclaim, 0, all);
	suite_add_tcase(s, tc);

	tc = tcase_create("re-entry");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, a_callback_may_charge_and_uncharge_its_own_and_other_groups, 0, all);
	tcase_add_loop_test(tc, a_charge_inside_a_callback_that_hits_max_fails_instead_of_reclaiming, 0, all);
	tcase_add_loop_test(tc, reclaim_and_limit_changes_inside_a_callback_do_not_nest, 0, all);
	tcase_add_test(tc, a_forced_charge_drains_what_callbacks_restocked_before_passing_max);
	tcase_add_loop_test(tc, a_callback_may_read_stats_but_not_destroy_groups, 0, all);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrent");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, concurrent_reclaims_and_charges_keep_the_ledger_exact, 0, all);
	tcase_add_loop_test(tc, concurrent_charges_at_max_and_reclaims_do_not_deadlock, 0, all);
	tcase_add_loop_test(tc, a_group_within_its_soft_limit_keeps_everything_while_others_have_excess, 0,
			    NBATCH);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(reclaim_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
