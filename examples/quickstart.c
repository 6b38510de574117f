/* SPDX-License-Identifier: MIT */
/* quickstart: one tenant under a 1 MiB budget, charged until its hard limit says no. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include <softlimit/softlimit.h>

#define KiB ((uint64_t)1024)

int main(void)
{
	struct sl_tree_opts opts;
	sl_tree_opts_init(&opts);
	opts.root.max = 1024 * KiB; /* the whole process may hold 1 MiB */

	sl_tree *tree;
	if (sl_tree_create(&opts, &tree) != 0)
		return 1;

	struct sl_limits lim;
	sl_limits_init(&lim);
	lim.soft = 256 * KiB; /* what tenant-a keeps when memory is short */
	lim.max = 512 * KiB;  /* what it can never go past */

	sl_group *tenant;
	if (sl_group_create(sl_tree_root(tree), "tenant-a", &lim, NULL, NULL, &tenant) != 0)
		return 1;

	/* Allocate 64 KiB objects for the tenant until its hard limit refuses one. */
	uint64_t held = 0;
	int err;
	while ((err = sl_charge(tenant, 64 * KiB, 0)) == 0)
		held += 64 * KiB;
	printf("charged %" PRIu64 " KiB, then: %s\n", held / KiB,
	       err == -ENOMEM ? "-ENOMEM (at max)" : "unexpected error");

	struct sl_stats st;
	sl_group_stats(tenant, &st);
	printf("%s: usage %" PRIu64 " KiB, peak %" PRIu64 " KiB, soft %" PRIu64 " KiB, "
	       "max %" PRIu64 " KiB, events_max %" PRIu64 "\n",
	       sl_group_name(tenant), st.usage / KiB, st.peak / KiB, st.limits.soft / KiB,
	       st.limits.max / KiB, st.events_max);

	/* Free the objects; an empty group can go, and the tree frees the rest. */
	sl_uncharge(tenant, held);
	sl_group_destroy(tenant);
	sl_tree_destroy(tree);
	printf("softlimit %s: done\n", sl_version());
	return err == -ENOMEM ? 0 : 1;
}
