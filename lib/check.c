/* SPDX-License-Identifier: MIT */
/*
 * sl_tree_check(): the invariants of a quiescent tree, checked the slow and
 * obvious way, for tests, fuzzers and a host's debug endpoint.
 */
#include "internal.h"

struct check {
	int rc;
};

static int check_one(sl_group *g, unsigned depth, void *arg)
{
	struct check *c = arg;
	uint64_t units, ledger, children = 0, count, cmin = 0, clow = 0;
	uint32_t nr = 0;
	sl_group *ch;

	(void)depth;
	sl__stock_sum(g, &units, &ledger);
	for (ch = g->first_child; ch; ch = ch->next_sibling) {
		if (ch->parent != g || ch->depth != g->depth + 1 || ch->magic != SL__GROUP_MAGIC ||
		    sl__child_find(g, ch->name, ch->name_len) != ch)
			c->rc = -EIO;
		children += sl__load(&ch->count, SL_RELAXED);
		if (ch->prot) {
			cmin += sl__load(&ch->prot->min_usage, SL_RELAXED);
			clow += sl__load(&ch->prot->low_usage, SL_RELAXED);
		}
		nr++;
	}
	count = sl__load(&g->count, SL_RELAXED);
	/* PROTECTION: what the group protects, and its children's sums, are
	 * exact once quiet. */
	if (g->prot && (sl__load(&g->prot->min_usage, SL_RELAXED) != sl__min_u64(count, sl__load(&g->min, SL_RELAXED)) ||
			sl__load(&g->prot->low_usage, SL_RELAXED) != sl__min_u64(count, sl__soft_of(g)) ||
			sl__load(&g->prot->children_min, SL_RELAXED) != cmin ||
			sl__load(&g->prot->children_low, SL_RELAXED) != clow))
		c->rc = -EIO;
	/* Every unit at this level is the host's (local or a ledger), a
	 * stock's, or a child's. */
	if (nr != g->nr_children || count != sl__load(&g->local, SL_RELAXED) + ledger + units + children)
		c->rc = -EIO;
	if (sl__load(&g->peak, SL_RELAXED) < count)
		c->rc = -EIO;
	return 0;
}

int sl_tree_check(sl_tree *t)
{
	struct check c = { 0 };
	int rc;

	if (!t)
		return -EINVAL;
	rc = sl_group_walk(t->root, check_one, &c);
	return rc ? rc : c.rc;
}
