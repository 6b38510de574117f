/* SPDX-License-Identifier: MIT */
/*
 * Per-thread charge stocks, the owner's side: a thread's stock and its
 * registry, binding a slot to a group, the refill that pre-charges a batch
 * and the keep of what an uncharge gives back.
 *
 * Each thread that charges owns a stock of SL__STOCK_SLOTS slots, each bound
 * to one group.  A slot's units are pre-charged to the group's whole path,
 * so handing them out (a charge) or taking them back (an uncharge) needs no
 * write to any group: only the thread's own slot word (charge.c,
 * uncharge.c).  The slot also keeps a ledger of the units it handed to the
 * host, so that an over-uncharge is always caught.  Other threads take a
 * slot's contents under the registry lock (stock_take.c), or ask its owner
 * to fold its ledger itself (stock_handover.c); the owner never takes that
 * lock on its fast path.  Two protocols keep the owner and the takers apart:
 * compare-and-swap on both sides, or plain stores for the owner and
 * membarrier() for the takers.  Why, and what was measured and rejected:
 * see docs/stocks.md.
 */
#include "internal.h"

#include "stock.h"
#include "testing.h"

#include <stdlib.h>
#include <string.h>

pthread_mutex_t sl__registry_lock = PTHREAD_MUTEX_INITIALIZER;
struct sl__stock *sl__registry; /* every live stock, under sl__registry_lock */
static pthread_key_t stock_key;
static pthread_once_t stock_key_once = PTHREAD_ONCE_INIT;
static bool stock_key_ok;

/* initial-exec: the fast path reads this with one %fs-relative load. */
_Thread_local struct sl__stock *sl__tls_stock __attribute__((tls_model("initial-exec")));
/* Set once the thread's stock is gone: later charges (from other keys'
 * destructors) take the exact path instead of building a new stock. */
static _Thread_local bool tls_stock_dead __attribute__((tls_model("initial-exec")));

static void stock_release(void *arg)
{
	struct sl__stock *s = arg;
	int i;

	pthread_mutex_lock(&sl__registry_lock);
	for (i = 0; i < SL__STOCK_SLOTS; i++) {
		struct sl__slot *sl = &s->slot[i];
		/* Acq_rel: as a drainer's take (acquire: the group these units
		 * belong to; release: our empty word to a later refill). */
		uint64_t w = sl__exchange(&sl->word, 0, SL_ACQ_REL);

		/* Holding the registry lock: a non-empty slot's group cannot be
		 * destroyed under us (destroy drains under this lock). */
		if (w & SL__CONTENTS_MASK)
			sl__slot_flush(sl__load(&sl->group, SL_RELAXED), sl__word_units(w), sl__word_ledger(w));
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		sl__registry = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pthread_mutex_unlock(&sl__registry_lock);
	free(s);
	sl__tls_stock = NULL;
	tls_stock_dead = true;
}

/* Test-only (testing.h): a keep about to fill its slot. */
void (*sl__keep_hook)(sl_group *g);

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
	pthread_mutex_lock(&sl__registry_lock);
	s->next = sl__registry;
	if (sl__registry)
		sl__registry->prev = s;
	sl__registry = s;
	pthread_mutex_unlock(&sl__registry_lock);
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
		sl__slot_flush(old, sl__word_units(w), sl__word_ledger(w));
	/* Release: pairs with a drainer's acquire load of the group, so that
	 * a drainer that sees this group also sees the new tag. */
	sl__store(&victim->group, g, SL_RELEASE);
	s->eager[victim - s->slot] = 0;
found:
	victim->cap = 2 * g->tree->batch;
	victim->stamp = s->clock;
	return victim;
}

/*
 * Usage reads (sl__stock_usage()) at work, 0 or 1: raised and lowered under
 * the registry lock.  A transit waits for it to fall.
 */
sl_atomic32 sl__usage_reads;

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
		if (sl__likely(!sl__load(&sl__usage_reads, SL_SEQ_CST)))
			return;
		sl__store(&s->inflight, 0, SL_RELEASE);
		pthread_mutex_lock(&sl__registry_lock);
		pthread_mutex_unlock(&sl__registry_lock);
	}
}

/* Release: pairs with the seq_cst load in sl__quiesce_locked(), so a waiter
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
	    sl__charge_flagged(s, g, amount))
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
	/* Acquire: pairs with the bump in sl__stock_drain_limited(); a
	 * new number comes with the new limits for the room check. */
	uint32_t gen = sl__load(&g->tree->limits_gen, SL_ACQUIRE);
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
	} else if (sl__unlikely(sl__keep_hook != NULL)) {
		sl__keep_hook(g);
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
	 * scanned this slot before our units came: take them back out.
	 * seq_cst: the setter bumps the number, then scans the slots; we
	 * stored into the slot, then load it (Dekker): either it finds our
	 * units or we see the number move.  Unmoved, the room check saw
	 * every limit a drain could be about, and no walk is needed. */
	if (sl__unlikely(sl__load(&g->tree->limits_gen, SL_SEQ_CST) != gen) && !sl__counter_within(g)) {
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
