/* SPDX-License-Identifier: MIT */
/*
 * Per-thread charge stocks.
 *
 * Each thread that charges owns a stock of SL__STOCK_SLOTS slots, each bound
 * to one group.  A slot's units are pre-charged to the group's whole path, so
 * handing them out (a charge) or taking them back (an uncharge) needs no
 * write to any group: only a CAS on the thread's own slot word, a cache line
 * no other thread writes in the common case.
 *
 * The slot also keeps a ledger: units it handed to the host, net of the
 * units given back through it.  The host's own charge on a group is then
 *     local(g) + the ledgers of every slot bound to g
 * and an uncharge may go through the fast path only when the thread's own
 * ledger covers it, so an over-uncharge is always caught.
 *
 * Operations, one job each (as the kernel's consume/refill/drain):
 *   sl__stock_refill()        owner: pre-charge a batch, hand out amount
 *   sl__stock_keep()          owner: keep what an uncharge gives back as
 *                               pre-charged units (the kernel refills its
 *                               stock on uncharge too)
 *   sl__stock_drain_subtree() anyone: give back the units and ledgers of
 *   sl__stock_drain_group()     every slot bound to a subtree / a group
 *   sl__stock_fold_ledgers()  anyone: fold a group's ledgers into local,
 *                               leaving the owners their units
 *   sl__stock_forget_tree()   tree destroy: empty every slot of a tree
 * Other threads take a slot's contents under the registry lock; the owner
 * never takes that lock on its fast path.  Ownership races are settled by
 * the tag in the slot word (internal.h).
 *
 * Two protocols keep the owner's fast path and the takers apart.
 *
 * CAS: the owner's fast path is a compare-and-swap on its slot word, and so
 * is a taker's take; the tag in the word settles rebinds.  Correct with no
 * help from the kernel, but a lock-prefixed instruction costs 6 ns on this
 * kind of host, two per charge+uncharge pair: most of the fast path.
 *
 * FENCE (the default where the kernel has it): the owner's fast path raises
 * its stock's inflight flag, reads sl__stock_takers, writes its word with a
 * plain store and lowers the flag: no lock prefix, no fence instruction,
 * only a compiler barrier.  A taker (every take is under the registry lock)
 * raises sl__stock_takers, calls membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED),
 * which makes every running thread of the process execute a full barrier,
 * and waits until each stock's flag is down; then it takes with CAS as in
 * the other protocol, and lowers sl__stock_takers.  The barrier is the other
 * half of a Dekker handshake: an owner whose flag store came before its
 * barrier is seen and waited for; one whose load of sl__stock_takers came
 * after it sees the taker and takes the slow path, whose operations all stay
 * compare-and-swaps (as userspace-rcu and folly's asymmetric fences split
 * the work: the frequent side pays plain loads and stores, the rare side
 * the fence).  Readers that only sum words (stats) need no handshake: a word
 * is written whole.  The rare side stays rare: a charge at max drains once
 * per reclaim, and the reclaim batch makes that once per batch of charges,
 * not per charge.
 *
 * FENCE, folds: the owner hands its ledger over (fold_by_owners()).  A fold is
 * the take that keeps finding other threads' ledgers: a thread that uncharges
 * what another charged (a server's handoff; bench_handoff) folds the charging
 * thread's ledger whenever local runs out, about once per ring of items there.
 * A membarrier() interrupts every CPU that runs one of our threads: about 1.4
 * us on this VM with one thread running, but about 25 us with the charging
 * thread running (an interrupt into another vCPU), which made the handoff
 * slower under the fence than under CAS.  So a fold asks first: it writes into
 * each owner's stock which slots' ledgers it wants, with a number, raises
 * SL__TAKERS_ASK in sl__stock_takers and waits.  The owner's next charge
 * misses its fast path on the raised flag; its refill answers: it folds those
 * ledgers into local itself, by CAS on its own words, stores the number in
 * answered (release; the folder's acquire sees local), and hands the charge
 * out by CAS.  The folder never writes a word, so no plain store races with
 * anything and no fence is needed.  It spins at most about as long as a fence
 * takes (the running average of the last fences, kept within 1..50 us; no
 * sched_yield(), which can give a time slice away): an owner that has not
 * answered by then (blocked, idle, descheduled, sharing our CPU, or only
 * uncharging) gets the fence as before, and its ask is withdrawn.  A fold then
 * costs at most about two fences, and none while the owner charges, which is
 * when a handoff folds.  After an unanswered ask the next 1, 2, 4 .. 64 folds
 * fence without asking (an answer resets that), so that threads taking turns
 * on one CPU, where a fence is cheap (no other CPU to interrupt) and an answer
 * impossible, pay little more than the fence.  Threads that were not asked pay
 * one slow charge or uncharge (compare-and-swap) while the flag is up.  An
 * owner that was asked, or whose ledger a fold took (its wanted bits, in
 * either protocol: a take that fenced leaves that hint, so that an owner
 * that never gets to answer learns it too), also folds the slot's ledger
 * into local on its next EAGER_REFILLS refills (one more fetch_add on a path
 * that walks the tree anyway), so that the uncharging thread finds units in
 * local before it has to ask.  The producer of a handoff is often blocked on
 * a full queue when its consumer asks, so asks alone were answered 6 times in
 * 1565 folds (bench_handoff --pin, two free cores); with the hint from takes,
 * 218 folds in all took place where 1567 did, under either protocol.
 * EAGER_REFILLS is 64: with 16, a handoff still fenced about 200 times per
 * 2M items, 3 ns per item behind CAS; with 64, about 45 times, level with
 * CAS (a pinned two-thread driver: 31-33 ns per item against 33-35, CAS
 * 30-32).  The price is that the owner's own uncharges of units it charged
 * before such a refill take the slow path (a compare-and-swap on local and
 * one on its own slot, sl__stock_keep()) for those refills.  Drains (units and
 * ledgers, at max and on destroy) and the exact over-uncharge check keep the
 * fence: they must empty idle threads' stocks, whose owners would not answer.
 * Rejected: a fence generation that serves every fold requested before it;
 * folds are serialized by the registry lock and a fence must follow the
 * request it serves, so it would merge only folders queued on the lock, and a
 * handoff has one folder.
 *
 * Usage reads.  A reclaim's claim (and sl_group_stats()) needs the host's
 * usage of a subtree: its count less the units its stocks hold.  Read at
 * two moments, a refill's batch between its pre-charge and its CAS into the
 * slot, or a flushed slot's units not yet cancelled, look like usage, and a
 * claim asked a callback below min (proof/reclaim.pml, CFG_CLAIM_REFILL).
 * So sl__stock_usage() reads both under the registry lock (no take, no
 * thread exit between them), after every owner's transit, which the
 * owner brackets with its inflight flag and a Dekker handshake on
 * usage_reads (transit_begin()).  The cost is on the rare sides: one more
 * load per refill, and a wait for refills in progress per usage read.
 *
 * Rejected: per-CPU stocks with restartable sequences (tcmalloc's) need an
 * rseq critical section in assembly per architecture, and a CPU's stock
 * would serve every thread on it, so the per-thread ledger that catches an
 * over-uncharge on the fast path would have to move.
 *
 * membarrier may be missing (kernels before 4.14) or refused (seccomp);
 * then, in ThreadSanitizer builds (it does not model membarrier) and when
 * the environment sets SOFTLIMIT_MEMBARRIER=0 (for tests of both, and for
 * hosts whose sandbox kills instead of refusing), the CAS protocol is used.
 * The choice is made once, when the first tree is created.
 */
#include "internal.h"

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

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What a membarrier() takes here, averaged over the last few (under the
 * registry lock, and once before any tree exists): how long a folder waits
 * for owners to answer before it fences instead. */
static uint64_t fence_ns;

sl_atomic64 sl__stock_answered_folds, sl__stock_fences, sl__stock_ledgers_taken;
void (*sl__ask_hook)(void);

/* Issue the fence and keep its cost.  Cannot fail once registered; the
 * owners' flags are still waited for if it somehow did. */
static void fence_timed(void)
{
	uint64_t t0 = now_ns(), d;

	syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
	d = now_ns() - t0;
	/* A fence preempted midway says nothing of the next: each sample
	 * counts for at most 4x the average so far. */
	if (fence_ns && d > 4 * fence_ns)
		d = 4 * fence_ns;
	fence_ns = fence_ns ? (3 * fence_ns + d) / 4 : d;
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
	fence_timed();
}

void sl__stock_protocol_init(void)
{
	pthread_once(&protocol_once, protocol_pick);
}

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sl__stock *registry; /* every live stock, under registry_lock */
static pthread_key_t stock_key;
static pthread_once_t stock_key_once = PTHREAD_ONCE_INIT;
static bool stock_key_ok;

/* initial-exec: the fast path reads this with one %fs-relative load. */
_Thread_local struct sl__stock *sl__tls_stock __attribute__((tls_model("initial-exec")));
/* Set once the thread's stock is gone: later charges (from other keys'
 * destructors) take the exact path instead of building a new stock. */
static _Thread_local bool tls_stock_dead __attribute__((tls_model("initial-exec")));

/* Give a slot's taken contents back to its group: units leave the path's
 * counters, the ledger becomes the group's local charge. */
static void slot_flush(sl_group *g, uint64_t units, uint64_t ledger)
{
	if (ledger)
		sl__fetch_add(&g->local, ledger, SL_RELAXED);
	if (units)
		sl__counter_cancel(g, units);
}

static void stock_release(void *arg)
{
	struct sl__stock *s = arg;
	int i;

	pthread_mutex_lock(&registry_lock);
	for (i = 0; i < SL__STOCK_SLOTS; i++) {
		struct sl__slot *sl = &s->slot[i];
		/* Acq_rel: as a drainer's take (acquire: the group these units
		 * belong to; release: our empty word to a later refill). */
		uint64_t w = sl__exchange(&sl->word, 0, SL_ACQ_REL);

		/* Holding the registry lock: a non-empty slot's group cannot be
		 * destroyed under us (destroy drains under this lock). */
		if (w & SL__CONTENTS_MASK)
			slot_flush(sl__load(&sl->group, SL_RELAXED), sl__word_units(w), sl__word_ledger(w));
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		registry = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pthread_mutex_unlock(&registry_lock);
	free(s);
	sl__tls_stock = NULL;
	tls_stock_dead = true;
}

static void stock_key_init(void)
{
	stock_key_ok = pthread_key_create(&stock_key, stock_release) == 0;
}

struct sl__stock *sl__stock_get(void)
{
	struct sl__stock *s = sl__tls_stock;

	if (sl__likely(s) || tls_stock_dead)
		return s;
	pthread_once(&stock_key_once, stock_key_init);
	if (!stock_key_ok)
		return NULL;
	s = sl__aligned_alloc(SL__CACHELINE, sizeof(*s));
	if (!s)
		return NULL;
	memset(s, 0, sizeof(*s));
	if (pthread_setspecific(stock_key, s) != 0) {
		free(s);
		return NULL;
	}
	pthread_mutex_lock(&registry_lock);
	s->next = registry;
	if (registry)
		registry->prev = s;
	registry = s;
	pthread_mutex_unlock(&registry_lock);
	sl__tls_stock = s;
	return s;
}

/*
 * The slot bound to g, else bind an unused slot, else the least recently
 * refilled one; the evicted group's contents are flushed back.  Owner only,
 * in a transit (transit_begin()).  Inlined into both callers: as a call,
 * the refill (on every at-max charge's path) ran 0.8% more instructions in
 * bench_full (callgrind, 1 thread).
 */
static inline __attribute__((always_inline)) struct sl__slot *stock_bind(struct sl__stock *s, sl_group *g)
{
	struct sl__slot *victim = sl__slot_find(s, g);
	uint64_t w;
	sl_group *old;
	int i;

	s->clock++;
	if (victim)
		goto found;
	for (i = 0; i < SL__STOCK_SLOTS; i++) {
		struct sl__slot *sl = &s->slot[i];

		if (!sl->stamp) {
			if (!victim || victim->stamp)
				victim = sl;
		} else if (!victim || (victim->stamp && sl->stamp < victim->stamp)) {
			victim = sl;
		}
	}
	old = sl__load(&victim->group, SL_RELAXED);
	/* The caller's transit (inflight raised, seq_cst) covers the window
	 * where the old group's units are out of the slot but still in its
	 * counters: a concurrent sl_group_destroy() of that group waits for
	 * it, and so does a usage read (sl__stock_usage()). */
	w = sl__load(&victim->word, SL_RELAXED);
	/* seq_cst: the take is ordered after the flag above for a drainer. */
	w = sl__exchange(&victim->word, (w & ~SL__CONTENTS_MASK) + (UINT64_C(1) << SL__TAG_SHIFT),
			 SL_SEQ_CST);
	if (old && (w & SL__CONTENTS_MASK))
		slot_flush(old, sl__word_units(w), sl__word_ledger(w));
	/* Release: pairs with a drainer's acquire load of the group, so that
	 * a drainer that sees this group also sees the new tag. */
	sl__store(&victim->group, g, SL_RELEASE);
	s->eager[victim - s->slot] = 0;
found:
	victim->cap = 2 * g->tree->batch;
	victim->stamp = s->clock;
	return victim;
}

/* ---- the handover (fence protocol) ----
 *
 * An ask names slots by bit (low SL__STOCK_SLOTS bits) and carries a number
 * above them, unique under the registry lock, which the owner stores in
 * answered once those slots' ledgers are in local.
 */
#define ASK_SEQ_SHIFT SL__STOCK_SLOTS
#define ASK_SLOTS ((UINT64_C(1) << SL__STOCK_SLOTS) - 1)
#define ASK_WAIT_MIN_NS 1000   /* below a fence's cost anywhere */
#define ASK_WAIT_MAX_NS 50000  /* a fence that slow: not worth waiting longer */
#define EAGER_REFILLS 64       /* refills that fold the ledger after an ask or a take */

#define ASK_BACKOFF_MAX 64     /* most folds fenced without asking after failures */

/* Under the registry lock: the last ask's number; after asks that went
 * unanswered, how many folds fence without asking (doubling per failure,
 * back to none after an answer: an owner that shares our CPU, or sleeps,
 * answers no sooner than a fence would end). */
static uint64_t ask_seq;
static unsigned ask_backoff, ask_skip;
/* Refills that fold a slot's ledger after an ask or a take (tests set 0). */
unsigned sl__eager_refills = EAGER_REFILLS;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Owner: fold the ledgers of the slots that s's ask names into their
 * groups' local charge, and say so (the folder's side: fold_by_owners()). */
static void answer(struct sl__stock *s)
{
	uint64_t a, bits;
	int i;

	/* seq_cst: as in stock_bind(), the flag before the takes below, for
	 * a destroy or an exact check that takes after them and quiesces:
	 * the ledger is in neither the word nor local for a moment. */
	sl__store(&s->inflight, 1, SL_SEQ_CST);
	/* Relaxed: the ask carries no data but itself. */
	a = sl__exchange(&s->ask, 0, SL_RELAXED);
	for (bits = a & ASK_SLOTS, i = 0; bits; bits >>= 1, i++) {
		struct sl__slot *sl = &s->slot[i];
		uint64_t w = sl__load(&sl->word, SL_RELAXED);

		if (!(bits & 1))
			continue;
		/* Another thread uncharges what this slot hands out: give it
		 * our ledger at the next refills too, before it has to ask. */
		s->eager[i] = (uint8_t)sl__eager_refills;
		/* seq_cst: as take_slot(); a taker's CAS may race with ours. */
		while (sl__word_ledger(w) &&
		       !sl__cas_weak(&sl->word, &w, w & ~SL__LEDGER_MASK, SL_SEQ_CST, SL_RELAXED))
			;
		/* Another group's, if the slot was rebound since the ask:
		 * folding our own ledger is right for any group. */
		if (sl__word_ledger(w))
			sl__fetch_add(&sl__load(&sl->group, SL_RELAXED)->local, sl__word_ledger(w), SL_RELAXED);
	}
	/* Release: pairs with the folder's acquire load; it sees local.
	 * (0 when the ask was withdrawn meanwhile: no folder waits for it.) */
	sl__store(&s->answered, a >> ASK_SEQ_SHIFT, SL_RELEASE);
	/* Release: pairs with the seq_cst load in quiesce_locked(). */
	sl__store(&s->inflight, 0, SL_RELEASE);
}

/*
 * Fence protocol, a charge that missed the fast path because the takers'
 * flag is up: answer our ask if a folder waits for it, then hand amount out
 * of the slot as the CAS protocol's fast path does (a taker may be at work:
 * its takes are compare-and-swaps too).  true: done.  So an owner that
 * charges answers within one charge, and other threads' charges pay a
 * compare-and-swap while the flag is up, not a refill.
 */
static bool charge_flagged(struct sl__stock *s, sl_group *g, uint64_t amount)
{
	struct sl__slot *sl;
	uint64_t w;

	/* Acquire: pairs with the folder's release of SL__TAKERS_ASK, so
	 * that its ask is seen. */
	if ((sl__load(&sl__stock_takers, SL_ACQUIRE) & SL__TAKERS_ASK) && sl__load(&s->ask, SL_RELAXED))
		answer(s);
	sl = sl__slot_find(s, g);
	if (!sl)
		return false;
	w = sl__load(&sl->word, SL_RELAXED);
	/* Relaxed: as the fast path (charge.c). */
	while (sl__word_units(w) >= amount && sl__word_ledger(w) + amount <= SL__LEDGER_MAX)
		if (sl__cas_weak(&sl->word, &w, w - amount + (amount << SL__LEDGER_SHIFT), SL_RELAXED, SL_RELAXED))
			return true;
	return false;
}

/*
 * Usage reads (sl__stock_usage()) at work, 0 or 1: raised and lowered under
 * the registry lock.  A transit waits for it to fall.
 */
static sl_atomic32 usage_reads;

/*
 * Owner: from the flush of a rebind to the refill's CAS into the slot, and
 * until the give-back of what the slot's cap refuses, units are in the
 * counters and in no slot.  A reader that took the count and then the
 * slots would count them as the host's usage, and a reclaim would ask a
 * callback for units under min (found by proof/reclaim.pml,
 * CFG_CLAIM_REFILL).  So a transit raises inflight, as every window where
 * units are between a slot and the counters does, and then looks for a
 * usage read, a Dekker handshake with sl__stock_usage() (seq_cst on both
 * sides: a store, then a load of the other's word): either the reader sees
 * the flag and waits until the transit is over, or the transit sees the
 * reader and waits on the registry lock, which the reader holds, before it
 * starts.  A transit never takes a lock while its flag is up.
 */
static void transit_begin(struct sl__stock *s)
{
	for (;;) {
		sl__store(&s->inflight, 1, SL_SEQ_CST);
		if (sl__likely(!sl__load(&usage_reads, SL_SEQ_CST)))
			return;
		sl__store(&s->inflight, 0, SL_RELEASE);
		pthread_mutex_lock(&registry_lock);
		pthread_mutex_unlock(&registry_lock);
	}
}

/* Release: pairs with the seq_cst load in quiesce_locked(), so a waiter
 * that sees the flag down also sees the slot and the counters. */
static void transit_end(struct sl__stock *s)
{
	sl__store(&s->inflight, 0, SL_RELEASE);
}

/* Owner: slots whose ledgers folds took (take_slot()): fold them at the
 * next refills, before another thread has to come for them again.  Before
 * stock_bind(): a slot rebound since forgets it there. */
static void note_wanted(struct sl__stock *s)
{
	/* Relaxed: a hint; the ledgers themselves move by CAS. */
	uint64_t bits = sl__exchange(&s->wanted, 0, SL_RELAXED);
	int i;

	for (i = 0; i < SL__STOCK_SLOTS; i++)
		if (bits >> i & 1)
			s->eager[i] = (uint8_t)sl__eager_refills;
}

/*
 * Pre-charge amount + batch to the path and hand amount out of the slot.
 * Returns 0, or 1 when the batch does not fit under every max and high on
 * the path: the caller then charges exactly, so a stock never makes a charge
 * fail (or pass high) that would not without it.
 */
int sl__stock_refill(struct sl__stock *s, sl_group *g, uint64_t amount)
{
	uint64_t batch = g->tree->batch, extra_local = 0, give_back = 0;
	struct sl__slot *sl;
	uint64_t w;

	if (sl__unlikely(sl__load(&sl__stock_takers, SL_RELAXED)) && sl__stock_protocol == SL__STOCK_FENCE &&
	    charge_flagged(s, g, amount))
		return 0;
	if (sl__unlikely(sl__load(&s->wanted, SL_RELAXED)))
		note_wanted(s);
	/* The flag also covers a ledger too full to take amount, folded into
	 * local below: until then those units are in neither, so an
	 * over-uncharge check must wait for us (see uncharge.c). */
	transit_begin(s);
	sl = stock_bind(s, g);
	if (sl__counter_try(g, amount + batch, 0, batch, NULL) != 0) {
		transit_end(s);
		return 1;
	}
	w = sl__load(&sl->word, SL_RELAXED);
	/* While an over-uncharge check runs on g, no ledger of g may grow:
	 * charge exactly (into local) instead.  seq_cst: with the flag's
	 * store in transit_begin(), against the check's count and its
	 * quiesce; either it waits for us or we see it. */
	if (sl__unlikely(sl__load(&g->checks, SL_SEQ_CST) != 0)) {
		sl__counter_cancel(g, amount + batch);
		transit_end(s);
		return 1;
	}
	for (;;) {
		uint64_t u = sl__word_units(w) + batch, h = sl__word_ledger(w) + amount, nw;

		give_back = u > sl->cap ? u - sl->cap : 0;
		u -= give_back;
		extra_local = h > SL__LEDGER_MAX || s->eager[sl - s->slot] ? h : 0;
		h -= extra_local;
		nw = (w & ~SL__CONTENTS_MASK) | u | (h << SL__LEDGER_SHIFT);
		/* Release: pairs with a drainer's acquire load of the word, so
		 * the drainer sees the group these units were charged to. */
		if (sl__cas_weak(&sl->word, &w, nw, SL_RELEASE, SL_RELAXED))
			break;
	}
	if (extra_local)
		sl__fetch_add(&g->local, extra_local, SL_RELAXED);
	if (s->eager[sl - s->slot])
		s->eager[sl - s->slot]--;
	if (give_back)
		sl__counter_cancel(g, give_back);
	transit_end(s);
	return 0;
}

/*
 * Owner: units an uncharge of g took back from the host, kept as
 * pre-charged units in this thread's slot for g (bound now if need be)
 * instead of leaving every counter on the path: the kernel's refill of its
 * stock on uncharge.  A thread that uncharges what another charges (a
 * handoff) then moves no counter per uncharge, only local; the counters
 * move once per batch, when the slot passes its cap and gives back all but
 * a batch.  That give-back, and a rebind's flush, are transits: units
 * between a slot and the counters.  Keeping the units needs none: they
 * are counted throughout, and go from the uncharge in progress into the
 * slot in one compare-and-swap (a usage read counts them as the host's
 * before it and as stocked after it).  They go straight back to the
 * counters inside a reclaim callback (a reclaim needs them to fall), for
 * more than a batch, and where a refill of a batch would not fit under
 * some max or high on the path: a stock never holds units that a refill
 * could not have put there, so a group over a lowered max stays there
 * for charges.  Never fails: without a stock they go back too.
 */
void sl__stock_keep(sl_group *g, uint64_t units)
{
	uint64_t batch = g->tree->batch, w, back = 0;
	struct sl__stock *s;
	struct sl__slot *sl;
	bool transit;

	if (!batch || units > batch || sl__tls_in_reclaim || !sl__counter_room(g, batch) ||
	    !(s = sl__stock_get())) {
		sl__counter_cancel(g, units);
		return;
	}
	sl = sl__slot_find(s, g);
	/* Only takers change the word meanwhile, and they only empty it:
	 * units that fit now still fit at the CAS. */
	transit = !sl || sl__word_units(sl__load(&sl->word, SL_RELAXED)) + units > sl->cap;
	if (transit) {
		transit_begin(s);
		sl = stock_bind(s, g);
	}
	w = sl__load(&sl->word, SL_RELAXED);
	do {
		uint64_t u = sl__word_units(w) + units;

		back = u > sl->cap ? u - batch : 0;
		/* seq_cst: release as in sl__stock_refill(), for a drainer,
		 * and the store half of the handshake in
		 * sl__counter_within() below. */
	} while (!sl__cas_weak(&sl->word, &w, w + units - back, SL_SEQ_CST, SL_RELAXED));
	/* A limit lowered since the room check, whose setter may have
	 * scanned this slot before our units came: take them back out. */
	if (sl__unlikely(!sl__counter_within(g))) {
		/* Units on their way from the slot to the counters. */
		if (!transit) {
			transit_begin(s);
			transit = true;
		}
		w = sl__load(&sl->word, SL_RELAXED);
		/* Relaxed: our own slot; a taker may empty it meanwhile. */
		while (sl__word_units(w) && !sl__cas_weak(&sl->word, &w, w & ~SL__UNITS_MAX, SL_RELAXED, SL_RELAXED))
			;
		back += sl__word_units(w);
	}
	if (back)
		sl__counter_cancel(g, back);
	if (transit)
		transit_end(s);
}

/* ---- other threads' slots ---- */

/* Wait until no owner holds units between a slot and the counters. */
static void quiesce_locked(void)
{
	struct sl__stock *s;

	for (s = registry; s; s = s->next)
		while (sl__load(&s->inflight, SL_SEQ_CST))
			sched_yield();
}

void sl__stock_quiesce(void)
{
	pthread_mutex_lock(&registry_lock);
	quiesce_locked();
	pthread_mutex_unlock(&registry_lock);
}

/*
 * Visit every slot of every thread whose word has a bit of mask set and
 * whose group match() accepts, under the registry lock; visit() gets the
 * stock, the slot, its group and the word it read.  The one registry scan.
 */
typedef bool (*match_fn)(const sl_group *p, const void *arg);
typedef void (*visit_fn)(struct sl__stock *s, struct sl__slot *sl, sl_group *p, uint64_t w, void *acc);

static void scan_stock(struct sl__stock *s, uint64_t mask, match_fn match, const void *arg, visit_fn visit,
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

static void scan_locked(uint64_t mask, match_fn match, const void *arg, visit_fn visit, void *acc)
{
	struct sl__stock *s;

	for (s = registry; s; s = s->next)
		scan_stock(s, mask, match, arg, visit, acc);
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
		slot_flush(p, sl__word_units(w), sl__word_ledger(w));
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

static bool others_hold(uint64_t mask, match_fn match, const void *arg)
{
	struct sl__stock *s;
	bool held = false;

	for (s = registry; s && !held; s = s->next)
		if (s != sl__tls_stock)
			scan_stock(s, mask, match, arg, note_held, &held);
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
	fence_timed();
	sl__count(&sl__stock_fences);
	for (s = registry; s; s = s->next)
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

/* acc: the slot bits of s that matched. */
static void note_slot(struct sl__stock *s, struct sl__slot *sl, sl_group *p, uint64_t w, void *acc)
{
	(void)p;
	(void)w;
	*(uint64_t *)acc |= UINT64_C(1) << (sl - s->slot);
}

/*
 * FENCE: a fold without a fence.  Ask the owner of every other slot that
 * matches and holds a ledger to fold it itself, and wait for the answers,
 * at most about as long as a fence takes.  true: every ledger asked for is
 * in local now (those that came in after we looked are not: a fold is no
 * snapshot); false: some owner did not answer (idle, blocked, or not
 * scheduled), and the caller takes with the fence.  The asks left then are
 * withdrawn; an owner already answering one folds its own ledger, which is
 * right whenever it happens.  Under the registry lock.
 */
static bool fold_by_owners(match_fn match, const void *arg)
{
	uint64_t start, wait = fence_ns;
	unsigned pending = 0;
	struct sl__stock *s;

	if (ask_skip) {
		ask_skip--;
		return false;
	}
	for (s = registry; s; s = s->next) {
		uint64_t bits = 0;

		/* asked is 0 in every stock here: no write to the others' lines. */
		if (s == sl__tls_stock)
			continue;
		scan_stock(s, SL__LEDGER_MASK, match, arg, note_slot, &bits);
		if (!bits)
			continue;
		s->asked = ++ask_seq;
		sl__store(&s->ask, bits | (s->asked << ASK_SEQ_SHIFT), SL_RELAXED);
		pending++;
	}
	if (!pending)
		return true;
	/* Release: pairs with charge_flagged(); an owner that sees the
	 * flag sees its ask. */
	sl__store(&sl__stock_takers, sl__load(&sl__stock_takers, SL_RELAXED) | SL__TAKERS_ASK, SL_RELEASE);
	wait = wait < ASK_WAIT_MIN_NS ? ASK_WAIT_MIN_NS : wait > ASK_WAIT_MAX_NS ? ASK_WAIT_MAX_NS : wait;
	start = now_ns();
	for (;;) {
		pending = 0;
		for (s = registry; s; s = s->next) {
			/* Acquire: pairs with answer(); its folds into local
			 * are seen. */
			if (s->asked && sl__load(&s->answered, SL_ACQUIRE) == s->asked)
				s->asked = 0;
			pending += s->asked != 0;
		}
		if (!pending || now_ns() - start >= wait)
			break;
		if (sl__unlikely(sl__ask_hook != NULL))
			sl__ask_hook();
		/* No sched_yield(): on a busy machine it can cost a time slice,
		 * far more than the fence this wait tries to save. */
		cpu_relax();
	}
	sl__store(&sl__stock_takers, sl__load(&sl__stock_takers, SL_RELAXED) & ~SL__TAKERS_ASK, SL_RELAXED);
	for (s = registry; s && pending; s = s->next)
		if (s->asked) {
			sl__store(&s->ask, 0, SL_RELAXED);
			s->asked = 0;
		}
	if (pending) {
		ask_backoff = ask_backoff ? (ask_backoff < ASK_BACKOFF_MAX ? 2 * ask_backoff : ask_backoff) : 1;
		ask_skip = ask_backoff;
		return false;
	}
	ask_backoff = 0;
	sl__count(&sl__stock_answered_folds);
	return true;
}

/* Take mask's part of every slot that match() accepts; under the registry
 * lock.  Returns the units given back. */
static uint64_t take_locked(uint64_t mask, match_fn match, const void *arg)
{
	struct take tk = { .mask = mask, .flush = true };

	if (sl__stock_protocol == SL__STOCK_FENCE &&
	    (!others_hold(mask, match, arg) || (mask == SL__LEDGER_MASK && fold_by_owners(match, arg)))) {
		/* Only our own slots hold any, or their owners folded the
		 * rest: no fence, and no look at the others (one may refill
		 * and go on plain-storing after our look; to it, this take
		 * came first). */
		if (sl__tls_stock)
			scan_stock(sl__tls_stock, mask, match, arg, take_slot, &tk);
	} else {
		takers_begin();
		scan_locked(mask, match, arg, take_slot, &tk);
		takers_end();
	}
	return tk.units;
}

static uint64_t take(uint64_t mask, match_fn match, const void *arg)
{
	uint64_t units;

	pthread_mutex_lock(&registry_lock);
	units = take_locked(mask, match, arg);
	pthread_mutex_unlock(&registry_lock);
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
	pthread_mutex_lock(&registry_lock);
	scan_stock(sl__tls_stock, SL__CONTENTS_MASK, match_subtree, top, take_slot, &tk);
	pthread_mutex_unlock(&registry_lock);
	return tk.units;
}

/*
 * After sl_group_set_limits() put a max or high of top below top's count:
 * give back every unit that stocks hold in top's subtree, so that none is
 * handed out past the new limit.  Stocks filled after this are within it:
 * a refill in flight either read the new limit after its pre-charge (and
 * took its batch back: sl__counter_try()) or raised its inflight flag
 * before our seq_cst loads of the flags in quiesce_locked(), which wait
 * until its units are in the slot, where the take finds them (the flag's
 * store and the limit's load are seq_cst in the refill, the limit's
 * exchange and the flags' loads here: a Dekker handshake).  Units that an
 * uncharge keeps are rechecked by the keeper (sl__counter_within()).
 */
void sl__stock_drain_limited(const sl_group *top)
{
	pthread_mutex_lock(&registry_lock);
	quiesce_locked();
	take_locked(SL__CONTENTS_MASK, match_subtree, top);
	pthread_mutex_unlock(&registry_lock);
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

	pthread_mutex_lock(&registry_lock);
	takers_begin();
	scan_locked(SL__CONTENTS_MASK, match_tree, t, take_slot, &tk);
	takers_end();
	quiesce_locked();
	pthread_mutex_unlock(&registry_lock);
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
	pthread_mutex_lock(&registry_lock);
	/* seq_cst: then quiesce_locked()'s loads of the flags (the other
	 * half of the handshake in transit_begin()). */
	sl__store(&usage_reads, 1, SL_SEQ_CST);
	quiesce_locked();
	count = sl__counter_usage(g);
	scan_locked(SL__UNITS_MAX, match_subtree, g, add_slot, &sum);
	sl__store(&usage_reads, 0, SL_RELAXED);
	pthread_mutex_unlock(&registry_lock);
	/* Never more than the count (every stocked unit is in it); the check
	 * keeps a broken invariant from wrapping. */
	*stocked = sl__min_u64(sum.units, count);
	*usage = count - *stocked;
}

/* Units and ledgers that stocks hold for g itself (not its descendants). */
void sl__stock_sum(const sl_group *g, uint64_t *units, uint64_t *ledger)
{
	struct sum sum = { 0, 0 };

	pthread_mutex_lock(&registry_lock);
	scan_locked(SL__CONTENTS_MASK, match_group, g, add_slot, &sum);
	pthread_mutex_unlock(&registry_lock);
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
