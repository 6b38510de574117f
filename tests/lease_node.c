/* SPDX-License-Identifier: MIT */
/*
 * One participant of a leased budget, for the fleet fault tests
 * (tests/etcd_faults.py): a group that joins BUDGET in the store at URL and
 * charges to follow a demand, like a cache that always fills its share.
 *
 *   lease_node --store URL --budget NAME --status FILE --demand UNITS
 *              [--period MS] [--ttl MS] [--margin MS] [--timeout MS] [--node NAME]
 *   lease_node --store URL --set-budget NAME --max N [--min N] [--soft N]
 *
 * A reclaim callback evicts (uncharges) what reclaim asks for, so a charge
 * at the share evicts and a lowered share shrinks the group.  The demand is
 * re-read from FILE.demand when that file exists (the test moves it).
 *
 * FILE is a shared status block (a version count, then two slots of 16
 * little-endian u64 at words 16 and 32: version n is in slot n % 2, so a
 * writer stopped in the middle of a write leaves the last complete version
 * readable; a reader keeps a slot when the count did not move).  It is
 * published every 2 ms, so that the test samples every node's usage without
 * asking it, and by the lease thread at every change of the lease (the
 * library's test hook), so that a node stopped anywhere leaves a block no
 * older than its lease: a shrink or a lowered floor shows before the store
 * hears of it, a grant before the group uses it.  Each second a status line
 * goes to stdout; a store reset is logged on stderr the moment it is seen.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <softlimit/lease.h>
#include <softlimit/softlimit.h>

#include "lease_int.h"

#define UNIT 10u
#define ST_WORDS 16
#define ST_FILE_WORDS (3 * ST_WORDS) /* the count, then slots at 16 and 32 */

enum {
	ST_SEQ, ST_PID, ST_USAGE, ST_SHARE, ST_FLOOR, ST_STATE, ST_EXPIRES, ST_RESETS,
	ST_FENCES, ST_RENEWALS, ST_ERRORS, ST_GRANTS, ST_SHRINKS, ST_MONO_NS, ST_DEMAND, ST_MAX,
};

static sl_group *group;
static _Atomic uint64_t charged;      /* units this node holds (its "items") */
static _Atomic uint64_t demand_units;
static atomic_bool stopping;
static _Atomic uint64_t *status;
/* Two writers: the main loop and the lease thread's hook. */
static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t evict(sl_group *g, uint64_t target, void *ctx)
{
	uint64_t have = atomic_load_explicit(&charged, memory_order_relaxed), take;

	(void)ctx;
	do {
		take = target < have ? target : have;
		take -= take % UNIT;
		if (take == 0 && have >= UNIT)
			take = UNIT;
		if (take == 0)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&charged, &have, have - take,
							memory_order_relaxed, memory_order_relaxed));
	sl_uncharge(g, take);
	return take;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Follow the demand: a few charges or uncharges per tick. */
static void *charger(void *arg)
{
	const char *demand_file = arg;
	unsigned tick = 0;

	while (!atomic_load(&stopping)) {
		uint64_t want = atomic_load(&demand_units);

		if (demand_file && tick++ % 100 == 0) {
			FILE *f = fopen(demand_file, "r");
			unsigned long long d;

			if (f) {
				if (fscanf(f, "%llu", &d) == 1)
					atomic_store(&demand_units, d);
				fclose(f);
			}
		}
		for (int i = 0; i < 20; i++) {
			uint64_t have = atomic_load(&charged);

			if (have + UNIT <= want) {
				if (sl_charge(group, UNIT, 0) == 0)
					atomic_fetch_add(&charged, UNIT);
			} else if (have >= want + UNIT) {
				if (evict(group, UNIT, NULL) == 0)
					break;
			} else {
				break;
			}
		}
		sleep_ms(1);
	}
	return NULL;
}

static void publish(sl_lease *l)
{
	struct sl_lease_stats ls;
	struct sl_stats gs;
	struct sl_limits lim;
	uint64_t v[ST_WORDS] = { 0 };
	uint64_t seq;

	pthread_mutex_lock(&status_lock);
	seq = atomic_load_explicit(&status[ST_SEQ], memory_order_relaxed);
	if (sl_lease_stats(l, &ls) || sl_group_stats(group, &gs) || sl_group_limits(group, &lim)) {
		pthread_mutex_unlock(&status_lock);
		return;
	}
	v[ST_PID] = (uint64_t)getpid();
	v[ST_USAGE] = gs.usage + gs.stocked;
	v[ST_SHARE] = ls.share;
	v[ST_FLOOR] = ls.floor;
	v[ST_STATE] = (uint64_t)ls.state;
	v[ST_EXPIRES] = (uint64_t)ls.expires_ms;
	v[ST_RESETS] = ls.store_resets;
	v[ST_FENCES] = ls.fences;
	v[ST_RENEWALS] = ls.renewals;
	v[ST_ERRORS] = ls.store_errors;
	v[ST_GRANTS] = ls.grants;
	v[ST_SHRINKS] = ls.shrinks;
	v[ST_DEMAND] = ls.demand;
	v[ST_MAX] = lim.max;
	/* Version seq + 1 into the slot the count does not name, then the
	 * count: a reader copies the named slot, kept if the count held. */
	seq++;
	v[ST_SEQ] = seq;
	v[ST_MONO_NS] = mono_ns();
	for (int i = 0; i < ST_WORDS; i++)
		atomic_store_explicit(&status[ST_WORDS * (1 + seq % 2) + i], v[i],
				      memory_order_relaxed);
	atomic_store_explicit(&status[ST_SEQ], seq, memory_order_release);
	pthread_mutex_unlock(&status_lock);
}

static void *lease_thread(void *arg)
{
	sl_lease_run(arg);
	return NULL;
}

static const char *opt(int argc, char **argv, const char *name, const char *def)
{
	for (int i = 1; i + 1 < argc; i++) {
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
	}
	return def;
}

static int set_budget(sl_lease_store *s, const char *name, int argc, char **argv)
{
	struct sl_limits lim;
	int rc;

	sl_limits_init(&lim);
	lim.max = strtoull(opt(argc, argv, "--max", "0"), NULL, 0);
	lim.min = strtoull(opt(argc, argv, "--min", "0"), NULL, 0);
	lim.soft = strtoull(opt(argc, argv, "--soft", "0"), NULL, 0);
	/* Right after a cluster (re)start the store may have no leader yet. */
	for (int i = 0; i < 300; i++) {
		rc = sl_lease_budget_set(s, name, &lim);
		if (rc != -ETIMEDOUT && rc != -ECONNREFUSED && rc != -EIO)
			break;
		sleep_ms(200);
	}
	if (rc)
		fprintf(stderr, "lease_node: budget set %s: %s\n", name, strerror(-rc));
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *url = opt(argc, argv, "--store", NULL);
	const char *budget = opt(argc, argv, "--budget", NULL);
	const char *status_path = opt(argc, argv, "--status", NULL);
	struct sl_lease_store_opts so;
	struct sl_lease_opts lo;
	struct sl_tree_opts to;
	struct sl_ops ops = { .reclaim = evict };
	sl_lease_store *s = NULL;
	sl_lease *l = NULL;
	sl_tree *t = NULL;
	pthread_t ct, lt;
	char demand_file[4096];
	uint64_t resets = 0;
	int fd, rc;

	sl_lease_store_opts_init(&so);
	so.timeout_ms = (uint32_t)strtoul(opt(argc, argv, "--timeout", "1000"), NULL, 0);
	so.node = opt(argc, argv, "--node", NULL);
	if (!url) {
		fprintf(stderr, "usage: see the top of tests/lease_node.c\n");
		return 2;
	}
	rc = sl_lease_store_open(url, &so, &s);
	if (rc) {
		fprintf(stderr, "lease_node: open %s: %s\n", url, strerror(-rc));
		return 1;
	}
	if (opt(argc, argv, "--set-budget", NULL)) {
		rc = set_budget(s, opt(argc, argv, "--set-budget", NULL), argc, argv);
		sl_lease_store_close(s);
		return rc;
	}
	if (!budget || !status_path) {
		fprintf(stderr, "lease_node: --budget and --status are needed\n");
		return 2;
	}
	fd = open(status_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, ST_FILE_WORDS * 8) != 0)
		return 1;
	status = mmap(NULL, ST_FILE_WORDS * 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (status == MAP_FAILED)
		return 1;
	atomic_store(&demand_units, strtoull(opt(argc, argv, "--demand", "0"), NULL, 0));
	snprintf(demand_file, sizeof(demand_file), "%s.demand", status_path);

	sl_tree_opts_init(&to);
	if (sl_tree_create(&to, &t) || sl_group_create(sl_tree_root(t), "tenant", NULL, &ops, NULL,
						       &group))
		return 1;
	sl_lease_opts_init(&lo);
	lo.period_ms = (uint32_t)strtoul(opt(argc, argv, "--period", "200"), NULL, 0);
	lo.ttl_ms = (uint32_t)strtoul(opt(argc, argv, "--ttl", "2000"), NULL, 0);
	lo.margin_ms = (uint32_t)strtoul(opt(argc, argv, "--margin", "1000"), NULL, 0);
	sl__lease_publish_hook = publish;
	/* Join on the lease thread: the cluster may be electing a leader. */
	lo.flags = SL_LEASE_DEFERRED;
	rc = sl_lease_join(s, budget, group, &lo, &l);
	if (rc) {
		fprintf(stderr, "lease_node: join %s: %s\n", budget, strerror(-rc));
		return 1;
	}
	if (pthread_create(&lt, NULL, lease_thread, s) ||
	    pthread_create(&ct, NULL, charger, demand_file))
		return 1;
	for (unsigned n = 0;; n++) {
		struct sl_lease_stats ls;

		publish(l);
		if (sl_lease_stats(l, &ls) == 0) {
			if (ls.store_resets > resets) {
				/* The line the fault test waits for, as slcache logs it. */
				fprintf(stderr,
					"lease_node: store reset: budget %s's store is new; "
					"fell to floor %" PRIu64 " (store_resets %" PRIu64 ")\n",
					budget, ls.floor, ls.store_resets);
				resets = ls.store_resets;
			}
			if (n % 500 == 0) {
				printf("usage=%" PRIu64 " share=%" PRIu64 " floor=%" PRIu64
				       " state=%d renewals=%" PRIu64 " errors=%" PRIu64
				       " fences=%" PRIu64 " resets=%" PRIu64 "\n",
				       atomic_load(&charged), ls.share, ls.floor, (int)ls.state,
				       ls.renewals, ls.store_errors, ls.fences, ls.store_resets);
				fflush(stdout);
			}
		}
		sleep_ms(2);
	}
}
