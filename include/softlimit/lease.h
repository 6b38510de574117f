/* SPDX-License-Identifier: MIT */
/*
 * softlimit/lease.h: one budget shared by groups in many processes or nodes.
 *
 * A *budget* is a named set of limits (max, soft, min) for the sum of the
 * usages of its *participants*: one group in each process (or node) that
 * joins it.  A *store* keeps the budgets and the participants' records:
 *
 *   shm:NAME                                  the processes of one host: a
 *                                             POSIX shared-memory object
 *                                             /softlimit-NAME
 *   etcd://HOST:PORT[,HOST:PORT...]/PREFIX    a fleet: etcd's v3 API through
 *                                             its JSON gateway, under PREFIX
 *   etcd://.../PREFIX?coordinated             a large fleet: one session per
 *                                             store handle, one coordinator
 *                                             per budget (docs/leases.md)
 *
 * Each participant holds a *lease*: its share of the budget, applied to its
 * group as the group's local max (and soft * share / max as its soft), so
 * the library's own machinery (reclaim at max, the policies, background
 * reclaim) enforces it.  Nothing is added to the charge path: a charge never
 * waits for a store; stores are touched only by sl_lease_join() (unless
 * deferred), the budget calls and the thread in sl_lease_run().
 *
 * Safety: at every instant the sum of the participants' usages is at most the
 * budget's max.  The store counts a share *held* by each participant, and
 * the sum of what it counts never passes max:
 *  - a share grows only from room no one holds, by a write that fails if any
 *    other share grew since the room was read (a compare on the budget's
 *    version: the shm mutex, an etcd transaction);
 *  - a share shrinks in two steps: the holder lowers its group's max first
 *    (from then on no charge takes the group above the larger of its usage
 *    then and the new max: sl_group_set_limits()), reads its usage, and only
 *    then reports; the store counts max(new share, reported usage).  The
 *    reported usage gates the room others get, never the new limit alone;
 *  - a join (and a rejoin after a wipe) claims the group's usage, or its
 *    floor if more, by the same order: the group's max comes down to the
 *    claim first, the usage the store will count is read after, so a charge
 *    racing the join cannot take the group past what the store counts;
 *  - etcd: a holder that cannot renew its lease falls to its *floor* when its own
 *    view of the lease ends: its group's max becomes the floor.  Its own
 *    view ends margin_ms before the store's, counted on CLOCK_MONOTONIC from
 *    when the renewal was sent; the store keeps counting the floor of a
 *    participant whose lease ended until it leaves (shm: until its process is
 *    gone), so a floor is never granted to anyone else;
 *  - shm: a participant whose process is alive (it holds its lock on the
 *    object, which the kernel drops only when the whole process is gone,
 *    and its start time matches: its main thread may have exited) keeps its
 *    whole share when its lease runs out (it may be stopped, its memory is
 *    still held); a dead process's share is free at once.  So a holder
 *    there never falls to its floor because time passed (a stop, a store
 *    held by a stopped process): it keeps its share and tries again;
 *  - etcd: a node cannot tell a stalled peer from a dead one.  A record lives
 *    under an etcd lease of ttl_ms (rounded up to whole seconds, at least 2 s);
 *    when it runs out, the node counts at its floor only, and the node, on
 *    waking, applies its floor before its next store call.
 * The timing assumption (etcd): a holder's stall, plus the renewal's round
 * trip, plus the time to lower its group's max (sl_group_set_limits(), which
 * holds for every later charge at once) must be shorter than margin_ms; and
 * the clocks of the holder and of the etcd leader may drift apart by less
 * than margin_ms over one ttl_ms.  With the defaults (ttl 10 s, margin 1 s) a
 * drift of 1 s in 10 s is far beyond what NTP-kept clocks do; a stall longer
 * than the margin (a process stopped, a VM paused) is what the fence is for:
 * the stalled holder's memory stops counting once the store's lease ends, and
 * it shrinks to its floor before serving again.  shm needs no such
 * assumption: one host, one CLOCK_MONOTONIC, and liveness from the kernel.
 *
 * Outages (etcd): a failed store call is tried again after a quarter
 * period, so a holder keeps its share through an outage (a leader change,
 * members down) that ends within ttl_ms - margin_ms - period_ms of its last
 * renewal, and falls to its floor only after that.  The same ttl_ms is how
 * long a dead node's share stays counted before the others may use it.  So
 * a longer ttl rides out longer outages and reuses a dead node's room later:
 * the default, 10 s, rides out about 8.8 s (an etcd election takes one to a
 * few seconds; a member restart more) and frees a dead node's room within
 * about 10 s (whole seconds, as etcd counts them) and a period.
 *
 * Floors: a budget's min is divided among its live participants: each one's
 * floor tends to min / n.  A joiner's floor comes only from room no one holds
 * (it may start below min / n, even at 0, and grows as others shrink).  A
 * budget with min 0 gives floors of 0: a holder that loses its store drops
 * everything.
 *
 * Changing a budget: a lowered max shrinks the shares by the two-step rule
 * (no new room is granted until the holders' reported usages fit); a lowered
 * min lowers the floors the same way; a raised max or min is room to grant.
 * sl_lease_budget_delete() while leases run: each holder keeps its last share,
 * frozen, as its group's max (state SL_LEASE_ORPHANED) and counts nowhere;
 * if a budget of that name is set again, the holders rejoin it, each
 * claiming its usage from the room no one holds, shrinking first where it
 * does not fit.  A store that comes back empty (etcd wiped, a new shm object)
 * is treated the same way: every holder falls to its floor, says so
 * (store_resets in its stats), and rejoins once the budget is set again.
 * An empty store has forgotten what it counted, so this is the one case the
 * promise holds only with help: etcd holds back every grow for three ttls
 * after the first old holder registers again (by then every old holder has
 * seen the wipe and fallen to its floor), but a holder that cannot reach the
 * new store within that time, or a new participant that joins inside it,
 * is not covered, and floors are counted again only as holders rejoin.
 * Wipe a store only with its participants stopped, or set the budget again
 * after one ttl (proof/lease.pml, case gap-lease-wipe, shows the gap).
 *
 * Demand: a cache always fills its share, so usage is not demand.  Each
 * period the lease asks the host (struct sl_lease_opts.demand) what the
 * memory is worth at the margin: the idle time of its coldest item, what it
 * evicted and what refaulted since the last period, and (a host that can,
 * through sl_lease_report_reuse()) its reuse: each unit read again times
 * how long it had sat idle.
 * With reuse, the live memory is the reuse flow (by Little's law, the
 * memory the reused units held between their reads), smoothed over about a
 * second: memory nobody reads again adds nothing to it, however much of it
 * is evicted.  The lease asks for its live memory and an eighth more; a
 * group that evicts while at least a third of its usage is live (smoothed
 * and in the last period) asks for more than its share (four times what it
 * lost beyond what its usage fell by, up to a quarter), and one that is
 * filling asks for eight periods more of its growth; memory
 * idle past the horizon (twice the longest reuse interval seen lately, at
 * least 2 s, at most idle_ms) goes back, and so does the rest of what is not
 * live, an eighth a period.  Without reuse: memory nobody touches
 * (the coldest item idle longer than idle_ms) is given back, an eighth of
 * it a period; a group that evicts or refaults at its share asks for more;
 * otherwise it asks for what it uses.  The store's shares follow demand by
 * max-min fairness with a floor each: every participant gets its demand if
 * the budget allows, the rest is shared equally among those that want more,
 * and room nobody asks for is spread over everyone as headroom.  A
 * participant whose demand changes has its new share within two periods.
 *
 * fork(): a store handle, and every lease joined on it, belong to the process
 * that opened it.  In a fork()ed child, sl_lease_join(), sl_lease_run() and
 * the budget calls on an inherited handle answer -ECHILD, and
 * sl_lease_leave() and sl_lease_store_close() free the child's copies only:
 * the parent's records, and the group's limits, are left as they are (an
 * exit-time cleanup in a child cannot end the parent's leases).  A child
 * that wants a lease opens a store of its own.
 *
 * Conventions: those of softlimit.h (0 or a negative errno).  Errors from a
 * store: -ETIMEDOUT (no answer within the store's timeout), -ECONNREFUSED
 * or -EIO (unreachable or a bad answer; shm: the store's object is corrupt
 * or truncated: remove it with sl_lease_store_remove()), -EAGAIN (a
 * concurrent change; the call may be retried).  shm: an entry found corrupt
 * in the object is skipped, never returned, and setting a budget over it
 * repairs it.  Library: libsoftlimit-lease, pkg-config module
 * softlimit-lease, CMake target softlimit::lease.
 */
#ifndef SOFTLIMIT_LEASE_H
#define SOFTLIMIT_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include <softlimit/softlimit.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_lease_store sl_lease_store;
typedef struct sl_lease sl_lease;

/* A budget's name: 1 to SL_LEASE_NAME_MAX - 1 bytes of [A-Za-z0-9_.:-]. */
#define SL_LEASE_NAME_MAX 64
/* A participant's id, as shown by sl_lease_budget_participants(). */
#define SL_LEASE_ID_MAX 96

struct sl_lease_store_opts {
	uint32_t size;       /* sizeof(struct sl_lease_store_opts): set by the init call */
	uint32_t timeout_ms; /* longest one store operation may take (default 1000)     */
	uint32_t slots;      /* shm: participant slots when the object is created (256)  */
	uint32_t reserved;   /* must be 0 */
	const char *node;    /* this process's name in participant ids; NULL: the host's */
};

/** sl_lease_store_opts_init() - the defaults above; NULL is ignored. */
SL_API void sl_lease_store_opts_init(struct sl_lease_store_opts *opts);

/**
 * sl_lease_store_open() - open the store at @url (see the top of this file);
 * @opts may be NULL.  shm: creates the object if it does not exist.  etcd:
 * checks the URL, does no I/O (the first call that needs the cluster
 * connects, failing over between the listed endpoints in order); with
 * "?coordinated", the coordinated protocol (docs/leases.md, "Scale"): the
 * handle is one node's session, and every participant of a budget must
 * use the same protocol.
 * Errors: -EINVAL for a NULL @url or @out, a malformed URL (a query other
 * than "?coordinated") or bad @opts;
 * -EPROTONOSUPPORT for an unknown scheme, or etcd:// in a library built
 * without libcurl and jansson; -ENOMEM; shm: -EACCES, -ETIMEDOUT (another
 * process is initialising the object and did not finish within the
 * timeout; one killed midway is not waited for), -EIO (the store's object
 * is corrupt or truncated: remove it with sl_lease_store_remove()).
 * Thread-safe; the store is used by any number of threads.
 */
SL_API int sl_lease_store_open(const char *url, const struct sl_lease_store_opts *opts,
			       sl_lease_store **out);

/**
 * sl_lease_store_close() - close @s: every lease still joined on it leaves
 * (as sl_lease_leave()).  A thread still in sl_lease_run(@s) is stopped
 * first and waited for (it returns 0; join it after); no other call on @s
 * may run during or after the close.  The shm object stays for the other
 * processes.  NULL is ignored.
 */
SL_API void sl_lease_store_close(sl_lease_store *s);

/**
 * sl_lease_store_remove() - remove the store at @url and everything in it,
 * without opening it.  @url and @opts (NULL: the defaults) are checked as
 * sl_lease_store_open() checks them, with the same errors.
 * shm: unlink the object (processes that have it open keep theirs until
 * they close it; the next open creates an empty one, which their leases see
 * as a store reset).  etcd: delete, in one transaction, PREFIX/incarnation
 * and every key under PREFIX/budgets/ (budgets, records, floors; other
 * keys under PREFIX, such as another store's at PREFIX/NAME, stay); the
 * holders' next read finds a new incarnation, a store reset.  Bounded by
 * @opts->timeout_ms.  For tests and for tearing a deployment down.
 * Errors: -EINVAL (NULL or malformed @url, bad @opts), -EPROTONOSUPPORT (a
 * scheme this build lacks), -ENOENT (nothing to remove), -ENOMEM; shm:
 * -EACCES, -EIO; etcd, as its other calls: -ECONNREFUSED (no member can be
 * connected to), -ETIMEDOUT (none answered within the timeout), -EIO (a bad
 * answer or another etcd error).  Thread-safe.
 */
SL_API int sl_lease_store_remove(const char *url, const struct sl_lease_store_opts *opts);

/**
 * sl_lease_budget_set() - create the budget @name, or change its limits, to
 * @lim's max, soft and min (high must be SL_UNLIMITED).  Errors: -EINVAL for
 * NULL arguments, a bad name, max 0 or SL_UNLIMITED, soft or min above max,
 * or a high other than SL_UNLIMITED (nothing changes); store errors.
 * Thread-safe.  See "Changing a budget" above for what live leases do.
 */
SL_API int sl_lease_budget_set(sl_lease_store *s, const char *name, const struct sl_limits *lim);

/** sl_lease_budget_get() - @name's limits into @out.  -EINVAL, -ENOENT, store errors. */
SL_API int sl_lease_budget_get(sl_lease_store *s, const char *name, struct sl_limits *out);

/**
 * sl_lease_budget_delete() - remove @name and its participants' records.
 * Errors: -EINVAL, -ENOENT, store errors.  Live leases keep their last share
 * (see above).
 */
SL_API int sl_lease_budget_delete(sl_lease_store *s, const char *name);

/**
 * sl_lease_budget_list() - the names of the store's budgets: up to @cap into
 * @names, sorted; *@count is set to how many there are (may exceed @cap).
 * Errors: -EINVAL (NULL @s or @count, or NULL @names with @cap > 0), store
 * errors.
 */
SL_API int sl_lease_budget_list(sl_lease_store *s, char (*names)[SL_LEASE_NAME_MAX], size_t cap,
				size_t *count);

enum sl_lease_state {
	SL_LEASE_JOINING = 0,  /* not yet registered (deferred join, or budget unknown)     */
	SL_LEASE_HELD = 1,     /* renewed within its ttl: the share applies                  */
	SL_LEASE_FENCED = 2,   /* its lease ran out: at its floor until it renews            */
	SL_LEASE_STALLED = 3,  /* store's view (shm): lease ran out, process alive: share held */
	SL_LEASE_ORPHANED = 4, /* the budget was deleted: last share kept, frozen            */
};

struct sl_lease_participant {
	char id[SL_LEASE_ID_MAX]; /* "node:pid:start:n" (shm) or the node's id (etcd)      */
	uint64_t share;           /* what the store counts for it now, against max          */
	uint64_t floor;           /* what it counts once its lease has run out               */
	uint64_t usage;           /* its last reported usage (its group's usage + stocked)  */
	uint64_t demand;          /* its last reported demand                               */
	int64_t expires_ms;       /* ms until the store's view of its lease ends (<0: ended) */
	enum sl_lease_state state; /* SL_LEASE_HELD, SL_LEASE_FENCED or SL_LEASE_STALLED     */
};

/**
 * sl_lease_budget_participants() - the participants of @name, as the store
 * sees them now: up to @cap into @out, *@count set to how many there are.
 * Errors: -EINVAL, -ENOENT, store errors.  For tools (softlimitctl).
 */
SL_API int sl_lease_budget_participants(sl_lease_store *s, const char *name,
					struct sl_lease_participant *out, size_t cap, size_t *count);

/* What the host says its memory is worth at the margin, each period. */
struct sl_lease_demand {
	uint64_t idle_ms;   /* how long the coldest item was not touched; UINT64_MAX: unknown */
	uint64_t evicted;   /* units evicted to make room under the share since the last call */
	uint64_t refaulted; /* units charged again soon after their eviction, since the last */
};

/*
 * Fill @out (preset to unknown, 0, 0).  Runs on the sl_lease_run() thread,
 * once per lease per period; must not block for long nor call lease
 * functions, except sl_lease_report_reuse() for @l.  A host that reports
 * no reuse gets the rule of "Demand" for idle_ms, evicted and refaulted;
 * one that does gets the reuse rule (sl_lease_report_reuse()).  NULL hook:
 * the lease uses what the group shows (charges that hit its max since the
 * last period count as evictions).
 */
typedef void (*sl_lease_demand_fn)(sl_lease *l, struct sl_lease_demand *out, void *ctx);

/**
 * sl_lease_report_reuse() - from @l's demand hook, what tells its live
 * memory from dead, since the hook's last call: @reused, each unit read
 * again times how long (ms) it had sat idle before, summed (a refaulted
 * unit counts too, at the host's best guess of how long ago it was last
 * read); @reuse_ms, the longest idle (ms) after which a unit was read
 * again (a hit on the coldest items; 0: none).  The lease then asks for
 * the memory that is read again, not for what it evicts (lease.h,
 * "Demand"; docs/leases.md).  A function, not fields of struct
 * sl_lease_demand, so that the structure keeps its size for hosts built
 * before it.  Errors: -EINVAL for NULL.  Call it only from @l's demand
 * hook, on the sl_lease_run() thread.
 */
SL_API int sl_lease_report_reuse(sl_lease *l, uint64_t reused, uint64_t reuse_ms);

enum {
	/* sl_lease_join() returns at once without touching the store: the
	 * group's max is 0 until the sl_lease_run() thread has registered it,
	 * then its floor until its first grant. */
	SL_LEASE_DEFERRED = 1u << 0,
};

struct sl_lease_opts {
	uint32_t size;        /* sizeof(struct sl_lease_opts): set by the init call      */
	uint32_t flags;       /* SL_LEASE_DEFERRED                                       */
	uint32_t period_ms;   /* how often the lease is renewed and its share moved (200) */
	uint32_t ttl_ms;      /* how long a renewal holds in the store (10000)           */
	uint32_t margin_ms;   /* the holder's view ends this much before the store's (1000) */
	uint32_t idle_ms;     /* memory idle this long is given back (30000)             */
	sl_lease_demand_fn demand; /* NULL: see sl_lease_demand_fn                      */
	void *demand_ctx;
};

/** sl_lease_opts_init() - the defaults above; NULL is ignored. */
SL_API void sl_lease_opts_init(struct sl_lease_opts *opts);

/**
 * sl_lease_join() - make @g a participant of @budget in @s; @opts may be
 * NULL.  The group's limits at join are kept: its local max becomes the
 * smaller of that max and its share, its soft the budget's soft in
 * proportion to its share; sl_lease_leave() restores them.  Unless
 * SL_LEASE_DEFERRED, registers at once: @g's usage must fit in the room no
 * one holds (the share starts at the larger of its usage and its floor).
 * Errors: -EINVAL for NULL arguments, a bad budget name or opts (period 0,
 * margin not below ttl, ttl above 1 hour, a period above ttl - margin, an
 * unknown flag, a wrong size); -EEXIST when @g already holds a
 * lease; -ENOENT for an unknown budget; -EBUSY when @g holds more than the
 * budget has free (shrink it and retry); -ENOSPC when the store has no free
 * slot; -ECHILD when @s was opened by another process (fork()); -EPROTO
 * when the budget's participants use the coordinated protocol and @s does
 * not; store errors; nothing changes on any error.  Thread-safe.  Until
 * the lease is left, sl_group_destroy(@g) answers -EBUSY (the run thread
 * steps @g).  On an etcd://...?coordinated store every join is registered
 * by the run thread, in the node's session (as SL_LEASE_DEFERRED, but
 * holding the group's usage at join rather than 0 until then): the budget
 * is not checked here, and a usage that does not fit in the room no one
 * holds is shrunk toward the floor by the run thread.
 */
SL_API int sl_lease_join(sl_lease_store *s, const char *budget, sl_group *g,
			 const struct sl_lease_opts *opts, sl_lease **out);

/**
 * sl_lease_leave() - end @l: its share goes back to the budget at once and
 * @g's limits are restored to those before join.  Call it when the group's
 * memory is gone or going (the group is destroyed, the process exits): what
 * the group still holds no longer counts against the budget.  A store error
 * is returned but the lease ends anyway (its record then expires: etcd, or
 * is found dead: shm).  In a fork()ed child, frees the child's copy of @l
 * only and returns 0 (see fork() above).  NULL is ignored (returns 0).
 * Thread-safe against sl_lease_run(); not against other calls on @l.
 */
SL_API int sl_lease_leave(sl_lease *l);

/**
 * sl_lease_run() - renew every lease joined on @s, move its share and apply
 * it, on the calling thread, once per period (the smallest period of its
 * leases), until sl_lease_stop(@s).  The library starts no thread: the host
 * gives it one, as for sl_background_run().  Store calls block only this
 * thread, each for at most the store's timeout; a failed one is tried
 * again within the period, so that a lease falls to its floor only when the
 * store was out of reach for its whole own view.  Returns 0 when stopped,
 * -EINVAL for NULL, -EBUSY when another thread already runs @s, -ECHILD
 * when @s was opened by another process (fork()).
 */
SL_API int sl_lease_run(sl_lease_store *s);

/** sl_lease_stop() - make sl_lease_run(@s) return, now and later.  NULL is ignored. */
SL_API void sl_lease_stop(sl_lease_store *s);

struct sl_lease_stats {
	uint64_t share;        /* the share applied to the group now (its local max)   */
	uint64_t floor;        /* what it falls to if it cannot renew                  */
	/* share and floor are current at every change: a raise shows just
	 * before the group has it, a cut or a lowered floor before the store
	 * hears of it. */
	uint64_t demand;       /* the demand it last reported                          */
	uint64_t usage;        /* the usage it last reported                           */
	int64_t expires_ms;    /* ms until its own view of its lease ends (<0: ended)  */
	enum sl_lease_state state;
	uint64_t renewals;     /* successful renewals                                  */
	uint64_t store_errors; /* store calls that failed                              */
	uint64_t grants;       /* times its share grew                                 */
	uint64_t shrinks;      /* times its share shrank                               */
	uint64_t fences;       /* times it fell to its floor                           */
	uint64_t store_resets; /* times it found the store empty or replaced           */
};

/** sl_lease_stats() - @l's figures into @out.  -EINVAL for NULL.  Thread-safe. */
SL_API int sl_lease_stats(const sl_lease *l, struct sl_lease_stats *out);

/** sl_lease_group() - the group @l was joined with; NULL for NULL. */
SL_API sl_group *sl_lease_group(const sl_lease *l);

#ifdef __cplusplus
}
#endif

#endif /* SOFTLIMIT_LEASE_H */
