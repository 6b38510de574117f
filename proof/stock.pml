/* SPDX-License-Identifier: MIT */
/*
 * The charge/uncharge/stock/drain/exact-check protocol: three threads on
 * the tree R -> A (depth 2), batch 1 (a slot keeps up to 2 units).  Charges
 * take SL_NORECLAIM (no group has a callback here: reclaim.pml checks
 * reclaim), so the at-max path is the drain of atmax.c:sl__at_max.
 *
 * One configuration per run (spin -DCFG_...):
 *   CFG_HANDOFF  thread 0 charges two units and hands one to each of
 *                threads 1 and 2, which uncharge them (a producer and two
 *                consumers: the false over-uncharge, the refill after a
 *                drain);
 *   CFG_ENOMEM   A's max is 2, R's 3; threads 0 and 1 charge one unit of
 *                A, thread 2 one of R, and each uncharges it (no false
 *                -ENOMEM while another thread's stock holds the room);
 *   CFG_SETMAX   threads 0 and 1 charge A while thread 2 lowers A's max
 *                from 3 to 1 (the set_max race); once set_max returned,
 *                thread 0 uncharges its unit and charges one again (a
 *                group over a lowered max stays there: the uncharge may
 *                keep its unit only where a refill would fit).
 * Every uncharge whose release is a unit (the batch) may keep it in the
 * thread's stock (softlimit.pml: stock_keep); the exit gives it back.
 * Options: -DOWN_UNIT (CFG_HANDOFF): thread 0 then charges a third unit and
 * uncharges it itself, so that after an answer its refill folds the ledger
 * into local (FENCE's eager refills) and its own uncharge takes the slow
 * path; -DFENCE: the fence protocol (softlimit.pml's header), else CAS;
 * -DFOLD_ROUNDS=n: ordinary folds before the exact check.
 *
 * What this model leaves out (beyond softlimit.pml's list): reclaim (no
 * callback; reclaim.pml), SL_FORCE, the OOM handler, charges of more than
 * the batch, group destroy, sl__stock_usage() and its transit handshake
 * (usage_reads stays 0 here: reclaim.pml), the stats readers.
 *
 * Properties (every configuration):
 *   - the monitor: a count never passes a max in force, except by the
 *     charges between their CAS and their second look at max (win);
 *   - every uncharge of units the host holds succeeds (no false
 *     over-uncharge);
 *   - a charge fails with -ENOMEM only if the host's units really leave no
 *     room, when no other call ran during it (no false -ENOMEM);
 *   - (CFG_SETMAX) a charge by thread 0 that began after set_max returned,
 *     when none of thread 0's calls overlapped set_max, leaves the host's
 *     units of A under the new max, whatever set_max returned (a stock
 *     that a call racing set_max filled may pass it: counter.c:208-213);
 *   - at the end (every thread gone, its stock given back): count, local and
 *     the host's units agree at every level (no unit lost or counted twice),
 *     no check or in-flight flag is left, the registry lock is free;
 *   - no invalid end state (no deadlock, no wait that never ends).
 */
#include "softlimit.pml"

#if !defined(CFG_HANDOFF) && !defined(CFG_ENOMEM) && !defined(CFG_SETMAX)
#define CFG_HANDOFF
#endif

bit handed[NT];

#ifdef CFG_SETMAX
/* Ghosts for a max lowered under what the host holds: smrun while thread
 * 2's set_max runs, smdone once it returned (0 or -EBUSY: the new max
 * holds for later charges either way); in0 while thread 0 is in a call,
 * taint0 once one of its calls overlapped set_max (its stock may then
 * hold units of a refill or a keep that raced the new max, which
 * counter.c:208-213 allows). */
bit smrun, smdone, in0, taint0;
#define SM_CALL_BEGIN \
	atomic { \
		in0 = (me == 0 -> 1 : in0); \
		taint0 = (me == 0 && smrun -> 1 : taint0); \
		smafter = smdone \
	}
#define SM_CALL_END in0 = (me == 0 -> 0 : in0)
/* after a charge of A by thread 0 that began after set_max returned and
 * overlapped no set_max: what the host holds stays under the new max */
#define SM_CHARGED(g) assert(!(me == 0 && smafter && !taint0) || hu[A] <= maxv[A])
#else
#define SM_CALL_BEGIN skip
#define SM_CALL_END skip
#define SM_CHARGED(g) skip
#endif

/* A charge with SL_NORECLAIM: charge.c:sl_charge:42-73,
 * sl__charge_slow:22-34, charge_exact:10-20, and for a charge that does
 * not fit, atmax.c:sl__at_max:92-183 without reclaim (may_reclaim false:
 * atmax.c:95, :116, :123-124). */
inline charge(me, g, amt, rc)
{
	op_begin();
	SM_CALL_BEGIN;
	charge_fast(me, g, (amt), rc); /* charge.c:47-70 */
	if
	:: rc == OK -> skip
	:: else ->
		stock_refill(me, g, amt, rc); /* charge.c:30-32 (amt <= batch) */
		if
		:: rc == 0 -> skip
		:: else ->
			counter_try(g, (amt), 0, rc, failg); /* charge.c:13 */
			if
			:: rc == OK -> lcl[g] = lcl[g] + (amt) /* charge.c:17-18 */
			:: else ->
				/* atmax.c:sl__at_max, g->tree->at_max (charge.c:15-16) */
				dr = NONE; /* atmax.c:98 drained */
				do
				:: /* atmax.c:114-117 drain under the group in the way
					 * (the whole subtree: SL_NORECLAIM) */
					if
					:: dr == NONE || !is_ancestor(dr, failg) ->
						dr = failg;
						drain_subtree(failg, du)
					:: else -> du = 0
					fi;
					if
					:: du == 0 -> break /* atmax.c:123-124 may not reclaim */
					:: else
					fi;
					/* atmax.c:161-169 retry: a refill, then exactly */
					stock_refill(me, g, (amt), rc);
					if
					:: rc == 0 -> break
					:: else
					fi;
					counter_try(g, (amt), 0, rc, failg);
					if
					:: rc == OK ->
						lcl[g] = lcl[g] + (amt); /* atmax.c:180-181 */
						break
					:: else
					fi
				od;
				dr = 0;
				if
				:: rc == ENOMEM ->
					/* no false -ENOMEM: with no other call during this one,
					 * the host's units leave no room on the path */
					assert(!(quiet && gen == mygen) ||
					       hu_sub(failg) + (amt) > maxv[failg])
				:: else
				fi
			fi
		fi
	fi;
	if
	:: rc == OK ->
		atomic {
			hu[g] = hu[g] + (amt);
			SM_CHARGED(g)
		}
	:: else
	fi;
	SM_CALL_END;
	op_end()
}

inline do_uncharge(me, g, amt)
{
	op_begin();
	SM_CALL_BEGIN;
	uncharge(me, g, (amt), rc);
	/* the host held these units: the uncharge must succeed */
	assert(rc == OK);
	SM_CALL_END;
	op_end()
}

proctype thread(byte me)
{
	THREAD_LOCALS;
	byte dr, g;
	bit smafter;
#ifdef CFG_HANDOFF
	if
	:: me == 0 ->
		charge(me, A, 1, rc);
		assert(rc == OK);
		handed[1] = 1;
		charge(me, A, 1, rc);
		assert(rc == OK);
		handed[2] = 1;
#ifdef OWN_UNIT
		/* a third unit, which the owner uncharges itself: after an
		 * answer its refill folds the ledger into local (eager) */
		charge(me, A, 1, rc);
		if /* it may meet max: the consumers' uncharges may be in flight */
		:: rc == OK -> do_uncharge(me, A, 1)
		:: else
		fi
#else
		skip
#endif
	:: else ->
		handed[me] == 1;
		do_uncharge(me, A, 1)
	fi;
#endif
#ifdef CFG_ENOMEM
	if
	:: me == 2 -> g = R
	:: else -> g = A
	fi;
	charge(me, g, 1, rc);
	if
	:: rc == OK -> do_uncharge(me, g, 1)
	:: else
	fi;
#endif
#ifdef CFG_SETMAX
	if
	:: me == 2 ->
		op_begin();
		atomic { /* ghost: calls of thread 0 in flight overlap */
			smrun = 1;
			taint0 = taint0 | in0
		}
		set_max(A, 1, rc);
		atomic {
			smrun = 0;
			smdone = 1
		}
		op_end()
	:: else ->
		charge(me, A, 1, rc);
		if
		:: me == 0 && rc == OK ->
			/* thread 0 gives its unit back and charges again: with
			 * max lowered under what the host holds, the unit its
			 * uncharge may keep must not let that charge through
			 * (after set_max returned: the race of a keep with
			 * set_max is a refill's, which the first charges check) */
			smdone;
			do_uncharge(me, A, 1);
			charge(me, A, 1, rc)
		:: else
		fi
	fi;
#endif
	/* the thread exits: its stock goes back (stock.c:stock_release) */
	op_begin();
	stock_release(me);
	op_end();
	done++
}

/* a max in force is never passed by an unforced charge that stands */
active proctype monitor()
{
end:
	atomic {
		!((!stable[A] || count[A] - win[A] <= maxv[A] + forced[A]) &&
		  (!stable[R] || count[R] - win[R] <= maxv[R] + forced[R])) ->
		assert(false)
	}
}

init
{
	byte i;

	atomic {
		i = 0;
		do
		:: i == NT -> break
		:: else ->
			sgroup[i] = NONE;
			i++
		od;
#ifdef CFG_ENOMEM
		maxv[R] = 3;
		maxv[A] = 2;
#else
		maxv[R] = 4;
		maxv[A] = 3;
#endif
		maxv[B] = 0;
		i = 0;
		do
		:: i == NT -> break
		:: else ->
			run thread(i);
			i++
		od
	}
	/* every thread gone: the counters say exactly what the host holds */
	done == NT;
	assert(count[A] == hu[A] + hu[B] * 0 && count[R] == hu[R] + hu[A]);
	assert(lcl[A] == hu[A] && lcl[R] == hu[R]);
	assert(checks[A] == 0 && checks[R] == 0 && reglock == 0 && busy == 0);
	assert(inflight[0] == 0 && inflight[1] == 0 && inflight[2] == 0);
#ifdef FENCE
	assert(takers == 0 && sask[0] == 0 && sask[1] == 0 && sask[2] == 0);
	assert(asked[0] == 0 && asked[1] == 0 && asked[2] == 0)
#endif
}
