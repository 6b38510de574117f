/* SPDX-License-Identifier: MIT */
/*
 * openmetrics_dump OM_FILE JSON_FILE - build a tree in which every counter
 * of struct sl_stats is nonzero somewhere, with group names that need
 * escaping, and write its dump as OpenMetrics to OM_FILE and as JSON to
 * JSON_FILE, so that openmetrics_check.py can parse the first with a real
 * OpenMetrics parser and compare it with the second.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softlimit/softlimit.h>

#define CHECK(expr)                                                                   \
	do {                                                                              \
		if (!(expr)) {                                                            \
			fprintf(stderr, "openmetrics_dump: %s:%d: %s\n", __FILE__, __LINE__, #expr); \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

static uint64_t give_back(sl_group *g, uint64_t target, void *ctx)
{
	uint64_t *held = ctx, n = target < *held ? target : *held;

	*held -= n;
	CHECK(sl_uncharge(g, n) == 0);
	return n;
}

static sl_group *group(sl_group *parent, const char *name, uint64_t min, uint64_t soft, uint64_t high,
		       uint64_t max, uint64_t *held)
{
	struct sl_limits lim;
	struct sl_ops ops = { .reclaim = give_back };
	sl_group *g = NULL;

	sl_limits_init(&lim);
	lim.min = min;
	lim.soft = soft;
	lim.high = high;
	lim.max = max;
	CHECK(sl_group_create(parent, name, &lim, held ? &ops : NULL, held, &g) == 0);
	return g;
}

static void write_dump(sl_group *scope, enum sl_dump_format fmt, const char *file)
{
	size_t needed = 0;
	char *buf;
	FILE *f;

	CHECK(sl_group_dump(scope, fmt, NULL, 0, &needed) == 0 && needed > 0);
	buf = malloc(needed + 1);
	CHECK(buf);
	CHECK(sl_group_dump(scope, fmt, buf, needed + 1, NULL) == 0);
	f = fopen(file, "wb");
	CHECK(f);
	CHECK(fwrite(buf, 1, needed, f) == needed);
	CHECK(fclose(f) == 0);
	free(buf);
}

int main(int argc, char **argv)
{
	static uint64_t held_a, held_b, held_c;
	struct sl_tree_opts opts;
	sl_tree *t = NULL;
	sl_group *root, *a, *b, *c, *odd;

	if (argc != 3) {
		fprintf(stderr, "usage: openmetrics_dump OM_FILE JSON_FILE\n");
		return 2;
	}
	sl_tree_opts_init(&opts);
	opts.policy = SL_POLICY_PROTECTION;
	opts.root.max = 1 << 20;
	CHECK(sl_tree_create(&opts, &t) == 0);
	root = sl_tree_root(t);

	a = group(root, "a", 4096, 65536, 200000, SL_UNLIMITED, &held_a);
	b = group(a, "b", 0, 8192, SL_UNLIMITED, 300000, &held_b);
	odd = group(root, "q\"uo\\te\nnl \xc3\xa9 \xff end", 0, 0, SL_UNLIMITED, SL_UNLIMITED, NULL);
	group(odd, "leaf", 1, 2, 3, 4, NULL);

	/* usage, peak, a high event on a, a forced charge past b's max. */
	CHECK(sl_charge(b, 250000, 0) == 0);
	held_b += 250000;
	CHECK(sl_charge(b, 100000, SL_FORCE) == 0);
	held_b += 100000;
	CHECK(sl_charge(a, 1000, 0) == 0);
	held_a += 1000;
	/* An oom event on b: the charge fails even after reclaim. */
	CHECK(sl_charge(b, 400000, 0) == -ENOMEM);
	/* Reclaim: reclaimed bytes; c is within its soft limit, so only pass 2
	 * takes from it, which counts a low event. */
	c = group(root, "c", 0, 50000, SL_UNLIMITED, SL_UNLIMITED, &held_c);
	CHECK(sl_charge(c, 40000, 0) == 0);
	held_c += 40000;
	CHECK(sl_reclaim(root, SL_UNLIMITED, 0) > 0);
	/* Refaults reported for c. */
	CHECK(sl_refault(c, 3) == 0);
	CHECK(sl_charge(odd, 77, SL_NORECLAIM) == 0);

	write_dump(root, SL_DUMP_OPENMETRICS, argv[1]);
	write_dump(root, SL_DUMP_JSON, argv[2]);

	CHECK(sl_uncharge(odd, 77) == 0);
	sl_tree_destroy(t);
	return 0;
}
