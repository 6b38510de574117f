/* SPDX-License-Identifier: MIT */
/*
 * prefork_lease: a pre-fork server (nginx-, PostgreSQL-style) whose worker
 * processes share one tenant budget through a lease store on shared memory.
 *
 * The parent opens the store "shm:prefork-PID", sets the budget "tenant" (8
 * MiB in all, 1 MiB of floors) and forks three workers.  Each worker has its
 * own tree with a group "tenant", joins the budget with it, gives the lease
 * library a thread (sl_lease_run()), and serves reads of 4 KiB items,
 * storing each item that misses.  Worker 0 reads many keys at first (more
 * than the whole budget holds), worker 2 in the second half; the others
 * read a few keys that fit.  The group's max is the worker's share: at it,
 * a miss evicts the oldest item, and the demand hook reports those
 * evictions, so the busy worker's share grows while the others give back
 * what they do not use.  The parent prints the shares once a second.
 *
 * Build: cc -std=c11 -pthread prefork_lease.c $(pkg-config --cflags --libs softlimit-lease)
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <softlimit/lease.h>

#define KiB ((uint64_t)1024)
#define WORKERS 3
#define SECONDS 8
#define ITEM (4 * KiB)
#define KEYS_HOT 4096  /* 16 MiB of items: more than the budget */
#define KEYS_COLD 128  /* 512 KiB: fits anywhere */

struct item {
	struct item *prev, *next; /* the LRU list: least recently read first */
	unsigned key;
	int64_t read_ms;          /* when it was last read */
};

struct worker {
	sl_group *group;
	pthread_mutex_t lock; /* the items; never held across sl_charge() */
	struct item *present[KEYS_HOT];
	struct item lru;      /* lru.next: least recently read; lru.prev: most */
	uint64_t evicted;     /* bytes, since the last demand report */
};

/* The reclaim callback: evict the oldest items. */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void unlink_item(struct item *it)
{
	it->prev->next = it->next;
	it->next->prev = it->prev;
}

static void link_newest(struct worker *w, struct item *it)
{
	it->prev = w->lru.prev;
	it->next = &w->lru;
	w->lru.prev->next = it;
	w->lru.prev = it;
}

static uint64_t evict(sl_group *g, uint64_t target, void *ctx)
{
	struct worker *w = ctx;
	uint64_t freed = 0;

	pthread_mutex_lock(&w->lock);
	while (freed < target && w->lru.next != &w->lru) {
		struct item *it = w->lru.next;

		unlink_item(it);
		w->present[it->key] = NULL;
		free(it);
		sl_uncharge(g, ITEM);
		freed += ITEM;
	}
	w->evicted += freed;
	pthread_mutex_unlock(&w->lock);
	return freed;
}

/* Runs on the lease thread once a period: what more memory is worth here. */
static void demand(sl_lease *l, struct sl_lease_demand *out, void *ctx)
{
	struct worker *w = ctx;

	(void)l;
	pthread_mutex_lock(&w->lock);
	out->evicted = w->evicted; /* evictions at the share: more memory would keep them */
	w->evicted = 0;
	/* Memory nobody reads: the least recently read item's idle time. */
	if (w->lru.next != &w->lru)
		out->idle_ms = (uint64_t)(now_ms() - w->lru.next->read_ms);
	pthread_mutex_unlock(&w->lock);
}

/* One read of @key: a hit, or a miss that stores the item. */
static void serve(struct worker *w, unsigned key)
{
	pthread_mutex_lock(&w->lock);
	struct item *hit = w->present[key];
	if (hit) {
		hit->read_ms = now_ms();
		unlink_item(hit);
		link_newest(w, hit);
	}
	pthread_mutex_unlock(&w->lock);
	if (hit)
		return;
	struct item *it = malloc(sizeof(*it));
	/* Charge outside the lock: at the share, the charge evicts. */
	if (!it || sl_charge(w->group, ITEM, 0) != 0) {
		free(it);
		return;
	}
	it->key = key;
	it->read_ms = now_ms();
	pthread_mutex_lock(&w->lock);
	if (w->present[key]) { /* stored meanwhile: keep the first */
		pthread_mutex_unlock(&w->lock);
		sl_uncharge(w->group, ITEM);
		free(it);
		return;
	}
	w->present[key] = it;
	link_newest(w, it);
	pthread_mutex_unlock(&w->lock);
}

static void *lease_thread(void *arg)
{
	sl_lease_run(arg);
	return NULL;
}

static int worker_main(const char *url, int id)
{
	static struct worker w; /* static: its table of items is large */

	w.lru.next = w.lru.prev = &w.lru;
	sl_lease_store *store;
	sl_tree *tree;
	sl_lease *lease;
	pthread_t th;

	pthread_mutex_init(&w.lock, NULL);
	if (sl_lease_store_open(url, NULL, &store) != 0 || sl_tree_create(NULL, &tree) != 0)
		return 1;
	const struct sl_ops ops = { .reclaim = evict };
	if (sl_group_create(sl_tree_root(tree), "tenant", NULL, &ops, &w, &w.group) != 0)
		return 1;
	struct sl_lease_opts lo;
	sl_lease_opts_init(&lo);
	lo.demand = demand;
	lo.idle_ms = 1000; /* items unread for a second are memory to give back */
	lo.demand_ctx = &w;
	if (sl_lease_join(store, "tenant", w.group, &lo, &lease) != 0 ||
	    pthread_create(&th, NULL, lease_thread, store) != 0)
		return 1;

	/* Reads: worker 0's keys are many in the first half, worker 2's in
	 * the second. */
	struct timespec start, now, nap = { 0, 200000 };
	unsigned seed = (unsigned)id + 1;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		clock_gettime(CLOCK_MONOTONIC, &now);
		int second_half = now.tv_sec - start.tv_sec >= SECONDS / 2;
		unsigned keys = id == (second_half ? 2 : 0) ? KEYS_HOT : KEYS_COLD;
		for (int i = 0; i < 64; i++)
			serve(&w, (unsigned)rand_r(&seed) % keys);
		nanosleep(&nap, NULL);
	} while (now.tv_sec - start.tv_sec < SECONDS);

	sl_lease_stop(store);
	pthread_join(th, NULL);
	sl_lease_leave(lease);
	evict(w.group, UINT64_MAX, &w);
	sl_lease_store_close(store);
	sl_tree_destroy(tree);
	return 0;
}

int main(void)
{
	char url[64];
	sl_lease_store *store;
	struct sl_limits budget;
	pid_t pids[WORKERS];

	snprintf(url, sizeof(url), "shm:prefork-%ld", (long)getpid());
	if (sl_lease_store_open(url, NULL, &store) != 0)
		return 1;
	sl_limits_init(&budget);
	budget.max = 8192 * KiB;
	budget.min = 1024 * KiB; /* floors: what a worker keeps if it loses the store */
	if (sl_lease_budget_set(store, "tenant", &budget) != 0)
		return 1;

	for (int i = 0; i < WORKERS; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			return 1;
		if (pids[i] == 0)
			_exit(worker_main(url, i));
	}

	for (int s = 1; s < SECONDS; s++) {
		struct sl_lease_participant p[WORKERS + 1];
		size_t n = 0;
		uint64_t sum = 0;

		sleep(1);
		if (sl_lease_budget_participants(store, "tenant", p, WORKERS + 1, &n) != 0)
			continue;
		printf("t=%ds ", s);
		for (size_t i = 0; i < n && i <= WORKERS; i++) {
			printf(" %s share %4" PRIu64 " KiB usage %4" PRIu64 " KiB;", p[i].id, p[i].share / KiB,
			       p[i].usage / KiB);
			sum += p[i].usage;
		}
		printf(" sum %" PRIu64 " of %" PRIu64 " KiB\n", sum / KiB, budget.max / KiB);
	}

	int bad = 0;
	for (int i = 0; i < WORKERS; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	sl_lease_store_close(store);
	sl_lease_store_remove(url, NULL); /* the shared-memory object goes too */
	return bad;
}
