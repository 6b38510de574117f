/* SPDX-License-Identifier: MIT */
/*
 * The coordinator's plan (coord.h): a budget's members in, grants out.
 *
 * Four passes over the members, no sort, no allocation:
 *   1. the room the reporting members share (max less what the others
 *      count) and their max-min targets in it (alloc.c);
 *   2. each reporting member's wanted grant: its target, or its grant as it
 *      is when the move is within the dead band;
 *   3. the sum the store would count with every shrink written and every
 *      grow not yet (a shrink counts at max(new held, reported held): it
 *      frees room only as far as the member has reported letting go), and
 *      the room that leaves; when the growers want more than that room, or
 *      the budget is over, the shrinks the dead band held back are needed
 *      after all, and pass 2 runs again without holding them back;
 *   4. the room shared max-min fairly over what the growers want more than
 *      they count now; a grower gets what it asks for or its part of the
 *      room, whichever is less.
 * Every sum saturates: a sum that would pass UINT64_MAX is above any max.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "coord.h"

/* The grant is for the session the member reports under. */
static bool current(const struct sl__coord_member *m)
{
	return m->granted && m->grant_current;
}

/* What the member's own keys count, whatever its grant: its report's held
 * and the floor it acknowledged. */
static uint64_t own(const struct sl__coord_member *m)
{
	return max_u64(m->reported ? m->r_held : 0, m->m_floor);
}

uint64_t sl__coord_counted(const struct sl__coord_member *m)
{
	uint64_t floor = m->granted ? m->g_floor : 0;

	if (!m->reported)
		return max_u64(floor, m->m_floor);
	if (current(m))
		return max_u64(m->g_held, own(m));
	return max_u64(floor, own(m));
}

size_t sl__coord_scratch_size(size_t n)
{
	size_t each = 2 * sizeof(uint64_t) + sizeof(struct sl__lease_alloc_in);

	return n > SIZE_MAX / each ? SIZE_MAX : n * each;
}

/*
 * The grant @m should hold for target @t.  A fresh grant (none yet for
 * this session) is the target itself; a current one moves only beyond the
 * dead band, or to or from 0, or, with @force, down whatever the amount.
 */
static uint64_t wanted(const struct sl__coord_member *m, uint64_t t, uint64_t band, bool force)
{
	uint64_t g = m->g_held;

	/* Never more than a sixteenth of the target itself: a small share
	 * held back by a band sized for the budget would stay more than 10%
	 * off its target for good. */
	band = min_u64(band, t / 16);
	if (!current(m) || t == g || t == 0 || g == 0)
		return t;
	if (t < g)
		return force || g - t > band ? t : g;
	return t - g > band ? t : g;
}

/* What the plan's pass 3 sums: the room left with the shrinks written and
 * the grows not, and what the growers want beyond what they count now. */
struct tally {
	uint64_t counted; /* saturating */
	uint64_t wants;   /* saturating */
};

static struct tally tally(const struct sl__coord_budget *b, const struct sl__coord_member *m,
			  size_t n, const uint64_t *tgt, bool force)
{
	struct tally s = { 0, 0 };
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t base = sl__coord_counted(&m[i]), after;

		if (!m[i].reported) {
			s.counted = sat_add(s.counted, base);
			continue;
		}
		after = max_u64(wanted(&m[i], tgt[k++], b->dead_band, force), own(&m[i]));
		s.counted = sat_add(s.counted, min_u64(after, base));
		s.wants = sat_add(s.wants, sat_sub(after, base));
	}
	return s;
}

/* A grant's floor over @n reporting members: min over the least power of
 * two at or above n (coord.h). */
static uint64_t grant_floor(uint64_t min, size_t n)
{
	unsigned sh = 0;

	if (!n)
		return 0;
	while (sh < 63 && ((size_t)1 << sh) < n)
		sh++;
	return min >> sh;
}

size_t sl__coord_plan(const struct sl__coord_budget *b, struct sl__coord_member *m, size_t n,
		      void *scratch)
{
	struct sl__lease_alloc_in *in = scratch;
	uint64_t *tgt, *give, avail, ft, fg, room;
	size_t i, k, j, nrep = 0, ngrow = 0, writes = 0;
	struct tally s;
	bool force = false;

	if (!b || !n || !m || !scratch)
		return 0;
	tgt = (uint64_t *)(in + n);
	give = tgt + n;

	/* 1: the members without a report count at their floor: the rest is
	 * shared by those with one. */
	avail = b->max;
	for (i = 0; i < n; i++) {
		if (m[i].reported)
			nrep++;
		else
			avail = sat_sub(avail, sl__coord_counted(&m[i]));
	}
	ft = nrep ? b->min / nrep : 0;
	fg = grant_floor(b->min, nrep);
	for (i = 0, k = 0; i < n; i++) {
		if (!m[i].reported)
			continue;
		in[k].demand = m[i].demand;
		in[k].floor = ft;
		in[k].gain = 0;
		k++;
	}
	sl__lease_alloc_maxmin(avail, nrep, in, tgt);
	/* Room nobody asks for is not spread over everyone, beyond an eighth
	 * of each demand: every share would move with each join and leave,
	 * and a budget of a thousand members would see its thousand grants
	 * written again and again.  A member whose demand rises is granted
	 * the room in its coordinator's next plan. */
	for (k = 0; k < nrep; k++) {
		uint64_t cap = max_u64(sat_add(in[k].demand, in[k].demand / 8), in[k].floor);

		if (tgt[k] > cap)
			tgt[k] = cap;
	}

	/* 2, 3: the room; the dead band gives way when a grower or the
	 * budget needs what it holds back. */
	s = tally(b, m, n, tgt, false);
	room = sat_sub(b->max, s.counted);
	if (s.counted > b->max || s.wants > room) {
		force = true;
		s = tally(b, m, n, tgt, true);
		room = sat_sub(b->max, s.counted);
	}

	/* 4: the room, max-min over what the growers want (0 each when it is
	 * none: an over-budget store grows no one). */
	for (i = 0, k = 0; i < n; i++) {
		uint64_t base, after;

		if (!m[i].reported)
			continue;
		base = sl__coord_counted(&m[i]);
		after = max_u64(wanted(&m[i], tgt[k++], b->dead_band, force), own(&m[i]));
		if (after > base) {
			in[ngrow].demand = after - base;
			in[ngrow].floor = 0;
			in[ngrow].gain = 0;
			ngrow++;
		}
	}
	for (j = 0; j < ngrow; j++)
		give[j] = 0;
	sl__lease_alloc_maxmin(room, ngrow, in, give);

	for (i = 0, k = 0, j = 0; i < n; i++) {
		struct sl__coord_member *x = &m[i];
		uint64_t base = sl__coord_counted(x), w, h;

		x->held = x->g_held;
		x->floor = x->g_floor;
		x->write = false;
		x->grows = false;
		if (!x->reported)
			continue; /* counted at its floor until it comes back or goes */
		w = wanted(x, tgt[k++], b->dead_band, force);
		h = w;
		if (max_u64(w, own(x)) > base) {
			/* The allocator spreads room nobody asked for over
			 * all: a grower takes only what it asked for. */
			h = min_u64(w, sat_add(base, min_u64(give[j], in[j].demand)));
			j++;
			/* Part of a grow, within the dead band: not worth a
			 * write; the room stays free for the next plan. */
			if (current(x) && x->g_held && h < w &&
			    h - x->g_held <= min_u64(b->dead_band, w / 16))
				h = x->g_held;
		}
		x->held = h;
		x->floor = min_u64(fg, h);
		x->write = !current(x) || h != x->g_held || x->floor != x->g_floor;
		x->grows = max_u64(h, own(x)) > base;
		if (x->write)
			writes++;
	}
	return writes;
}

uint64_t sl__coord_lease_target(const struct sl__coord_lease *x)
{
	uint64_t t = x->grant_current ? x->g_held : x->rep_held;

	return t > x->applied && x->view_ended ? x->applied : t;
}

uint64_t sl__coord_lease_held(uint64_t target, uint64_t usage, uint64_t rep_held)
{
	return max_u64(target, min_u64(usage, rep_held));
}

bool sl__coord_lease_report(const struct sl__coord_lease *x, uint64_t held, uint64_t demand)
{
	uint64_t moved = demand > x->rep_demand ? demand - x->rep_demand : x->rep_demand - demand;

	return held != x->rep_held || moved > max_u64(x->applied / 8, 1);
}

/* ---- pacing -------------------------------------------------------------- */

int64_t sl__coord_pace_cap(int64_t view_ns)
{
	return view_ns > INT64_MAX / 2 ? INT64_MAX : 2 * view_ns;
}

bool sl__coord_pace_due(struct sl__coord_pace *p, int64_t now)
{
	if (!p->window) {
		p->window = SL__PACE_WINDOW_START;
		p->gap_ns = 0;
		p->next_ns = 0;
		p->base_ns = 0;
	}
	if (now < p->next_ns)
		return false;
	/* A writer quiet for longer than its gap learnt nothing since: what
	 * slowed it may have passed.  Its gap halves for each gap it was
	 * quiet (a node that wrote the last of its joins under load is not
	 * slowed by it for its next report). */
	if (p->gap_ns > 0) {
		int64_t idle = now - p->next_ns;

		while (p->gap_ns > 0 && idle >= p->gap_ns) {
			idle -= p->gap_ns;
			p->gap_ns /= 2;
		}
		/* The quiet time used up here is not used again. */
		p->next_ns = now - idle;
	}
	return true;
}

void sl__coord_pace_done(struct sl__coord_pace *p, int64_t now, int64_t lat_ns, bool failed,
			 int64_t period_ns, int64_t cap_ns, uint64_t rnd)
{
	int64_t first = period_ns / 4 > 0 ? period_ns / 4 : 1;

	int64_t q;

	if (!p->window)
		p->window = SL__PACE_WINDOW_START;
	/* The queueing: the latency above the least this writer has seen
	 * (at most SL__PACE_BASE_MAX_NS, so that a first round in a storm is
	 * not taken for the cluster's speed).  It never drifts up: a queue
	 * that lasts would be learnt as the cluster's speed. */
	if (!failed && (!p->base_ns || lat_ns < p->base_ns))
		p->base_ns = lat_ns > 0 ? lat_ns : 1;
	if (p->base_ns > SL__PACE_BASE_MAX_NS)
		p->base_ns = SL__PACE_BASE_MAX_NS;
	q = lat_ns - p->base_ns;
	if (failed || q > SL__PACE_SLOW_NS) {
		if (p->window > SL__PACE_WINDOW_MIN)
			p->window = p->window / 2 > SL__PACE_WINDOW_MIN ? p->window / 2
									 : SL__PACE_WINDOW_MIN;
		else
			p->gap_ns = p->gap_ns ? p->gap_ns * 2 : first;
	} else if (q < SL__PACE_FAST_NS) {
		if (p->gap_ns)
			p->gap_ns = p->gap_ns / 2 >= first ? p->gap_ns / 2 : 0;
		else if (p->window < SL__PACE_WINDOW_MAX)
			p->window *= 2;
	}
	if (cap_ns > 0 && p->gap_ns > cap_ns)
		p->gap_ns = cap_ns;
	/* Spread by up to a quarter, so that writers slowed together do not
	 * come back together. */
	p->next_ns = now + p->gap_ns + (p->gap_ns >= 4 ? (int64_t)(rnd % (uint64_t)(p->gap_ns / 4)) : 0);
}
