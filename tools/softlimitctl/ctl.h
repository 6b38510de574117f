/* SPDX-License-Identifier: MIT */
/*
 * ctl.h: what softlimitctl's files share.
 *
 *   main.c    the command line and the budget commands
 *   retry.c   store calls retried while an etcd cluster has no leader or
 *             cannot be reached, up to --timeout
 *   show.c    budget show and budget list: tables, and JSON for scripts
 *   size.c    SIZE arguments and sizes in tables
 */
#ifndef SOFTLIMITCTL_CTL_H
#define SOFTLIMITCTL_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include <softlimit/lease.h>

/* Exit statuses. */
#define EXIT_USAGE 2 /* a bad command line: nothing was done     */
#define EXIT_FAIL 1  /* the store refused or could not be reached */

struct ctl {
	const char *url;
	sl_lease_store *store;
	struct sl_lease_store_opts opts;
	bool json;
	bool retry;         /* etcd://: retry transient errors until the deadline */
	int64_t deadline_ns; /* CLOCK_MONOTONIC                                  */
	unsigned timeout_s;
};

/* One store call: 0 or a negative errno. */
typedef int (*ctl_fn)(struct ctl *c, void *arg);

/*
 * ctl_open() - open c->url, with each store operation bounded by what is
 * left of the deadline.  0 or a negative errno.
 */
int ctl_open(struct ctl *c);

/*
 * ctl_remove() - sl_lease_store_remove(c->url), retried as ctl_call()
 * retries, without opening the store first.
 */
int ctl_remove(struct ctl *c);

/*
 * ctl_call() - @fn(@c, @arg), again after a pause while it fails with an
 * error that a cluster without a leader, or out of reach, gives (etcd://
 * stores only) and the deadline has not passed.  Returns @fn's last result.
 */
int ctl_call(struct ctl *c, ctl_fn fn, void *arg);

/* What an errno means here, for messages ("the store did not answer..."). */
const char *ctl_strerror(int err);

int show_budget(struct ctl *c, const char *name);
int show_all(struct ctl *c);
int list_budgets(struct ctl *c);

#endif /* SOFTLIMITCTL_CTL_H */
