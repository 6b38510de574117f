/* SPDX-License-Identifier: MIT */
/*
 * slcache: a caching server that speaks the memcached text protocol, with a
 * tenant per key prefix (the text before the first ':'; other keys belong to
 * "default"), accounted by softlimit.
 *
 *   slcache -l ADDR -p PORT -m MEGABYTES [--policy guarantee|gatekeeper|protection]
 *           [--tenant NAME[:min=SIZE][:soft=SIZE][:high=SIZE][:max=SIZE]]...
 *           [--no-accounting | --no-arenas] [-t THREADS] [-c MAXCONNS]
 *           [-I ITEM_MAX] [--max-tenants N] [-v]
 *
 * -m is the whole server's budget: the softlimit root's max.  When it is
 * short, softlimit picks the tenants that give memory back (by the policy
 * and their soft limits) and the cache evicts their least recently used
 * items.  --no-accounting serves the same protocol from one shared LRU of
 * -m bytes, as a plain memcached would.  Items come from a jemalloc arena
 * per tenant (the softlimit-jemalloc adapter) when jemalloc is there;
 * --no-arenas keeps the accounting but takes items from the process's
 * malloc and charges them with sl_charge(), which separates what the
 * accounting costs from what the arenas cost (benchmarks/bench_server.sh).
 *
 * The softlimit integration is tenants.c; slcache.h lists the other parts.
 */
#include <stdio.h>
#include <time.h>

#include "net.h"
#include "slcache.h"
#include "storage.h"

int main(int argc, char **argv)
{
	int rc;

	options_parse(argc, argv);
	started = time(NULL);
	if (store_start(opt.item_max) != 0)
		return 2;
	rc = net_run();
	store_stop();
	if (rc == 0)
		fprintf(stderr, "slcache: shut down\n");
	return rc;
}
