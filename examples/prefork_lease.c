/* SPDX-License-Identifier: MIT */
/*
 * prefork_lease: a pre-fork server (nginx-, PostgreSQL-style) whose worker
 * processes share one tenant budget through a lease store on shared memory.
 *
 * The parent opens the store "shm:prefork-PID", sets the budget "tenant" (8
 * MiB in all, 1 MiB of floors) and forks three workers.  Each worker has its
 * own tree with a group "tenant", joins the budget with it, gives the lease
 * library a thread (sl_lease_run()), and stores items: worker 0 gets most of
 * the traffic at first, worker 2 later.  The group's max is the worker's
 * share; at its share the worker evicts its oldest items, and its demand
 * hook reports those evictions, so the share follows the traffic.  The
 * parent prints the shares as the store sees them, once a second.
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

struct item {
	struct item *next;
	uint64_t size;
};

struct worker {
	sl_group *group;
	pthread_mutex_t lock; /* the FIFO of items; never held across sl_charge() */
	struct item *head, **tail;
	uint64_t evicted;     /* since the last demand report */
};

static uint64_t evict(sl_group *g, uint64_t target, void *ctx)
{
	struct worker *w = ctx;
	uint64_t freed = 0;

	pthread_mutex_lock(&w->lock);
	while (freed < target && w->head) {
		struct item *it = w->head;

		w->head = it->next;
		if (!w->head)
			w->tail = &w->head;
		freed += it->size;
		sl_uncharge(g, it->size);
		free(it);
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
	out->evicted = w->evicted; /* evictions at the share: this worker wants more */
	w->evicted = 0;
	pthread_mutex_unlock(&w->lock);
}

static void *lease_thread(void *arg)
{
	sl_lease_run(arg);
	return NULL;
}

static int worker_main(const char *url, int id)
{
	struct worker w = { .tail = &w.head };
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
	lo.demand_ctx = &w;
	if (sl_lease_join(store, "tenant", w.group, &lo, &lease) != 0 ||
	    pthread_create(&th, NULL, lease_thread, store) != 0)
		return 1;

	/* Traffic: worker 0 is hot for the first half, worker 2 for the second. */
	struct timespec start, now, nap = { 0, 200000 };
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		clock_gettime(CLOCK_MONOTONIC, &now);
		int second_half = now.tv_sec - start.tv_sec >= SECONDS / 2;
		int hot = id == (second_half ? 2 : 0);
		for (int i = 0; i < (hot ? 64 : 4); i++) {
			struct item *it = malloc(sizeof(*it));
			/* Charge outside the FIFO's lock: the charge may evict. */
			if (!it || sl_charge(w.group, 4 * KiB, 0) != 0) {
				free(it);
				continue;
			}
			it->size = 4 * KiB;
			it->next = NULL;
			pthread_mutex_lock(&w.lock);
			*w.tail = it;
			w.tail = &it->next;
			pthread_mutex_unlock(&w.lock);
		}
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

	for (int s = 0; s <= SECONDS; s++) {
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
