/* SPDX-License-Identifier: MIT */
/*
 * Concurrent reclaim at max: the at-max loop of atmax.c, the engine's
 * claims of reclaim.c under claim_lock, pins against sl_group_destroy()
 * (tree.c), and the room handed to the charger through a stock refill.
 *
 * The tree: R (max 3) with children A (min 1, a reclaim callback) and B (no
 * callback).  At the start the host holds 2 units of A.  Three threads:
 *   thread 0  charges 1 unit to R with SL_FORCE; its A callback is
 *             re-entrant: it frees what it is asked and charges 1 unit of A
 *             back (SL_NORECLAIM, as inside any callback), which refills
 *             its stock (the forced-charge bug);
 *   thread 1  charges 1 unit to R (may reclaim);
 *   thread 2  charges 1 unit to B (SL_NORECLAIM), uncharges it, destroys B
 *             while reclaims may hold B pinned.
 * The policy is abstracted: a reclaim of R asks A then B once each, floor
 * 0 for the group itself and the min of every level up to the scope (pass
 * 2 of GUARANTEE and GATEKEEPER: policy->min_on_path).  Which groups a real
 * policy asks, in which order, and for how much comes out of its pass 1;
 * the claims below do not depend on it.
 *
 * Properties:
 *   - a callback is never asked to take A below its min;
 *   - a forced charge passes only maxes that the host's units (with the
 *     forced ones) are over, when no other call ran during it;
 *   - an unforced charge fails with -ENOMEM only if the host's units that
 *     no callback may free leave no room, when no other call ran during it;
 *   - a reclaim never touches a destroyed group; destroy of the empty B
 *     succeeds; every claim is given back;
 *   - the monitor of stock.pml (a max never passed by an unforced charge);
 *   - at the end, counters and host units agree; no deadlock.
 */
#include "softlimit.pml"

#ifndef RETRIES
#define RETRIES 1	/* atmax.c:13 SL__RECLAIM_RETRIES is 16 */
#endif
#ifndef WAIT_ROUNDS
#define WAIT_ROUNDS 1	/* atmax.c:15 SL__WAIT_ROUNDS is 4096 */
#endif

byte claimed[NG];
byte pins[NG];
bit dead[NG];
byte progress;		/* internal.h sl_tree.progress */
byte reclaimers;
bit tlock;		/* tree.c: t->lock and t->index_lock, taken together */
bit claimlock;		/* internal.h sl_tree.claim_lock */
bit has_callback[NG];

#define FORCE 2
#define NORECLAIM 1

/* stock.c:sl__stock_units:365-373: units that stocks hold for top's subtree */
inline stock_units(top, n)
{
	lock(reglock);
	atomic {
		n = 0;
		s = 0;
		do
		:: s == NT -> break
		:: else ->
			if
			:: sgroup[s] != NONE && is_ancestor(top, sgroup[s]) -> n = n + sunits[s]
			:: else
			fi;
			s++
		od;
		s = 0
	}
	unlock(reglock)
}

/* reclaim.c:sl__own_of:230-233: local plus this thread's ledger */
#define own_of(g) (lcl[g] + (sgroup[me] == g -> sledger[me] : 0))

/* A charge inside a callback: SL_NORECLAIM through charge.c's fast path, a
 * refill and an exact charge (sl__reclaim_forbidden(): no reclaim). */
inline nested_charge(g, amt)
{
	charge_fast(me, g, amt, nrc);
	if
	:: nrc == OK -> skip
	:: else ->
		stock_refill(me, g, amt, nrc);
		if
		:: nrc == 0 -> skip
		:: else ->
			counter_try(g, amt, 0, nrc, cfail);
			if
			:: nrc == OK -> lcl[g] = lcl[g] + (amt)
			:: else
			fi
		fi
	fi;
	if
	:: nrc == OK -> hu[g] = hu[g] + (amt)
	:: else
	fi;
	nrc = 0
}

/* reclaim.c:claim:277-307 */
inline claim(g, scope, want)
{
	lock(claimlock); /* reclaim.c:283 */
	p = g;
	do /* reclaim.c:284 up to the scope */
	:: p == parent(scope) || want == 0 -> break
	:: else ->
		/* reclaim.c:285-292 the floor: the min on the path (step floors:
		 * none in pass 2) */
		if
		:: minv[p] ->
#ifdef MUTANT_CLAIM_ORDER
			/* the order before the fix: usage, then claimed.  A reclaim
			 * whose callback frees and unclaims between the two reads is
			 * counted neither in usage nor in claimed: a claim into min */
			stock_units(p, n); /* reclaim.c:295-296 real usage */
			usage = count[p] - min2(count[p], n);
			taken = claimed[p] + minv[p]; /* reclaim.c:297 */
#else
			/* reclaim.c:claim: claimed first, then usage: a reclaim that
			 * unclaims after we read claimed freed before we read usage */
			taken = claimed[p] + minv[p];
			stock_units(p, n);
			usage = count[p] - min2(count[p], n);
#endif
			want = min2(want, (usage > taken -> usage - taken : 0))
		:: else
		fi;
		p = parent(p)
	od;
	if
	:: want -> /* reclaim.c:302-304 */
		q = g;
		do
		:: q == NONE -> break
		:: else ->
			claimed[q] = claimed[q] + want;
			q = parent(q)
		od
	:: else
	fi;
	unlock(claimlock); /* reclaim.c:305 */
	p = 0;
	q = 0;
	n = 0;
	usage = 0;
	taken = 0
}

/* reclaim.c:sl__reclaim_group:324-355, for a group pinned by the caller */
inline reclaim_group(g, scope)
{
	if
	:: freed >= target || !has_callback[g] -> skip /* reclaim.c:329 */
	:: else ->
		assert(!dead[g]); /* pinned: never freed under us */
		before = own_of(g); /* reclaim.c:333 */
		want = min2(target - freed, before); /* reclaim.c:334 */
		if
		:: want -> claim(g, scope, want) /* reclaim.c:335 */
		:: else
		fi;
		if
		:: want ->
			/* reclaim.c:339 the host's callback: it frees what it
			 * holds of g, up to want, through sl_uncharge() */
			ret = min2(want, hu[g]);
			/* min is never reclaimed: the host's units stay at or above it */
			assert(hu[g] - ret >= minv[g]);
			if
			:: ret -> uncharge(me, g, ret, rc2)
			:: else
			fi;
			assert(rc2 == OK);
#ifdef REENTRANT
			if
			:: me == 0 -> nested_charge(g, 1) /* the callback allocates */
			:: else
			fi;
#endif
			after = own_of(g); /* reclaim.c:341 */
			q = g; /* reclaim.c:342 unclaim() :309-315 */
			do
			:: q == NONE -> break
			:: else ->
				claimed[q] = claimed[q] - want;
				q = parent(q)
			od;
			/* reclaim.c:343-353 measured progress */
			got = min2(ret, (before > after -> before - after : 0));
			if
			:: got ->
				progress = progress + got; /* reclaim.c:349 */
				freed = freed + got /* reclaim.c:353 */
			:: else
			fi
		:: else
		fi
	fi;
	before = 0;
	after = 0;
	want = 0;
	ret = 0;
	got = 0;
	rc2 = 0
}

/* Pin g for a reclaim: under the topology lock, only while it is in the
 * tree (reclaim.c:sl__pin:242-248 from a snapshot or a candidate). */
inline pin_ask(g, scope)
{
	lock(tlock);
	pinned = !dead[g];
	if
	:: pinned -> pins[g]++
	:: else
	fi;
	unlock(tlock);
	if
	:: pinned ->
		reclaim_group(g, scope);
		pins[g]-- /* reclaim.c:sl__unpin:250-255 */
	:: else
	fi;
	pinned = 0
}

/* reclaim.c:sl__reclaim:361-375 */
inline reclaim(scope, tgt)
{
	reclaimers++; /* reclaim.c:366 */
	target = tgt;
	freed = 0;
	drain_subtree(scope, du); /* reclaim.c:370 */
	/* reclaim.c:371 the policy: A, then B */
	pin_ask(A, scope);
	pin_ask(B, scope);
	reclaimers--; /* reclaim.c:373 */
	target = 0
}

/* atmax.c:reclaim_for_charge:23-38 (reclaim_batch 0) */
inline reclaim_for_charge(at, need, rf)
{
	drain_subtree(at, du); /* atmax.c:28 */
	cnt = count[at]; /* atmax.c:29 */
	mx = maxv[at];
	if
	:: mx >= need && cnt <= mx - need -> rf = 1 /* atmax.c:31-32 */
	:: need > mx -> rf = 0
	:: else ->
		reclaim(at, cnt - (mx - need)); /* atmax.c:37 */
		rf = freed
	fi;
	cnt = 0;
	mx = 0
}

/* atmax.c:force_room:66-78 */
inline force_room(g, amt)
{
	top = NONE;
	p = g;
	do
	:: p == NONE -> break
	:: else ->
		if
		:: count[p] + (amt) > maxv[p] -> top = p /* atmax.c:73-74 */
		:: else
		fi;
		p = parent(p)
	od;
#ifdef MUTANT_FORCE_NO_DRAIN
	/* the bug (before 7c95736): no drain where the charge drained before */
	if
	:: top != NONE && !(dr != NONE && is_ancestor(dr, top)) -> drain_subtree(top, du)
	:: else
	fi;
#else
	if
	:: top != NONE -> drain_subtree(top, du) /* atmax.c:76-77 */
	:: else
	fi;
#endif
	top = 0;
	p = 0
}

/* sl_charge() with reclaim: charge.c:183-200, :169-181, :157-167 and
 * atmax.c:sl__at_max:92-175 (no OOM handler). */
inline charge(g, amt, flags, rc)
{
	op_begin();
	charge_fast(me, g, amt, rc);
	if
	:: rc == OK -> skip
	:: else ->
		stock_refill(me, g, amt, rc);
		if
		:: rc == 0 -> skip
		:: else ->
			counter_try(g, amt, 0, rc, failg);
			if
			:: rc == OK -> lcl[g] = lcl[g] + (amt)
			:: else ->
				dr = NONE;
				idle = 0;
				waits = 0;
				do
				:: /* atmax.c:109-113 */
					retry = 0;
					if
					:: dr == NONE || !is_ancestor(dr, failg) ->
						dr = failg;
						drain_subtree(failg, du);
						retry = (du != 0)
					:: else
					fi;
					if
					:: !retry && (flags & NORECLAIM) -> break /* atmax.c:118 */
					:: !retry && !(flags & NORECLAIM) && idle >= RETRIES -> break /* atmax.c:146-150 */
					:: !retry && !(flags & NORECLAIM) && idle < RETRIES ->
						seen = progress; /* atmax.c:121 */
#ifndef MUTANT_FORCE_NO_DRAIN
						dr = NONE; /* atmax.c:126 */
#endif
						reclaim_for_charge(failg, amt, rf); /* atmax.c:127 */
						if
						:: rf -> idle = 0 /* atmax.c:128 */
						:: !rf && progress != seen -> idle = 0 /* atmax.c:131-133 */
						:: !rf && progress == seen && reclaimers && waits < WAIT_ROUNDS ->
							waits++ /* atmax.c:135-139 */
						:: else -> idle++ /* atmax.c:141 */
						fi;
						rf = 0
					:: else
					fi;
					/* atmax.c:153-161 retry */
					stock_refill(me, g, amt, rc);
					if
					:: rc == 0 -> break
					:: else
					fi;
					counter_try(g, amt, 0, rc, failg);
					if
					:: rc == OK ->
						lcl[g] = lcl[g] + (amt); /* atmax.c:172-173 */
						break
					:: else
					fi
				od;
				if
				:: rc == ENOMEM && !(flags & FORCE) ->
					/* atmax.c:164-166; no false -ENOMEM: the host's units
					 * that A's callback may not free leave no room */
					assert(!(quiet && gen == mygen) ||
					       hu_sub(failg) - (hu[A] - minv[A]) + (amt) > maxv[failg])
				:: rc == ENOMEM && (flags & FORCE) ->
					force_room(g, amt); /* atmax.c:168 */
					counter_try(g, amt, 1, rc, failg); /* atmax.c:170 */
					lcl[g] = lcl[g] + (amt);
					atomic {
						hu[g] = hu[g] + (amt);
						p = g;
						do
						:: p == NONE -> break
						:: else ->
							if
							:: count[p] > maxv[p] ->
								/* only real usage is over max */
								assert(!(quiet && gen == mygen) || hu_sub(p) > maxv[p])
							:: else
							fi;
							p = parent(p)
						od;
						p = 0;
						hu[g] = hu[g] - (amt)
					}
				:: else
				fi;
				dr = 0;
				idle = 0;
				waits = 0;
				seen = 0
			fi
		fi
	fi;
	if
	:: rc == OK -> atomic { hu[g] = hu[g] + (amt) }
	:: else
	fi;
	op_end()
}

/* tree.c:sl_group_destroy:242-300 */
inline destroy(g, rc)
{
	op_begin();
	do /* tree.c:260-267 wait for the pins */
	:: lock(tlock);
		if
		:: pins[g] == 0 -> break
		:: else -> unlock(tlock)
		fi
	od;
	drain_group(g, du); /* tree.c:272 */
	quiesce(); /* tree.c:273 */
	if
	:: lcl[g] || count[g] -> rc = EBUSY /* tree.c:274-275 */
	:: else ->
		dead[g] = 1;
		rc = OK
	fi;
	unlock(tlock);
	op_end()
}

proctype thread(byte me)
{
	THREAD_LOCALS;
	byte dr, idle, waits, seen, rf, cnt, mx, top, target, freed, before, after, want, ret, rc2, n, usage, nrc;
	bit retry, pinned;

	if
	:: me == 0 -> charge(R, 1, FORCE, rc)
	:: me == 1 -> charge(R, 1, 0, rc)
	:: me == 2 ->
		charge(B, 1, NORECLAIM, rc);
		if
		:: rc == OK ->
			op_begin();
			uncharge(me, B, 1, rc);
			assert(rc == OK);
			op_end()
		:: else
		fi;
		destroy(B, rc);
		assert(rc == OK) /* B is empty: nothing keeps it */
	fi;
	op_begin();
	stock_release(me);
	op_end();
	done++
}

active proctype monitor()
{
end:
	atomic {
		!(count[R] - win[R] <= maxv[R] + forced[R]) -> assert(false)
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
		maxv[R] = 3;
		maxv[A] = UNLIMITED;
		maxv[B] = UNLIMITED;
		minv[A] = 1;
		has_callback[A] = 1;
		/* the host holds 2 units of A */
		hu[A] = 2;
		lcl[A] = 2;
		count[A] = 2;
		count[R] = 2;
		i = 0;
		do
		:: i == NT -> break
		:: else ->
			run thread(i);
			i++
		od
	}
	done == NT;
	assert(count[A] == hu[A] && count[B] == hu[B] && count[R] == hu[R] + hu[A] + hu[B]);
	assert(lcl[A] == hu[A] && lcl[B] == hu[B] && lcl[R] == hu[R]);
	assert(claimed[R] == 0 && claimed[A] == 0 && pins[A] == 0 && pins[B] == 0 && dead[B]);
	assert(reglock == 0 && tlock == 0 && claimlock == 0 && reclaimers == 0)
}
