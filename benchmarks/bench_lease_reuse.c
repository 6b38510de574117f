/* SPDX-License-Identifier: MIT */
/*
 * bench_lease --workload slow-reuse: issue Demand's case, simulated key by
 * key.  Three caches share one tenant's budget (24 MiB); its keys (4 KiB
 * items, 1.5 times the budget) are each read again every r seconds, r
 * drawn uniformly in [1, 30], cache-aside (a miss is set at once).  The
 * client spreads them 70/25/5 over the caches, then flips the spread to
 * 5/25/70.
 *
 * Each cache is a real LRU over its keys, with ghosts (the keys of the last
 * --ghosts bytes it evicted, as slcache's), so what the demand hook reports
 * comes from what the cache saw: the idle time of its coldest item, what it
 * evicted and what refaulted, and the reuse (each hit's bytes times how
 * long the item had sat idle; a refault's with slcache's guess of its age,
 * lease.c).  Each period (250 ms) every cache turns its report into a
 * demand (lib/lease: the reuse rule, or the old rule that ignores reuse),
 * the allocator turns demands into shares (max-min, one view for all, no
 * store), and a cache over its share evicts down to it at once.  Static: a
 * third each.
 *
 * One JSON line per allocator: the hit ratio before the flip, in the 30 s
 * after it and over the rest; how soon after the flip the newly hot cache
 * held more than 40% of the budget; the shares at the end.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_lease_reuse.h"

#define NODES 3
#define ITEM 4096u
#define BUDGET (24u << 20)
#define NKEYS (BUDGET / ITEM * 3 / 2)
#define PERIOD_MS 250
#define IDLE_LIMIT_MS 30000
#define GHOSTS ((64u << 20) / 8) /* the ghosts reach: slcache -m 64 --lease-store default */

enum rule { R_STATIC, R_OLD, R_REUSE, R_COUNT };
static const char *const rule_name[R_COUNT] = { "static", "maxmin-evictions", "maxmin-reuse" };

/* One cache: an LRU list over key indices, with ghosts. */
struct cache {
	int32_t prev[NKEYS], next[NKEYS];
	uint8_t in[NKEYS];
	int64_t atime[NKEYS];     /* ms */
	uint64_t ghost_at[NKEYS]; /* evicted_total when evicted, +1 (0: no ghost) */
	int32_t head, tail;       /* head: most recent */
	uint64_t usage, share, evicted_total;
	/* since the last period */
	uint64_t evicted, refaulted, reused, reuse_ms;
	uint64_t hits, reads;
	struct sl__lease_reuse reuse;
};

struct keyinfo {
	int64_t next_ms;    /* its next read */
	uint32_t every_ms;  /* r */
	double place;       /* its fixed point in [0, 1): the owner by weight */
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

static void unlink_key(struct cache *c, int32_t k)
{
	if (c->prev[k] >= 0)
		c->next[c->prev[k]] = c->next[k];
	else
		c->head = c->next[k];
	if (c->next[k] >= 0)
		c->prev[c->next[k]] = c->prev[k];
	else
		c->tail = c->prev[k];
}

static void push_head(struct cache *c, int32_t k)
{
	c->prev[k] = -1;
	c->next[k] = c->head;
	if (c->head >= 0)
		c->prev[c->head] = k;
	c->head = k;
	if (c->tail < 0)
		c->tail = k;
}

static void evict_to(struct cache *c, uint64_t limit)
{
	while (c->usage > limit && c->tail >= 0) {
		int32_t k = c->tail;

		unlink_key(c, k);
		c->in[k] = 0;
		c->usage -= ITEM;
		c->evicted += ITEM;
		c->evicted_total += ITEM;
		c->ghost_at[k] = c->evicted_total;
	}
}

static int owner(const struct keyinfo *k, const double *w)
{
	double x = k->place;

	for (int i = 0; i < NODES; i++) {
		if (x < w[i])
			return i;
		x -= w[i];
	}
	return NODES - 1;
}

/* A read of key @k at @now on cache @c: a hit, or a miss that sets it. */
static void read_key(struct cache *c, int32_t k, int64_t now)
{
	c->reads++;
	if (c->in[k]) {
		uint64_t age = (uint64_t)(now - c->atime[k]);

		c->hits++;
		c->reused += (uint64_t)ITEM * age;
		if (age > c->reuse_ms)
			c->reuse_ms = age;
		unlink_key(c, k);
		push_head(c, k);
		c->atime[k] = now;
		return;
	}
	if (c->ghost_at[k] && c->evicted_total - c->ghost_at[k] < GHOSTS) {
		/* slcache's guess (lease.c): the coldest item's idle time, and
		 * the time to evict half the ghosts' reach at this period's rate. */
		uint64_t idle = c->tail >= 0 ? (uint64_t)(now - c->atime[c->tail]) : 0;
		uint64_t age = idle + (c->evicted ? (uint64_t)GHOSTS / 2 * PERIOD_MS / c->evicted : 0);

		if (age > IDLE_LIMIT_MS)
			age = IDLE_LIMIT_MS;

		c->refaulted += ITEM;
		c->reused += (uint64_t)ITEM * age;
	}
	c->ghost_at[k] = 0;
	c->in[k] = 1;
	c->atime[k] = now;
	c->usage += ITEM;
	push_head(c, k);
	evict_to(c, c->share);
}

struct out {
	double hit_before, hit_after30, hit_rest;
	double hot_40_s; /* < 0: never */
	uint64_t shares[NODES];
};

static void run(enum rule rule, int warm_s, int phase_s, uint64_t seed, struct out *o)
{
	static struct cache cs[NODES];
	static struct keyinfo keys[NKEYS];
	double w0[NODES] = { 0.70, 0.25, 0.05 }, w1[NODES] = { 0.05, 0.25, 0.70 };
	const double *w = w0;
	int64_t flip = (int64_t)(warm_s + phase_s) * 1000, end = flip + (int64_t)phase_s * 1000;
	uint64_t h[3] = { 0 }, r[3] = { 0 };

	memset(o, 0, sizeof(*o));
	o->hot_40_s = -1;
	for (int i = 0; i < NODES; i++) {
		struct cache *c = &cs[i];

		memset(c, 0, sizeof(*c));
		c->head = c->tail = -1;
		c->share = BUDGET / NODES;
	}
	for (int32_t k = 0; k < (int32_t)NKEYS; k++) {
		keys[k].every_ms = 1000 + (uint32_t)(rng_unit(&seed) * 29000);
		keys[k].next_ms = (int64_t)(rng_unit(&seed) * keys[k].every_ms);
		keys[k].place = rng_unit(&seed);
	}
	for (int64_t t = 0; t < end; t += PERIOD_MS) {
		int phase = t < (int64_t)warm_s * 1000 ? -1 : t < flip ? 0 : t < flip + 30000 ? 1 : 2;

		if (t == flip)
			w = w1;
		for (int i = 0; i < NODES; i++)
			cs[i].hits = cs[i].reads = 0;
		for (int32_t k = 0; k < (int32_t)NKEYS; k++) {
			while (keys[k].next_ms < t + PERIOD_MS) {
				read_key(&cs[owner(&keys[k], w)], k, keys[k].next_ms);
				keys[k].next_ms += keys[k].every_ms;
			}
		}
		for (int i = 0; i < NODES && phase >= 0; i++) {
			h[phase] += cs[i].hits;
			r[phase] += cs[i].reads;
		}
		if (rule != R_STATIC) {
			struct sl__lease_alloc_in in[NODES] = { { 0 } };
			uint64_t out[NODES], now = (uint64_t)(t + PERIOD_MS);

			for (int i = 0; i < NODES; i++) {
				struct cache *c = &cs[i];
				uint64_t idle = c->tail >= 0 ? now - (uint64_t)c->atime[c->tail] : UINT64_MAX;

				if (rule == R_OLD) {
					in[i].demand = sl__lease_demand(c->share, c->usage, 0, BUDGET, idle,
									IDLE_LIMIT_MS, c->evicted,
									c->refaulted);
				} else {
					sl__lease_reuse_fold(&c->reuse, c->reused, c->reuse_ms, PERIOD_MS);
					in[i].demand = sl__lease_demand_reuse(&c->reuse, c->share, c->usage,
									      0, BUDGET, idle, IDLE_LIMIT_MS,
									      c->evicted, c->refaulted);
				}
			}
			sl__lease_alloc_maxmin(BUDGET, NODES, in, out);
			/* SL_REUSE_TRACE=1: every half second around the flip, on stderr. */
			if (getenv("SL_REUSE_TRACE") && t >= flip - 2000 && t < flip + 8000 &&
			    t % 500 == 0)
				for (int i = 0; i < NODES; i++)
					fprintf(stderr, "t %+.2f node %d usage %llu live %llu demand %llu "
						"share %llu KiB\n", (double)(t - flip) / 1000, i,
						(unsigned long long)cs[i].usage >> 10,
						(unsigned long long)cs[i].reuse.live >> 10,
						(unsigned long long)in[i].demand >> 10,
						(unsigned long long)out[i] >> 10);
			for (int i = 0; i < NODES; i++) {
				cs[i].share = out[i];
				evict_to(&cs[i], out[i]);
			}
		}
		for (int i = 0; i < NODES; i++)
			cs[i].evicted = cs[i].refaulted = cs[i].reused = cs[i].reuse_ms = 0;
		if (t >= flip && o->hot_40_s < 0 && cs[2].share * 10 > (uint64_t)BUDGET * 4)
			o->hot_40_s = (double)(t + PERIOD_MS - flip) / 1000.0;
	}
	o->hit_before = r[0] ? (double)h[0] / (double)r[0] : 0;
	o->hit_after30 = r[1] ? (double)h[1] / (double)r[1] : 0;
	o->hit_rest = r[2] ? (double)h[2] / (double)r[2] : 0;
	for (int i = 0; i < NODES; i++)
		o->shares[i] = cs[i].share;
}

int bench_lease_reuse(int quick, uint64_t seed)
{
	int warm = 40, phase = quick ? 60 : 120;

	for (int a = 0; a < R_COUNT; a++) {
		struct out o;
		char hot[32] = "null";

		run((enum rule)a, warm, phase, seed, &o);
		fprintf(stderr, "slow-reuse %-17s hit ratio %.3f before, %.3f 30 s after, %.3f rest; "
			"hot > 40%% at %.2f s; shares %llu/%llu/%llu KiB\n",
			rule_name[a], o.hit_before, o.hit_after30, o.hit_rest, o.hot_40_s,
			(unsigned long long)o.shares[0] >> 10, (unsigned long long)o.shares[1] >> 10,
			(unsigned long long)o.shares[2] >> 10);
		if (o.hot_40_s >= 0)
			snprintf(hot, sizeof(hot), "%.2f", o.hot_40_s);
		printf("{\"bench\":\"lease_sim\",\"workload\":\"slow-reuse\",\"allocator\":\"%s\","
		       "\"participants\":%d,\"budget_bytes\":%u,\"hit_ratio_before\":%.4f,"
		       "\"hit_ratio_after_30s\":%.4f,\"hit_ratio_rest\":%.4f,\"hot_40pct_s\":%s}\n",
		       rule_name[a], NODES, BUDGET, o.hit_before, o.hit_after30, o.hit_rest, hot);
		fflush(stdout);
	}
	return 0;
}
