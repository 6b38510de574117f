/* SPDX-License-Identifier: MIT */
/*
 * softlimit's counters, per-thread stocks and uncharge path in Promela,
 * shared by stock.pml and reclaim.pml.  Each inline follows one C function
 * step by step; a comment names file:function:line for every step.  One
 * Promela statement (or atomic block) is one C atomic access or one step
 * under a lock: SPIN interleaves the threads at every such step.
 *
 * What the model leaves out, and why that is sound for these properties:
 *  - memory order: SPIN's interleavings are sequentially consistent, so the
 *    model checks the protocol, not the acquire/release choices (TSan and
 *    the torture test do that);
 *  - a weak CAS loop is one atomic step (the iteration that succeeds; the
 *    failed ones change nothing), and spinning waits (quiesce, destroy's
 *    pins) are blocking guards, so a wait that never ends is a deadlock;
 *  - one slot per thread (SL__STOCK_SLOTS is 8; eviction is the same
 *    rebind as a first bind), no ledger overflow (SL__LEDGER_MAX is 2^22),
 *    high unlimited, no peaks, events or over-soft index (they decide
 *    nothing here), every thread registered from the start;
 *  - the tree is fixed: group R (the root) and its children A and B.
 *
 * The mutants (spin -DMUTANT_...) put back a bug that was fixed; see
 * proof/README.md.
 */

#define R 0
#define A 1
#define B 2
#define NG 3
#define NONE 255
#define OK 0
#define ENOMEM 12
#define EINVAL 22
#define EBUSY 16
#define UNLIMITED 250

#ifndef NT
#define NT 3
#endif
#ifndef BATCH
#define BATCH 1
#endif
#define CAP (2 * BATCH)	/* stock.c:stock_bind:162 cap = 2 * batch */
#ifndef FOLD_ROUNDS
#define FOLD_ROUNDS 1	/* uncharge.c:13 SL__FOLD_ROUNDS is 2; any number is the same protocol */
#endif

#define parent(g) (g == R -> NONE : R)
/* group.c:sl__is_ancestor(): anc is g or above it */
#define is_ancestor(anc, g) (anc == g || anc == R)

/* ---- the groups (internal.h struct sl_group) ---- */
byte count[NG];		/* usage + stocked of the subtree: what max bounds */
byte lcl[NG];		/* host units charged to g itself, not in a ledger */
byte maxv[NG];
byte minv[NG];
byte checks[NG];	/* exact over-uncharge checks running on g */

/* ---- the stocks: one slot per thread (internal.h struct sl__slot) ----
 * sunits/sledger/stag are the three fields of the one atomic slot word;
 * every access to them is one atomic block. */
byte sgroup[NT];	/* NONE = unbound */
byte sunits[NT];
byte sledger[NT];
byte stag[NT];
bit inflight[NT];
bit reglock;		/* stock.c:34 registry_lock */
bit usage_reads;	/* stock.c:411 usage_reads: a usage read at work */

/* ---- ghosts: what the host holds, and what the properties need ---- */
byte hu[NG];		/* units the host holds charged to g itself */
byte win[NG];		/* charges between their CAS and their re-read of max */
bit stable[NG] = 1;	/* max is in force (cleared while set_limits lowers it) */
byte forced[NG];	/* units charged past max by SL_FORCE */
byte busy;		/* threads inside a library call */
byte gen;		/* bumped at every call's start and end */
byte done;		/* threads finished */

#define hu_sub(g) (g == R -> hu[R] + hu[A] + hu[B] : hu[g])
#define min2(a, b) (a < b -> a : b)

#define lock(l) atomic { l == 0 -> l = 1 }
#define unlock(l) l = 0

/* A library call starts / ends (ghost): quiet is true when no other thread
 * is inside one; gen tells whether any other call started or ended since. */
inline op_begin()
{
	atomic {
		busy++;
		gen++;
		quiet = (busy == 1);
		mygen = gen
	}
}
inline op_end()
{
	atomic {
		busy--;
		gen++
	}
}

/* counter.c:sl__counter_cancel:115-119 */
inline counter_cancel(g, amt)
{
	q = g;
	do
	:: q == NONE -> break
	:: else ->
		count[q] = count[q] - (amt); /* counter.c:118 fetch_sub */
		q = parent(q)
	od;
	q = 0
}

/*
 * counter.c:sl__counter_try:54-111.  rc: OK or ENOMEM; failg: the group in
 * the way.  Overflow (-EINVAL) cannot happen with these small numbers.
 */
inline counter_try(g, amt, force, rc, failg)
{
	p = g;
	rc = OK;
	do
	:: p == NONE -> break
	:: else ->
		do /* counter.c:65 again: */
		:: /* counter.c:66 lim = force ? UINT64_MAX : max (high unlimited: :67-72) */
			lim = (force -> UNLIMITED : maxv[p]);
			/* counter.c:73-82 the CAS loop: the iteration that succeeds
			 * checks cur + amount <= lim on the count it swaps */
			atomic {
				if
				:: count[p] + (amt) > lim -> rc = ENOMEM
				:: else ->
					count[p] = count[p] + (amt);
					cur = count[p];
					win[p] = win[p] + (force -> 0 : (amt));
					if /* ghost: what a forced charge puts past max */
					:: force && cur > maxv[p] -> forced[p] = cur - maxv[p]
					:: else
					fi
				fi
			}
			if
			:: rc != OK -> break
			:: else
			fi;
#ifdef MUTANT_SET_MAX
			/* the bug: no second look at max after the CAS */
			win[p] = win[p] - (force -> 0 : (amt));
			break
#else
			/* counter.c:83 re-read max, seq_cst */
			if
			:: !force && cur > maxv[p] ->
				/* counter.c:85 max fell under us: take this level back */
				atomic {
					count[p] = count[p] - (amt);
					win[p] = win[p] - (amt)
				}
				/* counter.c:86 goto again */
			:: else ->
				win[p] = win[p] - (force -> 0 : (amt));
				break
			fi
#endif
		od;
		if
		:: rc != OK -> break
		:: else
		fi;
		p = parent(p) /* counter.c:62 */
	od;
	if
	:: rc != OK ->
		/* counter.c:105-110 undo the levels below p */
		q = g;
		do
		:: q == p -> break
		:: else ->
			count[q] = count[q] - (amt);
			q = parent(q)
		od;
		failg = p
	:: else
	fi;
	p = 0;
	q = 0;
	cur = 0;
	lim = 0
}

/* counter.c:sl__counter_set_limits:135-147, limits.c:sl_group_set_limits:28-35
 * and shrink_to_max:10-26 for a group whose subtree has no callback (so
 * sl__reclaim() frees nothing): the new max, then drain and look. */
inline set_max(g, newmax, rc)
{
	stable[g] = 0; /* ghost: the old max is going */
	/* counter.c:142 exchange max, seq_cst */
	maxv[g] = newmax;
	/* counter.c:143 read count again, seq_cst */
	cur = count[g];
	if
	:: cur <= maxv[g] -> rc = OK /* limits.c:15 */
	:: else ->
		/* limits.c:20 drain, :21 usage */
		drain_subtree(g, du);
		if
		:: count[g] <= maxv[g] -> rc = OK /* limits.c:22, :25 */
		:: else -> rc = EBUSY
		fi
	fi;
	/* ghost: set_limits returned 0, so the new max is in force */
	stable[g] = (rc == OK);
	cur = 0;
	du = 0
}

/* stock.c:slot_flush:48-54 */
inline slot_flush(g, u, l)
{
	if
	:: l -> lcl[g] = lcl[g] + (l) /* stock.c:51 */
	:: else
	fi;
	if
	:: u -> counter_cancel(g, u) /* stock.c:53 */
	:: else
	fi
}

/* stock.c:stock_bind:270-308 with one slot: bind it to g, flushing what
 * it held for its old group.  The caller is in a transit (inflight up). */
inline stock_bind(me, g)
{
	if
	:: sgroup[me] == g -> skip /* stock.c:277 found */
	:: else ->
		og = sgroup[me]; /* stock.c:289 */
		/* stock.c:297-298 exchange: contents out, tag bumped */
		atomic {
			tu = sunits[me];
			tl = sledger[me];
			sunits[me] = 0;
			sledger[me] = 0;
			stag[me] = stag[me] + 1
		}
		if
		:: og != NONE -> slot_flush(og, tu, tl) /* stock.c:299-300 */
		:: else
		fi;
		sgroup[me] = g; /* stock.c:303 */
		og = 0;
		tu = 0;
		tl = 0
	fi
}

/* stock.c:transit_begin:427-437: raise the flag, then look for a usage
 * read; if one is at work, lower the flag and wait on the registry lock
 * (which the reader holds) before trying again. */
inline transit_begin(me)
{
	do
	:: inflight[me] = 1; /* stock.c:430 */
		if
		:: usage_reads == 0 -> break /* stock.c:431 */
		:: else ->
			inflight[me] = 0; /* stock.c:433 */
			lock(reglock); /* stock.c:434 */
			unlock(reglock) /* stock.c:435 */
		fi
	od
}

/* stock.c:sl__stock_refill:452-501.  rc: 0 refilled and amt handed out,
 * 1 the caller must charge exactly. */
inline stock_refill(me, g, amt, rc)
{
	transit_begin(me); /* stock.c:464 */
	stock_bind(me, g); /* stock.c:465 */
	counter_try(g, (amt) + BATCH, 0, crc, cfail); /* stock.c:466 */
	if
	:: crc != OK ->
		inflight[me] = 0; /* stock.c:467 */
		rc = 1
	:: else ->
#ifdef MUTANT_REFILL_AFTER_DRAIN
		/* the bug: a refill does not look for an exact check */
		if
		:: false -> skip
#else
		if
		:: checks[g] != 0 -> /* stock.c:475 */
			counter_cancel(g, (amt) + BATCH); /* stock.c:476 */
			inflight[me] = 0; /* stock.c:477 */
			rc = 1
#endif
		:: else ->
			/* stock.c:480-492 the CAS: batch in (up to cap), amt to the ledger */
			atomic {
				tu = sunits[me] + BATCH;
				gb = (tu > CAP -> tu - CAP : 0);
				sunits[me] = tu - gb;
				sledger[me] = sledger[me] + (amt);
				tu = 0
			}
			if
			:: gb -> counter_cancel(g, gb) /* stock.c:497-498 */
			:: else
			fi;
			inflight[me] = 0; /* stock.c:499 */
			gb = 0;
			rc = 0
		fi
	fi;
	crc = 0;
	cfail = 0
}

/*
 * stock.c:take:308-316 through scan_locked:245-266 and take_slot:291-306:
 * take (mask: units and ledger, or the ledger only) the slots of every
 * thread bound to a group that match accepts, and flush it.  du: units
 * given back.  mt: 0 group, 1 subtree.
 */
inline take(ledger_only, mt, top, du)
{
	du = 0;
	lock(reglock); /* stock.c:312 */
	s = 0;
	do
	:: s == NT -> break
	:: else ->
		/* stock.c:255 load the word */
		atomic {
			tag = stag[s];
			nonempty = (sledger[s] != 0 || (!ledger_only && sunits[s] != 0))
		}
		if
		:: nonempty ->
			sg = sgroup[s]; /* stock.c:261 */
			if
			:: sg != NONE && ((mt == 0 && sg == top) || (mt == 1 && is_ancestor(top, sg))) ->
				/* stock.c:298-300 the CAS, which compares the tag too */
				atomic {
					if
					:: stag[s] == tag ->
						tl = sledger[s];
						sledger[s] = 0;
						if
						:: !ledger_only ->
							tu = sunits[s];
							sunits[s] = 0
						:: else
						fi
					:: else
					fi
				}
				slot_flush(sg, tu, tl); /* stock.c:303 */
				du = du + tu; /* stock.c:304 */
				tu = 0;
				tl = 0
			:: else
			fi;
			sg = 0
		:: else
		fi;
		tag = 0;
		nonempty = 0;
		s++
	od;
	s = 0;
	unlock(reglock) /* stock.c:314 */
}

inline drain_subtree(top, du)
{
	take(0, 1, top, du) /* stock.c:sl__stock_drain_subtree:320-323 */
}
inline drain_group(g, du)
{
	take(0, 0, g, du) /* stock.c:sl__stock_drain_group:326-329 */
}
inline fold_ledgers(g)
{
	take(1, 0, g, du) /* stock.c:sl__stock_fold_ledgers:333-336 */
}

/* stock.c:sl__stock_quiesce:230-235 and quiesce_locked:221-228 */
inline quiesce()
{
	lock(reglock);
	s = 0;
	do
	:: s == NT -> break
	:: else ->
		inflight[s] == 0; /* stock.c:226 wait */
		s++
	od;
	s = 0;
	unlock(reglock)
}

/* stock.c:stock_release:56-83, the thread's exit */
inline stock_release(me)
{
	lock(reglock); /* stock.c:61 */
	atomic { /* stock.c:66 exchange the word for 0 */
		tu = sunits[me];
		tl = sledger[me];
		sunits[me] = 0;
		sledger[me] = 0
	}
	if
	:: tu || tl -> slot_flush(sgroup[me], tu, tl) /* stock.c:70-71 */
	:: else
	fi;
	tu = 0;
	tl = 0;
	unlock(reglock) /* stock.c:79 */
}

/* atomic.h:sl__sub_clamped:55-65 on lcl[g] */
inline sub_clamped_local(g, want, got)
{
	atomic {
		got = min2(lcl[g], (want));
		lcl[g] = lcl[g] - got
	}
}

/* uncharge.c:take_local_exact:228-247 */
inline take_local_exact(g, amt, got)
{
	checks[g]++; /* uncharge.c:234 */
	quiesce(); /* uncharge.c:236 */
	drain_group(g, du); /* uncharge.c:237 */
	quiesce(); /* uncharge.c:241 */
	sub_clamped_local(g, (amt), got); /* uncharge.c:242 */
	checks[g]-- /* uncharge.c:245 */
}

/* uncharge.c:sl_uncharge:312-329 and sl__uncharge_slow:260-310 */
inline uncharge(me, g, amt, rc)
{
	atomic { hu[g] = hu[g] - (amt) } /* ghost: the host frees the units */
	rc = 255;
	if
	:: sgroup[me] == g ->
		/* uncharge.c:323-326 fast path: the ledger covers it */
		atomic {
			if
			:: sledger[me] >= (amt) && sunits[me] + (amt) <= CAP ->
				sledger[me] = sledger[me] - (amt);
				sunits[me] = sunits[me] + (amt);
				rc = OK
			:: else
			fi
		}
	:: else
	fi;
	if
	:: rc == OK -> skip
	:: else ->
		left = (amt);
		rel = 0;
		if
		:: sgroup[me] == g ->
			/* uncharge.c:274-285 what our own ledger covers, one CAS */
			atomic {
				taken = min2(sledger[me], left);
				keep = min2(taken, (CAP > sunits[me] -> CAP - sunits[me] : 0));
				sledger[me] = sledger[me] - taken;
				sunits[me] = sunits[me] + keep
			}
			left = left - taken;
			rel = rel + taken - keep;
			taken = 0;
			keep = 0
		:: else
		fi;
		round = 0;
		do /* uncharge.c:287 */
		:: left == 0 -> break
		:: else ->
#ifdef MUTANT_FALSE_OVERUNCHARGE
			/* the bug: local short is over, whatever the ledgers hold */
			if
			:: round -> break
			:: else
			fi;
#endif
			if
			:: round > FOLD_ROUNDS ->
				take_local_exact(g, left, got); /* uncharge.c:291-296 */
				left = left - got;
				rel = rel + got;
				break
			:: else
			fi;
			if
			:: round ->
				fold_ledgers(g); /* uncharge.c:298 */
				quiesce() /* uncharge.c:299 */
			:: else
			fi;
			sub_clamped_local(g, left, got); /* uncharge.c:303 */
			left = left - got;
			rel = rel + got;
			round++
		od;
		if
		:: rel -> counter_cancel(g, rel) /* uncharge.c:307-308 */
		:: else
		fi;
		rc = (left -> EINVAL : OK); /* uncharge.c:309 */
		left = 0;
		rel = 0;
		got = 0;
		round = 0
	fi
}

/* charge.c:sl_charge:183-200 fast path; rc 0 when the stock covered it */
inline charge_fast(me, g, amt, rc)
{
	rc = 255;
	if
	:: sgroup[me] == g ->
		atomic { /* charge.c:194-197 one CAS on the own slot */
			if
			:: sunits[me] >= (amt) ->
				sunits[me] = sunits[me] - (amt);
				sledger[me] = sledger[me] + (amt);
				rc = OK
			:: else
			fi
		}
	:: else
	fi
}

/* The variables the inlines use, declared once per thread. */
#define THREAD_LOCALS \
	byte p, q, cur, lim, crc, cfail, og, tu, tl, gb, s, tag, sg, du; \
	bit nonempty, quiet; \
	byte mygen, left, rel, taken, keep, got, round, rc, failg
