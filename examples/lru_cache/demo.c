/* SPDX-License-Identifier: MIT */
/*
 * lru_demo: the noisy neighbour, with and without softlimit.
 *
 * A 64 MiB cache serves two tenants.  "steady" reads a 20 MiB working set
 * in a loop, filling it on a miss; "noisy" streams 4x the cache size of keys
 * it never reads again, four for each read of steady's.  The same trace runs
 * twice: on a softlimit cache under SL_POLICY_GUARANTEE, where steady's soft
 * limit of 24 MiB covers its working set and noisy's is 0, and on a plain
 * shared LRU of the same size.  A loop longer than what an LRU keeps between
 * two reads of a key misses every time: the shared LRU gives steady almost
 * nothing, softlimit everything.
 *
 * Deterministic, single-threaded; exits 0 when softlimit kept steady's
 * working set (at least 99% hits once the flood has filled the cache), 1
 * otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <softlimit/softlimit.h>

#include "lru_cache.h"

#define MiB ((uint64_t)1 << 20)

#define CACHE_BYTES (64 * MiB)
#define STEADY_SOFT (24 * MiB)
#define STEADY_WSS (20 * MiB)
#define FLOOD_BYTES (4 * CACHE_BYTES)
#define NOISY_PER_READ 4 /* noisy's misses for each read of steady's */
#define VALUE_LEN 960    /* with its key and header, an item is about 1 KiB */

struct tenant_result {
	double hit_ratio; /* once the flood filled the cache */
	uint64_t bytes;   /* held after it    */
	uint64_t evictions;
};

struct run_result {
	struct tenant_result steady, noisy;
};

static unsigned char value[VALUE_LEN];

/* A cache-aside read: get, and on a miss fill the key as the backend would. */
static int read_through(struct lru_tenant *t, const char *prefix, uint64_t n)
{
	char key[32];
	int len = snprintf(key, sizeof(key), "%s:%" PRIu64, prefix, n);
	int err = lru_get(t, key, (size_t)len, NULL, 0, NULL);

	if (err == -ENOENT)
		err = lru_set(t, key, (size_t)len, value, sizeof(value));
	return err;
}

static void result_of(struct lru_tenant *t, const struct lru_stats *before, struct tenant_result *r)
{
	struct lru_stats s;
	uint64_t hits, reads;

	lru_tenant_stats(t, &s);
	hits = s.hits - before->hits;
	reads = hits + s.misses - before->misses;
	r->hit_ratio = reads ? 100.0 * (double)hits / (double)reads : 0.0;
	r->bytes = s.bytes;
	r->evictions = s.evictions;
}

/* The trace, on a cache whose tenants @steady and @noisy are set up. */
static int run_trace(struct lru_tenant *steady, struct lru_tenant *noisy, struct run_result *r)
{
	uint64_t wss_items = STEADY_WSS / lru_item_size(strlen("steady:00000"), VALUE_LEN);
	uint64_t flood_items = FLOOD_BYTES / lru_item_size(strlen("noisy:000000"), VALUE_LEN);
	struct lru_stats s0, n0;
	uint64_t i, next = 0;
	int err = 0;

	/* Warm-up: steady reads its working set once. */
	for (i = 0; i < wss_items && !err; i++)
		err = read_through(steady, "steady", i);

	/* The flood, with steady still looping over its working set.  Hits
	 * are counted once the flood has written a cache's worth: before
	 * that, even the shared LRU still holds the warm-up.  A set that
	 * fails with -ENOMEM is a miss the cache could not keep, not an
	 * error of the demo. */
	for (i = 0; i < flood_items && (!err || err == -ENOMEM); i++) {
		if (i == flood_items * CACHE_BYTES / FLOOD_BYTES) {
			lru_tenant_stats(steady, &s0);
			lru_tenant_stats(noisy, &n0);
		}
		err = read_through(noisy, "noisy", i);
		if (i % NOISY_PER_READ == NOISY_PER_READ - 1 && (!err || err == -ENOMEM))
			err = read_through(steady, "steady", next++ % wss_items);
	}
	if (err && err != -ENOMEM)
		return err;
	result_of(steady, &s0, &r->steady);
	result_of(noisy, &n0, &r->noisy);
	return 0;
}

static int run_softlimit(struct run_result *r)
{
	struct sl_tree_opts opts;
	struct sl_limits lim;
	struct lru_cache *c;
	struct lru_tenant *steady, *noisy;
	int err;

	sl_tree_opts_init(&opts);
	opts.policy = SL_POLICY_GUARANTEE;
	opts.root.max = CACHE_BYTES;
	err = lru_cache_create(&opts, &c);
	if (err)
		return err;
	sl_limits_init(&lim);
	lim.soft = STEADY_SOFT; /* what steady keeps when memory is short */
	err = lru_tenant_create(c, NULL, "steady", &lim, &steady);
	lim.soft = 0;           /* noisy makes no claim: always reclaimable */
	if (!err)
		err = lru_tenant_create(c, NULL, "noisy", &lim, &noisy);
	if (!err)
		err = run_trace(steady, noisy, r);
	lru_cache_destroy(c);
	return err;
}

static int run_shared(struct run_result *r)
{
	struct lru_cache *c;
	struct lru_tenant *steady, *noisy;
	int err = lru_cache_create_shared(CACHE_BYTES, &c);

	if (err)
		return err;
	err = lru_tenant_create(c, NULL, "steady", NULL, &steady);
	if (!err)
		err = lru_tenant_create(c, NULL, "noisy", NULL, &noisy);
	if (!err)
		err = run_trace(steady, noisy, r);
	lru_cache_destroy(c);
	return err;
}

static void print_row(const char *name, const char *soft, const struct tenant_result *a,
		      const struct tenant_result *b)
{
	printf("%-8s %-7s | %6.1f%% %7.1f MiB %9" PRIu64 " | %6.1f%% %7.1f MiB %9" PRIu64 "\n",
	       name, soft, a->hit_ratio, (double)a->bytes / MiB, a->evictions, b->hit_ratio,
	       (double)b->bytes / MiB, b->evictions);
}

int main(void)
{
	struct run_result sl, shared;
	int err;

	memset(value, 'v', sizeof(value));
	err = run_softlimit(&sl);
	if (!err)
		err = run_shared(&shared);
	if (err) {
		fprintf(stderr, "lru_demo: %s\n", strerror(-err));
		return 1;
	}

	printf("lru_demo: a %" PRIu64 " MiB cache, one trace, two ways (softlimit %s)\n",
	       CACHE_BYTES / MiB, sl_version());
	printf("  steady reads a %" PRIu64 " MiB working set in a loop, filling misses;\n",
	       STEADY_WSS / MiB);
	printf("  noisy writes %" PRIu64 " MiB of keys it never reads again, %d per read of steady's.\n",
	       FLOOD_BYTES / MiB, NOISY_PER_READ);
	printf("Hit ratio once the flood has filled the cache; bytes held and items evicted\n"
	       "at the end.\n\n");
	printf("%-8s %-7s | %-29s | %s\n", "", "", "softlimit (GUARANTEE)", "shared LRU");
	printf("%-8s %-7s | %7s %11s %9s | %7s %11s %9s\n", "tenant", "soft", "hits", "held",
	       "evicted", "hits", "held", "evicted");
	print_row("steady", "24 MiB", &sl.steady, &shared.steady);
	print_row("noisy", "0", &sl.noisy, &shared.noisy);
	return sl.steady.hit_ratio >= 99.0 ? 0 : 1;
}
