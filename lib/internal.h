/* SPDX-License-Identifier: MIT */
/*
 * softlimit's private declarations: the group and tree objects, the
 * per-thread stock, and the functions the library's files share (sl__*).
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
#define SL__FLAGS_ALL (SL_NORECLAIM | SL_FORCE)

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
	 * refills of its stocks charge into local (see take_local_exact). */
	sl_atomic32 checks;
	sl_atomic64 emin;         /* effective protection, as the last reclaim computed it */
	sl_atomic64 esoft;
	_Atomic(sl_group *) over_next; /* the tree's index of groups over their soft limit */
	sl_atomic32 over_flag;    /* 1 while in that index */
	uint32_t low_seq;         /* last reclaim that counted a low event here (reclaim_lock) */

	/* ---- the name, copied, NUL-terminated ---- */
	char name[];
};

struct sl_tree {
	pthread_mutex_t lock;     /* topology: create, destroy, the name hash */
	/* Serialises reclaims of the tree, callbacks included, and group
	 * destroy against them.  Lock order: reclaim_lock, then lock. */
	pthread_mutex_t reclaim_lock;
	_Atomic(sl_group *) over_head; /* groups that went over their soft limit: pushed lock-free */
	uint32_t reclaim_seq;     /* under reclaim_lock */
	sl_oom_fn oom_fn;         /* under lock */
	void *oom_ctx;
	enum sl_policy policy;
	uint64_t batch;           /* 0 = no stocks */
	sl_group *root;
	sl_group **hash;
	size_t hash_mask;         /* buckets - 1 */
	size_t nr_groups;
};

/* ---- the per-thread stock (stock.c) ----
 *
 * A slot's word packs, in one atomic 64-bit word:
 *   bits  0..21  units: pre-charged to the hierarchy, not yet handed out
 *   bits 22..43  ledger: units this slot handed to the host, net of returns
 *   bits 44..63  tag: bumped every time the slot is rebound to another group
 * so that the owner's fast path, a drainer's take and a rebind are each one
 * atomic step, and a drainer can never take one group's units for another.
 */
#define SL__U_BITS 22
#define SL__H_BITS 22
#define SL__U_MAX ((UINT64_C(1) << SL__U_BITS) - 1)
#define SL__H_MAX ((UINT64_C(1) << SL__H_BITS) - 1)
#define SL__H_SHIFT SL__U_BITS
#define SL__TAG_SHIFT (SL__U_BITS + SL__H_BITS)
#define SL__UH_MASK ((UINT64_C(1) << SL__TAG_SHIFT) - 1)
#define SL__STOCK_SLOTS 8

static inline uint64_t sl__w_units(uint64_t w)
{
	return w & SL__U_MAX;
}
static inline uint64_t sl__w_ledger(uint64_t w)
{
	return (w >> SL__H_SHIFT) & SL__H_MAX;
}

struct sl__slot {
	_Atomic(sl_group *) group; /* written by the owner only; read by drainers */
	sl_atomic64 word;
	uint64_t cap;              /* owner only: most units the slot keeps */
	uint64_t stamp;            /* owner only: last refill, for eviction */
};

struct sl__stock {
	struct sl__slot slot[SL__STOCK_SLOTS];
	/* 1 while the owner holds units taken out of a slot (or about to be put
	 * into one) that the hierarchy counters do not yet reflect. */
	_Alignas(SL__CACHELINE) sl_atomic32 inflight;
	uint64_t clock;            /* owner only */
	struct sl__stock *next, *prev; /* the registry, under its lock */
};

enum sl__drain_mode {
	SL__DRAIN_SUBTREE, /* slots of the target and its descendants: units back, ledger folded */
	SL__DRAIN_GROUP,   /* slots of the target only: units back, ledger folded */
	SL__DRAIN_TREE,    /* every slot of the target's tree, emptied without flushing */
	SL__DRAIN_LEDGERS, /* slots of the target only: ledger folded, units left for the owner */
};

/* alloc.c: the library's allocations, which a test can make fail */
void *sl__malloc(size_t size);
void *sl__calloc(size_t n, size_t size);
void *sl__realloc(void *p, size_t size);
void *sl__aligned_alloc(size_t align, size_t size);
/* Let `after` more allocations succeed, then fail the next one (all of
 * them if sticky); after < 0 turns failures off.  Tests only. */
void sl__fault_inject(long after, bool sticky);

/* stock.c */
extern _Thread_local struct sl__stock *sl__tls_stock __attribute__((tls_model("initial-exec")));
struct sl__stock *sl__stock_get(void);
uint64_t sl__stock_drain(sl_group *target, enum sl__drain_mode mode);
uint64_t sl__stock_units(sl_group *g);
void sl__stock_quiesce(void);
uint64_t sl__stock_my_ledger(sl_group *g);
struct sl__slot *sl__stock_slot_of(struct sl__stock *s, sl_group *g);
void sl__stock_sum(sl_group *g, uint64_t *units, uint64_t *ledger);
struct sl__slot *sl__stock_bind(struct sl__stock *s, sl_group *g);
void sl__slot_flush(sl_group *g, uint64_t units, uint64_t ledger);

/* charge.c */
extern _Thread_local unsigned sl__tls_in_reclaim;
int sl__counter_try(sl_group *g, uint64_t amount, unsigned flags, uint64_t stocked, sl_group **fail);
void sl__counter_cancel(sl_group *g, uint64_t amount);
int sl__charge_slow(sl_group *g, uint64_t amount, unsigned flags);
int sl__uncharge_slow(sl_group *g, uint64_t amount);
/* Ordinary folds an uncharge that comes up short makes before the exact
 * over-uncharge check.  Tests only set it (to 0, to drive every shortfall
 * through that check). */
extern unsigned sl__fold_rounds;
/* Called between an ordinary fold and the take that follows it (exact
 * false), and inside the exact check after its drain (exact true).  Tests
 * only set it, to make other threads move units exactly there. */
extern void (*sl__fold_hook)(sl_group *g, bool exact);

/* tree.c */
/* The tree whose topology lock this thread holds for a walk, if any. */
extern _Thread_local sl_tree *sl__tls_walk_tree;
bool sl__group_valid(const sl_group *g);
bool sl__limits_valid(const struct sl_limits *lim);
bool sl__is_ancestor(const sl_group *anc, const sl_group *g);
sl_group *sl__child_find(sl_group *parent, const char *name, size_t len);

/* openmetrics.c: sl_group_dump()'s SL_DUMP_OPENMETRICS */
int sl__dump_openmetrics(sl_group *scope, char *buf, size_t size, size_t *needed);

/* reclaim.c */
extern _Thread_local unsigned sl__tls_reclaim_owner;
uint64_t sl__reclaim_for_charge(sl_group *at, uint64_t need);
bool sl__oom(sl_group *at, uint64_t need);
void sl__over_push(sl_group *g);
void sl__over_forget(sl_group *g);
void sl__high_note(void);
int sl__shrink_to_max(sl_group *g);
void sl__effective(sl_group *g, uint64_t *emin, uint64_t *esoft);

/* Push g into its tree's over-soft index unless it is there already. */
static inline void sl__over_check(sl_group *g, uint64_t count)
{
	if (count > sl__load(&g->soft, SL_RELAXED) && !sl__load(&g->over_flag, SL_RELAXED))
		sl__over_push(g);
}

#endif /* SL_INTERNAL_H */
