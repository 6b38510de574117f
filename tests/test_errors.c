/* SPDX-License-Identifier: MIT */
/*
 * Bad input to every public function: each call returns its documented
 * error, and the tree it was given is exactly as it was (every counter and
 * limit of every group).  softlimit.h's conventions ("Nothing aborts, prints,
 * or wraps a counter on bad input") and the header's Errors: paragraphs.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "helpers.h"

/*
 * The fixture every case runs against:
 *   root (max 100000) -> a (max 10000, 100 charged) -> b (50 charged)
 *   root -> c (empty)
 */
struct fx {
	sl_tree *t;
	sl_group *root, *a, *b, *c;
};

#define FX_GROUPS 4

static void fx_groups(struct fx *f, sl_group *g[FX_GROUPS])
{
	g[0] = f->root;
	g[1] = f->a;
	g[2] = f->b;
	g[3] = f->c;
}

static void fx_build(struct fx *f)
{
	f->t = tree_new(0, 100000);
	f->root = sl_tree_root(f->t);
	f->a = group_new(f->root, "a", 10000);
	f->b = group_new(f->a, "b", SL_UNLIMITED);
	f->c = group_new(f->root, "c", SL_UNLIMITED);
	ck_assert_int_eq(sl_charge(f->a, 100, 0), 0);
	ck_assert_int_eq(sl_charge(f->b, 50, 0), 0);
}

static struct sl_limits limits(uint64_t min, uint64_t soft, uint64_t high, uint64_t max)
{
	struct sl_limits l;

	l.min = min;
	l.soft = soft;
	l.high = high;
	l.max = max;
	return l;
}

/* ---- one function per bad call; each returns what the call returned ---- */

static int tree_create_null_out(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	return sl_tree_create(&o, NULL);
}

static int tree_create_null_opts_null_out(struct fx *f)
{
	(void)f;
	return sl_tree_create(NULL, NULL);
}

static int tree_create_with(const struct sl_tree_opts *o)
{
	sl_tree *t = NULL;
	int rc = sl_tree_create(o, &t);

	if (rc == 0) /* a wrong success must not leak */
		sl_tree_destroy(t);
	return rc;
}

static int tree_create_policy_4(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.policy = (enum sl_policy)4;
	return tree_create_with(&o);
}

static int tree_create_policy_7(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.policy = (enum sl_policy)7;
	return tree_create_with(&o);
}

static int tree_create_policy_minus_1(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.policy = (enum sl_policy)-1;
	return tree_create_with(&o);
}

static int tree_create_batch_max_plus_1(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.batch = SL_BATCH_MAX + 1;
	return tree_create_with(&o);
}

static int tree_create_batch_none_minus_1(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.batch = SL_BATCH_NONE - 1;
	return tree_create_with(&o);
}

static int tree_create_root_min_above_max(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.root = limits(101, 0, SL_UNLIMITED, 100);
	return tree_create_with(&o);
}

static int tree_create_root_soft_above_max(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.root = limits(0, 101, SL_UNLIMITED, 100);
	return tree_create_with(&o);
}

static int tree_create_batch_max_ok(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.batch = SL_BATCH_MAX;
	return tree_create_with(&o);
}

static int tree_create_batch_none_ok(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.batch = SL_BATCH_NONE;
	return tree_create_with(&o);
}

static int tree_create_root_min_soft_at_max_ok(struct fx *f)
{
	struct sl_tree_opts o;

	(void)f;
	sl_tree_opts_init(&o);
	o.root = limits(100, 100, SL_UNLIMITED, 100);
	return tree_create_with(&o);
}

static int group_create_in(sl_group *parent, const char *name, const struct sl_limits *lim)
{
	sl_group *g = NULL;
	int rc = sl_group_create(parent, name, lim, NULL, NULL, &g);

	if (rc == 0) /* a wrong success must not change the tree */
		sl_group_destroy(g);
	return rc;
}

static int group_create_null_parent(struct fx *f)
{
	(void)f;
	return group_create_in(NULL, "x", NULL);
}

static int group_create_null_out(struct fx *f)
{
	return sl_group_create(f->a, "x", NULL, NULL, NULL, NULL);
}

static int group_create_null_name(struct fx *f)
{
	return group_create_in(f->a, NULL, NULL);
}

static int group_create_empty_name(struct fx *f)
{
	return group_create_in(f->a, "", NULL);
}

static int group_create_name_with_slash(struct fx *f)
{
	return group_create_in(f->a, "x/y", NULL);
}

static int group_create_name_slash_only(struct fx *f)
{
	return group_create_in(f->a, "/", NULL);
}

static int group_create_name_trailing_slash(struct fx *f)
{
	return group_create_in(f->root, "c/", NULL);
}

static int group_create_name_too_long(struct fx *f)
{
	char name[SL_NAME_MAX + 2];

	memset(name, 'n', SL_NAME_MAX + 1);
	name[SL_NAME_MAX + 1] = '\0';
	return group_create_in(f->a, name, NULL);
}

static int group_create_name_longest_ok(struct fx *f)
{
	char name[SL_NAME_MAX + 1];

	memset(name, 'n', SL_NAME_MAX);
	name[SL_NAME_MAX] = '\0';
	return group_create_in(f->a, name, NULL);
}

static int group_create_min_above_max(struct fx *f)
{
	struct sl_limits l = limits(11, 0, SL_UNLIMITED, 10);

	return group_create_in(f->a, "x", &l);
}

static int group_create_soft_above_max(struct fx *f)
{
	struct sl_limits l = limits(0, 11, SL_UNLIMITED, 10);

	return group_create_in(f->a, "x", &l);
}

static int group_create_sibling_name(struct fx *f)
{
	return group_create_in(f->a, "b", NULL);
}

static int group_create_sibling_name_bad_limits(struct fx *f)
{
	struct sl_limits l = limits(11, 0, SL_UNLIMITED, 10);
	int rc = group_create_in(f->a, "b", &l);

	/* either check may come first; both are errors */
	return rc == -EEXIST ? -EINVAL : rc;
}

static int group_destroy_null(struct fx *f)
{
	(void)f;
	return sl_group_destroy(NULL);
}

static int group_destroy_root(struct fx *f)
{
	return sl_group_destroy(f->root);
}

static int group_destroy_with_child(struct fx *f)
{
	return sl_group_destroy(f->a);
}

static int group_destroy_with_charges(struct fx *f)
{
	return sl_group_destroy(f->b);
}

static int set_limits_null_group(struct fx *f)
{
	struct sl_limits l;

	(void)f;
	sl_limits_init(&l);
	return sl_group_set_limits(NULL, &l);
}

static int set_limits_null_limits(struct fx *f)
{
	return sl_group_set_limits(f->a, NULL);
}

static int set_limits_min_above_max(struct fx *f)
{
	struct sl_limits l = limits(20001, 0, SL_UNLIMITED, 20000);

	return sl_group_set_limits(f->a, &l);
}

static int set_limits_soft_above_max(struct fx *f)
{
	struct sl_limits l = limits(0, 20001, SL_UNLIMITED, 20000);

	return sl_group_set_limits(f->a, &l);
}

static int set_limits_root_min_above_max(struct fx *f)
{
	struct sl_limits l = limits(SL_UNLIMITED, 0, SL_UNLIMITED, 5);

	return sl_group_set_limits(f->root, &l);
}

static int set_limits_root_soft_above_max(struct fx *f)
{
	struct sl_limits l = limits(0, 6, SL_UNLIMITED, 5);

	return sl_group_set_limits(f->root, &l);
}

static int group_limits_null_group(struct fx *f)
{
	struct sl_limits l;

	(void)f;
	return sl_group_limits(NULL, &l);
}

static int group_limits_null_out(struct fx *f)
{
	return sl_group_limits(f->a, NULL);
}

static int group_stats_null_group(struct fx *f)
{
	struct sl_stats s;

	(void)f;
	return sl_group_stats(NULL, &s);
}

static int group_stats_null_out(struct fx *f)
{
	return sl_group_stats(f->a, NULL);
}

static int charge_null_group(struct fx *f)
{
	(void)f;
	return sl_charge(NULL, 1, 0);
}

static int charge_null_group_zero(struct fx *f)
{
	(void)f;
	return sl_charge(NULL, 0, 0);
}

static int charge_unknown_flag(struct fx *f)
{
	return sl_charge(f->b, 1, 1u << 7);
}

static int charge_overflow(struct fx *f)
{
	return sl_charge(f->b, UINT64_MAX - 10, 0);
}

static int charge_overflow_forced(struct fx *f)
{
	return sl_charge(f->c, UINT64_MAX - 10, SL_FORCE);
}

static int charge_past_max(struct fx *f)
{
	return sl_charge(f->b, 20000, SL_NORECLAIM) == -ENOMEM ? -ENOMEM : -1;
}

static int uncharge_null_group(struct fx *f)
{
	(void)f;
	return sl_uncharge(NULL, 1);
}

static int reclaim_null_scope(struct fx *f)
{
	(void)f;
	return (int)sl_reclaim(NULL, 100, 0);
}

static int null_accessors(struct fx *f)
{
	(void)f;
	sl_tree_destroy(NULL);
	sl_limits_init(NULL);
	sl_tree_opts_init(NULL);
	if (sl_tree_root(NULL) || sl_group_tree(NULL) || sl_group_name(NULL) || sl_group_parent(NULL) ||
	    sl_group_ctx(NULL))
		return -1;
	if (sl_tree_policy(NULL) != SL_POLICY_GUARANTEE || sl_tree_batch(NULL) != 0)
		return -1;
	return 0;
}

static int walk_visit(sl_group *g, unsigned depth, void *arg)
{
	(void)g;
	(void)depth;
	(void)arg;
	return 0;
}

static int walk_null_scope(struct fx *f)
{
	(void)f;
	return sl_group_walk(NULL, walk_visit, NULL);
}

static int walk_null_fn(struct fx *f)
{
	return sl_group_walk(f->root, NULL, NULL);
}

static int lookup(struct fx *f, sl_group *scope, const char *path, sl_group *want)
{
	sl_group *g = NULL;
	int rc = sl_group_lookup(scope, path, &g);

	(void)f;
	if (rc == 0 && g != want)
		return -1;
	return rc;
}

static int lookup_null_scope(struct fx *f)
{
	return lookup(f, NULL, "a", NULL);
}

static int lookup_null_path(struct fx *f)
{
	return lookup(f, f->root, NULL, NULL);
}

static int lookup_null_out(struct fx *f)
{
	return sl_group_lookup(f->root, "a", NULL);
}

static int lookup_empty_component(struct fx *f)
{
	return lookup(f, f->root, "a//b", NULL);
}

static int lookup_leading_slash(struct fx *f)
{
	return lookup(f, f->root, "/a", NULL);
}

static int lookup_missing(struct fx *f)
{
	return lookup(f, f->root, "a/nosuch", NULL);
}

static int lookup_wrong_parent(struct fx *f)
{
	return lookup(f, f->root, "c/b", NULL);
}

static int lookup_found(struct fx *f)
{
	int rc = lookup(f, f->root, "a/b", f->b);

	return rc ? rc : lookup(f, f->a, "", f->a);
}

static int path_null_group(struct fx *f)
{
	char buf[16];

	(void)f;
	return sl_group_path(NULL, buf, sizeof(buf));
}

static int path_null_buf(struct fx *f)
{
	return sl_group_path(f->b, NULL, 16);
}

static int path_too_small(struct fx *f)
{
	char buf[3] = { 'x', 'x', 'x' };
	int rc = sl_group_path(f->b, buf, sizeof(buf)); /* "a/b" needs 4 bytes */

	return buf[2] == '\0' ? rc : -1;
}

static int path_fits(struct fx *f)
{
	char buf[4];
	int rc = sl_group_path(f->b, buf, sizeof(buf));

	return rc ? rc : strcmp(buf, "a/b") ? -1 : 0;
}

static int dump_null_scope(struct fx *f)
{
	char buf[64];

	(void)f;
	return sl_group_dump(NULL, SL_DUMP_TEXT, buf, sizeof(buf), NULL);
}

static int dump_unknown_format(struct fx *f)
{
	char buf[64];

	return sl_group_dump(f->root, (enum sl_dump_format)9, buf, sizeof(buf), NULL);
}

static int dump_null_buf(struct fx *f)
{
	return sl_group_dump(f->root, SL_DUMP_JSON, NULL, 64, NULL);
}

static int oom_handler_null_tree(struct fx *f)
{
	(void)f;
	return sl_tree_set_oom_handler(NULL, NULL, NULL);
}

static int tree_check_null(struct fx *f)
{
	(void)f;
	return sl_tree_check(NULL);
}

static int handle_over_high_null(struct fx *f)
{
	(void)f;
	return (int)sl_handle_over_high(NULL);
}

static int reclaim_unknown_flags(struct fx *f)
{
	return (int)sl_reclaim(f->a, 100, 1u << 9);
}

static int hold_null(struct fx *f)
{
	(void)f;
	return sl_group_hold(NULL);
}

static int unhold_null(struct fx *f)
{
	(void)f;
	return sl_group_unhold(NULL);
}

/* A release without a hold is a caller bug: refused, no hold goes negative
 * (the fixture's destroys at the end still work). */
static int unhold_not_held(struct fx *f)
{
	return sl_group_unhold(f->c);
}

static int unhold_more_than_held(struct fx *f)
{
	ck_assert_int_eq(sl_group_hold(f->c), 0);
	ck_assert_int_eq(sl_group_unhold(f->c), 0);
	return sl_group_unhold(f->c);
}

/* Refused while held; the group is left as it was, and released. */
static int group_destroy_held(struct fx *f)
{
	int rc;

	ck_assert_int_eq(sl_group_hold(f->c), 0);
	rc = sl_group_destroy(f->c);
	ck_assert_int_eq(sl_group_unhold(f->c), 0);
	return rc;
}

static int charge_can_fit_null(struct fx *f)
{
	(void)f;
	return sl_charge_can_fit(NULL, 1);
}

struct bad_case {
	const char *what;
	int (*call)(struct fx *f);
	int want;
	int changes_a; /* the case is meant to change a's counters (a failed charge's events) */
};

static const struct bad_case cases[] = {
	{ "sl_tree_create(opts, NULL)", tree_create_null_out, -EINVAL, 0 },
	{ "sl_tree_create(NULL, NULL)", tree_create_null_opts_null_out, -EINVAL, 0 },
	{ "sl_tree_create policy 4", tree_create_policy_4, -EINVAL, 0 },
	{ "sl_tree_create policy 7", tree_create_policy_7, -EINVAL, 0 },
	{ "sl_tree_create policy -1", tree_create_policy_minus_1, -EINVAL, 0 },
	{ "sl_tree_create batch SL_BATCH_MAX + 1", tree_create_batch_max_plus_1, -EINVAL, 0 },
	{ "sl_tree_create batch SL_BATCH_NONE - 1", tree_create_batch_none_minus_1, -EINVAL, 0 },
	{ "sl_tree_create root min > max", tree_create_root_min_above_max, -EINVAL, 0 },
	{ "sl_tree_create root soft > max", tree_create_root_soft_above_max, -EINVAL, 0 },
	{ "sl_tree_create batch SL_BATCH_MAX is fine", tree_create_batch_max_ok, 0, 0 },
	{ "sl_tree_create batch SL_BATCH_NONE is fine", tree_create_batch_none_ok, 0, 0 },
	{ "sl_tree_create min == soft == max is fine", tree_create_root_min_soft_at_max_ok, 0, 0 },
	{ "sl_group_create(NULL parent)", group_create_null_parent, -EINVAL, 0 },
	{ "sl_group_create(NULL out)", group_create_null_out, -EINVAL, 0 },
	{ "sl_group_create(NULL name)", group_create_null_name, -EINVAL, 0 },
	{ "sl_group_create(\"\")", group_create_empty_name, -EINVAL, 0 },
	{ "sl_group_create(\"x/y\")", group_create_name_with_slash, -EINVAL, 0 },
	{ "sl_group_create(\"/\")", group_create_name_slash_only, -EINVAL, 0 },
	{ "sl_group_create(\"c/\")", group_create_name_trailing_slash, -EINVAL, 0 },
	{ "sl_group_create(256-byte name)", group_create_name_too_long, -EINVAL, 0 },
	{ "sl_group_create(255-byte name) is fine", group_create_name_longest_ok, 0, 0 },
	{ "sl_group_create min > max", group_create_min_above_max, -EINVAL, 0 },
	{ "sl_group_create soft > max", group_create_soft_above_max, -EINVAL, 0 },
	{ "sl_group_create sibling's name", group_create_sibling_name, -EEXIST, 0 },
	{ "sl_group_create sibling's name, bad limits", group_create_sibling_name_bad_limits, -EINVAL, 0 },
	{ "sl_group_destroy(NULL)", group_destroy_null, -EINVAL, 0 },
	{ "sl_group_destroy(root)", group_destroy_root, -EINVAL, 0 },
	{ "sl_group_destroy(group with a child)", group_destroy_with_child, -EBUSY, 0 },
	{ "sl_group_destroy(group with charges)", group_destroy_with_charges, -EBUSY, 0 },
	{ "sl_group_destroy(held group)", group_destroy_held, -EBUSY, 0 },
	{ "sl_group_hold(NULL)", hold_null, -EINVAL, 0 },
	{ "sl_group_unhold(NULL)", unhold_null, -EINVAL, 0 },
	{ "sl_group_unhold(group never held)", unhold_not_held, -EINVAL, 0 },
	{ "sl_group_unhold once more than held", unhold_more_than_held, -EINVAL, 0 },
	{ "sl_group_set_limits(NULL, lim)", set_limits_null_group, -EINVAL, 0 },
	{ "sl_group_set_limits(g, NULL)", set_limits_null_limits, -EINVAL, 0 },
	{ "sl_group_set_limits min > max", set_limits_min_above_max, -EINVAL, 0 },
	{ "sl_group_set_limits soft > max", set_limits_soft_above_max, -EINVAL, 0 },
	{ "sl_group_set_limits(root) min > max", set_limits_root_min_above_max, -EINVAL, 0 },
	{ "sl_group_set_limits(root) soft > max", set_limits_root_soft_above_max, -EINVAL, 0 },
	{ "sl_group_limits(NULL, out)", group_limits_null_group, -EINVAL, 0 },
	{ "sl_group_limits(g, NULL)", group_limits_null_out, -EINVAL, 0 },
	{ "sl_group_stats(NULL, out)", group_stats_null_group, -EINVAL, 0 },
	{ "sl_group_stats(g, NULL)", group_stats_null_out, -EINVAL, 0 },
	{ "sl_charge(NULL, 1, 0)", charge_null_group, -EINVAL, 0 },
	{ "sl_charge(NULL, 0, 0)", charge_null_group_zero, -EINVAL, 0 },
	{ "sl_charge unknown flag", charge_unknown_flag, -EINVAL, 0 },
	{ "sl_charge overflowing amount", charge_overflow, -EINVAL, 0 },
	{ "sl_charge overflowing amount, SL_FORCE", charge_overflow_forced, -EINVAL, 0 },
	{ "sl_charge past max (only a's events move)", charge_past_max, -ENOMEM, 1 },
	{ "sl_uncharge(NULL, 1)", uncharge_null_group, -EINVAL, 0 },
	{ "sl_charge_can_fit(NULL, 1)", charge_can_fit_null, -EINVAL, 0 },
	{ "sl_reclaim(NULL, ...) frees nothing", reclaim_null_scope, 0, 0 },
	{ "sl_group_walk(NULL, fn, arg)", walk_null_scope, -EINVAL, 0 },
	{ "sl_group_walk(g, NULL, arg)", walk_null_fn, -EINVAL, 0 },
	{ "sl_group_lookup(NULL, path, out)", lookup_null_scope, -EINVAL, 0 },
	{ "sl_group_lookup(g, NULL, out)", lookup_null_path, -EINVAL, 0 },
	{ "sl_group_lookup(g, path, NULL)", lookup_null_out, -EINVAL, 0 },
	{ "sl_group_lookup(\"a//b\")", lookup_empty_component, -EINVAL, 0 },
	{ "sl_group_lookup(\"/a\")", lookup_leading_slash, -EINVAL, 0 },
	{ "sl_group_lookup(\"a/nosuch\")", lookup_missing, -ENOENT, 0 },
	{ "sl_group_lookup(\"c/b\")", lookup_wrong_parent, -ENOENT, 0 },
	{ "sl_group_lookup(\"a/b\") and (\"\") find the group", lookup_found, 0, 0 },
	{ "sl_group_path(NULL, buf, size)", path_null_group, -EINVAL, 0 },
	{ "sl_group_path(g, NULL, size)", path_null_buf, -EINVAL, 0 },
	{ "sl_group_path too small: -ENOSPC, terminated", path_too_small, -ENOSPC, 0 },
	{ "sl_group_path exactly fits", path_fits, 0, 0 },
	{ "sl_group_dump(NULL, ...)", dump_null_scope, -EINVAL, 0 },
	{ "sl_group_dump unknown format", dump_unknown_format, -EINVAL, 0 },
	{ "sl_group_dump(NULL buf, size 64)", dump_null_buf, -EINVAL, 0 },
	{ "sl_tree_set_oom_handler(NULL, ...)", oom_handler_null_tree, -EINVAL, 0 },
	{ "sl_tree_check(NULL)", tree_check_null, -EINVAL, 0 },
	{ "sl_handle_over_high(NULL) frees nothing", handle_over_high_null, 0, 0 },
	{ "sl_reclaim with unknown flags frees nothing", reclaim_unknown_flags, 0, 0 },
	{ "NULL to the accessors", null_accessors, 0, 0 },
};

#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

START_TEST(bad_input_returns_its_documented_error_and_changes_nothing)
{
	const struct bad_case *k = &cases[_i];
	sl_group *g[FX_GROUPS];
	struct sl_stats before[FX_GROUPS];
	const char *names[FX_GROUPS];
	struct fx f;
	int rc, i;

	fx_build(&f);
	fx_groups(&f, g);
	for (i = 0; i < FX_GROUPS; i++) {
		before[i] = stats_of(g[i]);
		names[i] = sl_group_name(g[i]);
	}
	rc = k->call(&f);
	ck_assert_msg(rc == k->want, "%s: returned %d, want %d", k->what, rc, k->want);
	for (i = 0; i < FX_GROUPS; i++) {
		struct sl_stats now = stats_of(g[i]);
		char what[128];

		snprintf(what, sizeof(what), "%s: group %d", k->what, i);
		if (k->changes_a && g[i] == f.a) {
			before[i].events_max++;
			before[i].events_oom++;
		}
		assert_stats_same(&before[i], &now, what);
		ck_assert_str_eq(sl_group_name(g[i]), names[i]);
	}
	ck_assert_ptr_eq(sl_group_parent(f.b), f.a);
	ck_assert_ptr_eq(sl_group_parent(f.a), f.root);
	ck_assert_ptr_eq(sl_tree_root(f.t), f.root);
	assert_tree_ok(f.t);

	/* the fixture still works: b and a can be emptied and destroyed */
	ck_assert_int_eq(sl_uncharge(f.b, 50), 0);
	ck_assert_int_eq(sl_uncharge(f.a, 100), 0);
	ck_assert_int_eq(sl_group_destroy(f.b), 0);
	ck_assert_int_eq(sl_group_destroy(f.a), 0);
	ck_assert_int_eq(sl_group_destroy(f.c), 0);
	ck_assert_uint_eq(usage_of(f.root), 0);
	sl_tree_destroy(f.t);
}
END_TEST

/* A create that failed leaves no half-made group behind: the name is free. */
START_TEST(failed_group_create_leaves_the_name_free)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	struct sl_limits bad = limits(11, 0, SL_UNLIMITED, 10);
	struct sl_limits bad_soft = limits(0, 11, SL_UNLIMITED, 10);
	sl_group *g = NULL;

	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "x", &bad, NULL, NULL, &g), -EINVAL);
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "x", &bad_soft, NULL, NULL, &g), -EINVAL);
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "x", NULL, NULL, NULL, NULL), -EINVAL);
	ck_assert_int_eq(sl_group_create(sl_tree_root(t), "x", NULL, NULL, NULL, &g), 0);
	ck_assert_str_eq(sl_group_name(g), "x");
	ck_assert_int_eq(sl_group_destroy(g), 0);
	sl_tree_destroy(t);
}
END_TEST

/* A failed set_limits keeps every old limit, not just some. */
START_TEST(failed_set_limits_keeps_the_old_limits)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	struct sl_limits old = limits(1, 2, 3, 4);
	struct sl_limits bad = limits(100, 200, 300, 50);
	struct sl_limits got;
	sl_group *g = group_new_lim(sl_tree_root(t), "g", &old);

	ck_assert_int_eq(sl_group_set_limits(g, &bad), -EINVAL);
	ck_assert_int_eq(sl_group_limits(g, &got), 0);
	ck_assert_uint_eq(got.min, 1);
	ck_assert_uint_eq(got.soft, 2);
	ck_assert_uint_eq(got.high, 3);
	ck_assert_uint_eq(got.max, 4);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(depth_of_sl_depth_max_is_allowed_and_one_more_is_einval)
{
	sl_tree *t = tree_new(test_batch(_i), SL_UNLIMITED);
	sl_group *chain[SL_DEPTH_MAX + 1];
	struct sl_stats before, now;
	sl_group *extra = NULL;
	int d;

	chain[0] = sl_tree_root(t);
	for (d = 1; d <= SL_DEPTH_MAX; d++) {
		char name[16];

		snprintf(name, sizeof(name), "d%d", d);
		chain[d] = group_new(chain[d - 1], name, SL_UNLIMITED);
	}
	before = stats_of(chain[SL_DEPTH_MAX]);
	ck_assert_int_eq(sl_group_create(chain[SL_DEPTH_MAX], "too-deep", NULL, NULL, NULL, &extra), -EINVAL);
	now = stats_of(chain[SL_DEPTH_MAX]);
	assert_stats_same(&before, &now, "deepest group");

	/* the deepest group charges through all levels */
	ck_assert_int_eq(sl_charge(chain[SL_DEPTH_MAX], 7, 0), 0);
	ck_assert_uint_eq(usage_of(chain[1]), 7);
	ck_assert_uint_eq(usage_of(chain[0]), 7);
	ck_assert_int_eq(sl_uncharge(chain[SL_DEPTH_MAX], 7), 0);
	for (d = SL_DEPTH_MAX; d >= 1; d--)
		ck_assert_int_eq(sl_group_destroy(chain[d]), 0);
	ck_assert_uint_eq(usage_of(chain[0]), 0);
	sl_tree_destroy(t);
}
END_TEST

static Suite *errors_suite(void)
{
	Suite *s = suite_create("errors");
	TCase *tc;

	tc = tcase_create("table");
	tcase_add_loop_test(tc, bad_input_returns_its_documented_error_and_changes_nothing, 0, NCASES);
	suite_add_tcase(s, tc);

	tc = tcase_create("aftermath");
	tcase_add_test(tc, failed_group_create_leaves_the_name_free);
	tcase_add_test(tc, failed_set_limits_keeps_the_old_limits);
	tcase_add_loop_test(tc, depth_of_sl_depth_max_is_allowed_and_one_more_is_einval, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(errors_suite());
}
