/* SPDX-License-Identifier: MIT */
/*
 * The differential fuzzer, reclaims: sl_reclaim() and background rounds
 * (sl_background_reclaim()) against the model of fuzz_model.c, and what
 * each policy clearly grants a group, which reclaim ahead of need (pass 1)
 * must leave it.
 */
#include "fuzz_model.h"

#include <string.h>

/* No group on the path from k up to and including scope has a min. */
static bool no_min_up_to(int k, int scope)
{
	for (; k >= 0; k = m[k].parent) {
		if (m[k].lim.min)
			return false;
		if (k == scope)
			return true;
	}
	return true;
}

/* Every group strictly between scope and k is within its soft limit or sets
 * none: no gate is open above k and no parent of k is misconfigured. */
static bool no_open_ancestor(int k, int scope, const uint64_t *usage)
{
	for (k = m[k].parent; k >= 0 && k != scope; k = m[k].parent)
		if (m[k].lim.soft && usage[k] > m[k].lim.soft)
			return false;
	return true;
}

/*
 * A lower bound on what pass 1 may take from scope's subtree: the scope's
 * own charges and those of groups that set no soft limit (and, under
 * GATEKEEPER, sit in no opened gate, where a proportional cut might take
 * less of them), as far as honest callbacks hold them and no min is in the
 * way.  Every policy makes all of those eligible.
 */
static uint64_t pass1_lower_bound(int scope, const uint64_t *usage)
{
	uint64_t sum = 0;
	int k;

	for (k = 0; k < NG; k++) {
		/* The root (0) has no callback: its charges cannot be taken. */
		if (k == 0 || !m[k].alive || !below(k, scope) || m[k].mode != CB_HONEST ||
		    !no_min_up_to(k, scope))
			continue;
		if (k != scope && m[k].lim.soft)
			continue;
		if (k != scope && policy == SL_POLICY_GATEKEEPER && !no_open_ancestor(k, scope, usage))
			continue;
		sum += m[k].own;
	}
	return sum;
}

/*
 * Groups whose own charges pass 1 must leave alone: within a soft limit
 * they set, with no opened gate or misconfigured parent above them (GUARANTEE,
 * GATEKEEPER).  Under PROTECTION, every group between the scope and j within
 * a soft limit it sets too: the scope's children get their settings as they
 * are, and below a group within its soft limit its children's protected
 * usages add up to no more than its own, so none is scaled down.
 */
static bool clearly_protected(int j, int scope, const uint64_t *usage)
{
	int k;

	if (j == scope || !m[j].alive || !below(j, scope) || !m[j].lim.soft || usage[j] > m[j].lim.soft)
		return false;
	if (policy != SL_POLICY_PROTECTION)
		return no_open_ancestor(j, scope, usage);
	for (k = m[j].parent; k != scope; k = m[k].parent)
		if (!m[k].lim.soft || usage[k] > m[k].lim.soft)
			return false;
	return true;
}

/* What the host holds in all: the model's own charges. */
static uint64_t own_total(void)
{
	uint64_t sum = 0;
	int j;

	for (j = 0; j < NG; j++)
		sum += m[j].alive ? m[j].own : 0;
	return sum;
}

static void trace_group(int j, uint64_t usage)
{
	trace("  g%d parent g%d own %" PRIu64 " usage %" PRIu64 " min %" PRIu64 " soft %" PRIu64 " max %" PRIu64
	      " headroom %" PRIu64 " mode %d\n",
	      j, m[j].parent, m[j].own, usage, m[j].lim.min, m[j].lim.soft, m[j].lim.max, m[j].headroom,
	      (int)m[j].mode);
}

void op_reclaim(struct input *in)
{
	int i = pick_alive(in), j;
	uint64_t target = amount_vals[take(in) & 15], before[NG], own_before[NG], total, freed, fell, eligible;

	for (j = 0; j < NG; j++) {
		before[j] = m[j].alive ? usage_of(j) : 0;
		own_before[j] = m[j].alive ? m[j].own : 0;
	}
	total = own_total();
	eligible = pass1_lower_bound(i, before);
	trace("reclaim g%d target %" PRIu64 " policy %d%s\n", i, target, (int)policy, exact ? "" : " (stocks)");
	for (j = 0; j < NG; j++)
		if (m[j].alive)
			trace_group(j, before[j]);
	cb_dishonest = false;
	cb_reentered = false;
	cb_asked_max = 0;
	cb_set_limits = false;
	freed = sl_reclaim(m[i].g, target, take(in) & 1 ? 0 : 8);
	fell = total - own_total();
	if (freed > fell)
		FAIL("reclaim reported %" PRIu64 " but usage fell by %" PRIu64, freed, fell);
	if (cb_asked_max > target)
		FAIL("a callback was asked for %" PRIu64 " of a %" PRIu64 " target", cb_asked_max, target);
	if (cb_dishonest)
		return;
	if (freed != fell)
		FAIL("honest callbacks freed %" PRIu64 " but reclaim said %" PRIu64, fell, freed);
	if (freed > target)
		FAIL("reclaim took %" PRIu64 " for a target of %" PRIu64, freed, target);
	/* A callback changed limits: what they grant is not what they were. */
	if (cb_set_limits)
		return;
	/* Pass 2 (everyone) runs only when pass 1 fell short: while what pass
	 * 1 may take covers the target, no protected group loses a unit. */
	if (!cb_reentered && target && eligible >= target)
		for (j = 0; j < NG; j++)
			if (clearly_protected(j, i, before) && m[j].own < own_before[j])
				FAIL("group %d (policy %d) lost %" PRIu64 " within its soft limit %" PRIu64
				     " (usage %" PRIu64 ") while %" PRIu64 " eligible units covered the target %" PRIu64,
				     j, (int)policy, own_before[j] - m[j].own, m[j].lim.soft, before[j], eligible,
				     target);
	/* min is never reclaimed, the scope's own included (PROTECTION's floor
	 * is the effective min); the scope's ancestors only see its usage
	 * fall. */
	if (policy != SL_POLICY_PROTECTION)
		for (j = 0; j < NG; j++)
			if (m[j].alive && below(j, i) && before[j] >= m[j].lim.min &&
			    usage_of(j) < m[j].lim.min)
				FAIL("group %d reclaimed below its min", j);
}

/* SL_FUZZ_BG_GRANTS=1: check that a background round takes no min, nor a
 * scope's own soft limit. */
static bool bg_grants_check(void)
{
	static int on = -1;

	if (on < 0)
		on = !(getenv("SL_FUZZ_BG_GRANTS") && strcmp(getenv("SL_FUZZ_BG_GRANTS"), "0") == 0);
	return on;
}

/*
 * Give a group a headroom and run one background round
 * (sl_background_reclaim()): groups above max - headroom are reclaimed
 * toward it, by pass 1 only.  The model checks the ledger (what the round
 * says it freed is what the callbacks freed), that min is never taken, and
 * that a group the policy clearly grants its usage (clearly_protected()
 * from every scope of the round) loses nothing.
 */
void op_background(struct input *in)
{
	int i = pick_alive(in), j, k, rc;
	uint64_t headroom = limit_vals[take(in) & 7], before[NG], own_before[NG], total = 0, fell, freed;
	bool scope[NG];

	rc = sl_group_set_headroom(m[i].g, headroom);
	if (rc != 0)
		FAIL("set_headroom gave %d", rc);
	m[i].headroom = headroom;
	for (j = 0; j < NG; j++) {
		before[j] = m[j].alive ? usage_of(j) : 0;
		own_before[j] = m[j].alive ? m[j].own : 0;
		total += own_before[j];
		/* A round reclaims the groups above their watermark (their
		 * stocks count); which ones, the model cannot tell exactly
		 * with stocks: take every group with a headroom. */
		scope[j] = m[j].alive && m[j].headroom;
	}
	trace("background round (g%d headroom %" PRIu64 ")\n", i, headroom);
	for (j = 0; j < NG; j++)
		if (m[j].alive)
			trace_group(j, before[j]);
	cb_dishonest = false;
	cb_reentered = false;
	cb_set_limits = false;
	freed = sl_background_reclaim(tree);
	fell = total - own_total();
	if (freed > fell)
		FAIL("background round reported %" PRIu64 " but usage fell by %" PRIu64, freed, fell);
	if (cb_dishonest || cb_reentered || cb_set_limits)
		return;
	if (freed != fell)
		FAIL("honest callbacks freed %" PRIu64 " but the background round said %" PRIu64, fell, freed);
	for (j = 0; j < NG; j++) {
		bool shielded = true, scoped = false;

		if (!m[j].alive || m[j].own >= own_before[j])
			continue;
		/* min: SL_FUZZ_BG_GRANTS=1 (a round from the root takes a
		 * child with a min below it: issue 24, defect 3's family). */
		if (policy != SL_POLICY_PROTECTION && usage_of(j) < m[j].lim.min && before[j] >= m[j].lim.min &&
		    bg_grants_check())
			FAIL("background round took g%d below its min", j);
		for (k = 0; k < NG; k++) {
			if (!scope[k] || !below(j, k))
				continue;
			scoped = true;
			if (k == j)
				shielded = shielded && bg_grants_check() && m[j].lim.soft &&
					   (policy == SL_POLICY_GUARANTEE || policy == SL_POLICY_REFAULT) &&
					   usage_of(j) < min_u64(before[j], m[j].lim.soft) && no_open_ancestor(j, 0, before);
			else
				shielded = shielded && clearly_protected(j, k, before);
		}
		if (scoped && shielded)
			FAIL("background round took g%d (policy %d) from %" PRIu64 " to %" PRIu64
			     " within what it is granted (soft %" PRIu64 ")",
			     j, (int)policy, before[j], usage_of(j), m[j].lim.soft);
	}
}
