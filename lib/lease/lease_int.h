/* SPDX-License-Identifier: MIT */
/*
 * What store.c and lease.c share: the store object (a store's operations,
 * serialized, plus the leases joined on it and the run loop's flags) and
 * the calls between the two files.  Not installed.
 */
#ifndef SL_LEASE_INT_H
#define SL_LEASE_INT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "store.h"

struct sl_lease_store {
	const struct sl__lease_store_ops *ops;
	void *state;
	struct sl_lease_store_opts opts;
	/* store.h: one store call at a time per store. */
	pthread_mutex_t op_lock;
	/* The leases joined on this store, and every lease's protocol state:
	 * join, leave and the run loop's step of one lease hold it. */
	pthread_mutex_t lock;
	struct sl_lease *leases;
	/* Readers of sl_lease_stats() take only this, briefly. */
	pthread_mutex_t stat_lock;
	/* The run loop's sleep, cut short by sl_lease_stop(). */
	pthread_mutex_t wake_lock;
	pthread_cond_t wake;
	atomic_bool stop;
	atomic_bool running;
};

/* The store's operations, each under op_lock (store.c). */
int sl__store_read(sl_lease_store *s, const char *budget, struct sl__lease_view *out);
int sl__store_write(sl_lease_store *s, const char *budget, const struct sl__lease_rec *rec,
		    uint32_t ttl_ms, bool grows, uint64_t version, uint64_t incarnation);
int sl__store_remove(sl_lease_store *s, const char *budget, const char *id);
int sl__store_make_id(sl_lease_store *s, char id[SL_LEASE_ID_MAX]);

/* sl_lease_store_close(): every lease still joined leaves (lease.c). */
void sl__lease_leave_all(sl_lease_store *s);

/* The run loop's view of a lease (lease.c), all under s->lock: one period's
 * work, the period, when it is due next, the next lease of the store. */
void sl__lease_step(struct sl_lease *l);
int64_t sl__lease_period_ns(const struct sl_lease *l);
int64_t *sl__lease_next_ns(struct sl_lease *l);
struct sl_lease *sl__lease_next(struct sl_lease *l);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t sl__lease_now_ns(void);

/*
 * Test hooks of the shm store (tests/test_lease_shm.c): take the store's
 * mutex and keep it (-EINVAL for another store); scribble what a crash in
 * the middle of a write leaves and _exit() with the mutex held.
 */
int sl__lease_shm_test_lock(sl_lease_store *s);
void sl__lease_shm_test_crash_locked(sl_lease_store *s) __attribute__((noreturn));

#endif /* SL_LEASE_INT_H */
