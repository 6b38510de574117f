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
#include <string.h>
#include <unistd.h>

#include "alloc.h"
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
	/* Leases joined since the run loop last looked: a join never waits for
	 * the run thread's store calls (it holds lock across them), it adds
	 * here, under pending_lock alone, and the loop moves them to leases. */
	pthread_mutex_t pending_lock;
	struct sl_lease *pending;
	/* Readers of sl_lease_stats() take only this, briefly. */
	pthread_mutex_t stat_lock;
	/* The run loop's sleep, cut short by sl_lease_stop(). */
	pthread_mutex_t wake_lock;
	pthread_cond_t wake;
	atomic_bool stop;
	atomic_bool running;
	atomic_bool kick;   /* cut the sleep short once: a watch saw a change */
	/* The process that opened it: its records are that process's, and a
	 * fork()ed child's copy of the handle never touches them. */
	pid_t owner;
	/* The coordinated etcd protocol's node (store_etcd_coord.h), or NULL. */
	struct sl__coord_node *coord;
};

/* Is @s a handle inherited through fork()?  Then the store, its records and
 * its locks (which a thread that does not exist in this process may have
 * held at the fork) are not this process's to use. */
static inline bool sl__lease_inherited(const sl_lease_store *s)
{
	return s->owner != getpid();
}

/* The store's operations, each under op_lock (store.c). */
int sl__store_read(sl_lease_store *s, const char *budget, struct sl__lease_view *out);
int sl__store_write(sl_lease_store *s, const char *budget, const struct sl__lease_rec *rec,
		    uint32_t ttl_ms, bool grows, uint64_t version, uint64_t incarnation);
int sl__store_remove(sl_lease_store *s, const char *budget, const char *id);
int sl__store_make_id(sl_lease_store *s, char id[SL_LEASE_ID_MAX]);

/* sl_lease_store_close(): every lease still joined leaves (lease.c). */
void sl__lease_leave_all(sl_lease_store *s);
/* The run loop, under s->lock: the leases joined since move to s->leases. */
void sl__lease_take_pending(sl_lease_store *s);

#define NS_PER_MS INT64_C(1000000)

/* The longest node name: "node:pid:start:n" with a 10-digit pid and two
 * 20-digit numbers still fits SL_LEASE_ID_MAX. */
#define SL__LEASE_NODE_MAX 40

/* A lease: made by sl_lease_join() (lease.c), stepped each period by the
 * run thread (lease_run.c). */
struct sl_lease {
	sl_lease_store *s;
	sl_group *g;
	struct sl_lease_opts opts;
	char budget[SL_LEASE_NAME_MAX];
	char id[SL_LEASE_ID_MAX];
	struct sl_limits orig; /* the group's limits at join: leave restores them */
	struct sl_limits blim; /* the budget's limits, as last read */

	/* Protocol state, under s->lock. */
	bool registered;       /* a record of ours is in the store's incarnation */
	uint64_t incarnation;
	uint64_t held, floor;  /* as the store has them (floor: as low as any the store may have) */
	uint64_t applied;      /* the share the group's max follows now */
	uint64_t raising;      /* a raise of applied under way: shown before it holds */
	uint64_t usage, demand; /* as last reported */
	uint64_t events_max;   /* the group's events_max at the last step */
	struct sl__lease_reuse reuse; /* the host's reuse reports, folded (alloc.h) */
	bool reported;         /* the demand hook called sl_lease_report_reuse() */
	uint64_t reused, reuse_ms; /* what it reported (the run thread's only) */
	int64_t demand_ns;     /* when the demand hook last ran (0: never) */
	int64_t expiry_ns;     /* the end of our own view of the lease (CLOCK_MONOTONIC) */
	int64_t next_ns;       /* when the run loop steps it next */
	enum sl_lease_state state;
	bool retry;            /* the last step failed on the store: try again soon */
	struct sl_lease_stats counts; /* the counters; the rest is filled by publish() */

	/* The coordinated etcd protocol (store_etcd_coord.c): the run thread's. */
	bool c_member;         /* its member key is in the store                     */
	bool c_lim;            /* the budget's limits were read (blim): its demand  */
	unsigned c_sweep;      /* the node's sweep it last stepped in (collect())   */
	int64_t c_session;     /* the session its report was written under (0: none) */
	uint64_t c_rep_held, c_rep_demand; /* the report as last written           */
	uint64_t c_mfloor;     /* the floor our member key acknowledges: our fence's */
	long c_num;            /* its id's number: its slot in the node's grants     */

	/* Under s->stat_lock: what sl_lease_stats() reads. */
	struct sl_lease_stats pub;
	int64_t pub_expiry_ns;
	bool pub_registered;

	struct sl_lease *next;  /* s->leases */
	struct sl_lease *gnext; /* leased */
};

static inline const struct sl__lease_rec *find_rec(const struct sl__lease_view *v, const char *id)
{
	size_t i;

	for (i = 0; i < v->n; i++)
		if (!strncmp(v->recs[i].id, id, SL_LEASE_ID_MAX))
			return &v->recs[i];
	return NULL;
}

static inline bool live(const struct sl__lease_rec *r)
{
	return r->state == SL_LEASE_HELD || r->state == SL_LEASE_STALLED;
}

/* lease.c, for the step (lease_run.c); all under s->lock. */
void sl__lease_publish(struct sl_lease *l);
void sl__lease_group_read(sl_group *g, uint64_t *counter, uint64_t *events_max);
int sl__lease_apply(struct sl_lease *l, uint64_t share);
void sl__lease_fence(struct sl_lease *l);
uint64_t sl__lease_counted_others(const struct sl__lease_view *v, const char *id, size_t *nlive);
int sl__lease_register(struct sl_lease *l, const struct sl__lease_view *v, uint64_t *free_out);

/* What the host's demand hook says @l asks for (lease_run.c). */
uint64_t sl__lease_my_demand(struct sl_lease *l, uint64_t c, uint64_t events_max,
			     uint64_t budget_max);
/* The run loop's sleep until @deadline_ns, cut short by a stop or a kick. */
void sl__lease_sleep_until(sl_lease_store *s, int64_t deadline_ns);

/* One period of @l: renew, move its share, apply it (lease_run.c). */
void sl__lease_step(struct sl_lease *l);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t sl__lease_now_ns(void);

/*
 * Test hooks of the shm store (tests/test_lease_shm.c): take the store's
 * mutex and keep it (-EINVAL for another store); the budgets and slots in
 * use as the header keeps them and as the tables count them; scribble what
 * a crash in the middle of a write leaves and _exit() with the mutex held.
 */
int sl__lease_shm_test_lock(sl_lease_store *s);
/* The totals kept beside the tables, and what the tables say they are. */
int sl__lease_shm_test_totals(sl_lease_store *s, uint32_t kept[2], uint32_t counted[2]);
void sl__lease_shm_test_crash_locked(sl_lease_store *s) __attribute__((noreturn));
/* Called by the process that initialises a shm object, with the init lock
 * held and the object half set up (a test kills the process there). */
extern void (*sl__lease_shm_test_init_hook)(void);

/*
 * Test hook of every lease (tests/lease_node.c): called on the thread that
 * changed @l, right after each publish (under s->lock, stat_lock released),
 * so that a test process mirrors sl_lease_stats() at the instant of any
 * change: a SIGSTOP then never finds a mirror older than the lease.
 */
extern void (*sl__lease_publish_hook)(struct sl_lease *l);

#endif /* SL_LEASE_INT_H */
