/* SPDX-License-Identifier: MIT */
/*
 * softlimit's counters, per-thread stocks and uncharge path (with the keep
 * of what an uncharge gives back, stock.c:sl__stock_keep) in Promela,
 * shared by stock.pml and reclaim.pml.  Each inline follows one C function
 * step by step; a comment names file:function:line for every step.  One
 * Promela statement (or atomic block) is one C atomic access or one step
 * under a lock: SPIN interleaves the threads at every such step.
 *
 * Two stock protocols (docs/stocks.md says why both):
 *  - CAS (the default here; lib/ uses it where membarrier is missing and in
 *    TSan builds): the owner's fast path is a compare-and-swap on its slot
 *    word, one atomic step;
 *  - FENCE (spin -DFENCE; lib/'s default where the kernel has membarrier):
 *    the owner's fast path raises its inflight flag, reads sl__stock_takers,
 *    loads its word and writes it back with a plain store (two steps: the
 *    load and the store, so a take between them would be lost) and lowers
 *    the flag; a take from other threads' slots raises SL__TAKERS_TAKE,
 *    issues membarrier() and waits for every inflight flag to fall before
 *    it takes by CAS; a fold first asks the owners to fold their own
 *    ledgers (the handover) and fences only if they do not answer in time.
 *
 * What the model leaves out, and why that is sound for these properties:
 *  - memory order: SPIN's interleavings are sequentially consistent, so the
 *    model checks the protocol, not the acquire/release choices (TSan and
 *    the torture test do that).  Under FENCE the membarrier() is a step
 *    that does nothing: the model checks the handshake given that the
 *    fence makes every owner's flag store visible to the taker and the
 *    taker's flag store to every owner's later load (which is what the
 *    kernel's MEMBARRIER_CMD_PRIVATE_EXPEDITED promises), not the fence;
 *    the owner's store-then-load of sl__stock_enter(), which the CPU may
 *    reorder without that fence, is sequential here;
 *  - a weak CAS loop is one atomic step (the iteration that succeeds; the
 *    failed ones change nothing), and spinning waits (quiesce, the
 *    takers' wait, destroy's pins) are blocking guards, so a wait that
 *    never ends is a deadlock;
 *  - the folder's bounded wait for answers (stock_handover.c:164-180, at most about
 *    a fence's time) is a choice: the folder may give up at any moment,
 *    or wait until every answer is in; ask_skip/ask_backoff (stock_handover.c:140-
 *    143, 187-190) are the same choice at the start (any fold may fence
 *    without asking);
 *  - one slot per thread (SL__STOCK_SLOTS is 8; eviction is the same
 *    rebind as a first bind), so an ask's slot bits are always slot 0's;
 *    no ledger overflow (SL__LEDGER_MAX is 2^22), high unlimited, no
 *    peaks, events or over-soft index (they decide nothing here), every
 *    thread registered from the start, no tree destroy (forget_tree);
 *  - the tree is fixed: group R (the root) and its children A and B.
 *
 * The mutants (spin -DMUTANT_...) put back a bug that was fixed, or break
 * a step of the fence protocol; see proof/README.md.
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
#define CAP (2 * BATCH)	/* stock.c:stock_bind:144 cap = 2 * batch */
#ifndef FOLD_ROUNDS
#define FOLD_ROUNDS 1	/* uncharge.c:13 SL__FOLD_ROUNDS is 2; any number is the same protocol */
#endif

#define parent(g) (g == R -> NONE : R)
/* group.c:sl__is_ancestor(): anc is g or above it */
#define is_ancestor(anc, g) (anc == g || anc == R)
/* stock_take.c:match_group:140-143 (mt 0), stock_take.c:match_subtree:139-142 (mt 1) */
#define matches(mt, top, sg) (sg != NONE && ((mt == 0 && sg == top) || (mt == 1 && is_ancestor(top, sg))))

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
bit reglock;		/* stock.c:28 registry_lock */
bit usage_reads;	/* stock.c:153 usage_reads: a usage read at work */

#ifdef FENCE
/* ---- the fence protocol (docs/stocks.md, stock_handover.c:24-113,
 * stock_take.c:163-275;
 * internal.h:287-329) ---- */
#define TAKERS_TAKE 1	/* internal.h:305 SL__TAKERS_TAKE */
#define TAKERS_ASK 2	/* internal.h:306 SL__TAKERS_ASK */
byte takers;		/* stock_take.c:35 sl__stock_takers */
/* internal.h struct sl__stock: ask (the slot bits are slot 0's, so ask
 * holds the number alone, 0 = none), answered, asked (the folder's,
 * under the registry lock) */
byte sask[NT];
byte answered[NT];
byte asked[NT];
byte ask_seq;		/* stock_handover.c:36 */
#endif
/* Both protocols: internal.h struct sl__stock wanted (a fold took the
 * slot's ledger: take_slot, stock_take.c:176-179) and eager (refills left that
 * fold the ledger into local: stock.c:191-200, and answer() under FENCE) */
#ifndef EAGER_REFILLS
#define EAGER_REFILLS 2	/* stock_handover.c:28 EAGER_REFILLS is 64; the model's threads refill twice at most */
#endif
bit wanted[NT];
byte eager[NT];

/* ---- ghosts: what the host holds, and what the properties need ---- */
byte hu[NG];		/* units the host holds charged to g itself */
byte win[NG];		/* charges between their CAS and their re-read of max */
bit stable[NG] = 1;	/* max is in force (cleared while set_limits lowers it) */
byte forced[NG];	/* units charged past max by SL_FORCE */
byte busy;		/* threads inside a library call */
byte gen;		/* bumped at every call's start and end */
byte done;		/* threads finished */

/* A model may count uncharges (reclaim.pml); IN_RECLAIM: the thread is in
 * a reclaim callback or the OOM handler (reclaim.c:27 sl__tls_in_reclaim). */
#ifndef UNCHARGE_GHOST_BEGIN
#define UNCHARGE_GHOST_BEGIN(g, amt)
#define UNCHARGE_GHOST_END(g, amt)
#endif
#ifndef IN_RECLAIM
#define IN_RECLAIM 0
#endif

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

/* counter.c:sl__counter_cancel:200-206 */
inline counter_cancel(g, amt)
{
	q = g;
	do
	:: q == NONE -> break
	:: else ->
		count[q] = count[q] - (amt); /* counter.c:205 level_sub():98 fetch_sub */
		q = parent(q)
	od;
	q = 0
}

/*
 * counter.c:sl__counter_try:138-197.  rc: OK or ENOMEM; failg: the group in
 * the way.  Overflow (-EINVAL) cannot happen with these small numbers.
 */
inline counter_try(g, amt, force, rc, failg)
{
	p = g;
	rc = OK;
	do
	:: p == NONE -> break
	:: else ->
		do /* counter.c:149 again: */
		:: /* counter.c:150 lim = force ? UINT64_MAX : max (high unlimited: :151-156) */
			lim = (force -> UNLIMITED : maxv[p]);
			/* counter.c:157-166 the CAS loop: the iteration that succeeds
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
			/* counter.c:167 re-read max, seq_cst */
			if
			:: !force && cur > maxv[p] ->
				/* counter.c:169 max fell under us: take this level back */
				atomic {
					count[p] = count[p] - (amt);
					win[p] = win[p] - (amt)
				}
				/* counter.c:170 goto again */
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
		p = parent(p) /* counter.c:146 */
	od;
	if
	:: rc != OK ->
		/* counter.c:191-195 undo the levels below p */
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

/*
 * counter.c:sl__counter_room:214-224: every level on g's path has room for
 * amt more under its max (high is unlimited here, so min(max, high) is
 * max).  ok: 1 if so.  C loads max and count (relaxed) one after the
 * other; one step here, per level: no configuration changes a max while a
 * keep runs (CFG_SETMAX's uncharge waits for set_max to return).
 */
inline counter_room(g, amt, ok)
{
	p = g;
	ok = 1;
	do /* counter.c:216 */
	:: atomic { /* counter.c:217-218 max and count, :220-221 */
		p != NONE && ok ->
		ok = (count[p] <= maxv[p] && maxv[p] - count[p] >= (amt));
		p = parent(p)
	   }
	:: atomic { p == NONE || !ok -> p = 0; break }
	od
}

/* counter.c:sl__counter_set_limits:255-273, limits.c:sl_group_set_limits:36-48
 * and shrink_to_max:10-26 for a group whose subtree has no callback (so
 * sl__reclaim() frees nothing): the new max, then drain and look. */
inline set_max(g, newmax, rc)
{
	stable[g] = 0; /* ghost: the old max is going */
	/* counter.c:262 exchange max, seq_cst */
	maxv[g] = newmax;
	/* counter.c:263 read count again, seq_cst */
	cur = count[g];
	if
	:: cur <= maxv[g] -> rc = OK /* limits.c:15-16 */
	:: else ->
		/* limits.c:20 drain, :21 usage (reclaim.c:sl__usage_of:32-35, the count) */
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

/* stock.h:slot_flush:19-25 */
inline slot_flush(g, u, l)
{
	if
	:: l -> lcl[g] = lcl[g] + (l) /* stock.h:21-22 */
	:: else
	fi;
	if
	:: u -> counter_cancel(g, u) /* stock.h:23-24 */
	:: else
	fi
}

/* stock.c:stock_bind:108-147 with one slot: bind it to g, flushing what
 * it held for its old group.  The caller is in a transit (inflight up). */
inline stock_bind(me, g)
{
	if
	:: sgroup[me] == g -> skip /* stock.c:110, :116-117 found */
	:: else ->
		og = sgroup[me]; /* stock.c:128 */
		/* stock.c:133-136 exchange: contents out, tag bumped */
		atomic {
			tu = sunits[me];
			tl = sledger[me];
			sunits[me] = 0;
			sledger[me] = 0;
			stag[me] = stag[me] + 1
		}
		if
		:: og != NONE -> slot_flush(og, tu, tl) /* stock.c:137-138 */
		:: else
		fi;
		sgroup[me] = g; /* stock.c:141 */
		eager[me] = 0; /* stock.c:142 */
		og = 0;
		tu = 0;
		tl = 0
	fi
}

/* stock.c:transit_begin:169-179: raise the flag, then look for a usage
 * read; if one is at work, lower the flag and wait on the registry lock
 * (which the reader holds) before trying again. */
inline transit_begin(me)
{
	do
	:: inflight[me] = 1; /* stock.c:172 */
		if
		:: usage_reads == 0 -> break /* stock.c:173-174 */
		:: else ->
			inflight[me] = 0; /* stock.c:175 */
			lock(reglock); /* stock.c:176 */
			unlock(reglock) /* stock.c:177 */
		fi
	od
}

#ifdef FENCE
/* stock_handover.c:answer:52-86: the owner folds the ledger its ask names into
 * local itself and says so. */
inline answer(me)
{
#ifndef MUTANT_ANSWER_NO_INFLIGHT
	inflight[me] = 1; /* stock_handover.c:60 */
#endif
	atomic { /* stock_handover.c:62 exchange the ask for 0 */
		a = sask[me];
		sask[me] = 0
	}
	if
	:: a -> /* stock_handover.c:63-68 slot 0's bit */
		eager[me] = EAGER_REFILLS; /* stock_handover.c:71 */
		atomic { /* stock_handover.c:73-75 CAS the ledger out */
			tl = sledger[me];
			sledger[me] = 0
		}
		if
		:: tl -> lcl[sgroup[me]] = lcl[sgroup[me]] + tl /* stock_handover.c:78-79 */
		:: else
		fi;
		tl = 0
	:: else
	fi;
	answered[me] = a; /* stock_handover.c:83 (0 if the ask was withdrawn) */
#ifndef MUTANT_ANSWER_NO_INFLIGHT
	inflight[me] = 0; /* stock_handover.c:85 */
#endif
	a = 0
}

/* stock_handover.c:charge_flagged:96-114: the takers' flag is up; answer our ask
 * if there is one, then hand amt out of the slot by CAS.  fl: done. */
inline charge_flagged(me, g, amt, fl)
{
	fl = 0;
	if
	:: takers & TAKERS_ASK -> /* stock_handover.c:103 */
		if
		:: sask[me] -> answer(me) /* stock_handover.c:103-104 */
		:: else
		fi
	:: else
	fi;
	if
	:: sgroup[me] == g -> /* stock_handover.c:105-107 */
		atomic { /* stock_handover.c:108-112 the CAS */
			if
			:: sunits[me] >= (amt) ->
				sunits[me] = sunits[me] - (amt);
				sledger[me] = sledger[me] + (amt);
				fl = 1
			:: else
			fi
		}
	:: else
	fi
}
#endif

/* stock.c:sl__stock_refill:208-259.  rc: 0 refilled and amt handed out,
 * 1 the caller must charge exactly. */
inline stock_refill(me, g, amt, rc)
{
#ifdef FENCE
	/* stock.c:214-216 */
	if
	:: takers != 0 -> charge_flagged(me, g, amt, fl)
	:: else -> fl = 0
	fi;
	if
	:: fl -> rc = 0
	:: else ->
#endif
	/* stock.c:217-218 note_wanted(): a fold took our ledger */
	if
	:: wanted[me] ->
		atomic {
			wanted[me] = 0;
			eager[me] = EAGER_REFILLS
		}
	:: else
	fi;
	transit_begin(me); /* stock.c:222 */
	stock_bind(me, g); /* stock.c:223 */
	counter_try(g, (amt) + BATCH, 0, crc, cfail); /* stock.c:224 */
	if
	:: crc != OK ->
		inflight[me] = 0; /* stock.c:225 transit_end() */
		rc = 1
	:: else ->
#ifdef MUTANT_REFILL_AFTER_DRAIN
		/* the bug: a refill does not look for an exact check */
		if
		:: false -> skip
#else
		if
		:: checks[g] != 0 -> /* stock.c:233 */
			counter_cancel(g, (amt) + BATCH); /* stock.c:234 */
			inflight[me] = 0; /* stock.c:235 */
			rc = 1
#endif
		:: else ->
			/* stock.c:238-250 the CAS: batch in (up to cap), amt to
			 * the ledger; under FENCE, after an answer (eager), the
			 * whole ledger out to local (:499) */
			atomic {
				tu = sunits[me] + BATCH;
				gb = (tu > CAP -> tu - CAP : 0);
				sunits[me] = tu - gb;
				el = (eager[me] -> sledger[me] + (amt) : 0);
				sledger[me] = sledger[me] + (amt) - el;
				tu = 0
			}
#ifndef MUTANT_EAGER_UNFLAGGED
			if
			:: el -> lcl[g] = lcl[g] + el /* stock.c:251-252 */
			:: else
			fi;
#endif
			if
			:: eager[me] -> eager[me]-- /* stock.c:253-254 */
			:: else
			fi;
			if
			:: gb -> counter_cancel(g, gb) /* stock.c:255-256 */
			:: else
			fi;
			inflight[me] = 0; /* stock.c:257 */
#ifdef MUTANT_EAGER_UNFLAGGED
			/* the bug: the ledger reaches local after the flag fell */
			if
			:: el -> lcl[g] = lcl[g] + el
			:: else
			fi;
#endif
			el = 0;
			gb = 0;
			rc = 0
		fi
	fi;
#ifdef FENCE
	fi;
	fl = 0;
#endif
	crc = 0;
	cfail = 0
}

/*
 * stock.c:sl__stock_keep:279-333: the units an uncharge of g took back
 * from the host (units: the uncharge's release) stay counted and go into
 * this thread's slot for g, bound now if need be; past the slot's cap all
 * but a batch go back to the counters.  A rebind and that give-back are
 * transits; keeping the units is not (they move from the uncharge in
 * progress into the slot in the one CAS).  Inside a reclaim callback or
 * the OOM handler (IN_RECLAIM, reclaim.pml), for more than a batch, or
 * without room for a batch on the path, they go back at once.
 */
inline stock_keep(me, g, units)
{
	/* stock.c:289-290 in C's order: batch is never 0 here, and every
	 * thread has its stock from the start (sl__stock_get() never fails).
	 * kroom is 0 here: every way out of this inline leaves it 0. */
	if
	:: (units) <= BATCH && !IN_RECLAIM ->
#ifdef MUTANT_KEEP_NO_ROOM
		/* the bug: no look at the room on the path */
		kroom = 1
#else
		counter_room(g, BATCH, kroom) /* stock.c:289 */
#endif
	:: else
	fi;
	if
	:: !kroom -> counter_cancel(g, units) /* stock.c:291 */
	:: else ->
		/* stock.c:294 sl__slot_find(), :297 the word's units */
#ifdef MUTANT_KEEP_NO_TRANSIT
		/* the bug: a transit only to bind, none for a give-back */
		ktr = (sgroup[me] != g);
#else
		ktr = (sgroup[me] != g || sunits[me] + (units) > CAP);
#endif
		if
		:: ktr ->
			transit_begin(me); /* stock.c:299 */
			stock_bind(me, g) /* stock.c:300 */
		:: else
		fi;
		/* stock.c:302-328 the CAS: the units in; past the cap, all but a
		 * batch out (back) */
		atomic {
			tu = sunits[me] + (units);
			gb = (tu > CAP -> tu - BATCH : 0);
			sunits[me] = tu - gb;
			tu = 0
		}
		if
		:: gb -> counter_cancel(g, gb) /* stock.c:329-330 */
		:: else
		fi;
		if
		:: ktr -> /* stock.c:331-332 transit_end() */
			atomic {
				inflight[me] = 0;
				gb = 0;
				ktr = 0;
				kroom = 0
			}
		:: else ->
			atomic {
				gb = 0;
				kroom = 0
			}
		fi
	fi
}

#ifdef FENCE
/* stock_take.c:others_hold:205-214 through scan_stock:619-638 and note_held:
 * does another thread's slot match and hold what the take would take? */
inline others_hold(ledger_only, mt, top)
{
	held = 0;
	s = 0;
	do
	:: s == NT || held -> break
	:: else ->
		if
		:: s != me -> /* stock_take.c:211 */
			/* stock_take.c:120-123 load the word, test the mask */
			nonempty = (sledger[s] != 0 || (!ledger_only && sunits[s] != 0));
			if
			:: nonempty ->
				sg = sgroup[s]; /* stock_take.c:126 */
				held = matches(mt, top, sg); /* stock_take.c:127, :202 */
				sg = 0
			:: else
			fi;
			nonempty = 0
		:: else
		fi;
		s++
	od;
	s = 0
}

/* stock_handover.c:fold_by_owners:134-195 (mt is match_group): ask the owners of
 * other slots of top that hold a ledger to fold it, wait for the answers
 * or give up.  own: every ledger asked for is in local. */
inline fold_by_owners(top)
{
	if
	:: own = 0 /* stock_handover.c:140-143 ask_skip: fence without asking */
	:: pending = 0;
		s = 0;
		do /* stock_handover.c:144-156 */
		:: s == NT -> break
		:: else ->
			if
			:: s != me -> /* stock_handover.c:148-149 */
				nonempty = (sledger[s] != 0); /* stock_handover.c:150: scan_stock, stock_take.c:120-123 */
				if
				:: nonempty ->
					sg = sgroup[s]; /* stock_take.c:126 */
					if
					:: matches(0, top, sg) ->
						ask_seq++;
						asked[s] = ask_seq; /* stock_handover.c:153 */
						sask[s] = ask_seq; /* stock_handover.c:154 */
						pending++ /* stock_handover.c:155 */
					:: else
					fi;
					sg = 0
				:: else
				fi;
				nonempty = 0
			:: else
			fi;
			s++
		od;
		if
		:: pending == 0 -> own = 1 /* stock_handover.c:157-158 */
		:: else ->
			takers = takers | TAKERS_ASK; /* stock_handover.c:161 */
			do /* stock_handover.c:164-180 the wait */
			:: /* stock_handover.c:165-172 one look at every answered: in one
			    * step (each is a load in C, but answered only moves
			    * to the number asked while we wait, so a later load
			    * sees no less) */
				atomic {
					pending = 0;
					s = 0;
					do
					:: s == NT -> break
					:: else ->
						if
						:: asked[s] && answered[s] == asked[s] -> asked[s] = 0
						:: else
						fi;
						pending = pending + (asked[s] != 0);
						s++
					od;
					s = 0
				}
				if
				:: pending == 0 -> break /* stock_handover.c:173 every answer in */
				:: pending != 0 -> break /* stock_handover.c:173 the wait ran out */
				:: pending != 0 -> skip /* stock_handover.c:179 wait on */
				fi
			od;
			takers = takers & ~TAKERS_ASK; /* stock_handover.c:181 */
			s = 0;
			do /* stock_handover.c:182-186 withdraw the asks left */
			:: s == NT -> break
			:: else ->
				if
				:: asked[s] ->
					sask[s] = 0;
					asked[s] = 0
				:: else
				fi;
				s++
			od;
			s = 0;
			own = (pending == 0) /* stock_handover.c:187-194 */
		fi;
		pending = 0
	fi
}

/* stock_take.c:takers_begin:217-233 */
inline takers_begin()
{
	takers = takers | TAKERS_TAKE; /* stock_take.c:225 */
	skip; /* stock_take.c:226 membarrier(): nothing to do under SC (see the header) */
	s = 0;
	do /* stock_take.c:228-232 wait for every owner's flag to fall */
	:: s == NT -> break
	:: else ->
		inflight[s] == 0;
		s++
	od;
	s = 0
}

/* stock_take.c:takers_end:235-241 */
#define takers_end() takers = takers & ~TAKERS_TAKE /* stock_take.c:240 */
#endif

/*
 * stock_handover.c:take:197, stock_take.c:take:248-273 through scan_locked:640-646, stock.h:scan_stock:38-44, stock_take.c:scan_stock:110-123 and
 * take_slot:671-692: take (mask: units and ledger, or the ledger only) the
 * slots of every thread bound to a group that match accepts, and flush
 * it.  du: units given back.  mt: 0 group, 1 subtree.  Under FENCE only
 * this thread's own slot when no other holds anything (or its owner
 * answered the fold), else every slot inside takers_begin()/takers_end().
 */
inline take(ledger_only, mt, top, du)
{
	du = 0;
	lock(reglock); /* stock_take.c:250 */
	first = 0;
	last = NT;
#ifdef FENCE
	others_hold(ledger_only, mt, top); /* stock_take.c:250-251 */
	if
	:: !held -> own = 1
	:: held && ledger_only -> fold_by_owners(top)
	:: else -> own = 0
	fi;
	if
	:: own -> /* stock_take.c:256-257 our own stock only */
#ifdef MUTANT_TAKE_OTHERS_UNFENCED
		/* the bug: after the look, every stock, without the fence */
		skip
#else
		first = me;
		last = me + 1
#endif
	:: else -> takers_begin() /* stock_take.c:259 */
	fi;
#endif
	s = first;
	do
	:: s == last -> break
	:: else ->
		/* stock_take.c:120 load the word, :123 the mask */
		atomic {
			tag = stag[s];
			nonempty = (sledger[s] != 0 || (!ledger_only && sunits[s] != 0))
		}
		if
		:: nonempty ->
			sg = sgroup[s]; /* stock_take.c:126 */
			if
			:: matches(mt, top, sg) -> /* stock_take.c:127 */
				/* stock_take.c:170-172 the CAS, which compares the tag too */
				atomic {
					if
					:: stag[s] == tag ->
						tl = sledger[s];
						sledger[s] = 0;
						/* stock_take.c:176-177 the hint */
						wanted[s] = (ledger_only && tl && s != me -> 1 : wanted[s]);
						if
						:: !ledger_only ->
							tu = sunits[s];
							sunits[s] = 0
						:: else
						fi
					:: else
					fi
				}
				slot_flush(sg, tu, tl); /* stock_take.c:181 */
				du = du + tu; /* stock_take.c:182 */
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
	first = 0;
	last = 0;
#ifdef FENCE
	if
	:: !own -> takers_end() /* stock_take.c:261 */
	:: else
	fi;
	own = 0;
	held = 0;
#endif
	unlock(reglock) /* stock_take.c:263 */
}

inline drain_subtree(top, du)
{
	take(0, 1, top, du) /* stock_take.c:sl__stock_drain_subtree:278-281 */
}
inline drain_group(g, du)
{
	take(0, 0, g, du) /* stock_take.c:sl__stock_drain_group:322-325 */
}
inline fold_ledgers(g)
{
	take(1, 0, g, du) /* stock_take.c:sl__stock_fold_ledgers:329-332 */
}

/* stock_take.c:sl__stock_quiesce:102-107 and quiesce_locked:595-602 */
inline quiesce()
{
	lock(reglock); /* stock_take.c:104 */
	s = 0;
	do
	:: s == NT -> break
	:: else ->
		inflight[s] == 0; /* stock_take.c:98 wait */
		s++
	od;
	s = 0;
	unlock(reglock) /* stock_take.c:106 */
}

/* stock.c:stock_release:40-67, the thread's exit (one slot) */
inline stock_release(me)
{
	lock(reglock); /* stock.c:45 */
	atomic { /* stock.c:50 exchange the word for 0 */
		tu = sunits[me];
		tl = sledger[me];
		sunits[me] = 0;
		sledger[me] = 0
	}
	if
	:: tu || tl -> slot_flush(sgroup[me], tu, tl) /* stock.c:54-55 */
	:: else
	fi;
	tu = 0;
	tl = 0;
	unlock(reglock) /* stock.c:63 */
}

/* atomic.h:sl__sub_clamped:54-65 on lcl[g] */
inline sub_clamped_local(g, want, got)
{
	atomic {
		got = min2(lcl[g], (want));
		lcl[g] = lcl[g] - got
	}
}

/* uncharge.c:take_local_exact:28-47 */
inline take_local_exact(g, amt, got)
{
	checks[g]++; /* uncharge.c:34 */
	quiesce(); /* uncharge.c:36 */
	drain_group(g, du); /* uncharge.c:37 */
	quiesce(); /* uncharge.c:41 */
	sub_clamped_local(g, (amt), got); /* uncharge.c:42 */
	checks[g]-- /* uncharge.c:45 */
}

/* uncharge.c:sl_uncharge:118-148 and sl__uncharge_slow:60-110 */
inline uncharge(me, g, amt, rc)
{
	atomic { hu[g] = hu[g] - (amt) UNCHARGE_GHOST_BEGIN(g, amt) } /* ghost: the host frees the units */
	rc = 255;
	if
	:: sgroup[me] == g -> /* uncharge.c:123 */
#ifdef FENCE
		/* uncharge.c:129-138: sl__stock_enter() (internal.h:314-323),
		 * a plain load and store, sl__stock_leave() (internal.h:326-329) */
		stock_enter(me);
		if
		:: ent ->
			atomic { /* uncharge.c:131 the plain load */
				tu = sunits[me];
				tl = sledger[me]
			}
			if
			:: tl >= (amt) && tu + (amt) <= CAP -> /* uncharge.c:132 */
				atomic { /* uncharge.c:133 the plain store */
					sunits[me] = tu + (amt);
					sledger[me] = tl - (amt)
				}
				rc = OK
			:: else
			fi;
			inflight[me] = 0; /* uncharge.c:134, :137 */
			tu = 0;
			tl = 0
		:: else
		fi;
		ent = 0
#else
		/* uncharge.c:140-144 fast path: the ledger covers it, one CAS */
		atomic {
			if
			:: sledger[me] >= (amt) && sunits[me] + (amt) <= CAP ->
				sledger[me] = sledger[me] - (amt);
				sunits[me] = sunits[me] + (amt);
				rc = OK
			:: else
			fi
		}
#endif
	:: else
	fi;
	if
	:: rc == OK -> skip
	:: else ->
		left = (amt);
		rel = 0;
		if
		:: sgroup[me] == g ->
			/* uncharge.c:71-86 what our own ledger covers, one CAS */
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
		do /* uncharge.c:87 */
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
				take_local_exact(g, left, got); /* uncharge.c:91-96 */
				left = left - got;
				rel = rel + got;
				break
			:: else
			fi;
			if
			:: round ->
				fold_ledgers(g); /* uncharge.c:98 */
				quiesce() /* uncharge.c:99 */
			:: else
			fi;
			sub_clamped_local(g, left, got); /* uncharge.c:103 */
			left = left - got;
			rel = rel + got;
			round++
		od;
		if
		:: rel -> stock_keep(me, g, rel) /* uncharge.c:107-108 */
		:: else
		fi;
		rc = (left -> EINVAL : OK); /* uncharge.c:109 */
		left = 0;
		rel = 0;
		got = 0;
		round = 0
	fi UNCHARGE_GHOST_END(g, amt)
}

#ifdef FENCE
/* internal.h:sl__stock_enter:314-323.  ent: the fast path may go on. */
inline stock_enter(me)
{
#ifdef MUTANT_ENTER_LOOK_FIRST
	/* the bug: sl__stock_takers read before the flag is raised */
	ent = (takers == 0);
	inflight[me] = 1;
#else
	inflight[me] = 1; /* internal.h:316 */
	/* internal.h:317 a compiler barrier; the taker's membarrier()
	 * orders this store before the load below */
#ifdef MUTANT_ENTER_NO_LOOK
	/* the bug: no look at sl__stock_takers at all */
	ent = 1;
#else
	ent = (takers == 0); /* internal.h:318 */
#endif
#endif
	if
	:: !ent -> inflight[me] = 0 /* internal.h:321 */
	:: else
	fi
}
#endif

/* charge.c:sl_charge:42-73 fast path; rc 0 when the stock covered it */
inline charge_fast(me, g, amt, rc)
{
	rc = 255;
	if
	:: sgroup[me] == g -> /* charge.c:47 */
#ifdef FENCE
		/* charge.c:53-63: sl__stock_enter(), a plain load and store,
		 * sl__stock_leave() (internal.h:326-329) */
		stock_enter(me); /* charge.c:55 */
		if
		:: ent ->
			atomic { /* charge.c:56 the plain load */
				tu = sunits[me];
				tl = sledger[me]
			}
			if
			:: tu >= (amt) -> /* charge.c:57 slot_covers() */
				atomic { /* charge.c:58 the plain store */
					sunits[me] = tu - (amt);
					sledger[me] = tl + (amt)
				}
				rc = OK
			:: else
			fi;
			inflight[me] = 0; /* charge.c:59, :62 */
			tu = 0;
			tl = 0
		:: else
		fi;
		ent = 0
#else
		atomic { /* charge.c:65-69 one CAS on the own slot */
			if
			:: sunits[me] >= (amt) ->
				sunits[me] = sunits[me] - (amt);
				sledger[me] = sledger[me] + (amt);
				rc = OK
			:: else
			fi
		}
#endif
	:: else
	fi
}

/* The variables the inlines use, declared once per thread. */
#ifdef FENCE
#define FENCE_LOCALS bit held, own, fl, ent; byte pending, a;
#else
#define FENCE_LOCALS
#endif
#define THREAD_LOCALS \
	byte p, q, cur, lim, crc, cfail, og, tu, tl, gb, el, s, tag, sg, du, first, last; \
	bit nonempty, quiet, kroom, ktr; \
	FENCE_LOCALS \
	byte mygen, left, rel, taken, keep, got, round, rc, failg
