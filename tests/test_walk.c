/* SPDX-License-Identifier: MIT */
/*
 * Seeing the tree: sl_group_walk(), sl_group_lookup(), sl_group_path() and
 * sl_group_dump() in text and JSON.  The JSON is checked by a small strict
 * parser below, which also reads back every group's path and usage.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softlimit/softlimit.h>

/*
 * root -> a -> b -> c
 *           -> d
 *      -> e -> f
 *      -> q"uo\te<TAB>   (a name JSON must escape)
 */
enum { T_A, T_B, T_C, T_D, T_E, T_F, T_Q, T_N };
static const char *const names[T_N] = { "a", "b", "c", "d", "e", "f", "q\"uo\\te\t" };
static const int parents[T_N] = { -1, T_A, T_B, T_A, -1, T_E, -1 };
static const char *const paths[T_N] = { "a", "a/b", "a/b/c", "a/d", "e", "e/f", "q\"uo\\te\t" };
static const unsigned depths[T_N] = { 1, 2, 3, 2, 1, 2, 1 };
/* Each group is charged (index + 1) * 1000 itself; its usage counts its subtree. */
static const uint64_t usages[T_N] = { 10000, 5000, 3000, 4000, 11000, 6000, 7000 };

struct fixture {
	sl_tree *t;
	sl_group *root;
	sl_group *g[T_N];
};

static void fixture_build(struct fixture *f)
{
	int i;

	ck_assert_int_eq(sl_tree_create(NULL, &f->t), 0);
	f->root = sl_tree_root(f->t);
	for (i = 0; i < T_N; i++) {
		sl_group *parent = parents[i] < 0 ? f->root : f->g[parents[i]];

		ck_assert_int_eq(sl_group_create(parent, names[i], NULL, NULL, NULL, &f->g[i]), 0);
	}
	/* Distinct usages, to find each group's own in the dump. */
	for (i = 0; i < T_N; i++)
		ck_assert_int_eq(sl_charge(f->g[i], (uint64_t)(i + 1) * 1000, 0), 0);
}

static void fixture_free(struct fixture *f)
{
	int i;

	for (i = 0; i < T_N; i++)
		ck_assert_int_eq(sl_uncharge(f->g[i], (uint64_t)(i + 1) * 1000), 0);
	sl_tree_destroy(f->t);
}

static int index_of(struct fixture *f, sl_group *g)
{
	int i;

	for (i = 0; i < T_N; i++)
		if (f->g[i] == g)
			return i;
	return g == f->root ? T_N : -1;
}

/* ---- walk ---- */

struct visit {
	struct fixture *f;
	sl_group *stack[SL_DEPTH_MAX + 1];
	sl_group *order[T_N + 1];
	unsigned depth[T_N + 1];
	int n;
	int bad;       /* visits that broke pre-order or depth */
	int stop_at;   /* return stop_ret on this visit (1-based); 0 = never */
	int stop_ret;
};

/* Pre-order with depths: the group at depth d has the group last seen at depth d - 1 as parent. */
static int visit_fn(sl_group *g, unsigned depth, void *arg)
{
	struct visit *v = arg;

	if (v->n > T_N || depth > SL_DEPTH_MAX) {
		v->bad++;
		return -1000;
	}
	if (v->n == 0 ? depth != 0 : depth == 0 || sl_group_parent(g) != v->stack[depth - 1])
		v->bad++;
	v->stack[depth] = g;
	v->order[v->n] = g;
	v->depth[v->n] = depth;
	v->n++;
	return v->n == v->stop_at ? v->stop_ret : 0;
}

START_TEST(walk_visits_every_group_once_parents_before_children_with_depth)
{
	struct fixture f;
	struct visit v = { 0 };
	int seen[T_N + 1] = { 0 }, i;

	fixture_build(&f);
	v.f = &f;
	ck_assert_int_eq(sl_group_walk(f.root, visit_fn, &v), 0);
	ck_assert_int_eq(v.bad, 0);
	ck_assert_int_eq(v.n, T_N + 1);
	ck_assert_ptr_eq(v.order[0], f.root);
	for (i = 0; i < v.n; i++) {
		int k = index_of(&f, v.order[i]);

		ck_assert_int_ge(k, 0);
		seen[k]++;
		if (k < T_N)
			ck_assert_uint_eq(v.depth[i], depths[k]);
	}
	for (i = 0; i <= T_N; i++)
		ck_assert_int_eq(seen[i], 1);
	fixture_free(&f);
}
END_TEST

START_TEST(walk_of_a_subtree_visits_only_it_with_depth_relative_to_the_scope)
{
	struct fixture f;
	struct visit v = { 0 };
	int i;

	fixture_build(&f);
	v.f = &f;
	ck_assert_int_eq(sl_group_walk(f.g[T_A], visit_fn, &v), 0);
	ck_assert_int_eq(v.bad, 0);
	ck_assert_int_eq(v.n, 4);
	ck_assert_ptr_eq(v.order[0], f.g[T_A]);
	ck_assert_uint_eq(v.depth[0], 0);
	for (i = 0; i < v.n; i++) {
		int k = index_of(&f, v.order[i]);

		ck_assert(k == T_A || k == T_B || k == T_C || k == T_D);
		ck_assert_uint_eq(v.depth[i], depths[k] - 1);
	}
	/* A leaf: just itself. */
	memset(&v, 0, sizeof(v));
	ck_assert_int_eq(sl_group_walk(f.g[T_C], visit_fn, &v), 0);
	ck_assert_int_eq(v.n, 1);
	ck_assert_ptr_eq(v.order[0], f.g[T_C]);
	fixture_free(&f);
}
END_TEST

START_TEST(walk_stops_at_the_first_nonzero_return_and_returns_it)
{
	struct fixture f;
	struct visit v = { 0 };

	fixture_build(&f);
	v.stop_at = 3;
	v.stop_ret = 7;
	ck_assert_int_eq(sl_group_walk(f.root, visit_fn, &v), 7);
	ck_assert_int_eq(v.n, 3);

	memset(&v, 0, sizeof(v));
	v.stop_at = 1;
	v.stop_ret = -42;
	ck_assert_int_eq(sl_group_walk(f.root, visit_fn, &v), -42);
	ck_assert_int_eq(v.n, 1);

	memset(&v, 0, sizeof(v));
	v.stop_at = T_N + 1; /* the last group */
	v.stop_ret = 1;
	ck_assert_int_eq(sl_group_walk(f.root, visit_fn, &v), 1);
	ck_assert_int_eq(v.n, T_N + 1);
	fixture_free(&f);
}
END_TEST

static int charge_and_read_fn(sl_group *g, unsigned depth, void *arg)
{
	struct sl_stats st;
	struct sl_limits lim;
	int *bad = arg;

	(void)depth;
	if (sl_charge(g, 5, 0) != 0 || sl_group_stats(g, &st) != 0 || st.usage < 5 ||
	    sl_uncharge(g, 5) != 0 || sl_group_limits(g, &lim) != 0)
		(*bad)++;
	lim.soft = 1;
	if (sl_group_set_limits(g, &lim) != 0)
		(*bad)++;
	return 0;
}

START_TEST(walk_callback_may_charge_read_stats_and_set_limits)
{
	struct fixture f;
	struct sl_limits lim;
	int bad = 0;

	fixture_build(&f);
	ck_assert_int_eq(sl_group_walk(f.root, charge_and_read_fn, &bad), 0);
	ck_assert_int_eq(bad, 0);
	ck_assert_int_eq(sl_group_limits(f.g[T_F], &lim), 0);
	ck_assert_uint_eq(lim.soft, 1);
	ck_assert_int_eq(sl_tree_check(f.t), 0);
	fixture_free(&f);
}
END_TEST

START_TEST(walk_with_null_arguments_is_einval)
{
	struct fixture f;
	struct visit v = { 0 };

	fixture_build(&f);
	ck_assert_int_eq(sl_group_walk(NULL, visit_fn, &v), -EINVAL);
	ck_assert_int_eq(sl_group_walk(f.root, NULL, &v), -EINVAL);
	ck_assert_int_eq(v.n, 0);
	fixture_free(&f);
}
END_TEST

/* ---- lookup ---- */

START_TEST(lookup_finds_groups_by_path_below_the_scope)
{
	struct fixture f;
	sl_group *g = NULL;
	int i;

	fixture_build(&f);
	for (i = 0; i < T_N; i++) {
		g = NULL;
		ck_assert_int_eq(sl_group_lookup(f.root, paths[i], &g), 0);
		ck_assert_ptr_eq(g, f.g[i]);
	}
	ck_assert_int_eq(sl_group_lookup(f.root, "", &g), 0);
	ck_assert_ptr_eq(g, f.root);
	ck_assert_int_eq(sl_group_lookup(f.g[T_A], "", &g), 0);
	ck_assert_ptr_eq(g, f.g[T_A]);
	ck_assert_int_eq(sl_group_lookup(f.g[T_A], "b/c", &g), 0);
	ck_assert_ptr_eq(g, f.g[T_C]);
	ck_assert_int_eq(sl_group_lookup(f.g[T_A], "d", &g), 0);
	ck_assert_ptr_eq(g, f.g[T_D]);
	fixture_free(&f);
}
END_TEST

START_TEST(lookup_of_a_missing_group_is_enoent)
{
	static const char *const missing[] = { "x", "a/x", "a/b/c/d", "a/b/x/y", "b", "e/c", "a/e",
					       "A", "a/b ", "f" };
	struct fixture f;
	sl_group *g;
	size_t i;

	fixture_build(&f);
	for (i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		g = f.root;
		ck_assert_msg(sl_group_lookup(f.root, missing[i], &g) == -ENOENT, "\"%s\"", missing[i]);
		ck_assert_ptr_eq(g, f.root);
	}
	/* Relative to the scope, not the root. */
	ck_assert_int_eq(sl_group_lookup(f.g[T_E], "a", &g), -ENOENT);
	fixture_free(&f);
}
END_TEST

START_TEST(lookup_of_a_path_with_an_empty_component_is_einval)
{
	static const char *const bad[] = { "/", "/a", "a/", "a//b", "a/b/", "//", "a/b//c", "/a/b" };
	struct fixture f;
	sl_group *g;
	size_t i;

	fixture_build(&f);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(sl_group_lookup(f.root, bad[i], &g) == -EINVAL, "\"%s\": %d", bad[i],
			      sl_group_lookup(f.root, bad[i], &g));
	ck_assert_int_eq(sl_group_lookup(NULL, "a", &g), -EINVAL);
	ck_assert_int_eq(sl_group_lookup(f.root, NULL, &g), -EINVAL);
	ck_assert_int_eq(sl_group_lookup(f.root, "a", NULL), -EINVAL);
	fixture_free(&f);
}
END_TEST

START_TEST(lookup_rejects_an_empty_component_even_below_a_missing_group)
{
	/* A malformed path is malformed whatever the tree holds. */
	static const char *const bad[] = { "x//a", "a/x//c", "x/", "a/x/" };
	struct fixture f;
	sl_group *g;
	size_t i;

	fixture_build(&f);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(sl_group_lookup(f.root, bad[i], &g) == -EINVAL, "\"%s\": %d", bad[i],
			      sl_group_lookup(f.root, bad[i], &g));
	fixture_free(&f);
}
END_TEST

/* ---- path ---- */

START_TEST(path_round_trips_with_lookup_and_the_root_is_empty)
{
	struct fixture f;
	char buf[64];
	sl_group *g;
	int i;

	fixture_build(&f);
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(sl_group_path(f.root, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
	for (i = 0; i < T_N; i++) {
		ck_assert_int_eq(sl_group_path(f.g[i], buf, sizeof(buf)), 0);
		ck_assert_str_eq(buf, paths[i]);
		ck_assert_int_eq(sl_group_lookup(f.root, buf, &g), 0);
		ck_assert_ptr_eq(g, f.g[i]);
	}
	ck_assert_int_eq(sl_group_path(NULL, buf, sizeof(buf)), -EINVAL);
	ck_assert_int_eq(sl_group_path(f.root, NULL, 8), -EINVAL);
	fixture_free(&f);
}
END_TEST

START_TEST(path_that_does_not_fit_is_enospc_truncated_and_terminated)
{
	struct fixture f;
	char buf[16];

	fixture_build(&f);
	/* "a/b/c" needs 6 bytes. */
	ck_assert_int_eq(sl_group_path(f.g[T_C], buf, 6), 0);
	ck_assert_str_eq(buf, "a/b/c");
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(sl_group_path(f.g[T_C], buf, 5), -ENOSPC);
	ck_assert_str_eq(buf, "a/b/");
	ck_assert_uint_eq((unsigned char)buf[5], 'x');
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(sl_group_path(f.g[T_C], buf, 4), -ENOSPC);
	ck_assert_str_eq(buf, "a/b");
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(sl_group_path(f.g[T_C], buf, 1), -ENOSPC);
	ck_assert_str_eq(buf, "");
	ck_assert_uint_eq((unsigned char)buf[1], 'x');
	/* The root's "" fits in one byte. */
	ck_assert_int_eq(sl_group_path(f.root, buf, 1), 0);
	ck_assert_str_eq(buf, "");
	fixture_free(&f);
}
END_TEST

START_TEST(path_of_the_deepest_group_with_the_longest_names_round_trips)
{
	sl_tree *t;
	sl_group *g, *found;
	char name[SL_NAME_MAX + 1];
	size_t len = (size_t)SL_DEPTH_MAX * (SL_NAME_MAX + 1), n;
	char *buf = malloc(len + 1);
	int d;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(sl_tree_create(NULL, &t), 0);
	g = sl_tree_root(t);
	for (d = 0; d < SL_DEPTH_MAX; d++) {
		memset(name, 'a' + d % 26, SL_NAME_MAX);
		name[SL_NAME_MAX] = '\0';
		ck_assert_int_eq(sl_group_create(g, name, NULL, NULL, NULL, &g), 0);
	}
	/* 64 names of 255 bytes and 63 slashes: len - 1 bytes and the NUL. */
	ck_assert_int_eq(sl_group_path(g, buf, len), 0);
	n = strlen(buf);
	ck_assert_uint_eq(n, len - 1);
	ck_assert_int_eq(sl_group_lookup(sl_tree_root(t), buf, &found), 0);
	ck_assert_ptr_eq(found, g);
	ck_assert_int_eq(sl_group_path(g, buf, len - 1), -ENOSPC);
	ck_assert_uint_eq(strlen(buf), len - 2);
	free(buf);
	sl_tree_destroy(t);
}
END_TEST

/* ---- a small strict JSON parser for the dump ---- */

struct json {
	const char *p;
	int err;
	/* Group objects found: each object that has a "path" key. */
	int ngroups;
	char gpath[T_N + 1][64];
	uint64_t gusage[T_N + 1];
	unsigned gkeys[T_N + 1];
};

static const char *const group_keys[] = { "path",  "usage", "stocked", "peak",   "min",
					  "soft",  "high",  "max",     "emin",   "esoft",
					  "events", "reclaimed" };
#define NKEYS (sizeof(group_keys) / sizeof(group_keys[0]))
#define ALL_KEYS ((1u << NKEYS) - 1)

static void json_ws(struct json *j)
{
	while (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')
		j->p++;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A string into out (size bytes, decoded; \u00XX only, as names are bytes). */
static void json_string(struct json *j, char *out, size_t size)
{
	size_t n = 0;

	if (*j->p != '"') {
		j->err++;
		return;
	}
	j->p++;
	while (*j->p != '"') {
		char c = *j->p;

		if (c == '\0' || (unsigned char)c < 0x20) {
			j->err++;
			return;
		}
		if (c == '\\') {
			j->p++;
			switch (*j->p) {
			case '"':
			case '\\':
			case '/':
				c = *j->p;
				break;
			case 'n':
				c = '\n';
				break;
			case 't':
				c = '\t';
				break;
			case 'r':
				c = '\r';
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'u': {
				int k, v = 0;

				for (k = 1; k <= 4; k++) {
					int h = hexval(j->p[k]);

					if (h < 0) {
						j->err++;
						return;
					}
					v = v * 16 + h;
				}
				if (v > 0xff) {
					j->err++;
					return;
				}
				c = (char)v;
				j->p += 4;
				break;
			}
			default:
				j->err++;
				return;
			}
		}
		if (out && n + 1 < size)
			out[n++] = c;
		j->p++;
	}
	j->p++;
	if (out && size)
		out[n] = '\0';
}

static uint64_t json_number(struct json *j)
{
	uint64_t v = 0;
	int digits = 0;

	if (*j->p == '-')
		j->p++;
	while (*j->p >= '0' && *j->p <= '9') {
		v = v * 10 + (uint64_t)(*j->p - '0');
		j->p++;
		digits++;
	}
	if (!digits)
		j->err++;
	if (*j->p == '.' || *j->p == 'e' || *j->p == 'E')
		j->err++; /* the dump has integers only */
	return v;
}

static void json_value(struct json *j, int depth);

static void json_object(struct json *j, int depth)
{
	char key[64], path[64] = "";
	unsigned keys = 0;
	uint64_t usage = 0;
	size_t k;

	j->p++;
	json_ws(j);
	if (*j->p == '}') {
		j->p++;
		return;
	}
	for (;;) {
		json_ws(j);
		json_string(j, key, sizeof(key));
		json_ws(j);
		if (j->err || *j->p != ':') {
			j->err++;
			return;
		}
		j->p++;
		json_ws(j);
		for (k = 0; k < NKEYS; k++)
			if (strcmp(key, group_keys[k]) == 0)
				keys |= 1u << k;
		if (strcmp(key, "path") == 0) {
			json_string(j, path, sizeof(path));
		} else if (strcmp(key, "usage") == 0) {
			usage = json_number(j);
		} else {
			json_value(j, depth + 1);
		}
		if (j->err)
			return;
		json_ws(j);
		if (*j->p == ',') {
			j->p++;
			continue;
		}
		if (*j->p == '}') {
			j->p++;
			break;
		}
		j->err++;
		return;
	}
	if (keys & 1u) {
		if (j->ngroups > T_N) {
			j->err++;
			return;
		}
		strcpy(j->gpath[j->ngroups], path);
		j->gusage[j->ngroups] = usage;
		j->gkeys[j->ngroups] = keys;
		j->ngroups++;
	}
}

static void json_array(struct json *j, int depth)
{
	j->p++;
	json_ws(j);
	if (*j->p == ']') {
		j->p++;
		return;
	}
	for (;;) {
		json_ws(j);
		json_value(j, depth + 1);
		if (j->err)
			return;
		json_ws(j);
		if (*j->p == ',') {
			j->p++;
			continue;
		}
		if (*j->p == ']') {
			j->p++;
			return;
		}
		j->err++;
		return;
	}
}

static void json_value(struct json *j, int depth)
{
	if (depth > 32) {
		j->err++;
		return;
	}
	json_ws(j);
	if (*j->p == '{')
		json_object(j, depth);
	else if (*j->p == '[')
		json_array(j, depth);
	else if (*j->p == '"')
		json_string(j, NULL, 0);
	else if (strncmp(j->p, "true", 4) == 0 || strncmp(j->p, "null", 4) == 0)
		j->p += 4;
	else if (strncmp(j->p, "false", 5) == 0)
		j->p += 5;
	else
		json_number(j);
}

/* Parse a whole document: exactly one value, then only white space. */
static void json_parse(struct json *j, const char *text)
{
	memset(j, 0, sizeof(*j));
	j->p = text;
	json_ws(j);
	if (*j->p != '{')
		j->err++;
	json_value(j, 0);
	json_ws(j);
	if (*j->p != '\0')
		j->err++;
}

START_TEST(json_parser_rejects_what_it_should)
{
	static const char *const bad[] = { "{", "{\"a\":}", "{\"a\":1,}", "[1]", "{\"a\":\"x}",
					   "{\"a\":1} x", "{\"a\":\"\\q\"}", "{a:1}" };
	struct json j;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_parse(&j, bad[i]);
		ck_assert_msg(j.err != 0, "accepted %s", bad[i]);
	}
	json_parse(&j, "{\"groups\":[{\"path\":\"a\\\"b\\u0009\",\"usage\":12,\"x\":[true,null,\"max\"]}]}");
	ck_assert_int_eq(j.err, 0);
	ck_assert_int_eq(j.ngroups, 1);
	ck_assert_str_eq(j.gpath[0], "a\"b\t");
	ck_assert_uint_eq(j.gusage[0], 12);
}
END_TEST

/* ---- dump ---- */

/* The dump of scope, in a buffer of exactly the size it asks for. */
static char *dump_of(sl_group *scope, enum sl_dump_format fmt)
{
	size_t needed = 0;
	char small[8];
	char *buf;
	int rc;

	rc = sl_group_dump(scope, fmt, small, sizeof(small), &needed);
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_uint_gt(needed, sizeof(small));
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	buf = malloc(needed + 1);
	ck_assert_ptr_nonnull(buf);
	/* One byte short of the NUL: still truncated. */
	ck_assert_int_eq(sl_group_dump(scope, fmt, buf, needed, NULL), -ENOSPC);
	ck_assert_uint_eq(strlen(buf), needed - 1);
	ck_assert_int_eq(sl_group_dump(scope, fmt, buf, needed + 1, &needed), 0);
	ck_assert_uint_eq(strlen(buf), needed);
	return buf;
}

START_TEST(json_dump_is_valid_json_with_every_group_and_its_stats)
{
	struct fixture f;
	struct json j;
	char *out;
	int i, k;

	fixture_build(&f);
	out = dump_of(f.root, SL_DUMP_JSON);
	json_parse(&j, out);
	ck_assert_msg(j.err == 0, "invalid JSON near \"%.40s\" in %s", j.p, out);
	ck_assert_int_eq(j.ngroups, T_N + 1);
	/* Every group once, by its (escaped, then decoded) path, with its usage. */
	for (i = 0; i < T_N; i++) {
		for (k = 0; k < j.ngroups; k++)
			if (strcmp(j.gpath[k], paths[i]) == 0)
				break;
		ck_assert_msg(k < j.ngroups, "no group \"%s\" in %s", paths[i], out);
		ck_assert_uint_eq(j.gusage[k], usages[i]);
		ck_assert_msg(j.gkeys[k] == ALL_KEYS, "\"%s\": keys 0x%x", paths[i], j.gkeys[k]);
	}
	for (k = 0; k < j.ngroups; k++)
		if (strcmp(j.gpath[k], "") == 0)
			break;
	ck_assert_int_lt(k, j.ngroups);
	ck_assert_uint_eq(j.gusage[k], 28000);
	/* The quote and backslash went out escaped. */
	ck_assert_ptr_nonnull(strstr(out, "q\\\"uo\\\\te"));
	free(out);
	fixture_free(&f);
}
END_TEST

START_TEST(json_dump_of_a_subtree_holds_only_that_subtree)
{
	struct fixture f;
	struct json j;
	char *out;
	int k;

	fixture_build(&f);
	out = dump_of(f.g[T_A], SL_DUMP_JSON);
	json_parse(&j, out);
	ck_assert_int_eq(j.err, 0);
	ck_assert_int_eq(j.ngroups, 4);
	for (k = 0; k < j.ngroups; k++)
		ck_assert_msg(strcmp(j.gpath[k], "a") == 0 || strncmp(j.gpath[k], "a/", 2) == 0, "%s",
			      j.gpath[k]);
	free(out);
	fixture_free(&f);
}
END_TEST

START_TEST(text_dump_has_one_line_per_group_with_its_name_and_usage)
{
	struct fixture f;
	char *out, *line, *save = NULL;
	int lines = 0, i;

	fixture_build(&f);
	out = dump_of(f.root, SL_DUMP_TEXT);
	for (i = 0; i < T_N; i++) {
		char want[32];

		ck_assert_msg(strstr(out, names[i]) != NULL, "no \"%s\" in %s", names[i], out);
		snprintf(want, sizeof(want), "%" PRIu64, usages[i]);
		ck_assert_ptr_nonnull(strstr(out, want));
	}
	ck_assert_uint_eq(out[strlen(out) - 1], '\n');
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		ck_assert_ptr_nonnull(strstr(line, "usage"));
		lines++;
	}
	ck_assert_int_eq(lines, T_N + 1);
	free(out);
	fixture_free(&f);
}
END_TEST

START_TEST(dump_reports_the_size_it_needs_and_rejects_bad_arguments)
{
	struct fixture f;
	size_t needed = 0;
	char buf[4];
	int rc;

	fixture_build(&f);
	/* No buffer at all: only the size. */
	rc = sl_group_dump(f.root, SL_DUMP_JSON, NULL, 0, &needed);
	ck_assert(rc == 0 || rc == -ENOSPC);
	ck_assert_uint_gt(needed, 0);
	ck_assert_int_eq(sl_group_dump(f.root, (enum sl_dump_format)7, buf, sizeof(buf), &needed), -EINVAL);
	ck_assert_int_eq(sl_group_dump(NULL, SL_DUMP_TEXT, buf, sizeof(buf), &needed), -EINVAL);
	ck_assert_int_eq(sl_group_dump(f.root, SL_DUMP_TEXT, NULL, 16, &needed), -EINVAL);
	fixture_free(&f);
}
END_TEST

/* ---- what a walk callback may call: the refusals instead of deadlocks ---- */

struct inside {
	sl_group *a, *b;
	unsigned calls;
	int create_rc, destroy_rc, set_rc, charge_rc, lookup_rc, nested_rc, dump_rc, oom_rc;
	uint64_t reclaimed;
};

static uint64_t count_calls(sl_group *g, uint64_t target, void *ctx)
{
	struct inside *in = ctx;

	(void)g;
	(void)target;
	in->calls++;
	return 0;
}

static int nop_visit(sl_group *g, unsigned depth, void *arg)
{
	(void)g;
	(void)depth;
	(void)arg;
	return 0;
}

static int inside_visit(sl_group *g, unsigned depth, void *arg)
{
	struct inside *in = arg;
	struct sl_limits l;
	sl_group *found = NULL, *made = NULL;
	char buf[4096];
	size_t need;

	(void)depth;
	if (g != in->a)
		return 0;
	in->create_rc = sl_group_create(in->a, "new", NULL, NULL, NULL, &made);
	in->destroy_rc = sl_group_destroy(in->b);
	sl_limits_init(&l);
	l.max = 10; /* below a's usage: would need reclaim */
	in->set_rc = sl_group_set_limits(in->a, &l);
	in->charge_rc = sl_charge(in->b, 1000, 0); /* past a's new max: must not reclaim */
	in->lookup_rc = sl_group_lookup(sl_group_parent(in->a), "a/b", &found);
	if (found != in->b)
		in->lookup_rc = -1;
	in->nested_rc = sl_group_walk(in->a, nop_visit, NULL);
	in->dump_rc = sl_group_dump(in->a, SL_DUMP_JSON, buf, sizeof(buf), &need);
	in->oom_rc = sl_tree_set_oom_handler(sl_group_tree(in->a), NULL, NULL);
	in->reclaimed = sl_reclaim(in->a, 100, 0);
	return 0;
}

START_TEST(inside_a_walk_calls_that_need_the_lock_or_reclaim_refuse_instead_of_deadlocking)
{
	struct sl_tree_opts o;
	struct inside in = { 0 };
	struct sl_ops ops = { .reclaim = count_calls };
	struct sl_stats st;
	sl_tree *t;

	sl_tree_opts_init(&o);
	o.batch = SL_BATCH_NONE;
	ck_assert_int_eq(sl_tree_create(&o, &t), 0);
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "a", NULL, &ops, &in, &in.a), 0);
	ck_assert_int_eq(sl_group_create(in.a, "b", NULL, &ops, &in, &in.b), 0);
	ck_assert_int_eq(sl_charge(in.a, 100, 0), 0);
	ck_assert_int_eq(sl_group_walk(sl_tree_root(t), inside_visit, &in), 0);
	ck_assert_int_eq(in.create_rc, -EBUSY);
	ck_assert_int_eq(in.destroy_rc, -EBUSY);
	ck_assert_int_eq(in.set_rc, -EBUSY);       /* in force, but nothing reclaimed */
	ck_assert_int_eq(in.charge_rc, -ENOMEM);
	ck_assert_int_eq(in.lookup_rc, 0);
	ck_assert_int_eq(in.nested_rc, 0);
	ck_assert_int_eq(in.dump_rc, 0);
	ck_assert_int_eq(in.oom_rc, 0);
	ck_assert_uint_eq(in.reclaimed, 0);
	ck_assert_uint_eq(in.calls, 0);             /* no callback ran inside the walk */
	/* After the walk everything works again. */
	ck_assert_int_eq(sl_group_create(in.a, "new", NULL, NULL, NULL, &in.b), 0);
	ck_assert_int_eq(sl_group_stats(in.a, &st), 0);
	ck_assert_uint_eq(st.limits.max, 10);
	ck_assert_int_eq(sl_tree_check(t), 0);
	sl_tree_destroy(t);
}
END_TEST

/*
 * Regression: a walk of tree B inside a walk of tree A reset the thread's
 * "inside a walk" mark to none instead of to A, and a lookup on A then
 * took A's lock a second time (a deadlock; Check's timeout reports it).
 * Walks nest to any depth and across trees: inside each, calls on every
 * tree being walked refuse or go without the lock, as at the top.
 */
struct nest {
	sl_tree *t[3];
	int level, visits, errors;
};

static int nest_probe(struct nest *n, int upto)
{
	sl_group *g;
	int i;

	/* Every tree walked so far: lookups work, creates refuse. */
	for (i = 0; i <= upto; i++) {
		if (sl_group_lookup(sl_tree_root(n->t[i]), "x", &g) != 0)
			n->errors++;
		if (sl_group_create(sl_tree_root(n->t[i]), "y", NULL, NULL, NULL, &g) != -EBUSY)
			n->errors++;
	}
	return 0;
}

static int nest_visit(sl_group *g, unsigned depth, void *arg)
{
	struct nest *n = arg;
	int me = n->level;

	(void)depth;
	if (sl_group_parent(g)) /* only at each tree's root */
		return 0;
	n->visits++;
	nest_probe(n, me);
	if (me < 2) {
		n->level = me + 1;
		if (sl_group_walk(sl_tree_root(n->t[me + 1]), nest_visit, n) != 0)
			n->errors++;
		/* Back in the walk of tree me: the mark says so. */
		n->level = me;
		nest_probe(n, me);
		/* A nested walk of the same tree works too. */
		if (sl_tree_check(n->t[me]) != 0)
			n->errors++;
		nest_probe(n, me);
	}
	return 0;
}

START_TEST(walks_nest_across_trees_and_each_tree_stays_marked)
{
	struct nest n = { .level = 0 };
	sl_group *g;
	int i;

	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(sl_tree_create(NULL, &n.t[i]), 0);
		ck_assert_int_eq(sl_group_create(sl_tree_root(n.t[i]), "x", NULL, NULL, NULL, &g), 0);
	}
	ck_assert_int_eq(sl_group_walk(sl_tree_root(n.t[0]), nest_visit, &n), 0);
	ck_assert_int_eq(n.visits, 3);
	ck_assert_int_eq(n.errors, 0);
	/* Outside every walk: creates work again on every tree. */
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(sl_group_create(sl_tree_root(n.t[i]), "y", NULL, NULL, NULL, &g), 0);
		sl_tree_destroy(n.t[i]);
	}
}
END_TEST

static Suite *walk_suite(void)
{
	Suite *s = suite_create("walk");
	TCase *tc;

	tc = tcase_create("walk");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, walk_visits_every_group_once_parents_before_children_with_depth);
	tcase_add_test(tc, walk_of_a_subtree_visits_only_it_with_depth_relative_to_the_scope);
	tcase_add_test(tc, walk_stops_at_the_first_nonzero_return_and_returns_it);
	tcase_add_test(tc, walk_callback_may_charge_read_stats_and_set_limits);
	tcase_add_test(tc, walk_with_null_arguments_is_einval);
	tcase_add_test(tc, inside_a_walk_calls_that_need_the_lock_or_reclaim_refuse_instead_of_deadlocking);
	tcase_add_test(tc, walks_nest_across_trees_and_each_tree_stays_marked);
	suite_add_tcase(s, tc);

	tc = tcase_create("lookup");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, lookup_finds_groups_by_path_below_the_scope);
	tcase_add_test(tc, lookup_of_a_missing_group_is_enoent);
	tcase_add_test(tc, lookup_of_a_path_with_an_empty_component_is_einval);
	tcase_add_test(tc, lookup_rejects_an_empty_component_even_below_a_missing_group);
	suite_add_tcase(s, tc);

	tc = tcase_create("path");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, path_round_trips_with_lookup_and_the_root_is_empty);
	tcase_add_test(tc, path_that_does_not_fit_is_enospc_truncated_and_terminated);
	tcase_add_test(tc, path_of_the_deepest_group_with_the_longest_names_round_trips);
	suite_add_tcase(s, tc);

	tc = tcase_create("dump");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, json_parser_rejects_what_it_should);
	tcase_add_test(tc, json_dump_is_valid_json_with_every_group_and_its_stats);
	tcase_add_test(tc, json_dump_of_a_subtree_holds_only_that_subtree);
	tcase_add_test(tc, text_dump_has_one_line_per_group_with_its_name_and_usage);
	tcase_add_test(tc, dump_reports_the_size_it_needs_and_rejects_bad_arguments);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(walk_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
