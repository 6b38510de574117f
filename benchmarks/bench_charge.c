/* SPDX-License-Identifier: MIT */
/*
 * bench_charge: the cost of one sl_charge() + sl_uncharge() pair.
 *
 * One "op" is a pair: charge AMOUNT units to a group, then uncharge them.
 * The charged group sits `depth` levels below the root (root -> g1 -> ... ->
 * gdepth), so a charge concerns depth + 1 counters.  Every level has a max
 * far above anything the benchmark charges, so no charge ever fails.
 *
 * Variants, all measured by the same harness:
 *   softlimit    the library, with batch SL_BATCH_NONE (reported as batch 0:
 *                no stock, exact, one atomic per level) and SL_BATCH_DEFAULT;
 *   floor        a thread-local counter with a limit check, called through a
 *                function pointer: the physical limit of a charge call;
 *   mutex-tree   one pthread mutex around a walk of a parent-pointer tree of
 *                the same depth (check max at each level, then add);
 *   atomic-walk  one atomic add per level with rollback, as the kernel's
 *                page_counter does; each level's counter on its own line.
 *
 * With 2 threads both threads charge THE SAME group.
 *
 * Method: for each configuration, a calibration run (time-bounded) measures
 * the rate; then each repetition spawns the threads, starts them at a
 * barrier, and each thread runs a fixed number of pairs sized to take about
 * the target time.  ns_per_op = a thread's wall time / its pairs, averaged
 * over the threads; the median over the repetitions is reported.  After
 * every run the usage of every level must be back to 0, or the benchmark
 * stops with exit status 1.
 *
 * --lease-down (built with the lease library's etcd store): softlimit with
 * the default batch at depth 4, 1 and 2 threads, three ways in one run: no
 * lease, and a lease whose etcd store refuses or hangs (charge_lease.h).
 * A charge never touches a store, so the three should match.
 *
 * Output: one JSON object per line on stdout; progress, a table and the
 * goal ratios on stderr (unless --json-only).
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <pthread.h>

#include <softlimit/softlimit.h>

#include "bench_common.h"
#ifdef BENCH_HAVE_LEASE
#include "charge_lease.h"
#else
enum lease_mode { LEASE_NONE, LEASE_MODES = 1 };
static const char *const lease_mode_names[LEASE_MODES] = { "none" };
#endif

static bool lease_down; /* --lease-down */

#define AMOUNT ((uint64_t)64)            /* units per charge */
#define LEVEL_MAX ((uint64_t)1 << 40)    /* max of every level: never reached */
#define CHUNK 1024u                      /* pairs between clock reads when time-bounded */
#define MAX_THREADS 2
#define MAX_DEPTH 8
#define MAX_LEVELS (MAX_DEPTH + 1)       /* root + MAX_DEPTH groups */
#define MAX_REPS 5

enum variant { V_SOFTLIMIT, V_FLOOR, V_MUTEX_TREE, V_ATOMIC_WALK, V_COUNT };

static const char *const variant_names[V_COUNT] = {
	[V_SOFTLIMIT] = "softlimit",
	[V_FLOOR] = "floor",
	[V_MUTEX_TREE] = "mutex-tree",
	[V_ATOMIC_WALK] = "atomic-walk",
};

static const int depth_list[] = {1, 4, 8};
static const int thread_list[] = {1, 2};
#define N_DEPTHS ((int)(sizeof(depth_list) / sizeof(depth_list[0])))
#define N_THREADS ((int)(sizeof(thread_list) / sizeof(thread_list[0])))

/* -------------------------------------------------------------- baselines */

typedef int (*charge_fn)(void *g, uint64_t amount, unsigned flags);
typedef int (*uncharge_fn)(void *g, uint64_t amount);

/* floor: a thread-local counter with a limit check. */
static _Thread_local uint64_t floor_usage;
static uint64_t floor_max = LEVEL_MAX;

static BENCH_NOINLINE int floor_charge(void *g, uint64_t amount, unsigned flags)
{
	(void)g;
	(void)flags;
	if (amount > floor_max - floor_usage)
		return -ENOMEM;
	floor_usage += amount;
	return 0;
}

static BENCH_NOINLINE int floor_uncharge(void *g, uint64_t amount)
{
	(void)g;
	if (amount > floor_usage) {
		floor_usage = 0;
		return -EINVAL;
	}
	floor_usage -= amount;
	return 0;
}

/* mutex-tree: one mutex around a plain walk of a parent-pointer tree. */
struct mt_tree;
struct mt_node {
	struct mt_node *parent;
	struct mt_tree *tree;
	uint64_t usage;
	uint64_t max;
};
struct mt_tree {
	pthread_mutex_t lock;
	struct mt_node node[MAX_LEVELS]; /* [0] = root, [depth] = charged group */
};

static BENCH_NOINLINE int mt_charge(void *g, uint64_t amount, unsigned flags)
{
	struct mt_node *leaf = g, *n;
	pthread_mutex_t *lock = &leaf->tree->lock;

	(void)flags;
	pthread_mutex_lock(lock);
	for (n = leaf; n; n = n->parent) {
		if (amount > n->max || n->usage > n->max - amount) {
			pthread_mutex_unlock(lock);
			return -ENOMEM;
		}
	}
	for (n = leaf; n; n = n->parent)
		n->usage += amount;
	pthread_mutex_unlock(lock);
	return 0;
}

static BENCH_NOINLINE int mt_uncharge(void *g, uint64_t amount)
{
	struct mt_node *leaf = g, *n;
	pthread_mutex_t *lock = &leaf->tree->lock;
	int rc = 0;

	pthread_mutex_lock(lock);
	if (amount > leaf->usage)
		rc = -EINVAL; /* caller bug: still subtract what is there, clamped */
	for (n = leaf; n; n = n->parent)
		n->usage -= amount > n->usage ? n->usage : amount;
	pthread_mutex_unlock(lock);
	return rc;
}

/* atomic-walk: bench_common.h's, behind the signature of the pointers below. */
struct aw_tree {
	struct bench_aw_node node[MAX_LEVELS]; /* [0] = root, [depth] = charged group */
};

static int aw_charge(void *g, uint64_t amount, unsigned flags)
{
	(void)flags;
	return bench_aw_charge(g, amount);
}

static int aw_uncharge(void *g, uint64_t amount)
{
	return bench_aw_uncharge(g, amount);
}

/* Read through volatile pointers so that nothing can be folded or inlined. */
static charge_fn volatile fp_charge[V_COUNT] = {
	[V_FLOOR] = floor_charge,
	[V_MUTEX_TREE] = mt_charge,
	[V_ATOMIC_WALK] = aw_charge,
};
static uncharge_fn volatile fp_uncharge[V_COUNT] = {
	[V_FLOOR] = floor_uncharge,
	[V_MUTEX_TREE] = mt_uncharge,
	[V_ATOMIC_WALK] = aw_uncharge,
};

/* --------------------------------------------------------------- instance */

struct instance {
	enum variant v;
	int depth;
	uint64_t sl_batch;               /* SL_BATCH_NONE or SL_BATCH_DEFAULT */
	sl_tree *slt;
	sl_group *sl_path[MAX_LEVELS];   /* [0] = root, [depth] = charged group */
	struct mt_tree *mt;
	struct aw_tree *aw;
	void *leaf;                      /* what the baselines charge */
	bool warned_stocked;
	enum lease_mode lease;
#ifdef BENCH_HAVE_LEASE
	struct lease_down ld;
#endif
};

static void instance_init(struct instance *in, enum variant v, int depth, uint64_t sl_batch,
			  enum lease_mode lease)
{
	memset(in, 0, sizeof(*in));
	in->v = v;
	in->depth = depth;
	in->sl_batch = sl_batch;
	in->lease = lease;

	switch (v) {
	case V_SOFTLIMIT:
		in->slt = bench_sl_chain(sl_batch, depth, LEVEL_MAX, in->sl_path);
		in->leaf = in->sl_path[depth];
#ifdef BENCH_HAVE_LEASE
		if (lease != LEASE_NONE)
			lease_down_start(&in->ld, lease, in->leaf, LEVEL_MAX);
#endif
		break;
	case V_FLOOR:
		in->leaf = NULL;
		break;
	case V_MUTEX_TREE: {
		int rc;

		in->mt = calloc(1, sizeof(*in->mt));
		if (!in->mt)
			bench_fatal("out of memory");
		rc = pthread_mutex_init(&in->mt->lock, NULL);
		if (rc != 0)
			bench_fatal("pthread_mutex_init = %d", rc);
		for (int i = 0; i <= depth; i++) {
			in->mt->node[i].parent = i ? &in->mt->node[i - 1] : NULL;
			in->mt->node[i].tree = in->mt;
			in->mt->node[i].max = LEVEL_MAX;
		}
		in->leaf = &in->mt->node[depth];
		break;
	}
	case V_ATOMIC_WALK:
		in->aw = aligned_alloc(BENCH_CACHELINE, sizeof(*in->aw));
		if (!in->aw)
			bench_fatal("out of memory");
		in->leaf = bench_aw_init(in->aw->node, depth + 1, LEVEL_MAX);
		break;
	case V_COUNT:
		break;
	}
}

static void instance_free(struct instance *in)
{
#ifdef BENCH_HAVE_LEASE
	if (in->lease != LEASE_NONE)
		lease_down_stop(&in->ld);
#endif
	if (in->slt)
		sl_tree_destroy(in->slt);
	if (in->mt) {
		pthread_mutex_destroy(&in->mt->lock);
		free(in->mt);
	}
	free(in->aw);
	memset(in, 0, sizeof(*in));
}

/* Every level's usage must be back to 0 once all threads have finished. */
static void instance_verify(struct instance *in)
{
	for (int i = 0; i <= in->depth; i++) {
		uint64_t usage = 0;

		switch (in->v) {
		case V_SOFTLIMIT: {
			struct sl_stats st;
			int rc = sl_group_stats(in->sl_path[i], &st);

			if (rc != 0)
				bench_fatal("sl_group_stats(level %d) = %d", i, rc);
			usage = st.usage;
			if (st.stocked != 0 && !in->warned_stocked) {
				bench_progress("\n%s: warning: level %d still has %" PRIu64
					       " units stocked after all threads exited\n", bench.name, i,
					       st.stocked);
				in->warned_stocked = true;
			}
			break;
		}
		case V_MUTEX_TREE:
			usage = in->mt->node[i].usage;
			break;
		case V_ATOMIC_WALK:
			usage = atomic_load(&in->aw->node[i].usage);
			break;
		case V_FLOOR:
		case V_COUNT:
			break;
		}
		if (usage != 0)
			bench_fatal("%s depth=%d: usage of level %d is %" PRIu64 " after the run, expected 0",
			      variant_names[in->v], in->depth, i, usage);
	}
}

/* -------------------------------------------------------------------- run */

struct run {
	struct instance *inst;
	pthread_barrier_t barrier;
	uint64_t duration_ns; /* time-bounded runs (calibration) */
};

struct worker {
	pthread_t tid;
	struct run *run;
	uint64_t pairs;      /* in: fixed count, 0 = time-bounded; out: pairs done */
	uint64_t elapsed_ns;
	int err;
	const char *err_op;
	uint64_t floor_residual;
};

static int loop_softlimit(sl_group *g, uint64_t n, const char **op)
{
	for (uint64_t i = 0; i < n; i++) {
		int rc = sl_charge(g, AMOUNT, 0);

		if (rc != 0) {
			*op = "sl_charge";
			return rc;
		}
		rc = sl_uncharge(g, AMOUNT);
		if (rc != 0) {
			*op = "sl_uncharge";
			return rc;
		}
	}
	return 0;
}

static int loop_fp(charge_fn charge, uncharge_fn uncharge, void *g, uint64_t n, const char **op)
{
	for (uint64_t i = 0; i < n; i++) {
		int rc = charge(g, AMOUNT, 0);

		if (rc != 0) {
			*op = "charge";
			return rc;
		}
		rc = uncharge(g, AMOUNT);
		if (rc != 0) {
			*op = "uncharge";
			return rc;
		}
	}
	return 0;
}

static int do_pairs(struct instance *in, uint64_t n, const char **op)
{
	if (in->v == V_SOFTLIMIT)
		return loop_softlimit(in->leaf, n, op);
	return loop_fp(fp_charge[in->v], fp_uncharge[in->v], in->leaf, n, op);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->run;
	uint64_t t0, done = 0;
	int rc = 0;

	floor_usage = 0;
	pthread_barrier_wait(&r->barrier);
	t0 = bench_now_ns();
	if (w->pairs) {
		rc = do_pairs(r->inst, w->pairs, &w->err_op);
		done = w->pairs;
	} else {
		do {
			rc = do_pairs(r->inst, CHUNK, &w->err_op);
			if (rc != 0)
				break;
			done += CHUNK;
		} while (bench_now_ns() - t0 < r->duration_ns);
	}
	w->elapsed_ns = bench_now_ns() - t0;
	w->pairs = done;
	w->err = rc;
	w->floor_residual = floor_usage;
	return NULL;
}

/* One run: returns the mean over threads of (wall time / pairs), in ns. */
static double run_once(struct instance *in, int threads, uint64_t pairs, uint64_t duration_ns,
		       uint64_t *wall_ns)
{
	struct run r = {.inst = in, .duration_ns = duration_ns};
	struct worker w[MAX_THREADS];
	double sum = 0;
	int rc;

	rc = pthread_barrier_init(&r.barrier, NULL, (unsigned)threads);
	if (rc != 0)
		bench_fatal("pthread_barrier_init = %d", rc);
	for (int i = 0; i < threads; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].run = &r;
		w[i].pairs = pairs;
		rc = pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
		if (rc != 0)
			bench_fatal("pthread_create = %d", rc);
	}
	for (int i = 0; i < threads; i++) {
		rc = pthread_join(w[i].tid, NULL);
		if (rc != 0)
			bench_fatal("pthread_join = %d", rc);
	}
	pthread_barrier_destroy(&r.barrier);

	for (int i = 0; i < threads; i++) {
		if (w[i].err != 0)
			bench_fatal("%s depth=%d threads=%d: %s(%" PRIu64 ") returned %d",
			      variant_names[in->v], in->depth, threads, w[i].err_op, AMOUNT, w[i].err);
		if (in->v == V_FLOOR && w[i].floor_residual != 0)
			bench_fatal("floor: thread %d ended with usage %" PRIu64 ", expected 0", i,
			      w[i].floor_residual);
		if (w[i].pairs == 0)
			bench_fatal("%s: a thread did no work", variant_names[in->v]);
		sum += (double)w[i].elapsed_ns / (double)w[i].pairs;
		if (wall_ns && w[i].elapsed_ns > *wall_ns)
			*wall_ns = w[i].elapsed_ns;
	}
	instance_verify(in);
	return sum / threads;
}

/* ----------------------------------------------------------------- driver */

struct config {
	enum variant v;
	int threads;
	int depth;
	uint64_t sl_batch;   /* SL_BATCH_NONE or SL_BATCH_DEFAULT (softlimit only) */
	uint64_t batch;      /* as reported: 0 for no stock (and for the baselines) */
	enum lease_mode lease; /* --lease-down: the charged group's lease and its store */
	double ns;           /* median ns per pair */
	double runs[MAX_REPS];
	int nruns;
};

#define MAX_CONFIGS 64

static struct config configs[MAX_CONFIGS];
static int n_configs;

static void add_config_lease(enum variant v, int threads, int depth, uint64_t sl_batch,
			     enum lease_mode lease)
{
	struct config *c;

	if (n_configs >= MAX_CONFIGS)
		bench_fatal("too many configurations");
	c = &configs[n_configs++];
	memset(c, 0, sizeof(*c));
	c->v = v;
	c->threads = threads;
	c->depth = depth;
	c->sl_batch = sl_batch;
	c->batch = (v == V_SOFTLIMIT && sl_batch != SL_BATCH_NONE) ? sl_batch : 0;
	c->lease = lease;
}

static void add_config(enum variant v, int threads, int depth, uint64_t sl_batch)
{
	add_config_lease(v, threads, depth, sl_batch, LEASE_NONE);
}

/*
 * Configurations that a goal ratio compares run next to each other (same
 * depth and thread count back to back), so that drift in the machine (a
 * noisy neighbour, vCPU placement) touches them alike.
 */
static void build_configs(void)
{
	if (lease_down) {
		/* The three ways back to back, per thread count. */
		for (int t = 0; t < N_THREADS; t++)
			for (int m = 0; m < LEASE_MODES; m++)
				add_config_lease(V_SOFTLIMIT, thread_list[t], 4, SL_BATCH_DEFAULT,
						 (enum lease_mode)m);
		return;
	}
	for (int d = 0; d < N_DEPTHS; d++)
		for (int t = 0; t < N_THREADS; t++) {
			add_config(V_SOFTLIMIT, thread_list[t], depth_list[d], SL_BATCH_NONE);
			add_config(V_SOFTLIMIT, thread_list[t], depth_list[d], SL_BATCH_DEFAULT);
			for (int v = V_FLOOR; v < V_COUNT; v++)
				add_config((enum variant)v, thread_list[t], depth_list[d], SL_BATCH_NONE);
		}
}

static const struct config *find(enum variant v, int threads, int depth, uint64_t batch)
{
	for (int i = 0; i < n_configs; i++) {
		const struct config *c = &configs[i];

		if (c->v == v && c->threads == threads && c->depth == depth && c->batch == batch &&
		    c->lease == LEASE_NONE && c->nruns > 0)
			return c;
	}
	return NULL;
}

/* Pairs per thread for a run of about target_ns at ns_per_op. */
static uint64_t pairs_for(uint64_t target_ns, double ns_per_op)
{
	return bench_ops_for(target_ns, ns_per_op, CHUNK, UINT64_MAX);
}

static void run_config(struct config *c, int idx, int reps, uint64_t target_ns)
{
	struct instance in;
	uint64_t calib_ns = target_ns / 10, pairs, first_pairs;
	double calib, runs[MAX_REPS];

	bench_progress("[%2d/%d] %s threads=%d depth=%d batch=%" PRIu64 "%s%s ...", idx + 1, n_configs,
		       variant_names[c->v], c->threads, c->depth, c->batch,
		       lease_down ? " lease store=" : "", lease_down ? lease_mode_names[c->lease] : "");

	instance_init(&in, c->v, c->depth, c->sl_batch, c->lease);

	/* Calibrate (and warm up): a time-bounded run sizes the fixed runs. */
	calib = run_once(&in, c->threads, 0, calib_ns, NULL);
	pairs = pairs_for(target_ns, calib);
	first_pairs = pairs;

	for (int r = 0; r < reps; r++) {
		uint64_t wall = 0;

		runs[r] = run_once(&in, c->threads, pairs, 0, &wall);
		c->runs[r] = runs[r];
		/*
		 * Contended rates can jump by 10x on a VM (vCPU placement), so a
		 * calibration can be far off: resize the next run if this one
		 * missed the target by more than 2x, to keep the whole run bounded.
		 */
		if (wall > 2 * target_ns || wall < target_ns / 2)
			pairs = pairs_for(target_ns, runs[r]);
	}
	c->nruns = reps;
	c->ns = bench_median(runs, reps);

	instance_free(&in);

	if (lease_down)
		bench_json("{\"bench\":\"charge_lease\",\"store\":\"%s\",\"threads\":%d,\"depth\":%d,"
			   "\"batch\":%" PRIu64 ",\"ns_per_op\":%.2f}",
			   lease_mode_names[c->lease], c->threads, c->depth, c->batch, c->ns);
	else
		bench_json("{\"bench\":\"charge\",\"variant\":\"%s\",\"threads\":%d,\"depth\":%d,"
			   "\"batch\":%" PRIu64 ",\"ns_per_op\":%.2f}",
			   variant_names[c->v], c->threads, c->depth, c->batch, c->ns);

	bench_progress(" %8.2f ns/op  (%" PRIu64 " pairs/thread; runs:", c->ns, first_pairs);
	for (int r = 0; r < reps; r++)
		bench_progress(" %.2f", c->runs[r]);
	bench_progress(")\n");
}

static void print_table(void)
{
	struct row {
		enum variant v;
		uint64_t batch;
	} rows[] = {
		{V_SOFTLIMIT, 0}, {V_SOFTLIMIT, SL_BATCH_DEFAULT}, {V_FLOOR, 0},
		{V_MUTEX_TREE, 0}, {V_ATOMIC_WALK, 0},
	};

	fprintf(stderr, "\nns per charge+uncharge pair (median; amount %" PRIu64
		"; 2 threads charge the same group)\n", AMOUNT);
	fprintf(stderr, "%-12s %6s", "variant", "batch");
	for (int t = 0; t < N_THREADS; t++)
		for (int d = 0; d < N_DEPTHS; d++)
			fprintf(stderr, "  %4s%d/d%d", "t", thread_list[t], depth_list[d]);
	fputc('\n', stderr);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		fprintf(stderr, "%-12s %6" PRIu64, variant_names[rows[i].v], rows[i].batch);
		for (int t = 0; t < N_THREADS; t++)
			for (int d = 0; d < N_DEPTHS; d++) {
				const struct config *c =
					find(rows[i].v, thread_list[t], depth_list[d], rows[i].batch);

				if (c)
					fprintf(stderr, "  %8.2f", c->ns);
				else
					fprintf(stderr, "  %8s", "-");
			}
		fputc('\n', stderr);
	}
	fputc('\n', stderr);
}

struct ratio {
	const char *name;
	const char *label;
	const struct config *num, *den;
	bool at_most;    /* goal: value <= bound, else value >= bound */
	double bound;
};

static void print_ratios(void)
{
	const uint64_t B = SL_BATCH_DEFAULT;
	struct ratio ratios[] = {
		{"softlimit_over_floor_d4_t1", "softlimit(default batch, d4, 1 thr) / floor(d4, 1 thr)",
		 find(V_SOFTLIMIT, 1, 4, B), find(V_FLOOR, 1, 4, 0), true, 2.0},
		{"softlimit_t2_over_t1_d4", "softlimit(default batch, d4, 2 thr) / softlimit(default batch, d4, 1 thr)",
		 find(V_SOFTLIMIT, 2, 4, B), find(V_SOFTLIMIT, 1, 4, B), true, 1.3},
		{"mutex_tree_over_softlimit_d4_t2", "mutex-tree(d4, 2 thr) / softlimit(default batch, d4, 2 thr)",
		 find(V_MUTEX_TREE, 2, 4, 0), find(V_SOFTLIMIT, 2, 4, B), false, 10.0},
		{"atomic_walk_over_softlimit_d4_t2", "atomic-walk(d4, 2 thr) / softlimit(default batch, d4, 2 thr)",
		 find(V_ATOMIC_WALK, 2, 4, 0), find(V_SOFTLIMIT, 2, 4, B), false, 5.0},
	};

	for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
		const struct ratio *r = &ratios[i];
		double value;
		bool met;
		char goal[32];

		if (!r->num || !r->den || r->den->ns <= 0)
			continue;
		value = r->num->ns / r->den->ns;
		met = r->at_most ? value <= r->bound : value >= r->bound;
		snprintf(goal, sizeof(goal), "%s %g", r->at_most ? "<=" : ">=", r->bound);
		bench_json("{\"bench\":\"charge_ratio\",\"name\":\"%s\",\"value\":%.2f,\"goal\":\"%s\","
			   "\"met\":%s}",
			   r->name, value, goal, met ? "true" : "false");
		bench_progress("%-78s = %6.2f  goal %-6s %s\n", r->label, value, goal,
			       met ? "met" : "NOT MET");
	}
}

/* --lease-down: each way against no lease, per thread count. */
static void print_lease_table(void)
{
	bench_progress("\nns per charge+uncharge pair, softlimit, default batch, depth 4: the charged\n"
		       "group with no lease, and with a lease whose etcd store is down\n");
	bench_progress("%-8s %10s %10s %10s %14s %14s\n", "threads", "none", "refuse", "hang", "refuse/none",
		       "hang/none");
	for (int t = 0; t < N_THREADS; t++) {
		double ns[LEASE_MODES] = { 0 };

		for (int i = 0; i < n_configs; i++)
			if (configs[i].threads == thread_list[t] && configs[i].nruns > 0)
				ns[configs[i].lease] = configs[i].ns;
		bench_progress("%-8d", thread_list[t]);
		for (int m = 0; m < LEASE_MODES; m++)
			bench_progress(" %10.2f", ns[m]);
		for (int m = 1; m < LEASE_MODES; m++) {
			double r = ns[0] > 0 ? ns[m] / ns[0] : 0;

			bench_progress(" %14.2f", r);
			bench_json("{\"bench\":\"charge_lease_ratio\",\"store\":\"%s\",\"threads\":%d,"
				   "\"value\":%.2f}", lease_mode_names[m], thread_list[t], r);
		}
		bench_progress("\n");
	}
}

/*
 * floor does the same work in every configuration: if its figure moved, the
 * machine was busy during part of the run (with 2 threads on 2 cores, any
 * other runnable task preempts a benchmark thread), and ratios that compare
 * configurations measured at different moments are suspect.
 */
static void check_floor_drift(void)
{
	double lo = 0, hi = 0;

	for (int i = 0; i < n_configs; i++) {
		const struct config *c = &configs[i];

		if (c->v != V_FLOOR || c->nruns == 0)
			continue;
		if (lo == 0 || c->ns < lo)
			lo = c->ns;
		if (c->ns > hi)
			hi = c->ns;
	}
	if (lo > 0 && hi > 1.25 * lo)
		fprintf(stderr, "\nnote: floor ranged %.2f..%.2f ns/op across configurations: the machine was "
			"busy for part of the run; rerun on a quiet machine before trusting the ratios\n",
			lo, hi);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_charge [--quick] [--json-only] [--lease-down] [--help]\n"
		"\n"
		"Measures ns per charge+uncharge pair (%" PRIu64 " units) at tree depth 1, 4 and 8,\n"
		"with 1 and 2 threads (2 threads charge the same group), for softlimit with\n"
		"batch 0 (SL_BATCH_NONE: no stock) and %" PRIu64 " (SL_BATCH_DEFAULT), and for\n"
		"three baselines: floor, mutex-tree, atomic-walk.\n"
		"\n"
		"  --quick      ~0.2 s per run, 3 runs per configuration (whole run < 30 s)\n"
		"               (default: ~1 s per run, 5 runs)\n"
		"  --json-only  only the JSON lines on stdout: no progress, table or ratios on stderr\n"
		"  --lease-down instead: depth 4, default batch, no lease against a lease whose\n"
		"               etcd store refuses or hangs (needs etcd in PATH and the lease\n"
		"               library's etcd store)\n"
		"  --help       this text\n"
		"\n"
		"stdout: one JSON object per line, e.g.\n"
		"  {\"bench\":\"charge\",\"variant\":\"softlimit\",\"threads\":2,\"depth\":4,"
		"\"batch\":32768,\"ns_per_op\":5.12}\n"
		"  {\"bench\":\"charge_ratio\",\"name\":\"...\",\"value\":1.80,\"goal\":\"<= 2\",\"met\":true}\n"
		"Exit status: 0 done, 1 a run failed verification, 2 bad arguments.\n",
		AMOUNT, SL_BATCH_DEFAULT);
}

static int own_flag(const char *arg)
{
	if (strcmp(arg, "--lease-down") != 0)
		return 0;
#ifdef BENCH_HAVE_LEASE
	if (!lease_have_etcd()) {
		fprintf(stderr, "bench_charge: --lease-down needs etcd in PATH (Debian: etcd-server)\n");
		exit(2);
	}
	lease_down = true;
	return 1;
#else
	fprintf(stderr, "bench_charge: --lease-down needs the lease library with its etcd store\n");
	exit(2);
#endif
}

int main(int argc, char **argv)
{
	uint64_t t_start;

	bench_parse_args(argc, argv, "bench_charge", usage, own_flag);
	build_configs();

	t_start = bench_start(" per configuration, %d configurations", n_configs);
	for (int i = 0; i < n_configs; i++)
		run_config(&configs[i], i, bench.reps, bench.target_ns);

	if (lease_down) {
		if (!bench.json_only)
			print_lease_table();
		bench_finish(t_start, false);
		return 0;
	}
	if (!bench.json_only)
		print_table();
	print_ratios();
	if (!bench.json_only)
		check_floor_drift();
	bench_finish(t_start, false);
	return 0;
}
