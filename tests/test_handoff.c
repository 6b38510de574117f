/* SPDX-License-Identifier: MIT */
/*
 * Handoff: memory charged on one thread and uncharged on another, the way a
 * server hands a buffer from the thread that read it to the one that frees
 * it.  Units then sit in one thread's stock ledger while another uncharges
 * them, and an uncharge must find them wherever they are: a legitimate
 * uncharge never returns -EINVAL, however the threads interleave, and an
 * over-uncharge always does.
 *
 * The library folds other threads' ledgers a few times and then settles a
 * shortfall exactly (take_local_exact in lib/charge.c).  The tests run with
 * the ordinary folds turned off (sl__fold_rounds = 0) so that every
 * shortfall takes the exact path, and with the default.  They link the
 * static archive to reach that hidden knob.
 *
 * One test plays the losing interleaving on purpose, at every ordinary fold.
 *
 * Bounded by SL_HANDOFF_SECONDS (default 1 per run).
 */
#define _GNU_SOURCE /* syscall() */
#include "helpers.h"

#include <stdbool.h>

/* Hidden in the shared library, reachable from the archive. */
#include "testing.h"

#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 8
#define GROUPS 10 /* more than a stock's 8 slots: slots are rebound as we go */
#define RING 256

/* A single-producer single-consumer ring of (group, amount) handoffs. */
struct item {
	uint16_t group;
	uint16_t amount;
};

struct ring {
	_Alignas(64) atomic_uint head; /* consumer */
	_Alignas(64) atomic_uint tail; /* producer */
	struct item it[RING];
};

static struct {
	sl_group *g[GROUPS];
	struct ring ring[THREADS]; /* ring[i]: thread i-1 hands to thread i */
	unsigned groups; /* the producers charge g[0 .. groups - 1] */
	atomic_bool stop;
	atomic_ulong handed, short_uncharges;
	double seconds;
} H;

static bool ring_push(struct ring *r, struct item it)
{
	unsigned t = atomic_load_explicit(&r->tail, memory_order_relaxed);

	if (t - atomic_load_explicit(&r->head, memory_order_acquire) == RING)
		return false;
	r->it[t % RING] = it;
	atomic_store_explicit(&r->tail, t + 1, memory_order_release);
	return true;
}

static bool ring_pop(struct ring *r, struct item *it)
{
	unsigned h = atomic_load_explicit(&r->head, memory_order_relaxed);

	if (h == atomic_load_explicit(&r->tail, memory_order_acquire))
		return false;
	*it = r->it[h % RING];
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
	return true;
}

static void uncharge_item(struct item it)
{
	int rc = sl_uncharge(H.g[it.group], it.amount);

	if (rc != 0)
		atomic_fetch_add(&H.short_uncharges, 1);
	T_CHECK(rc == 0, "uncharge of %u handed-off units of group %u: %d", (unsigned)it.amount,
		(unsigned)it.group, rc);
}

/*
 * Even threads produce: they charge and hand the units to the next thread,
 * freeing them themselves only when its ring is full.  Odd threads consume:
 * they never charge, so their own ledgers are empty and every uncharge must
 * find its units in local or in a producer's ledger.  Which is the case the
 * exact check exists for: the units are somewhere, moving, while other
 * consumers take from local too.
 */
static void *worker(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg;
	struct ring *out = &H.ring[(me + 1) % THREADS], *in = &H.ring[me];
	uint64_t rng = 0x9e3779b97f4a7c15ull * (me + 1);
	bool producer = me % 2 == 0;
	struct item it;

	while (!atomic_load_explicit(&H.stop, memory_order_relaxed)) {
		if (producer) {
			it.group = (uint16_t)rng_range(&rng, 0, H.groups - 1);
			it.amount = (uint16_t)rng_range(&rng, 1, 4096);
			T_CHECK(sl_charge(H.g[it.group], it.amount, 0) == 0, "charge failed");
			if (ring_push(out, it))
				atomic_fetch_add_explicit(&H.handed, 1, memory_order_relaxed);
			else
				uncharge_item(it);
		}
		while (ring_pop(in, &it))
			uncharge_item(it);
	}
	return NULL;
}

static void *return_leftovers(void *arg)
{
	struct item it;

	(void)arg;
	for (unsigned i = 0; i < THREADS; i++)
		while (ring_pop(&H.ring[i], &it))
			uncharge_item(it);
	return NULL;
}

static void run(unsigned fold_rounds, uint64_t batch, unsigned groups)
{
	struct sl_tree_opts o;
	pthread_t th[THREADS];
	sl_group *mid;
	sl_tree *t;
	unsigned saved = sl__fold_rounds;
	uint64_t answered0 = atomic_load(&sl__stock_answered_folds), fences0 = atomic_load(&sl__stock_fences);
	int i;

	sl_tree_opts_init(&o);
	o.batch = batch;
	ck_assert_int_eq(sl_tree_create(&o, &t), 0);
	mid = group_new(sl_tree_root(t), "mid", SL_UNLIMITED);
	for (i = 0; i < GROUPS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%d", i);
		H.g[i] = group_new(i % 2 ? mid : sl_tree_root(t), name, SL_UNLIMITED);
	}
	memset(H.ring, 0, sizeof(H.ring));
	H.groups = groups;
	atomic_store(&H.stop, false);
	atomic_store(&H.handed, 0);
	atomic_store(&H.short_uncharges, 0);
	thread_failure_reset();
	sl__fold_rounds = fold_rounds; /* before the threads start: they read it */
	for (i = 0; i < THREADS; i++)
		start_thread(&th[i], worker, (void *)(uintptr_t)i);
	{
		struct timespec ts = { (time_t)H.seconds,
				       (long)((H.seconds - (double)(time_t)H.seconds) * 1e9) };

		nanosleep(&ts, NULL);
	}
	atomic_store(&H.stop, true);
	for (i = 0; i < THREADS; i++)
		join_thread(th[i]);
	sl__fold_rounds = saved;
	/* What is still in the rings is the host's: a thread gives it back,
	 * keeps what it uncharged in its own stock, and returns that as it
	 * exits. */
	start_thread(&th[0], return_leftovers, NULL);
	join_thread(th[0]);
	printf("handoff (fold rounds %u, %s, %u groups): %lu handoffs, %lu short uncharges, %lu folds answered by "
	       "their owners, %lu fences\n", fold_rounds, batch == SL_BATCH_NONE ? "no stocks" : "default batch", groups,
	       atomic_load(&H.handed), atomic_load(&H.short_uncharges),
	       (unsigned long)(atomic_load(&sl__stock_answered_folds) - answered0),
	       (unsigned long)(atomic_load(&sl__stock_fences) - fences0));
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_gt(atomic_load(&H.handed), 0);
	/* Every unit came back: nothing lost, nothing counted twice. */
	for (i = 0; i < GROUPS; i++)
		assert_empty(H.g[i], "a handoff group");
	assert_empty(mid, "mid");
	assert_empty(sl_tree_root(t), "root");
	assert_tree_ok(t);
	/* And an over-uncharge is still caught, exactly, clamping at zero. */
	ck_assert_int_eq(sl_charge(H.g[0], 100, 0), 0);
	ck_assert_int_eq(sl_uncharge(H.g[0], 101), -EINVAL);
	ck_assert_uint_eq(usage_of(H.g[0]), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
	sl_tree_destroy(t);
}

START_TEST(handoff_every_shortfall_exact)
{
	run(0, 0, GROUPS);
}
END_TEST

START_TEST(handoff_default_folds)
{
	run(2, 0, GROUPS);
}
END_TEST

/* Two groups: no slot is rebound, so ledgers grow until consumers fold
 * them (under the fence protocol: owners answering asks while others are
 * fenced, exact checks and thread exits all at once). */
START_TEST(handoff_folds_without_rebinds)
{
	run(2, 0, 2);
}
END_TEST

START_TEST(handoff_without_stocks)
{
	run(0, SL_BATCH_NONE, GROUPS);
}
END_TEST

/* An over-uncharge on a group whose units sit in another live thread's
 * ledger: it takes what is there, reports -EINVAL, and the group reads zero. */
static sl_group *over_g;
static struct gate parked, release_parked;

static void *charge_and_park(void *arg)
{
	(void)arg;
	/* Charged from this thread's stock: the units sit in its ledger. */
	T_CHECK(sl_charge(over_g, 1000, 0) == 0, "charge");
	gate_open(&parked);
	gate_wait(&release_parked);
	return NULL;
}

START_TEST(over_uncharge_across_ledgers)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	unsigned fold;
	pthread_t th;

	for (fold = 0; fold <= 2; fold += 2) {
		over_g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
		gate_init(&parked);
		gate_init(&release_parked);
		thread_failure_reset();
		sl__fold_rounds = fold;
		start_thread(&th, charge_and_park, NULL);
		gate_wait(&parked);
		ck_assert_int_eq(sl_charge(over_g, 500, 0), 0); /* this thread's ledger */
		ck_assert_uint_eq(usage_of(over_g), 1500);
		/* 1400: 500 from this thread's ledger, 900 out of the other's. */
		ck_assert_int_eq(sl_uncharge(over_g, 1400), 0);
		ck_assert_uint_eq(usage_of(over_g), 100);
		ck_assert_int_eq(sl_uncharge(over_g, 101), -EINVAL);
		ck_assert_uint_eq(usage_of(over_g), 0);
		ck_assert_uint_eq(usage_of(sl_tree_root(t)), 0);
		gate_open(&release_parked);
		join_thread(th);
		sl__fold_rounds = 2;
		gate_destroy(&parked);
		gate_destroy(&release_parked);
		ASSERT_NO_THREAD_FAILURE();
		assert_tree_ok(t);
		ck_assert_int_eq(sl_group_destroy(over_g), 0);
	}
	sl_tree_destroy(t);
}
END_TEST

/*
 * The interleaving that defeats a fold, played on purpose.  The test's
 * thread T holds 100 units that a producer P charged (they sit in P's
 * ledger).  T's uncharge finds local empty and folds P's ledger into local;
 * right then (the fold hook) P charges 100 more and hands them to a
 * consumer C, whose uncharge takes the 100 from local before T can.  T's
 * units are now in P's ledger again, behind the fold.  Every ordinary fold
 * loses this way; the exact check must still find them.
 */
struct agent {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int cmd; /* 0 idle, 1 charge, 2 uncharge, 3 exit */
	uint64_t amount;
	int rc;
};

static struct agent producer, consumer;
static sl_group *race_g;
static unsigned race_hooks;

static void *agent_main(void *arg)
{
	struct agent *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		while (a->cmd == 0)
			pthread_cond_wait(&a->cond, &a->lock);
		if (a->cmd == 3)
			break;
		a->rc = a->cmd == 1 ? sl_charge(race_g, a->amount, 0) : sl_uncharge(race_g, a->amount);
		a->cmd = 0;
		pthread_cond_broadcast(&a->cond);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* Have agent a run cmd and wait for it: its result. */
static int agent_do(struct agent *a, int cmd, uint64_t amount)
{
	int rc;

	pthread_mutex_lock(&a->lock);
	a->cmd = cmd;
	a->amount = amount;
	pthread_cond_broadcast(&a->cond);
	while (a->cmd != 0 && cmd != 3)
		pthread_cond_wait(&a->cond, &a->lock);
	rc = a->rc;
	pthread_mutex_unlock(&a->lock);
	return rc;
}

static void agent_start(struct agent *a)
{
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	a->cmd = 0;
	start_thread(&a->th, agent_main, a);
}

static void agent_stop(struct agent *a)
{
	agent_do(a, 3, 0);
	join_thread(a->th);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
}

static unsigned exact_charges;
static bool charge_in_check;

static pthread_t hook_thread; /* the thread whose folds the hook defeats */

static void steal_after_fold(sl_group *g, bool exact)
{
	/* Not the agents' own folds (a consumer that comes up short too):
	 * the hook waits for the agents. */
	if (g != race_g || !pthread_equal(pthread_self(), hook_thread))
		return;
	if (exact) {
		if (!charge_in_check)
			return;
		/* Inside the exact check the producer's slot is empty and
		 * must stay so: its charge goes exactly to local instead.  A
		 * consumer may take from local meanwhile: only what it holds. */
		T_CHECK(agent_do(&producer, 1, 2) == 0, "producer's charge during the check");
		T_CHECK(agent_do(&consumer, 2, 1) == 0, "consumer's uncharge during the check");
		exact_charges++;
		return;
	}
	race_hooks++;
	T_CHECK(agent_do(&producer, 1, 100) == 0, "producer's charge");
	T_CHECK(agent_do(&consumer, 2, 100) == 0, "consumer's uncharge of what it was handed");
}

START_TEST(every_fold_defeated_still_exact)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	unsigned folds, eager = sl__eager_refills;

	race_g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	thread_failure_reset();
	hook_thread = pthread_self();
	/* Every fold must find the units in the producer's ledger: no eager
	 * folding by the producer after the first fold took its ledger. */
	sl__eager_refills = 0;
	agent_start(&producer);
	agent_start(&consumer);
	for (folds = 0; folds <= 16; folds += 8) {
		sl__fold_rounds = folds;
		race_hooks = 0;
		exact_charges = 0;
		/* Handed to this thread: 100 legitimately, then 1 more than it
		 * holds, which must still be caught. */
		ck_assert_int_eq(agent_do(&producer, 1, 100), 0);
		sl__fold_hook = steal_after_fold;
		charge_in_check = true;
		ck_assert_int_eq(sl_uncharge(race_g, 100), 0);
		charge_in_check = false;
		sl__fold_hook = NULL;
		ck_assert_uint_eq(race_hooks, folds);
		ck_assert_uint_eq(exact_charges, 1);
		/* What the producer kept from inside the check is all that is left. */
		ck_assert_uint_eq(usage_of(race_g), 1);
		ck_assert_int_eq(agent_do(&producer, 2, 1), 0);
		ck_assert_uint_eq(usage_of(race_g), 0);
		ck_assert_int_eq(agent_do(&producer, 1, 100), 0);
		race_hooks = 0;
		sl__fold_hook = steal_after_fold;
		ck_assert_int_eq(sl_uncharge(race_g, 101), -EINVAL);
		sl__fold_hook = NULL;
		ck_assert_uint_eq(race_hooks, folds);
		ck_assert_uint_eq(usage_of(race_g), 0);
	}
	sl__fold_rounds = 2;
	sl__eager_refills = eager;
	agent_stop(&producer);
	agent_stop(&consumer);
	ASSERT_NO_THREAD_FAILURE();
	/* This thread's uncharges kept their units in its stock; give them
	 * back as its exit would. */
	sl__stock_drain_mine(sl_tree_root(t));
	assert_empty(race_g, "g");
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/*
 * Fence protocol (lib/stock_handover.c): a fold of a ledger whose owner
 * charges is answered by the owner, which folds its own ledger on its next
 * charge, with no membarrier(); a fold of an idle owner's ledger waits a
 * moment for an answer that does not come and takes it with the fence.
 * Either way the units are found.  Under compare-and-swap neither happens
 * (no counter moves) and the units are found all the same.  The owner's
 * charge is played from the fold's wait (sl__ask_hook), so that it comes
 * while the fold waits, however the machine schedules the threads.
 */
static unsigned ask_hooks;

static void owner_charges_while_asked(void)
{
	if (ask_hooks++)
		return;
	T_CHECK(agent_do(&producer, 1, 1) == 0, "the owner's charge while asked");
}

START_TEST(a_charging_owner_answers_a_fold_an_idle_one_is_fenced)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	bool fence = sl__stock_protocol == 1;
	uint64_t answered0 = atomic_load(&sl__stock_answered_folds), fences0, answered1;
	unsigned attempt;
	pthread_t th;

	race_g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	thread_failure_reset();
	agent_start(&producer);
	/* After asks that went unanswered (other tests', or a slow machine's)
	 * folds fence without asking for a while: try until one asks. */
	for (attempt = 0; attempt < 1000; attempt++) {
		/* All 1000 in the owner's ledger; local is empty. */
		ck_assert_int_eq(agent_do(&producer, 1, 1000), 0);
		ask_hooks = 0;
		sl__ask_hook = owner_charges_while_asked;
		ck_assert_int_eq(sl_uncharge(race_g, 1000), 0);
		sl__ask_hook = NULL;
		/* The owner's charge of 1 during the fold is all that is left. */
		ck_assert_uint_eq(usage_of(race_g), ask_hooks ? 1 : 0);
		if (ask_hooks)
			ck_assert_int_eq(agent_do(&producer, 2, 1), 0);
		ck_assert_uint_eq(usage_of(race_g), 0);
		if (!fence || ask_hooks)
			break;
	}
	answered1 = atomic_load(&sl__stock_answered_folds);
	if (fence) {
		ck_assert_uint_eq(ask_hooks, 1);
		ck_assert_uint_eq(answered1, answered0 + 1);
	} else {
		ck_assert_uint_eq(ask_hooks, 0);
		ck_assert_uint_eq(answered1, answered0);
	}
	agent_stop(&producer);

	/* An idle owner: parked, it never answers. */
	over_g = race_g;
	gate_init(&parked);
	gate_init(&release_parked);
	start_thread(&th, charge_and_park, NULL);
	gate_wait(&parked);
	fences0 = atomic_load(&sl__stock_fences);
	ck_assert_int_eq(sl_uncharge(race_g, 1000), 0);
	ck_assert_uint_eq(usage_of(race_g), 0);
	ck_assert_uint_eq(atomic_load(&sl__stock_answered_folds), answered1);
	if (fence)
		ck_assert_uint_gt(atomic_load(&sl__stock_fences), fences0);
	else
		ck_assert_uint_eq(atomic_load(&sl__stock_fences), fences0);
	ck_assert_int_eq(sl_uncharge(race_g, 1), -EINVAL);
	gate_open(&release_parked);
	join_thread(th);
	gate_destroy(&parked);
	gate_destroy(&release_parked);
	ASSERT_NO_THREAD_FAILURE();
	assert_empty(race_g, "g");
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/*
 * A fold that took an owner's ledger makes the owner fold its own ledger
 * into local at its next refills: the next uncharges of what it charges
 * then find their units in local, with no fold (and, under the fence
 * protocol, no ask or fence).  A handoff's folds fell 7-8x with this.
 */
START_TEST(a_taken_ledger_is_folded_by_its_owner_next_time)
{
	sl_tree *t = tree_new(64, SL_UNLIMITED);
	uint64_t taken0, taken1;

	race_g = group_new(sl_tree_root(t), "g", SL_UNLIMITED);
	thread_failure_reset();
	agent_start(&producer);
	/* 10 units in the producer's ledger; ours is empty, local too. */
	ck_assert_int_eq(agent_do(&producer, 1, 10), 0);
	taken0 = atomic_load(&sl__stock_ledgers_taken);
	ck_assert_int_eq(sl_uncharge(race_g, 10), 0);
	taken1 = atomic_load(&sl__stock_ledgers_taken);
	ck_assert_uint_gt(taken1, taken0);
	/* The slot holds the batch, 64 units: 60 come from it (fast path,
	 * into the ledger), the next 10 need a refill, and that refill folds
	 * the ledger, 70 units, into local. */
	ck_assert_int_eq(agent_do(&producer, 1, 60), 0);
	ck_assert_int_eq(agent_do(&producer, 1, 10), 0);
	ck_assert_int_eq(sl_uncharge(race_g, 70), 0);
	ck_assert_uint_eq(atomic_load(&sl__stock_ledgers_taken), taken1);
	ck_assert_uint_eq(usage_of(race_g), 0);
	/* The owner's own uncharge of what a folding refill handed out still
	 * works (from local, by the slow path): 68 units left, 50 from the
	 * slot, 50 more through a refill. */
	ck_assert_int_eq(agent_do(&producer, 1, 50), 0);
	ck_assert_int_eq(agent_do(&producer, 1, 50), 0);
	ck_assert_int_eq(agent_do(&producer, 2, 100), 0);
	ck_assert_uint_eq(atomic_load(&sl__stock_ledgers_taken), taken1);
	ck_assert_int_eq(sl_uncharge(race_g, 1), -EINVAL);
	agent_stop(&producer);
	ASSERT_NO_THREAD_FAILURE();
	assert_empty(race_g, "g");
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/*
 * An uncharge keeps what it returns in the uncharging thread's stock, as
 * pre-charged units, while the path has room for a batch: a thread that
 * frees what others charge (a handoff) then moves no counter per uncharge.
 * The count stays, usage falls and stocked rises by as much; the thread's
 * next charge takes the units back with no counter moved (peak stays); an
 * uncharge inside a reclaim callback gives its units to the counters,
 * which a reclaim must make fall; a thread's exit gives its stock back.
 * (A group over a lowered max keeps nothing: test_tree's
 * max_lowered_below_usage_is_ebusy_but_holds_for_further_charges.)
 */
static uint64_t held_by_host;
static struct sl_stats in_callback[2]; /* before and after its uncharge */

static uint64_t free_held(sl_group *g, uint64_t target, void *ctx)
{
	uint64_t n = target < held_by_host ? target : held_by_host;

	(void)ctx;
	held_by_host -= n;
	T_CHECK(sl_group_stats(g, &in_callback[0]) == 0, "stats");
	T_CHECK(n == 0 || sl_uncharge(g, n) == 0, "uncharge in the callback");
	T_CHECK(sl_group_stats(g, &in_callback[1]) == 0, "stats");
	return n;
}

static void *uncharge_30_and_exit(void *arg)
{
	(void)arg;
	T_CHECK(sl_uncharge(race_g, 30) == 0, "uncharge of 30");
	T_CHECK(stocked_of(race_g) >= 30, "the 30 kept in this thread's stock");
	return NULL;
}

/* usage + stocked: the group's count. */
static uint64_t count_of(const struct sl_stats *s)
{
	return s->usage + s->stocked;
}

START_TEST(an_uncharge_keeps_its_units_in_its_thread_stock)
{
	const struct sl_ops ops = { .reclaim = free_held };
	sl_tree *t = tree_new(64, SL_UNLIMITED);
	struct sl_stats a, b;
	pthread_t th;

	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "g", NULL, &ops, NULL, &race_g), 0);
	thread_failure_reset();
	agent_start(&producer);
	/* The producer's slot: a batch pre-charged, 40 handed out. */
	ck_assert_int_eq(agent_do(&producer, 1, 40), 0);
	a = stats_of(race_g);
	ck_assert_uint_eq(a.usage, 40);
	/* Ours to free: the units stay charged, in our stock now. */
	ck_assert_int_eq(sl_uncharge(race_g, 40), 0);
	b = stats_of(race_g);
	ck_assert_uint_eq(b.usage, 0);
	ck_assert_uint_eq(b.stocked, a.stocked + 40);
	ck_assert_uint_eq(count_of(&b), count_of(&a));
	/* Our next charge takes them: no counter moves, peak stays. */
	ck_assert_int_eq(sl_charge(race_g, 40, 0), 0);
	b = stats_of(race_g);
	ck_assert_uint_eq(b.usage, 40);
	ck_assert_uint_eq(b.stocked, a.stocked);
	ck_assert_uint_eq(b.peak, a.peak);
	/* Our own ledger goes back into our slot (the fast path). */
	ck_assert_int_eq(sl_uncharge(race_g, 40), 0);
	/* Inside a reclaim callback the units leave the counters. */
	ck_assert_int_eq(agent_do(&producer, 1, 20), 0);
	held_by_host = 20;
	ck_assert_uint_eq(sl_reclaim(race_g, 20, 0), 20);
	ASSERT_NO_THREAD_FAILURE();
	a = in_callback[0];
	b = in_callback[1];
	ck_assert_uint_eq(b.usage, a.usage - 20);
	ck_assert_uint_eq(b.stocked, a.stocked);
	ck_assert_uint_eq(count_of(&b), count_of(&a) - 20);
	/* A thread that keeps units and exits gives them back. */
	ck_assert_int_eq(agent_do(&producer, 1, 30), 0);
	a = stats_of(race_g);
	start_thread(&th, uncharge_30_and_exit, NULL);
	join_thread(th);
	ASSERT_NO_THREAD_FAILURE();
	b = stats_of(race_g);
	ck_assert_uint_eq(b.usage, a.usage - 30);
	ck_assert_uint_eq(b.stocked, a.stocked);
	ck_assert_uint_eq(count_of(&b), count_of(&a) - 30);
	agent_stop(&producer);
	sl__stock_drain_mine(sl_tree_root(t));
	assert_empty(race_g, "g");
	assert_tree_ok(t);
	sl_tree_destroy(t);
}
END_TEST

/*
 * The stocks' protocol (docs/stocks.md) is the membarrier fence wherever the
 * kernel has it, so that these tests and the torture in ordinary builds
 * exercise it, and compare-and-swap under SOFTLIMIT_MEMBARRIER=0 (which
 * scripts/test runs too) and ThreadSanitizer, which does not model the fence.
 */
START_TEST(the_stock_protocol_is_the_fence_where_the_kernel_has_it)
{
	const char *env = getenv("SOFTLIMIT_MEMBARRIER");
	long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	int want = cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) && !(env && strcmp(env, "0") == 0);
	sl_tree *t;

#if defined(__SANITIZE_THREAD__)
	want = 0;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
	want = 0;
#endif
#endif
	ck_assert_int_eq(sl_tree_create(NULL, &t), 0);
	ck_assert_int_eq(sl__stock_protocol, want);
	fprintf(stderr, "handoff: stock protocol %s\n", sl__stock_protocol ? "fence (membarrier)" : "compare-and-swap");
	sl_tree_destroy(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("handoff");
	TCase *tc = tcase_create("handoff");

	H.seconds = test_seconds("SL_HANDOFF_SECONDS", 1.0);
	tcase_set_timeout(tc, 60 + 4 * H.seconds);
	tcase_add_test(tc, the_stock_protocol_is_the_fence_where_the_kernel_has_it);
	tcase_add_test(tc, handoff_every_shortfall_exact);
	tcase_add_test(tc, handoff_default_folds);
	tcase_add_test(tc, handoff_folds_without_rebinds);
	tcase_add_test(tc, handoff_without_stocks);
	tcase_add_test(tc, over_uncharge_across_ledgers);
	tcase_add_test(tc, every_fold_defeated_still_exact);
	tcase_add_test(tc, a_charging_owner_answers_a_fold_an_idle_one_is_fenced);
	tcase_add_test(tc, a_taken_ledger_is_folded_by_its_owner_next_time);
	tcase_add_test(tc, an_uncharge_keeps_its_units_in_its_thread_stock);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
