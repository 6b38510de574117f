/* SPDX-License-Identifier: MIT */
/*
 * Test-only hooks of the library: hidden symbols that tests linked against
 * the static archive reach through this one header (tests add lib/ to their
 * include path), never through extern lines of their own.
 */
#ifndef SL_TESTING_H
#define SL_TESTING_H

#include <stdbool.h>
#include <stdint.h>

#include <softlimit/softlimit.h>

/* alloc.c: let `after` more allocations succeed, then fail the next one
 * (all of them if sticky); after < 0 turns failures off. */
void sl__fault_inject(long after, bool sticky);

/* uncharge.c: ordinary folds an uncharge that comes up short makes before
 * the exact over-uncharge check; tests set it to 0 to drive every
 * shortfall through that check. */
extern unsigned sl__fold_rounds;
/* uncharge.c: called between an ordinary fold and the take that follows it
 * (exact false), and inside the exact check after its drain (exact true),
 * so that a test can make other threads move units exactly there. */
extern void (*sl__fold_hook)(sl_group *g, bool exact);

/* stock_take.c: the protocol between stock owners and takers, chosen at the
 * first sl_tree_create(): 1 for the membarrier fence protocol, 0 for
 * compare-and-swap (SOFTLIMIT_MEMBARRIER=0, no membarrier, TSan). */
extern int sl__stock_protocol;
/* stock_handover.c, stock_take.c, fence protocol: folds whose owners all
 * answered (no fence), and fences issued by takers. */
extern _Atomic uint64_t sl__stock_answered_folds, sl__stock_fences;
/* stock_handover.c: refills that fold a slot's ledger into local after another
 * thread asked for it or took it (64); tests that need ledgers to stay in
 * their slots set 0. */
extern unsigned sl__eager_refills;
/* stock_take.c, both protocols: ledgers a fold took from other threads' slots. */
extern _Atomic uint64_t sl__stock_ledgers_taken;
/* stock_take.c: give back what the calling thread's own stock holds for top's
 * subtree, as its exit does (a test's main thread never exits).  Returns
 * the units given back. */
uint64_t sl__stock_drain_mine(const sl_group *top);
/* stock.c: called in a keep of units that an uncharge of g gives back,
 * after its room check and before its units go into the slot (only when no
 * transit is needed: no flag is up), so that a test can lower a limit
 * exactly there. */
extern void (*sl__keep_hook)(sl_group *g);
/* stock_handover.c: called while a fold waits for owners to answer (under the
 * registry lock; after the answers were looked at, before the time limit
 * is), so that a test can have an owner charge exactly then. */
extern void (*sl__ask_hook)(void);

#endif /* SL_TESTING_H */
