/* SPDX-License-Identifier: MIT */
/*
 * admin.c: memcached's administration commands, as memcached 1.6 answers
 * them: verbosity, cache_memlimit (the only one that changes slcache: the
 * whole budget), and those that tune machinery slcache does not have -
 * slab classes, a segmented LRU, an LRU crawler, TLS - whose arguments are
 * checked as memcached checks them and which change nothing.  stats,
 * flush_all and version are in protocol.c.
 */
#define _GNU_SOURCE

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "proto.h"
#include "slcache.h"
#include "tenants.h"

#define MEMLIMIT_MIN_MB 8           /* memcached's smallest cache_memlimit */
#define MEMLIMIT_MAX_MB 1000000000u /* more is taken for a count of bytes  */
#define LRU_HOT_WARM_MAX 80         /* lru tune: hot + warm percentages    */
#define CRAWLER_SLEEP_MAX 1000000   /* lru_crawler sleep, microseconds     */
#define SLAB_CLASS_LARGEST 39       /* memcached 1.6's last class by default */

/* lru_crawler enable/disable: a switch with nothing behind it (expired
 * items are freed when met); relaxed, it orders nothing. */
static atomic_bool crawler_on = true;

static void cmd_verbosity(struct conn *c, struct tok *tk, size_t nt)
{
	uint32_t level;

	if (nt < 2 || nt > 3) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	noreply_maybe(c, tk, nt);
	if (!tok_u32(&tk[1], &level)) {
		reply(c, "CLIENT_ERROR bad command line format");
		return;
	}
	atomic_store_explicit(&opt.verbose, level > 2 ? 2 : (int)level, memory_order_relaxed);
	reply(c, "OK");
}

/* cache_memlimit MEGABYTES: the whole budget, live (tenants_set_budget()). */
static void cmd_memlimit(struct conn *c, struct tok *tk, size_t nt)
{
	uint32_t mb;

	if (nt < 2 || nt > 3) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	noreply_maybe(c, tk, nt);
	if (!tok_u32(&tk[1], &mb)) {
		reply(c, "ERROR");
		return;
	}
	if (mb < MEMLIMIT_MIN_MB) {
		reply(c, "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m");
		return;
	}
	if (mb > MEMLIMIT_MAX_MB) {
		reply(c, "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes");
		return;
	}
	if (tenants_set_budget((uint64_t)mb << 20) != 0) {
		reply(c, "MEMLIMIT_ADJUST_FAILED out of memory or memory too fragmented");
		return;
	}
	logv("maxbytes adjusted to %" PRIu32 "m", mb);
	reply(c, "OK");
}

/* slabs automove N|ratio X: slcache has no slab classes to move; the
 * setting is checked as memcached checks it, and changes nothing. */
static void cmd_slabs(struct conn *c, struct tok *tk, size_t nt)
{
	uint32_t level;
	int64_t src, dst;

	if (nt == 4 && tok_is(&tk[1], "reassign")) {
		/* No class ever has a spare page to give. */
		if (!tok_i32(&tk[2], &src) || !tok_i32(&tk[3], &dst))
			ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		else if (src == dst)
			ob_str(c, "SAME src and dst class are identical\r\n");
		else if (src < 0 || src > SLAB_CLASS_LARGEST || dst < 0 || dst > SLAB_CLASS_LARGEST)
			ob_str(c, "BADCLASS invalid src or dst class id\r\n"); /* -1: "any": none */
		else
			ob_str(c, "NOSPARE source class has no spare pages\r\n");
		return;
	}
	if (nt < 3 || !tok_is(&tk[1], "automove")) {
		ob_str(c, "ERROR\r\n");
		return;
	}
	noreply_maybe(c, tk, nt);
	if (tok_is(&tk[2], "ratio")) {
		reply(c, nt < 4 ? "ERROR" : "OK");
		return;
	}
	if (!tok_u32(&tk[2], &level)) {
		reply(c, "CLIENT_ERROR bad command line format");
		return;
	}
	reply(c, level <= 2 ? "OK" : "ERROR");
}

/* A double as memcached reads one (strtod, then white space or the end). */
static bool tok_double(const struct tok *t, double *out)
{
	char buf[64], *end;

	if (t->n == 0 || t->n >= sizeof(buf))
		return false;
	memcpy(buf, t->s, t->n);
	buf[t->n] = '\0';
	*out = strtod(buf, &end);
	return end != buf && (*end == '\0' || strchr(" \t\n\v\f\r", *end));
}

/* lru tune HOT WARM HOT_FACTOR WARM_FACTOR | mode flat|segmented | temp_ttl N */
static void cmd_lru(struct conn *c, struct tok *tk, size_t nt)
{
	uint32_t hot, warm;
	double hot_factor, warm_factor;
	int64_t ttl;

	noreply_maybe(c, tk, nt);
	if (tok_is(&tk[1], "tune") && nt >= 6) {
		if (!tok_u32(&tk[2], &hot) || !tok_u32(&tk[3], &warm) ||
		    !tok_double(&tk[4], &hot_factor) || !tok_double(&tk[5], &warm_factor))
			reply(c, "ERROR");
		else if ((uint64_t)hot + warm > LRU_HOT_WARM_MAX)
			reply(c, "ERROR hot and warm pcts must not exceed 80");
		else if (hot_factor <= 0 || warm_factor <= 0)
			reply(c, "ERROR hot/warm age factors must be greater than 0");
		else
			reply(c, "OK");
	} else if (tok_is(&tk[1], "mode") && nt >= 3) {
		reply(c, tok_is(&tk[2], "flat") || tok_is(&tk[2], "segmented") ? "OK" : "ERROR");
	} else if (tok_is(&tk[1], "temp_ttl") && nt >= 3) {
		reply(c, tok_i32(&tk[2], &ttl) ? "OK" : "ERROR");
	} else {
		reply(c, "ERROR");
	}
}

/* "all" or a comma-separated list of class ids, as memcached's crawler takes. */
static bool crawl_classes_ok(const struct tok *t)
{
	size_t i = 0;

	if (tok_is(t, "all"))
		return true;
	while (i < t->n) {
		struct tok id = { t->s + i, 0 };
		uint32_t v;

		while (i < t->n && t->s[i] != ',')
			i++;
		id.n = (size_t)(t->s + i - id.s);
		i++;
		if (id.n == 0) /* "1,,2": empty items are skipped (strtok) */
			continue;
		if (!tok_u32(&id, &v) || v < 1 || v >= SLAB_CLASSES_MAX)
			return false;
	}
	return true;
}

/* lru_crawler crawl|metadump CLASSES, tocrawl N, sleep N, enable, disable.
 * slcache lists no items (its tenants' LRUs are not walked from outside),
 * so metadump answers as memcached does when dumps are not allowed. */
static void cmd_lru_crawler(struct conn *c, struct tok *tk, size_t nt)
{
	bool on = atomic_load_explicit(&crawler_on, memory_order_relaxed);
	uint32_t v;

	if (nt == 3 && (tok_is(&tk[1], "crawl") || tok_is(&tk[1], "metadump"))) {
		if (!on)
			ob_str(c, "CLIENT_ERROR lru crawler disabled\r\n");
		else if (tok_is(&tk[1], "metadump"))
			ob_str(c, "ERROR metadump not allowed\r\n");
		else
			ob_str(c, crawl_classes_ok(&tk[2]) ? "OK\r\n" : "BADCLASS invalid class id\r\n");
	} else if (nt == 3 && (tok_is(&tk[1], "tocrawl") || tok_is(&tk[1], "sleep"))) {
		if (!tok_u32(&tk[2], &v))
			ob_str(c, "CLIENT_ERROR bad command line format\r\n");
		else if (tok_is(&tk[1], "sleep") && v > CRAWLER_SLEEP_MAX)
			ob_str(c, "CLIENT_ERROR sleep must be one second or less\r\n");
		else
			ob_str(c, "OK\r\n");
	} else if (nt == 2 && tok_is(&tk[1], "enable")) {
		ob_str(c, on ? "ERROR failed to start lru crawler thread\r\n" : "OK\r\n");
		atomic_store_explicit(&crawler_on, true, memory_order_relaxed);
	} else if (nt == 2 && tok_is(&tk[1], "disable")) {
		ob_str(c, "OK\r\n"); /* stopping a stopped crawler is fine too */
		atomic_store_explicit(&crawler_on, false, memory_order_relaxed);
	} else {
		ob_str(c, "ERROR\r\n");
	}
}

bool admin_command(struct conn *c, struct tok *tk, size_t nt)
{
	if (tok_is(&tk[0], "verbosity")) {
		cmd_verbosity(c, tk, nt);
	} else if (tok_is(&tk[0], "cache_memlimit")) {
		cmd_memlimit(c, tk, nt);
	} else if (tok_is(&tk[0], "slabs")) {
		cmd_slabs(c, tk, nt);
	} else if (tok_is(&tk[0], "lru")) {
		if (nt < 2)
			ob_str(c, "ERROR\r\n");
		else
			cmd_lru(c, tk, nt);
	} else if (tok_is(&tk[0], "lru_crawler")) {
		cmd_lru_crawler(c, tk, nt);
	} else if (tok_is(&tk[0], "shutdown")) {
		ob_str(c, "ERROR: shutdown not enabled\r\n");
	} else if (tok_is(&tk[0], "refresh_certs")) {
		ob_str(c, "Error TLS not enabled\r\n");
	} else if (tok_is(&tk[0], "watch")) {
		/* A log stream with nothing to log: memcached's connection reads
		 * no more commands either. */
		ob_str(c, "OK\r\n");
		c->state = CS_CLOSE;
	} else {
		return false;
	}
	return true;
}
