/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h: the harness every benchmark program shares.
 *
 * Clocks, the median of a few runs, the command line every benchmark takes
 * (--quick, --json-only, --help, plus its own flags), fatal errors, JSON
 * Lines on stdout and progress on stderr.  Also what two benchmarks build
 * alike: a chain of groups, and the atomic-walk baseline.
 *
 * One program, one benchmark: the state below is per program.  Include it
 * after defining _POSIX_C_SOURCE (clock_gettime, pthread barriers).
 * Everything is static: a program uses what it needs, and nothing here
 * needs a library of its own.
 */
#ifndef SL_BENCH_COMMON_H
#define SL_BENCH_COMMON_H

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <softlimit/softlimit.h>

#if defined(__GNUC__) || defined(__clang__)
#define BENCH_NOINLINE __attribute__((noinline))
#define BENCH_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define BENCH_NORETURN __attribute__((noreturn))
#define BENCH_UNUSED __attribute__((unused))
#else
#define BENCH_NOINLINE
#define BENCH_PRINTF(fmt, args)
#define BENCH_NORETURN
#define BENCH_UNUSED
#endif

#define BENCH_CACHELINE 64
#define BENCH_MAX_RUNS 64        /* the most runs bench_median() takes */
#define BENCH_NS_PER_S 1000000000u

/* What the command line chose; bench_parse_args() fills it. */
static struct {
	const char *name;   /* the program's name: prefixes every message */
	bool json_only;     /* --json-only: nothing on stderr but fatal errors */
	bool quick;         /* --quick */
	int reps;           /* runs per configuration: 3 with --quick, else 5 */
	uint64_t target_ns; /* length of a run: 0.2 s with --quick, else 1 s */
} bench = {.name = "bench"};

/* ------------------------------------------------------------- messages */

/* Print to stderr, and exit with status 1 (a run failed verification). */
static inline BENCH_NORETURN BENCH_PRINTF(1, 2) void bench_fatal(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	/* A progress line may be open: start a line of our own. */
	fprintf(stderr, "\n%s: FATAL: ", bench.name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* "NAME: warning: ..." on stderr, whatever --json-only says. */
static inline BENCH_PRINTF(1, 2) void bench_warn(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: warning: ", bench.name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Progress, tables and notes: stderr, flushed, unless --json-only. */
static inline BENCH_PRINTF(1, 2) void bench_progress(const char *fmt, ...)
{
	va_list ap;

	if (bench.json_only)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

/* One JSON object on stdout: @fmt without the newline, which this adds.
 * Flushed, so that a later fatal error leaves every finished line. */
static inline BENCH_PRINTF(1, 2) void bench_json(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* Write @n values as a JSON array with @decimals digits ("[1.00,2.50]")
 * into @buf of @size bytes. */
static inline void bench_json_array(char *buf, size_t size, const double *v, int n, int decimals)
{
	size_t len = 0;
	int w = snprintf(buf, size, "[");

	for (int i = 0; w >= 0 && (len += (size_t)w) < size && i < n; i++)
		w = snprintf(buf + len, size - len, "%s%.*f", i ? "," : "", decimals, v[i]);
	if (w >= 0 && len < size)
		w = snprintf(buf + len, size - len, "]");
	if (w < 0 || len + (size_t)w >= size)
		bench_fatal("a JSON array of %d values does not fit in %zu bytes", n, size);
}

/* --------------------------------------------------------------- clocks */

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		bench_fatal("clock_gettime(CLOCK_MONOTONIC) failed");
	return (uint64_t)ts.tv_sec * BENCH_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread: with the wall time, tells whether the
 * thread had a CPU of its own while it ran. */
static inline uint64_t bench_thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		bench_fatal("clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
	return (uint64_t)ts.tv_sec * BENCH_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* ----------------------------------------------------------- statistics */

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of @n values (1..BENCH_MAX_RUNS); @in is left as it was. */
static inline double bench_median(const double *in, int n)
{
	double v[BENCH_MAX_RUNS];

	if (n < 1 || n > BENCH_MAX_RUNS)
		bench_fatal("median of %d values (1..%d)", n, BENCH_MAX_RUNS);
	memcpy(v, in, (size_t)n * sizeof(v[0]));
	qsort(v, (size_t)n, sizeof(v[0]), bench_cmp_double);
	return (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* How many ops make a run of about @target_ns at @ns_per_op, within [lo, hi]. */
static inline uint64_t bench_ops_for(uint64_t target_ns, double ns_per_op, uint64_t lo, uint64_t hi)
{
	double n;

	if (ns_per_op < 0.01)
		ns_per_op = 0.01;
	n = (double)target_ns / ns_per_op;
	if (n < (double)lo)
		n = (double)lo;
	if (n > (double)hi)
		n = (double)hi;
	return (uint64_t)n;
}

/* --------------------------------------------------------- command line */

/*
 * A benchmark's own flags: return 1 when @arg is one of them (and taken),
 * 0 when it is not, -1 when its value is bad (after saying why on stderr).
 */
typedef int (*bench_flag_fn)(const char *arg);

/*
 * Parse the command line of program @name.  --quick, --json-only and
 * --help/-h are everyone's; @own (may be NULL) takes the rest.  --help
 * prints @usage to stdout and exits 0; an unknown argument or a bad value
 * prints it to stderr and exits 2.  Sets bench.reps and bench.target_ns
 * for the mode (a program may change them afterwards).
 */
static inline void bench_parse_args(int argc, char **argv, const char *name, void (*usage)(FILE *f),
				    bench_flag_fn own)
{
	bench.name = name;
	for (int i = 1; i < argc; i++) {
		int taken = own ? own(argv[i]) : 0;

		if (taken > 0)
			continue;
		if (taken < 0) {
			usage(stderr);
			exit(2);
		}
		if (strcmp(argv[i], "--quick") == 0) {
			bench.quick = true;
		} else if (strcmp(argv[i], "--json-only") == 0) {
			bench.json_only = true;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			exit(0);
		} else {
			fprintf(stderr, "%s: unknown argument '%s'\n", name, argv[i]);
			usage(stderr);
			exit(2);
		}
	}
	bench.reps = bench.quick ? 3 : 5;
	bench.target_ns = bench.quick ? BENCH_NS_PER_S / 5 : BENCH_NS_PER_S;
}

/* The value of "--flag=VALUE" as a whole number in [lo, hi]: 1 and *out
 * set, 0 when @arg is not @flag, -1 (said on stderr) when the value is bad. */
static inline int bench_flag_u64(const char *arg, const char *flag, uint64_t lo, uint64_t hi,
				 uint64_t *out)
{
	size_t n = strlen(flag);
	unsigned long long v;
	char *end;

	if (strncmp(arg, flag, n) != 0 || arg[n] != '=')
		return 0;
	errno = 0;
	v = strtoull(arg + n + 1, &end, 10);
	if (errno || end == arg + n + 1 || *end || arg[n + 1] == '-' || v < lo || v > hi) {
		fprintf(stderr, "%s: %s wants %llu..%llu, not '%s'\n", bench.name, flag,
			(unsigned long long)lo, (unsigned long long)hi, arg + n + 1);
		return -1;
	}
	*out = (uint64_t)v;
	return 1;
}

/* ----------------------------------------------------- start and finish */

/* The first progress line: the library's version, the mode, its runs and
 * their length (unless bench.target_ns is 0), then @fmt; a warning for an unoptimised build.  Returns the start time
 * for bench_finish(). */
static inline BENCH_PRINTF(1, 2) uint64_t bench_start(const char *fmt, ...)
{
	va_list ap;

	if (!bench.json_only) {
		fprintf(stderr, "%s: softlimit %s, %s mode: %d runs", bench.name, sl_version(),
			bench.quick ? "quick" : "full", bench.reps);
		if (bench.target_ns)
			fprintf(stderr, " of ~%.1f s", (double)bench.target_ns / 1e9);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
#ifndef __OPTIMIZE__
		bench_warn("built without optimisation; use -DCMAKE_BUILD_TYPE=Release");
#endif
	}
	return bench_now_ns();
}

/* The last progress line: the total time, and with @rss the peak RSS. */
static inline void bench_finish(uint64_t t_start, bool rss)
{
	struct rusage ru;

	if (bench.json_only)
		return;
	fprintf(stderr, "\n%s: total %.1f s", bench.name, (double)(bench_now_ns() - t_start) / 1e9);
	if (rss && getrusage(RUSAGE_SELF, &ru) == 0)
		fprintf(stderr, ", peak RSS %.0f MB", (double)ru.ru_maxrss / 1024.0);
	fputc('\n', stderr);
}

/* ------------------------------------------------------ a chain of groups */

/*
 * A tree of @depth groups in a chain below the root (path[0] the root,
 * path[depth] the deepest), every one with max @max and no callback, and
 * per-thread stocks of @batch units (SL_BATCH_NONE: none).  Warns when the
 * tree reports another batch than asked.
 */
static inline sl_tree *bench_sl_chain(uint64_t batch, int depth, uint64_t max, sl_group **path)
{
	struct sl_tree_opts opts;
	struct sl_limits lim;
	sl_tree *t;
	uint64_t want, got;
	int rc;

	sl_tree_opts_init(&opts);
	opts.batch = batch;
	opts.root.max = max;
	rc = sl_tree_create(&opts, &t);
	if (rc != 0)
		bench_fatal("sl_tree_create(batch=%" PRIu64 ") = %d", batch, rc);
	path[0] = sl_tree_root(t);
	sl_limits_init(&lim);
	lim.max = max;
	for (int i = 1; i <= depth; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%d", i);
		rc = sl_group_create(path[i - 1], name, &lim, NULL, NULL, &path[i]);
		if (rc != 0)
			bench_fatal("sl_group_create(%s) = %d", name, rc);
	}
	want = batch == SL_BATCH_NONE ? 0 : batch;
	got = sl_tree_batch(t);
	if (got != want)
		bench_warn("asked batch %" PRIu64 ", sl_tree_batch() says %" PRIu64, want, got);
	return t;
}

/* ------------------------------------------------ the atomic-walk baseline */

/*
 * One relaxed atomic add per level with a max check, rolled back on
 * failure, and one atomic sub per level on uncharge, as the kernel's
 * page_counter does.  Each level's counter on its own cache line.  Relaxed
 * is enough: the counters order nothing but themselves.
 */
struct bench_aw_node {
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t usage;
	uint64_t max;
	struct bench_aw_node *parent;
};

/* Link @n levels, [0] the root, each with @max; returns the deepest. */
static inline struct bench_aw_node *bench_aw_init(struct bench_aw_node *node, int n, uint64_t max)
{
	for (int i = 0; i < n; i++) {
		atomic_init(&node[i].usage, 0);
		node[i].max = max;
		node[i].parent = i ? &node[i - 1] : NULL;
	}
	return &node[n - 1];
}

/* Not inline, as a library call would not be; unused in some programs. */
static BENCH_NOINLINE BENCH_UNUSED int bench_aw_charge(struct bench_aw_node *leaf, uint64_t amount)
{
	struct bench_aw_node *n, *u;

	for (n = leaf; n; n = n->parent) {
		uint64_t nv = atomic_fetch_add_explicit(&n->usage, amount, memory_order_relaxed) + amount;

		if (nv > n->max) {
			atomic_fetch_sub_explicit(&n->usage, amount, memory_order_relaxed);
			for (u = leaf; u != n; u = u->parent)
				atomic_fetch_sub_explicit(&u->usage, amount, memory_order_relaxed);
			return -ENOMEM;
		}
	}
	return 0;
}

static BENCH_NOINLINE BENCH_UNUSED int bench_aw_uncharge(struct bench_aw_node *leaf, uint64_t amount)
{
	for (struct bench_aw_node *n = leaf; n; n = n->parent)
		atomic_fetch_sub_explicit(&n->usage, amount, memory_order_relaxed);
	return 0;
}

#endif /* SL_BENCH_COMMON_H */
