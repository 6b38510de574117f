/* SPDX-License-Identifier: MIT */
/*
 * Per-thread charge stocks, the takers' side: other threads' slots.  The
 * choice of protocol and its fence, the registry scan, takes (drains of a
 * subtree or a group, folds of ledgers, a tree's destroy) and the reads
 * that sum slots (usage, stocked).  Every take is under the registry lock;
 * under the fence protocol a take that must touch other threads' slots
 * raises sl__stock_takers and issues membarrier() first, so that owners'
 * plain stores never race it.  Why: see docs/stocks.md.
 */
#include "internal.h"

#include "stock.h"
#include "testing.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define SL__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SL__TSAN 1
#endif
#endif

int sl__stock_protocol = SL__STOCK_CAS;
/* Written by takers and folders only (under the registry lock); read by
 * every fast path, so alone on its line. */
_Alignas(SL__CACHELINE) sl_atomic32 sl__stock_takers;
static pthread_once_t protocol_once = PTHREAD_ONCE_INIT;

uint64_t sl__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What a membarrier() takes here, averaged over the last few (under the
 * registry lock, and once before any tree exists): how long a folder waits
 * for owners to answer before it fences instead. */
uint64_t sl__fence_ns;

sl_atomic64 sl__stock_fences, sl__stock_ledgers_taken;

/* Issue the fence and keep its cost.  Cannot fail once registered; the
 * owners' flags are still waited for if it somehow did. */
void sl__fence_timed(void)
{
	uint64_t t0 = sl__now_ns(), d;

	syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
	d = sl__now_ns() - t0;
	/* A fence preempted midway says nothing of the next: each sample
	 * counts for at most 4x the average so far. */
	if (sl__fence_ns && d > 4 * sl__fence_ns)
		d = 4 * sl__fence_ns;
	sl__fence_ns = sl__fence_ns ? (3 * sl__fence_ns + d) / 4 : d;
}

static void protocol_pick(void)
{
	const char *env = getenv("SOFTLIMIT_MEMBARRIER");
	long cmds;

#ifdef SL__TSAN
	return;
#endif
	if (env && strcmp(env, "0") == 0)
		return;
	cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		return;
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0)
		return;
	sl__stock_protocol = SL__STOCK_FENCE;
	sl__fence_timed();
}

void sl__stock_protocol_init(void)
{
	pthread_once(&protocol_once, protocol_pick);
}

/* Wait until no owner holds units between a slot and the counters. */
void sl__quiesce_locked(void)
{
	struct sl__stock *s;

	for (s = sl__registry; s; s = s->next)
		while (sl__load(&s->inflight, SL_SEQ_CST))
			sched_yield();
}

void sl__stock_quiesce(void)
{
	pthread_mutex_lock(&sl__registry_lock);
	sl__quiesce_locked();
	pthread_mutex_unlock(&sl__registry_lock);
}

void sl__scan_stock(struct sl__stock *s, uint64_t mask, sl__match_fn match, const void *arg, sl__visit_fn visit,
		       void *acc)
{
	int i;

	for (i = 0; i < SL__STOCK_SLOTS; i++) {
		struct sl__slot *sl = &s->slot[i];
		/* Acquire: pairs with the release store of a slot's group in
		 * stock_bind() and the owner's filling CAS.  seq_cst: after a
		 * lowered limit's exchange, the load half of the handshake
		 * with a keep (sl__counter_within()). */
		uint64_t w = sl__load(&sl->word, SL_SEQ_CST);
		sl_group *p;

		if (!(w & mask))
			continue;
		/* Acquire: pairs with stock_bind()'s release of it. */
		p = sl__load(&sl->group, SL_ACQUIRE);
		if (p && match(p, arg))
			visit(s, sl, p, w, acc);
	}
}

static void scan_locked(uint64_t mask, sl__match_fn match, const void *arg, sl__visit_fn visit, void *acc)
{
	struct sl__stock *s;

	for (s = sl__registry; s; s = s->next)
		sl__scan_stock(s, mask, match, arg, visit, acc);
}

static bool match_group(const sl_group *p, const void *g)
{
	return p == g;
}

static bool match_subtree(const sl_group *p, const void *top)
{
	return sl__is_ancestor(top, p);
}

static bool match_tree(const sl_group *p, const void *t)
{
	return p->tree == t;
}

struct take {
	uint64_t mask;  /* what to take: units and ledger, or the ledger */
	bool flush;     /* give it back to the group (not on tree destroy) */
	uint64_t units; /* units given back */
};

/* Take the mask's part of the slot, if the word still holds what we read:
 * the CAS compares the tag too, so the units are p's. */
static void take_slot(struct sl__stock *s, struct sl__slot *sl, sl_group *p, uint64_t w, void *acc)
{
	struct take *tk = acc;
	uint64_t tag = w >> SL__TAG_SHIFT;

	/* seq_cst on success: ordered with the owners' inflight flags, which
	 * quiesce reads after a take; acquire on failure: the new word. */
	while (!sl__cas_weak(&sl->word, &w, w & ~tk->mask, SL_SEQ_CST, SL_ACQUIRE))
		if ((w & tk->mask) == 0 || (w >> SL__TAG_SHIFT) != tag)
			return; /* emptied, or rebound to another group */
	w &= tk->mask;
	/* A fold took another thread's ledger: that thread's units are
	 * uncharged elsewhere; have its next refills fold them first. */
	if (tk->mask == SL__LEDGER_MASK && sl__word_ledger(w) && s != sl__tls_stock) {
		sl__fetch_or(&s->wanted, UINT64_C(1) << (sl - s->slot), SL_RELAXED);
		sl__count(&sl__stock_ledgers_taken);
	}
	if (tk->flush) {
		sl__slot_flush(p, sl__word_units(w), sl__word_ledger(w));
		tk->units += sl__word_units(w);
	}
}

/*
 * FENCE: whether a take needs the handshake: some other thread's slot
 * matches and holds what the take would take.  When none does, the take
 * takes from the caller's own stock only (its owner is not in a fast path:
 * it is us) and looks at no other again: a slot seen empty may fill right
 * after, through its owner's refill, and then be written by a plain store,
 * which a take must never race; to that owner, the take came first.  This
 * keeps the fence off the common drains: a thread at max whose units are
 * its own.
 */
static void note_held(struct sl__stock *s, struct sl__slot *sl, sl_group *p, uint64_t w, void *acc)
{
	(void)s;
	(void)sl;
	(void)p;
	(void)w;
	*(bool *)acc = true;
}

static bool others_hold(uint64_t mask, sl__match_fn match, const void *arg)
{
	struct sl__stock *s;
	bool held = false;

	for (s = sl__registry; s && !held; s = s->next)
		if (s != sl__tls_stock)
			sl__scan_stock(s, mask, match, arg, note_held, &held);
	return held;
}

/* FENCE: keep every owner's fast path off its words until takers_end(). */
static void takers_begin(void)
{
	struct sl__stock *s;

	if (sl__stock_protocol != SL__STOCK_FENCE)
		return;
	/* Relaxed: membarrier() orders it against every owner (see above).
	 * Only takers and folders write it, all under the registry lock. */
	sl__store(&sl__stock_takers, sl__load(&sl__stock_takers, SL_RELAXED) | SL__TAKERS_TAKE, SL_RELAXED);
	sl__fence_timed();
	sl__count(&sl__stock_fences);
	for (s = sl__registry; s; s = s->next)
		/* Acquire: pairs with sl__stock_leave(), so the owner's word
		 * store is seen by our takes. */
		while (sl__load(&s->inflight, SL_ACQUIRE))
			sched_yield();
}

static void takers_end(void)
{
	if (sl__stock_protocol != SL__STOCK_FENCE)
		return;
	/* Release: our takes happen before an owner's next plain store. */
	sl__store(&sl__stock_takers, sl__load(&sl__stock_takers, SL_RELAXED) & ~SL__TAKERS_TAKE, SL_RELEASE);
}


/* Take mask's part of every slot that match() accepts; under the registry
 * lock.  Returns the units given back. */
static uint64_t take_locked(uint64_t mask, sl__match_fn match, const void *arg)
{
	struct take tk = { .mask = mask, .flush = true };

	if (sl__stock_protocol == SL__STOCK_FENCE &&
	    (!others_hold(mask, match, arg) || (mask == SL__LEDGER_MASK && sl__fold_by_owners(match, arg)))) {
		/* Only our own slots hold any, or their owners folded the
		 * rest: no fence, and no look at the others (one may refill
		 * and go on plain-storing after our look; to it, this take
		 * came first). */
		if (sl__tls_stock)
			sl__scan_stock(sl__tls_stock, mask, match, arg, take_slot, &tk);
	} else {
		takers_begin();
		scan_locked(mask, match, arg, take_slot, &tk);
		takers_end();
	}
	return tk.units;
}

static uint64_t take(uint64_t mask, sl__match_fn match, const void *arg)
{
	uint64_t units;

	pthread_mutex_lock(&sl__registry_lock);
	units = take_locked(mask, match, arg);
	pthread_mutex_unlock(&sl__registry_lock);
	return units;
}

/* Give back the units and fold the ledgers of every slot bound to a group
 * of top's subtree.  Returns the units given back to the counters. */
uint64_t sl__stock_drain_subtree(const sl_group *top)
{
	return take(SL__CONTENTS_MASK, match_subtree, top);
}

/* The same, from the calling thread's own stock only: no other thread is
 * disturbed (no fence), for a charge at max that reclaims first. */
uint64_t sl__stock_drain_mine(const sl_group *top)
{
	struct take tk = { .mask = SL__CONTENTS_MASK, .flush = true };

	if (!sl__tls_stock)
		return 0;
	pthread_mutex_lock(&sl__registry_lock);
	sl__scan_stock(sl__tls_stock, SL__CONTENTS_MASK, match_subtree, top, take_slot, &tk);
	pthread_mutex_unlock(&sl__registry_lock);
	return tk.units;
}

/*
 * After sl_group_set_limits() put a max or high of top below top's count:
 * give back every unit that stocks hold in top's subtree, so that none is
 * handed out past the new limit.  Stocks filled after this are within it:
 * a refill in flight either read the new limit after its pre-charge (and
 * took its batch back: sl__counter_try()) or raised its inflight flag
 * before our seq_cst loads of the flags in sl__quiesce_locked(), which wait
 * until its units are in the slot, where the take finds them (the flag's
 * store and the limit's load are seq_cst in the refill, the limit's
 * exchange and the flags' loads here: a Dekker handshake).  Units that an
 * uncharge keeps are rechecked by the keeper when it sees the tree's
 * limits_gen move (sl__stock_keep(), sl__counter_within()).
 */
void sl__stock_drain_limited(const sl_group *top)
{
	/* seq_cst: after the limits' exchange, before the scan (see
	 * sl__stock_keep()). */
	sl__fetch_add(&top->tree->limits_gen, 1, SL_SEQ_CST);
	pthread_mutex_lock(&sl__registry_lock);
	sl__quiesce_locked();
	take_locked(SL__CONTENTS_MASK, match_subtree, top);
	pthread_mutex_unlock(&sl__registry_lock);
}

/* The same for the slots bound to g itself. */
uint64_t sl__stock_drain_group(const sl_group *g)
{
	return take(SL__CONTENTS_MASK, match_group, g);
}

/* Fold the ledgers of g's slots into g's local charge; the owners keep
 * their pre-charged units, and their fast path. */
void sl__stock_fold_ledgers(const sl_group *g)
{
	take(SL__LEDGER_MASK, match_group, g);
}

/* Empty every slot bound to a group of t, without touching the groups
 * (they are about to be freed), and wait for owners mid-operation. */
void sl__stock_forget_tree(const sl_tree *t)
{
	struct take tk = { .mask = SL__CONTENTS_MASK, .flush = false };

	pthread_mutex_lock(&sl__registry_lock);
	takers_begin();
	scan_locked(SL__CONTENTS_MASK, match_tree, t, take_slot, &tk);
	takers_end();
	sl__quiesce_locked();
	pthread_mutex_unlock(&sl__registry_lock);
}

struct sum {
	uint64_t units, ledger;
};

static void add_slot(struct sl__stock *s, struct sl__slot *sl, sl_group *p, uint64_t w, void *acc)
{
	struct sum *sum = acc;

	(void)s;
	(void)sl;
	(void)p;
	sum->units += sl__word_units(w);
	sum->ledger += sl__word_ledger(w);
}

/*
 * g's subtree's count, split into the host's usage and the units that
 * stocks hold, read together: no refill or rebind is between the counters
 * and a slot meanwhile (transit_begin() says how), and takes and thread
 * exits are kept out by the registry lock.  Fast paths go on: they move
 * units between a slot and the host, which changes usage, not the count.
 * A tree without stocks (batch 0) has its usage in the count alone.
 */
void sl__stock_usage(const sl_group *g, uint64_t *usage, uint64_t *stocked)
{
	struct sum sum = { 0, 0 };
	uint64_t count;

	if (!g->tree->batch) {
		*usage = sl__counter_usage(g);
		*stocked = 0;
		return;
	}
	pthread_mutex_lock(&sl__registry_lock);
	/* seq_cst: then sl__quiesce_locked()'s loads of the flags (the other
	 * half of the handshake in transit_begin()). */
	sl__store(&sl__usage_reads, 1, SL_SEQ_CST);
	sl__quiesce_locked();
	count = sl__counter_usage(g);
	scan_locked(SL__UNITS_MAX, match_subtree, g, add_slot, &sum);
	sl__store(&sl__usage_reads, 0, SL_RELAXED);
	pthread_mutex_unlock(&sl__registry_lock);
	/* Never more than the count (every stocked unit is in it); the check
	 * keeps a broken invariant from wrapping. */
	*stocked = sl__min_u64(sum.units, count);
	*usage = count - *stocked;
}

/* Units and ledgers that stocks hold for g itself (not its descendants). */
void sl__stock_sum(const sl_group *g, uint64_t *units, uint64_t *ledger)
{
	struct sum sum = { 0, 0 };

	pthread_mutex_lock(&sl__registry_lock);
	scan_locked(SL__CONTENTS_MASK, match_group, g, add_slot, &sum);
	pthread_mutex_unlock(&sl__registry_lock);
	*units = sum.units;
	*ledger = sum.ledger;
}

/* The ledger of the calling thread's slot for g: what this thread handed to
 * the host for g and has not yet folded into g's local charge. */
uint64_t sl__stock_my_ledger(const sl_group *g)
{
	struct sl__slot *sl = sl__tls_stock ? sl__slot_find(sl__tls_stock, g) : NULL;

	return sl ? sl__word_ledger(sl__load(&sl->word, SL_RELAXED)) : 0;
}
