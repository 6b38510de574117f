/* SPDX-License-Identifier: MIT */
/*
 * bench_handoff: the cost of charging on one thread and uncharging on another.
 *
 * Servers often allocate on one thread and free on another.  Here a producer
 * thread makes "items" of AMOUNT units and passes them through a
 * single-producer single-consumer lock-free ring (RING_SIZE slots, head and
 * tail on their own cache lines) to a consumer thread.  The charged group
 * sits DEPTH levels below the root (root -> g1 -> g2 -> g3 -> g4), every
 * level's max far above anything charged.
 *
 * Two modes:
 *   handoff     producer: charge, push; consumer: pop, uncharge.  The
 *               consumer never charges, so with softlimit its uncharges find
 *               nothing in its own stock and take from the group's shared
 *               counters, folding the producer's ledger when they come up
 *               short.
 *   round trip  producer: charge, push into ring A; consumer: pop from A,
 *               push into ring B; producer: pop from B, uncharge.  The same
 *               thread charges and uncharges, with the ring traffic of a
 *               handoff both ways.
 *
 * Variants, in both modes:
 *   ring         no accounting: the floor of each mode;
 *   softlimit    sl_charge(g, AMOUNT, 0) / sl_uncharge(g, AMOUNT), with the
 *                default batch (SL_BATCH_DEFAULT) and with SL_BATCH_NONE
 *                (reported as batch 0: no stocks);
 *   atomic-walk  one relaxed atomic add per level with a max check and
 *                rollback on charge, one atomic sub per level on uncharge,
 *                each level's counter on its own cache line (the kernel's
 *                page_counter; as in bench_charge).
 *
 * Method: a calibration run per configuration (items grown until it takes a
 * tenth of the target time) sizes the measured runs; then the repetitions
 * of all configurations are interleaved (rep 1 of each, rep 2 of each, ...)
 * so that a machine that gets busier for a while touches them alike.  Each
 * run spawns the two threads and starts them at a barrier.  ns_per_item =
 * the wall time of the thread that finishes the last item (the consumer in
 * a handoff, the producer in a round trip) / items; the median over the
 * repetitions is reported.  Every sl_charge and sl_uncharge must return 0,
 * every item must arrive in order, and after every run every level's usage
 * must be back to 0 (and sl_tree_check() pass), or the benchmark stops with
 * exit status 1.
 *
 * Each thread also measures its CPU time.  A run in which the two threads'
 * CPU time is under 90% of their wall time had them take turns on one core
 * (another process held the other): items then cross in bursts without a
 * cache line moving between cores, which is much cheaper than a handoff
 * between cores.  Such runs are marked, and cpu_min in the JSON says so.
 *
 * Output: one JSON object per line on stdout; progress, a table and ratios
 * on stderr (unless --json-only).
 */
#define _GNU_SOURCE /* pthread_setaffinity_np, CPU_SET */

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>

#include <softlimit/softlimit.h>

#include "bench_common.h"

#define AMOUNT ((uint64_t)64)         /* units per item */
#define LEVEL_MAX ((uint64_t)1 << 40) /* max of every level: never reached */
#define DEPTH 4                       /* root -> g1 -> ... -> g4 */
#define LEVELS (DEPTH + 1)
#define RING_SIZE 1024u               /* slots per ring: a power of two */
#define RING_MASK ((uint64_t)RING_SIZE - 1)
#define TAIL_BATCH 32u                /* pops per publication of tail */
#define POLL_PAUSES 64u               /* pause instructions between looks at a full or empty ring */
#define SPINS_BEFORE_YIELD 16u        /* looks before sched_yield() */
#define MIN_ITEMS ((uint64_t)1 << 14)
#define MAX_ITEMS ((uint64_t)1 << 34)
#define MAX_REPS 5
#define CPU_OWN 0.9                   /* below: the threads shared a core for part of a run */

_Static_assert((RING_SIZE & (RING_SIZE - 1)) == 0, "RING_SIZE must be a power of two");

enum variant { V_RING, V_SOFTLIMIT, V_ATOMIC_WALK, V_COUNT };
enum mode { M_HANDOFF, M_ROUNDTRIP, M_COUNT };

static const char *const variant_names[V_COUNT] = {
	[V_RING] = "ring",
	[V_SOFTLIMIT] = "softlimit",
	[V_ATOMIC_WALK] = "atomic-walk",
};
static const char *const mode_names[M_COUNT] = {
	[M_HANDOFF] = "handoff",
	[M_ROUNDTRIP] = "roundtrip",
};

/* ------------------------------------------------------------------ utils */

static inline void cpu_relax(void)
{
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
	__builtin_ia32_pause();
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* ------------------------------------------------------------------- ring */

/*
 * Single-producer single-consumer ring.  head is written by the producer
 * only, tail by the consumer only, each on its own cache line next to the
 * writer's cached copy of the other index, so that a push or pop reads the
 * other side's line only when the cached copy says full or empty.  The
 * consumer publishes tail every TAIL_BATCH pops and whenever it finds the
 * ring empty (so nothing waits on an unpublished pop): when the consumer
 * is the slower side the ring runs full, and a tail published at every pop
 * moved its line between the cores at every item (about 100 ns on this
 * VM), which measured the ring, not the accounting.
 */
struct ring {
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t head; /* next slot to fill (producer) */
	uint64_t tail_seen;                        /* producer's copy of tail */
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t tail; /* next slot to empty, as published */
	uint64_t head_seen;                        /* consumer's copy of head */
	uint64_t next;                             /* consumer: next slot to empty */
	_Alignas(BENCH_CACHELINE) uint64_t slot[RING_SIZE];
};

static void ring_init(struct ring *r)
{
	memset(r, 0, sizeof(*r));
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
}

static inline bool ring_try_push(struct ring *r, uint64_t v)
{
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);

	if (h - r->tail_seen >= RING_SIZE) {
		/* Acquire: pairs with the consumer's release of tail, so its
		 * read of the slot is done before we overwrite it. */
		r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (h - r->tail_seen >= RING_SIZE)
			return false;
	}
	r->slot[h & RING_MASK] = v;
	/* Release: publishes the slot to the consumer's acquire of head. */
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
	return true;
}

static inline bool ring_try_pop(struct ring *r, uint64_t *v)
{
	uint64_t t = r->next;

	if (t == r->head_seen) {
		/* Empty as far as we know: publish what we emptied before
		 * anyone waits on it (release: our reads of those slots happen
		 * before the producer reuses them). */
		atomic_store_explicit(&r->tail, t, memory_order_release);
		/* Acquire: pairs with the producer's release of head. */
		r->head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
		if (t == r->head_seen)
			return false;
	}
	*v = r->slot[t & RING_MASK];
	r->next = t + 1;
	/* Publish every TAIL_BATCH pops, not every pop: a full ring otherwise
	 * moves tail's line between the cores at every item, which is the
	 * ring's cost, not the accounting's. */
	if ((t + 1) % TAIL_BATCH == 0)
		atomic_store_explicit(&r->tail, t + 1, memory_order_release);
	return true;
}

/*
 * Wait before the next look at a full or empty ring: POLL_PAUSES pause
 * instructions, then after SPINS_BEFORE_YIELD looks a sched_yield() (on 2
 * cores anything else runnable would otherwise make a spinning thread hold
 * up the one it waits for).  Each look reads the other side's index, so a
 * side that looked after every pause kept pulling that line away from the
 * side doing the work: a producer spinning on a full ring slowed the
 * consumer's every tail publication and the atomics behind it, and the
 * faster the producer's charge, the slower the handoff (consumer 100 ns
 * per item against 37 with the pauses, same library; a throwaway driver,
 * pinned).  The ring holds RING_SIZE items, far more than a pause loop's
 * worth, so the waiting side loses nothing by looking less often.
 */
static inline void spin_wait(unsigned *spins)
{
	if (++*spins < SPINS_BEFORE_YIELD) {
		for (unsigned i = 0; i < POLL_PAUSES; i++)
			cpu_relax();
	} else {
		*spins = 0;
		sched_yield();
	}
}

/* ------------------------------------------------------------ atomic-walk */

/* bench_common.h's page_counter walk, one node per level. */
struct aw_tree {
	struct bench_aw_node node[LEVELS]; /* [0] = root, [DEPTH] = charged group */
};

/* --------------------------------------------------------------- instance */

struct instance {
	enum variant v;
	uint64_t sl_batch;          /* SL_BATCH_NONE or SL_BATCH_DEFAULT */
	sl_tree *slt;
	sl_group *sl_path[LEVELS];  /* [0] = root, [DEPTH] = charged group */
	struct aw_tree *aw;
	bool warned_stocked;
};

static void instance_init(struct instance *in, enum variant v, uint64_t sl_batch)
{
	memset(in, 0, sizeof(*in));
	in->v = v;
	in->sl_batch = sl_batch;

	if (v == V_SOFTLIMIT) {
		in->slt = bench_sl_chain(sl_batch, DEPTH, LEVEL_MAX, in->sl_path);
	} else if (v == V_ATOMIC_WALK) {
		in->aw = aligned_alloc(BENCH_CACHELINE, sizeof(*in->aw));
		if (!in->aw)
			bench_fatal("out of memory");
		bench_aw_init(in->aw->node, LEVELS, LEVEL_MAX);
	}
}

static void instance_free(struct instance *in)
{
	if (in->slt)
		sl_tree_destroy(in->slt);
	free(in->aw);
	memset(in, 0, sizeof(*in));
}

/* Every level's usage must be back to 0 once both threads have finished. */
static void instance_verify(struct instance *in, const char *what)
{
	if (in->v == V_SOFTLIMIT) {
		int rc = sl_tree_check(in->slt);

		if (rc != 0)
			bench_fatal("%s: sl_tree_check() = %d after the run", what, rc);
	}
	for (int i = 0; i <= DEPTH; i++) {
		uint64_t usage = 0;

		if (in->v == V_SOFTLIMIT) {
			struct sl_stats st;
			int rc = sl_group_stats(in->sl_path[i], &st);

			if (rc != 0)
				bench_fatal("%s: sl_group_stats(level %d) = %d", what, i, rc);
			usage = st.usage;
			if (st.stocked != 0 && !in->warned_stocked) {
				bench_progress("\n%s: warning: %s: level %d still has %" PRIu64
					       " units stocked after both threads exited\n", bench.name, what,
					       i, st.stocked);
				in->warned_stocked = true;
			}
		} else if (in->v == V_ATOMIC_WALK) {
			usage = atomic_load(&in->aw->node[i].usage);
		}
		if (usage != 0)
			bench_fatal("%s: usage of level %d is %" PRIu64 " after the run, expected 0", what, i,
			      usage);
	}
}

/* -------------------------------------------------------------------- run */

struct run {
	struct instance *inst;
	enum mode mode;
	uint64_t items;
	struct ring *fwd;  /* producer -> consumer */
	struct ring *back; /* consumer -> producer (round trip only) */
	pthread_barrier_t barrier;
	_Atomic int stop;  /* set by a thread that failed: the other stops waiting */
};

/* Each side on its own cache line: the two threads never write one line. */
struct side {
	_Alignas(BENCH_CACHELINE) pthread_t tid;
	struct run *run;
	uint64_t elapsed_ns;
	uint64_t cpu_ns;
	uint64_t done;     /* items this side finished (written once, at the end) */
	int err;           /* a nonzero return, or -1 for an item out of order */
	const char *err_op;
	uint64_t err_item;
};

static inline int acct_charge(const struct instance *in)
{
	switch (in->v) {
	case V_SOFTLIMIT:
		return sl_charge(in->sl_path[DEPTH], AMOUNT, 0);
	case V_ATOMIC_WALK:
		return bench_aw_charge(&in->aw->node[DEPTH], AMOUNT);
	default:
		return 0;
	}
}

static inline int acct_uncharge(const struct instance *in)
{
	switch (in->v) {
	case V_SOFTLIMIT:
		return sl_uncharge(in->sl_path[DEPTH], AMOUNT);
	case V_ATOMIC_WALK:
		return bench_aw_uncharge(&in->aw->node[DEPTH], AMOUNT);
	default:
		return 0;
	}
}

static void side_fail(struct side *s, const char *op, int err, uint64_t item)
{
	s->err = err;
	s->err_op = op;
	s->err_item = item;
	atomic_store_explicit(&s->run->stop, 1, memory_order_relaxed);
}

static inline bool stopped(struct run *r)
{
	return atomic_load_explicit(&r->stop, memory_order_relaxed) != 0;
}

/* Push v, waiting while the ring is full; false if the other side failed. */
static inline bool push_wait(struct run *r, struct ring *q, uint64_t v)
{
	unsigned spins = 0;

	while (!ring_try_push(q, v)) {
		if (stopped(r))
			return false;
		spin_wait(&spins);
	}
	return true;
}

static inline bool pop_wait(struct run *r, struct ring *q, uint64_t *v)
{
	unsigned spins = 0;

	while (!ring_try_pop(q, v)) {
		if (stopped(r))
			return false;
		spin_wait(&spins);
	}
	return true;
}

/*
 * The loops below return the items they finished and write nothing shared
 * but the rings: a per-item store to a struct side would bounce a line.
 */

/* Handoff producer: charge, push. */
static uint64_t produce_handoff(struct side *s)
{
	struct run *r = s->run;
	const struct instance *in = r->inst;
	uint64_t i;

	for (i = 0; i < r->items; i++) {
		int rc = acct_charge(in);

		if (rc != 0) {
			side_fail(s, "charge", rc, i);
			break;
		}
		if (!push_wait(r, r->fwd, i))
			break;
	}
	return i;
}

/* Handoff consumer: pop, uncharge. */
static uint64_t consume_handoff(struct side *s)
{
	struct run *r = s->run;
	const struct instance *in = r->inst;
	uint64_t i;

	for (i = 0; i < r->items; i++) {
		uint64_t v;
		int rc;

		if (!pop_wait(r, r->fwd, &v))
			break;
		if (v != i) {
			side_fail(s, "pop (item out of order)", -1, v);
			break;
		}
		rc = acct_uncharge(in);
		if (rc != 0) {
			side_fail(s, "uncharge", rc, i);
			break;
		}
	}
	return i;
}

/*
 * Round-trip producer: charge and push into fwd while fwd has room, and
 * uncharge whatever comes back through back, until every item is back.
 * Draining back while fwd is full is what keeps the two threads from
 * waiting on each other's full ring.
 */
static uint64_t produce_roundtrip(struct side *s)
{
	struct run *r = s->run;
	const struct instance *in = r->inst;
	uint64_t sent = 0, recv = 0, v;
	bool charged = false; /* item `sent` is charged, not yet pushed */
	unsigned spins = 0;

	while (recv < r->items) {
		bool progress = false;
		int rc;

		if (sent < r->items) {
			if (!charged) {
				rc = acct_charge(in);
				if (rc != 0) {
					side_fail(s, "charge", rc, sent);
					break;
				}
				charged = true;
			}
			if (ring_try_push(r->fwd, sent)) {
				charged = false;
				sent++;
				progress = true;
			}
		}
		while (ring_try_pop(r->back, &v)) {
			if (v != recv) {
				side_fail(s, "pop (item out of order)", -1, v);
				goto out;
			}
			rc = acct_uncharge(in);
			if (rc != 0) {
				side_fail(s, "uncharge", rc, recv);
				goto out;
			}
			recv++;
			progress = true;
		}
		if (progress) {
			spins = 0;
		} else {
			if (stopped(r))
				break;
			spin_wait(&spins);
		}
	}
out:
	/* A charged item that never went out (only after a failure). */
	if (charged && acct_uncharge(in) != 0 && s->err == 0)
		side_fail(s, "uncharge", -1, sent);
	return recv;
}

/* Round-trip consumer: pop from fwd, push into back. */
static uint64_t consume_roundtrip(struct side *s)
{
	struct run *r = s->run;
	uint64_t i;

	for (i = 0; i < r->items; i++) {
		uint64_t v;

		if (!pop_wait(r, r->fwd, &v))
			break;
		if (v != i) {
			side_fail(s, "pop (item out of order)", -1, v);
			break;
		}
		if (!push_wait(r, r->back, v))
			break;
	}
	return i;
}

/* --pin: the producer runs on the first CPU the process may use, the
 * consumer on the second, so that a run is a handoff between two cores
 * whenever those two are free (unpinned, the scheduler may put both
 * threads on one core when anything else runs). */
static bool pin;
static int pin_cpu[2] = { -1, -1 };

static void pin_pick(void)
{
	cpu_set_t set;
	int n = 0;

	if (!pin)
		return;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		bench_fatal("--pin: sched_getaffinity failed");
	for (int cpu = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
		if (CPU_ISSET(cpu, &set))
			pin_cpu[n++] = cpu;
	if (n < 2)
		bench_fatal("--pin: the process may run on %d CPU, needs 2", n);
}

static void pin_self(int which)
{
	cpu_set_t set;
	int rc;

	if (!pin)
		return;
	CPU_ZERO(&set);
	CPU_SET(pin_cpu[which], &set);
	rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc != 0)
		bench_fatal("--pin: pthread_setaffinity_np = %d", rc);
}

static void *producer_main(void *arg)
{
	struct side *s = arg;
	uint64_t t0, c0;

	pin_self(0);
	pthread_barrier_wait(&s->run->barrier);
	c0 = bench_thread_cpu_ns();
	t0 = bench_now_ns();
	s->done = s->run->mode == M_HANDOFF ? produce_handoff(s) : produce_roundtrip(s);
	s->elapsed_ns = bench_now_ns() - t0;
	s->cpu_ns = bench_thread_cpu_ns() - c0;
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct side *s = arg;
	uint64_t t0, c0;

	pin_self(1);
	pthread_barrier_wait(&s->run->barrier);
	c0 = bench_thread_cpu_ns();
	t0 = bench_now_ns();
	s->done = s->run->mode == M_HANDOFF ? consume_handoff(s) : consume_roundtrip(s);
	s->elapsed_ns = bench_now_ns() - t0;
	s->cpu_ns = bench_thread_cpu_ns() - c0;
	return NULL;
}

struct config {
	enum variant v;
	enum mode mode;
	uint64_t sl_batch; /* SL_BATCH_NONE or SL_BATCH_DEFAULT (softlimit only) */
	uint64_t batch;    /* as reported: 0 for no stock (and for the baselines) */
	struct instance inst;
	uint64_t items;    /* per measured run */
	double ns;         /* median ns per item */
	double runs[MAX_REPS];
	double cpu[MAX_REPS]; /* of each run: CPU time / wall time of the two threads */
	int nruns;
};

static void config_label(const struct config *c, char *buf, size_t size)
{
	if (c->v == V_SOFTLIMIT)
		snprintf(buf, size, "%s %s batch=%" PRIu64, variant_names[c->v], mode_names[c->mode],
			 c->batch);
	else
		snprintf(buf, size, "%s %s", variant_names[c->v], mode_names[c->mode]);
}

/*
 * One run of `items` items; returns ns per item, the wall time and the
 * threads' CPU time over their wall time: about 1 when each thread had a
 * core of its own, about 0.5 when they took turns on one (another process
 * held the other core), and then the figure is not a cross-core handoff.
 */
static double run_once(struct config *c, uint64_t items, uint64_t *wall_ns, double *cpu)
{
	struct ring *rings;
	struct run r;
	struct side prod, cons;
	const struct side *last;
	char what[64];
	int rc;

	rings = aligned_alloc(BENCH_CACHELINE, 2 * sizeof(struct ring));
	if (!rings)
		bench_fatal("out of memory");
	ring_init(&rings[0]);
	ring_init(&rings[1]);
	memset(&r, 0, sizeof(r));
	r.inst = &c->inst;
	r.mode = c->mode;
	r.items = items;
	r.fwd = &rings[0];
	r.back = &rings[1];
	atomic_init(&r.stop, 0);
	rc = pthread_barrier_init(&r.barrier, NULL, 2);
	if (rc != 0)
		bench_fatal("pthread_barrier_init = %d", rc);
	memset(&prod, 0, sizeof(prod));
	memset(&cons, 0, sizeof(cons));
	prod.run = cons.run = &r;
	rc = pthread_create(&cons.tid, NULL, consumer_main, &cons);
	if (rc != 0)
		bench_fatal("pthread_create = %d", rc);
	rc = pthread_create(&prod.tid, NULL, producer_main, &prod);
	if (rc != 0)
		bench_fatal("pthread_create = %d", rc);
	rc = pthread_join(prod.tid, NULL);
	if (rc == 0)
		rc = pthread_join(cons.tid, NULL);
	if (rc != 0)
		bench_fatal("pthread_join = %d", rc);
	pthread_barrier_destroy(&r.barrier);
	free(rings);

	config_label(c, what, sizeof(what));
	if (prod.err != 0)
		bench_fatal("%s: producer: %s returned %d at item %" PRIu64 " of %" PRIu64, what,
		      prod.err_op, prod.err, prod.err_item, items);
	if (cons.err != 0)
		bench_fatal("%s: consumer: %s returned %d at item %" PRIu64 " of %" PRIu64, what,
		      cons.err_op, cons.err, cons.err_item, items);
	/* The thread that finishes the last item. */
	last = c->mode == M_HANDOFF ? &cons : &prod;
	if (last->done != items)
		bench_fatal("%s: %" PRIu64 " of %" PRIu64 " items done", what, last->done, items);
	instance_verify(&c->inst, what);
	if (wall_ns)
		*wall_ns = last->elapsed_ns;
	if (cpu)
		*cpu = (double)(prod.cpu_ns + cons.cpu_ns) /
		       (double)(prod.elapsed_ns + cons.elapsed_ns + 1);
	return (double)last->elapsed_ns / (double)items;
}

/* ----------------------------------------------------------------- driver */

#define N_CONFIGS 8

static struct config configs[N_CONFIGS];
static int n_configs;

static void add_config(enum variant v, enum mode mode, uint64_t sl_batch)
{
	struct config *c;

	if (n_configs >= N_CONFIGS)
		bench_fatal("too many configurations");
	c = &configs[n_configs++];
	memset(c, 0, sizeof(*c));
	c->v = v;
	c->mode = mode;
	c->sl_batch = sl_batch;
	c->batch = (v == V_SOFTLIMIT && sl_batch != SL_BATCH_NONE) ? sl_batch : 0;
}

static void build_configs(void)
{
	for (int m = 0; m < M_COUNT; m++) {
		add_config(V_RING, (enum mode)m, SL_BATCH_NONE);
		add_config(V_SOFTLIMIT, (enum mode)m, SL_BATCH_DEFAULT);
		add_config(V_SOFTLIMIT, (enum mode)m, SL_BATCH_NONE);
		add_config(V_ATOMIC_WALK, (enum mode)m, SL_BATCH_NONE);
	}
}

static const struct config *find(enum variant v, enum mode mode, uint64_t batch)
{
	for (int i = 0; i < n_configs; i++) {
		const struct config *c = &configs[i];

		if (c->v == v && c->mode == mode && c->batch == batch && c->nruns > 0)
			return c;
	}
	return NULL;
}

/* Items for a run of about target_ns at ns_per_item. */
static uint64_t items_for(uint64_t target_ns, double ns_per_item)
{
	return bench_ops_for(target_ns, ns_per_item, MIN_ITEMS, MAX_ITEMS);
}

/* Calibrate (and warm up): grow the item count until a run takes calib_ns. */
static void calibrate(struct config *c, int idx, uint64_t target_ns)
{
	uint64_t calib_ns = target_ns / 10, n = MIN_ITEMS, wall = 0;
	double ns;
	char what[64];

	config_label(c, what, sizeof(what));
	bench_progress("[%d/%d] calibrating %-32s ...", idx + 1, n_configs, what);
	for (;;) {
		ns = run_once(c, n, &wall, NULL);
		if (wall >= calib_ns || n >= MAX_ITEMS / 4)
			break;
		n *= 4;
	}
	c->items = items_for(target_ns, ns);
	bench_progress(" %8.2f ns/item -> %" PRIu64 " items per run\n", ns, c->items);
}

static void measure(struct config *c, int rep, uint64_t target_ns)
{
	uint64_t wall = 0;

	c->runs[rep] = run_once(c, c->items, &wall, &c->cpu[rep]);
	c->nruns = rep + 1;
	/* A rate can jump on a VM (vCPU placement, a neighbour): resize the
	 * next run if this one missed the target by more than 2x. */
	if (wall > 2 * target_ns || wall < target_ns / 2)
		c->items = items_for(target_ns, c->runs[rep]);
}

static double cpu_min(const struct config *c)
{
	double m = 1.0;

	for (int k = 0; k < c->nruns; k++)
		if (c->cpu[k] < m)
			m = c->cpu[k];
	return m;
}

static void report(struct config *c)
{
	char runs[MAX_REPS * 24 + 8], cpu[MAX_REPS * 24 + 8];

	c->ns = bench_median(c->runs, c->nruns);
	bench_json_array(runs, sizeof(runs), c->runs, c->nruns, 2);
	bench_json_array(cpu, sizeof(cpu), c->cpu, c->nruns, 2);
	bench_json("{\"bench\":\"handoff\",\"variant\":\"%s\",\"mode\":\"%s\",\"batch\":%" PRIu64
		   ",\"depth\":%d,\"threads\":2,\"amount\":%" PRIu64 ",\"ring\":%u,\"ns_per_item\":%.2f"
		   ",\"cpu_min\":%.2f,\"pinned\":%s,\"runs\":%s,\"cpu\":%s}",
		   variant_names[c->v], mode_names[c->mode], c->batch, DEPTH, AMOUNT, RING_SIZE, c->ns,
		   cpu_min(c), pin ? "true" : "false", runs, cpu);
}

static void print_table(int reps)
{
	struct row {
		enum variant v;
		uint64_t batch;
	} rows[] = {
		{V_RING, 0}, {V_SOFTLIMIT, SL_BATCH_DEFAULT}, {V_SOFTLIMIT, 0}, {V_ATOMIC_WALK, 0},
	};

	fprintf(stderr, "\nns per item (median of %d; %" PRIu64 " units per item; depth %d; "
		"2 threads; ring of %u)\n", reps, AMOUNT, DEPTH, RING_SIZE);
	fprintf(stderr, "%-12s %6s  %10s  %10s  %7s   %s\n", "variant", "batch", "handoff",
		"round-trip", "cpu min", "runs (handoff | round-trip; * = cores shared)");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct config *h = find(rows[i].v, M_HANDOFF, rows[i].batch);
		const struct config *t = find(rows[i].v, M_ROUNDTRIP, rows[i].batch);

		if (rows[i].v == V_SOFTLIMIT)
			fprintf(stderr, "%-12s %6" PRIu64, variant_names[rows[i].v], rows[i].batch);
		else
			fprintf(stderr, "%-12s %6s", variant_names[rows[i].v], "-");
		fprintf(stderr, "  %10.2f  %10.2f  %7.2f  ", h ? h->ns : 0.0, t ? t->ns : 0.0,
			h && t ? (cpu_min(h) < cpu_min(t) ? cpu_min(h) : cpu_min(t)) : 0.0);
		for (int k = 0; h && k < h->nruns; k++)
			fprintf(stderr, " %.1f%s", h->runs[k], h->cpu[k] < CPU_OWN ? "*" : "");
		fprintf(stderr, " |");
		for (int k = 0; t && k < t->nruns; k++)
			fprintf(stderr, " %.1f%s", t->runs[k], t->cpu[k] < CPU_OWN ? "*" : "");
		fputc('\n', stderr);
	}
	fputc('\n', stderr);
}

struct ratio {
	const char *name;
	const char *label;
	const struct config *num, *den;
};

static void print_ratios(void)
{
	const uint64_t B = SL_BATCH_DEFAULT;
	const struct config *ring_h = find(V_RING, M_HANDOFF, 0);
	const struct config *ring_t = find(V_RING, M_ROUNDTRIP, 0);
	struct ratio ratios[] = {
		{"softlimit_handoff_over_ring", "softlimit handoff (default batch) / ring handoff",
		 find(V_SOFTLIMIT, M_HANDOFF, B), ring_h},
		{"softlimit_handoff_over_atomic_walk_handoff",
		 "softlimit handoff (default batch) / atomic-walk handoff",
		 find(V_SOFTLIMIT, M_HANDOFF, B), find(V_ATOMIC_WALK, M_HANDOFF, 0)},
		{"softlimit_roundtrip_over_ring_roundtrip",
		 "softlimit round trip (default batch) / ring round trip",
		 find(V_SOFTLIMIT, M_ROUNDTRIP, B), ring_t},
		{"softlimit_batch0_handoff_over_atomic_walk_handoff",
		 "softlimit handoff (batch 0: no stocks) / atomic-walk handoff",
		 find(V_SOFTLIMIT, M_HANDOFF, 0), find(V_ATOMIC_WALK, M_HANDOFF, 0)},
	};

	for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
		const struct ratio *r = &ratios[i];
		double value;

		if (!r->num || !r->den || r->den->ns <= 0)
			continue;
		value = r->num->ns / r->den->ns;
		bench_json("{\"bench\":\"handoff_ratio\",\"name\":\"%s\",\"value\":%.2f}", r->name, value);
		bench_progress("%-62s = %6.2f\n", r->label, value);
	}

	/* What the accounting adds to the ring's own cost, per item. */
	if (!bench.json_only && ring_h && ring_t) {
		fprintf(stderr, "\naccounting cost over the ring, ns per item:\n");
		for (int i = 0; i < n_configs; i++) {
			const struct config *c = &configs[i];
			const struct config *base = c->mode == M_HANDOFF ? ring_h : ring_t;
			char what[64];

			if (c->v == V_RING || c->nruns == 0)
				continue;
			config_label(c, what, sizeof(what));
			fprintf(stderr, "  %-34s %+8.2f\n", what, c->ns - base->ns);
		}
	}
}

/*
 * A run in which the two threads did not each have a core (CPU time well
 * under wall time) measured two threads taking turns on one core: a ring
 * then passes items in bursts with no cache line crossing cores, which is
 * far cheaper than a real handoff.  A configuration whose runs spread by
 * more than 25% was measured on a busy machine for part of the time.  Say so.
 */
static void check_spread(void)
{
	bool noted = false;
	int shared = 0, total = 0;

	for (int i = 0; i < n_configs; i++)
		for (int k = 0; k < configs[i].nruns; k++) {
			total++;
			shared += configs[i].cpu[k] < CPU_OWN;
		}
	if (shared) {
		fprintf(stderr, "\nnote: in %d of %d runs (marked *) the two threads did not have a core "
			"each for more than %.0f%% of the time: another process was running, and those "
			"runs measure threads taking turns on one core, not a handoff between cores; "
			"rerun on a quiet machine\n", shared, total, 100.0 * (1.0 - CPU_OWN));
		noted = true;
	}

	for (int i = 0; i < n_configs; i++) {
		const struct config *c = &configs[i];
		double lo = 0, hi = 0;
		char what[64];

		for (int k = 0; k < c->nruns; k++) {
			if (lo == 0 || c->runs[k] < lo)
				lo = c->runs[k];
			if (c->runs[k] > hi)
				hi = c->runs[k];
		}
		if (lo <= 0 || hi <= 1.25 * lo)
			continue;
		if (!noted)
			fputc('\n', stderr);
		noted = true;
		config_label(c, what, sizeof(what));
		fprintf(stderr, "note: %s ranged %.2f..%.2f ns/item across runs: the machine was busy "
			"for part of the run; rerun on a quiet machine before trusting its ratios\n",
			what, lo, hi);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_handoff [--quick] [--pin] [--json-only] [--help]\n"
		"\n"
		"Measures ns per item (%" PRIu64 " units) passed from a producer thread to a consumer\n"
		"thread through a lock-free SPSC ring of %u slots, with the group at depth %d:\n"
		"  handoff     producer charges and pushes, consumer pops and uncharges;\n"
		"  round trip  consumer hands the item back through a second ring and the\n"
		"              producer uncharges it (charge and uncharge on the same thread);\n"
		"for: ring (no accounting), softlimit with batch %" PRIu64 " (SL_BATCH_DEFAULT)\n"
		"and 0 (SL_BATCH_NONE: no stocks), and atomic-walk (one atomic per level).\n"
		"\n"
		"  --quick      ~0.2 s per run, 3 runs per configuration (whole run < 15 s)\n"
		"               (default: ~1 s per run, 5 runs)\n"
		"  --pin        producer on the first CPU the process may use, consumer on the\n"
		"               second: a handoff between two cores whenever those are free\n"
		"  --json-only  only the JSON lines on stdout: no progress, table or ratios on stderr\n"
		"  --help       this text\n"
		"\n"
		"stdout: one JSON object per line, e.g.\n"
		"  {\"bench\":\"handoff\",\"variant\":\"softlimit\",\"mode\":\"handoff\",\"batch\":32768,"
		"\"depth\":4,\"threads\":2,\"amount\":64,\"ring\":1024,\"ns_per_item\":40.12,\"cpu_min\":0.99,\n"
		"   \"pinned\":false,\"runs\":[40.12,...],\"cpu\":[0.99,...]}   (on one line; runs and cpu of each run)\n"
		"  {\"bench\":\"handoff_ratio\",\"name\":\"softlimit_handoff_over_ring\",\"value\":2.10}\n"
		"Exit status: 0 done, 1 a run failed (a charge or uncharge returned nonzero,\n"
		"an item arrived out of order, or usage was not back to 0), 2 bad arguments.\n"
		"cpu: the two threads' CPU time / wall time in each run, cpu_min the lowest;\n"
		"under 0.9 the threads shared a core for part of a run (the machine was busy).\n",
		AMOUNT, RING_SIZE, DEPTH, SL_BATCH_DEFAULT);
}

static int own_flag(const char *arg)
{
	if (strcmp(arg, "--pin") != 0)
		return 0;
	pin = true;
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t t_start;

	bench_parse_args(argc, argv, "bench_handoff", usage, own_flag);
	pin_pick();
	build_configs();

	t_start = bench_start(" per configuration, %d configurations, runs interleaved", n_configs);
	for (int i = 0; i < n_configs; i++)
		instance_init(&configs[i].inst, configs[i].v, configs[i].sl_batch);
	for (int i = 0; i < n_configs; i++)
		calibrate(&configs[i], i, bench.target_ns);
	for (int r = 0; r < bench.reps; r++) {
		bench_progress("run %d/%d (ns/item, configurations in the order above):", r + 1,
			       bench.reps);
		for (int i = 0; i < n_configs; i++) {
			measure(&configs[i], r, bench.target_ns);
			bench_progress(" %.2f%s", configs[i].runs[r],
				       configs[i].cpu[r] < CPU_OWN ? "*" : "");
		}
		bench_progress("\n");
	}
	for (int i = 0; i < n_configs; i++) {
		report(&configs[i]);
		instance_free(&configs[i].inst);
	}

	if (!bench.json_only)
		print_table(bench.reps);
	print_ratios();
	if (!bench.json_only)
		check_spread();
	bench_finish(t_start, false);
	return 0;
}
