/* SPDX-License-Identifier: MIT */
/*
 * The coordinator's plan (lib/lease/coord.h): a budget's members in, the
 * grants to write out.
 *
 * Worked examples first (shrink before grow, a fresh session's grant, a
 * member without a report, the dead band), then the definition on random
 * input: the store never counts more than the budget's max after a plan
 * (or, over it already, no member counts more than before), shrinks are
 * always planned and nothing grows past its target; members that ack every
 * plan reach their max-min targets, within the dead band, in a few plans
 * and stay there; and a plan is a function of its input alone.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "coord.h"
#include "helpers.h"

#define MAXN 48

typedef unsigned __int128 u128;


static _Alignas(struct sl__lease_alloc_in) unsigned char
	scratch[MAXN * (2 * sizeof(uint64_t) + sizeof(struct sl__lease_alloc_in))];

static bool current(const struct sl__coord_member *m)
{
	return m->granted && m->grant_current;
}

static size_t plan(const struct sl__coord_budget *b, struct sl__coord_member *m, size_t n)
{
	ck_assert_uint_le(sl__coord_scratch_size(n), sizeof(scratch));
	return sl__coord_plan(b, m, n, scratch);
}

/* The store after the plan's grants are written, reports as they were. */
static struct sl__coord_member written(const struct sl__coord_member *m)
{
	struct sl__coord_member a = *m;

	if (m->write) {
		a.granted = true;
		a.grant_current = m->reported;
	}
	a.g_held = m->held;
	a.g_floor = m->floor;
	return a;
}

/* The member reports its new grant (held = the grant: it let go or took it). */
static void ack(struct sl__coord_member *m)
{
	if (!m->reported)
		return;
	*m = written(m);
	m->r_held = m->held;
}

/* Max-min targets of the reporting members (0 for the others), the way
 * coord.h defines them. */
static void targets(const struct sl__coord_budget *b, const struct sl__coord_member *m, size_t n,
		    uint64_t *t)
{
	struct sl__lease_alloc_in in[MAXN] = { { 0 } };
	uint64_t out[MAXN], avail = b->max;
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (m[i].reported)
			k++;
		else
			avail = avail > sl__coord_counted(&m[i]) ? avail - sl__coord_counted(&m[i]) : 0;
	for (size_t i = 0, j = 0; i < n; i++) {
		if (!m[i].reported)
			continue;
		in[j].demand = m[i].demand;
		in[j].floor = b->min / k;
		in[j].gain = 0;
		j++;
	}
	sl__lease_alloc_maxmin(avail, k, in, out);
	/* Room nobody asks for goes no further than an eighth of a demand. */
	for (size_t j = 0; j < k; j++) {
		uint64_t d = in[j].demand, cap = d + d / 8 < d ? UINT64_MAX : d + d / 8;

		if (cap < in[j].floor)
			cap = in[j].floor;
		if (out[j] > cap)
			out[j] = cap;
	}
	for (size_t i = 0, j = 0; i < n; i++)
		t[i] = m[i].reported ? out[j++] : 0;
}

static u128 counted_sum(const struct sl__coord_member *m, size_t n, bool after)
{
	u128 s = 0;

	for (size_t i = 0; i < n; i++) {
		struct sl__coord_member a = after ? written(&m[i]) : m[i];

		s += sl__coord_counted(&a);
	}
	return s;
}

/* Plan @m and check the result against coord.h's definition. */
static size_t plan_checked(const struct sl__coord_budget *b, struct sl__coord_member *m, size_t n)
{
	uint64_t t[MAXN];
	u128 before = counted_sum(m, n, false);
	size_t writes, count = 0, nrep = 0;
	bool over;

	targets(b, m, n, t);
	for (size_t i = 0; i < n; i++)
		nrep += m[i].reported;
	writes = plan(b, m, n);
	/* At most max after the plan, or over it still, and then no member
	 * counts more than it did. */
	over = counted_sum(m, n, true) > b->max;
	REQUIRE(before > b->max || !over, "the plan makes the store count more than max %llu",
		(unsigned long long)b->max);
	for (size_t i = 0; i < n; i++) {
		const struct sl__coord_member *x = &m[i];
		struct sl__coord_member a = written(x);
		uint64_t was = sl__coord_counted(x), now = sl__coord_counted(&a);

		count += x->write;
		REQUIRE(!over || now <= was, "member %zu counts more while the store is over max", i);
		REQUIRE(x->grows == (now > was), "member %zu: grows %d, counted %llu -> %llu", i,
			x->grows, (unsigned long long)was, (unsigned long long)now);
		if (!x->reported) {
			REQUIRE(!x->write && x->held == x->g_held && x->floor == x->g_floor,
				"member %zu without a report was changed", i);
			continue;
		}
		REQUIRE(x->write == (!current(x) || x->held != x->g_held || x->floor != x->g_floor),
			"member %zu: write %d does not say whether its grant changes", i, x->write);
		REQUIRE(x->floor <= x->held && x->floor <= b->min / nrep,
			"member %zu: floor %llu above its held or min / n", i,
			(unsigned long long)x->floor);
		/* Shrinks are always planned; nothing grows past its target. */
		if (current(x) && x->g_held > t[i] && (x->g_held - t[i] > b->dead_band || !t[i]))
			REQUIRE(x->held == t[i], "member %zu: shrink %llu -> %llu not planned", i,
				(unsigned long long)x->g_held, (unsigned long long)t[i]);
		REQUIRE(x->held <= max_u64(t[i], current(x) ? x->g_held : 0),
			"member %zu grows past its target", i);
	}
	REQUIRE(count == writes, "%zu writes returned, %zu marked", writes, count);
	return writes;
}

static struct sl__coord_member grant_rep(uint64_t g, uint64_t r, uint64_t demand)
{
	struct sl__coord_member m = { .granted = true, .grant_current = true, .g_held = g,
				      .reported = true, .r_held = r, .demand = demand };

	return m;
}

START_TEST(counted_follows_the_store_table)
{
	struct sl__coord_member m = grant_rep(50, 70, 0);

	m.g_floor = 10;
	ck_assert_uint_eq(sl__coord_counted(&m), 70);
	m.r_held = 30;
	ck_assert_uint_eq(sl__coord_counted(&m), 50);
	m.grant_current = false; /* a new session's report: the old grant's floor */
	ck_assert_uint_eq(sl__coord_counted(&m), 30);
	m.r_held = 5;
	ck_assert_uint_eq(sl__coord_counted(&m), 10);
	m.reported = false; /* its session ran out */
	ck_assert_uint_eq(sl__coord_counted(&m), 10);
	m = (struct sl__coord_member){ .reported = true, .r_held = 42 }; /* no grant yet */
	ck_assert_uint_eq(sl__coord_counted(&m), 42);
}
END_TEST

START_TEST(a_grower_gets_only_room_that_is_free_now)
{
	struct sl__coord_budget b = { .max = 100 };
	struct sl__coord_member m[2] = { grant_rep(80, 80, 20), grant_rep(20, 20, 80) };

	/* A shrinks to 20 but holds 80 until it says so: no room for B. */
	ck_assert_uint_eq(plan_checked(&b, m, 2), 1);
	ck_assert(m[0].write && m[0].held == 20 && !m[0].grows);
	ck_assert(!m[1].write && m[1].held == 20);
	ack(&m[0]);
	ck_assert_uint_eq(plan_checked(&b, m, 2), 1);
	ck_assert(m[1].write && m[1].held == 80 && m[1].grows);

	/* A holds only 50 of its grant of 80: shrinking it frees 30 at once. */
	m[0] = grant_rep(80, 50, 20);
	m[1] = grant_rep(20, 20, 80);
	ck_assert_uint_eq(plan_checked(&b, m, 2), 2);
	ck_assert_uint_eq(m[0].held, 20);
	ck_assert_uint_eq(m[1].held, 50);
}
END_TEST

START_TEST(a_new_session_gets_a_fresh_grant_covered_by_room)
{
	struct sl__coord_budget b = { .max = 100, .min = 20 };
	struct sl__coord_member m[2] = { grant_rep(60, 5, 60), grant_rep(90, 90, 90) };

	/* C's grant is from its last session: it counts at max(floor, 5) = 10. */
	m[0].grant_current = false;
	m[0].g_floor = 10;
	m[1].g_floor = 10;
	plan_checked(&b, m, 2);
	ck_assert(m[0].write && m[0].held == 10 && m[0].floor == 10 && !m[0].grows);
	ck_assert(m[1].write && m[1].held == 50);
	ack(&m[0]);
	ack(&m[1]);
	plan_checked(&b, m, 2);
	ck_assert(m[0].write && m[0].held == 50 && m[0].grows);
}
END_TEST

START_TEST(a_member_without_a_report_keeps_its_floor_out_of_the_share)
{
	struct sl__coord_budget b = { .max = 100, .min = 60 };
	struct sl__coord_member m[3] = { grant_rep(40, 40, 100), grant_rep(40, 40, 100),
					 { .granted = true, .g_held = 40, .g_floor = 20 } };

	ck_assert_uint_eq(sl__coord_counted(&m[2]), 20);
	plan_checked(&b, m, 3);
	ck_assert_uint_eq(m[0].held, 40);
	ck_assert_uint_eq(m[1].held, 40);
	ck_assert_uint_eq(m[0].floor, 30);
	ck_assert(!m[2].write && m[2].held == 40 && m[2].floor == 20);
}
END_TEST

START_TEST(the_dead_band_gives_way_when_a_grower_needs_the_room)
{
	struct sl__coord_budget b = { .max = 100, .dead_band = 2 };
	struct sl__coord_member m[4];

	/* Small moves both ways: nothing is written. */
	m[0] = grant_rep(25, 25, 24);
	m[1] = grant_rep(25, 25, 25);
	m[2] = grant_rep(25, 25, 25);
	m[3] = grant_rep(25, 25, 26);
	ck_assert_uint_eq(plan_checked(&b, m, 4), 0);
	/* Three shrinks within the band, one grow beyond it, and no room:
	 * the three are needed, and written. */
	for (int i = 0; i < 3; i++)
		m[i] = grant_rep(25, 25, 23);
	m[3] = grant_rep(25, 25, 40);
	ck_assert_uint_eq(plan_checked(&b, m, 4), 3);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(m[i].held, 23);
	ck_assert_uint_eq(m[3].held, 25);
	for (int i = 0; i < 4; i++)
		ack(&m[i]);
	ck_assert_uint_eq(plan_checked(&b, m, 4), 1);
	ck_assert_uint_eq(m[3].held, 31);
	/* A part of a grow within the band is not written either: A shrinks
	 * (and holds 60 until it says so), B could take 1 of its 21 now. */
	m[0] = grant_rep(60, 60, 40);
	m[1] = grant_rep(39, 39, 60);
	ck_assert_uint_eq(plan_checked(&b, m, 2), 1);
	ck_assert(m[0].write && m[0].held == 40);
	ck_assert(!m[1].write && m[1].held == 39);
	/* A move to 0 is written, however small (and room nobody asks for
	 * is not kept as headroom). */
	m[0] = grant_rep(1, 1, 0);
	m[1] = grant_rep(1, 1, 0);
	b.max = 2;
	ck_assert_uint_eq(plan_checked(&b, m, 2), 2);
	ck_assert_uint_eq(m[0].held, 0);
	ck_assert_uint_eq(m[1].held, 0);
}
END_TEST

START_TEST(over_budget_no_one_counts_more)
{
	struct sl__coord_budget b = { .max = 100 };
	struct sl__coord_member m[3] = { grant_rep(90, 90, 90), grant_rep(90, 90, 90),
					 { .reported = true, .demand = 50 } };

	plan_checked(&b, m, 3);
	ck_assert(m[2].write && m[2].held == 0 && !m[2].grows);
	ck_assert_uint_eq(m[0].held, 34);
	ck_assert_uint_eq(m[1].held, 33);
	for (int i = 0; i < 3; i++)
		ack(&m[i]);
	plan_checked(&b, m, 3);
	ck_assert_uint_eq(m[2].held, 33);
}
END_TEST

START_TEST(empty_and_huge_input)
{
	struct sl__coord_budget b = { .max = UINT64_MAX, .min = UINT64_MAX, .dead_band = UINT64_MAX };
	struct sl__coord_member m[3] = { grant_rep(UINT64_MAX, UINT64_MAX, UINT64_MAX),
					 grant_rep(UINT64_MAX - 1, 0, UINT64_MAX),
					 { .reported = true, .r_held = UINT64_MAX, .demand = 1 } };

	ck_assert_uint_eq(sl__coord_scratch_size(0), 0);
	ck_assert_uint_eq(sl__coord_scratch_size(SIZE_MAX), SIZE_MAX);
	ck_assert_uint_eq(sl__coord_plan(&b, NULL, 0, NULL), 0);
	ck_assert_uint_eq(sl__coord_plan(NULL, m, 3, scratch), 0);
	plan_checked(&b, m, 3);
	for (int i = 0; i < 3; i++)
		ack(&m[i]);
	plan_checked(&b, m, 3);
	b.max = 7;
	plan_checked(&b, m, 3);
}
END_TEST

/* A value of every scale: 0, small, a part of @scale, near UINT64_MAX. */
static uint64_t value(uint64_t *s, uint64_t scale)
{
	switch (rng_below(s, 8)) {
	case 0:
		return 0;
	case 1:
		return rng_below(s, 10);
	case 2:
		return UINT64_MAX - rng_below(s, 3);
	default:
		return rng_below(s, scale + 1);
	}
}

static size_t random_budget(uint64_t *s, struct sl__coord_budget *b, struct sl__coord_member *m)
{
	size_t n = rng_below(s, MAXN + 1);
	uint64_t scale;

	b->max = rng_below(s, 4) ? rng_below(s, 100000) : UINT64_MAX - rng_below(s, 1000);
	b->min = rng_below(s, 3) ? rng_below(s, b->max / 2 + 1) : value(s, b->max);
	b->dead_band = rng_below(s, 3) ? (n ? b->max / n / 16 : 0) : value(s, 10);
	/* Grants around a fair part, sometimes far above (an over-budget start). */
	scale = n ? b->max / n : b->max;
	scale = scale > UINT64_MAX / 8 ? UINT64_MAX - 1 : scale * (rng_below(s, 4) ? 2 : 8);
	for (size_t i = 0; i < n; i++) {
		struct sl__coord_member *x = &m[i];

		memset(x, 0, sizeof(*x));
		x->granted = rng_below(s, 5) != 0;
		x->grant_current = rng_below(s, 5) != 0;
		x->reported = rng_below(s, 6) != 0;
		if (x->granted) {
			x->g_held = value(s, scale);
			x->g_floor = rng_below(s, 8) ? min_u64(value(s, scale), x->g_held) : value(s, scale);
		}
		if (x->reported) {
			x->r_held = rng_below(s, 2) ? x->g_held : value(s, scale);
			x->demand = value(s, scale);
		}
	}
	return n;
}

START_TEST(the_store_never_counts_more_than_max_on_random_input)
{
	uint64_t s = 0x5ca1ab1e;
	struct sl__coord_budget b;
	struct sl__coord_member m[MAXN];

	for (int round = 0; round < 20000; round++) {
		size_t n = random_budget(&s, &b, m);

		plan_checked(&b, m, n);
		/* Some members let go or take up what they were granted. */
		for (size_t i = 0; i < n; i++)
			if (rng_below(&s, 2))
				ack(&m[i]);
		plan_checked(&b, m, n);
	}
}
END_TEST

START_TEST(members_that_ack_reach_their_targets_in_a_few_plans)
{
	uint64_t s = 0xc0c0a;
	struct sl__coord_budget b;
	struct sl__coord_member m[MAXN];
	uint64_t t[MAXN];

	for (int round = 0; round < 5000; round++) {
		size_t n = random_budget(&s, &b, m);
		int plans;

		/* Half the rounds start converged on other demands and move
		 * them by a few dead bands: the band's own case. */
		if (round % 2 && n) {
			for (int k = 0; k < 4; k++) {
				plan(&b, m, n);
				for (size_t i = 0; i < n; i++)
					ack(&m[i]);
			}
			for (size_t i = 0; i < n; i++) {
				uint64_t d = rng_below(&s, 6 * (b.dead_band % (UINT64_MAX / 8)) + 1);

				if (m[i].reported)
					m[i].demand = rng_below(&s, 2) ? m[i].held - min_u64(d, m[i].held)
									: m[i].held + min_u64(d, UINT64_MAX - m[i].held);
			}
		}
		targets(&b, m, n, t);
		for (plans = 0; plans < 4; plans++) {
			plan_checked(&b, m, n);
			for (size_t i = 0; i < n; i++)
				ack(&m[i]);
		}
		for (size_t i = 0; i < n; i++) {
			if (!m[i].reported)
				continue;
			REQUIRE(max_u64(m[i].held, t[i]) - min_u64(m[i].held, t[i]) <= b.dead_band,
				"round %d: member %zu at %llu after %d plans, target %llu, band %llu",
				round, i, (unsigned long long)m[i].held, plans,
				(unsigned long long)t[i], (unsigned long long)b.dead_band);
		}
		/* And it stays there: nothing more to write. */
		REQUIRE(plan_checked(&b, m, n) == 0, "round %d: converged, yet the plan writes", round);
	}
}
END_TEST

START_TEST(a_plan_is_a_function_of_its_input)
{
	uint64_t s = 0xde7e;
	struct sl__coord_budget b;
	struct sl__coord_member m[MAXN], again[MAXN];

	for (int round = 0; round < 5000; round++) {
		size_t n = random_budget(&s, &b, m);
		size_t w1, w2;

		memcpy(again, m, sizeof(m));
		/* Whatever the scratch held before. */
		memset(scratch, 0, sizeof(scratch));
		w1 = plan(&b, m, n);
		for (size_t i = 0; i < sizeof(scratch); i++)
			scratch[i] = (unsigned char)rng_next(&s);
		w2 = plan(&b, again, n);
		REQUIRE(w1 == w2 && memcmp(m, again, sizeof(m)) == 0, "round %d: two plans differ",
			round);
	}
}
END_TEST

/* The node's side of a lease (coord.h): a cut now, a raise only after our
 * report, never a raise once our own view of the session ended. */
START_TEST(a_node_cuts_at_once_and_raises_after_its_report)
{
	struct sl__coord_lease x = { .applied = 100, .rep_held = 100, .rep_demand = 50,
				     .grant_current = true, .g_held = 60, .view_ended = false };

	/* A cut: lower to the grant; report what is still used, if more. */
	ck_assert_uint_eq(sl__coord_lease_target(&x), 60);
	ck_assert_uint_eq(sl__coord_lease_held(60, 80, 100), 80);
	ck_assert_uint_eq(sl__coord_lease_held(60, 40, 100), 60);
	/* Units stocked above what was reported count no more than that. */
	ck_assert_uint_eq(sl__coord_lease_held(60, 120, 100), 100);
	ck_assert(sl__coord_lease_report(&x, 80, 50));
	/* A raise: the target is above applied, so the runner reports first. */
	x.applied = 60;
	x.rep_held = 60;
	x.g_held = 100;
	ck_assert_uint_eq(sl__coord_lease_target(&x), 100);
	ck_assert_uint_eq(sl__coord_lease_held(100, 30, 60), 100);
	ck_assert(sl__coord_lease_report(&x, 100, 50));
	/* Our own view ended: no raise, whatever the grant says. */
	x.view_ended = true;
	ck_assert_uint_eq(sl__coord_lease_target(&x), 60);
	x.view_ended = false;
	/* No grant for this session: we hold what we reported. */
	x.grant_current = false;
	ck_assert_uint_eq(sl__coord_lease_target(&x), 60);
	/* The report's dead band: a demand move of an eighth of the share is
	 * not worth a write, more is, and so is any change of held. */
	ck_assert(!sl__coord_lease_report(&x, 60, 50 + 60 / 8));
	ck_assert(sl__coord_lease_report(&x, 60, 50 + 60 / 8 + 1));
	ck_assert(sl__coord_lease_report(&x, 61, 50));
	x.applied = 0;
	x.rep_held = 0;
	x.rep_demand = 0;
	ck_assert(sl__coord_lease_report(&x, 0, 2));
	ck_assert(!sl__coord_lease_report(&x, 0, 1));
}
END_TEST

/*
 * The protocol on a budget of two members, with the coordinator moving
 * grants at random (shrinking grants not yet acknowledged included) and
 * each node's steps interleaved at random: the sum of what the groups may
 * hold (their applied max) never passes what the store counts nor max.
 */
START_TEST(nodes_and_a_coordinator_never_take_the_same_room)
{
	uint64_t s = 0x5eed, max = 1000;

	for (int run = 0; run < 2000; run++) {
		struct sl__coord_member m[2];
		struct sl__coord_lease x[2];
		struct sl__coord_budget b = { .max = max, .min = 0, .dead_band = 0 };
		uint64_t queued[2] = { 0, 0 }, raise[2] = { 0, 0 };
		uint64_t gver[2] = { 0, 0 }, seen[2] = { 0, 0 };
		bool sent[2] = { true, true };

		memset(m, 0, sizeof(m));
		memset(x, 0, sizeof(x));
		for (int i = 0; i < 2; i++) {
			m[i].reported = true;
			m[i].granted = m[i].grant_current = true;
			x[i].grant_current = true;
		}
		for (int t = 0; t < 200; t++) {
			int i = (int)rng_below(&s, 2);

			switch (rng_below(&s, 3)) {
			case 0: /* the coordinator plans on new demands */
				for (int k = 0; k < 2; k++)
					m[k].demand = rng_below(&s, max + 1);
				if (plan(&b, m, 2))
					for (int k = 0; k < 2; k++)
						if (m[k].write) {
							m[k].g_held = m[k].held;
							m[k].g_floor = m[k].floor;
							gver[k]++;
						}
				break;
			case 1: { /* node i steps on the grant it sees: a cut now */
				uint64_t target;

				if (!sent[i])
					break; /* its last report is still in flight */
				x[i].g_held = m[i].g_held;
				target = sl__coord_lease_target(&x[i]);
				if (target < x[i].applied)
					x[i].applied = target;
				queued[i] = sl__coord_lease_held(target, x[i].applied, x[i].rep_held);
				raise[i] = target > x[i].applied ? target : 0;
				seen[i] = gver[i];
				sent[i] = false;
				break;
			}
			default: /* node i's report is written; then its raise */
				if (sent[i])
					break;
				sent[i] = true;
				/* A report that acknowledges a raise compares the
				 * grant it saw: changed since, it fails. */
				if (raise[i] && gver[i] != seen[i]) {
					raise[i] = 0;
					break;
				}
				m[i].r_held = x[i].rep_held = queued[i];
				if (raise[i] && raise[i] <= m[i].g_held)
					x[i].applied = raise[i];
				raise[i] = 0;
				break;
			}
			REQUIRE(x[0].applied + x[1].applied <= sl__coord_counted(&m[0]) +
								    sl__coord_counted(&m[1]),
				"run %d step %d: the groups may hold %llu, the store counts %llu", run,
				t, (unsigned long long)(x[0].applied + x[1].applied),
				(unsigned long long)(sl__coord_counted(&m[0]) +
						     sl__coord_counted(&m[1])));
			REQUIRE(sl__coord_counted(&m[0]) + sl__coord_counted(&m[1]) <= max,
				"run %d step %d: the store counts past max", run, t);
		}
	}
}
END_TEST

/* Floors are min over a power of two at or above the members: a join
 * rewrites the others' grants only when it takes them past one. */
START_TEST(a_join_moves_the_floors_only_past_a_power_of_two)
{
	struct sl__coord_budget b = { .max = 0, .min = 80, .dead_band = 0 };
	struct sl__coord_member m[9];
	size_t i, n;

	for (n = 6; n <= 9; n += 3) {
		b.max = 50 * n; /* each gets what it asks for, and no more */
		memset(m, 0, sizeof(m));
		for (i = 0; i + 1 < n; i++) {
			m[i].granted = m[i].grant_current = m[i].reported = true;
			m[i].g_held = m[i].r_held = m[i].demand = 50;
			m[i].g_floor = 80 / 8; /* planned with 5 of them */
		}
		m[n - 1].reported = true; /* the join */
		m[n - 1].demand = 50;
		ck_assert_uint_eq(plan(&b, m, n), (n == 6 ? 1 : n));
		for (i = 0; i + 1 < n; i++) {
			ck_assert(m[i].write == (n == 9));
			ck_assert_uint_eq(m[i].floor, (n == 6 ? 10 : 5));
		}
		ck_assert(m[n - 1].write && m[n - 1].held == 50);
		ck_assert_uint_eq(m[n - 1].floor, (n == 6 ? 10 : 5));
	}
}
END_TEST

/* ---- pacing (coord.h) ---------------------------------------------------- */

#define MS INT64_C(1000000)

START_TEST(a_pace_grows_on_fast_rounds_and_backs_off_on_slow_ones)
{
	struct sl__coord_pace p = { 0, 0, 0, 0 };
	int64_t now = 1000 * MS, period = 250 * MS, cap = 4000 * MS, gap;
	int i;

	ck_assert(sl__coord_pace_due(&p, 0));
	ck_assert_uint_eq(p.window, SL__PACE_WINDOW_START);
	ck_assert_int_eq(p.gap_ns, 0);
	/* Fast rounds: the window doubles, up to its most, and no gap. */
	for (i = 0; i < 20; i++) {
		uint32_t w = p.window;

		sl__coord_pace_done(&p, now, 5 * MS, false, period, cap, (uint64_t)i * 7919);
		ck_assert_uint_eq(p.window, w * 2 > SL__PACE_WINDOW_MAX ? SL__PACE_WINDOW_MAX : w * 2);
		ck_assert_int_eq(p.gap_ns, 0);
		ck_assert(sl__coord_pace_due(&p, now));
	}
	/* Between fast and slow: held. */
	sl__coord_pace_done(&p, now, 200 * MS, false, period, cap, 1);
	ck_assert_uint_eq(p.window, SL__PACE_WINDOW_MAX);
	/* Slow rounds halve it to its least; then the gap doubles from a
	 * quarter period to the cap, and the next round waits it (spread by
	 * up to a quarter). */
	while (p.window > SL__PACE_WINDOW_MIN) {
		uint32_t w = p.window;

		sl__coord_pace_done(&p, now, 500 * MS, false, period, cap, 3);
		ck_assert_uint_eq(p.window, w / 2 < SL__PACE_WINDOW_MIN ? SL__PACE_WINDOW_MIN : w / 2);
		ck_assert_int_eq(p.gap_ns, 0);
	}
	gap = period / 4;
	for (i = 0; i < 10; i++) {
		sl__coord_pace_done(&p, now, 0, true /* failed */, period, cap, (uint64_t)i * 104729);
		ck_assert_int_eq(p.gap_ns, gap < cap ? gap : cap);
		ck_assert_int_ge(p.next_ns, now + p.gap_ns);
		ck_assert_int_le(p.next_ns, now + p.gap_ns + p.gap_ns / 4);
		ck_assert(!sl__coord_pace_due(&p, now + p.gap_ns - 1));
		ck_assert(sl__coord_pace_due(&p, p.next_ns));
		gap *= 2;
	}
	ck_assert_uint_eq(p.window, SL__PACE_WINDOW_MIN);
	/* Fast again: the gap halves to nothing first, then the window grows. */
	for (i = 0; p.gap_ns; i++) {
		int64_t g = p.gap_ns;

		sl__coord_pace_done(&p, now, 5 * MS, false, period, cap, 5);
		ck_assert_int_eq(p.gap_ns, g / 2 >= period / 4 ? g / 2 : 0);
		ck_assert_uint_eq(p.window, SL__PACE_WINDOW_MIN);
		ck_assert_int_lt(i, 16);
	}
	sl__coord_pace_done(&p, now, 5 * MS, false, period, cap, 5);
	ck_assert_uint_eq(p.window, 2 * SL__PACE_WINDOW_MIN);
	/* Slowed to a gap of 500 ms, then quiet for 750 ms past it: the gap
	 * halves for each gap it was quiet (500, then 250), to 125 ms. */
	for (i = 0; i < 5; i++)
		sl__coord_pace_done(&p, now, 0, true, period, cap, 0);
	ck_assert_uint_eq(p.window, SL__PACE_WINDOW_MIN);
	ck_assert_int_eq(p.gap_ns, 500 * MS);
	ck_assert(!sl__coord_pace_due(&p, now + 499 * MS));
	ck_assert_int_eq(p.gap_ns, 500 * MS);
	ck_assert(sl__coord_pace_due(&p, p.next_ns + 750 * MS));
	ck_assert_int_eq(p.gap_ns, 125 * MS);
	/* The quiet time is used once: asked again 100 ms on, it holds. */
	ck_assert(sl__coord_pace_due(&p, p.next_ns + 100 * MS));
	ck_assert_int_eq(p.gap_ns, 125 * MS);
}
END_TEST

/*
 * A fleet of writers on one store that applies writes in order, each at a
 * cost of a transaction (an entry of etcd's log: @txn_s) plus one of
 * @op_s an operation: a write's latency is the store's backlog when it is
 * sent plus its own cost.  Each writer also sends a keepalive every 3 s,
 * which fails while the backlog is over a second, as etcd's leader answers
 * them (after waiting that second), and is sent again as the keeper does:
 * after a quarter period, doubling up to a quarter of the view.  With
 * @probes, a failed one slows the writer's pace, at most once a second, as
 * the keeper's do (store_etcd_coord.c's slowed(); once in 3 s was too
 * little: every session ran out).  A session is lost
 * when its keepalives fail for a whole view (9.5 s).
 */
struct fleet_out {
	double worst_backlog_s; /* after the first 5 s, which no writer knows of */
	double end_s;           /* the last writer done                         */
	size_t lost;            /* writers that went a view with no keepalive   */
};

static void fleet(size_t n, uint64_t work, double txn_s, double op_s, int64_t cap, bool probes,
		  struct fleet_out *o)
{
	struct w {
		struct sl__coord_pace p;
		uint64_t left;  /* operations not sent yet                        */
		bool waiting;   /* a write is in flight                           */
		bool finished;
		int64_t at;     /* its next event: a send, or the answer          */
		int64_t sent;
		int64_t probe;  /* its next keepalive                             */
		int64_t retry;  /* the keeper's backoff after a failed one        */
		int64_t kslow;  /* a failed one slows the pace again from then    */
		int64_t renewed; /* its last keepalive that passed                */
		bool lost;
	} *ws = calloc(n, sizeof(*ws));
	size_t *h = calloc(n, sizeof(*h)); /* a heap of writers by next event */
	int64_t store_free = 0, period = 250 * MS, view = 9500 * MS;
	uint64_t rnd = 88172645463325252ull;
	size_t i, busy = n;

	ck_assert_ptr_nonnull(ws);
	ck_assert_ptr_nonnull(h);
	memset(o, 0, sizeof(*o));
	for (i = 0; i < n; i++) {
		ws[i].left = work;
		ws[i].at = (int64_t)(i % 1000) * MS; /* they start within a second */
		ws[i].probe = ws[i].at + 3000 * MS;
		ws[i].renewed = ws[i].at;
		h[i] = i; /* in order of at already: a heap */
	}
#define FLEET_KEY(j) \
	(ws[j].finished ? INT64_MAX : ws[j].probe < ws[j].at ? ws[j].probe : ws[j].at)
	while (busy) {
		struct w *x;
		bool probe;
		size_t at = 0;

		/* The root's event moved on (events only move later): down. */
		for (;;) {
			size_t l = 2 * at + 1, m = at, t;

			if (l < n && FLEET_KEY(h[l]) < FLEET_KEY(h[m]))
				m = l;
			if (l + 1 < n && FLEET_KEY(h[l + 1]) < FLEET_KEY(h[m]))
				m = l + 1;
			if (m == at)
				break;
			t = h[m];
			h[m] = h[at];
			h[at] = t;
			at = m;
		}
		x = &ws[h[0]];
		probe = x->probe < x->at;
		if (probe) {
			int64_t now = x->probe;

			if (store_free - now <= 1000 * MS) {
				x->renewed = now;
				x->probe = now + 3000 * MS;
				x->retry = 0;
				continue;
			}
			if (now - x->renewed > view)
				x->lost = true;
			x->retry = x->retry ? x->retry * 2 : period / 4;
			if (x->retry > view / 4)
				x->retry = view / 4;
			x->probe = now + 1000 * MS + x->retry;
			if (probes && now >= x->kslow) {
				int64_t next = x->p.next_ns, gap = x->p.gap_ns;

				rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
				sl__coord_pace_done(&x->p, now, 0, true, period, cap, rnd);
				if (next > now)
					x->p.next_ns = next + (x->p.gap_ns - gap);
				if (!x->waiting && x->at < x->p.next_ns)
					x->at = x->p.next_ns;
				x->kslow = now + 1000 * MS;
			}
			continue;
		}
		if (x->waiting) {
			/* The answer. */
			x->waiting = false;
			rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
			sl__coord_pace_done(&x->p, x->at, x->at - x->sent, false, period, cap, rnd);
			if (!x->left) {
				x->finished = true;
				busy--;
				if ((double)x->at / 1e9 > o->end_s)
					o->end_s = (double)x->at / 1e9;
			} else if (x->p.next_ns > x->at) {
				x->at = x->p.next_ns;
			}
		} else {
			/* A write of at most the window. */
			uint64_t k;
			int64_t start;

			if (!sl__coord_pace_due(&x->p, x->at)) {
				x->at = x->p.next_ns;
				continue;
			}
			k = x->left < x->p.window ? x->left : x->p.window;
			start = store_free > x->at ? store_free : x->at;
			if (x->at > 5000 * MS && (double)(start - x->at) / 1e9 > o->worst_backlog_s)
				o->worst_backlog_s = (double)(start - x->at) / 1e9;
			store_free = start + (int64_t)((double)((k + SL__COORD_TXN_OPS - 1) /
								SL__COORD_TXN_OPS) * txn_s * 1e9 +
						       (double)k * op_s * 1e9);
			x->left -= k;
			x->sent = x->at;
			x->at = store_free;
			x->waiting = true;
		}
	}
#undef FLEET_KEY
	for (i = 0; i < n; i++)
		o->lost += ws[i].lost;
	free(h);
	free(ws);
}

START_TEST(paced_writers_keep_the_store_under_a_second_behind)
{
	struct fleet_out o;

	/* A thousand nodes joining a hundred budgets (three writes each) on
	 * a store that applies 5,000 operations a second: 60 s of work. */
	fleet(1000, 300, 0, 0.0002, sl__coord_pace_cap(9500 * MS), true, &o);
	ck_assert_msg(o.worst_backlog_s < 1.0, "the store fell %.2f s behind", o.worst_backlog_s);
	ck_assert_uint_eq(o.lost, 0);
	/* One node alone: its window opens and it is done in a few rounds. */
	fleet(1, 300, 0, 0.0002, sl__coord_pace_cap(9500 * MS), true, &o);
	ck_assert_msg(o.end_s < 1.0, "one node took %.2f s", o.end_s);
}
END_TEST

/*
 * A slower store: 3.6 ms a transaction and 0.1 ms an operation, what three
 * members applied here beside a thousand bench nodes (220 entries of 9
 * keys a second, or 253 of 3.3), and five writes a join.  The writers' own
 * latency alone lets the backlog stay past a second for a whole view, and
 * sessions run out; with the keepalives' failures slowing the pace too,
 * none is lost, and with gaps of up to two views, not half a view, the
 * work ends in 263 s (595 with half a view).
 */
START_TEST(failed_keepalives_slow_a_fleet_before_its_sessions_run_out)
{
	int64_t cap = sl__coord_pace_cap(9500 * MS);
	struct fleet_out o;

	/* Two views, and no wrap for a view that cannot be doubled. */
	ck_assert_int_eq(cap, 19000 * MS);
	ck_assert_int_eq(sl__coord_pace_cap(INT64_MAX / 2 + 1), INT64_MAX);
	fleet(1000, 500, 0.0036, 0.0001, cap, true, &o);
	ck_assert_uint_eq(o.lost, 0);
	ck_assert_msg(o.end_s < 350, "the work took %.1f s, not about 263", o.end_s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lease_coord");
	TCase *tc = tcase_create("lease_coord");

	tcase_add_test(tc, counted_follows_the_store_table);
	tcase_add_test(tc, a_grower_gets_only_room_that_is_free_now);
	tcase_add_test(tc, a_new_session_gets_a_fresh_grant_covered_by_room);
	tcase_add_test(tc, a_member_without_a_report_keeps_its_floor_out_of_the_share);
	tcase_add_test(tc, the_dead_band_gives_way_when_a_grower_needs_the_room);
	tcase_add_test(tc, over_budget_no_one_counts_more);
	tcase_add_test(tc, empty_and_huge_input);
	tcase_add_test(tc, the_store_never_counts_more_than_max_on_random_input);
	tcase_add_test(tc, members_that_ack_reach_their_targets_in_a_few_plans);
	tcase_add_test(tc, a_plan_is_a_function_of_its_input);
	tcase_add_test(tc, a_node_cuts_at_once_and_raises_after_its_report);
	tcase_add_test(tc, nodes_and_a_coordinator_never_take_the_same_room);
	tcase_add_test(tc, a_join_moves_the_floors_only_past_a_power_of_two);
	tcase_add_test(tc, a_pace_grows_on_fast_rounds_and_backs_off_on_slow_ones);
	tcase_add_test(tc, paced_writers_keep_the_store_under_a_second_behind);
	tcase_add_test(tc, failed_keepalives_slow_a_fleet_before_its_sessions_run_out);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
