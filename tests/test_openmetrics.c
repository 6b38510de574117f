/* SPDX-License-Identifier: MIT */
/*
 * sl_group_dump(SL_DUMP_OPENMETRICS): the exact text of small trees, label
 * escaping, buffer sizing, subtrees, and a clean -ENOMEM.  That a real
 * OpenMetrics parser accepts the output is openmetrics_check.py's job.
 *
 * Links the static archive to reach the hidden allocation-failure hook.
 */
#include <stdbool.h>

#include "helpers.h"

void sl__fault_inject(long after, bool sticky);

/* The dump of scope, in a buffer of exactly the size it asks for. */
static char *om_of(sl_group *scope)
{
	size_t needed = 0;
	char *buf;

	ck_assert_int_eq(sl_group_dump(scope, SL_DUMP_OPENMETRICS, NULL, 0, &needed), 0);
	ck_assert_uint_gt(needed, 0);
	buf = malloc(needed + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(sl_group_dump(scope, SL_DUMP_OPENMETRICS, buf, needed + 1, NULL), 0);
	ck_assert_uint_eq(strlen(buf), needed);
	return buf;
}

static void assert_has(const char *out, const char *line)
{
	ck_assert_msg(strstr(out, line) != NULL, "no '%s' in:\n%s", line, out);
}

START_TEST(openmetrics_dump_has_a_family_per_counter_and_limit_and_ends_with_eof)
{
	sl_tree *t = tree_new(SL_BATCH_NONE, 1 << 20);
	sl_group *root = sl_tree_root(t), *a = group_new(root, "a", 10000);
	sl_group *b = group_new(a, "b", SL_UNLIMITED);
	char *out;

	ck_assert_int_eq(sl_charge(b, 4096, 0), 0);
	ck_assert_int_eq(sl_charge(b, 8000, 0), -ENOMEM);
	out = om_of(root);

	assert_has(out, "# TYPE softlimit_tree info\n");
	assert_has(out, "softlimit_tree_info{policy=\"guarantee\"} 1\n");
	assert_has(out, "# TYPE softlimit_usage_bytes gauge\n# UNIT softlimit_usage_bytes bytes\n"
			"# HELP softlimit_usage_bytes ");
	assert_has(out, "softlimit_usage_bytes{group=\"/\"} 4096\n"
			"softlimit_usage_bytes{group=\"/a\"} 4096\n"
			"softlimit_usage_bytes{group=\"/a/b\"} 4096\n");
	assert_has(out, "softlimit_max_bytes{group=\"/\"} 1048576\n"
			"softlimit_max_bytes{group=\"/a\"} 10000\n"
			"softlimit_max_bytes{group=\"/a/b\"} +Inf\n");
	assert_has(out, "softlimit_high_bytes{group=\"/a\"} +Inf\n");
	/* A counter's samples carry _total; events count where max was hit. */
	assert_has(out, "# TYPE softlimit_oom_events counter\n# HELP softlimit_oom_events ");
	assert_has(out, "softlimit_oom_events_total{group=\"/a\"} 1\n");
	assert_has(out, "softlimit_oom_events_total{group=\"/a/b\"} 0\n");
	assert_has(out, "# TYPE softlimit_reclaimed_bytes counter\n# UNIT softlimit_reclaimed_bytes bytes\n");
	assert_has(out, "softlimit_reclaimed_bytes_total{group=\"/a/b\"} 0\n");
	ck_assert_str_eq(out + strlen(out) - 6, "# EOF\n");
	ck_assert_ptr_eq(strstr(out, "# EOF"), out + strlen(out) - 6);

	free(out);
	ck_assert_int_eq(sl_uncharge(b, 4096), 0);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(openmetrics_dump_writes_each_family_once_with_all_its_samples_together)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	char *out, *p;
	unsigned types = 0, samples = 0;

	group_new(group_new(root, "x", SL_UNLIMITED), "y", SL_UNLIMITED);
	group_new(root, "z", SL_UNLIMITED);
	out = om_of(root);
	/* 15 families of 4 groups each, plus the info family's one sample; each
	 * family's samples follow its TYPE line before the next TYPE. */
	for (p = out; (p = strstr(p, "# TYPE ")) != NULL; p++)
		types++;
	for (p = out; (p = strstr(p, "{group=\"")) != NULL; p++)
		samples++;
	ck_assert_uint_eq(types, 16);
	ck_assert_uint_eq(samples, 15 * 4);
	p = strstr(out, "# TYPE softlimit_peak_bytes");
	ck_assert_ptr_nonnull(p);
	p = strstr(p, "softlimit_peak_bytes{group=\"/\"}");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(strstr(p, "softlimit_peak_bytes{group=\"/x\"}"));
	ck_assert_ptr_nonnull(strstr(p, "softlimit_peak_bytes{group=\"/x/y\"}"));
	ck_assert_ptr_nonnull(strstr(p, "softlimit_peak_bytes{group=\"/z\"}"));
	ck_assert_ptr_null(strstr(strstr(out, "# TYPE softlimit_min_bytes"), "softlimit_peak_bytes{"));
	free(out);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(openmetrics_labels_escape_quote_backslash_newline_and_replace_bad_utf8)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	char *out;

	group_new(root, "q\"b\\n\nx", SL_UNLIMITED);
	group_new(root, "caf\xc3\xa9", SL_UNLIMITED);
	group_new(root, "bad\xff\xc3(", SL_UNLIMITED);
	group_new(root, "surrogate\xed\xa0\x80", SL_UNLIMITED);
	out = om_of(root);
	assert_has(out, "softlimit_usage_bytes{group=\"/q\\\"b\\\\n\\nx\"} 0\n");
	assert_has(out, "softlimit_usage_bytes{group=\"/caf\xc3\xa9\"} 0\n");
	assert_has(out, "softlimit_usage_bytes{group=\"/bad\xef\xbf\xbd\xef\xbf\xbd(\"} 0\n");
	assert_has(out, "softlimit_usage_bytes{group=\"/surrogate\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"} 0\n");
	free(out);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(openmetrics_dump_of_a_subtree_labels_paths_from_the_root)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(t), *a = group_new(root, "a", SL_UNLIMITED);
	char *out;

	group_new(a, "b", SL_UNLIMITED);
	group_new(root, "c", SL_UNLIMITED);
	out = om_of(a);
	assert_has(out, "softlimit_usage_bytes{group=\"/a\"} 0\nsoftlimit_usage_bytes{group=\"/a/b\"} 0\n# ");
	ck_assert_ptr_null(strstr(out, "group=\"/\""));
	ck_assert_ptr_null(strstr(out, "group=\"/c\""));
	free(out);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(openmetrics_dump_reports_the_size_it_needs_and_rejects_bad_arguments)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(t);
	char small[64], *full;
	size_t needed = 0, again = 0;

	group_new(root, "a", SL_UNLIMITED);
	full = om_of(root);
	ck_assert_int_eq(sl_group_dump(root, SL_DUMP_OPENMETRICS, small, sizeof(small), &needed), -ENOSPC);
	ck_assert_uint_eq(needed, strlen(full));
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	ck_assert_int_eq(strncmp(small, full, sizeof(small) - 1), 0);
	/* A buffer one byte short of the NUL is still -ENOSPC. */
	{
		char *buf = malloc(needed);

		ck_assert_ptr_nonnull(buf);
		ck_assert_int_eq(sl_group_dump(root, SL_DUMP_OPENMETRICS, buf, needed, &again), -ENOSPC);
		ck_assert_uint_eq(again, needed);
		free(buf);
	}
	ck_assert_int_eq(sl_group_dump(NULL, SL_DUMP_OPENMETRICS, small, sizeof(small), &needed), -EINVAL);
	ck_assert_int_eq(sl_group_dump(root, SL_DUMP_OPENMETRICS, NULL, 5, &needed), -EINVAL);
	free(full);
	sl_tree_destroy(t);
}
END_TEST

START_TEST(openmetrics_dump_fails_cleanly_when_memory_runs_out)
{
	sl_tree *t = tree_new(0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(t), *a = group_new(root, "a", SL_UNLIMITED);
	size_t size = 1 << 20;
	char *buf = malloc(size);
	long n;
	int rc = -ENOMEM;

	ck_assert_ptr_nonnull(buf);
	for (n = 0; n < 40; n++)
		group_new(a, (char[]){ (char)('A' + n), '\0' }, SL_UNLIMITED);
	/* Fail the n-th allocation for growing n until the dump succeeds: each
	 * failure is -ENOMEM and leaks nothing (ASan's leak check). */
	for (n = 0; rc == -ENOMEM && n < 1000; n++) {
		sl__fault_inject(n, false);
		rc = sl_group_dump(root, SL_DUMP_OPENMETRICS, buf, size, NULL);
		sl__fault_inject(-1, false);
		ck_assert_msg(rc == 0 || rc == -ENOMEM, "allocation %ld failed: rc %d", n, rc);
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_gt(n, 2);
	free(buf);
	sl_tree_destroy(t);
}
END_TEST

static Suite *openmetrics_suite(void)
{
	Suite *s = suite_create("openmetrics");
	TCase *tc = tcase_create("openmetrics");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, openmetrics_dump_has_a_family_per_counter_and_limit_and_ends_with_eof);
	tcase_add_test(tc, openmetrics_dump_writes_each_family_once_with_all_its_samples_together);
	tcase_add_test(tc, openmetrics_labels_escape_quote_backslash_newline_and_replace_bad_utf8);
	tcase_add_test(tc, openmetrics_dump_of_a_subtree_labels_paths_from_the_root);
	tcase_add_test(tc, openmetrics_dump_reports_the_size_it_needs_and_rejects_bad_arguments);
	tcase_add_test(tc, openmetrics_dump_fails_cleanly_when_memory_runs_out);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(openmetrics_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
