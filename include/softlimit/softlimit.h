/* SPDX-License-Identifier: MIT */
/*
 * softlimit: hierarchical soft/hard limit accounting for multi-tenant servers.
 *
 * A tree of resource groups, lock-light charge/uncharge, hard limits that
 * hold under any load, soft limits and protections that decide who gives
 * memory back under pressure, and a reclaim-victim selector that calls back
 * into the host's allocators.
 *
 * Conventions, stated once for every function below:
 *  - Functions that can fail return int: 0 on success, a negative errno value
 *    (-EINVAL, -ENOMEM, -EBUSY, -EEXIST, -ENOENT) on failure.  Nothing aborts,
 *    prints, or wraps a counter on bad input.
 *  - Amounts are uint64_t units (bytes in most hosts).
 *  - A group pointer must come from sl_tree_root() or sl_group_create() and
 *    must not have been destroyed; passing a destroyed group is undefined
 *    (the library catches the common cases and returns -EINVAL).
 *  - Memory ordering: a successful sl_charge() or sl_uncharge() happens
 *    before any sl_group_stats() that a later happens-before edge (a mutex, a
 *    thread join) orders after it.  Stats read while charges run are a
 *    consistent-enough snapshot: each counter is read atomically, the set of
 *    counters is not read at one instant.
 */
#ifndef SOFTLIMIT_SOFTLIMIT_H
#define SOFTLIMIT_SOFTLIMIT_H

#include <stddef.h>
#include <stdint.h>

#include <softlimit/version.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SL_BUILDING_LIBRARY) && defined(__GNUC__)
#define SL_API __attribute__((visibility("default")))
#else
#define SL_API
#endif

typedef struct sl_tree sl_tree;
typedef struct sl_group sl_group;

/** No limit: the default of high and max. */
#define SL_UNLIMITED UINT64_MAX

/** The per-thread charge batch that sl_tree_opts_init() and batch = 0 give. */
#define SL_BATCH_DEFAULT ((uint64_t)32768)
/** The largest batch a tree accepts (the stock's counters are 22 bits wide). */
#define SL_BATCH_MAX ((uint64_t)1 << 20)
/** A batch that means "no per-thread stock": every charge is exact, one atomic per level. */
#define SL_BATCH_NONE UINT64_MAX
/**
 * The reclaim batch that sl_tree_opts_init() gives: a charge at max reclaims
 * this much more than it needs (at most max/16 of the group in the way), so
 * one reclaim serves the charges that follow.  0 reclaims exactly the need.
 */
#define SL_RECLAIM_BATCH_DEFAULT ((uint64_t)131072)

/** Deepest group below the root (the root is at depth 0). */
#define SL_DEPTH_MAX 64
/** Longest group name, in bytes, not counting the terminating NUL. */
#define SL_NAME_MAX 255

enum sl_policy {
	SL_POLICY_GUARANTEE = 0,  /* soft limit = a guaranteed minimum (the default) */
	SL_POLICY_GATEKEEPER = 1, /* a parent over its soft limit opens its whole subtree */
	SL_POLICY_PROTECTION = 2, /* cgroup v2 memory.low: effective, proportional protection */
	SL_POLICY_REFAULT = 3,    /* GUARANTEE's promises; above them, fewest refaults first */
};

/*
 * SL_POLICY_REFAULT (release 0.2.1) grants exactly what GUARANTEE grants:
 * min and the soft limit are promises, and pass 2 is GUARANTEE's.  It
 * changes only who gives first from the memory above soft limits: pass 1
 * takes from the over-limit group with the fewest recent refaults (reads
 * that missed what reclaim took from it lately, as hosts report them with
 * sl_refault()), where GUARANTEE takes the largest excess first; ties, a
 * tree without reports among them, go to the larger excess.  When every
 * group's ghost list reaches equally far back (see sl_refault()), a
 * group's refaults are the hits that much more memory would have given
 * it: the fewest is the lowest marginal hit value (Memshare's shadow
 * queues, the kernel's workingset refaults).  "Recent" is a window of
 * about the tree's usage in reclaim: each window ended halves older
 * counts, so time runs with reclaim and a quiet tree keeps its order.
 * A group that reports nothing gives first; a host that reports for some
 * groups only protects those.
 *
 * Why a policy and not an option of the three: the order is what the
 * policies differ in above their grants, and it composes with only one
 * of them.  GATEKEEPER's open gate and PROTECTION's proportional pass are
 * rules about how much each eligible group gives, which an order would
 * override; GUARANTEE's pass 1 is an order (largest excess first), which
 * this one replaces.  Under the other policies refaults are still
 * counted (sl_stats.refaults, the dumps), so an operator can see what
 * the mode would use before switching to it.
 */

struct sl_limits {
	uint64_t min;  /* hard protection: never reclaimed             (default 0)            */
	uint64_t soft; /* soft limit; 0 = no claim, always reclaimable (default 0)            */
	uint64_t high; /* throttle threshold                           (default SL_UNLIMITED) */
	uint64_t max;  /* hard limit                                   (default SL_UNLIMITED) */
};

/*
 * Room to grow: sl_ops, sl_tree_opts and sl_stats end in reserved space.
 * Callers zero it (sl_tree_opts_init() does, and so does any initializer
 * that names some fields, such as `struct sl_ops ops = { .reclaim = fn }`);
 * a later release gives it meaning, with zero keeping today's behaviour.
 * A nonzero reserved field in sl_ops or sl_tree_opts is -EINVAL, so a
 * program that uses a newer field against an older library fails clearly
 * instead of being ignored.  sl_group_stats() zeroes it in sl_stats.
 */

struct sl_ops {
	/* Free up to `target` units charged directly to g (not its children). The host
	 * frees objects and calls sl_uncharge() for them as it always does; it returns
	 * the amount it freed. May be called from any thread that calls sl_charge() or
	 * sl_reclaim(). */
	uint64_t (*reclaim)(sl_group *g, uint64_t target, void *ctx);
	void *reserved[7];     /* zero */
};

struct sl_tree_opts {
	enum sl_policy policy;
	uint64_t batch;        /* per-thread charge batch in units; 0 = library default     */
	struct sl_limits root; /* limits of the root group: the whole budget                */
	uint64_t reclaim_batch; /* extra units a charge at max reclaims; 0 = just the need  */
	uint64_t reserved[7];  /* zero */
};

/**
 * sl_limits_init() - fill @lim with the defaults: min 0, soft 0, high and max
 * SL_UNLIMITED.  A NULL @lim is ignored.  Thread-safe.
 */
SL_API void sl_limits_init(struct sl_limits *lim);

/**
 * sl_tree_opts_init() - fill @opts with the defaults: SL_POLICY_GUARANTEE,
 * batch SL_BATCH_DEFAULT, reclaim batch SL_RECLAIM_BATCH_DEFAULT, default
 * root limits, reserved space zeroed.  A NULL @opts is ignored.  (A zeroed
 * struct gives reclaim batch 0, the exact reclaim of release 0.1.)
 */
SL_API void sl_tree_opts_init(struct sl_tree_opts *opts);

/**
 * sl_tree_create() - create a tree with its root group.
 * @opts: policy, batch and root limits; NULL means sl_tree_opts_init()'s.
 *        batch 0 means SL_BATCH_DEFAULT; SL_BATCH_NONE turns stocks off.
 * @out:  receives the tree.
 *
 * Errors: -EINVAL for a NULL @out, an unknown policy, a batch above
 * SL_BATCH_MAX (other than SL_BATCH_NONE), inconsistent root limits
 * (min or soft above max) or nonzero reserved space; -ENOMEM when memory runs out (nothing is leaked).
 * Thread-safe.  The caller owns the tree and frees it with sl_tree_destroy().
 */
SL_API int sl_tree_create(const struct sl_tree_opts *opts, sl_tree **out);

/**
 * sl_tree_destroy() - free the tree and every group in it, whatever they
 * still hold, held groups too (sl_group_hold()): the host stops whatever
 * holds them first (a lease's run thread, say).  Per-thread stocks of its
 * groups are emptied.  NULL is ignored.
 * No other call may use the tree or its groups concurrently or afterwards;
 * other trees are unaffected.
 */
SL_API void sl_tree_destroy(sl_tree *t);

/** sl_tree_root() - the root group of @t (NULL for a NULL @t).  Thread-safe. */
SL_API sl_group *sl_tree_root(const sl_tree *t);

/** sl_group_tree() - the tree @g belongs to (NULL for a NULL @g).  Thread-safe. */
SL_API sl_tree *sl_group_tree(const sl_group *g);

/**
 * sl_tree_policy() - the policy @t was created with (SL_POLICY_GUARANTEE for
 * a NULL @t).  Thread-safe.
 */
SL_API enum sl_policy sl_tree_policy(const sl_tree *t);

/**
 * sl_tree_batch() - the effective per-thread batch of @t: 0 when stocks are
 * off (SL_BATCH_NONE), else the batch in units.  0 for a NULL @t.
 */
SL_API uint64_t sl_tree_batch(const sl_tree *t);

/**
 * sl_group_create() - create a child of @parent.
 * @name: copied; 1..SL_NAME_MAX bytes, no '/'; unique among @parent's children.
 * @lim:  its limits; NULL means sl_limits_init()'s.
 * @ops:  copied; NULL, or a NULL reclaim, means the group holds its charges.
 * @ctx:  passed back to @ops->reclaim and returned by sl_group_ctx().
 * @out:  receives the group.
 *
 * Errors: -EINVAL for a NULL @parent or @out, a bad name, inconsistent limits
 * (min or soft above max), a depth beyond SL_DEPTH_MAX or nonzero reserved
 * space in @ops; -EEXIST when a
 * sibling has that name; -ENOMEM when memory runs out (the tree is as it was);
 * -EBUSY when called from inside sl_group_walk() of the same tree.
 * Thread-safe: groups may be created and destroyed while other threads
 * charge, uncharge or create elsewhere in the tree.
 */
SL_API int sl_group_create(sl_group *parent, const char *name, const struct sl_limits *lim,
			   const struct sl_ops *ops, void *ctx, sl_group **out);

/**
 * sl_group_destroy() - destroy a group that has no children, no charges
 * and no holds (sl_group_hold()).
 * Units that per-thread stocks hold for it are given back first.
 *
 * Errors: -EINVAL for NULL or the root (the root goes with its tree);
 * -EBUSY while it has children, charges or holds (nothing changes), and
 * when called from inside a reclaim callback or sl_group_walk() of the
 * same tree.  Waits for a reclaim of the tree in progress to finish.
 * Thread-safe with respect to other groups; nothing may charge @g
 * concurrently.
 */
SL_API int sl_group_destroy(sl_group *g);

/**
 * sl_group_hold() - keep @g from being destroyed: until as many
 * sl_group_unhold() calls as holds, sl_group_destroy(@g) returns -EBUSY
 * and leaves @g as it is.  For code that keeps a pointer to a group it
 * does not own and uses it from its own threads (libsoftlimit-lease holds
 * the group a lease steers): the group's owner then cannot free it under
 * that code, and learns that it is still in use.  Holds count, so several
 * holders may hold one group.  (Release 0.2.2.)
 *
 * Holding the root is allowed and changes nothing (the root goes only
 * with its tree).  sl_tree_destroy() frees held groups all the same: stop
 * the holders first.  A hold is not a reference that keeps a destroyed
 * group alive: hold a group only while it is known to live (before handing
 * it over, say).
 *
 * Errors: -EINVAL for a NULL @g; -EOVERFLOW when @g already has
 * UINT32_MAX holds (nothing changes).  Thread-safe, from any context, inside sl_group_walk() and
 * reclaim callbacks too; takes the tree's topology lock briefly, calls no
 * callback, allocates nothing.  The holder owns its hold and gives it back
 * with sl_group_unhold().
 */
SL_API int sl_group_hold(sl_group *g);

/**
 * sl_group_unhold() - give back one hold of @g taken by sl_group_hold();
 * when the last goes, sl_group_destroy(@g) may free it again.  Errors:
 * -EINVAL for a NULL @g or a group without holds (a caller bug; nothing
 * changes).  Thread-safe, as
 * sl_group_hold().  (Release 0.2.2.)
 */
SL_API int sl_group_unhold(sl_group *g);

/**
 * sl_group_set_limits() - replace the limits of @g.
 *
 * The new limits are in force when the call returns.  A max below the
 * current usage applies at once (further unforced charges fail or reclaim)
 * and the call reclaims from @g's subtree toward it; soft and min changes
 * take effect on the next reclaim.
 *
 * Stocks: when @g's usage + stocked is above the new max or the new high,
 * the units that per-thread stocks hold in @g's subtree, every thread's,
 * go back to the counters before the call returns, from whatever context
 * it is made (plain code, another thread's charges in flight, an
 * sl_group_walk() visitor, a reclaim callback, the OOM handler), as the
 * kernel's page_counter_set_max() keeps a new limit from being passed by
 * a charge in flight.  So a later charge never gets past a lowered limit
 * through units stocked before it.  Precisely: from the moment the call
 * returns (0 or -EBUSY) until @g's limits change again, with C = @g's
 * usage + stocked at that moment,
 *  - no charge without SL_FORCE in @g's subtree takes @g's usage + stocked
 *    above max(C, new max);
 *  - no charge without SL_FORCE in @g's subtree takes @g's usage above the
 *    new max, unless charges with SL_FORCE took @g's usage + stocked above
 *    it meanwhile: a charge that would fails at max (after reclaim) as any
 *    charge does, whether or not the calling thread holds a stock;
 *  - the same for high: a charge that takes @g's usage past the new high
 *    counts a high event on @g and sets the charging thread's
 *    sl_high_pending(), whether or not a stock served it.
 * Units that stocks take after the call are charged within the new limits.
 * Giving stocks back costs one fence of the stock protocol (one
 * membarrier() at most) and is skipped when usage + stocked is within
 * both new limits: stocked units are then within them too.
 *
 * Errors: -EINVAL for NULL arguments or inconsistent limits (min or soft
 * above max; nothing changes); -EBUSY when the new limits are in force but
 * usage is still above the new max after the stocks went back and reclaim
 * (inside a reclaim callback or a walk, which do not reclaim, whenever
 * usage is above it then).
 * Thread-safe; a set of limits is applied whole: concurrent calls for one
 * group take turns (a lock of the tree's, held while the four values are
 * stored and never while reclaiming), so the group ends with one caller's
 * set, never a mix, and sl_group_limits() never sees one.  Charges running
 * concurrently see either the old or the new value of each limit (they
 * take no lock).  May call reclaim callbacks, as sl_reclaim().
 */
SL_API int sl_group_set_limits(sl_group *g, const struct sl_limits *lim);

/**
 * sl_group_limits() - copy @g's limits to @out: one whole set, as one
 * sl_group_set_limits() (or the group's creation) stored it, even while
 * other threads set them.  -EINVAL for NULL arguments.  Thread-safe;
 * lock-free unless a setter of the tree is storing limits, then it waits
 * for that setter's store.
 */
SL_API int sl_group_limits(const sl_group *g, struct sl_limits *out);

/** sl_group_name() - @g's name (the root's is ""); valid while @g lives.  NULL for NULL. */
SL_API const char *sl_group_name(const sl_group *g);

/** sl_group_parent() - @g's parent; NULL for the root or a NULL @g. */
SL_API sl_group *sl_group_parent(const sl_group *g);

/** sl_group_ctx() - the ctx given to sl_group_create() (NULL for the root or a NULL @g). */
SL_API void *sl_group_ctx(const sl_group *g);

enum {
	SL_NORECLAIM = 1u << 0, /* never reclaim: fail at once (the caller holds locks)  */
	SL_FORCE = 1u << 1,     /* must succeed: charge past max, and count the event    */
	/* SL_FORCE still makes room first as usual (stocks, then reclaim unless
	 * SL_NORECLAIM); only what does not fit then goes past max. */
	SL_TRY = 1u << 3,       /* a first try: a failure counts no oom event        */
	/* SL_TRY is for a caller with another way to go when the charge fails
	 * (it makes room and charges again, as the jemalloc adapter's hooks
	 * and their allocation do): events_oom counts charges that failed for
	 * good, and it is that later charge's to count.  Everything else,
	 * events_max included, is as without it.  (1u << 2 stays unused:
	 * tests and fuzzers of 0.2 take it for an unknown flag.) */
};

/**
 * sl_charge() - charge @amount units to @g and every ancestor.
 *
 * Succeeds only if no group on the path would pass its max (unless SL_FORCE);
 * a failed charge leaves every counter as it was.  Most charges are taken
 * from a per-thread stock pre-charged to the hierarchy and touch no cache
 * line that another thread writes.  Before failing, the stocks of every
 * thread holding units of the groups in the way are drained.  An amount of 0
 * succeeds and does nothing.
 *
 * Errors: -EINVAL for a NULL @g, unknown flags, or an amount that would
 * overflow a counter (with SL_FORCE or without); -ENOMEM when the charge
 * does not fit under some max (events_max and events_oom count on the group
 * whose max was hit; events_oom not with SL_TRY).
 *
 * At max, without SL_NORECLAIM: this thread's idle stock units under the
 * group in the way are given back (other threads' are taken in a round
 * where reclaim made no progress, so threads at max do not take each
 * other's next charges), then the group's subtree is reclaimed by the
 * policy, for the
 * amount missing plus the tree's reclaim batch (the batch from pass 1 only:
 * it never costs a group what its policy grants), and the charge is tried
 * again, first as a stock refill (so the room made serves this thread's
 * next charges too).  It fails with -ENOMEM only when reclaim cannot make
 * progress: 16 rounds in a row in which no reclaim of the tree, this one
 * or another thread's, freed anything (what is left under the group is
 * protected by min, or by what the policy grants in pass 1 and pass 2
 * could not take, or belongs to groups without a callback, or the
 * callbacks freed nothing), and then the OOM handler declined.  Room that
 * another thread's charge took first is no failure while reclaims make
 * progress, and reclaims of other threads in flight are waited for.  A
 * charge that could not fit even if reclaim freed all it may (every group
 * kept at its min, or effective min under SL_POLICY_PROTECTION, groups
 * without a callback holding their charges) reclaims nothing: once the
 * stocks under the group in the way are given back, it goes straight to
 * the OOM handler, then fails (or, with SL_FORCE, goes past max), every
 * group's charges left as they were.
 *
 * Thread-safe and lock-free on every path but the one at max (which takes
 * the stock registry's lock to drain other threads' stocks, and reclaims).
 */
SL_API int sl_charge(sl_group *g, uint64_t amount, unsigned flags);

/**
 * sl_charge_can_fit() - could a charge of @amount to @g fit under the max
 * of @g and of every ancestor, now or once reclaim freed all it may?  The
 * judgement sl_charge() makes at max before it reclaims (see above: every
 * group kept at its min, or effective min under SL_POLICY_PROTECTION,
 * groups without a callback holding their charges), made here for the
 * whole path, for a host that makes room its own way between tries of a
 * charge without reclaim (the jemalloc adapter does): when the answer is
 * no, reclaim would evict for nothing.  (Release 0.2.2.)
 *
 * Returns 1 (it fits now, or reclaim may make room), 0 (it cannot fit even
 * then: charge past max with SL_FORCE or fail), -EINVAL for a NULL @g.  An
 * @amount of 0 always fits.  Inside a reclaim callback, the OOM handler or
 * sl_group_walk(), where charges do not reclaim, only room now counts.
 * Before a 0, other threads' idle stock units under the group in the way
 * are given back (they may be the room), as sl_charge() does before it
 * fails.  The answer is of the moment: charges, uncharges and limit
 * changes of other threads may change it right after.
 *
 * Thread-safe; charges nothing and calls no callback.  Takes the tree's
 * topology lock (to see the subtree) and the stock registry's lock when
 * @amount does not fit now.
 */
SL_API int sl_charge_can_fit(sl_group *g, uint64_t amount);

/**
 * sl_uncharge() - return @amount units charged to @g.
 *
 * Uncharging more than is charged to @g itself (not its children) is a
 * caller bug: everything charged to @g is uncharged, and -EINVAL returned.
 * Units may be uncharged by a thread other than the one that charged them,
 * wherever they sit (another thread's stock included): an uncharge of units
 * the host holds never fails, however threads interleave.
 * The units returned stay charged as this thread's stock (reported as
 * stocked, not usage) up to about two batches, when every level has room
 * for a batch under its max and high, as a charge's refill would put them
 * there; so a thread that frees what others allocate moves no counter per
 * call.  Inside a reclaim callback, and above a batch, they leave the
 * counters at once.
 * Errors: -EINVAL for a NULL @g or an over-uncharge.  Thread-safe.
 * Lock-free when the thread's own stock or @g's own charge covers @amount;
 * otherwise it folds other threads' stocks of @g in under the stock
 * registry's lock, and a shortfall that survives two folds is settled
 * exactly by a third, during which stocks of @g are not refilled (charges
 * to @g go the exact way meanwhile).  An over-uncharge always gets that far.
 */
SL_API int sl_uncharge(sl_group *g, uint64_t amount);

/**
 * sl_reclaim() - free up to @target units from @scope's subtree, choosing
 * victims by the tree's policy (see README, "Soft-limit policies").
 * @flags: 0 (no flags are defined yet; others make the call return 0).
 *
 * Stocks of the subtree are drained first.  Pass 1 reclaims only from the
 * groups the policy makes eligible, never below what the policy grants
 * them; pass 2, if pass 1 freed too little, reclaims from every group in
 * proportion to what it holds above its min.  min is never reclaimed, the
 * scope's included (under SL_POLICY_PROTECTION the floor is the effective
 * min, and as in cgroup v2 the scope's own protection does not shield it);
 * the scope's own soft limit never shields it from its own reclaim.  A
 * callback is never asked for more than what remains of
 * @target; what it returns is believed only as far as the group's usage
 * really fell.
 *
 * Returns the units usage really fell by (0 for bad arguments, or when
 * called from inside a reclaim callback or OOM handler: reclaim does not
 * nest).  Thread-safe: reclaims run concurrently, on overlapping subtrees
 * too, while charges, uncharges, stats and group create and destroy go on.
 * Concurrent reclaims share the work: each claims what it asks a callback
 * for, and never claims what others claimed or what would take a group
 * under its floor, so together they free about what they asked for.  A
 * group's callback runs on one thread at a time (reclaims of the same group
 * take turns, and each claims against what the last one left), so a
 * callback that frees more than asked (whole items) still leaves its own
 * group's floor exact.  Under GUARANTEE and GATEKEEPER, which keep every
 * min on a group's path, callbacks of different groups under one min may
 * together take it by less than one item per such callback in flight;
 * callbacks that free at most what they are asked keep every min exact
 * (units on their way between a stock and the counters never count as
 * usage; proof/reclaim.pml checks it, case CFG_CLAIM_REFILL).
 * Callbacks run in the calling thread with no library lock held; different
 * groups' callbacks run on several threads at once, and any callback runs
 * while the host's own threads charge and uncharge, so it must be
 * thread-safe.  Inside a callback charges never reclaim (they fail at max
 * instead) and sl_group_destroy() returns -EBUSY.  A callback must not wait
 * for another thread that is reclaiming this tree, charging it without
 * SL_NORECLAIM (such a charge may reclaim) or destroying one of its groups:
 * a group's callback runs on one thread at a time, and destroy waits for the
 * reclaims that hold its group.
 */
SL_API uint64_t sl_reclaim(sl_group *scope, uint64_t target, unsigned flags);

/**
 * sl_refault() - report @count refaults of @g: reads that missed items
 * @g's reclaim callback evicted lately, which more memory would have
 * kept.  (Release 0.2.1.)
 *
 * Hosts find refaults with a bounded "ghost" list per group: the keys
 * (hashes, not values) of what the callback evicted, charged to the group
 * like any other memory, searched on a read miss and dropped on a hit or
 * a store, skipping keys that would have expired anyway.  How far back a
 * list reaches decides what a refault means: give every group's list the
 * same reach in units (say, the tree's max over the number of groups), so
 * that their counts compare as hits per that much memory.  @count is 1 per
 * read to maximise the hit ratio; a host that weighs misses by size (a
 * byte hit ratio) passes the item's units instead.
 *
 * Under SL_POLICY_REFAULT the counts order pass 1 (see the policy's
 * comment above); under every policy they add to sl_stats.refaults and
 * the dumps.  Counts are kept with relaxed atomics on @g and each
 * ancestor: a report racing with a window's halving may be halved too,
 * which moves an order, never a limit or a promise.
 *
 * Returns 0; -EINVAL for a NULL @g.  An @count of 0 does nothing; counts
 * saturate instead of wrapping.  Thread-safe and lock-free: any thread,
 * at any time, inside a reclaim callback too; calls no callback and
 * allocates nothing; costs one relaxed atomic add per level of @g's path.
 */
SL_API int sl_refault(sl_group *g, uint64_t count);

/**
 * sl_oom_fn - the tree's OOM handler: called when a charge of @need units
 * still does not fit under @at's max after reclaim.  It may free memory (drop
 * a tenant: uncharge, destroy groups) and returns nonzero to have the charge
 * tried once more, 0 to let it fail with -ENOMEM.  It runs in the charging
 * thread with no library lock held; charges made inside it never reclaim.
 */
typedef int (*sl_oom_fn)(sl_group *at, uint64_t need, void *ctx);

/**
 * sl_group_set_headroom() - ask background reclaim to keep @g's usage (its
 * stocks included) at or below its max minus @headroom; 0 (the default)
 * leaves @g to foreground reclaim only.  Errors: -EINVAL for a NULL @g,
 * -EBUSY inside sl_group_walk() of the tree, -ENOMEM.  Thread-safe.
 */
SL_API int sl_group_set_headroom(sl_group *g, uint64_t headroom);

/**
 * sl_background_reclaim() - one round of background reclaim of @t: every
 * group with a headroom whose usage is above max - headroom is reclaimed
 * down to it, by the tree's policy, from what pass 1 may take only:
 * reclaim ahead of need never takes what the policy grants a group (its
 * soft limit, its protection): neither the group with the headroom nor any
 * group above it goes below what sl_group_stats() reports as its emin and
 * esoft, and the groups below it keep what pass 1 spares them.  So a group
 * whose grant is above its watermark is left at its grant (rounds then
 * free nothing); charges at max still may take it, in pass 2.  Returns the
 * units freed (0 for NULL or inside a callback).  Thread-safe; for hosts
 * that run their own loop.
 */
SL_API uint64_t sl_background_reclaim(sl_tree *t);

/**
 * sl_background_run() - run background reclaim of @t on the calling thread
 * until sl_background_stop(@t): rounds of sl_background_reclaim() while
 * they free memory, and sleep while no group is above its watermark (a
 * charge that passes one wakes it, lock-free) or while what is above cannot
 * be freed (then it looks again every 100 ms).  The library starts no
 * thread: the host gives it one.  Returns 0 when stopped, -EINVAL for NULL,
 * -EBUSY inside a callback.  Callbacks run on this thread as in
 * sl_reclaim().
 */
SL_API int sl_background_run(sl_tree *t);

/**
 * sl_background_stop() - make every sl_background_run(@t) return, now and
 * later (for shutdown, before sl_tree_destroy()).  Thread-safe; NULL is
 * ignored.
 */
SL_API void sl_background_stop(sl_tree *t);

/**
 * sl_tree_set_oom_handler() - install @fn (NULL removes it) with @ctx.
 * Errors: -EINVAL for a NULL @t.  Thread-safe; a charge already at max may
 * still call the previous handler.
 */
SL_API int sl_tree_set_oom_handler(sl_tree *t, sl_oom_fn fn, void *ctx);

/**
 * sl_high_pending() - nonzero when a charge made by the calling thread went
 * past some group's high since the thread last called
 * sl_handle_over_high().  Per-thread, lock-free, cheap: meant to be checked
 * on the way out of a request, as the kernel checks on return to user.
 */
SL_API int sl_high_pending(void);

/**
 * sl_handle_over_high() - the safe point for high: for every group on @g's
 * path (g, its parent, ... the root) whose usage is above its high, reclaim
 * it back to its high.  Call it outside the host's own locks.  Clears the
 * thread's pending flag.  Returns the units freed (0 for a NULL @g, or
 * inside a callback).  Thread-safety and callbacks as sl_reclaim().
 */
SL_API uint64_t sl_handle_over_high(sl_group *g);

/**
 * sl_walk_fn - visited by sl_group_walk() for each group, parents before
 * children; @depth is relative to the walk's scope (0 for the scope).
 * Return 0 to go on, anything else to stop the walk with that value.
 */
typedef int (*sl_walk_fn)(sl_group *g, unsigned depth, void *arg);

/**
 * sl_group_walk() - visit @scope and every descendant, in pre-order.
 * Returns 0, the first nonzero value @fn returned, or -EINVAL for NULL
 * arguments.  Holds the tree's topology lock throughout; inside @fn the
 * calls that would need it or reclaim refuse instead of deadlocking: charges
 * do not reclaim (they fail at max), sl_reclaim() returns 0,
 * sl_group_set_limits() returns -EBUSY if the new max needs reclaim, and
 * sl_group_create()/sl_group_destroy() on this tree return -EBUSY.  Lookups,
 * stats, dumps and nested walks of the tree work.
 */
SL_API int sl_group_walk(sl_group *scope, sl_walk_fn fn, void *arg);

/**
 * sl_group_lookup() - find the group at @path below @scope: names separated
 * by '/', e.g. "a/b/c"; "" is @scope itself.  Errors: -EINVAL for NULL
 * arguments or an empty component ("a//b", "/a"); -ENOENT when no such
 * group exists.  Thread-safe.
 */
SL_API int sl_group_lookup(sl_group *scope, const char *path, sl_group **out);

/**
 * sl_group_path() - write @g's path from the root ("a/b/c"; "" for the root)
 * into @buf of @size bytes, NUL-terminated.  Returns 0, -EINVAL for NULL
 * arguments, or -ENOSPC when it does not fit (@buf then holds a truncated,
 * terminated path).  Thread-safe.
 */
SL_API int sl_group_path(const sl_group *g, char *buf, size_t size);

enum sl_dump_format {
	SL_DUMP_TEXT = 0, /* one aligned line per group, indented by depth */
	SL_DUMP_JSON = 1, /* one JSON object: {"groups":[{"path":..., "usage":..., ...}, ...]} */
	/* OpenMetrics text (Prometheus): a family per counter and limit, e.g.
	 * softlimit_usage_bytes{group="/a/b"}, amounts labelled bytes, unlimited
	 * limits as +Inf, then "# EOF".  Serve it as
	 * application/openmetrics-text; version=1.0.0; charset=utf-8. */
	SL_DUMP_OPENMETRICS = 2,
};

/**
 * sl_group_dump() - write the stats of @scope's subtree into @buf (@size
 * bytes, always NUL-terminated when @size > 0): usage, stocked, peak,
 * limits, effective protection, events and reclaimed of each group.
 * @needed: if not NULL, receives the full length (without the NUL).
 * Returns 0, -EINVAL for a NULL @scope, unknown @format or NULL @buf with a
 * nonzero @size, -ENOSPC when the output was truncated (call again with
 * *needed + 1 bytes), -ENOMEM when memory runs out.  Thread-safe; a group
 * created or destroyed during the dump may or may not appear.
 */
SL_API int sl_group_dump(sl_group *scope, enum sl_dump_format format, char *buf, size_t size,
			 size_t *needed);

struct sl_stats {
	uint64_t usage;       /* charged by the host to the group and its descendants       */
	uint64_t stocked;     /* pre-charged into per-thread stocks, not yet handed out     */
	uint64_t peak;        /* highest usage + stocked seen                               */
	struct sl_limits limits;
	uint64_t emin, esoft; /* effective protection right now (what the policy grants)    */
	uint64_t events_low;  /* reclaimed while within its soft limit / effective protection */
	uint64_t events_high; /* charges that went past high                                */
	uint64_t events_max;  /* charges that hit max (failed, reclaimed or forced)         */
	uint64_t events_oom;  /* charges that failed for good at max                        */
	uint64_t reclaimed;   /* units freed from this group by its reclaim callback        */
	uint64_t headroom;    /* as sl_group_set_headroom() set it                          */
	uint64_t refaults;    /* what sl_refault() reported for this group (0.2.1)           */
	uint64_t reserved[6]; /* zeroed by sl_group_stats(); later releases fill it         */
};

/**
 * sl_group_stats() - read @g's counters into @out.
 *
 * usage is exact when no charge is in flight, and while charges run it is
 * never more than the host holds plus the charges in flight: units on their
 * way between a stock and the counters are never counted as usage.
 * stocked is what per-thread stocks hold for @g's subtree.  Errors:
 * -EINVAL for NULL arguments.  Thread-safe; takes the stock registry's lock
 * briefly to sum the stocks, and waits for other threads' stock refills in
 * progress (each a few atomic operations).
 */
SL_API int sl_group_stats(const sl_group *g, struct sl_stats *out);

/**
 * sl_tree_check() - check the invariants of a quiescent tree, the slow and
 * obvious way: at every group, usage + stocked equals the host's own charge
 * plus what stocks hold plus the children's; peak is at least that; the
 * links, child counts and the name index agree.  For tests, fuzzers and debug endpoints.
 *
 * Returns 0, -EINVAL for NULL, -EIO when an invariant does not hold.  The
 * tree must be quiet (no charge in flight) for the answer to mean anything;
 * takes the topology and stock registry locks.
 */
SL_API int sl_tree_check(sl_tree *t);

/**
 * sl_version() - the library's version string, "MAJOR.MINOR.PATCH", which
 * may differ from SL_VERSION_STRING when running against another build.
 */
SL_API const char *sl_version(void);

/** sl_version_number() - the library's SL_VERSION_NUMBER at run time. */
SL_API unsigned sl_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* SOFTLIMIT_SOFTLIMIT_H */
