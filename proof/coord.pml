/* SPDX-License-Identifier: MIT */
/*
 * coord.pml: the coordinated etcd protocol ("Scale", etcd://...?coordinated:
 * lib/lease/coord.h, docs/leases.md) for one budget: two nodes, two
 * coordinators (one can be deposed while it still runs), the store.
 *
 * The store keeps, per node j: its grant (held, floor, the session it was
 * made for, and g_seq, a stand-in for the grant key's mod_revision), its
 * report (held, the grant it acknowledges) under the node's session, and
 * whether that session still runs at the store; the coord key (its term: the create revision,
 * 0 when absent); the budget's version, abstracted as in lease.pml to
 * "a write that counts for more happened since coordinator k's snapshot"
 * (cmoved[k]: all its compare looks at).  What the store counts for j:
 *   report present, for the grant's session:  max(grant held, report held)
 *   report present, for another session:      max(grant floor, report held)
 *   report absent (its session ran out):      grant floor
 *
 * A node is a group (usage, applied max; the charger fills usage up to the
 * applied max at any interleaving: a cache fills its share) and its lease
 * thread:
 *   - its own view of its session may end at any moment (keepalives lost,
 *     replies late); the store's view ends only after that, once the node
 *     has fenced: lease.h's timing assumption, lease.pml's clock reduced to
 *     the order it gives (keepalives only postpone both ends: left out);
 *   - receives its grants from a watch (a channel: in order, each one
 *     delayed) and applies one only if it was made for its current
 *     session: lowers its max at once (reclaim, or not: -EBUSY) or raises
 *     it to the grant's held (the grant already counts it), reads its usage
 *     c and reports held = max(grant held, min(c, its last reported held)),
 *     acknowledging that grant; the report is a write of its own (it fails
 *     once the session ended at the store; until then it is retried);
 *   - fences when its own view ends: max = min(max, floor), reclaimed to it
 *     (in the same step: fencing takes less than the margin); then grants
 *     itself a new session and rejoins: its report (held = its max, which
 *     is at most its floor: it counts for no more than before, so no
 *     version compare) goes under the new session, and the initial read of
 *     its grant goes into its watch.
 *
 * A coordinator campaigns when the coord key is absent (a create: the term
 * is the new revision); then, while it believes it holds the term: reads a
 * snapshot (one range: grants, reports, version; it forgets its term if
 * the coord key is no longer its own), plans, and writes later (a separate
 * step: anything may happen in between, its deposal and the new
 * coordinator's writes included).  The plan, per member, is free within
 * the rules (the allocator is not the point): keep the grant, or give it
 * any held from the member's floor to MAX, for the session of its report;
 * a member without a report keeps its grant (it counts at its floor); a
 * member that has not acknowledged its current grant keeps it (see
 * MUTANT_NO_ACK).  A written grant counts at max(new held, reported held)
 * (a shrink frees room only once reported).  A txn that makes anything
 * count for more must leave the counted sum <= MAX and compares the
 * version; every txn compares the term (create_revision(coord/NAME) == T).
 *
 * The coordinator's session ending (SIGSTOP past its lease, a partition) is
 * a fault at any moment: the coord key is deleted and the coordinator does
 * not know; it goes on with the plan it has and writes with its old term.
 *
 * Safety, checked in every state by the monitor: the nodes' usages sum to
 * at most MAX; the store's counted sum is at most MAX; and no node uses
 * more than the store counts for it.
 *
 * Mutants (each must fail):
 *   MUTANT_NO_TERM       the grant txn does not compare the term: a deposed
 *                        coordinator's stale grant lands
 *   MUTANT_OTHER_SESSION a node applies a grant made for another (older)
 *                        session of its own
 *   MUTANT_EARLY_FREE    the coordinator counts a shrunk grant at its new
 *                        held before the member reports it
 *   MUTANT_RAISE_EARLY   a node raises its max to what it asks for before
 *                        any grant says so
 *   MUTANT_STORE_FIRST   the node's own view of its session ends after the
 *                        store's (fence late)
 *   MUTANT_NO_ACK        the coordinator rewrites a grant that the member
 *                        has not acknowledged (SCALE_DESIGN.md's rule 1 as
 *                        first written: the report carried no ack): a grow
 *                        still in the member's watch is applied after the
 *                        shrink that freed its room
 * Known gap (-DFLOOR_MOVES, must fail too): the plan may lower a floor; a
 * node fenced at the floor it applied last outlives its session's count.
 *
 * Left out: the allocator, floors that change (each member's floor is
 * fixed: see proof/README.md on lowering a floor), joins and leaves,
 * member removal, limits changes, decentralized records in the same
 * budget, the dead band, txn sizes (one txn writes every grant of the
 * plan), node stalls past the margin (lease.h's timing assumption), more
 * than DEPOSES deposals and SESSMAX sessions per node.
 */

#define N 2
#ifndef MAX
#define MAX 2
#endif
#ifndef FLOOR0
#define FLOOR0 1
#endif
#ifndef SESSMAX
#define SESSMAX 2
#endif
#ifndef DEPOSES
#define DEPOSES 1
#endif
#ifndef WQ
#define WQ 2
#endif

#define NOACK 2

/* the store */
byte g_held[N];
byte g_floor[N];
byte g_sess[N];     /* the session the grant was made for               */
byte g_seq[N];      /* the grant's mod_revision, as a bit: a rewrite
                     * waits for the ack of the one before, so two in a
                     * row never look alike to a report (except under
                     * MUTANT_NO_ACK, which is caught without it)       */
bool r_on[N];       /* a report exists (under session s_sess)            */
byte r_held[N];
byte r_ack[N];      /* the g_seq it acknowledges, NOACK for none         */
byte s_sess[N];     /* the node's session at the store, 0: ran out       */
byte c_term;        /* the coord key: its create revision, 0: absent     */
bool cmoved[2];

/* the nodes */
byte usage[N];
byte lmax[N];       /* the group's applied max                           */
byte fl[N];
byte sess[N];       /* its current session                               */
bool leased[N];     /* its own view runs (else fenced at its floor)      */
byte rh[N];         /* the held of its last report (written or pending) */
byte p_ack[N];
bool dirty[N];      /* a report to write                                 */
byte pfl[N];        /* the floor of the grant it applied last          */
chan w[N] = [WQ] of { byte, byte, byte, byte };   /* held, floor, session, seq */

byte elections;
byte deposes;

#define MIN(a, b) (a < b -> a : b)
#define MAXOF(a, b) (a > b -> a : b)
#define CNT(j) (r_on[j] -> \
		(g_sess[j] == s_sess[j] -> MAXOF(g_held[j], r_held[j]) \
					: MAXOF(g_floor[j], r_held[j])) \
		: g_floor[j])
#define SUMC (CNT(0) + CNT(1))
#define SUMU (usage[0] + usage[1])
#define OVER(j) (usage[j] > CNT(j))

active proctype monitor()
{
end:	atomic {
		(SUMU > MAX || SUMC > MAX || OVER(0) || OVER(1)) ->
		assert(SUMU <= MAX);
		assert(SUMC <= MAX);
		assert(!OVER(0) && !OVER(1))
	}
}

/* The store's view of node j's session ends: its report goes with it.
 * Only once the node's own view has ended and it has fenced (the timing
 * assumption; MUTANT_STORE_FIRST: at any time). */
#ifdef MUTANT_STORE_FIRST
#define EXPIRES(j) (s_sess[j] != 0)
#else
#define EXPIRES(j) (s_sess[j] != 0 && !leased[j])
#endif

inline expire(j)
{
	s_sess[j] = 0;
	r_on[j] = false;
	r_held[j] = 0;
	r_ack[j] = 0
}

/* The coordinator's session ends while it runs (it does not know); a
 * node's session ends at the store. */
active proctype faults()
{
end:	do
	:: atomic { c_term != 0 && deposes < DEPOSES -> deposes++; c_term = 0 }
	:: atomic { EXPIRES(0) -> expire(0) }
	:: atomic { EXPIRES(1) -> expire(1) }
	od
}

/* The group: fills up to its applied max in one step. */
proctype group(byte i)
{
end:	do
	:: atomic { usage[i] < lmax[i] -> usage[i] = lmax[i] }
	od
}

proctype node(byte i)
{
	byte h, f, s, q;

end:	do
	:: atomic {
		leased[i] ->
		/* its own view of the session ends (keepalives failed, or their
		 * replies came too late): fence, to the floor, never a raise;
		 * reclaimed within the margin, before the store's view ends */
		lmax[i] = MIN(lmax[i], pfl[i]);
		if
		:: usage[i] > lmax[i] -> usage[i] = lmax[i]
		:: else
		fi;
		leased[i] = false;
		dirty[i] = false
	   }
	:: atomic {
		nempty(w[i]) ->
		w[i]?h, f, s, q;
#ifdef MUTANT_OTHER_SESSION
		if
		:: leased[i] ->
#else
		if
		:: leased[i] && s == sess[i] ->
#endif
			if
			:: h < lmax[i] ->
				/* shrink: lower first, reclaim or -EBUSY */
				lmax[i] = h;
				if
				:: usage[i] > h -> usage[i] = h
				:: true
				fi
			:: else ->
				/* grow: the grant already counts it */
				lmax[i] = h
			fi;
			/* read the usage, report what it may still hold */
			rh[i] = MAXOF(h, MIN(usage[i], rh[i]));
			pfl[i] = f;
			p_ack[i] = q;
			dirty[i] = true
		:: else	/* another session's, or fenced: not ours */
		fi;
		h = 0; f = 0; s = 0; q = 0
	   }
	:: atomic {
		dirty[i] && leased[i] ->
		/* the report, under its session: fails if that ran out */
		if
		:: s_sess[i] == sess[i] ->
			r_held[i] = rh[i];
			r_ack[i] = p_ack[i];
			dirty[i] = false
		:: else
		fi
	   }
	:: atomic {
		!leased[i] && sess[i] < SESSMAX ->
		/* a new session, the report under it: held = its max (at most
		 * its floor, >= its usage: counts for no more than before) */
		sess[i]++;
		s_sess[i] = sess[i];
		r_on[i] = true;
		r_held[i] = lmax[i];
		r_ack[i] = NOACK;
		rh[i] = lmax[i];
		leased[i] = true;
		/* the initial read of its grant, then the watch */
		if
		:: len(w[i]) < WQ -> w[i]!g_held[i], g_floor[i], g_sess[i], g_seq[i]
		:: else
		fi
	   }
#ifdef MUTANT_RAISE_EARLY
	:: atomic { leased[i] && lmax[i] < MAX -> lmax[i] = MAX }
#endif
	od
}

/* Plan member j from the snapshot: keep its grant (w false, n what it
 * counts now) or a new held h from its floor to MAX for its report's
 * session, counted at n = max(h, reported held). */
inline plan(j, h, f, s, wr, n)
{
	n = CNT(j);
	wr = false;
	if
#ifdef MUTANT_NO_ACK
	:: r_on[j] ->
#else
	:: r_on[j] && (g_sess[j] != s_sess[j] || r_ack[j] == g_seq[j]) ->
#endif
		if
		:: true
		:: h = fl[j];
			do
			:: h < MAX -> h++
			:: break
			od;
			s = s_sess[j];
			f = fl[j];
#ifdef FLOOR_MOVES
			/* a floor lowered (a member joined: min / n_live) */
			if
			:: f = 0
			:: true
			fi;
#endif
			if
			:: h != g_held[j] || f != g_floor[j] || s != g_sess[j] ->
				wr = true;
#ifdef MUTANT_EARLY_FREE
				n = h
#else
				n = MAXOF(h, r_held[j])
#endif
			:: else -> h = 0; f = 0; s = 0
			fi
		fi
	:: else
	fi
}

inline put_grant(j, h, f, s)
{
	g_held[j] = h;
	g_floor[j] = f;
	g_sess[j] = s;
	g_seq[j] = 1 - g_seq[j];
	w[j]!h, f, s, g_seq[j]
}

proctype coord(byte k)
{
	byte t, h0, h1, f0, f1, s0, s1, n0, n1;
	bool w0, w1, gr;

end:	do
	:: atomic {
		t == 0 && c_term == 0 && elections < DEPOSES + 1 ->
		/* campaign: create coord/NAME; the term is its revision */
		elections++;
		c_term = elections;
		t = c_term
	   }
	:: atomic {
		t != 0 ->
		/* the snapshot: one range read */
		if
		:: c_term != t -> t = 0; goto next
		:: else
		fi;
		cmoved[k] = false;
		plan(0, h0, f0, s0, w0, n0);
		plan(1, h1, f1, s1, w1, n1);
		gr = (n0 > CNT(0) || n1 > CNT(1));
		if
		:: !w0 && !w1 -> goto next
		:: gr && n0 + n1 > MAX -> goto next	/* no room: not this plan */
		:: else
		fi;
		n0 = 0; n1 = 0
	   }
	   /* the txn, later */
	   atomic {
		(!w0 || len(w[0]) < WQ) && (!w1 || len(w[1]) < WQ) ->
		if
#ifdef MUTANT_NO_TERM
		:: !gr || !cmoved[k] ->
#else
		:: c_term == t && (!gr || !cmoved[k]) ->
#endif
			if
			:: w0 -> put_grant(0, h0, f0, s0)
			:: else
			fi;
			if
			:: w1 -> put_grant(1, h1, f1, s1)
			:: else
			fi;
			if
			:: gr -> cmoved[0] = true; cmoved[1] = true
			:: else
			fi
		:: else	/* the term or the version moved */
		fi;
next:		h0 = 0; h1 = 0; f0 = 0; f1 = 0; s0 = 0; s1 = 0; n0 = 0; n1 = 0;
		w0 = false; w1 = false; gr = false
	   }
	od
}

init
{
	byte j;

	atomic {
		/* both nodes joined on session 1 at their floors, granted by an
		 * earlier coordinator; no coordinator now */
		fl[0] = FLOOR0;
		j = 0;
		do
		:: j < N ->
			g_held[j] = fl[j];
			g_floor[j] = fl[j];
			g_sess[j] = 1;
			r_on[j] = true;
			r_held[j] = fl[j];
			s_sess[j] = 1;
			sess[j] = 1;
			lmax[j] = fl[j];
			pfl[j] = fl[j];
			rh[j] = fl[j];
			leased[j] = true;
			run group(j);
			run node(j);
			j++
		:: else -> break
		od;
		run coord(0);
		run coord(1)
	}
}
