/* SPDX-License-Identifier: MIT */
/*
 * A program outside the project that uses the installed lease library: a
 * store on shared memory, a budget, a group that joins it and leaves.
 */
#include <stdio.h>
#include <unistd.h>

#include <softlimit/lease.h>

int main(void)
{
	char url[64];
	sl_lease_store *s;
	sl_tree *t;
	sl_lease *l;
	struct sl_limits lim;
	int rc;

	snprintf(url, sizeof(url), "shm:consumer-%ld", (long)getpid());
	if ((rc = sl_lease_store_open(url, NULL, &s)) != 0) {
		fprintf(stderr, "consumer_lease: sl_lease_store_open(%s): %d\n", url, rc);
		return 1;
	}
	sl_limits_init(&lim);
	lim.max = 1 << 20;
	if ((rc = sl_lease_budget_set(s, "tenant", &lim)) != 0 || (rc = sl_tree_create(NULL, &t)) != 0 ||
	    (rc = sl_lease_join(s, "tenant", sl_tree_root(t), NULL, &l)) != 0) {
		fprintf(stderr, "consumer_lease: setting up a lease failed: %d\n", rc);
		return 1;
	}
	rc = sl_lease_leave(l);
	sl_lease_budget_delete(s, "tenant");
	sl_lease_store_close(s);
	if (sl_lease_store_remove(url, NULL) != 0)
		rc = -1;
	sl_tree_destroy(t);
	return rc == 0 ? 0 : 1;
}
