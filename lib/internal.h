/* SPDX-License-Identifier: MIT */
/*
 * softlimit's private declarations: the group and tree objects, the
 * per-thread stock, and the functions the library's files share (sl__*).
 *
 * The files form layers, and calls go one way only, down:
 *
 *   8  tree.c walk.c stats.c check.c openmetrics.c version.c
 *                                          the public objects, seeing the tree
 *   7  policy_guarantee.c policy_gatekeeper.c policy_protection.c
 *   6  reclaim.c (engine) atmax.c limits.c background.c victims.c
 *      proportional.c split.c              reclaim and what calls it (limits.c:
 *                                          high too)
 *   5  charge.c uncharge.c                 sl_charge(), sl_uncharge()
 *   4  stock.c stock_take.c stock_handover.c (stock.h)  per-thread stocks
 *   3  counter.c refault.c                 hierarchical counters, refault counts
 *   2  overindex.c                         groups over their soft limit,
 *                                          overcommitted protection
 *   1  group.c                             group objects and topology
 *   0  alloc.c atomic.h                    allocation, atomics
 *
 * Two calls go up, and both through a pointer chosen when the tree is
 * created: a charge that does not fit under some max (layer 5) reaches the
 * reclaim engine through tree->at_max, and the engine (6) runs the tree's
 * policy through tree->policy (7).
 */
#ifndef SL_INTERNAL_H
#define SL_INTERNAL_H

/* strnlen() and the like; internal.h comes first in every file. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <softlimit/softlimit.h>

#include "atomic.h"

#define SL__CACHELINE 64
#define SL__GROUP_MAGIC 0x736c6772u /* "slgr" */
#define SL__GROUP_DEAD 0x64656164u  /* "dead" */
#define SL__FLAGS_ALL (SL_NORECLAIM | SL_FORCE | SL_TRY)

struct sl__reclaim;
struct sl__node;

/*
 * A group.  Three parts, each on its own cache line(s):
 *  - counters moved by charges that miss the per-thread stock (refill, flush,
 *    drain, exact charges) and by reclaim: the write-hot line;
 *  - limits and immutable topology, read by every slow-path charge;
 *  - the links of the tree and the reclaim state, written under the tree's
 *    lock or by reclaim.
 * The fast path never touches a group at all: it works on the thread's stock.
 */
struct sl_group {
	/* ---- write-hot: slow-path counters ---- */
	_Alignas(SL__CACHELINE) sl_atomic64 count; /* usage + stocked of the subtree: what max bounds */
	sl_atomic64 local;       /* host units charged to this group itself and not in a stock's ledger */
	sl_atomic64 peak;        /* highest count seen */
	sl_atomic64 events_high;
	sl_atomic64 events_max;
	sl_atomic64 events_oom;
	sl_atomic64 events_low;
	sl_atomic64 reclaimed;

	/* ---- read-mostly: limits and immutable topology ---- */
	_Alignas(SL__CACHELINE) sl_atomic64 min;
	sl_atomic64 soft;
	sl_atomic64 high;
	sl_atomic64 max;
	sl_tree *tree;
	sl_group *parent;
	void *ctx;
	uint64_t (*reclaim_fn)(sl_group *g, uint64_t target, void *ctx);

	/* ---- tree links (under tree->lock) and reclaim state ---- */
	_Alignas(SL__CACHELINE) sl_group *first_child;
	sl_group *next_sibling;
	sl_group *prev_sibling;
	sl_group *hnext;          /* tree's name hash chain */
	uint32_t magic;
	uint32_t nr_children;
	uint16_t depth;           /* root is 0; at most SL_DEPTH_MAX */
	uint16_t name_len;        /* at most SL_NAME_MAX */
	/* Exact over-uncharge checks running on this group: while nonzero,
	 * refills of its stocks charge into local (see uncharge.c). */
	sl_atomic32 checks;
	/* PROTECTION trees only (else NULL): the protected usages, in the
	 * same block after the name. */
	struct sl__prot *prot;

	/* ---- reclaim state ---- */
	_Atomic(sl_group *) over_next; /* the tree's index of groups over their soft limit */
	sl_atomic32 over_flag;    /* 1 while in that index (pending or member) */
	/* Reclaims holding a pointer to this group (a snapshot, a candidate,
	 * a destroyed child on its way out): destroy waits for 0. */
	sl_atomic32 pins;
	sl_atomic32 low_seq;      /* last reclaim that counted a low event here */
	sl_atomic32 in_callback;  /* a reclaim is running this group's callback */
	/* sl_group_hold()s not yet released, under tree->lock: while
	 * nonzero, sl_group_destroy() refuses (another library, a lease,
	 * holds a pointer to the group). */
	uint32_t holds;
	/* Units that reclaims in flight are asking callbacks in this subtree
	 * for: what concurrent reclaimers see as already taken. */
	sl_atomic64 claimed;
	sl_atomic64 headroom;     /* background reclaim keeps count <= max - headroom; 0 = none */

	/* ---- the name, copied, NUL-terminated ---- */
	char name[];
};

/*
 * What a group of a PROTECTION tree protects of its usage, and what its
 * children protect of theirs (the kernel's min_usage/low_usage and
 * children_*_usage): every count change keeps them (counter.c), so that
 * effective protection is computed along a path, not over a subtree.
 * The sums are exact once the tree is quiet; a reader in between may see
 * one child's change before or after its parent's sum took it.
 */
struct sl__prot {
	sl_atomic64 min_usage;      /* min(count, min) as last propagated */
	sl_atomic64 low_usage;      /* min(count, soft) as last propagated */
	sl_atomic64 children_min;   /* sum of the children's min_usage (mod 2^64) */
	sl_atomic64 children_low;   /* sum of the children's low_usage (mod 2^64) */
	/* The tree's index of groups whose children protect more than their
	 * own soft limit (overindex.c): where effective low is cut. */
	_Atomic(sl_group *) oc_next;
	sl_atomic32 oc_flag;        /* 1 while in that index */
};

/* A children sum read as a count: one caught between a child's exchange
 * and its add may be briefly below zero (read as 0) or above what the
 * parent holds (capped at cap). */
static inline uint64_t sl__prot_sum(const sl_atomic64 *sum, uint64_t cap)
{
	int64_t v = (int64_t)sl__load(sum, SL_RELAXED);

	return v < 0 ? 0 : (uint64_t)v < cap ? (uint64_t)v : cap;
}

/*
 * What a group of any tree keeps of refaults (refault.c), in its block
 * after the name (sl__refault_of()): the subtree's recent count that
 * SL_POLICY_REFAULT orders pass 1 by, and the group's own total for stats.
 */
struct sl__refault {
	sl_atomic64 recent; /* refaults in the subtree: this window, older ones halved each */
	sl_atomic64 total;  /* what sl_refault() reported for g itself, ever (saturating) */
	sl_atomic32 epoch;  /* the tree's window the recent count was last halved to */
};

/*
 * What the reclaim engine asks of a policy (policy_*.c): pass 1, then pass 2
 * if pass 1 freed too little, and what the policy grants a group right now.
 */
struct sl__policy {
	const char *name; /* as sl_group_dump() prints it */
	/* Reclaim toward r->target from r->scope's subtree: both passes. */
	void (*reclaim)(struct sl__reclaim *r);
	/* The protection the policy grants g now, for sl_group_stats(). */
	void (*effective)(const sl_group *g, uint64_t *emin, uint64_t *esoft);
	/* The floor below which no reclaim of v[0]'s subtree takes each group
	 * of the snapshot v (usages filled in), into v[i].floor. */
	void (*floors)(struct sl__node *v, size_t n);
	/* true: a group may not fall below the min of any group on its path
	 * up to the scope; false: the policy floors groups itself (PROTECTION
	 * by effective min). */
	bool min_on_path;
	/* true: pass 1 takes the over-limit group with the fewest recent
	 * refaults first (SL_POLICY_REFAULT); false: the largest excess first. */
	bool by_refault;
};

struct sl_tree {
	/* ---- written by chargers: a group going over its soft limit ---- */
	_Alignas(SL__CACHELINE) _Atomic(sl_group *) over_pending; /* pushed lock-free */
	_Atomic(sl_group *) oc_pending; /* overcommitted protection, pushed lock-free */

	/* ---- read on every refill and slow-path charge; set at creation ---- */
	_Alignas(SL__CACHELINE) uint64_t batch; /* 0 = no stocks */
	uint64_t reclaim_batch;   /* extra units a charge at max reclaims; 0 = exact */
	enum sl_policy policy_id;
	bool prot;                /* groups keep protected usages (PROTECTION) */
	const struct sl__policy *policy;
	/* A charge that does not fit under some max: the engine's at-max path
	 * (atmax.c), reached through here because charge.c is below it. */
	int (*at_max)(sl_group *g, uint64_t amount, unsigned flags, sl_group *fail);
	sl_group *root;
	/* Bumped (seq_cst) by a limit change that gives stocks back, before
	 * it looks at them; a keep that sees it move rechecks its limits
	 * (stock.c).  Written that rarely, so it may share this line. */
	sl_atomic32 limits_gen;
	/* Odd while a setter stores a group's limits, under limits_lock:
	 * sl_group_limits() reads a whole set between two equal even
	 * values (limits.c).  Written as rarely. */
	sl_atomic32 limits_seq;

	/* ---- written by reclaimers, read by charges at max ---- */
	_Alignas(SL__CACHELINE) sl_atomic64 progress; /* units every reclaim of the tree freed */
	sl_atomic32 reclaimers;   /* reclaims in flight */
	sl_atomic32 reclaim_seq;  /* numbers reclaims, for low events */
	sl_atomic32 bg_wake;      /* bumped to wake the background reclaimer (a futex word) */
	sl_atomic32 bg_sleeping;  /* the background reclaimer is about to sleep or sleeps */
	sl_atomic32 bg_stop;      /* sl_background_stop() was called */
	sl_atomic32 rf_epoch;     /* refault windows ended; each halves the groups' history */
	sl_atomic64 rf_window;    /* units reclaimed in the tree in this window */

	/* ---- under the locks ---- */
	_Alignas(SL__CACHELINE) pthread_mutex_t lock; /* topology: create, destroy, the name hash */
	/* The over-soft index's members, and folding pending pushes into them;
	 * never held while a callback runs. */
	pthread_mutex_t index_lock;
	_Atomic(sl_group *) over_members; /* changed under index_lock only */
	_Atomic(sl_group *) oc_members;   /* the same for overcommitted protection */
	/* Checks and takes of claims (reclaim.c); never held while a callback runs. */
	pthread_mutex_t claim_lock;
	/* Setters of any group's limits take turns (limits.c); a leaf: taken
	 * last, nothing is called while it is held. */
	pthread_mutex_t limits_lock;
	sl_oom_fn oom_fn;         /* under lock */
	void *oom_ctx;
	sl_group **hash;
	size_t hash_mask;         /* buckets - 1 */
	size_t nr_groups;
	sl_group **headroom_groups; /* groups with a headroom, under lock */
	size_t nr_headroom, cap_headroom;
};

/* ---- the per-thread stock (stock.c, stock_take.c, stock_handover.c) ----
 *
 * A slot's word packs, in one atomic 64-bit word:
 *   bits  0..21  units: pre-charged to the hierarchy, not yet handed out
 *   bits 22..43  ledger: units this slot handed to the host, net of returns
 *   bits 44..63  tag: bumped every time the slot is rebound to another group
 * so that the owner's fast path, a drainer's take and a rebind are each one
 * atomic step, and a drainer can never take one group's units for another.
 */
#define SL__UNITS_BITS 22
#define SL__LEDGER_BITS 22
#define SL__UNITS_MAX ((UINT64_C(1) << SL__UNITS_BITS) - 1)
#define SL__LEDGER_MAX ((UINT64_C(1) << SL__LEDGER_BITS) - 1)
#define SL__LEDGER_SHIFT SL__UNITS_BITS
#define SL__TAG_SHIFT (SL__UNITS_BITS + SL__LEDGER_BITS)
#define SL__CONTENTS_MASK ((UINT64_C(1) << SL__TAG_SHIFT) - 1) /* units and ledger */
#define SL__LEDGER_MASK (SL__LEDGER_MAX << SL__LEDGER_SHIFT)
#define SL__STOCK_SLOTS 8

static inline uint64_t sl__word_units(uint64_t w)
{
	return w & SL__UNITS_MAX;
}
static inline uint64_t sl__word_ledger(uint64_t w)
{
	return (w >> SL__LEDGER_SHIFT) & SL__LEDGER_MAX;
}

struct sl__slot {
	_Atomic(sl_group *) group; /* written by the owner only; read by drainers */
	sl_atomic64 word;
	uint64_t cap;              /* owner only: most units the slot keeps */
	uint64_t stamp;            /* owner only: last refill, for eviction */
};

struct sl__stock {
	struct sl__slot slot[SL__STOCK_SLOTS];
	/* 1 while the owner has units between a slot and the counters (a
	 * transit: a refill with its rebind, stock.c) or a ledger between a
	 * slot and local (an answer); under the fence protocol, also while its
	 * fast path writes a slot word. */
	_Alignas(SL__CACHELINE) sl_atomic32 inflight;
	uint64_t clock;            /* owner only */
	uint8_t eager[SL__STOCK_SLOTS]; /* owner only: refills left that fold the slot's ledger */
	struct sl__stock *next, *prev; /* the registry, under its lock */
	/* Fence protocol: a folder's request that the owner fold some slots'
	 * ledgers itself (stock_handover.c): slot bits and a number. */
	sl_atomic64 ask;
	sl_atomic64 answered;      /* owner: the number of the last ask done */
	uint64_t asked;            /* folder, under the registry lock */
	/* Slot bits: other threads took these slots' ledgers by a fold, so
	 * they uncharge what the owner charges; the owner's next refills fold
	 * those ledgers into local themselves (stock_handover.c). */
	sl_atomic64 wanted;
};

/* The slot of s bound to g, or NULL.  Owner only: the one lookup that the
 * fast paths (charge.c, uncharge.c) and the slow paths share. */
static inline struct sl__slot *sl__slot_find(struct sl__stock *s, const sl_group *g)
{
	int i;

	for (i = 0; i < SL__STOCK_SLOTS; i++)
		if (sl__load(&s->slot[i].group, SL_RELAXED) == g)
			return &s->slot[i];
	return NULL;
}

/*
 * The two protocols between a stock's owner and other threads (docs/stocks.md says
 * why): with SL__STOCK_FENCE the owner's fast path writes its slot word with
 * a plain store between raising its inflight flag and lowering it, and a
 * thread that takes from other threads' slots first raises sl__stock_takers
 * and issues membarrier() (a fold first asks the owners to fold their own
 * ledgers, and fences only if they do not answer); with SL__STOCK_CAS (no
 * membarrier, or a ThreadSanitizer build) the fast path is a
 * compare-and-swap.  Chosen once per process, before the first tree exists.
 */
enum { SL__STOCK_CAS = 0, SL__STOCK_FENCE = 1 };
extern int sl__stock_protocol;
extern sl_atomic32 sl__stock_takers;
void sl__stock_protocol_init(void);

/* sl__stock_takers: a taker is at work (fence and take); a folder waits
 * for owners to answer their stock's ask, which they do on their next
 * charge (no fence; stock_handover.c). */
#define SL__TAKERS_TAKE 1
#define SL__TAKERS_ASK 2

/*
 * Fence protocol, owner side: raise the flag, then look for a taker.  The
 * store and the load are not ordered by the CPU; a taker's membarrier()
 * orders them for us (either it sees our flag and waits, or we see it and
 * back off).  false: a taker is at work, use the slow path.
 */
static inline bool sl__stock_enter(struct sl__stock *s)
{
	sl__store(&s->inflight, 1, SL_RELAXED);
	atomic_signal_fence(memory_order_seq_cst);
	if (sl__likely(!sl__load(&sl__stock_takers, SL_RELAXED)))
		return true;
	/* Release: as sl__stock_leave(). */
	sl__store(&s->inflight, 0, SL_RELEASE);
	return false;
}

/* Release: a taker that sees the flag down (acquire) sees our word. */
static inline void sl__stock_leave(struct sl__stock *s)
{
	sl__store(&s->inflight, 0, SL_RELEASE);
}

/* Thread-local marks, each owned by one file. */
/* Inside a reclaim callback or the OOM handler: nested charges never reclaim (reclaim.c). */
extern _Thread_local unsigned sl__tls_in_reclaim;
/* Running a reclaim's decisions, between callbacks (reclaim.c). */
extern _Thread_local unsigned sl__tls_reclaiming;
/* A charge by this thread went past some group's high (counter.c). */
extern _Thread_local bool sl__tls_high_pending;

/* True when this thread must not reclaim now: it is inside a callback, a
 * walk or a reclaim. */
static inline bool sl__reclaim_forbidden(void)
{
	return sl__tls_in_reclaim || sl__tls_reclaiming;
}

/* ---- 0: alloc.c: the library's allocations, which a test can make fail ---- */
void *sl__malloc(size_t size);
void *sl__calloc(size_t n, size_t size);
void *sl__realloc(void *p, size_t size);
void *sl__aligned_alloc(size_t align, size_t size);

/* ---- 1: group.c ---- */
bool sl__group_valid(const sl_group *g);
bool sl__limits_valid(const struct sl_limits *lim);
bool sl__is_ancestor(const sl_group *anc, const sl_group *g);
sl_group *sl__group_alloc(const char *name, size_t len, bool prot);
struct sl__refault *sl__refault_of(const sl_group *g);
void sl__store_limits(sl_group *g, const struct sl_limits *lim);
int sl__hash_init(sl_tree *t);
sl_group *sl__child_find(const sl_group *parent, const char *name, size_t len);
void sl__hash_insert(sl_tree *t, sl_group *g);
void sl__hash_remove(sl_tree *t, sl_group *g);
/* The trees whose topology lock this thread holds for a walk, innermost
 * first: one frame on the walker's stack per walk, so walks nest to any
 * depth and across trees (walk.c pushes them; whatever would take a tree's
 * lock again asks sl__walking() first). */
struct sl__walk_frame {
	const sl_tree *t;
	struct sl__walk_frame *prev;
};
bool sl__walking(const sl_tree *t);
void sl__walk_enter(struct sl__walk_frame *f, const sl_tree *t);
void sl__walk_leave(struct sl__walk_frame *f);

/* ---- 2: overindex.c ---- */
void sl__over_push(sl_group *g);
void sl__over_forget_locked(sl_group *g);
/* Visit, under the index lock, every member in scope's subtree (the scope
 * excluded) that is still over its soft limit; members that are not any
 * more leave the index. */
void sl__over_collect(sl_tree *t, const sl_group *scope, void (*fn)(sl_group *g, void *arg), void *arg);
/* Groups whose children protect more (children_low) than their own soft
 * limit: the index works as the over-soft one, in the same lock. */
void sl__oc_push(sl_group *g);
void sl__oc_collect(sl_tree *t, const sl_group *scope, void (*fn)(sl_group *g, void *arg), void *arg);

/* Push g into its tree's over-soft index unless it is there already. */
static inline void sl__over_check(sl_group *g, uint64_t count)
{
	if (count > sl__load(&g->soft, SL_RELAXED) && !sl__load(&g->over_flag, SL_RELAXED))
		sl__over_push(g);
}

/* ---- 3: counter.c ---- */
int sl__counter_try(sl_group *g, uint64_t amount, unsigned flags, uint64_t stocked, sl_group **fail);
void sl__counter_cancel(sl_group *g, uint64_t amount);
uint64_t sl__counter_usage(const sl_group *g);
bool sl__counter_room(const sl_group *g, uint64_t amount);
bool sl__counter_within(const sl_group *g);
uint64_t sl__counter_set_limits(sl_group *g, const struct sl_limits *lim);
void sl__counter_wake_background(sl_tree *t);
void sl__counter_protect(sl_group *g);
/* refault.c */
void sl__refault_evicted(sl_tree *t, uint64_t units);
uint64_t sl__refault_rank(const sl_group *g);

/* ---- 4: stock.c (the owner's side), stock_take.c (the takers'),
 * stock_handover.c (the handover) ---- */
extern _Thread_local struct sl__stock *sl__tls_stock __attribute__((tls_model("initial-exec")));
struct sl__stock *sl__stock_get(void);
int sl__stock_refill(struct sl__stock *s, sl_group *g, uint64_t amount);
void sl__stock_keep(sl_group *g, uint64_t units);
uint64_t sl__stock_drain_subtree(const sl_group *top);
uint64_t sl__stock_drain_mine(const sl_group *top);
uint64_t sl__stock_drain_group(const sl_group *g);
void sl__stock_drain_limited(const sl_group *top);
void sl__stock_fold_ledgers(const sl_group *g);
void sl__stock_forget_tree(const sl_tree *t);
void sl__stock_quiesce(void);
void sl__stock_usage(const sl_group *g, uint64_t *usage, uint64_t *stocked);
uint64_t sl__stock_my_ledger(const sl_group *g);
void sl__stock_sum(const sl_group *g, uint64_t *units, uint64_t *ledger);

/* ---- 5: charge.c, uncharge.c ---- */
int sl__charge_slow(sl_group *g, uint64_t amount, unsigned flags);
int sl__uncharge_slow(sl_group *g, uint64_t amount);

/* ---- 6: the reclaim engine ---- */

/* A group whose usage the current step of a policy may not take below a
 * floor (GUARANTEE's candidate: its soft limit), one frame per nested step. */
struct sl__floor {
	const sl_group *g;
	uint64_t floor;
	struct sl__floor *prev;
};

/* One reclaim: what it is asked, what it has done. */
struct sl__reclaim {
	sl_tree *t;
	sl_group *scope;
	const sl_group *end; /* claims are checked from a group up to here, excluded */
	uint64_t target;
	uint64_t must;  /* what pass 2 may serve: all of target, or a charge's need without its batch */
	uint64_t freed;
	uint32_t seq;
	struct sl__floor *floors; /* innermost first */
};

/* reclaim.c */
uint64_t sl__usage_of(const sl_group *g);
uint64_t sl__own_of(const sl_group *g);
uint64_t sl__soft_of(const sl_group *g);
uint64_t sl__reclaim_group(struct sl__reclaim *r, sl_group *g, uint64_t want, uint64_t floor, uint64_t within);
uint64_t sl__reclaim(sl_group *scope, uint64_t target, uint64_t must, bool drain);
uint64_t sl__reclaim_ahead(sl_group *scope, uint64_t target);
bool sl__pass2_begin(struct sl__reclaim *r);
void sl__pin(sl_group *g);
void sl__unpin(sl_group *g);
/* background.c */
void sl__headroom_forget(sl_tree *t, sl_group *g);
/* atmax.c */
int sl__at_max(sl_group *g, uint64_t amount, unsigned flags, sl_group *fail);
/* split.c */
void sl__split(uint64_t amount, const uint64_t *w, uint64_t *out, size_t k);
uint64_t sl__muldiv(uint64_t a, uint64_t b, uint64_t c);
static inline uint64_t sl__min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}
/* proportional.c: subtree snapshots and pass 2 */
struct sl__node {
	sl_group *g;
	uint32_t parent;
	uint32_t end;   /* the node's subtree is [its index, end) */
	uint64_t usage, own, floor;
	uint64_t rec;   /* what the subtree can give above its floors */
	uint64_t emin, elow;
	uint64_t acc;
	bool done;      /* freed nothing when asked in this pass */
};
struct sl__node *sl__snapshot(sl_tree *t, sl_group *top, size_t *n_out);
void sl__snapshot_free(struct sl__node *v, size_t n);
void sl__snapshot_refresh(struct sl__node *v, size_t n);
uint64_t sl__proportional(struct sl__reclaim *r, sl_group *top, uint64_t amount);
void sl__floors_min(struct sl__node *v, size_t n);
uint64_t sl__kept(sl_tree *t, sl_group *top);
/* victims.c: candidates from the over-soft index, largest excess first */
struct sl__cand {
	sl_group *g;
	/* The rank when last looked at, larger first: the excess, or under
	 * SL_POLICY_REFAULT the fewest refaults (key) then the excess (key2). */
	uint64_t key, key2;
	bool done;    /* dealt with, freed nothing when asked, or not over any more */
};
struct sl__victims {
	struct sl__cand *c; /* sorted by rank, first to give first; each pinned */
	size_t n, pos, cap;
	bool by_refault;    /* the tree's policy ranks by refaults */
};
void sl__reclaim_by_excess(struct sl__reclaim *r, void (*pass1)(struct sl__reclaim *, struct sl__victims *));
struct sl__cand *sl__victims_next(struct sl__victims *v, uint64_t *excess);
struct sl__cand *sl__victims_first_below(struct sl__victims *v, const sl_group *below, uint64_t *excess);
bool sl__over_soft(const sl_group *g);

/* policy_*.c */
extern const struct sl__policy sl__policy_guarantee;
extern const struct sl__policy sl__policy_gatekeeper;
extern const struct sl__policy sl__policy_protection;
extern const struct sl__policy sl__policy_refault;

/* ---- 8: openmetrics.c: sl_group_dump()'s SL_DUMP_OPENMETRICS ---- */
int sl__dump_openmetrics(sl_group *scope, char *buf, size_t size, size_t *needed);

#endif /* SL_INTERNAL_H */
