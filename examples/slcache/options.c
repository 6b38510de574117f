/* SPDX-License-Identifier: MIT */
/*
 * options.c: slcache's command line (see usage() below and slcache.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slcache.h"

struct options opt = {
	.addr = "127.0.0.1",
	.port = "11211",
	.max_bytes = 64ull << 20,
	.policy = SL_POLICY_GUARANTEE,
	.accounting = true,
	.arenas = true,
	.threads = 2,
	.max_conns = 4096,
	.item_max = 1u << 20,
	.max_tenants = 256,
	.headroom_pct = 3,
	.stall_timeout = 10,
	.lease_period_ms = 200,
	.lease_ttl_ms = 10000,
	.lease_idle_ms = 30000,
	.lease_wait_ms = 5000,
};

time_t started;

/* --conn-memory as a percentage of -m (applied once -m is known): reserved
 * for connections, so the items have the rest. */
static unsigned conn_memory_pct = 12;
/* --ghosts given (else its default follows --policy). */
static bool ghosts_set;

const char *policy_name(enum sl_policy p)
{
	return p == SL_POLICY_GATEKEEPER ? "gatekeeper" :
	       p == SL_POLICY_PROTECTION ? "protection" :
	       p == SL_POLICY_REFAULT	 ? "refault"
					 : "guarantee";
}

void logv(const char *fmt, ...)
{
	va_list ap;

	if (!opt.verbose)
		return;
	va_start(ap, fmt);
	fputs("slcache: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: slcache [-l ADDR] [-p PORT] [-m MEGABYTES]\n"
		"               [--policy guarantee|gatekeeper|protection|refault] [--ghosts SIZE]\n"
		"               [--tenant NAME[:min=SIZE][:soft=SIZE][:high=SIZE][:max=SIZE]]...\n"
		"               [--no-accounting | --no-arenas] [-t THREADS] [-c MAXCONNS] [-I ITEM_MAX]\n"
		"               [--max-tenants N] [--headroom PERCENT] [--metrics-port PORT]\n"
		"               [--conn-memory SIZE] [--stall-timeout SECONDS]\n"
		"               [--lease-store URL [--lease-period MS] [--lease-ttl MS]\n"
		"               [--lease-idle MS] [--lease-wait MS]] [-F] [-v]\n"
		"  -l ADDR          address to listen on (default 127.0.0.1)\n"
		"  -p PORT          TCP port (default 11211)\n"
		"  -m MEGABYTES     the whole server's memory budget, the root's max (default 64)\n"
		"  --policy P       soft-limit policy of the tree (default guarantee); refault:\n"
		"                   the memory above soft limits goes to the tenants whose\n"
		"                   evicted keys are read again most (ghosts on)\n"
		"  --ghosts SIZE    each tenant remembers the keys of the last SIZE bytes it\n"
		"                   had evicted, to count refaults (default -m/16 with\n"
		"                   --policy refault, -m/8 with --lease-store, else 0: off)\n"
		"  --tenant SPEC    declare a tenant (key prefix before ':') with limits; SIZE takes\n"
		"                   K, M, G suffixes or a percentage of -m (soft=40%%)\n"
		"  --no-accounting  one shared LRU of -m bytes, no softlimit (the baseline)\n"
		"  --no-arenas      softlimit as usual, but items from malloc, not an arena per tenant\n"
		"  -t THREADS       worker threads (default 2)\n"
		"  -c MAXCONNS      most simultaneous connections (default 4096)\n"
		"  -I ITEM_MAX      largest value (default 1M)\n"
		"  --max-tenants N  tenants created on first use beyond N share \"default\" (256)\n"
		"  --headroom PCT   a maintainer thread evicts ahead of sets, keeping each max\n"
		"                   (-m, a tenant's) PCT%% off; 0: no maintainer (default 3)\n"
		"  --metrics-port PORT  serve OpenMetrics at http://ADDR:PORT/metrics (default off)\n"
		"  --conn-memory SIZE  memory reserved within -m for connection buffers (default 12%%)\n"
		"  --stall-timeout S   close a connection silent for S s in a value (10; 0: never)\n"
		"  --lease-store URL  a tenant named as a budget in this store (shm:NAME,\n"
		"                   etcd://HOST:PORT[,...]/PREFIX) shares it with the other\n"
		"                   processes in it: its max is its lease (softlimitctl(1))\n"
		"  --lease-period MS  how often leases are renewed and shares moved (200)\n"
		"  --lease-ttl MS   how long a renewal holds in the store (10000)\n"
		"  --lease-idle MS  a tenant gives back memory unread this long (30000)\n"
		"  --lease-wait MS  a new leased tenant's writes wait this long for its share,\n"
		"                   then fail naming the store (5000)\n"
		"  -F, --disable-flush-all  flush_all answers an error (as memcached's -F); else\n"
		"                   a connection that has used a key flushes its tenant only\n"
		"  -v               log connections and errors to stderr\n");
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("slcache: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\n(slcache --help for usage)\n", stderr);
	va_end(ap);
	exit(2);
}

/* Digits with an optional K, M or G (or KB, MB, GB; any case) suffix. */
static int parse_size(const char *s, uint64_t *out)
{
	uint64_t x = 0, mul = 1;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'k': case 'K': mul = 1ull << 10; p++; break;
	case 'm': case 'M': mul = 1ull << 20; p++; break;
	case 'g': case 'G': mul = 1ull << 30; p++; break;
	default: break;
	}
	if (mul != 1 && (*p == 'b' || *p == 'B'))
		p++;
	if (*p != '\0' || (x != 0 && x > UINT64_MAX / mul))
		return -1;
	*out = x * mul;
	return 0;
}

static unsigned parse_uint(const char *s, const char *what, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s < '0' || *s > '9' || *end != '\0' || errno || v < lo || v > hi)
		die_usage("%s must be a number from %u to %u, not '%s'", what, lo, hi, s);
	return (unsigned)v;
}

static void parse_tenant(const char *spec)
{
	struct tenant_opt *t;
	char buf[1024], *field, *save = NULL;
	unsigned i;

	if (opt.nr_tenants >= TENANTS_MAX)
		die_usage("at most %d --tenant options", TENANTS_MAX);
	if (strlen(spec) >= sizeof(buf))
		die_usage("--tenant '%.40s...' is too long", spec);
	strcpy(buf, spec);
	t = &opt.tenants[opt.nr_tenants];
	memset(t, 0, sizeof(*t));
	sl_limits_init(&t->lim);
	field = strtok_r(buf, ":", &save);
	if (!field || buf[0] == ':')
		die_usage("--tenant '%s': the name comes first (NAME[:soft=SIZE]...)", spec);
	if (strlen(field) > SL_NAME_MAX || strchr(field, '/'))
		die_usage("--tenant '%s': a name is 1..%d bytes without '/'", spec, SL_NAME_MAX);
	for (i = 0; field[i]; i++)
		if ((unsigned char)field[i] <= 0x20 || (unsigned char)field[i] >= 0x7f)
			die_usage("--tenant '%s': a name is printable ASCII without spaces", spec);
	strcpy(t->name, field);
	for (i = 0; i < opt.nr_tenants; i++)
		if (strcmp(opt.tenants[i].name, t->name) == 0)
			die_usage("--tenant '%s' declared twice", t->name);
	while ((field = strtok_r(NULL, ":", &save)) != NULL) {
		static const char *const keys[] = { "min", "soft", "high", "max" };
		char *eq = strchr(field, '='), *val;
		uint64_t v, *dst[4] = { &t->lim.min, &t->lim.soft, &t->lim.high, &t->lim.max };
		size_t len;
		unsigned k;

		if (!eq)
			die_usage("--tenant %s: '%s' is not KEY=SIZE (min, soft, high, max)", t->name, field);
		*eq = '\0';
		val = eq + 1;
		for (k = 0; k < 4 && strcmp(field, keys[k]) != 0; k++)
			;
		if (k == 4)
			die_usage("--tenant %s: unknown limit '%s' (min, soft, high, max)", t->name, field);
		len = strlen(val);
		if (len > 1 && val[len - 1] == '%') {
			val[len - 1] = '\0';
			v = parse_uint(val, "a percentage", 0, 100);
			t->pct |= 1u << k;
		} else if (parse_size(val, &v) != 0) {
			die_usage("--tenant %s: %s=%s is not a size (e.g. 512K, 40M, 1G)", t->name, field, val);
		}
		*dst[k] = v;
	}
	opt.nr_tenants++;
}

void options_parse(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes = true;

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "-v") == 0 || strcmp(a, "-vv") == 0) {
			opt.verbose++;
			takes = false;
		} else if (strcmp(a, "--no-accounting") == 0) {
			opt.accounting = false;
			takes = false;
		} else if (strcmp(a, "--no-arenas") == 0) {
			opt.arenas = false;
			takes = false;
		} else if (strcmp(a, "-F") == 0 || strcmp(a, "--disable-flush-all") == 0) {
			opt.flush_disabled = true;
			takes = false;
		}
		if (!takes)
			continue;
		if (!v)
			die_usage("option '%s' needs a value", a);
		if (strcmp(a, "-l") == 0) {
			opt.addr = v;
		} else if (strcmp(a, "-p") == 0) {
			parse_uint(v, "-p (port)", 1, 65535);
			opt.port = v;
		} else if (strcmp(a, "-m") == 0) {
			uint64_t mb;

			if (parse_size(v, &mb) != 0 || mb == 0)
				die_usage("-m takes megabytes (e.g. 64, or 512K, 2G), not '%s'", v);
			/* A bare number is megabytes, as memcached's -m. */
			opt.max_bytes = (v[strlen(v) - 1] >= '0' && v[strlen(v) - 1] <= '9') ? mb << 20 : mb;
			if (opt.max_bytes < (1u << 20))
				die_usage("-m must be at least 1 megabyte");
		} else if (strcmp(a, "--metrics-port") == 0) {
			parse_uint(v, "--metrics-port", 1, 65535);
			opt.metrics_port = v;
		} else if (strcmp(a, "--conn-memory") == 0) {
			size_t len = strlen(v);

			if (len > 1 && v[len - 1] == '%') {
				char pct[8];

				snprintf(pct, sizeof(pct), "%.*s", (int)(len - 1), v);
				conn_memory_pct = parse_uint(pct, "--conn-memory %", 1, 50);
				opt.conn_memory = 0;
			} else if (parse_size(v, &opt.conn_memory) != 0 || opt.conn_memory < (64u << 10)) {
				die_usage("--conn-memory takes a size of at least 64K or a percentage of -m, not '%s'", v);
			}
		} else if (strcmp(a, "--stall-timeout") == 0) {
			opt.stall_timeout = parse_uint(v, "--stall-timeout", 0, 86400);
		} else if (strcmp(a, "--policy") == 0) {
			if (strcmp(v, "guarantee") == 0)
				opt.policy = SL_POLICY_GUARANTEE;
			else if (strcmp(v, "gatekeeper") == 0)
				opt.policy = SL_POLICY_GATEKEEPER;
			else if (strcmp(v, "protection") == 0)
				opt.policy = SL_POLICY_PROTECTION;
			else if (strcmp(v, "refault") == 0)
				opt.policy = SL_POLICY_REFAULT;
			else
				die_usage("--policy must be guarantee, gatekeeper, protection or refault, not '%s'", v);
		} else if (strcmp(a, "--ghosts") == 0) {
			if (parse_size(v, &opt.ghosts) != 0)
				die_usage("--ghosts takes a size, not '%s'", v);
			ghosts_set = true;
		} else if (strcmp(a, "--tenant") == 0) {
			parse_tenant(v);
		} else if (strcmp(a, "-t") == 0) {
			opt.threads = parse_uint(v, "-t (threads)", 1, 256);
		} else if (strcmp(a, "-c") == 0) {
			opt.max_conns = parse_uint(v, "-c (connections)", 1, 1000000);
		} else if (strcmp(a, "--max-tenants") == 0) {
			opt.max_tenants = parse_uint(v, "--max-tenants", 1, 4000);
		} else if (strcmp(a, "--headroom") == 0) {
			opt.headroom_pct = parse_uint(v, "--headroom (percent)", 0, 50);
		} else if (strcmp(a, "--lease-store") == 0) {
			opt.lease_store = v;
		} else if (strcmp(a, "--lease-period") == 0) {
			opt.lease_period_ms = parse_uint(v, "--lease-period (ms)", 10, 60000);
		} else if (strcmp(a, "--lease-ttl") == 0) {
			opt.lease_ttl_ms = parse_uint(v, "--lease-ttl (ms)", 100, 3600000);
		} else if (strcmp(a, "--lease-idle") == 0) {
			opt.lease_idle_ms = parse_uint(v, "--lease-idle (ms)", 1000, 86400000);
		} else if (strcmp(a, "--lease-wait") == 0) {
			opt.lease_wait_ms = parse_uint(v, "--lease-wait (ms)", 1, 3600000);
		} else if (strcmp(a, "-I") == 0) {
			uint64_t im;

			if (parse_size(v, &im) != 0 || im < 1024 || im > (128u << 20))
				die_usage("-I takes a size from 1K to 128M, not '%s'", v);
			opt.item_max = (size_t)im;
		} else {
			die_usage("unknown option '%s'", a);
		}
		i++;
	}
	if (opt.conn_memory == 0)
		opt.conn_memory = opt.max_bytes / 100 * conn_memory_pct;
	if (opt.conn_memory > opt.max_bytes / 2)
		die_usage("--conn-memory is reserved within -m: at most half of it");
	/* A leased tenant's refaults are its evidence that a larger share
	 * would be read (lease.c): ghosts on, reaching an eighth of -m. */
	if (!ghosts_set)
		opt.ghosts = opt.policy == SL_POLICY_REFAULT ? opt.max_bytes / 16
			     : opt.lease_store && opt.accounting ? opt.max_bytes / 8 : 0;
	if (opt.ghosts && !opt.accounting)
		die_usage("--ghosts reports refaults to softlimit: it does not go with --no-accounting");
	if (opt.lease_store && !opt.accounting)
		die_usage("--lease-store shares tenants' limits: it does not go with --no-accounting");
	if (opt.lease_period_ms >= opt.lease_ttl_ms)
		die_usage("--lease-period (%u ms) must be shorter than --lease-ttl (%u ms)",
			  opt.lease_period_ms, opt.lease_ttl_ms);
	if (!opt.accounting && !opt.arenas)
		die_usage("--no-arenas keeps the accounting: it does not go with --no-accounting");
	for (i = 0; i < (int)opt.nr_tenants; i++) {
		struct tenant_opt *t = &opt.tenants[i];
		uint64_t *f[4] = { &t->lim.min, &t->lim.soft, &t->lim.high, &t->lim.max };
		unsigned k;

		for (k = 0; k < 4; k++)
			if (t->pct & (1u << k))
				*f[k] = opt.max_bytes / 100 * *f[k];
		if (t->lim.min > t->lim.max || t->lim.soft > t->lim.max)
			die_usage("--tenant %s: min and soft must not be above max", t->name);
	}
}
