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
 * Other threads may take a slot's contents (to make room at max, to destroy
 * the group, to count exact stats) under the registry lock.  The owner never
 * takes that lock on its fast path.  Ownership races are settled by the tag
 * in the slot word: see internal.h.
 */
#include "internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sl__stock *registry; /* every live stock, under registry_lock */
static pthread_key_t stock_key;
static pthread_once_t stock_key_once = PTHREAD_ONCE_INIT;
static bool stock_key_ok;

/* initial-exec: the fast path reads this with one %fs-relative load. */
_Thread_local struct sl__stock *sl__tls_stock __attribute__((tls_model("initial-exec")));
#define tls_stock sl__tls_stock
/* Set once the thread's stock is gone: later charges (from other keys'
 * destructors) take the exact path instead of building a new stock. */
static _Thread_local bool tls_stock_dead __attribute__((tls_model("initial-exec")));

/* Give a slot's taken contents back to its group: units leave the path's
 * counters, the ledger becomes the group's local charge. */
void sl__slot_flush(sl_group *g, uint64_t units, uint64_t ledger)
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
		uint64_t w = sl__exchange(&sl->word, 0, SL_ACQ_REL);

		/* Holding the registry lock: a non-empty slot's group cannot be
		 * destroyed under us (destroy drains under this lock). */
		if (w & SL__UH_MASK)
			sl__slot_flush(sl__load(&sl->group, SL_RELAXED), sl__w_units(w), sl__w_ledger(w));
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		registry = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pthread_mutex_unlock(&registry_lock);
	free(s);
	tls_stock = NULL;
	tls_stock_dead = true;
}

static void stock_key_init(void)
{
	stock_key_ok = pthread_key_create(&stock_key, stock_release) == 0;
}

struct sl__stock *sl__stock_get(void)
{
	struct sl__stock *s = tls_stock;

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
	tls_stock = s;
	return s;
}

/*
 * Find the slot bound to g, or rebind the least recently refilled one.
 * The evicted group's contents are flushed back.  Owner only.
 */
struct sl__slot *sl__stock_bind(struct sl__stock *s, sl_group *g)
{
	struct sl__slot *victim = NULL;
	uint64_t w;
	sl_group *old;
	int i;

	s->clock++;
	/* The slot bound to g, else an unused slot, else the least recently refilled. */
	for (i = 0; i < SL__STOCK_SLOTS; i++) {
		struct sl__slot *sl = &s->slot[i];

		if (sl__load(&sl->group, SL_RELAXED) == g) {
			victim = sl;
			goto found;
		}
		if (!sl->stamp) {
			if (!victim || victim->stamp)
				victim = sl;
		} else if (!victim || (victim->stamp && sl->stamp < victim->stamp)) {
			victim = sl;
		}
	}
	old = sl__load(&victim->group, SL_RELAXED);
	/*
	 * inflight covers the window where the old group's units are out of
	 * the slot but still in its counters: a concurrent sl_group_destroy()
	 * of that group waits for it.  seq_cst: the flag must be visible
	 * before the take, to a destroyer that reads it after its own take.
	 */
	sl__store(&s->inflight, 1, SL_SEQ_CST);
	w = sl__load(&victim->word, SL_RELAXED);
	w = sl__exchange(&victim->word, (w & ~SL__UH_MASK) + (UINT64_C(1) << SL__TAG_SHIFT),
			 SL_SEQ_CST);
	if (old && (w & SL__UH_MASK))
		sl__slot_flush(old, sl__w_units(w), sl__w_ledger(w));
	/* Release: pairs with a drainer's acquire load of the group, so that
	 * a drainer that sees this group also sees the new tag. */
	sl__store(&victim->group, g, SL_RELEASE);
	/* Release: pairs with the seq_cst (acquire) load in quiesce_locked(),
	 * so a waiter that sees 0 also sees the flush. */
	sl__store(&s->inflight, 0, SL_RELEASE);
found:
	victim->cap = 2 * g->tree->batch;
	victim->stamp = s->clock;
	return victim;
}

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

static bool drain_match(sl_group *p, sl_group *target, enum sl__drain_mode mode)
{
	switch (mode) {
	case SL__DRAIN_GROUP:
	case SL__DRAIN_LEDGERS:
		return p == target;
	case SL__DRAIN_SUBTREE:
		return sl__is_ancestor(target, p);
	case SL__DRAIN_TREE:
		return p->tree == target->tree;
	}
	return false;
}

/*
 * Take the contents of every slot, of every thread, that mode selects (only
 * the ledger under SL__DRAIN_LEDGERS: the owner keeps its pre-charged units
 * and its fast path).  Returns the units given back to the counters.
 */
uint64_t sl__stock_drain(sl_group *target, enum sl__drain_mode mode)
{
	uint64_t take_mask = mode == SL__DRAIN_LEDGERS ? SL__H_MAX << SL__H_SHIFT : SL__UH_MASK;
	struct sl__stock *s;
	uint64_t freed = 0;
	int i;

	pthread_mutex_lock(&registry_lock);
	for (s = registry; s; s = s->next) {
		for (i = 0; i < SL__STOCK_SLOTS; i++) {
			struct sl__slot *sl = &s->slot[i];
			/* Acquire: pairs with the release store of a slot's
			 * group in sl__stock_bind() and the owner's filling CAS. */
			uint64_t w = sl__load(&sl->word, SL_ACQUIRE), tag;
			sl_group *p;

			if (!(w & take_mask))
				continue;
			p = sl__load(&sl->group, SL_ACQUIRE);
			if (!p || !drain_match(p, target, mode))
				continue;
			/* The CAS succeeds only if the word, tag included, is
			 * still what we read: the units are p's. */
			tag = w >> SL__TAG_SHIFT;
			while (!sl__cas_weak(&sl->word, &w, w & ~take_mask, SL_SEQ_CST, SL_ACQUIRE)) {
				/* A new tag means a rebind: the slot is no longer p's. */
				if ((w & take_mask) == 0 || (w >> SL__TAG_SHIFT) != tag)
					goto next_slot;
			}
			w &= take_mask;
			if (mode != SL__DRAIN_TREE) {
				sl__slot_flush(p, sl__w_units(w), sl__w_ledger(w));
				freed += sl__w_units(w);
			}
next_slot:;
		}
	}
	if (mode == SL__DRAIN_TREE)
		quiesce_locked();
	pthread_mutex_unlock(&registry_lock);
	return freed;
}

/* Units that stocks hold for g's subtree right now. */
uint64_t sl__stock_units(sl_group *g)
{
	struct sl__stock *s;
	uint64_t sum = 0;
	int i;

	pthread_mutex_lock(&registry_lock);
	for (s = registry; s; s = s->next) {
		for (i = 0; i < SL__STOCK_SLOTS; i++) {
			struct sl__slot *sl = &s->slot[i];
			uint64_t w = sl__load(&sl->word, SL_ACQUIRE);
			sl_group *p;

			if (!sl__w_units(w))
				continue;
			p = sl__load(&sl->group, SL_ACQUIRE);
			if (p && sl__is_ancestor(g, p))
				sum += sl__w_units(w);
		}
	}
	pthread_mutex_unlock(&registry_lock);
	return sum;
}

/* The ledger of the calling thread's slot for g: what this thread handed to
 * the host for g and has not yet folded into g's local charge. */
uint64_t sl__stock_my_ledger(sl_group *g)
{
	struct sl__slot *sl = tls_stock ? sl__stock_slot_of(tls_stock, g) : NULL;

	return sl ? sl__w_ledger(sl__load(&sl->word, SL_RELAXED)) : 0;
}

/* The slot of s bound to g, or NULL.  Owner only. */
struct sl__slot *sl__stock_slot_of(struct sl__stock *s, sl_group *g)
{
	int i;

	for (i = 0; i < SL__STOCK_SLOTS; i++)
		if (sl__load(&s->slot[i].group, SL_RELAXED) == g)
			return &s->slot[i];
	return NULL;
}

/* Units and ledgers that stocks hold for g itself (not its descendants). */
void sl__stock_sum(sl_group *g, uint64_t *units, uint64_t *ledger)
{
	struct sl__stock *s;
	int i;

	*units = *ledger = 0;
	pthread_mutex_lock(&registry_lock);
	for (s = registry; s; s = s->next) {
		for (i = 0; i < SL__STOCK_SLOTS; i++) {
			uint64_t w = sl__load(&s->slot[i].word, SL_ACQUIRE);

			if ((w & SL__UH_MASK) && sl__load(&s->slot[i].group, SL_ACQUIRE) == g) {
				*units += sl__w_units(w);
				*ledger += sl__w_ledger(w);
			}
		}
	}
	pthread_mutex_unlock(&registry_lock);
}
