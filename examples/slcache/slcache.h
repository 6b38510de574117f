/* SPDX-License-Identifier: MIT */
/*
 * slcache.h: what slcache's files share: the options (options.c) and the
 * log.  The server's parts, each in one file:
 *
 *   slcache.c   main(): start the parts in order, wait for SIGINT/SIGTERM
 *   options.c   the command line
 *   tenants.c   the softlimit integration: the tree, a tenant (group) per
 *               key prefix, reclaim, high, the live budget
 *   lease.c     --lease-store: tenants' budgets shared with other processes
 *   storage.c   memcached's item semantics over examples/lru_cache
 *   protocol.c  the text protocol: classic commands and stats
 *   admin.c     verbosity, cache_memlimit, and memcached's tuning commands
 *   meta.c      the meta commands (mg, ms, md, ma, mn, me)
 *   metaflags.c their keys and flags, read as memcached reads them
 *   net.c       sockets, worker threads, events
 *   connbuf.c   a connection's buffers and the answers written into them
 *   connmem.c   the memory reserved within -m for what clients hold
 *   metrics.c   --metrics-port: the tree's OpenMetrics text over HTTP
 */
#ifndef SLCACHE_H
#define SLCACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <softlimit/softlimit.h>

/* The memcached protocol level this server speaks (clients gate features on it). */
#define SLCACHE_PROTO_VERSION "1.6.0"

#define TENANTS_MAX 64 /* --tenant options */

struct tenant_opt {
	char name[SL_NAME_MAX + 1];
	struct sl_limits lim;
	unsigned pct; /* bit i: field i (min, soft, high, max) is a percentage of -m */
};

struct options {
	const char *addr;
	const char *port;
	const char *metrics_port; /* --metrics-port: NULL, off */
	uint64_t conn_memory;     /* --conn-memory: reserved within -m for clients */
	unsigned stall_timeout;   /* --stall-timeout: seconds; 0, never           */
	uint64_t max_bytes;
	enum sl_policy policy;
	uint64_t ghosts;          /* --ghosts: each tenant's ghost reach in bytes; 0, none */
	bool accounting;
	bool arenas;
	unsigned threads;
	unsigned max_conns;
	size_t item_max;
	unsigned max_tenants;
	unsigned headroom_pct; /* background reclaim keeps each max this far off; 0 = none */
	const char *lease_store;  /* --lease-store URL: NULL, off (lease.c)   */
	unsigned lease_period_ms; /* --lease-period                            */
	unsigned lease_ttl_ms;    /* --lease-ttl                               */
	unsigned lease_idle_ms;   /* --lease-idle                              */
	unsigned lease_wait_ms;   /* --lease-wait: a starting lease's writes wait */
	bool flush_disabled;      /* -F: flush_all answers an error, as memcached's */
	_Atomic int verbose;
	struct tenant_opt tenants[TENANTS_MAX];
	unsigned nr_tenants;
};

/* Set once by options_parse() before any thread starts; read-only after,
 * but for verbose (the verbosity command, a relaxed hint). */
extern struct options opt;
extern time_t started;

void options_parse(int argc, char **argv);
const char *policy_name(enum sl_policy p);

void logv(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* SLCACHE_H */
