/* SPDX-License-Identifier: MIT */
/*
 * The internal store interface of libsoftlimit-lease: what a store must do
 * so that lease.c can keep the budget's promise (include/softlimit/lease.h).
 * One file per store (store_shm.c, store_etcd.c) fills a struct
 * sl__lease_store_ops; store.c picks one by the URL's scheme.
 *
 * The store knows nothing of allocation.  It keeps, per budget, the limits
 * and one record per participant, and one guarantee: a write that makes a
 * record count for more (a larger held or floor, or a new record) succeeds
 * only if no other such write happened since the caller's read (the budget's
 * version is unchanged), and bumps the version.  Writes that only lower what
 * a record counts, or renew it, need no compare.  lease.c computes shares on
 * a view and relies on that to never grant the same room twice.
 *
 * Every operation returns 0 or a negative errno and takes at most the
 * store's timeout; all are called from one thread at a time per store
 * (lease.c serializes them), so a store needs no locking of its own beyond
 * what protects its shared state from other processes.
 */
#ifndef SL_LEASE_STORE_H
#define SL_LEASE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <softlimit/lease.h>

/* One participant's record, as the store keeps it. */
struct sl__lease_rec {
	char id[SL_LEASE_ID_MAX];
	uint64_t held;       /* counted against max while its lease runs            */
	uint64_t floor;      /* counted once its lease has run out (<= held)         */
	uint64_t usage;      /* last reported usage                                  */
	uint64_t demand;     /* last reported demand                                 */
	int64_t expires_ms;  /* read only: ms until the store's view ends (<0 ended) */
	enum sl_lease_state state; /* read only: HELD, FENCED (counts floor), STALLED (counts held) */
};

/* One budget, read at one instant. */
struct sl__lease_view {
	struct sl_limits limits;
	uint64_t version;     /* the compare token of grow writes                      */
	uint64_t incarnation; /* the store's identity: changes when it is wiped or
			       * recreated, so holders know their records are gone  */
	size_t n;
	struct sl__lease_rec *recs; /* n records, malloc'd: sl__lease_view_free() */
	/* Of those, the members of the coordinated protocol (etcd, "?coordinated"):
	 * shown as the store counts them, but a budget that has any is not
	 * one the decentralized protocol may grow in (-EPROTO). */
	size_t coordinated;
};

/* What a record counts against the budget's max now. */
static inline uint64_t sl__lease_rec_counted(const struct sl__lease_rec *r)
{
	return r->state == SL_LEASE_FENCED ? r->floor : r->held;
}

struct sl__lease_store_ops {
	const char *scheme; /* "shm", "etcd": the URL's scheme */
	/* @rest is the URL after "scheme:" */
	int (*open)(const char *rest, const struct sl_lease_store_opts *opts, void **state);
	void (*close)(void *state);
	/*
	 * sl_lease_store_remove(): remove the store at @rest and everything in
	 * it, with no open state (an open would create it).  @rest is the URL
	 * after "scheme:", @opts checked by store.c as for open; @rest is
	 * checked here as open checks it (-EINVAL).  -ENOENT when there was
	 * nothing to remove.  Holders of the old store must find it wiped: a
	 * new incarnation (or none) at their next read.  Every store has one.
	 */
	int (*remove_store)(const char *rest, const struct sl_lease_store_opts *opts);

	int (*budget_set)(void *state, const char *name, const struct sl_limits *lim);
	int (*budget_get)(void *state, const char *name, struct sl_limits *out);
	int (*budget_delete)(void *state, const char *name);
	int (*budget_list)(void *state, char (*names)[SL_LEASE_NAME_MAX], size_t cap, size_t *count);

	/* The budget and every record, at one instant.  -ENOENT: no such budget;
	 * then @out->incarnation is still set if the store knows it (0 if not),
	 * so that a holder tells a wiped store from a deleted budget. */
	int (*read)(void *state, const char *budget, struct sl__lease_view *out);

	/*
	 * Store @rec (id, held, floor, usage, demand) as this process's record
	 * of @budget and renew it for @ttl_ms (a store may round up, never
	 * down).  @grows: @rec counts for more than the stored record (or is
	 * new): then succeed only if the budget's version is @version, and bump
	 * it; -EAGAIN otherwise.  -ENOENT: no such budget.  -ESTALE: the store's
	 * incarnation is not @incarnation (it was wiped: read again).
	 */
	int (*write)(void *state, const char *budget, const struct sl__lease_rec *rec, uint32_t ttl_ms,
		     bool grows, uint64_t version, uint64_t incarnation);

	/* Remove the record @id of @budget (a leave).  -ENOENT if none. */
	int (*remove)(void *state, const char *budget, const char *id);

	/* This process's participant id for a new lease (unique per join).
	 * The one operation called outside store.c's serialization, from any
	 * thread, while another operation may be in flight: no I/O, and no
	 * lock that an operation holds across I/O. */
	int (*make_id)(void *state, char id[SL_LEASE_ID_MAX]);

	/* The store counts a record in full for as long as its process lives,
	 * whatever its ttl (shm: liveness from the kernel): a holder there
	 * never falls to its floor because time passed. */
	bool counts_while_alive;
};

extern const struct sl__lease_store_ops sl__lease_store_shm;
/* The shm: store's remove_store (store_remove.c). */
int sl__shm_remove_store(const char *rest, const struct sl_lease_store_opts *opts);
#ifdef SL_HAVE_ETCD
extern const struct sl__lease_store_ops sl__lease_store_etcd;
/* An etcd store opened with "?coordinated" (store_etcd_coord.h). */
bool sl__etcd_coordinated(void *state);
#endif

void sl__lease_view_free(struct sl__lease_view *v);

/* A budget name is 1..SL_LEASE_NAME_MAX-1 bytes of [A-Za-z0-9_.:-]. */
bool sl__lease_name_ok(const char *name);

#endif /* SL_LEASE_STORE_H */
