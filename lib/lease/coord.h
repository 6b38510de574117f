/* SPDX-License-Identifier: MIT */
/*
 * The coordinator's plan: a budget's members in, the grants to write out.
 * Pure: no I/O, no clock, no allocation the caller does not see.  The
 * coordinated etcd store (coord_etcd.c) calls it on its snapshot of a
 * budget; benchmarks/bench_lease's simulator calls it for 10,000 members;
 * tests/test_lease_coord.c checks it against its definition.
 *
 * What the store counts for a member (docs/leases.md, "Scale"): with its
 * grant g, its report r and the floor f its member key acknowledges,
 *   r present, for g's session:        max(g.held, r.held, f)
 *   r present, g absent or for another session: max(g.floor, r.held, f)
 *   r absent (its session ran out):    max(g.floor, f)
 * (a node falls to f when its own view of its session ends: a floor the
 * coordinator lowers counts until the node has acknowledged it).
 * A plan never raises the sum of what is counted past the budget's max:
 * a grant that shrinks still counts at the member's reported held until the
 * member reports the shrink, so room is freed only once the holder has let
 * go of it.
 */
#ifndef SL_LEASE_COORD_H
#define SL_LEASE_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl__coord_member {
	/* In: the store's state. */
	bool granted;        /* a grant key exists                                   */
	bool grant_current;  /* it was made for the session of the member's report   */
	uint64_t g_held, g_floor; /* the grant (0, 0 when none)                       */
	bool reported;       /* a report exists (its session runs)                    */
	uint64_t r_held;     /* what the report says the member holds                 */
	uint64_t demand;     /* what it asks for (reported; 0 without a report)       */
	uint64_t m_floor;    /* the floor its member key acknowledges: counted in
			      * any case, until the member acknowledges a lower one */
	/* Out: the grant to hold after the plan (== the input when unchanged). */
	uint64_t held, floor;
	bool write;          /* the grant must be (re)written                          */
	bool grows;          /* the write makes the member count for more            */
};

struct sl__coord_budget {
	uint64_t max, min;
	/* A grant is rewritten only when it moves by more than this (a dead
	 * band against rewriting every member for a small move); shrinks the
	 * budget needs (it is over max, or a grow beyond the band finds too
	 * little room), moves to or from 0 and session changes are always
	 * written.  0: every change is written. */
	uint64_t dead_band;
};

/* What the store counts for @m before the plan. */
uint64_t sl__coord_counted(const struct sl__coord_member *m);

/*
 * Plan the grants of @n members @m of @b.  Targets are max-min fair
 * (alloc.h) over the reporting members' demands, within b->max less what
 * the others count (members without a report count at their floor), with
 * floors of b->min / (reporting members), raised only from room.  Sets
 * every member's held, floor, write and grows; a member without a report
 * keeps its grant as it is (it counts at its floor, which only the member's
 * next session or its removal changes).
 *
 * Shrinks are always planned; grows only into room: after the plan, the
 * sum over the members of what the store would count (each member's
 * report as it is now) is at most b->max, or, if it was above b->max
 * before the plan, no member counts for more than before.
 * Room is shared max-min fairly over what the growers ask for beyond what
 * they count now.  A reporting member's floor is min(min / p, its held),
 * with p the least power of two at or above n: a join moves the floors of
 * every member only when it takes n past a power of two, not each time
 * (a thousand members joining at once would otherwise have every grant
 * written again with each plan of their joins).
 * grows: what the store counts for the member after the write is more
 * than before (the txn must compare the budget's version).
 * Returns the number of members to write.  @scratch: 2 * @n uint64_t and
 * @n struct sl__lease_alloc_in of the caller's, sl__coord_scratch_size(@n)
 * bytes, aligned as malloc() aligns (SIZE_MAX if that does not fit a
 * size_t); its contents do not matter.  @n == 0, or a NULL @b, @m or
 * @scratch: nothing to write.
 */
size_t sl__coord_scratch_size(size_t n);
size_t sl__coord_plan(const struct sl__coord_budget *b, struct sl__coord_member *m, size_t n,
		      void *scratch);

/*
 * A node's side of one lease, from one period to the next (the run thread
 * of store_etcd_coord.c does the I/O around it).  The order it encodes:
 * a cut is applied to the group before the report says so, and the report
 * then says at least the usage read after the cut; a raise is applied only
 * after our report of it is written, so that the store counts a raise from
 * our report whatever the coordinator does with the grant meanwhile.
 */
struct sl__coord_lease {
	uint64_t applied;    /* the group's max now                                */
	uint64_t rep_held;   /* what our last report said we hold                  */
	uint64_t rep_demand; /* and asked for                                      */
	bool grant_current;  /* a grant for our current session is known           */
	uint64_t g_held;     /* its held                                           */
	bool view_ended;     /* our own view of the session has ended             */
};

/* The share the group should follow: the grant's (our report's without
 * one), never raised once our own view of the session has ended.  Lower
 * than applied: apply it now; higher: report it first. */
uint64_t sl__coord_lease_target(const struct sl__coord_lease *x);

/* What to report holding once @target applies and the group's usage,
 * read after any cut, is @usage: the target, or what is still used of
 * what we reported, if more. */
uint64_t sl__coord_lease_held(uint64_t target, uint64_t usage, uint64_t rep_held);

/* Is a report worth a write: a held that moved, or a demand that moved by
 * more than an eighth of the share (at least 1)? */
bool sl__coord_lease_report(const struct sl__coord_lease *x, uint64_t held, uint64_t demand);

/*
 * Pacing of a writer's store writes (a node's reports, or the grants of the
 * budgets it leads), by the latency etcd answers with.  etcd applies every
 * write on every member, and a leader that is more than a second behind in
 * applying answers every keepalive "unavailable": a thousand nodes sending
 * a full transaction each at once are seconds of apply on a small cluster,
 * and every session runs out.  So a writer sends at most a window
 * of operations a round, and waits a gap between rounds: the window starts
 * small and doubles while the slowest write of a round answers fast (within
 * 100 ms of the least latency the writer has seen); a slow one (300 ms
 * above it, or a failed call) halves it, and once it is at its least,
 * doubles the gap instead.  Each writer follows its own latency, which every writer
 * of the cluster shares: together they keep etcd's backlog near the target.
 * A node's failed keepalive counts as a slow round of both of its writers
 * (store_etcd_coord.c): every node hears of a backlog past a second within
 * a keepalive interval, sooner than from its own writes queued behind it.
 *
 * The window starts at its least.  etcd's cost is per entry of its log and
 * per key: alone, three members on two cores took 1,780 one-key
 * transactions a second, or 242 of 128 keys; beside a thousand bench
 * nodes, about 250 entries and 2,000 keys a second: there, a thousand
 * first rounds of four keys are two seconds of backlog already.
 */
#define SL__PACE_WINDOW_MIN 4u    /* operations a round, at the least        */
#define SL__PACE_WINDOW_START 4u
#define SL__PACE_WINDOW_MAX 8192u
/* A txn carries at most this many operations (etcd's --max-txn-ops, 128 by
 * default), the compares apart. */
#define SL__COORD_TXN_OPS 126u
/* A round is fast when its slowest write took less than this above the
 * least latency the writer has seen (its base: what the cluster takes to
 * answer without a queue), slow above SL__PACE_SLOW_NS. */
#define SL__PACE_FAST_NS INT64_C(100000000)
#define SL__PACE_SLOW_NS INT64_C(300000000)
#define SL__PACE_BASE_MAX_NS INT64_C(250000000)

struct sl__coord_pace {
	uint32_t window;  /* operations the next round may write (0: not set up)  */
	int64_t gap_ns;   /* waited after a round before the next may write      */
	int64_t next_ns;  /* the next round may write from then                  */
	int64_t base_ns;  /* the least latency seen (0: none yet); never raised   */
};

/* The longest gap of a writer whose session's own view lasts @view_ns: two
 * views.  A fleet's least load is its number of writers over it: half a
 * view let a thousand writers keep a slow cluster busy (the fleet model of
 * tests/test_lease_coord.c took 595 s, not 263). */
int64_t sl__coord_pace_cap(int64_t view_ns);

/* May a round write at @now?  (An uninitialised pace is set up first; a
 * writer quiet for longer than its gap has it halved for each gap.) */
bool sl__coord_pace_due(struct sl__coord_pace *p, int64_t now);

/* A round that wrote ended at @now, its slowest write having taken @lat_ns
 * (@failed: a call failed, not a compare: taken as slow).  @period_ns
 * is the first gap, @cap_ns the longest; @rnd spreads the writers' gaps
 * (by up to a quarter). */
void sl__coord_pace_done(struct sl__coord_pace *p, int64_t now, int64_t lat_ns, bool failed,
			 int64_t period_ns, int64_t cap_ns, uint64_t rnd);

#endif /* SL_LEASE_COORD_H */
