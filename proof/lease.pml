/* SPDX-License-Identifier: MIT */
/*
 * lease.pml: the lease protocol of libsoftlimit-lease (include/softlimit/
 * lease.h, "Safety"), every interleaving of three participants and a store.
 *
 * One budget of MAX units.  The store keeps a record per participant (held,
 * floor, state, the store's own count of time left on the lease) and the
 * budget's version, bumped by every write that makes a record count for
 * more.  A record counts its held while its lease runs (S_HELD), its floor
 * once the store's view of the lease ended (S_FENCED), nothing once freed.
 *
 * Each participant is a group (usage, local max) and its lease thread.  Its
 * usage grows by charges, at any interleaving with the lease thread's steps
 * (a join's included), only while under its local max (sl_group_set_limits
 * holds for every later charge); each period it reads the view, picks any
 * target from its floor to MAX (the allocator is not the point: every
 * target is tried) and
 *   - shrinks: lowers its local max first, reclaims (or not: -EBUSY), reads
 *     its usage, then writes held' = max(target, min(usage, held));
 *   - grows: only by room free in its view, by a write that fails if the
 *     version moved since the read; raises its local max on the reply;
 *   - renews otherwise.
 * Its own view of the lease ends TTL - MARGIN ticks after it SENT the last
 * successful write; the store's ends TTL ticks after it applied it (later).
 * When its own view ends it fences: local max = min(local max, the floor
 * its last join was granted), reclaimed to it.
 *
 * Faults: any store operation may fail (a holder cut off from an etcd
 * store: it keeps running, the store expires it to its floor); replies are
 * delayed (a separate step, while time passes); a holder may crash (its
 * memory is gone; the store frees its record at the next read: shm's dead
 * pid); a holder may stall (SIGSTOP: no step at all; shm sees its pid alive
 * and keeps counting its share); with -DCFG_WIPE the store may restart
 * empty (a new incarnation): holders that see it fence to their floor and
 * rejoin; with -DCFG_JOIN participant 2 joins after the start, its group
 * charging up to its own max (MAX) until the join lowers it.
 *
 * A join or rejoin (sl__lease_register) claims from the room no one holds,
 * in this order: read the view and the usage c; S = max(floor, c), or give
 * up if S > free (lowering the max to free); LOWER the local max to S
 * (never raising it; reclaim or -EBUSY); read the usage c' again; claim
 * held = max(S, c') (give up this round if held > free); write it with the
 * version compare; only on the reply RAISE the local max to held.  Charges
 * between the first read and the lowering are then in c', and charges
 * after it stop at S <= held.
 *
 * Time is a clock process that ticks up to TMAX times.  The timing
 * assumption of lease.h is a guard on the clock: time does not pass while a
 * running holder whose own view ended has not yet fenced (fencing, reclaim
 * to the floor included, takes less than the margin).
 *
 * Safety, checked in every state by the monitor: the usages of the living
 * participants sum to at most MAX (a fenced one's usage is at most its
 * floor, which the store keeps counting), and so do the store's counts;
 * and a participant the store counts since its (re)join in the current
 * incarnation never uses more than the store counts for it (usage <=
 * CNT).  The usage of a participant that never joined is the host's, not
 * the budget's: it is in neither check.  -DNO_USAGE_SUM leaves the first
 * check out (for CFG_WIPE, whose known gap fails it), keeping the others.
 *
 * Mutants (each must fail):
 *   MUTANT_REPORT_FIRST  a shrink reports its target before lowering its max
 *   MUTANT_NO_VERSION    a grow is written without the version compare
 *   MUTANT_STORE_FIRST   the store's view ends before the holder's own
 *   MUTANT_NO_FLOOR      an expired record is freed instead of counting its floor
 *   MUTANT_SHRINK_RAISES a shrink sets the local max to its target, which
 *                        raises it when the holder is fenced at its floor
 *   MUTANT_RENEW_EXPIRED the store takes a renewal (grows=false) of a record
 *                        whose lease ended, which then counts its held again
 *   MUTANT_JOIN_LOWER_LAST a join reads the usage, writes held = max(floor,
 *                        usage) and only then sets the local max to held
 *                        (lease.c before the fix): charges in between pass
 *                        held, and nothing ever counts them (CFG_JOIN for
 *                        the join, CFG_WIPE -DNO_USAGE_SUM for the rejoin)
 *
 * Left out: the allocator (targets are free choices), soft limits, changing
 * the budget's limits or deleting it (and the rejoin after it), joins after
 * the start but CFG_JOIN's one, more than one crash, stall or wipe.
 */

#define N 3
#ifndef MAX
#define MAX 2
#endif
#ifndef TTL
#define TTL 2
#endif
#ifndef MARGIN
#define MARGIN 1
#endif
#ifndef TMAX
#define TMAX 4
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef STALLS
#define STALLS 1
#endif

#ifdef MUTANT_STORE_FIRST
#define OWN_TTL (TTL + 1)
#else
#define OWN_TTL (TTL - MARGIN)
#endif

#define S_NONE 0
#define S_HELD 1
#define S_FENCED 2

/* the store */
byte s_held[N];
byte s_floor[N];
byte s_st[N];
byte s_left[N];
/* The budget's version, abstracted: moved[i] says whether a write that
 * counts for more happened since participant i's last read.  (A counter
 * would grow without bound; this is what the compare looks at.) */
bool moved[N];
byte s_inc;

/* the participants */
byte usage[N];
byte lmax[N];
byte own_left[N];   /* ticks until its own view of the lease ends       */
byte cand[N];       /* a write in flight: own_left if it succeeds       */
bool leased[N];     /* its own view runs (else fenced at its floor)      */
bool dead[N];
bool stalled[N];
byte h_inc[N];      /* the store incarnation it joined                   */
byte fl[N];         /* its floor: 1 for participant 0, 0 for the others */
byte pfl[N];        /* the floor its last join was granted: min(fl, free) */
/* Ghost, for the monitor: 0 never joined (its usage is the host's), 1
 * joined once but not counted by this incarnation of the store, 2 counted
 * since its (re)join in this incarnation. */
byte jst[N];

byte now;
byte crashes;
byte stalls;
byte wipes;

#define CNT(j) (s_st[j] == S_HELD -> s_held[j] : (s_st[j] == S_FENCED -> s_floor[j] : 0))
#define SUMC (CNT(0) + CNT(1) + CNT(2))
#define U(j) (jst[j] != 0 -> usage[j] : 0)
#define SUMU (U(0) + U(1) + U(2))
/* a participant the store counts that uses more than it counts */
#define OVER(j) (jst[j] == 2 && !dead[j] && usage[j] > CNT(j))
#ifdef NO_USAGE_SUM
#define SUMU_OK true
#else
#define SUMU_OK (SUMU <= MAX)
#endif
#define MIN(a, b) (a < b -> a : b)
#define MAXOF(a, b) (a > b -> a : b)
#define BUMP moved[0] = true; moved[1] = true; moved[2] = true
/* a running holder whose own view ended and that has not fenced yet */
#define MUST_FENCE(j) (!dead[j] && !stalled[j] && leased[j] && own_left[j] == 0)

active proctype monitor()
{
end:	atomic {
		(!SUMU_OK || SUMC > MAX || OVER(0) || OVER(1) || OVER(2)) ->
		assert(SUMU_OK);
		assert(SUMC <= MAX);
		assert(!OVER(0) && !OVER(1) && !OVER(2))
	}
}

inline expire(j)
{
#ifdef MUTANT_NO_FLOOR
	s_st[j] = S_NONE
#else
	s_st[j] = S_FENCED
#endif
}

active proctype clock()
{
	byte j;

end:	do
	:: atomic {
			/* the guard inside the atomic: checked with the tick */
			now < TMAX && !MUST_FENCE(0) && !MUST_FENCE(1) && !MUST_FENCE(2) ->
			now++;
			j = 0;
			do
			:: j < N ->
				if
				:: own_left[j] > 0 -> own_left[j]--
				:: else
				fi;
				if
				:: cand[j] > 0 -> cand[j]--
				:: else
				fi;
				/* shm: a stopped process that is alive keeps its share */
				if
				:: s_st[j] == S_HELD && !(stalled[j] && !dead[j]) ->
					if
					:: s_left[j] > 0 -> s_left[j]--
					:: else
					fi;
					if
					:: s_left[j] == 0 -> expire(j)
					:: else
					fi
				:: else
				fi;
				j++
			:: else -> break
			od
		}
	od
}

/* shm: any store operation frees the records of dead processes first */
inline free_dead()
{
	if
	:: dead[0] -> s_st[0] = S_NONE
	:: else
	fi;
	if
	:: dead[1] -> s_st[1] = S_NONE
	:: else
	fi;
	if
	:: dead[2] -> s_st[2] = S_NONE
	:: else
	fi
}

/* Fall to the floor it was granted; never a raise (sl__lease_fence applies
 * min(applied, floor)).  Reclaim reaches it within the margin (lease.h's
 * timing assumption). */
inline fence()
{
	atomic {
		lmax[i] = MIN(lmax[i], pfl[i]);
		if
		:: usage[i] > lmax[i] -> usage[i] = lmax[i]
		:: else
		fi;
		leased[i] = false
	}
}

/* The group: fills up to its local max in one step (a cache fills its
 * share; smaller steps only add states: a usage below the max reports less
 * and frees room, as reclaim does); nothing while stopped.  It never frees
 * on its own: only reclaim lowers usage.  It runs at any interleaving with
 * its lease thread, between the steps of a join too.
 * -DFREES lets it free too (more states, no new behaviour for the sum);
 * -DUNIT_CHARGES lets it charge one unit at a time too. */
proctype group(byte i)
{
end:	do
	:: atomic { !stalled[i] && !dead[i] && usage[i] < lmax[i] -> usage[i] = lmax[i] }
#ifdef UNIT_CHARGES
	:: atomic { !stalled[i] && !dead[i] && usage[i] + 1 < lmax[i] -> usage[i]++ }
#endif
#ifdef FREES
	:: atomic { !stalled[i] && !dead[i] && usage[i] > 0 -> usage[i]-- }
#endif
	od
}

/* The lease thread of the same process. */
proctype lease(byte i)
{
	byte h, fr, t, c, g, nh, inc;
	bool ok, joined, grow;

end:	do
	:: atomic { MUST_FENCE(i) -> fence() }
	:: atomic {
		!stalled[i] && !dead[i] && !MUST_FENCE(i) ->
		/* one period: read the view (a failed read does what a failed
		 * write does, nothing: only writes fail in the model) */
		free_dead();
		moved[i] = false;
		inc = s_inc;
		joined = (s_st[i] != S_NONE && inc == h_inc[i]);
		h = CNT(i);
		fr = MAX - SUMC;
		if
		:: inc != h_inc[i] ->
			/* the store was replaced: fall to the floor, then rejoin
			 * (store_reset: only a holder that had registered) */
			if
			:: jst[i] != 0 -> fence()
			:: else
			fi;
			h_inc[i] = inc
		:: else
		fi;
		if
		:: !joined ->
			/* join (sl__lease_register): S = max(floor, usage) from
			 * the room no one holds */
			c = usage[i];
			g = MIN(fl[i], fr);
			nh = MAXOF(c, g);
			grow = true;
			if
			:: nh > fr ->
				/* does not fit: lower the local max to what is
				 * free (never raise it), claim a later period */
				lmax[i] = MIN(lmax[i], fr);
				if
				:: usage[i] > lmax[i] -> usage[i] = lmax[i]
				:: true
				fi;
				goto done
			:: else
			fi;
#ifndef MUTANT_JOIN_LOWER_LAST
			goto lower
#else
			goto write
#endif
		:: else ->
			/* a target: the floor or the whole budget (grows stop at
			 * what is free, so shares in between arise too;
			 * -DMID_TARGETS adds MAX - 1) */
			if
			:: t = fl[i]
#ifdef MID_TARGETS
			:: t = MAX - 1
#endif
			:: t = MAX
			fi;
			g = (t > h -> (t - h < fr -> t - h : fr) : 0);
			if
			:: t < h ->
#ifndef MUTANT_REPORT_FIRST
				/* shrink: lower the local max, reclaim, read the usage;
				 * report max(target, min(usage, held)).  Lower only:
				 * a fenced holder's max (its floor) may be below the
				 * target, and a max rises only on a write's reply
				 * (MUTANT_SHRINK_RAISES sets it to the target). */
#ifdef MUTANT_SHRINK_RAISES
				lmax[i] = t;
#else
				lmax[i] = (t < lmax[i] -> t : lmax[i]);
#endif
				if
				:: usage[i] > t -> usage[i] = t
				:: true /* -EBUSY: what is over stays until reclaimed */
				fi;
				c = usage[i];
				nh = (c < h -> c : h);
				nh = (t > nh -> t : nh);
#else
				nh = t;
#endif
				grow = false
			:: g > 0 ->
				/* grow: only by room free in the view */
				nh = h + g;
				t = nh;
				grow = true
			:: else ->
				/* renew */
				nh = h;
				t = h;
				grow = false
			fi
		fi;
		/* (a goto out of an atomic ends it: the next step is the
		 * write's own, as if it followed here) */
		goto write
	   }
#ifndef MUTANT_JOIN_LOWER_LAST
		/* A join's second step (only a join's): lower the local max to
		 * S before claiming anything (never raising it), reclaim or not
		 * (-EBUSY), and read the usage again: whatever was charged since
		 * the first read is in c', and later charges stop at S.  Claim
		 * max(S, c'), or give up this round if that does not fit in
		 * what was free. */
lower:		atomic {
			lmax[i] = MIN(lmax[i], nh);
			if
			:: usage[i] > lmax[i] -> usage[i] = lmax[i]
			:: true
			fi;
			c = usage[i];
			nh = MAXOF(nh, c);
			if
			:: nh > fr -> goto done
			:: else
			fi
		}
#endif
		/* the write, some time after the read */
write:		atomic {
			cand[i] = OWN_TTL;
			if
			:: grow && !joined ->
				if
				:: !moved[i] && s_inc == inc ->
					s_held[i] = nh;
					s_floor[i] = g;
					s_st[i] = S_HELD;
					s_left[i] = TTL;
					BUMP;
					ok = true;
					t = nh;
					/* registered from here on: its own view runs
					 * from the send, it fences when that ends
					 * (the clock waits for it), at this floor */
					pfl[i] = g;
					own_left[i] = OWN_TTL;
					leased[i] = true;
					jst[i] = 2
				:: true /* -EAGAIN, or the write failed */
				fi
			:: grow && joined ->
				/* counts for more: only if no such write since the read */
				if
#ifdef MUTANT_NO_VERSION
				:: s_inc == inc && s_st[i] != S_NONE ->
#else
				:: s_inc == inc && s_st[i] != S_NONE && !moved[i] ->
#endif
					s_held[i] = nh;
					s_st[i] = S_HELD;
					s_left[i] = TTL;
					BUMP;
					ok = true
				:: true
				fi
			:: !grow ->
				/* counts no more than now: no compare; refused if it
				 * would count for more (the lease ended since the read) */
				if
#ifdef MUTANT_RENEW_EXPIRED
				:: s_inc == inc && s_st[i] != S_NONE ->
#else
				:: s_inc == inc && s_st[i] != S_NONE && nh <= CNT(i) ->
#endif
					s_held[i] = nh;
					s_st[i] = S_HELD;
					s_left[i] = TTL;
					ok = true
				:: true
				fi
			fi
		}
#ifdef MUTANT_REPORT_FIRST
		atomic {
			if
			:: t < h ->
				lmax[i] = (t < lmax[i] -> t : lmax[i]);
				if
				:: usage[i] > t -> usage[i] = t
				:: true
				fi
			:: else
			fi
		}
#endif
		/* the reply, later still: the own view runs from the send, if it
		 * still does; only then the local max moves to the new share (a
		 * join's raise to held; MUTANT_JOIN_LOWER_LAST's only change of
		 * the max, a lowering as often as not) */
		atomic {
			if
			:: ok && cand[i] > 0 && !dead[i] ->
				own_left[i] = cand[i];
				leased[i] = true;
				lmax[i] = t
			:: else
			fi;
			cand[i] = 0;
done:			/* forget the period: states differ only by what matters */
			ok = false; h = 0; fr = 0; t = 0; c = 0; g = 0; nh = 0; inc = 0;
			joined = false; grow = false
		}
	od
}

/* The faults: one crash, one stop (then SIGCONT), one store wipe (CFG_WIPE). */
active proctype faults()
{
	byte j;

end:	do
	:: atomic { crashes < CRASHES -> crashes++;
		if
		:: j = 0
		:: j = 1
		:: j = 2
		fi;
		dead[j] = true; usage[j] = 0 }
	:: atomic { stalls < STALLS -> stalls++;
		if
		:: j = 0
		:: j = 1
		:: j = 2
		fi;
		stalled[j] = true }
	:: atomic { stalled[0] || stalled[1] || stalled[2] ->
		stalled[0] = false; stalled[1] = false; stalled[2] = false }
#ifdef CFG_WIPE
	:: atomic { wipes == 0 ->
		wipes++;
		s_inc++;
		BUMP;
		/* the new store counts no one */
		jst[0] = (jst[0] != 0 -> 1 : 0);
		jst[1] = (jst[1] != 0 -> 1 : 0);
		jst[2] = (jst[2] != 0 -> 1 : 0);
		s_st[0] = S_NONE;
		s_st[1] = S_NONE;
		s_st[2] = S_NONE }
#endif
	od
}

init
{
	byte j;

	atomic {
		/* three participants joined at their floor, none using
		 * anything; with CFG_JOIN participant 2 not yet joined, its
		 * group at its own max (MAX) */
		do
		:: j < N ->
			fl[j] = (j == 0 -> 1 : 0);
			pfl[j] = fl[j];
#ifdef CFG_JOIN
			if
			:: j == N - 1 ->
				lmax[j] = MAX;
				goto started
			:: else
			fi;
#endif
			s_held[j] = fl[j];
			s_floor[j] = fl[j];
			s_st[j] = S_HELD;
			s_left[j] = TTL;
			lmax[j] = fl[j];
			own_left[j] = OWN_TTL;
			leased[j] = true;
			jst[j] = 2;
started:
			run group(j);
			run lease(j);
			j++
		:: else -> break
		od
	}
}
