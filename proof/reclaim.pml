/* SPDX-License-Identifier: MIT */
/*
 * Concurrent reclaim at max, as lib/ has it now: the at-max sequence of
 * atmax.c (own stock first, reclaim for the need plus a batch served by
 * pass 1 only, other threads' idle units only in a round without progress,
 * a bounded number of such rounds, then -ENOMEM or SL_FORCE), the engine of
 * reclaim.c (one callback per group at a time, claims under claim_lock that
 * read claimed before usage), GUARANTEE's pass 1 (victims.c,
 * policy_guarantee.c) and pass 2 (proportional.c), pins against
 * sl_group_destroy() (tree.c), and the room handed to the charger through a
 * stock refill.  Every step names file:function:line of the C code.
 *
 * Configurations (the tree R with children A, which has a reclaim callback
 * and min 1, and B, which has none; the host holds 2 units of A):
 *
 * -DCFG_PAIR: R max 2, so both charges start at max and reclaim A at once.
 *     thread 0  charges 1 unit to R with SL_FORCE; with -DREENTRANT its A
 *               callback also charges 1 unit of A (SL_NORECLAIM, as any
 *               charge inside a callback), which may refill its stock;
 *     thread 1  charges 1 unit to R (may reclaim).
 * -DCFG_DESTROY: R max 3.
 *     thread 0  charges 1 unit to R (may reclaim; -DREENTRANT as above);
 *     thread 1  charges 1 unit to B (SL_NORECLAIM), uncharges it, destroys
 *               B while thread 0's reclaims may hold B pinned.
 * (default) R max 3, three threads: thread 0 and thread 1 of CFG_PAIR and
 *   thread 1 of CFG_DESTROY.  Too large to check in minutes (more than 60 M
 *   states unfinished); the two configurations above split its roles.
 * -DCFG_CLAIM_REFILL: R unlimited, A min 2, the host holds 3 units of A.
 *   Thread 0 calls sl_reclaim(R, 3); thread 1 charges 1 unit to A
 *   (SL_NORECLAIM) through a stock refill, then exits.  It failed on the
 *   code before ecd6ef4 (claim() took usage and the stocks' units at two
 *   different times; MUTANT_USAGE_SPLIT puts that back, proof/README.md).
 *   With -DCLAIM_KEEP thread 1 charges 3 units instead, then uncharges 2:
 *   the second uncharge finds its slot at the cap and keeps its unit,
 *   which gives all but a batch back (stock.c:306-330) while thread 0's
 *   claims read A's usage (MUTANT_KEEP_NO_TRANSIT: without the transit).
 * -DCFG_OOM: R max 2, A min 2, the host holds 2 units of A, so no reclaim
 *   can make room.
 *     thread 0  charges 1 unit to R with SL_FORCE: every round makes no
 *               progress, then its OOM handler runs (-DOOM, below);
 *     thread 1  charges 1 unit to B (SL_NORECLAIM), uncharges it.
 *
 * What this model leaves out (beyond softlimit.pml's list), and
 * abstractions:
 *  - either stock protocol (-DFENCE as in stock.pml); the FENCE handover
 *    (asks and answers) never runs here: no thread folds another's ledger
 *    (stock.pml's CFG_HANDOFF checks it);
 *  - background reclaim, high and sl_handle_over_high(), the PROTECTION and
 *    GATEKEEPER policies, refault ranks, events and step floors other than
 *    min;
 *  - the policy is GUARANTEE with soft 0 everywhere, so every group with a
 *    count is an over-soft candidate; pass 1 asks A for its own charges,
 *    pass 2 asks A for what it holds above min.  B has no callback and is
 *    never asked (reclaim.c:172), but both passes pin it;
 *  - RETRIES rounds without progress (atmax.c:13: 16, as proof/check.sh
 *    runs it; the default 2 suffices for the no-false-ENOMEM property,
 *    which looks only at charges that ran alone: alone, the first round
 *    without progress ends in a drain of every stock (atmax.c:149), after
 *    which nothing changes but what this charge does); WAIT_ROUNDS (4096
 *    in atmax.c:15; check.sh: 4) and PROP_ROUNDS (proportional.c:12: 8,
 *    as check.sh runs it), default 1 each;
 *  - an uncharge inside a callback or the OOM handler keeps nothing in the
 *    stock (sl__tls_in_reclaim: the thread-local inrec here); other
 *    uncharges may (softlimit.pml: stock_keep);
 *  - the OOM handler only with -DOOM (CFG_OOM sets it): thread 0's may
 *    free the host's units of A, charge a unit of A, and decline or ask
 *    again (ask_oom_handler() below); without it, none (atmax.c:52-53);
 *  - reclaim_batch is SL_RECLAIM_BATCH_DEFAULT, but atmax.c:36 caps it at
 *    max / 16, which is 0 for these maxes, so target == must.
 *
 * Properties:
 *   - min: a callback is never asked to take its group below min: after it
 *     frees, the host's units of the group and those of charges to it in
 *     flight (counted as the host's from the charge's start: a generous
 *     reading) are at least min (softlimit.h, sl_reclaim(): "callbacks that
 *     free at most what they are asked keep every min exact"; the model's
 *     callback frees exactly what it is asked);
 *   - a forced charge passes only maxes that the host's units (with the
 *     forced ones) are over, when no other call ran during it;
 *   - an unforced charge fails with -ENOMEM only if the host's units that
 *     no callback may free leave no room (all of them with SL_NORECLAIM),
 *     when no other call ran during it and its callback does not charge
 *     back what it frees (softlimit.h, sl_charge(): it fails only when
 *     reclaim cannot make progress, and other threads' stocks are drained
 *     before failing);
 *   - (CFG_CLAIM_REFILL) a usage read (sl__stock_usage) counts no stock's
 *     units as the host's: it is at most the host's units, those of
 *     charges in flight and those of uncharges in flight at the read or
 *     begun since (they are in the count until they cancel or keep them;
 *     with them, the min property above counts the host's own frees since
 *     the read, which the claim could not know of);
 *   - a reclaim never touches a destroyed group; destroy of the empty B
 *     succeeds; every claim, pin and callback turn is given back;
 *   - the monitor of stock.pml (a max never passed by an unforced charge);
 *   - at the end, counters and host units agree; no deadlock.
 */
#if defined(CFG_CLAIM_REFILL) || defined(CFG_PAIR) || defined(CFG_DESTROY) || defined(CFG_OOM)
#define NT 2
#endif
#ifdef CFG_OOM
#define OOM
#endif
/* reclaim.c:27 sl__tls_in_reclaim, a thread's own: raised around a reclaim
 * callback (reclaim.c:184-186) and the OOM handler (atmax.c:54-56); an
 * uncharge inside keeps nothing in the stock (stock.c:289) */
#define IN_RECLAIM inrec
#ifdef CFG_CLAIM_REFILL
/* the host's uncharges of g, counted when they start and when they return
 * (hfree, hdone below) */
#define UNCHARGE_GHOST_BEGIN(g, amt) ; hfree[g] = hfree[g] + (amt)
#define UNCHARGE_GHOST_END(g, amt) ; hdone[g] = hdone[g] + (amt)
#endif
#include "softlimit.pml"

#ifndef RETRIES
#define RETRIES 2	/* atmax.c:13 SL__RECLAIM_RETRIES is 16 */
#endif
#ifndef WAIT_ROUNDS
#define WAIT_ROUNDS 1	/* atmax.c:15 SL__WAIT_ROUNDS is 4096 */
#endif
#ifndef PROP_ROUNDS
#define PROP_ROUNDS 1	/* proportional.c:12 PROPORTIONAL_ROUNDS is 8 */
#endif
#define RECLAIM_BATCH 250	/* tree.c:31 SL_RECLAIM_BATCH_DEFAULT (131072), capped below */

byte claimed[NG];	/* internal.h sl_group.claimed */
byte pins[NG];
bit incb[NG];		/* internal.h sl_group.in_callback */
bit dead[NG];
byte progress;		/* internal.h sl_tree.progress */
byte reclaimers;
bit tlock;		/* tree.c: t->lock and t->index_lock, taken together */
bit claimlock;		/* internal.h sl_tree.claim_lock */
bit has_callback[NG];
byte pend[NG];		/* ghost: units of charges to g in flight */
#ifdef CFG_CLAIM_REFILL
/* ghosts: units of g the host's uncharges freed, counted at their start
 * (hfree) and at their return (hdone).  A usage read counts the units of
 * an uncharge in flight (in the count until it cancels or keeps them), so
 * the units freed by uncharges not done at the read (hfree now less hdone
 * then, kd0) are what it may count beyond what the host holds now. */
byte hfree[NG];
byte hdone[NG];
#define FREED_SINCE(g) (hfree[g] - kd0)
#define FREED_DONE(g) hdone[g]
#else
#define FREED_SINCE(g) 0
#define FREED_DONE(g) 0
#endif

/* This thread's A callback charges back what it frees (REENTRANT): its
 * reclaims make no progress (reclaim.c:177, :187, :190-193 measure own
 * charges), and
 * a charge that fails after rounds without progress keeps the rule of
 * softlimit.h's sl_charge() ("or the callbacks freed nothing"), so the
 * no-false-ENOMEM check does not apply to it. */
#ifdef REENTRANT
#define recharges (me == 0)
#else
#define recharges 0
#endif

#define FORCE 2
#define NORECLAIM 1

/* A charge starts (ghost): op_begin() and the units it will hand out. */
inline charge_begin(g, amt)
{
	atomic {
		busy++;
		gen++;
		quiet = (busy == 1);
		mygen = gen;
		pend[g] = pend[g] + (amt)
	}
}

/*
 * stock_take.c:sl__stock_usage:371-394: the host's usage of top's subtree, the
 * count less the units that stocks hold, read under the registry lock with
 * every transit (a refill or a rebind) kept out (transit_begin()).  Each
 * slot is read in its own step: fast paths go on meanwhile.
 */
inline stock_usage(top, u)
{
#ifdef MUTANT_USAGE_SPLIT
	/* the bug before this fix: the count outside the registry lock, and
	 * no transit kept out */
	atomic {
		u = count[top];
		kd0 = FREED_DONE(top)
	}
	lock(reglock);
#else
	lock(reglock); /* stock_take.c:381 */
	usage_reads = 1; /* stock_take.c:384 */
	s = 0;
	do /* stock_take.c:385 quiesce_locked() */
	:: s == NT -> break
	:: else ->
		inflight[s] == 0; /* stock_take.c:98 wait */
		s++
	od;
	atomic {
		u = count[top]; /* stock_take.c:386 */
		kd0 = FREED_DONE(top)
	}
#endif
	n = 0;
	s = 0;
	do /* stock_take.c:387 scan_locked() */
	:: s == NT -> break
	:: else ->
		atomic {
			if
			:: sgroup[s] != NONE && is_ancestor(top, sgroup[s]) -> n = n + sunits[s]
			:: else
			fi;
			s++
		}
	od;
	s = 0;
	u = u - min2(u, n); /* stock_take.c:392-393 */
#ifdef CFG_CLAIM_REFILL
	/* a usage read counts no stock's units as the host's: no more than
	 * the host holds, charges in flight and the units of uncharges that
	 * were in flight at the read or began since */
	assert(u <= hu[top] + pend[top] + FREED_SINCE(top));
#endif
	n = 0;
	usage_reads = 0; /* stock_take.c:388 */
	unlock(reglock) /* stock_take.c:389 */
}

/* stock_take.c:sl__stock_drain_mine:285-295: take this thread's own slot if it
 * is bound in top's subtree (only its owner or a taker under the registry
 * lock, which we hold, writes it: one step). */
inline drain_mine(top, du)
{
	du = 0;
	lock(reglock); /* stock_take.c:291 */
	atomic {
		if
		:: sgroup[me] != NONE && is_ancestor(top, sgroup[me]) ->
			tu = sunits[me];
			tl = sledger[me];
			sunits[me] = 0;
			sledger[me] = 0
		:: else
		fi
	}
	if
	:: tu || tl ->
		sg = sgroup[me];
		slot_flush(sg, tu, tl); /* stock_take.c:292, stock_take.c:take_slot:174-177 */
		du = tu;
		sg = 0;
		tu = 0;
		tl = 0
	:: else
	fi;
	unlock(reglock) /* stock_take.c:293 */
}

/* reclaim.c:sl__own_of:41-44: local plus this thread's ledger
 * (stock_take.c:sl__stock_my_ledger:410-415) */
#define own_of(g) (lcl[g] + (sgroup[me] == g -> sledger[me] : 0))

/*
 * A charge inside a callback: charge.c:sl_charge:42-73 (fast path),
 * sl__charge_slow:30-32 (refill), charge_exact:13-18, and sl__at_max() with
 * SL_NORECLAIM: atmax.c:114-117 drains the subtree of the group in the way
 * and retries (:165-169) if that gave units back, else :123-124 gives up.
 */
inline nested_charge(g, amt)
{
	atomic { pend[g] = pend[g] + (amt) }
	charge_fast(me, g, amt, nrc);
	if
	:: nrc == OK -> skip
	:: else ->
		stock_refill(me, g, amt, nrc);
		if
		:: nrc == 0 -> skip
		:: else ->
			counter_try(g, amt, 0, nrc, nfail);
			if
			:: nrc == OK -> lcl[g] = lcl[g] + (amt) /* charge.c:17-18 */
			:: else ->
				drain_subtree(nfail, du); /* atmax.c:116 */
				if
				:: du ->
					stock_refill(me, g, amt, nrc); /* atmax.c:165 */
					if
					:: nrc == 0 -> skip
					:: else ->
						counter_try(g, amt, 0, nrc, nfail); /* atmax.c:167 */
						if
						:: nrc == OK -> lcl[g] = lcl[g] + (amt) /* atmax.c:180-181 */
						:: else
						fi
					fi
				:: else
				fi
			fi
		fi
	fi;
	atomic {
		if
		:: nrc == OK -> hu[g] = hu[g] + (amt)
		:: else
		fi;
		pend[g] = pend[g] - (amt)
	}
	nrc = 0;
	nfail = 0;
	du = 0
}

/* reclaim.c:claim:88-125 (step floors: none, soft is 0) */
inline claim(g, want)
{
	lock(claimlock); /* reclaim.c:94 */
	p = g;
	do /* reclaim.c:95 up to the scope (R) */
	:: p == NONE || want == 0 -> break
	:: else ->
		if
		:: minv[p] -> /* reclaim.c:98-103: min_on_path */
#ifdef MUTANT_CLAIM_ORDER
			/* the order before c871bc1: usage, then claimed (caught
			 * only with MUTANT_NO_CALLBACK_TURNS too: with turns no
			 * other claim on A comes and goes during ours) */
			stock_usage(p, usage); /* reclaim.c:115 */
			taken = claimed[p] + minv[p]; /* reclaim.c:110 */
#else
			taken = claimed[p] + minv[p]; /* reclaim.c:110 claimed first */
			stock_usage(p, usage); /* reclaim.c:115 then usage */
#endif
			want = min2(want, (usage > taken -> usage - taken : 0)) /* reclaim.c:116 */
		:: else
		fi;
		p = parent(p)
	od;
	if
	:: want -> /* reclaim.c:120-122 */
		q = g;
		do
		:: q == NONE -> break
		:: else ->
			claimed[q] = claimed[q] + want;
			q = parent(q)
		od
	:: else
	fi;
	unlock(claimlock); /* reclaim.c:123 */
	p = 0;
	q = 0;
	n = 0;
	usage = 0;
	taken = 0
}

#ifdef MUTANT_NO_CALLBACK_TURNS
/* before ef74639: callbacks of one group run on several threads at once */
#define cb_begin(g) skip
#define cb_end(g) skip
#else
#define cb_begin(g) lock(incb[g])
#define cb_end(g) unlock(incb[g])
#endif

/* reclaim.c:sl__reclaim_group:167-203 for a group the caller pinned,
 * asked for ask units (floor 0: the min on the path is claim()'s). */
inline reclaim_group(g)
{
	if
	:: freed >= target || !has_callback[g] -> skip /* reclaim.c:172-173 */
	:: else ->
		assert(!dead[g]); /* pinned: never freed under us */
		cb_begin(g); /* reclaim.c:174 callback_begin():146-156 */
		before = own_of(g); /* reclaim.c:177 */
		want = min2(min2(ask, target - freed), before); /* reclaim.c:178 */
		if
		:: want -> claim(g, want) /* reclaim.c:179 */
		:: else
		fi;
		if
		:: want ->
			inrec = 1; /* reclaim.c:184 */
			/* reclaim.c:185 the host's callback: it frees what it
			 * holds of g, up to want, through sl_uncharge() */
			ret = min2(want, hu[g]);
			/* min is never reclaimed (the host's own uncharges since
			 * the claim's usage read aside: FREED_SINCE) */
			assert(hu[g] + pend[g] + FREED_SINCE(g) - ret >= minv[g]);
			if
			:: ret ->
				uncharge(me, g, ret, rc2);
				assert(rc2 == OK)
			:: else
			fi;
#ifdef REENTRANT
			if
			:: me == 0 -> nested_charge(g, 1) /* the callback allocates */
			:: else
			fi;
#endif
			inrec = 0; /* reclaim.c:186 */
			after = own_of(g); /* reclaim.c:187 */
			q = g; /* reclaim.c:188 unclaim():130-137 */
			do
			:: q == NONE -> break
			:: else ->
				claimed[q] = claimed[q] - want;
				q = parent(q)
			od;
			cb_end(g); /* reclaim.c:189 callback_end():158-161 */
			/* reclaim.c:190-201 measured progress */
			got = min2(ret, (before > after -> before - after : 0));
			if
			:: got ->
				progress = progress + got; /* reclaim.c:197 */
				freed = freed + got /* reclaim.c:201 */
			:: else
			fi
		:: else ->
			cb_end(g) /* reclaim.c:180 */
		fi
	fi;
	before = 0;
	after = 0;
	want = 0;
	ret = 0;
	got = 0;
	rc2 = 0;
	ask = 0
}

/* proportional.c:sl__proportional:144-150, a round's start: refresh and
 * rec.  Only A can give (R and B have no callback, so own 0: :79); rec(A)
 * is what it holds, at most its usage, above its min (:80-81, :93-95).
 * take_subtree(R):102-128 gives R's own share, 0, to R (:122, no
 * callback: reclaim.c:172) and A all the rest (:121, split.c: a part of
 * weight 0 gets nothing); take_subtree(A) asks A (:122). */
inline prop_round_ask()
{
	if
	:: prd < PROP_ROUNDS && pgot < pamt && freed < target -> /* :144 */
		ua = count[A];
		ask = min2(own_of(A), ua);
		ask = min2(ask, (ua > minv[A] -> ua - minv[A] : 0));
		ask = min2(pamt - pgot, ask);
		ua = 0;
		pfreed = freed
	:: else -> ask = 0
	fi
}

/*
 * reclaim.c:sl__reclaim:216-232 with GUARANTEE (policy_guarantee.c:58-61:
 * victims.c:sl__reclaim_by_excess:167-184): the scope's own charges, pass
 * 1 over the candidates, then pass 2 (proportional.c:sl__proportional:
 * 134-158).  Every ask of A goes through the one reclaim_group() below
 * (ph 1: pass 1, ph 2: pass 2's rounds), which keeps the model small.
 */
inline reclaim(scope, tgt, mst, drn)
{
	reclaimers++; /* reclaim.c:221 */
	target = tgt;
	must = mst;
	freed = 0;
	if
	:: drn -> drain_subtree(scope, du) /* reclaim.c:226-227 */
	:: else
	fi;
	/* victims.c:172 the scope's own charges: R has no callback
	 * (reclaim.c:172) */
	ask = 0;
	if
	:: freed < target -> /* victims.c:173 */
		/* victims.c:174 sl__over_collect() under the index lock
		 * (overindex.c:collect:118-149): the groups in the scope but the
		 * scope with count > soft (0), pinned (victims.c:add_cand:28) */
		lock(tlock);
		cand_a = !dead[A] && count[A] > 0;
		cand_b = !dead[B] && count[B] > 0;
		if
		:: cand_a -> pins[A]++
		:: else
		fi;
		if
		:: cand_b -> pins[B]++
		:: else
		fi;
		unlock(tlock);
		/* policy_guarantee.c:pass1:47-56 (victims.c:victims_next:
		 * 125-160): A's excess is its own charges (victims.c:excess_of:
		 * 50-51, soft 0), B's is 0 (no callback) */
		if
		:: cand_a ->
			ask = own_of(A);
			if
			:: ask ->
				/* policy_guarantee.c:53 and shrink:29 */
				ask = min2(ask, target - freed);
				ask = min2(own_of(A), ask)
			:: else
			fi
		:: else
		fi
	:: else
	fi;
	ph = 1;
	do
	:: /* pass 1: shrink():29 (floor soft 0, so :30-31 goto out); pass 2:
	    * proportional.c:122 in take_subtree(A) */
		if
		:: ask -> reclaim_group(A)
		:: else
		fi;
		if
		:: ph == 1 ->
			/* victims.c:180 victims_release():34-41 */
			if
			:: cand_a -> pins[A]--
			:: else
			fi;
			if
			:: cand_b -> pins[B]--
			:: else
			fi;
			cand_a = 0;
			cand_b = 0;
			/* victims.c:182 sl__pass2_begin(): reclaim.c:236-241 */
			if
			:: target > must -> target = (must > freed -> must : freed)
			:: else
			fi;
			if
			:: freed < target -> /* victims.c:182-183 */
				pamt = target - freed;
				/* proportional.c:141 sl__snapshot():27-58
				 * pins every group under the topology lock */
				lock(tlock);
				pins[R]++;
				pins[A]++; /* A is never destroyed */
				snapb = !dead[B];
				if
				:: snapb -> pins[B]++
				:: else
				fi;
				unlock(tlock);
				ph = 2;
				prop_round_ask()
			:: else -> break
			fi
		:: ph == 2 && ask && freed != pfreed ->
			pgot = pgot + freed - pfreed; /* proportional.c:154 */
			prd++;
			prop_round_ask()
		:: else -> break /* proportional.c:107-109, :144, :152-153 */
		fi;
		if
		:: ph == 2 && ask == 0 -> break
		:: else
		fi
	od;
	if
	:: ph == 2 ->
		/* proportional.c:156 sl__snapshot_free():63-70 */
		pins[R]--;
		pins[A]--;
		if
		:: snapb -> pins[B]--
		:: else
		fi
	:: else
	fi;
	ph = 0;
	snapb = 0;
	pamt = 0;
	pgot = 0;
	prd = 0;
	pfreed = 0;
	reclaimers--; /* reclaim.c:230 */
	target = 0;
	must = 0;
	du = 0
}

/* atmax.c:reclaim_for_charge:23-38 */
inline reclaim_for_charge(at, need, rf)
{
	cnt = count[at]; /* atmax.c:29 */
	mx = maxv[at]; /* atmax.c:30 */
	if
	:: mx >= need && cnt <= mx - need -> rf = 1 /* atmax.c:31-32 */
	:: need > mx -> rf = 0 /* atmax.c:33-34 */
	:: else ->
		/* atmax.c:36-37 the batch (at most max / 16) for pass 1 only */
		reclaim(at, cnt - (mx - need) + min2(RECLAIM_BATCH, mx / 16), cnt - (mx - need), 0);
		rf = freed
	fi;
	cnt = 0;
	mx = 0
}

/*
 * atmax.c:ask_oom_handler:41-58.  Without -DOOM the tree has no handler
 * (:52-53: declined).  With it, thread 0's handler (run with
 * sl__tls_in_reclaim raised, :54-56, so its charges never reclaim) may free
 * what the host holds of A (through sl_uncharge()), may then charge a unit
 * of A (which may refill the thread's stock: the units of a batch that a
 * forced charge must not count as usage), and declines or asks for one
 * more try: any of the eight.
 */
inline ask_oom_handler(again)
{
	again = 0;
#ifdef OOM
	if
	:: me == 0 ->
		inrec = 1; /* atmax.c:54 */
		if
		:: hu[A] ->
			ret = hu[A];
			uncharge(me, A, ret, rc2);
			assert(rc2 == OK);
			ret = 0;
			rc2 = 0
		:: true
		fi;
		if
		:: nested_charge(A, 1)
		:: true
		fi;
		if
		:: again = 0
		:: again = 1
		fi;
		inrec = 0 /* atmax.c:56 */
	:: else
	fi
#endif
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
		:: count[p] + (amt) > maxv[p] -> top = p /* atmax.c:71-74 */
		:: else
		fi;
		p = parent(p)
	od;
#ifdef MUTANT_FORCE_NO_DRAIN
	/* the bug (before 7c95736): no drain where the charge drained before.
	 * Caught with the OOM handler (CFG_OOM): it may charge through a
	 * refill after the last drain, then decline; without it every way
	 * out of the loop follows a drain of the subtree (proof/README.md). */
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
	p = 0;
	du = 0
}

/* atmax.c:sl__at_max:92-183; rc in: -ENOMEM from
 * charge_exact(), failg the group in the way. */
inline at_max(g, amt, flags, rc)
{
	mayr = !((flags) & NORECLAIM); /* atmax.c:95 */
	dr = NONE; /* atmax.c:98 */
	idle = 0;
	waits = 0;
	do /* atmax.c:102 */
	:: retry = 0;
		if
		:: dr == NONE || !is_ancestor(dr, failg) -> /* atmax.c:114 */
			dr = failg;
			if /* atmax.c:116 */
			:: mayr -> drain_mine(failg, du)
			:: else -> drain_subtree(failg, du)
			fi;
			retry = (du != 0);
			du = 0
		:: else
		fi;
		if
		:: retry -> skip /* atmax.c:117 */
		:: !retry && !mayr -> break /* atmax.c:123-124 */
		:: !retry && mayr && idle >= RETRIES && oomasked -> break /* atmax.c:154-155 */
		:: !retry && mayr && idle >= RETRIES && !oomasked ->
			oomasked = 1; /* atmax.c:156 */
			ask_oom_handler(again); /* atmax.c:157 */
			if
			:: !again -> break /* atmax.c:157-158 */
			:: else
			fi;
			idle = 0; /* atmax.c:159 */
			dr = NONE /* atmax.c:160 */
		:: !retry && mayr && idle < RETRIES ->
			seen = progress; /* atmax.c:126 */
#ifndef MUTANT_FORCE_NO_DRAIN
			dr = NONE; /* atmax.c:131 */
#endif
			reclaim_for_charge(failg, amt, rf); /* atmax.c:132 */
			if
			:: rf -> idle = 0 /* atmax.c:133 */
			:: !rf && progress != seen -> idle = 0 /* atmax.c:136-138 */
			:: !rf && progress == seen && reclaimers && waits < WAIT_ROUNDS ->
				waits++ /* atmax.c:140-144 */
			:: else ->
				idle++; /* atmax.c:148 */
				drain_subtree(failg, du); /* atmax.c:149 */
				du = 0
			fi;
			rf = 0
		fi;
		/* atmax.c:161-169 retry: a refill first, then exactly */
		if
		:: (amt) <= BATCH -> stock_refill(me, g, amt, rc)
		:: else -> rc = 1
		fi;
		if
		:: rc == 0 -> /* atmax.c:165-166 */
			viastock = 1;
			break
		:: else
		fi;
		counter_try(g, amt, 0, rc, failg); /* atmax.c:167 */
		if
		:: rc != ENOMEM -> break /* atmax.c:168-169 */
		:: else
		fi
	od;
	if
	:: rc == ENOMEM && !((flags) & FORCE) ->
		/* atmax.c:171-174; no false -ENOMEM: the host's units leave
		 * no room, those that A's callback may free aside unless the
		 * charge may not reclaim (SL_NORECLAIM: "fail at once") */
		assert(!(quiet && gen == mygen) || recharges ||
		       hu_sub(failg) - (mayr -> hu[A] - minv[A] : 0) + (amt) > maxv[failg])
	:: rc == ENOMEM && ((flags) & FORCE) ->
		force_room(g, amt); /* atmax.c:176 */
		counter_try(g, amt, 1, rc, failg); /* atmax.c:178 */
		lcl[g] = lcl[g] + (amt); /* atmax.c:180-181 */
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
	:: rc == OK && !viastock -> lcl[g] = lcl[g] + (amt) /* atmax.c:180-181 */
	:: else
	fi;
	if
	:: viastock -> rc = OK
	:: else
	fi;
	viastock = 0;
	oomasked = 0;
	again = 0;
	mayr = 0;
	dr = 0;
	idle = 0;
	waits = 0;
	seen = 0;
	retry = 0
}

/* sl_charge(): charge.c:sl_charge:42-73 (fast path), sl__charge_slow:22-34
 * (a refill), charge_exact:10-20, then atmax.c:sl__at_max(). */
inline charge(g, amt, flags, rc)
{
	charge_begin(g, amt);
	charge_fast(me, g, amt, rc);
	if
	:: rc == OK -> skip
	:: else ->
		if
		:: (amt) <= BATCH -> stock_refill(me, g, amt, rc) /* charge.c:30-32 */
		:: else -> rc = 1
		fi;
		if
		:: rc == 0 -> skip
		:: else ->
			counter_try(g, amt, 0, rc, failg); /* charge.c:13 */
			if
			:: rc == OK -> lcl[g] = lcl[g] + (amt) /* charge.c:17-18 */
			:: else -> at_max(g, amt, flags, rc) /* charge.c:15-16 */
			fi
		fi
	fi;
	atomic {
		if
		:: rc == OK -> hu[g] = hu[g] + (amt)
		:: else
		fi;
		pend[g] = pend[g] - (amt)
	}
	op_end()
}

/* tree.c:sl_group_destroy:247-308 */
inline destroy(g, rc)
{
	op_begin();
	/* tree.c:265-273 wait for the pins under both locks (a spinning wait
	 * is a blocking guard) */
	atomic { tlock == 0 && pins[g] == 0 -> tlock = 1 }
	drain_group(g, du); /* tree.c:279 */
	quiesce(); /* tree.c:280 */
	if
	:: lcl[g] || count[g] -> rc = EBUSY /* tree.c:281-282 */
	:: else ->
		dead[g] = 1; /* tree.c:304-306 */
		rc = OK
	fi;
	unlock(tlock);
	du = 0;
	op_end()
}

proctype thread(byte me)
{
	THREAD_LOCALS;
	byte dr, idle, waits, seen, rf, cnt, mx, top, target, must, freed, before, after, want, ret, rc2, n, usage, nrc, nfail;
	byte ask, ua, pamt, pgot, prd, pfreed;
	byte cg, cfl, ph;
	bit retry, mayr, viastock, cand_a, cand_b, snapb, oomasked, again, inrec;
	byte kd0, k;

	/* what this thread charges (one charge() below for every role: the
	 * inlines are large) */
#if defined(CFG_CLAIM_REFILL)
	cg = A;
	cfl = NORECLAIM;
#elif defined(CFG_PAIR)
	cg = R;
	cfl = (me == 0 -> FORCE : 0);
#elif defined(CFG_DESTROY) || defined(CFG_OOM)
	cg = (me == 0 -> R : B);
#ifdef CFG_OOM
	cfl = (me == 0 -> FORCE : NORECLAIM);
#else
	cfl = (me == 0 -> 0 : NORECLAIM);
#endif
#else
	cg = (me == 2 -> B : R);
	cfl = (me == 0 -> FORCE : (me == 1 -> 0 : NORECLAIM));
#endif
#ifdef CFG_CLAIM_REFILL
	if
	:: me == 0 ->
		/* sl_reclaim(R, 3): reclaim.c:243-248 */
		op_begin();
		reclaim(R, 3, 3, 1);
		op_end()
	:: else ->
#ifdef CLAIM_KEEP
		/* three charges (two refills: the slot's units and ledger hold
		 * 4), then two uncharges: the first fills the slot to its cap
		 * (fast path), the second finds it full and keeps its unit:
		 * past the cap, all but a batch go back */
		do
		:: k == 3 -> break
		:: else ->
			charge(cg, 1, cfl, rc);
			k++
		od;
		k = 0;
		do
		:: k == 2 -> break
		:: else ->
			op_begin();
			uncharge(me, A, 1, rc);
			assert(rc == OK);
			op_end();
			k++
		od;
		k = 0
#else
		charge(cg, 1, cfl, rc)
#endif
	fi;
#else
	charge(cg, 1, cfl, rc);
	if
	:: cg == B ->
		if
		:: rc == OK ->
			op_begin();
			uncharge(me, B, 1, rc);
			assert(rc == OK);
			op_end()
		:: else
		fi;
#ifndef CFG_OOM
		destroy(B, rc);
		assert(rc == OK) /* B is empty: nothing keeps it */
#else
		skip
#endif
	:: else
	fi;
#endif
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
		maxv[A] = UNLIMITED;
		maxv[B] = UNLIMITED;
		has_callback[A] = 1;
#ifdef CFG_CLAIM_REFILL
		maxv[R] = UNLIMITED;
		minv[A] = 2;
		hu[A] = 3;
#elif defined(CFG_OOM)
		maxv[R] = 2; /* thread 0's charge starts at max */
		minv[A] = 2; /* and no reclaim can make room */
		hu[A] = 2;
#elif defined(CFG_PAIR)
		maxv[R] = 2; /* both charges start at max */
		minv[A] = 1;
		hu[A] = 2;
#else
		maxv[R] = 3;
		minv[A] = 1;
		hu[A] = 2;
#endif
		lcl[A] = hu[A];
		count[A] = hu[A];
		count[R] = hu[A];
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
	assert(claimed[R] == 0 && claimed[A] == 0 && pins[R] == 0 && pins[A] == 0 && pins[B] == 0);
	assert(incb[A] == 0 && reglock == 0 && tlock == 0 && claimlock == 0 && reclaimers == 0);
#if !defined(CFG_CLAIM_REFILL) && !defined(CFG_PAIR) && !defined(CFG_OOM)
	assert(dead[B])
#endif
}
