/* SPDX-License-Identifier: MIT */
/*
 * bench_reclaim: the cost of one sl_reclaim() call as the tree grows.
 *
 * The tree has the shape of a real host, two levels below the root:
 *
 *     root -> customers (isqrt(N) of them) -> namespaces
 *
 * N groups in all (customers + namespaces, the root not counted), for N =
 * 10^3, 10^4, 10^5 and 10^6.  Every group has a reclaim callback and holds
 * some usage within its soft limit (a namespace: usage 100, soft 200; a
 * customer: its own 100 units, and a soft limit above its whole subtree's
 * usage), except OVER (10) namespaces, each the first namespace of a
 * different customer (spread evenly), which hold 1000 units with a soft
 * limit of 100.
 *
 * One call is sl_reclaim(root, 64, 0).  Pass 1 is satisfied by the over
 * groups: the callback frees what it is asked with sl_uncharge() and logs
 * it; between calls, outside the timed region, the benchmark charges back
 * what was freed, so every call sees the same tree with 10 groups over.
 *
 * Each call is timed by itself (two clock reads around sl_reclaim()); a
 * run's figure is the sum of its calls' times over the number of calls; the
 * median of the runs is reported.  Every call is checked: sl_reclaim() must
 * return exactly 64, the callbacks must have freed exactly 64, and only
 * groups over their soft limit may have been asked.  After the runs the
 * root's usage must be what the benchmark holds, and sl_tree_check() must
 * pass.  Any failure is fatal (exit status 1).
 *
 * Batch: SL_BATCH_NONE by default (exact counters, no per-thread stock);
 * --batch-default uses SL_BATCH_DEFAULT.
 *
 * Output: one JSON object per line on stdout; progress, a table and the
 * goal ratios on stderr (unless --json-only).
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>

#include <softlimit/softlimit.h>

#include "bench_common.h"

#define OVER 10                   /* groups over their soft limit */
#define TARGET ((uint64_t)64)     /* units asked of each sl_reclaim() */
#define NS_USAGE ((uint64_t)100)  /* a namespace's usage ...          */
#define NS_SOFT ((uint64_t)200)   /* ... within its soft limit        */
#define OVER_USAGE ((uint64_t)1000) /* an over namespace's usage ...  */
#define OVER_SOFT ((uint64_t)100) /* ... over its soft limit          */
#define CUST_USAGE ((uint64_t)100) /* a customer's own charge         */
#define LOG_MAX 4096              /* callback invocations logged per call */
#define MIN_CALLS 3               /* calls per run, whatever the time */
#define MAX_CALLS 2000000         /* calls per run, whatever the time */
#define MAX_REPS 5

static const uint64_t size_list[] = {1000, 10000, 100000, 1000000};
#define N_SIZES ((int)(sizeof(size_list) / sizeof(size_list[0])))

static const enum sl_policy policy_list[] = {
	SL_POLICY_GUARANTEE,
	SL_POLICY_GATEKEEPER,
	SL_POLICY_PROTECTION,
};
#define N_POLICIES ((int)(sizeof(policy_list) / sizeof(policy_list[0])))

static const char *policy_name(enum sl_policy p)
{
	switch (p) {
	case SL_POLICY_GUARANTEE:
		return "guarantee";
	case SL_POLICY_GATEKEEPER:
		return "gatekeeper";
	case SL_POLICY_PROTECTION:
		return "protection";
	case SL_POLICY_REFAULT:
		return "refault";
	}
	return "?";
}

/* ------------------------------------------------------------------ utils */

static uint64_t isqrt(uint64_t n)
{
	uint64_t r = 1;

	while ((r + 1) * (r + 1) <= n)
		r++;
	return r;
}

/* ------------------------------------------------------ the host's side */

/* What the host holds in one group (its own charges, not its children's). */
struct gstate {
	uint64_t held;
	bool over; /* one of the OVER groups */
};

struct logent {
	sl_group *g;
	struct gstate *s;
	uint64_t amount;
};

/* The callbacks of one sl_reclaim() call (single-threaded: callbacks run in
 * the calling thread). */
static struct logent cb_log[LOG_MAX];
static size_t cb_n;
static bool cb_overflow;
static int cb_err;

/* Free what is asked, as far as the group holds it. */
static uint64_t cb_reclaim(sl_group *g, uint64_t target, void *ctx)
{
	struct gstate *s = ctx;
	uint64_t x = target < s->held ? target : s->held;
	int rc;

	if (!x)
		return 0;
	if (cb_n == LOG_MAX) {
		/* Could not charge it back: refuse, and fail the run. */
		cb_overflow = true;
		return 0;
	}
	rc = sl_uncharge(g, x);
	if (rc != 0) {
		cb_err = rc;
		return 0;
	}
	s->held -= x;
	cb_log[cb_n++] = (struct logent){.g = g, .s = s, .amount = x};
	return x;
}

static const struct sl_ops cb_ops = {.reclaim = cb_reclaim};

/* ------------------------------------------------------------- the tree */

struct instance {
	sl_tree *t;
	sl_group *root;
	struct gstate *state; /* one per group, customers and namespaces */
	uint64_t groups, customers;
	uint64_t total;       /* units the host holds in the whole tree */
};

static void charge_or_die(sl_group *g, struct gstate *s, uint64_t amount, const char *what)
{
	int rc = sl_charge(g, amount, 0);

	if (rc != 0)
		bench_fatal("sl_charge(%s, %" PRIu64 ") = %d", what, amount, rc);
	s->held += amount;
}

static void instance_build(struct instance *in, enum sl_policy policy, uint64_t groups, uint64_t batch)
{
	struct sl_tree_opts opts;
	uint64_t ns_total, next = 0, c, j;
	int over_made = 0;
	char name[32];
	int rc;

	memset(in, 0, sizeof(*in));
	in->groups = groups;
	in->customers = isqrt(groups);
	ns_total = groups - in->customers;
	in->state = calloc((size_t)groups, sizeof(*in->state));
	if (!in->state)
		bench_fatal("out of memory for %" PRIu64 " group states", groups);

	sl_tree_opts_init(&opts);
	opts.policy = policy;
	opts.batch = batch;
	rc = sl_tree_create(&opts, &in->t);
	if (rc != 0)
		bench_fatal("sl_tree_create = %d", rc);
	in->root = sl_tree_root(in->t);

	for (c = 0; c < in->customers; c++) {
		uint64_t k = ns_total / in->customers + (c < ns_total % in->customers ? 1 : 0);
		/* Customers j * customers / OVER (j = 0..OVER-1; distinct, as
		 * customers >= 31 > OVER) each hold one over namespace. */
		bool has_over = over_made < OVER && c == (uint64_t)over_made * in->customers / OVER;
		struct sl_limits lim;
		struct gstate *cs = &in->state[next++];
		sl_group *cust;

		sl_limits_init(&lim);
		/* Above its whole subtree's usage, re-charges included: a
		 * customer is never over its soft limit. */
		lim.soft = CUST_USAGE + k * NS_SOFT + 2 * OVER_USAGE;
		snprintf(name, sizeof(name), "c%" PRIu64, c);
		rc = sl_group_create(in->root, name, &lim, &cb_ops, cs, &cust);
		if (rc != 0)
			bench_fatal("sl_group_create(%s) = %d", name, rc);
		charge_or_die(cust, cs, CUST_USAGE, name);

		for (j = 0; j < k; j++) {
			struct gstate *s = &in->state[next++];
			bool over = has_over && j == 0;
			sl_group *ns;

			sl_limits_init(&lim);
			lim.soft = over ? OVER_SOFT : NS_SOFT;
			snprintf(name, sizeof(name), "n%" PRIu64, j);
			rc = sl_group_create(cust, name, &lim, &cb_ops, s, &ns);
			if (rc != 0)
				bench_fatal("sl_group_create(c%" PRIu64 "/%s) = %d", c, name, rc);
			s->over = over;
			charge_or_die(ns, s, over ? OVER_USAGE : NS_USAGE, name);
			if (over)
				over_made++;
		}
	}
	if (next != groups || over_made != OVER)
		bench_fatal("built %" PRIu64 " groups with %d over, expected %" PRIu64 " and %d", next, over_made,
		      groups, OVER);
	in->total = in->customers * CUST_USAGE + (ns_total - OVER) * NS_USAGE + OVER * OVER_USAGE;
}

static void instance_verify(struct instance *in, const char *when)
{
	struct sl_stats st;
	int rc = sl_group_stats(in->root, &st);

	if (rc != 0)
		bench_fatal("sl_group_stats(root) = %d", rc);
	if (st.usage != in->total)
		bench_fatal("%s: root usage %" PRIu64 ", the host holds %" PRIu64, when, st.usage, in->total);
	rc = sl_tree_check(in->t);
	if (rc != 0)
		bench_fatal("%s: sl_tree_check = %d", when, rc);
}

static void instance_free(struct instance *in)
{
	sl_tree_destroy(in->t);
	free(in->state);
	memset(in, 0, sizeof(*in));
}

/*
 * One timed sl_reclaim() call, checked, then (untimed) the re-charge of what
 * it freed.  Returns the call's time in ns; *victims: callbacks that freed.
 */
static uint64_t one_call(struct instance *in, const char *what, size_t *victims)
{
	uint64_t t0, t1, freed, sum = 0;
	size_t i;

	cb_n = 0;
	cb_overflow = false;
	cb_err = 0;
	t0 = bench_now_ns();
	freed = sl_reclaim(in->root, TARGET, 0);
	t1 = bench_now_ns();

	if (cb_err)
		bench_fatal("%s: sl_uncharge in the reclaim callback = %d", what, cb_err);
	if (cb_overflow)
		bench_fatal("%s: more than %d callbacks in one sl_reclaim", what, LOG_MAX);
	for (i = 0; i < cb_n; i++) {
		sum += cb_log[i].amount;
		if (!cb_log[i].s->over)
			bench_fatal("%s: reclaim asked a group within its soft limit (pass 1 should be "
			      "satisfied by the %d over groups)", what, OVER);
	}
	if (freed != TARGET)
		bench_fatal("%s: sl_reclaim returned %" PRIu64 ", expected %" PRIu64, what, freed, TARGET);
	if (sum != TARGET)
		bench_fatal("%s: the callbacks freed %" PRIu64 ", expected %" PRIu64, what, sum, TARGET);

	/* Back to the steady state: 10 groups over, everything else as built. */
	for (i = 0; i < cb_n; i++)
		charge_or_die(cb_log[i].g, cb_log[i].s, cb_log[i].amount, "re-charge");
	*victims = cb_n;
	return t1 - t0;
}

/* ----------------------------------------------------------------- driver */

struct config {
	enum sl_policy policy;
	uint64_t groups;
	double ns;             /* median over runs of the mean ns per call */
	double runs[MAX_REPS];
	int nruns;
	uint64_t calls;        /* timed calls, all runs */
	double victims;        /* callbacks per call */
	double first_ns;       /* ns of the first call (not counted in ns) */
	double build_s;
};

static struct config configs[N_SIZES * N_POLICIES];
static int n_configs;
static uint64_t sizes[N_SIZES]; /* the sizes this run measures */
static int n_sizes;

static void run_config(struct config *c, int idx, int reps, uint64_t target_ns, uint64_t batch)
{
	struct instance in;
	char what[96];
	uint64_t t0, victims = 0;
	size_t v;
	double runs[MAX_REPS];

	snprintf(what, sizeof(what), "%s groups=%" PRIu64, policy_name(c->policy), c->groups);
	bench_progress("[%2d/%d] %-10s groups=%-7" PRIu64 " building...", idx + 1, n_configs,
		       policy_name(c->policy), c->groups);
	t0 = bench_now_ns();
	instance_build(&in, c->policy, c->groups, batch);
	c->build_s = (double)(bench_now_ns() - t0) / 1e9;
	instance_verify(&in, what);
	bench_progress(" %.2f s, timing...", c->build_s);

	/* The first call on the fresh tree: reported, not part of the figure. */
	c->first_ns = (double)one_call(&in, what, &v);

	for (int r = 0; r < reps; r++) {
		uint64_t start = bench_now_ns(), sum = 0, n = 0;

		while (n < MIN_CALLS || (n < MAX_CALLS && bench_now_ns() - start < target_ns)) {
			sum += one_call(&in, what, &v);
			victims += v;
			n++;
		}
		runs[r] = c->runs[r] = (double)sum / (double)n;
		c->calls += n;
	}
	c->nruns = reps;
	c->ns = bench_median(runs, reps);
	c->victims = (double)victims / (double)c->calls;
	instance_verify(&in, what);
	instance_free(&in);

	bench_json("{\"bench\":\"reclaim\",\"policy\":\"%s\",\"groups\":%" PRIu64 ",\"over\":%d,"
		   "\"batch\":%" PRIu64 ",\"target\":%" PRIu64 ",\"ns_per_call\":%.1f,"
		   "\"freed_per_call\":%" PRIu64 ",\"victims_per_call\":%.2f,\"calls\":%" PRIu64 ","
		   "\"first_call_ns\":%.0f,\"build_s\":%.3f}",
		   policy_name(c->policy), c->groups, OVER, batch == SL_BATCH_NONE ? 0 : batch, TARGET,
		   c->ns, TARGET, c->victims, c->calls, c->first_ns, c->build_s);

	bench_progress(" %12.1f ns/call  (%" PRIu64 " calls; runs:", c->ns, c->calls);
	for (int r = 0; r < reps; r++)
		bench_progress(" %.1f", c->runs[r]);
	bench_progress("; first call %.0f ns)\n", c->first_ns);
}

static const struct config *find(enum sl_policy p, uint64_t groups)
{
	if (groups == 0)
		return NULL;
	for (int i = 0; i < n_configs; i++)
		if (configs[i].policy == p && configs[i].groups == groups && configs[i].nruns > 0)
			return &configs[i];
	return NULL;
}

static void print_table(void)
{
	fprintf(stderr, "\nns per sl_reclaim(root, %" PRIu64 ") call (median of runs; %d groups over)\n",
		TARGET, OVER);
	fprintf(stderr, "%-10s", "policy");
	for (int s = 0; s < n_sizes; s++)
		fprintf(stderr, "  %12" PRIu64, sizes[s]);
	fprintf(stderr, "  %10s\n", "1e6/1e3");
	for (int p = 0; p < N_POLICIES; p++) {
		const struct config *lo = find(policy_list[p], size_list[0]);
		const struct config *hi = find(policy_list[p], size_list[N_SIZES - 1]);
		bool any = false;

		for (int s = 0; s < n_sizes; s++)
			any = any || find(policy_list[p], sizes[s]);
		if (!any)
			continue;
		fprintf(stderr, "%-10s", policy_name(policy_list[p]));
		for (int s = 0; s < n_sizes; s++) {
			const struct config *c = find(policy_list[p], sizes[s]);

			if (c)
				fprintf(stderr, "  %12.1f", c->ns);
			else
				fprintf(stderr, "  %12s", "-");
		}
		if (lo && hi && lo != hi && lo->ns > 0)
			fprintf(stderr, "  %10.2f\n", hi->ns / lo->ns);
		else
			fprintf(stderr, "  %10s\n", "-");
	}
	fputc('\n', stderr);
}

/*
 * Every policy finds its pass-1 victims in indexes (GUARANTEE and
 * GATEKEEPER: groups over their soft limit; PROTECTION: those, and the
 * subtrees where effective low is cut): the cost should follow the number
 * of groups over, not the tree's size.
 */
static void print_ratios(void)
{
	const double bound = 4.0;

	for (int p = 0; p < N_POLICIES; p++) {
		enum sl_policy pol = policy_list[p];
		const struct config *lo = find(pol, size_list[0]);
		const struct config *hi = find(pol, size_list[N_SIZES - 1]);
		double value;

		if (!lo || !hi || lo == hi || lo->ns <= 0)
			continue;
		value = hi->ns / lo->ns;
		bench_json("{\"bench\":\"reclaim_ratio\",\"policy\":\"%s\",\"name\":\"cost_1e6_over_1e3\","
			   "\"value\":%.2f,\"goal\":\"<= %g\",\"met\":%s}",
			   policy_name(pol), value, bound, value <= bound ? "true" : "false");
		bench_progress("%-10s ns/call at 10^6 groups / at 10^3 = %9.2f  goal <= %g  %s\n",
			       policy_name(pol), value, bound, value <= bound ? "met" : "NOT MET");
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_reclaim [--quick] [--json-only] [--batch-default] [--groups=N]\n"
		"                     [--policy=guarantee|gatekeeper|protection] [--help]\n"
		"\n"
		"Measures ns per sl_reclaim(root, %" PRIu64 ") call on trees of 10^3, 10^4, 10^5 and 10^6\n"
		"groups (root -> isqrt(N) customers -> namespaces) with %d groups over their soft\n"
		"limits, for the policies guarantee, gatekeeper and protection.  What a call frees\n"
		"is charged back between calls (untimed), so every call sees the same tree.\n"
		"\n"
		"  --quick          ~0.2 s per run, 3 runs per configuration (whole run < 60 s)\n"
		"                   (default: ~1 s per run, 5 runs)\n"
		"  --json-only      only the JSON lines on stdout: no progress, table or ratios on stderr\n"
		"  --batch-default  trees with SL_BATCH_DEFAULT (%" PRIu64 ") per-thread stocks\n"
		"                   (default: SL_BATCH_NONE, reported as batch 0)\n"
		"  --groups=N       only trees of N groups (100..10^8): for profiling; no ratios\n"
		"  --policy=P       only policy P\n"
		"  --help           this text\n"
		"\n"
		"stdout: one JSON object per line, e.g.\n"
		"  {\"bench\":\"reclaim\",\"policy\":\"guarantee\",\"groups\":100000,\"over\":10,\"batch\":0,"
		"\"target\":64,\"ns_per_call\":1234.5,...}\n"
		"  {\"bench\":\"reclaim_ratio\",\"policy\":\"guarantee\",\"name\":\"cost_1e6_over_1e3\","
		"\"value\":1.20,\"goal\":\"<= 4\",\"met\":true}\n"
		"Exit status: 0 done, 1 a call failed verification, 2 bad arguments.\n"
		"Memory: the 10^6-group tree takes about 300 MB; one tree exists at a time.\n",
		TARGET, OVER, SL_BATCH_DEFAULT);
}

/* The command line's choices beyond bench_common.h's. */
static uint64_t opt_batch = SL_BATCH_NONE;
static uint64_t opt_groups;       /* 0: every size */
static const char *opt_policy;    /* NULL: every policy */

static int reclaim_flag(const char *arg)
{
	if (strcmp(arg, "--batch-default") == 0) {
		opt_batch = SL_BATCH_DEFAULT;
		return 1;
	}
	if (strncmp(arg, "--policy=", 9) == 0) {
		opt_policy = arg + 9;
		if (strcmp(opt_policy, "guarantee") && strcmp(opt_policy, "gatekeeper") &&
		    strcmp(opt_policy, "protection")) {
			fprintf(stderr, "bench_reclaim: unknown policy '%s'\n", opt_policy);
			return -1;
		}
		return 1;
	}
	return bench_flag_u64(arg, "--groups", 100, 100000000, &opt_groups);
}

int main(int argc, char **argv)
{
	uint64_t t_start;

	bench_parse_args(argc, argv, "bench_reclaim", usage, reclaim_flag);

	n_sizes = opt_groups ? 1 : N_SIZES;
	for (int s = 0; s < n_sizes; s++)
		sizes[s] = opt_groups ? opt_groups : size_list[s];
	/* Size-major: the three policies of one size run back to back. */
	for (int s = 0; s < n_sizes; s++)
		for (int p = 0; p < N_POLICIES; p++) {
			if (opt_policy && strcmp(opt_policy, policy_name(policy_list[p])) != 0)
				continue;
			configs[n_configs].policy = policy_list[p];
			configs[n_configs].groups = sizes[s];
			n_configs++;
		}

	t_start = bench_start(" (at least %d calls) per configuration, %d configurations, batch %s",
			      MIN_CALLS, n_configs,
			      opt_batch == SL_BATCH_NONE ? "SL_BATCH_NONE (0)" : "SL_BATCH_DEFAULT");
	for (int i = 0; i < n_configs; i++)
		run_config(&configs[i], i, bench.reps, bench.target_ns, opt_batch);

	if (!bench.json_only)
		print_table();
	print_ratios();
	bench_finish(t_start, true);
	return 0;
}
