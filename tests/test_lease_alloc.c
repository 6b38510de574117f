/* SPDX-License-Identifier: MIT */
/*
 * The lease allocator (lib/lease/alloc.h): max-min fair shares with a floor
 * each, and a participant's demand from what its host reports.
 *
 * Besides worked examples, the shares are compared, on random small inputs,
 * with a trivially correct model (progressive filling one unit at a time:
 * the unit goes to the lowest share that still wants more, the first in
 * order on a tie), and checked on random inputs of every size, up to
 * UINT64_MAX, against the definition: the sum fits, everyone has its floor
 * or a fair part, every demand is met when all fit, and no one below its
 * demand could gain without taking from someone no richer than itself.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "helpers.h"

#define MAXN 64

typedef unsigned __int128 u128;


static uint64_t max_u(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static u128 floors_sum(size_t n, const struct sl__lease_alloc_in *in)
{
	u128 sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += in[i].floor;
	return sum;
}

/* The bounds the definition fills between: see alloc.h. */
static void bounds(uint64_t budget, size_t n, const struct sl__lease_alloc_in *in, uint64_t *lo,
		   uint64_t *hi)
{
	int floors_fit = floors_sum(n, in) <= budget;

	for (size_t i = 0; i < n; i++) {
		lo[i] = floors_fit ? in[i].floor : 0;
		hi[i] = floors_fit ? max_u(in[i].floor, in[i].demand) : in[i].floor;
	}
}

static void model(uint64_t budget, size_t n, const struct sl__lease_alloc_in *in, uint64_t *out)
{
	uint64_t lo[MAXN], hi[MAXN], left = budget;

	bounds(budget, n, in, lo, hi);
	for (size_t i = 0; i < n; i++) {
		out[i] = lo[i];
		left -= lo[i];
	}
	while (left) {
		size_t best = n;

		for (size_t i = 0; i < n; i++)
			if (out[i] < hi[i] && (best == n || out[i] < out[best]))
				best = i;
		if (best == n)
			break;
		out[best]++;
		left--;
	}
	/* Every want met: the rest one unit at a time, round the table. */
	for (size_t i = 0; left && floors_sum(n, in) <= budget; i = (i + 1) % n, left--)
		out[i]++;
}

static void check_definition(uint64_t budget, size_t n, const struct sl__lease_alloc_in *in,
			     const uint64_t *out)
{
	uint64_t lo[MAXN], hi[MAXN], fair = budget / n;
	u128 sum = 0, want = 0;

	bounds(budget, n, in, lo, hi);
	for (size_t i = 0; i < n; i++) {
		sum += out[i];
		want += max_u(in[i].floor, in[i].demand);
		REQUIRE(out[i] >= (in[i].floor < fair ? in[i].floor : fair) && out[i] >= lo[i],
			"share %zu=%llu below its floor or a fair part", i, (unsigned long long)out[i]);
	}
	REQUIRE(sum <= budget, "the shares pass the budget");
	REQUIRE(floors_sum(n, in) > budget || sum == budget, "the shares leave room unused");
	if (want <= budget) {
		for (size_t i = 0; i < n; i++)
			REQUIRE(out[i] >= max_u(in[i].floor, in[i].demand),
				"all demands fit, yet share %zu is short", i);
	}
	/* Max-min: whoever is below its want has, give or take the one unit
	 * of rounding, at least what anyone above its own floor has. */
	for (size_t i = 0; i < n; i++) {
		if (out[i] >= hi[i])
			continue;
		for (size_t j = 0; j < n; j++)
			REQUIRE(out[j] <= lo[j] || out[j] - 1 <= out[i],
				      "share %zu=%llu below its want while %zu=%llu is above its floor",
				      i, (unsigned long long)out[i], j, (unsigned long long)out[j]);
	}
}

static uint64_t *alloc_twice(uint64_t budget, size_t n, const struct sl__lease_alloc_in *in,
			     uint64_t *out)
{
	uint64_t again[MAXN];

	sl__lease_alloc_maxmin(budget, n, in, out);
	sl__lease_alloc_maxmin(budget, n, in, again);
	REQUIRE(memcmp(out, again, n * sizeof(*out)) == 0, "two runs on one input differ");
	return out;
}

START_TEST(maxmin_meets_small_demands_and_shares_the_rest_equally)
{
	struct sl__lease_alloc_in in[3] = { { .demand = 10 }, { .demand = 50 }, { .demand = 80 } };
	uint64_t out[3];

	alloc_twice(100, 3, in, out);
	ck_assert_uint_eq(out[0], 10);
	ck_assert_uint_eq(out[1], 45);
	ck_assert_uint_eq(out[2], 45);
	/* An odd unit goes to the first of those that want more. */
	alloc_twice(101, 3, in, out);
	ck_assert_uint_eq(out[0], 10);
	ck_assert_uint_eq(out[1], 46);
	ck_assert_uint_eq(out[2], 45);
}
END_TEST

START_TEST(maxmin_spreads_room_nobody_asks_for_over_everyone)
{
	struct sl__lease_alloc_in in[4] = { { .demand = 10 }, { .demand = 0 }, { .demand = 30, .floor = 5 },
					    { .demand = 0, .floor = 20 } };
	uint64_t out[4];

	/* Wants 10, 0, 30, 20: 60 of 103; 43 left, 10 each and 3 over. */
	alloc_twice(103, 4, in, out);
	ck_assert_uint_eq(out[0], 21);
	ck_assert_uint_eq(out[1], 11);
	ck_assert_uint_eq(out[2], 41);
	ck_assert_uint_eq(out[3], 30);
}
END_TEST

START_TEST(maxmin_gives_floors_first)
{
	struct sl__lease_alloc_in in[3] = { { .floor = 30 }, { .floor = 30 }, { .demand = 100, .floor = 30 } };
	uint64_t out[3];

	alloc_twice(100, 3, in, out);
	ck_assert_uint_eq(out[0], 30);
	ck_assert_uint_eq(out[1], 30);
	ck_assert_uint_eq(out[2], 40);
}
END_TEST

START_TEST(maxmin_shares_floors_that_do_not_fit_and_nothing_else)
{
	struct sl__lease_alloc_in in[3] = { { .floor = 10, .demand = 90 }, { .floor = 50 }, { .floor = 50 } };
	uint64_t out[3];

	alloc_twice(90, 3, in, out);
	ck_assert_uint_eq(out[0], 10);
	ck_assert_uint_eq(out[1], 40);
	ck_assert_uint_eq(out[2], 40);
}
END_TEST

START_TEST(maxmin_ignores_empty_and_null_input)
{
	struct sl__lease_alloc_in in[1] = { { .demand = 5 } };
	uint64_t out[1] = { 77 };

	sl__lease_alloc_maxmin(100, 0, in, out);
	ck_assert_uint_eq(out[0], 77);
	sl__lease_alloc_maxmin(100, 1, NULL, out);
	ck_assert_uint_eq(out[0], 77);
	sl__lease_alloc_maxmin(100, 1, in, NULL);
	alloc_twice(0, 1, in, out);
	ck_assert_uint_eq(out[0], 0);
}
END_TEST

START_TEST(maxmin_neither_overflows_nor_passes_the_budget_at_uint64_max)
{
	struct sl__lease_alloc_in in[MAXN];
	uint64_t out[MAXN];
	const uint64_t budgets[] = { 0, 1, 1000, UINT64_MAX / 2, UINT64_MAX - 1, UINT64_MAX };

	for (size_t b = 0; b < sizeof(budgets) / sizeof(budgets[0]); b++) {
		for (size_t i = 0; i < MAXN; i++)
			in[i] = (struct sl__lease_alloc_in){ .demand = UINT64_MAX, .floor = UINT64_MAX };
		check_definition(budgets[b], MAXN, in, alloc_twice(budgets[b], MAXN, in, out));
		for (size_t i = 0; i < MAXN; i++)
			in[i] = (struct sl__lease_alloc_in){ .demand = UINT64_MAX - i, .floor = i };
		check_definition(budgets[b], MAXN, in, alloc_twice(budgets[b], MAXN, in, out));
		for (size_t i = 0; i < MAXN; i++)
			in[i] = (struct sl__lease_alloc_in){ .demand = i % 2 ? UINT64_MAX : 0 };
		check_definition(budgets[b], MAXN, in, alloc_twice(budgets[b], MAXN, in, out));
	}
}
END_TEST

START_TEST(maxmin_matches_unit_by_unit_filling_on_random_small_input)
{
	uint64_t seed = 25;

	for (int round = 0; round < 3000; round++) {
		struct sl__lease_alloc_in in[16];
		uint64_t out[16], want[16];
		size_t n = 1 + rng_below(&seed, 16);
		uint64_t budget = rng_below(&seed, 1500);
		uint64_t scale = 1 + rng_below(&seed, 400);

		for (size_t i = 0; i < n; i++) {
			in[i].demand = rng_below(&seed, 4) ? rng_below(&seed, scale) : 0;
			in[i].floor = rng_below(&seed, 3) ? 0 : rng_below(&seed, scale / 4 + 1);
			in[i].gain = rng_next(&seed);
		}
		alloc_twice(budget, n, in, out);
		model(budget, n, in, want);
		for (size_t i = 0; i < n; i++)
			REQUIRE(out[i] == want[i], "round %d: share %zu is %llu, model says %llu",
				      round, i, (unsigned long long)out[i], (unsigned long long)want[i]);
		check_definition(budget, n, in, out);
	}
}
END_TEST

START_TEST(maxmin_keeps_its_definition_on_random_input_of_every_size)
{
	uint64_t seed = 26;

	for (int round = 0; round < 20000; round++) {
		struct sl__lease_alloc_in in[MAXN];
		uint64_t out[MAXN];
		size_t n = 1 + rng_below(&seed, MAXN);
		int bits = (int)rng_below(&seed, 65);
		uint64_t top = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits);
		uint64_t budget = rng_below(&seed, 2) ? rng_next(&seed) : rng_below(&seed, top);

		for (size_t i = 0; i < n; i++) {
			in[i].demand = rng_below(&seed, top);
			in[i].floor = rng_below(&seed, 4) ? rng_below(&seed, top / n + 1) : 0;
			in[i].gain = 0;
		}
		check_definition(budget, n, in, alloc_twice(budget, n, in, out));
	}
}
END_TEST

START_TEST(demand_of_idle_memory_gives_back_an_eighth_not_below_the_floor)
{
	/* idle 40 s against a 30 s limit: usage less an eighth */
	ck_assert_uint_eq(sl__lease_demand(1000, 800, 0, 5000, 40000, 30000, 0, 0), 700);
	ck_assert_uint_eq(sl__lease_demand(1000, 800, 750, 5000, 40000, 30000, 0, 0), 750);
	/* idleness wins over evictions: the tail is cold whatever was evicted */
	ck_assert_uint_eq(sl__lease_demand(1000, 800, 0, 5000, 40000, 30000, 9, 9), 700);
	/* exactly the limit is not idle yet; unknown is never idle */
	ck_assert_uint_eq(sl__lease_demand(1000, 800, 0, 5000, 30000, 30000, 0, 0), 850);
	ck_assert_uint_eq(sl__lease_demand(1000, 800, 0, 5000, UINT64_MAX, 30000, 0, 0), 850);
}
END_TEST

START_TEST(demand_under_pressure_asks_a_quarter_more_or_what_it_lost)
{
	ck_assert_uint_eq(sl__lease_demand(1000, 1000, 0, 5000, 10, 30000, 1, 0), 1250);
	ck_assert_uint_eq(sl__lease_demand(1000, 1000, 0, 5000, 10, 30000, 0, 3), 1250);
	ck_assert_uint_eq(sl__lease_demand(1000, 1000, 0, 5000, 10, 30000, 300, 200), 1500);
	/* capped at the budget's max, saturating on the way */
	ck_assert_uint_eq(sl__lease_demand(1000, 1000, 0, 1100, 10, 30000, 300, 200), 1100);
	ck_assert_uint_eq(sl__lease_demand(UINT64_MAX - 5, 0, 0, UINT64_MAX, 10, 30000, UINT64_MAX,
					   UINT64_MAX),
			  UINT64_MAX);
}
END_TEST

START_TEST(demand_otherwise_is_usage_with_a_little_headroom)
{
	ck_assert_uint_eq(sl__lease_demand(1000, 800, 0, 5000, 10, 30000, 0, 0), 850);
	ck_assert_uint_eq(sl__lease_demand(1000, 800, 900, 5000, 10, 30000, 0, 0), 900);
	ck_assert_uint_eq(sl__lease_demand(1000, 0, 0, 5000, 10, 30000, 0, 0), 0);
	ck_assert_uint_eq(sl__lease_demand(0, UINT64_MAX, 0, UINT64_MAX, 10, 30000, 0, 0), UINT64_MAX);
	ck_assert_uint_eq(sl__lease_demand(0, 5000, 0, 4000, 10, 30000, 0, 0), 4000);
}
END_TEST

/* A period of @n units read again, each after @idle_ms, over @ms: the
 * report a host's demand hook gives. */
static void fold_periods(struct sl__lease_reuse *r, int periods, uint64_t n, uint64_t idle_ms,
			 uint64_t ms)
{
	for (int i = 0; i < periods; i++)
		sl__lease_reuse_fold(r, n * idle_ms, n ? idle_ms : 0, ms);
}

/* A demand from @r with no earlier one (the eighth given back is of usage). */
static uint64_t first_demand(struct sl__lease_reuse *r, uint64_t share, uint64_t usage,
			     uint64_t idle_ms, uint64_t evicted)
{
	r->asked = 0;
	return sl__lease_demand_reuse(r, share, usage, 0, 5000, idle_ms, 30000, evicted, 0);
}

START_TEST(demand_reuse_tells_a_live_tail_from_a_dead_one)
{
	/*
	 * Two caches of 1000 units at a share of 1000, evicting 100 units a
	 * period each: one whose units are each read again every 5 s (50 a
	 * 250 ms period), one whose items nobody reads again.
	 */
	struct sl__lease_reuse live = { 0 }, dead = { 0 };
	struct sl__lease_alloc_in in[2] = { { 0 } };
	uint64_t out[2];

	fold_periods(&live, 40, 50, 5000, 250);
	fold_periods(&dead, 40, 0, 0, 250);
	ck_assert_uint_eq(live.live, 1000); /* Little: 50 units x 5 s a 250 ms period */
	ck_assert_uint_eq(dead.live, 0);
	/* Both tails idle 4 s, inside either horizon. */
	in[0].demand = sl__lease_demand_reuse(&live, 1000, 1000, 0, 2000, 4000, 30000, 100, 0);
	in[1].demand = sl__lease_demand_reuse(&dead, 1000, 1000, 0, 2000, 4000, 30000, 100, 0);
	ck_assert_uint_eq(in[0].demand, 1250); /* pressed and live: a quarter more */
	ck_assert_uint_eq(in[1].demand, 875);  /* an eighth goes back this period */
	sl__lease_alloc_maxmin(2000, 2, in, out);
	ck_assert_uint_gt(out[0], 1000);
	ck_assert_uint_lt(out[1], 1000);
	/* The old rule, given the same evictions, asks the same of both. */
	ck_assert_uint_eq(sl__lease_demand(1000, 1000, 0, 2000, 4000, 30000, 100, 0), 1250);
	/* The dead one keeps giving back an eighth of what it asked, even
	 * with room given back to it as headroom (its usage unchanged). */
	ck_assert_uint_eq(sl__lease_demand_reuse(&dead, 1000, 1000, 0, 2000, 4000, 30000, 100, 0),
			  766);
	/* Not pressed, the live one asks for its live memory and an eighth. */
	ck_assert_uint_eq(first_demand(&live, 1000, 1000, 4000, 0), 1125);
	/* Evicting with less than a third live is not pressure. */
	live.live = 300;
	ck_assert_uint_eq(first_demand(&live, 1000, 1000, 4000, 100), 875);
	/* Reads that stop: within a few seconds the memory stops counting. */
	fold_periods(&live, 12, 0, 0, 250);
	ck_assert_uint_lt(live.live, 1000 / 10);
	/* Floor and budget still bound it. */
	live.asked = 0;
	ck_assert_uint_eq(sl__lease_demand_reuse(&live, 1000, 1000, 950, 2000, 4000, 30000, 0, 0),
			  950);
	live.live = 5000;
	ck_assert_uint_eq(sl__lease_demand_reuse(&live, 1000, 1000, 0, 1100, 4000, 30000, 0, 0),
			  1100);
	live.live = UINT64_MAX;
	ck_assert_uint_eq(sl__lease_demand_reuse(&live, UINT64_MAX, 0, 0, UINT64_MAX, 0, 30000,
						 UINT64_MAX, UINT64_MAX),
			  UINT64_MAX);
}
END_TEST

START_TEST(demand_reuse_horizon_follows_the_reuse_interval)
{
	struct sl__lease_reuse r = { 0 };

	/* Tail items read again after 3 s: memory idle past 6 s is dead. */
	fold_periods(&r, 8, 10, 3000, 250);
	ck_assert_uint_eq(sl__lease_horizon(&r, 30000), 6000);
	r.live = 2000;
	ck_assert_uint_eq(first_demand(&r, 1000, 1000, 7000, 0), 875);
	ck_assert_uint_eq(first_demand(&r, 1000, 1000, 5000, 0), 2250);
	/* One read after 20 s: the horizon reaches it at once, within the
	 * idle limit (30 s), and the same tail is no longer past it. */
	sl__lease_reuse_fold(&r, 20000, 20000, 250);
	ck_assert_uint_eq(sl__lease_horizon(&r, 30000), 30000);
	r.live = 2000;
	ck_assert_uint_eq(first_demand(&r, 1000, 1000, 7000, 0), 2250);
	/* Without more of them it decays back toward the 3 s reads. */
	fold_periods(&r, 400, 10, 3000, 250);
	ck_assert_uint_le(sl__lease_horizon(&r, 30000), 6500);
	/* Never below the shortest horizon, whatever the reads. */
	fold_periods(&r, 400, 10, 100, 250);
	ck_assert_uint_eq(sl__lease_horizon(&r, 30000), SL__LEASE_HORIZON_MIN_MS);
	/* An idle limit below it wins: --lease-idle is the longest horizon. */
	ck_assert_uint_eq(sl__lease_horizon(&r, 1000), 1000);
}
END_TEST

START_TEST(demand_reuse_of_a_filling_cache_asks_to_go_on_filling)
{
	struct sl__lease_reuse r = { 0 };

	/* Nothing read again yet (new keys, not due): a first demand at 1000
	 * gives an eighth back; filled by 100 since, it asks for four times
	 * that growth more, though its live memory says nothing yet. */
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 2000, 1000, 0, 5000, 1000, 30000, 0, 0), 875);
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 2000, 1100, 0, 5000, 1000, 30000, 0, 0),
			  1100 + SL__LEASE_GROW_PERIODS * 100);
	/* That is two seconds of filling at slcache's 250 ms periods: the
	 * time the room takes to come back from others. */
	ck_assert_uint_ge(SL__LEASE_GROW_PERIODS * 250, 2000);
	/* Not growing: back to giving an eighth a period. */
	ck_assert_uint_lt(sl__lease_demand_reuse(&r, 2000, 1100, 0, 5000, 1000, 30000, 0, 0), 1100);
	/* Growth past the horizon is no evidence: the eighth goes anyway. */
	r.asked = 1100;
	r.used = 1000;
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 2000, 1100, 0, 5000, 60000, 30000, 0, 0), 963);
	/* Saturating at the budget. */
	r.used = 0;
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 2000, UINT64_MAX, 0, 5000, 1000, 30000, 0, 0),
			  5000);
}
END_TEST

START_TEST(demand_reuse_evictions_down_to_a_lower_share_are_no_pressure)
{
	/*
	 * A cache that asked for 1000 at a usage of 1000, more than half of
	 * it live, now at a share of 800: it evicted 200 to come down to it.
	 * That is no pressure: it asks for its live memory, or gives back an
	 * eighth, not for its share again.
	 */
	struct sl__lease_reuse r = { .live = 600, .flow = 600, .horizon_ms = 1000, .known = 1 };

	r.asked = r.used = 1000;
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 800, 800, 0, 5000, 1000, 30000, 200, 0), 700);
	/* It evicted 100 more than its usage fell by (sets at the lower
	 * share): those are pressure, and it asks four times them more. */
	r.asked = r.used = 1000;
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 800, 800, 0, 5000, 1000, 30000, 300, 0), 1000);
	/* Its usage held: every eviction is pressure, as before. */
	r.asked = r.used = 800;
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 800, 800, 0, 5000, 1000, 30000, 50, 0), 1000);
	/* The refaults of a cache pressed only by its lower share add nothing. */
	r.asked = r.used = 1000;
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 800, 800, 0, 5000, 1000, 30000, 200, 50),
			  700);
}
END_TEST

START_TEST(demand_reuse_evictions_once_the_reads_stop_are_no_pressure)
{
	/*
	 * A cache of 1000 units at its share, half of it read again every
	 * period, evicting for the sets it takes: pressure.  Then its reads
	 * stop: the smoothed flow still shows more than a third of it live
	 * for a while, but its evictions are no reason to keep its share.
	 */
	struct sl__lease_reuse r = { 0 };

	fold_periods(&r, 40, 500, 250, 250);
	r.asked = r.used = 1000;
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 1000, 1000, 0, 5000, 1000, 30000, 10, 0),
			  1040);
	fold_periods(&r, 1, 0, 0, 250);
	ck_assert_uint_ge(r.live, 1000 / 3);
	r.asked = r.used = 1000;
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 1000, 1000, 0, 5000, 1000, 30000, 10, 0),
			  875);
	/* Read again: pressure again. */
	fold_periods(&r, 1, 500, 250, 250);
	r.asked = r.used = 1000;
	ck_assert_uint_eq(sl__lease_demand_reuse(&r, 1000, 1000, 0, 5000, 1000, 30000, 10, 0),
			  1040);
}
END_TEST

/*
 * Issue Demand's flip, one period at a time in the pure functions: three
 * caches share 24000 units.  A, hot until now, sees none of its items read
 * again, and still sets one unit a period; B's items are read as before;
 * C, newly hot, fills by 700 a period from 2000, nothing of it read again
 * yet (new keys come due only after their interval).  A cache over its
 * new share evicts down to it, and reports that with the next period's
 * evictions (as a demand hook does); shares apply at once (a store adds a
 * period or two).  Returns the first period after which C holds more than
 * 40% of the budget (0: not within @periods).
 */
static int flip_periods_to_40pct(int periods)
{
	struct sl__lease_reuse r[3] = { { 0 } };
	uint64_t usage[3] = { 11000, 9000, 2000 }, share[3] = { 11500, 9500, 3000 };
	uint64_t evicted[3] = { 0 };
	const uint64_t budget = 24000, fill[3] = { 1, 0, 700 };

	/* Before the flip: all of every cache read again, every period. */
	for (int i = 0; i < 3; i++) {
		for (int p = 0; p < 20; p++)
			sl__lease_reuse_fold(&r[i], usage[i] * 1000, 1000, 1000);
		(void)sl__lease_demand_reuse(&r[i], share[i], usage[i], 0, budget, 1000, 30000, 0,
					     0);
	}
	for (int p = 1; p <= periods; p++) {
		struct sl__lease_alloc_in in[3] = { { 0 } };
		uint64_t out[3];

		sl__lease_reuse_fold(&r[0], 0, 0, 250);
		sl__lease_reuse_fold(&r[1], usage[1] * 250, 1000, 250);
		sl__lease_reuse_fold(&r[2], 0, 0, 250);
		for (int i = 0; i < 3; i++) {
			usage[i] += fill[i];
			if (usage[i] > share[i]) {
				evicted[i] += usage[i] - share[i];
				usage[i] = share[i];
			}
			in[i].demand = sl__lease_demand_reuse(&r[i], share[i], usage[i], 0, budget,
							      1000, 30000, evicted[i], 0);
			evicted[i] = 0;
		}
		sl__lease_alloc_maxmin(budget, 3, in, out);
		for (int i = 0; i < 3; i++) {
			share[i] = out[i];
			if (usage[i] > share[i]) {
				evicted[i] = usage[i] - share[i];
				usage[i] = share[i];
			}
		}
		if (share[2] * 10 > budget * 4)
			return p;
	}
	return 0;
}

START_TEST(demand_reuse_newly_hot_cache_has_40pct_within_2s_of_a_flip)
{
	/* Eight 250 ms periods: 2 s, the half of the 3 s the issue asks for
	 * that leaves the other half to the store and a late client. */
	int p = flip_periods_to_40pct(40);

	ck_assert_int_gt(p, 0);
	ck_assert_int_le(p, 8);
}
END_TEST

START_TEST(demand_reuse_fold_neither_overflows_nor_divides_by_zero)
{
	struct sl__lease_reuse r = { 0 };

	sl__lease_reuse_fold(&r, UINT64_MAX, UINT64_MAX, 0);
	ck_assert_uint_eq(r.live, UINT64_MAX);
	ck_assert_uint_eq(sl__lease_horizon(&r, UINT64_MAX), UINT64_MAX);
	sl__lease_reuse_fold(&r, UINT64_MAX, 0, UINT64_MAX);
	ck_assert_uint_le(r.live, UINT64_MAX);
	ck_assert_uint_le(r.horizon_ms, UINT64_MAX / 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lease_alloc");
	TCase *tc = tcase_create("lease_alloc");

	tcase_add_test(tc, maxmin_meets_small_demands_and_shares_the_rest_equally);
	tcase_add_test(tc, maxmin_spreads_room_nobody_asks_for_over_everyone);
	tcase_add_test(tc, maxmin_gives_floors_first);
	tcase_add_test(tc, maxmin_shares_floors_that_do_not_fit_and_nothing_else);
	tcase_add_test(tc, maxmin_ignores_empty_and_null_input);
	tcase_add_test(tc, maxmin_neither_overflows_nor_passes_the_budget_at_uint64_max);
	tcase_add_test(tc, maxmin_matches_unit_by_unit_filling_on_random_small_input);
	tcase_add_test(tc, maxmin_keeps_its_definition_on_random_input_of_every_size);
	tcase_add_test(tc, demand_of_idle_memory_gives_back_an_eighth_not_below_the_floor);
	tcase_add_test(tc, demand_under_pressure_asks_a_quarter_more_or_what_it_lost);
	tcase_add_test(tc, demand_otherwise_is_usage_with_a_little_headroom);
	tcase_add_test(tc, demand_reuse_tells_a_live_tail_from_a_dead_one);
	tcase_add_test(tc, demand_reuse_horizon_follows_the_reuse_interval);
	tcase_add_test(tc, demand_reuse_of_a_filling_cache_asks_to_go_on_filling);
	tcase_add_test(tc, demand_reuse_evictions_down_to_a_lower_share_are_no_pressure);
	tcase_add_test(tc, demand_reuse_evictions_once_the_reads_stop_are_no_pressure);
	tcase_add_test(tc, demand_reuse_newly_hot_cache_has_40pct_within_2s_of_a_flip);
	tcase_add_test(tc, demand_reuse_fold_neither_overflows_nor_divides_by_zero);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
