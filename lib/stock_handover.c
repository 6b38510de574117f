/* SPDX-License-Identifier: MIT */
/*
 * Per-thread charge stocks, the handover (fence protocol): a thread that
 * uncharges what another charged needs that thread's ledger folded into
 * local.  Instead of a membarrier(), the folder first asks the owner to
 * fold it itself (sl__fold_by_owners()) and waits about as long as a fence
 * takes; the owner answers on its next charge (sl__charge_flagged(), from
 * the refill).  An owner that does not answer in time gets the fence
 * (stock_take.c).  Why, and what was measured: see docs/stocks.md.
 */
#include "internal.h"

#include "stock.h"
#include "testing.h"

sl_atomic64 sl__stock_answered_folds;
void (*sl__ask_hook)(void);

/*
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
 * groups' local charge, and say so (the folder's side: sl__fold_by_owners()). */
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
	/* Release: pairs with the seq_cst load in sl__quiesce_locked(). */
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
bool sl__charge_flagged(struct sl__stock *s, sl_group *g, uint64_t amount)
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
bool sl__fold_by_owners(sl__match_fn match, const void *arg)
{
	uint64_t start, wait = sl__fence_ns;
	unsigned pending = 0;
	struct sl__stock *s;

	if (ask_skip) {
		ask_skip--;
		return false;
	}
	for (s = sl__registry; s; s = s->next) {
		uint64_t bits = 0;

		/* asked is 0 in every stock here: no write to the others' lines. */
		if (s == sl__tls_stock)
			continue;
		sl__scan_stock(s, SL__LEDGER_MASK, match, arg, note_slot, &bits);
		if (!bits)
			continue;
		s->asked = ++ask_seq;
		sl__store(&s->ask, bits | (s->asked << ASK_SEQ_SHIFT), SL_RELAXED);
		pending++;
	}
	if (!pending)
		return true;
	/* Release: pairs with sl__charge_flagged(); an owner that sees the
	 * flag sees its ask. */
	sl__store(&sl__stock_takers, sl__load(&sl__stock_takers, SL_RELAXED) | SL__TAKERS_ASK, SL_RELEASE);
	wait = wait < ASK_WAIT_MIN_NS ? ASK_WAIT_MIN_NS : wait > ASK_WAIT_MAX_NS ? ASK_WAIT_MAX_NS : wait;
	start = sl__now_ns();
	for (;;) {
		pending = 0;
		for (s = sl__registry; s; s = s->next) {
			/* Acquire: pairs with answer(); its folds into local
			 * are seen. */
			if (s->asked && sl__load(&s->answered, SL_ACQUIRE) == s->asked)
				s->asked = 0;
			pending += s->asked != 0;
		}
		if (!pending || sl__now_ns() - start >= wait)
			break;
		if (sl__unlikely(sl__ask_hook != NULL))
			sl__ask_hook();
		/* No sched_yield(): on a busy machine it can cost a time slice,
		 * far more than the fence this wait tries to save. */
		cpu_relax();
	}
	sl__store(&sl__stock_takers, sl__load(&sl__stock_takers, SL_RELAXED) & ~SL__TAKERS_ASK, SL_RELAXED);
	for (s = sl__registry; s && pending; s = s->next)
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
