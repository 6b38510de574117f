/* SPDX-License-Identifier: MIT */
/*
 * bench_full: the steady state of a full cache, where every charge is at max.
 *
 * A cache that is full charges at its limit on every set: it must evict to
 * make room.  Here a root with max BUDGET (64 MiB) holds tenant groups; each
 * thread loops "charge an item; on success put it in its tenant's FIFO, on
 * -ENOMEM count a failed charge".  Each tenant's reclaim callback evicts
 * the oldest items of that tenant's FIFO and sl_uncharge()s them.  Any
 * thread may reclaim any tenant, so each FIFO has a lock.  Only the public
 * API is used.  No item is ever read, so an LRU is a FIFO here.
 *
 * Dimensions:
 *   threads  1, 2, 4, 8;
 *   tenants  per-thread: each thread charges a tenant of its own;
 *            one: every thread charges the same tenant;
 *   sizes    1k: every item 1 KiB;  mix: 128 B to 16 KiB (mean 1744 B);
 *   impl     guarantee, gatekeeper, protection: softlimit with that policy
 *            (tenants with a soft limit of half their fair share, so that
 *            every tenant is over it and fully reclaimable; default batch);
 *            naive: the same FIFOs under one global atomic counter; a thread
 *            adds its item, then evicts its own tenant's oldest items inline
 *            while the counter is over BUDGET;
 *            shared-lru: one FIFO of all items under one mutex with a plain
 *            counter, evicting its oldest while over BUDGET (a plain cache).
 *
 * Method: for each configuration, a fresh tree (or baseline) is filled
 * first (1.25 * BUDGET of items, untimed: its failures are reported apart),
 * then timed runs follow on the full tree.  A run starts the threads at a
 * barrier; they charge until the main thread raises a stop flag after the
 * run's time (or, with --charges, each does its share of a fixed count).
 * ops_per_s = all charges of the run / its wall time; ns_per_charge = the
 * mean over threads of a thread's time / its charges.  The median of the
 * runs is reported; failed charges are summed over them.  After every run
 * the tree is checked: the root's usage must equal the bytes in the FIFOs,
 * sl_tree_check() must pass, and every callback's sl_uncharge() must have
 * succeeded; any other result of sl_charge() than 0 or -ENOMEM is fatal.
 *
 * Output: one JSON object per line on stdout; progress, a table and the
 * goals of issue "Limit" on stderr (unless --json-only).
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <pthread.h>

#include <softlimit/softlimit.h>

#include "bench_common.h"

#define BUDGET ((uint64_t)64 << 20) /* the root's max: the whole cache */
#define FIXED_SIZE 1024u
#define MIN_SIZE 128u               /* the smallest item of either size set */
#define MAX_SIZE 16384u             /* the largest */
#define FILL_PERCENT 125            /* the fill charges this much of BUDGET */
#define CHUNK 32u                   /* charges between looks at the stop flag */
#define MAX_THREADS 64
#define RUN_NS_FULL (BENCH_NS_PER_S / 4)
#define RUN_NS_QUICK (BENCH_NS_PER_S / 16)

enum impl { I_GUARANTEE, I_GATEKEEPER, I_PROTECTION, I_NAIVE, I_SHARED_LRU, I_COUNT };
enum tenancy { T_PER_THREAD, T_ONE, T_COUNT };
enum sizes { S_FIXED, S_MIX, S_COUNT };

static const char *const impl_names[I_COUNT] = {
	[I_GUARANTEE] = "guarantee",
	[I_GATEKEEPER] = "gatekeeper",
	[I_PROTECTION] = "protection",
	[I_NAIVE] = "naive",
	[I_SHARED_LRU] = "shared-lru",
};
static const enum sl_policy impl_policy[I_PROTECTION + 1] = {
	[I_GUARANTEE] = SL_POLICY_GUARANTEE,
	[I_GATEKEEPER] = SL_POLICY_GATEKEEPER,
	[I_PROTECTION] = SL_POLICY_PROTECTION,
};
static const char *const tenancy_names[T_COUNT] = {[T_PER_THREAD] = "per-thread", [T_ONE] = "one"};
static const char *const sizes_names[S_COUNT] = {[S_FIXED] = "1k", [S_MIX] = "mix"};

static const int thread_list[] = {1, 2, 4, 8};
#define N_THREADS ((int)(sizeof(thread_list) / sizeof(thread_list[0])))

static bool is_softlimit(enum impl i)
{
	return i <= I_PROTECTION;
}

/* ------------------------------------------------------------ item sizes */

/* The mix: sizes and their shares out of 64, looked up by 6 random bits. */
static const struct {
	uint32_t size;
	unsigned share;
} mix_shares[] = {{128, 20}, {512, 19}, {1024, 13}, {4096, 9}, {16384, 3}};
static uint32_t mix_table[64];
static double mix_mean;

static void mix_init(void)
{
	unsigned k = 0;
	double sum = 0;

	for (size_t i = 0; i < sizeof(mix_shares) / sizeof(mix_shares[0]); i++)
		for (unsigned j = 0; j < mix_shares[i].share; j++) {
			if (k >= 64)
				bench_fatal("the size mix has more than 64 shares");
			mix_table[k++] = mix_shares[i].size;
			sum += mix_shares[i].size;
		}
	if (k != 64)
		bench_fatal("the size mix has %u shares, not 64", k);
	mix_mean = sum / 64.0;
}

static double mean_size(enum sizes sz)
{
	return sz == S_FIXED ? FIXED_SIZE : mix_mean;
}

/* ------------------------------------------------------------------ FIFO */

/* Item sizes in insertion order; the oldest is evicted first. */
struct fifo {
	uint32_t *size;
	uint64_t cap;
	uint64_t head;  /* index of the oldest */
	uint64_t count;
	uint64_t bytes; /* sum of the sizes held */
};

static void fifo_init(struct fifo *q, uint64_t cap)
{
	memset(q, 0, sizeof(*q));
	q->size = calloc((size_t)cap, sizeof(q->size[0]));
	if (!q->size)
		bench_fatal("out of memory for a FIFO of %" PRIu64 " items", cap);
	q->cap = cap;
}

static void fifo_free(struct fifo *q)
{
	free(q->size);
	memset(q, 0, sizeof(*q));
}

static inline bool fifo_push(struct fifo *q, uint32_t size)
{
	uint64_t i;

	if (q->count == q->cap)
		return false;
	i = q->head + q->count;
	if (i >= q->cap)
		i -= q->cap;
	q->size[i] = size;
	q->count++;
	q->bytes += size;
	return true;
}

/* The oldest item's size, removed; 0 when empty. */
static inline uint32_t fifo_pop(struct fifo *q)
{
	uint32_t size;

	if (q->count == 0)
		return 0;
	size = q->size[q->head];
	if (++q->head == q->cap)
		q->head = 0;
	q->count--;
	q->bytes -= size;
	return size;
}

/* ------------------------------------------------------------- instance */

struct instance;

/* A tenant: its group and its items.  Any thread may charge it (tenants
 * "one") and any thread may reclaim it, so the FIFO has a lock. */
struct tenant {
	_Alignas(BENCH_CACHELINE) pthread_mutex_t lock; /* guards q and callbacks */
	struct fifo q;
	uint64_t callbacks;       /* reclaim callbacks that ran on it */
	sl_group *g;              /* softlimit only */
	struct instance *in;
};

struct instance {
	enum impl impl;
	enum tenancy tenancy;
	enum sizes sizes;
	int threads;
	int ntenants;
	struct tenant *tenant;
	sl_tree *tree;            /* softlimit */
	sl_group *root;
	/* naive: the one counter every thread adds to.  Relaxed: it orders
	 * nothing; each FIFO's lock orders its own items. */
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t used;
	/* shared-lru: one lock around one FIFO of all items. */
	_Alignas(BENCH_CACHELINE) pthread_mutex_t lru_lock;
	struct fifo lru;
	_Atomic int cb_err;       /* an sl_uncharge() error seen in a callback */
};

/* Evict the tenant's oldest items until @target bytes are free. */
static uint64_t tenant_reclaim(sl_group *g, uint64_t target, void *ctx)
{
	struct tenant *t = ctx;
	uint64_t freed = 0;
	uint32_t size;
	int rc;

	pthread_mutex_lock(&t->lock);
	t->callbacks++;
	while (freed < target && (size = fifo_pop(&t->q)) != 0)
		freed += size;
	pthread_mutex_unlock(&t->lock);
	if (freed == 0)
		return 0;
	rc = sl_uncharge(g, freed);
	if (rc != 0) {
		/* Relaxed: read after the threads are joined. */
		atomic_store_explicit(&t->in->cb_err, rc, memory_order_relaxed);
		return 0;
	}
	return freed;
}

static const struct sl_ops tenant_ops = {.reclaim = tenant_reclaim};

static struct instance *instance_new(enum impl impl, enum tenancy ten, enum sizes sz, int threads)
{
	/* Room for a whole budget of the smallest items, and for what the
	 * naive host can pass the budget by (a few items per thread). */
	uint64_t cap = BUDGET / (sz == S_FIXED ? FIXED_SIZE : MIN_SIZE) + 4096;
	struct instance *in = aligned_alloc(BENCH_CACHELINE, sizeof(*in));
	int rc;

	if (!in)
		bench_fatal("out of memory");
	memset(in, 0, sizeof(*in));
	in->impl = impl;
	in->tenancy = ten;
	in->sizes = sz;
	in->threads = threads;
	atomic_init(&in->used, 0);
	atomic_init(&in->cb_err, 0);

	if (impl == I_SHARED_LRU) {
		rc = pthread_mutex_init(&in->lru_lock, NULL);
		if (rc != 0)
			bench_fatal("pthread_mutex_init = %d", rc);
		fifo_init(&in->lru, cap);
		return in;
	}

	in->ntenants = ten == T_PER_THREAD ? threads : 1;
	in->tenant = aligned_alloc(BENCH_CACHELINE, (size_t)in->ntenants * sizeof(in->tenant[0]));
	if (!in->tenant)
		bench_fatal("out of memory");
	memset(in->tenant, 0, (size_t)in->ntenants * sizeof(in->tenant[0]));
	if (is_softlimit(impl)) {
		struct sl_tree_opts opts;

		sl_tree_opts_init(&opts);
		opts.policy = impl_policy[impl];
		opts.root.max = BUDGET;
		rc = sl_tree_create(&opts, &in->tree);
		if (rc != 0)
			bench_fatal("sl_tree_create(%s) = %d", impl_names[impl], rc);
		in->root = sl_tree_root(in->tree);
	}
	for (int i = 0; i < in->ntenants; i++) {
		struct tenant *t = &in->tenant[i];

		rc = pthread_mutex_init(&t->lock, NULL);
		if (rc != 0)
			bench_fatal("pthread_mutex_init = %d", rc);
		fifo_init(&t->q, cap);
		t->in = in;
		if (in->tree) {
			struct sl_limits lim;
			char name[16];

			sl_limits_init(&lim);
			/* Half a fair share: every tenant ends up over its soft
			 * limit, so pass 1 finds victims under every policy. */
			lim.soft = BUDGET / (2 * (uint64_t)in->ntenants);
			snprintf(name, sizeof(name), "t%d", i);
			rc = sl_group_create(in->root, name, &lim, &tenant_ops, t, &t->g);
			if (rc != 0)
				bench_fatal("sl_group_create(%s) = %d", name, rc);
		}
	}
	return in;
}

static void instance_free(struct instance *in)
{
	if (in->tree)
		sl_tree_destroy(in->tree);
	for (int i = 0; i < in->ntenants; i++) {
		pthread_mutex_destroy(&in->tenant[i].lock);
		fifo_free(&in->tenant[i].q);
	}
	free(in->tenant);
	if (in->impl == I_SHARED_LRU) {
		pthread_mutex_destroy(&in->lru_lock);
		fifo_free(&in->lru);
	}
	free(in);
}

/* Bytes the host holds (in its FIFOs) and reclaim callbacks so far; the
 * threads must have been joined. */
static uint64_t instance_held(const struct instance *in, uint64_t *callbacks)
{
	uint64_t held = in->lru.bytes, calls = 0;

	for (int i = 0; i < in->ntenants; i++) {
		held += in->tenant[i].q.bytes;
		calls += in->tenant[i].callbacks;
	}
	if (callbacks)
		*callbacks = calls;
	return held;
}

/*
 * Once the threads are joined: what the accounting says must be what the
 * host holds.  Returns the held bytes; *peak gets the root's peak (usage
 * plus stocks; the held bytes for the baselines).
 */
static uint64_t instance_verify(struct instance *in, const char *what, uint64_t *peak)
{
	uint64_t held = instance_held(in, NULL);
	int err = atomic_load_explicit(&in->cb_err, memory_order_relaxed);

	*peak = held;
	if (err != 0)
		bench_fatal("%s: sl_uncharge() in a reclaim callback returned %d", what, err);
	if (in->tree) {
		struct sl_stats st;
		int rc = sl_group_stats(in->root, &st);

		if (rc != 0)
			bench_fatal("%s: sl_group_stats(root) = %d", what, rc);
		if (st.usage != held)
			bench_fatal("%s: root usage %" PRIu64 ", the FIFOs hold %" PRIu64, what,
				    st.usage, held);
		rc = sl_tree_check(in->tree);
		if (rc != 0)
			bench_fatal("%s: sl_tree_check() = %d", what, rc);
		*peak = st.peak;
	} else if (in->impl == I_NAIVE) {
		uint64_t used = atomic_load_explicit(&in->used, memory_order_relaxed);

		if (used != held)
			bench_fatal("%s: the counter says %" PRIu64 ", the FIFOs hold %" PRIu64, what,
				    used, held);
	} else if (held > BUDGET) {
		bench_fatal("%s: the shared LRU holds %" PRIu64 " bytes, over its %" PRIu64, what,
			    held, BUDGET);
	}
	return held;
}

/* ------------------------------------------------------------------ run */

struct run {
	struct instance *in;
	uint64_t per_thread;          /* charges per thread; 0: until stop */
	pthread_barrier_t barrier;
	/* Raised by the main thread when a timed run is over.  Relaxed: it
	 * orders nothing; the join orders the results. */
	_Alignas(BENCH_CACHELINE) _Atomic int stop;
};

/* Each thread's state on lines of its own. */
struct worker {
	_Alignas(BENCH_CACHELINE) pthread_t tid;
	struct run *run;
	struct tenant *t;             /* its tenant (NULL for shared-lru) */
	uint64_t rng;
	uint64_t charges;             /* out: charges tried */
	uint64_t failed;              /* out: of which -ENOMEM */
	uint64_t elapsed_ns;          /* out */
	int err;                      /* out: another result of sl_charge(), or a full FIFO */
};

static inline uint32_t next_size(struct worker *w, enum sizes sz)
{
	uint64_t x = w->rng;

	if (sz == S_FIXED)
		return FIXED_SIZE;
	/* xorshift64 */
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	w->rng = x;
	return mix_table[x >> 58];
}

static int charges_softlimit(struct worker *w, enum sizes sz, uint64_t n)
{
	struct tenant *t = w->t;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t size = next_size(w, sz);
		int rc = sl_charge(t->g, size, 0);
		bool ok;

		if (rc == -ENOMEM) {
			w->failed++;
			continue;
		}
		if (rc != 0)
			return rc;
		pthread_mutex_lock(&t->lock);
		ok = fifo_push(&t->q, size);
		pthread_mutex_unlock(&t->lock);
		if (!ok)
			return -ENOSPC;
	}
	return 0;
}

static int charges_naive(struct worker *w, enum sizes sz, uint64_t n)
{
	struct tenant *t = w->t;
	_Atomic uint64_t *used = &w->run->in->used;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t size = next_size(w, sz), old;
		uint64_t now = atomic_fetch_add_explicit(used, size, memory_order_relaxed) + size;
		bool ok;

		pthread_mutex_lock(&t->lock);
		ok = fifo_push(&t->q, size);
		while (ok && now > BUDGET && (old = fifo_pop(&t->q)) != 0)
			now = atomic_fetch_sub_explicit(used, old, memory_order_relaxed) - old;
		pthread_mutex_unlock(&t->lock);
		if (!ok)
			return -ENOSPC;
	}
	return 0;
}

static int charges_shared_lru(struct worker *w, enum sizes sz, uint64_t n)
{
	struct instance *in = w->run->in;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t size = next_size(w, sz);
		bool ok;

		pthread_mutex_lock(&in->lru_lock);
		ok = fifo_push(&in->lru, size);
		while (in->lru.bytes > BUDGET)
			fifo_pop(&in->lru);
		pthread_mutex_unlock(&in->lru_lock);
		if (!ok)
			return -ENOSPC;
	}
	return 0;
}

static int do_charges(struct worker *w, uint64_t n)
{
	const struct instance *in = w->run->in;

	if (is_softlimit(in->impl))
		return charges_softlimit(w, in->sizes, n);
	if (in->impl == I_NAIVE)
		return charges_naive(w, in->sizes, n);
	return charges_shared_lru(w, in->sizes, n);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->run;
	uint64_t t0, done = 0;
	int rc = 0;

	pthread_barrier_wait(&r->barrier);
	t0 = bench_now_ns();
	if (r->per_thread) {
		rc = do_charges(w, r->per_thread);
		done = r->per_thread;
	} else {
		/* At least one chunk: a thread the scheduler started late still
		 * measures something. */
		do {
			rc = do_charges(w, CHUNK);
			if (rc != 0)
				break;
			done += CHUNK;
		} while (!atomic_load_explicit(&r->stop, memory_order_relaxed));
	}
	w->elapsed_ns = bench_now_ns() - t0;
	w->charges = done;
	w->err = rc;
	return NULL;
}

struct result {
	double ops_per_s;     /* all charges / wall time */
	double ns_per_charge; /* mean over threads of time / charges */
	uint64_t charges;
	uint64_t failed;
	uint64_t callbacks;   /* reclaim callbacks during the run */
	uint64_t held;        /* bytes in the FIFOs after it */
	uint64_t peak;        /* the root's peak after it (softlimit) */
};

/*
 * One run: @per_thread charges per thread, or (0) until @run_ns have
 * passed.  @seed makes each run's sizes differ.
 */
static struct result run_once(struct instance *in, uint64_t per_thread, uint64_t run_ns,
			      uint64_t seed, const char *what)
{
	int threads = in->threads;
	struct worker *w = aligned_alloc(BENCH_CACHELINE, (size_t)threads * sizeof(*w));
	struct run r = {.in = in, .per_thread = per_thread};
	struct result res = {0};
	uint64_t t0, wall, calls0, calls1;
	double ns_sum = 0;
	int rc;

	if (!w)
		bench_fatal("out of memory");
	memset(w, 0, (size_t)threads * sizeof(*w));
	atomic_init(&r.stop, 0);
	instance_held(in, &calls0);
	/* The main thread passes the barrier too: the clock starts when all go. */
	rc = pthread_barrier_init(&r.barrier, NULL, (unsigned)threads + 1);
	if (rc != 0)
		bench_fatal("pthread_barrier_init = %d", rc);
	for (int i = 0; i < threads; i++) {
		w[i].run = &r;
		w[i].t = in->ntenants ? &in->tenant[in->ntenants == 1 ? 0 : i] : NULL;
		w[i].rng = (seed + 1) * 0x9E3779B97F4A7C15u + (uint64_t)i * 0xBF58476D1CE4E5B9u + 1;
		rc = pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
		if (rc != 0)
			bench_fatal("pthread_create = %d", rc);
	}
	pthread_barrier_wait(&r.barrier);
	t0 = bench_now_ns();
	if (per_thread == 0) {
		struct timespec ts = {.tv_sec = (time_t)(run_ns / BENCH_NS_PER_S),
				      .tv_nsec = (long)(run_ns % BENCH_NS_PER_S)};

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		atomic_store_explicit(&r.stop, 1, memory_order_relaxed);
	}
	for (int i = 0; i < threads; i++) {
		rc = pthread_join(w[i].tid, NULL);
		if (rc != 0)
			bench_fatal("pthread_join = %d", rc);
	}
	wall = bench_now_ns() - t0;
	pthread_barrier_destroy(&r.barrier);

	for (int i = 0; i < threads; i++) {
		if (w[i].err == -ENOSPC)
			bench_fatal("%s: a FIFO is full: more items than a whole budget of the "
				    "smallest", what);
		if (w[i].err != 0)
			bench_fatal("%s: sl_charge() returned %d", what, w[i].err);
		res.charges += w[i].charges;
		res.failed += w[i].failed;
		ns_sum += (double)w[i].elapsed_ns / (double)w[i].charges;
	}
	free(w);
	res.ops_per_s = (double)res.charges * 1e9 / (double)(wall ? wall : 1);
	res.ns_per_charge = ns_sum / threads;
	res.held = instance_verify(in, what, &res.peak);
	instance_held(in, &calls1);
	res.callbacks = calls1 - calls0;
	return res;
}

/* --------------------------------------------------------------- driver */

struct config {
	enum impl impl;
	enum tenancy tenancy;
	enum sizes sizes;
	int threads;
	int nruns;
	double ops[BENCH_MAX_RUNS];
	double ns[BENCH_MAX_RUNS];
	double ops_per_s;     /* medians */
	double ns_per_charge;
	uint64_t charges, failed, callbacks, fill_failed, peak;
	double fill;          /* held / BUDGET after the fill */
};

#define MAX_CONFIGS (T_COUNT * S_COUNT * I_COUNT * N_THREADS)

static struct config configs[MAX_CONFIGS];
static int n_configs;

/* The command line's choices beyond bench_common.h's. */
static uint64_t opt_threads;   /* 0: 1, 2, 4 and 8 */
static uint64_t opt_charges;   /* 0: timed runs */
static uint64_t opt_runs;      /* 0: the mode's */
static unsigned opt_impls = (1u << I_COUNT) - 1;
static unsigned opt_tenancies = (1u << T_COUNT) - 1;
static unsigned opt_sizes = (1u << S_COUNT) - 1;

static void run_config(struct config *c, int idx, uint64_t run_ns)
{
	struct instance *in;
	struct result fill, res;
	uint64_t per_thread;
	char what[96];

	snprintf(what, sizeof(what), "%s tenants=%s sizes=%s threads=%d", impl_names[c->impl],
		 tenancy_names[c->tenancy], sizes_names[c->sizes], c->threads);
	bench_progress("[%2d/%d] %-52s", idx + 1, n_configs, what);
	in = instance_new(c->impl, c->tenancy, c->sizes, c->threads);

	/* Fill the cache: from here on every charge is at max. */
	per_thread = (uint64_t)((double)BUDGET * FILL_PERCENT / 100.0 / mean_size(c->sizes) /
				c->threads) + 1;
	fill = run_once(in, per_thread, 0, 0, what);
	c->fill_failed = fill.failed;
	c->fill = (double)fill.held / (double)BUDGET;

	per_thread = opt_charges ? (opt_charges + (uint64_t)c->threads - 1) / (uint64_t)c->threads : 0;
	for (int r = 0; r < c->nruns; r++) {
		res = run_once(in, per_thread, run_ns, (uint64_t)r + 1, what);
		c->ops[r] = res.ops_per_s;
		c->ns[r] = res.ns_per_charge;
		c->charges += res.charges;
		c->failed += res.failed;
		c->callbacks += res.callbacks;
		c->peak = res.peak;
	}
	c->ops_per_s = bench_median(c->ops, c->nruns);
	c->ns_per_charge = bench_median(c->ns, c->nruns);
	instance_free(in);

	{
		char runs[BENCH_MAX_RUNS * 24 + 8];

		bench_json_array(runs, sizeof(runs), c->ops, c->nruns, 0);
		bench_json("{\"bench\":\"full\",\"impl\":\"%s\",\"tenants\":\"%s\",\"sizes\":\"%s\","
			   "\"threads\":%d,\"budget\":%" PRIu64 ",\"ns_per_charge\":%.1f,"
			   "\"ops_per_s\":%.0f,\"charges\":%" PRIu64 ",\"failed\":%" PRIu64 ","
			   "\"fill_failed\":%" PRIu64 ",\"fill\":%.3f,\"callbacks_per_charge\":%.3f,"
			   "\"peak\":%" PRIu64 ",\"runs_ops_per_s\":%s}",
			   impl_names[c->impl], tenancy_names[c->tenancy], sizes_names[c->sizes],
			   c->threads, BUDGET, c->ns_per_charge, c->ops_per_s, c->charges, c->failed,
			   c->fill_failed, c->fill,
			   (double)c->callbacks / (double)(c->charges > c->failed ? c->charges - c->failed : 1),
			   c->peak, runs);
	}
	bench_progress(" %9.1f ns/charge %7.2f Mops/s  failed %" PRIu64 " of %" PRIu64
		       " (fill: %" PRIu64 ")\n",
		       c->ns_per_charge, c->ops_per_s / 1e6, c->failed, c->charges, c->fill_failed);
	if (c->peak > BUDGET)
		bench_warn("%s: the root's peak %" PRIu64 " passed its max %" PRIu64, what, c->peak,
			   BUDGET);
}

static const struct config *find(enum impl impl, enum tenancy ten, enum sizes sz, int threads)
{
	for (int i = 0; i < n_configs; i++) {
		const struct config *c = &configs[i];

		if (c->impl == impl && c->tenancy == ten && c->sizes == sz && c->threads == threads &&
		    c->nruns > 0)
			return c;
	}
	return NULL;
}

/* Configurations compared by a goal run back to back: for each tenancy,
 * size set and thread count, every implementation in turn. */
static void build_configs(int runs)
{
	int nthreads = opt_threads ? 1 : N_THREADS;

	for (int ten = 0; ten < T_COUNT; ten++)
		for (int sz = 0; sz < S_COUNT; sz++)
			for (int k = 0; k < nthreads; k++)
				for (int impl = 0; impl < I_COUNT; impl++) {
					struct config *c;

					if (!(opt_tenancies & (1u << ten)) || !(opt_sizes & (1u << sz)) ||
					    !(opt_impls & (1u << impl)))
						continue;
					c = &configs[n_configs++];
					memset(c, 0, sizeof(*c));
					c->impl = (enum impl)impl;
					c->tenancy = (enum tenancy)ten;
					c->sizes = (enum sizes)sz;
					c->threads = opt_threads ? (int)opt_threads : thread_list[k];
					c->nruns = runs;
				}
}

static void print_tables(void)
{
	for (int ten = 0; ten < T_COUNT; ten++)
		for (int sz = 0; sz < S_COUNT; sz++) {
			bool any = false;

			for (int i = 0; i < n_configs; i++)
				any = any || (configs[i].tenancy == (enum tenancy)ten &&
					      configs[i].sizes == (enum sizes)sz);
			if (!any)
				continue;
			fprintf(stderr, "\ntenants=%s sizes=%s, root max %" PRIu64 " MiB: ns per charge, "
				"total Mops/s, failed charges (median of runs; failed summed)\n",
				tenancy_names[ten], sizes_names[sz], BUDGET >> 20);
			fprintf(stderr, "%-11s", "impl");
			for (int k = 0; k < (opt_threads ? 1 : N_THREADS); k++)
				fprintf(stderr, " | %2d thr: %5s %6s %6s",
					opt_threads ? (int)opt_threads : thread_list[k], "ns", "Mops", "failed");
			fputc('\n', stderr);
			for (int impl = 0; impl < I_COUNT; impl++) {
				if (!(opt_impls & (1u << impl)))
					continue;
				fprintf(stderr, "%-11s", impl_names[impl]);
				for (int i = 0; i < n_configs; i++) {
					const struct config *c = &configs[i];

					if (c->impl != (enum impl)impl || c->tenancy != (enum tenancy)ten ||
					    c->sizes != (enum sizes)sz)
						continue;
					fprintf(stderr, " | %13.0f %6.2f %6" PRIu64, c->ns_per_charge,
						c->ops_per_s / 1e6, c->failed);
				}
				fputc('\n', stderr);
			}
		}
	fputc('\n', stderr);
}

/* One goal as a JSON line; the table on stderr shows the value. */
static void goal(const char *name, const char *tenants, const char *sizes, const char *impl,
		 double value, bool at_most, double bound, int decimals)
{
	bool met = at_most ? value <= bound : value >= bound;

	bench_json("{\"bench\":\"full_goal\",\"name\":\"%s\",\"impl\":\"%s\",\"tenants\":\"%s\","
		   "\"sizes\":\"%s\",\"value\":%.2f,\"goal\":\"%s %g\",\"met\":%s}",
		   name, impl, tenants, sizes, value, at_most ? "<=" : ">=", bound,
		   met ? "true" : "false");
	bench_progress(" %8.*f%s", decimals, value, met ? " " : "!");
}

/*
 * The goals of issue "Limit", judged on this run: at 1 thread softlimit's ns
 * per charge at most 2x the naive host's; total ops/s at 2, 4 and 8
 * threads at least that at 1 thread; no failed charge on this fully
 * reclaimable tree (counted over every thread count).
 */
static void print_goals(void)
{
	bench_progress("goals of issue \"Limit\" (! = not met): softlimit at 1 thread / naive "
		       "(ns per charge, goal <= 2);\nops/s at N threads / at 1 thread (goal >= 1); "
		       "failed charges (goal 0)\n");
	bench_progress("%-10s %-10s %-5s %8s ", "impl", "tenants", "sizes", "t1/naive");
	for (int k = 1; k < N_THREADS; k++)
		bench_progress("    t%d/t1 ", thread_list[k]);
	bench_progress(" %8s  %s\n", "failed", "of charges");
	for (int ten = 0; ten < T_COUNT; ten++)
		for (int sz = 0; sz < S_COUNT; sz++)
			for (int impl = 0; impl <= I_PROTECTION; impl++) {
				const char *tn = tenancy_names[ten], *sn = sizes_names[sz];
				const char *in = impl_names[impl];
				const struct config *one =
					find((enum impl)impl, (enum tenancy)ten, (enum sizes)sz, 1);
				const struct config *naive =
					find(I_NAIVE, (enum tenancy)ten, (enum sizes)sz, 1);
				uint64_t failed = 0, charges = 0;

				for (int i = 0; i < n_configs; i++) {
					const struct config *c = &configs[i];

					if (c->impl == (enum impl)impl && c->tenancy == (enum tenancy)ten &&
					    c->sizes == (enum sizes)sz) {
						failed += c->failed;
						charges += c->charges;
					}
				}
				if (charges == 0)
					continue;
				bench_progress("%-10s %-10s %-5s", in, tn, sn);
				if (one && naive && naive->ns_per_charge > 0)
					goal("ns_t1_over_naive", tn, sn, in,
					     one->ns_per_charge / naive->ns_per_charge, true, 2, 2);
				else
					bench_progress(" %8s ", "-");
				for (int k = 1; k < N_THREADS; k++) {
					const struct config *c = find((enum impl)impl, (enum tenancy)ten,
								      (enum sizes)sz, thread_list[k]);
					char name[32];

					if (!c || !one || one->ops_per_s <= 0) {
						bench_progress(" %8s ", "-");
						continue;
					}
					snprintf(name, sizeof(name), "ops_t%d_over_t1", thread_list[k]);
					goal(name, tn, sn, in, c->ops_per_s / one->ops_per_s, false, 1, 2);
				}
				goal("failed", tn, sn, in, (double)failed, true, 0, 0);
				bench_progress(" of %" PRIu64 "\n", charges);
			}
}

static unsigned parse_set(const char *list, const char *const *names, int n)
{
	unsigned set = 0;

	for (int i = 0; i < n; i++)
		if (strcmp(list, names[i]) == 0)
			set |= 1u << i;
	return set;
}

static int full_flag(const char *arg)
{
	int rc;

	if (strncmp(arg, "--impl=", 7) == 0) {
		opt_impls = strcmp(arg + 7, "softlimit") == 0
				    ? (1u << I_GUARANTEE) | (1u << I_GATEKEEPER) | (1u << I_PROTECTION)
				    : parse_set(arg + 7, impl_names, I_COUNT);
		if (!opt_impls)
			fprintf(stderr, "bench_full: unknown impl '%s'\n", arg + 7);
		return opt_impls ? 1 : -1;
	}
	if (strncmp(arg, "--tenants=", 10) == 0) {
		opt_tenancies = parse_set(arg + 10, tenancy_names, T_COUNT);
		if (!opt_tenancies)
			fprintf(stderr, "bench_full: unknown tenants '%s'\n", arg + 10);
		return opt_tenancies ? 1 : -1;
	}
	if (strncmp(arg, "--sizes=", 8) == 0) {
		opt_sizes = parse_set(arg + 8, sizes_names, S_COUNT);
		if (!opt_sizes)
			fprintf(stderr, "bench_full: unknown sizes '%s'\n", arg + 8);
		return opt_sizes ? 1 : -1;
	}
	rc = bench_flag_u64(arg, "--threads", 1, MAX_THREADS, &opt_threads);
	if (rc == 0)
		rc = bench_flag_u64(arg, "--charges", 1, (uint64_t)1 << 40, &opt_charges);
	if (rc == 0)
		rc = bench_flag_u64(arg, "--runs", 1, BENCH_MAX_RUNS, &opt_runs);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_full [--quick] [--json-only] [--threads=N] [--charges=N] [--runs=N]\n"
		"                  [--impl=I] [--tenants=per-thread|one] [--sizes=1k|mix] [--help]\n"
		"\n"
		"The steady state of a full cache: a root with max %" PRIu64 " MiB, threads 1, 2, 4, 8\n"
		"charging items (1 KiB, or a mix of 128 B..16 KiB) to a tenant of their own or all\n"
		"to one tenant; each tenant's reclaim callback evicts its oldest items.  For\n"
		"softlimit under each policy and two baselines: naive (one atomic counter, each\n"
		"thread evicting its own tenant's oldest inline) and shared-lru (one mutex).\n"
		"\n"
		"  --quick       runs of ~%.2f s, 3 per configuration (whole run ~20 s on 2 cores)\n"
		"                (default: runs of ~%.2f s, 3 per configuration: ~60 s)\n"
		"  --json-only   only the JSON lines on stdout: no progress, table or goals on stderr\n"
		"  --threads=N   only N threads (1..%d)\n"
		"  --charges=N   instead of timed runs, N charges in all per run (split over the\n"
		"                threads), 1 run unless --runs; e.g. the issue's failure count:\n"
		"                --threads=8 --charges=10000000 --impl=softlimit\n"
		"  --runs=N      N runs per configuration\n"
		"  --impl=I      only I: guarantee, gatekeeper, protection, softlimit (the three),\n"
		"                naive or shared-lru\n"
		"  --tenants=T   only per-thread (each thread its own tenant) or one\n"
		"  --sizes=S     only 1k or mix\n"
		"  --help        this text\n"
		"\n"
		"stdout: one JSON object per line, e.g.\n"
		"  {\"bench\":\"full\",\"impl\":\"guarantee\",\"tenants\":\"per-thread\",\"sizes\":\"1k\","
		"\"threads\":2,\"budget\":67108864,\n"
		"   \"ns_per_charge\":700.1,\"ops_per_s\":2800000,\"charges\":2100000,\"failed\":3,...}\n"
		"  {\"bench\":\"full_goal\",\"name\":\"ops_t2_over_t1\",\"impl\":\"guarantee\",...,"
		"\"value\":1.20,\"goal\":\">= 1\",\"met\":true}\n"
		"Exit status: 0 done (whatever the goals), 1 a run failed verification, 2 bad arguments.\n",
		BUDGET >> 20, (double)RUN_NS_QUICK / 1e9, (double)RUN_NS_FULL / 1e9, MAX_THREADS);
}

int main(int argc, char **argv)
{
	uint64_t t_start, run_ns;
	int runs;

	bench_parse_args(argc, argv, "bench_full", usage, full_flag);
	mix_init();
	/* 80 configurations: short runs, the median of 3. */
	bench.reps = 3;
	bench.target_ns = bench.quick ? RUN_NS_QUICK : RUN_NS_FULL;
	if (opt_charges)
		bench.reps = 1;
	if (opt_runs)
		bench.reps = (int)opt_runs;
	runs = bench.reps;
	run_ns = bench.target_ns;
	build_configs(runs);

	if (opt_charges) {
		bench.target_ns = 0; /* not timed */
		t_start = bench_start(" of %" PRIu64 " charges per configuration after a fill, %d "
				      "configurations, root max %" PRIu64 " MiB",
				      opt_charges, n_configs, BUDGET >> 20);
	} else {
		t_start = bench_start(" per configuration after a fill, %d configurations, root max %" PRIu64
				      " MiB", n_configs, BUDGET >> 20);
	}
	for (int i = 0; i < n_configs; i++)
		run_config(&configs[i], i, run_ns);

	if (!bench.json_only)
		print_tables();
	print_goals();
	bench_finish(t_start, true);
	return 0;
}
