/* SPDX-License-Identifier: MIT */
/*
 * coord.pml: the coordinated etcd protocol ("Scale", etcd://...?coordinated)
 * for one budget, as implemented: lib/lease/store_etcd_coord.c (the node),
 * lib/lease/store_etcd_leader.c (the coordinator), lib/lease/coord.c (the
 * rules both follow), docs/leases.md.  Two nodes, two coordinators (one
 * can be deposed while it still runs), the store.
 *
 * The store keeps, per node j: its grant (held, floor, the session it was
 * made for), its report (held) under the node's session, whether that
 * session still runs at the store, and its member key (no lease: it
 * outlives the session), which carries the floor the node acknowledged;
 * the coord key (its term: the create revision, 0 when absent).  Mod
 * revisions are abstracted to what their compares look at: "was the key
 * written since it was read" (cmoved[k]: the budget's version since
 * coordinator k's snapshot; rmoved[k]: each member's report since it;
 * gok[j]: node j's grant since the one its pending raise was decided on).
 * What the store counts for j (coord.h, sl__coord_counted()):
 *   report present, grant for its session:    max(g.held, r.held, m.floor)
 *   report present, grant for another session: max(g.floor, r.held, m.floor)
 *   report absent (its session ran out):       max(g.floor, m.floor)
 *
 * A node is a group (usage, applied max; the charger fills usage up to the
 * applied max at any interleaving: a cache fills its share) and its run
 * thread (store_etcd_coord.c):
 *   - its watch delivers its grants in order, each delayed (a channel);
 *     the latest one delivered is what it knows (c->grants[]);
 *   - a step (lease_step(), sl__coord_lease_target()/_held()) reads the
 *     grant it knows: current if made for its session.  The target is the
 *     grant's held (without one: its last report's); a cut applies to the
 *     group at once (reclaim, or -EBUSY), and the report says
 *     max(target, min(usage, last reported held)).  The floor to follow
 *     is the current grant's (else the acknowledged one); a lower one is
 *     fenced to at once, then written to the member key; a higher one is
 *     written first.  A report that raises (held, or the member floor)
 *     compares the grant's revision with the one it was decided on: a
 *     grant rewritten since fails it, and the node steps again;
 *   - the round's answer (round_done()): the report is ours; the
 *     acknowledged floor is the fence's floor; a raise is applied, up to
 *     the grant it knows if current (no raise otherwise);
 *   - its own view of its session ends at any moment (keepalives lost,
 *     replies late): it fences at once to the floor it acknowledged
 *     (l->floor, reclaimed within the margin); the store's view ends only
 *     after that (lease.h's timing assumption, the order of lease.pml's
 *     clock).  It then rejoins on a new session (lease_register()):
 *     claims max(the known grant's floor, its acknowledged floor, usage),
 *     which is its base, without a compare (its usage is at most its
 *     fence floor, so the claim is the base: asserted).
 *
 * A coordinator (store_etcd_leader.c) campaigns when the coord key is
 * absent; then, while it believes it holds the term: reads a snapshot
 * (one range), plans, and writes later, in two txns (write_grants()):
 * first the writes that raise no one, then the grows.  Every txn compares
 * the term; a cut (new held below the grant's) compares the member's
 * report revision with the one the plan read; the grows txn compares the
 * budget's version.  A failed txn ends the plan.  The plan, per member
 * with a report, is free within the rules (the allocator is not the
 * point): keep the grant, or give it any held from 0 to MAX and a floor
 * of 0 or 1 (at most the held), for its report's session; a member
 * without a report keeps its grant.  A written grant counts at
 * max(held, reported held, member floor); a plan that grows anyone leaves
 * the counted sum <= MAX.
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
 *   MUTANT_NO_TERM        the grant txns do not compare the term
 *   MUTANT_OTHER_SESSION  a node follows a grant made for another (older)
 *                         session of its own
 *   MUTANT_EARLY_FREE     the plan counts a cut grant at its new held before
 *                         the member reports it
 *   MUTANT_RAISE_EARLY    a node raises its max before any grant says so
 *   MUTANT_STORE_FIRST    the store's view of a session may end before the
 *                         node's own (fence late)
 *   MUTANT_RAISE_NO_GREV  the report of a raise does not compare the grant
 *   MUTANT_RAISE_FIRST    a node raises its group when it decides the
 *                         report, before it is written
 *   MUTANT_CUT_NO_RREV    a coordinator's cut does not compare the report
 *   MUTANT_FENCE_GRANT_FLOOR  a node fences to its current grant's floor,
 *                         not to the one its member key acknowledges
 *   MUTANT_MFLOOR_NO_CMP  a raised member floor is written without the
 *                         grant compare (with the batched reports)
 *   MUTANT_MFLOOR_ACK_FIRST  a lowered floor is written to the member key
 *                         before the node fences to it (passes: not a
 *                         hole, proof/README.md; not in check.sh)
 *   REJOIN_GRANT_FLOOR    a rejoin claims its known grant's floor too (the
 *                         C code before a991cfb): must fail
 *
 * Left out: the allocator, joins (a claim above the base), leaves and
 * member removal, limits changes, decentralized records in the same
 * budget, the dead band, demand-only reports (they only make compares
 * fail), txn sizes (each pass is one txn), watch restarts, node stalls
 * past the margin (lease.h's timing assumption), more than DEPOSES
 * deposals and SESSMAX sessions per node.
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
/* At most this many txns that write grants (the search's bound, as
 * lease.pml's clock ticks). */
#ifndef PLANS
#define PLANS 3
#endif
/* The highest floor a plan gives (floors move between 0 and it). */
#ifndef FLOORMAX
#define FLOORMAX 1
#endif

/* the store */
byte g_held[N];
byte g_floor[N];
byte g_sess[N];     /* the session the grant was made for               */
bool r_on[N];       /* a report exists (under session s_sess)            */
byte r_held[N];
byte s_sess[N];     /* the session of the report key, 0: ran out       */
byte m_floor[N];    /* the member key's acknowledged floor              */
byte c_term;        /* the coord key: its create revision, 0: absent     */
bool cmoved[2];     /* the version was written since k's snapshot        */
byte rmoved[2];     /* bit j: j's report was written since k's snapshot  */
bool busy[2];       /* coordinator k holds a plan (else the two above are
                     * kept 0: they matter only to its compares)        */
bool gok[N];        /* j's grant unchanged since its pending decision    */

/* the nodes */
byte usage[N];
byte lmax[N];       /* the group's applied max                           */
byte sess[N];       /* its current session                               */
bool leased[N];     /* its own view runs (else fenced)                   */
byte rh[N];         /* its last written report's held (c_rep_held)       */
byte mfl[N];        /* its acknowledged floor (c_mfloor)                 */
byte pfl[N];        /* the floor it fences to (l->floor)                 */
byte kg_h[N], kg_f[N], kg_s[N];  /* the grant it knows (from the watch) */
bool pend[N];       /* a report decided, not yet answered                */
byte p_h[N], p_f[N];
bool p_mf[N], p_raise[N];
chan w[N] = [WQ] of { byte, byte, byte };   /* held, floor, session */

byte elections;
byte deposes;
byte plans;         /* grant txns that succeeded                         */

#define MIN(a, b) (a < b -> a : b)
#define MAXOF(a, b) (a > b -> a : b)
#define CNT(j) (r_on[j] -> \
		(g_sess[j] == s_sess[j] -> MAXOF(MAXOF(g_held[j], r_held[j]), m_floor[j]) \
					: MAXOF(MAXOF(g_floor[j], r_held[j]), m_floor[j])) \
		: MAXOF(g_floor[j], m_floor[j]))
#define SUMC (CNT(0) + CNT(1))
#define SUMU (usage[0] + usage[1])
#define OVER(j) (usage[j] > CNT(j))

#ifdef MUTANT_OTHER_SESSION
#define CUR(i) (kg_s[i] != 0)
#else
#define CUR(i) (kg_s[i] != 0 && kg_s[i] == sess[i])
#endif

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

inline rmoved_set(j)
{
	if
	:: busy[0] -> rmoved[0] = rmoved[0] | (1 << j)
	:: else
	fi;
	if
	:: busy[1] -> rmoved[1] = rmoved[1] | (1 << j)
	:: else
	fi
}

inline expire(j)
{
	s_sess[j] = 0;
	r_on[j] = false;
	r_held[j] = 0;
	rmoved_set(j)
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
	byte t, h, f, b;

end:	do
	:: atomic {
		/* the watch: the latest grant is the one it knows */
		nempty(w[i]) -> w[i]?kg_h[i], kg_f[i], kg_s[i]
	   }
	:: atomic {
		leased[i] && !pend[i] ->
		/* lease_step(): a cut applies now, a raise waits for the
		 * report of it */
		t = (CUR(i) -> kg_h[i] : rh[i]);
		if
		:: t < lmax[i] ->
			lmax[i] = t;
			if
			:: usage[i] > t -> usage[i] = t
			:: true	/* -EBUSY: reclaimed later, or not */
			fi
		:: else
		fi;
		h = MAXOF(t, MIN(usage[i], rh[i]));
		f = (CUR(i) -> kg_f[i] : mfl[i]);
#ifndef MUTANT_MFLOOR_ACK_FIRST
		/* a lower floor: fenced to from now, acknowledged after */
		if
		:: f < pfl[i] -> pfl[i] = f
		:: else
		fi;
#endif
#ifdef MUTANT_FENCE_GRANT_FLOOR
		if
		:: CUR(i) -> pfl[i] = kg_f[i]
		:: else
		fi;
#endif
		if
		:: h != rh[i] || f != mfl[i] ->
			pend[i] = true;
			p_h[i] = h;
			p_f[i] = f;
			p_mf[i] = (f != mfl[i]);
#ifdef MUTANT_MFLOOR_NO_CMP
			p_raise[i] = (h > rh[i]);
#else
			p_raise[i] = (h > rh[i] || f > mfl[i]);
#endif
			/* the grant it knows is the store's if no later
			 * one is still in its watch */
			gok[i] = empty(w[i]);
#ifdef MUTANT_RAISE_FIRST
			if
			:: t > lmax[i] -> lmax[i] = t
			:: else
			fi
#endif
		:: else ->
			/* reported already: apply it */
			if
			:: t > lmax[i] -> lmax[i] = t
			:: else
			fi
		fi;
		t = 0; h = 0; f = 0
	   }
	:: atomic {
		pend[i] && leased[i] ->
		/* the report (and the member key's floor), under its
		 * session; a raise compares the grant */
#ifdef MUTANT_RAISE_NO_GREV
		if
		:: s_sess[i] == sess[i] ->
#else
		if
		:: s_sess[i] == sess[i] && (!p_raise[i] || gok[i]) ->
#endif
			r_held[i] = p_h[i];
			rmoved_set(i);
			rh[i] = p_h[i];
			if
			:: p_mf[i] ->
				m_floor[i] = p_f[i];
				mfl[i] = p_f[i];
				pfl[i] = p_f[i]
			:: else
			fi;
			/* round_done(): a raise, up to the current grant */
			if
			:: lmax[i] < p_h[i] && CUR(i) -> lmax[i] = MAXOF(lmax[i], MIN(p_h[i], kg_h[i]))
			:: else
			fi
		:: else	/* failed: stepped again */
		fi;
		pend[i] = false;
		p_h[i] = 0; p_f[i] = 0; p_mf[i] = false; p_raise[i] = false; gok[i] = false
	   }
	:: atomic {
		leased[i] ->
		/* its own view of the session ends: fence, to the floor it
		 * acknowledged, reclaimed within the margin */
		lmax[i] = MIN(lmax[i], pfl[i]);
		if
		:: usage[i] > lmax[i] -> usage[i] = lmax[i]
		:: else
		fi;
		leased[i] = false;
		pend[i] = false;
		p_h[i] = 0; p_f[i] = 0; p_mf[i] = false; p_raise[i] = false; gok[i] = false
	   }
	:: atomic {
		!leased[i] && sess[i] < SESSMAX ->
		/* lease_register(): a new session, claiming its base */
		sess[i]++;
#ifdef REJOIN_GRANT_FLOOR
		/* as store_etcd_coord.c's lease_register() had it before
		 * a991cfb: the floor of the grant it knows too (that grant
		 * may have been rewritten since, and the claim compares
		 * nothing) */
		b = MAXOF((kg_s[i] != 0 -> kg_f[i] : 0), mfl[i]);
#else
		/* its acknowledged floor: the store counts it in any case */
		b = mfl[i];
#endif
		assert(usage[i] <= b && lmax[i] <= b);
		s_sess[i] = sess[i];
		r_on[i] = true;
		r_held[i] = b;
		rmoved_set(i);
		rh[i] = b;
		leased[i] = true;
		b = 0
	   }
#ifdef MUTANT_RAISE_EARLY
	:: atomic { leased[i] && lmax[i] < MAX -> lmax[i] = MAX }
#endif
	od
}

/* Plan member j from the snapshot: keep its grant (wr false, n what it
 * counts now) or a new held h from 0 to MAX and the floor min(h, ft), for
 * its report's session, counted at n = max(h, reported held, member
 * floor).  ft: the plan's floor (min / the reporting members, coord.c),
 * 0 or FLOORMAX. */
inline plan(j, ft, h, f, s, wr, n)
{
	n = CNT(j);
	wr = false;
	if
	:: r_on[j] ->
		if
		:: true
		:: h = 0;
			do
			:: h < MAX -> h++
			:: break
			od;
			f = MIN(h, ft);
			s = s_sess[j];
			if
			:: h != g_held[j] || f != g_floor[j] || s != g_sess[j] ->
				wr = true;
#ifdef MUTANT_EARLY_FREE
				n = h
#else
				n = MAXOF(MAXOF(h, r_held[j]), m_floor[j])
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
	gok[j] = false;
	w[j]!h, f, s
}

/* A cut's compare: the member's report is the one the plan read. */
#ifdef MUTANT_CUT_NO_RREV
#define RREV_OK(k, j, wr, cut) true
#else
#define RREV_OK(k, j, wr, cut) (!(wr) || !(cut) || (rmoved[k] & (1 << j)) == 0)
#endif
#ifdef MUTANT_NO_TERM
#define TERM_OK(t) true
#else
#define TERM_OK(t) (c_term == t)
#endif

proctype coord(byte k)
{
	byte t, ft, h0, h1, f0, f1, s0, s1, n0, n1;
	bool w0, w1, u0, u1, c0, c1;

end:	do
	:: atomic {
		t == 0 && c_term == 0 && elections < DEPOSES + 1 ->
		/* campaign: create coord/NAME; the term is its revision */
		elections++;
		c_term = elections;
		t = c_term
	   }
	:: atomic {
		t != 0 && plans < PLANS ->
		/* the snapshot: one range read */
		if
		:: c_term != t -> t = 0; goto next
		:: else
		fi;
		busy[k] = true;
		if
		:: ft = 0
		:: ft = FLOORMAX
		fi;
		plan(0, ft, h0, f0, s0, w0, n0);
		plan(1, ft, h1, f1, s1, w1, n1);
		ft = 0;
		/* u: the write makes the member count for more (a grow) */
		u0 = (w0 && n0 > CNT(0));
		u1 = (w1 && n1 > CNT(1));
		/* c: a cut (below the grant's held, as the plan read it) */
		c0 = (w0 && h0 < g_held[0]);
		c1 = (w1 && h1 < g_held[1]);
		if
		:: !w0 && !w1 -> goto next
		:: (u0 || u1) && n0 + n1 > MAX -> goto next	/* no room: not this plan */
		:: else
		fi;
		n0 = 0; n1 = 0
	   }
	   /* write_grants(), later: the writes that raise no one */
	   atomic {
		(!(w0 && !u0) || len(w[0]) < WQ) && (!(w1 && !u1) || len(w[1]) < WQ) ->
		if
		:: !(w0 && !u0) && !(w1 && !u1) -> skip
		:: TERM_OK(t) && RREV_OK(k, 0, w0 && !u0, c0) && RREV_OK(k, 1, w1 && !u1, c1) ->
			plans++;
			if
			:: w0 && !u0 -> put_grant(0, h0, f0, s0)
			:: else
			fi;
			if
			:: w1 && !u1 -> put_grant(1, h1, f1, s1)
			:: else
			fi
		:: else -> goto next	/* a compare failed: the plan ends */
		fi
	   }
	   /* then the grows */
	   atomic {
		(!u0 || len(w[0]) < WQ) && (!u1 || len(w[1]) < WQ) ->
		if
		:: !u0 && !u1 -> skip
		:: TERM_OK(t) && !cmoved[k] && RREV_OK(k, 0, u0, c0) && RREV_OK(k, 1, u1, c1) ->
			plans++;
			if
			:: u0 -> put_grant(0, h0, f0, s0)
			:: else
			fi;
			if
			:: u1 -> put_grant(1, h1, f1, s1)
			:: else
			fi;
			cmoved[0] = busy[0];
			cmoved[1] = busy[1]
		:: else	/* the term, the version or a report moved */
		fi;
next:		busy[k] = false;
		cmoved[k] = false;
		rmoved[k] = 0;
		h0 = 0; h1 = 0; f0 = 0; f1 = 0; s0 = 0; s1 = 0; n0 = 0; n1 = 0;
		w0 = false; w1 = false; u0 = false; u1 = false; c0 = false; c1 = false
	   }
	od
}

init
{
	byte j;
	byte fl;

	atomic {
		/* both nodes joined on session 1 at their floors (node 0: FLOOR0,
		 * node 1: 0), granted and acknowledged; no coordinator now */
		j = 0;
		do
		:: j < N ->
			fl = (j == 0 -> FLOOR0 : 0);
			g_held[j] = fl;
			g_floor[j] = fl;
			g_sess[j] = 1;
			r_on[j] = true;
			r_held[j] = fl;
			s_sess[j] = 1;
			m_floor[j] = fl;
			sess[j] = 1;
			lmax[j] = fl;
			rh[j] = fl;
			mfl[j] = fl;
			pfl[j] = fl;
			kg_h[j] = fl;
			kg_f[j] = fl;
			kg_s[j] = 1;
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
