/* SPDX-License-Identifier: MIT */
/*
 * threads_host: four threads, three tenants, one budget.  Each tenant keeps
 * its items in an LRU list under its own mutex; the tree's reclaim callback
 * evicts from a tenant's tail, so it takes that mutex.
 *
 * The rule this example exists to show: charge BEFORE taking your LRU lock.
 * sl_charge() may reclaim, and reclaim calls the callback, which takes a
 * tenant's lock: charging while holding one would deadlock (or, with one
 * lock per tenant, deadlock as soon as two threads reclaim each other's
 * tenants).  Code that must charge while it holds a lock passes
 * SL_NORECLAIM, which never calls a callback and fails at once instead.
 *
 * Build: cc -std=c11 -pthread threads_host.c $(pkg-config --cflags --libs softlimit)
 */
#define _POSIX_C_SOURCE 200809L /* rand_r() */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <softlimit/softlimit.h>

#define TENANTS 3
#define THREADS 4
#define SETS_PER_THREAD 20000
#define KiB ((uint64_t)1024)

struct item {
	struct item *prev, *next;
	uint64_t size;
};

struct tenant {
	pthread_mutex_t lock; /* guards the LRU list; never held across sl_charge() */
	struct item lru;      /* list head: lru.next is the newest, lru.prev the oldest */
	sl_group *group;
	uint64_t evicted;
};

static struct tenant tenants[TENANTS];

/* The reclaim callback: evict the oldest items of one tenant.  It runs in
 * whichever thread is charging or reclaiming, holding no library lock. */
static uint64_t evict(sl_group *g, uint64_t target, void *ctx)
{
	struct tenant *t = ctx;
	uint64_t freed = 0;

	(void)g;
	pthread_mutex_lock(&t->lock);
	while (freed < target && t->lru.prev != &t->lru) {
		struct item *it = t->lru.prev;

		it->prev->next = &t->lru;
		t->lru.prev = it->prev;
		freed += it->size;
		t->evicted++;
		sl_uncharge(t->group, it->size);
		free(it);
	}
	pthread_mutex_unlock(&t->lock);
	return freed;
}

/* Store one item of @size bytes for tenant @t. */
static int set(struct tenant *t, uint64_t size)
{
	/* 1. Charge first, outside any lock of ours: this may reclaim. */
	int rc = sl_charge(t->group, size, 0);
	if (rc != 0)
		return rc; /* -ENOMEM: the tenant is at its max and nothing could be freed */

	struct item *it = malloc(sizeof(*it));
	if (!it) {
		sl_uncharge(t->group, size);
		return -ENOMEM;
	}
	it->size = size;

	/* 2. Only now take the LRU lock, to link the item. */
	pthread_mutex_lock(&t->lock);
	it->next = t->lru.next;
	it->prev = &t->lru;
	t->lru.next->prev = it;
	t->lru.next = it;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	int failed = 0;

	for (int i = 0; i < SETS_PER_THREAD; i++) {
		/* Tenant 0 is the busiest; sizes from 256 bytes to 4 KiB. */
		int n = rand_r(&seed) % 6;
		struct tenant *t = &tenants[n < 3 ? 0 : n < 5 ? 1 : 2];
		uint64_t size = 256 + (uint64_t)(rand_r(&seed) % 3841);

		if (set(t, size) != 0)
			failed++;
	}
	return (void *)(intptr_t)failed;
}

int main(void)
{
	struct sl_tree_opts opts;
	sl_tree *tree;
	int failed = 0;

	sl_tree_opts_init(&opts);
	opts.root.max = 4096 * KiB; /* the whole process: 4 MiB */
	if (sl_tree_create(&opts, &tree) != 0)
		return 1;

	/* soft limits: what each tenant keeps when memory is short. */
	const uint64_t soft[TENANTS] = { 2048 * KiB, 1024 * KiB, 512 * KiB };
	const struct sl_ops ops = { .reclaim = evict };
	for (int i = 0; i < TENANTS; i++) {
		struct sl_limits lim;
		char name[16];

		sl_limits_init(&lim);
		lim.soft = soft[i];
		snprintf(name, sizeof(name), "tenant%d", i);
		pthread_mutex_init(&tenants[i].lock, NULL);
		tenants[i].lru.next = tenants[i].lru.prev = &tenants[i].lru;
		if (sl_group_create(sl_tree_root(tree), name, &lim, &ops, &tenants[i], &tenants[i].group) != 0)
			return 1;
	}

	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1)) != 0)
			return 1;
	for (int i = 0; i < THREADS; i++) {
		void *rv;
		pthread_join(th[i], &rv);
		failed += (int)(intptr_t)rv;
	}

	printf("%-8s %10s %10s %10s\n", "tenant", "soft KiB", "usage KiB", "evicted");
	for (int i = 0; i < TENANTS; i++) {
		struct sl_stats st;
		sl_group_stats(tenants[i].group, &st);
		printf("%-8s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n", sl_group_name(tenants[i].group),
		       st.limits.soft / KiB, st.usage / KiB, tenants[i].evicted);
	}
	printf("failed sets: %d (the budget always had room to reclaim)\n", failed);

	/* Free what is left; the tree goes last. */
	for (int i = 0; i < TENANTS; i++)
		evict(tenants[i].group, UINT64_MAX, &tenants[i]);
	sl_tree_destroy(tree);
	return failed == 0 ? 0 : 1;
}
