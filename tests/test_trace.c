/* SPDX-License-Identifier: MIT */
/*
 * The benchmarks' cache traces (benchmarks/isolation_trace.h): the text
 * format with ops and TTLs, that 4-field lines keep their meaning, and the
 * Twitter cluster table and the tenants built from it
 * (benchmarks/twitter_mix.h).  SL_TWITTER_STATS names the table in the
 * source tree.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolation_trace.h"
#include "twitter_mix.h"

/* Writes @text to a fresh temporary file and returns its name (static). */
static const char *temp_file(const char *text)
{
	static char name[64];
	int fd;
	FILE *f;

	snprintf(name, sizeof(name), "/tmp/sl-test-trace-XXXXXX");
	fd = mkstemp(name);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	return name;
}

/* Loads @text; returns iso_trace_load()'s result, the message in @err. */
static int load_text(struct iso_trace *t, const char *text, char *err, size_t errlen)
{
	const char *file = temp_file(text);
	int rc;

	iso_trace_init(t);
	err[0] = '\0';
	rc = iso_trace_load(t, file, err, errlen);
	unlink(file);
	return rc;
}

/* iso_trace_write() of @t, as a malloc'd string. */
static char *write_text(const struct iso_trace *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(iso_trace_write(t, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	return buf;
}

static const char *key_of(const struct iso_trace *t, size_t i)
{
	static char buf[256];

	snprintf(buf, sizeof(buf), "%.*s", (int)t->reqs[i].keylen, t->pool + t->reqs[i].key_off);
	return buf;
}

/* ------------------------------------------------------------- format */

START_TEST(seconds_parse_as_decimals_to_milliseconds)
{
	uint64_t ms = 7;

	ck_assert_int_eq(iso_parse_seconds("12", &ms), 0);
	ck_assert_uint_eq(ms, 12000);
	ck_assert_int_eq(iso_parse_seconds("0.25", &ms), 0);
	ck_assert_uint_eq(ms, 250);
	ck_assert_int_eq(iso_parse_seconds("3.1415", &ms), 0);
	ck_assert_uint_eq(ms, 3141);
	ck_assert_int_eq(iso_parse_seconds(".5", &ms), 0);
	ck_assert_uint_eq(ms, 500);
	/* A positive TTL under a millisecond must not become "never". */
	ck_assert_int_eq(iso_parse_seconds("0.0001", &ms), 0);
	ck_assert_uint_eq(ms, 1);
	ck_assert_int_eq(iso_parse_seconds("0.000", &ms), 0);
	ck_assert_uint_eq(ms, 0);
	ms = 7;
	ck_assert_int_eq(iso_parse_seconds("", &ms), -1);
	ck_assert_int_eq(iso_parse_seconds("-1", &ms), -1);
	ck_assert_int_eq(iso_parse_seconds("1e3", &ms), -1);
	ck_assert_int_eq(iso_parse_seconds("1.2.3", &ms), -1);
	ck_assert_int_eq(iso_parse_seconds(".", &ms), -1);
	ck_assert_int_eq(iso_parse_seconds("99999999999999999999", &ms), -1);
	ck_assert_uint_eq(ms, 7);
}
END_TEST

START_TEST(four_field_lines_are_getsets_without_ttl_and_write_back_unchanged)
{
	static const char text[] =
		"# softlimit cache trace: old\n"
		"# format: time tenant key size  (a get; on a miss, a set of size value bytes)\n"
		"# budget: 1048576\n"
		"# warmup: 1\n"
		"# soft: a/x 1000\n"
		"0 a/x k1 100\n"
		"1 a/y k2 0\n"
		"2 b k1 7\n";
	struct iso_trace t;
	char err[256], *out;

	ck_assert_int_eq(load_text(&t, text, err, sizeof(err)), 0);
	ck_assert_uint_eq(t.nreqs, 3);
	for (size_t i = 0; i < t.nreqs; i++) {
		ck_assert_int_eq(t.reqs[i].op, ISO_GETSET);
		ck_assert_uint_eq(t.reqs[i].ttl_ms, 0);
	}
	ck_assert(!t.has_ops && !t.has_ttl && !t.timed);
	ck_assert_uint_eq(t.reqs[1].size, 0);
	ck_assert_str_eq(t.nodes[t.reqs[2].node].path, "b");
	/* Written back, an old trace reads as it was written (the name is the file's). */
	snprintf(t.name, sizeof(t.name), "old");
	t.desc[0] = '\0';
	out = write_text(&t);
	ck_assert_str_eq(out, text);
	free(out);
	iso_trace_free(&t);
}
END_TEST

START_TEST(four_field_lines_take_any_time_and_keep_the_clock)
{
	struct iso_trace t;
	char err[256];

	ck_assert_int_eq(load_text(&t,
				   "5 t a 1 set 10\n"
				   "whenever t a 1\n"
				   "7.5 t a 1\n",
				   err, sizeof(err)),
			 0);
	ck_assert_uint_eq(t.reqs[1].time_ms, 5000);
	ck_assert_uint_eq(t.reqs[2].time_ms, 7500);
	iso_trace_free(&t);
}
END_TEST

START_TEST(op_and_ttl_fields_parse_and_round_trip)
{
	static const char lines[] =
		"0 t k 10 getset\n"
		"0.5 t k 10 get\n"
		"1 t k 10 gets\n"
		"1.25 t k 10 set 300\n"
		"2 t k 10 add 0.5\n"
		"3 t k 10 replace\n"
		"4 t k 10 cas 60\n"
		"5 t k 3 append\n"
		"6 t k 3 prepend\n"
		"7 t k 0 delete\n"
		"8 t k 0 incr\n"
		"9 t k 0 decr\n"
		"10 t k 0 touch 2592001\n";
	static const int ops[] = {ISO_GETSET, ISO_GET, ISO_GETS, ISO_SET, ISO_ADD, ISO_REPLACE, ISO_CAS,
				  ISO_APPEND, ISO_PREPEND, ISO_DELETE, ISO_INCR, ISO_DECR, ISO_TOUCH};
	static const uint64_t ttls[] = {0, 0, 0, 300000, 500, 0, 60000, 0, 0, 0, 0, 0, 2592001000};
	struct iso_trace t, u;
	char err[256], *out, *body;

	ck_assert_int_eq(load_text(&t, lines, err, sizeof(err)), 0);
	ck_assert_uint_eq(t.nreqs, 13);
	ck_assert(t.has_ops && t.has_ttl && t.timed);
	for (size_t i = 0; i < t.nreqs; i++) {
		ck_assert_int_eq(t.reqs[i].op, ops[i]);
		ck_assert_uint_eq(t.reqs[i].ttl_ms, ttls[i]);
		ck_assert_str_eq(iso_op_name(ops[i]), i == 0 ? "getset" : iso_op_name(ops[i]));
	}
	ck_assert_uint_eq(t.reqs[3].time_ms, 1250);
	ck_assert(iso_op_is_read(ISO_GETSET) && iso_op_is_read(ISO_GET) && iso_op_is_read(ISO_GETS));
	ck_assert(!iso_op_is_read(ISO_SET) && !iso_op_is_read(ISO_INCR) && !iso_op_is_read(ISO_DELETE));

	/* Written and read again: the same requests.  A getset without TTL is
	 * written as a 4-field line, everything else with its op. */
	out = write_text(&t);
	body = strstr(out, "\n0 t k 10\n");
	ck_assert_ptr_nonnull(body);
	ck_assert_ptr_nonnull(strstr(out, "\n1.25 t k 10 set 300\n"));
	ck_assert_ptr_nonnull(strstr(out, "\n2 t k 10 add 0.5\n"));
	ck_assert_int_eq(load_text(&u, out, err, sizeof(err)), 0);
	ck_assert_uint_eq(u.nreqs, t.nreqs);
	for (size_t i = 0; i < t.nreqs; i++) {
		ck_assert_int_eq(u.reqs[i].op, t.reqs[i].op);
		ck_assert_uint_eq(u.reqs[i].ttl_ms, t.reqs[i].ttl_ms);
		ck_assert_uint_eq(u.reqs[i].time_ms, t.reqs[i].time_ms);
		ck_assert_uint_eq(u.reqs[i].size, t.reqs[i].size);
	}
	free(out);
	iso_trace_free(&t);
	iso_trace_free(&u);
}
END_TEST

START_TEST(malformed_lines_are_refused_with_their_line_number)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{"0 t k 1 fetch\n", ":1: unknown op 'fetch'"},
		{"0 t k 1\n1 t k 1 set -5\n", ":2: bad ttl '-5'"},
		{"0 t k 1 set 5 extra\n", ":1: expected 4 to 6 fields"},
		{"x t k 1 set\n", ":1: bad time 'x'"},
		{"0 t k\n", ":1: expected 4 to 6 fields"},
		{"0 t k big\n", ":1: bad size 'big'"},
		{"0 t//u k 1\n", ":1: bad tenant"},
		{"# only comments\n", "no requests"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct iso_trace t;
		char err[256];

		ck_assert_int_eq(load_text(&t, bad[i].text, err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, bad[i].msg), "'%s' gave '%s'", bad[i].text, err);
		iso_trace_free(&t);
	}
}
END_TEST

START_TEST(synthetic_mixes_are_still_untimed_getsets)
{
	struct iso_trace t;

	iso_trace_init(&t);
	ck_assert_int_eq(iso_trace_generate(&t, "scan-flood", 1 << 20, 5000, 1), 0);
	ck_assert(!t.timed && !t.has_ops && !t.has_ttl);
	iso_trace_free(&t);
}
END_TEST

/* -------------------------------------------------------------- twitter */

static struct tw_table table;

static void table_setup(void)
{
	char err[256];

	ck_assert_msg(tw_table_load(&table, SL_TWITTER_STATS, err, sizeof(err)) == 0, "%s", err);
}

static void table_teardown(void)
{
	tw_table_free(&table);
}

START_TEST(table_has_every_cluster_and_reads_each_column)
{
	const struct tw_cluster *c;

	ck_assert_int_eq(table.n, 54);
	c = tw_table_find(&table, "cluster7", 8);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(c->id, 7);
	ck_assert_double_eq_tol(c->miss_ratio, 0.2004, 1e-9);
	ck_assert_double_eq_tol(c->key_size, 17, 1e-9);
	ck_assert_double_eq_tol(c->value_size, 1936, 1e-9);
	ck_assert_double_eq_tol(c->kqps, 1.62, 1e-9);
	ck_assert_double_eq_tol(c->mean_freq, 72.9, 1e-9);
	ck_assert_double_eq_tol(c->wss_mb, 7574, 1e-9);
	ck_assert_double_eq_tol(c->wss_ttl_mb, 85, 1e-9);
	ck_assert_double_eq_tol(c->alpha, 1.0666, 1e-9);
	ck_assert_int_eq(c->nttl, 5);
	ck_assert_double_eq_tol(c->ttl[0].seconds, 1.8 * 3600, 1e-6);
	ck_assert_double_eq_tol(c->ttl[0].share, 0.28, 1e-9);
	ck_assert_int_eq(c->nops, 2);
	ck_assert_int_eq(c->ops[0].op, ISO_GETSET);
	ck_assert_int_eq(c->ops[1].op, ISO_SET);
	ck_assert_double_eq_tol(c->ops[1].share, 0.18, 1e-9);

	/* "12" finds cluster12; gets reads like a get; N/A is NaN. */
	c = tw_table_find(&table, "11", 2);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(c->nops, 4);
	ck_assert_int_eq(c->ops[2].op, ISO_GETSET);
	ck_assert_int_eq(c->ops[3].op, ISO_CAS);
	c = tw_table_find(&table, "cluster5", 8);
	ck_assert(c && isnan(c->key_size) && isnan(c->alpha) && c->nops == 0 && c->nttl == 0);
	ck_assert(isnan(tw_table_find(&table, "cluster43", 9)->alpha));
	ck_assert_ptr_null(tw_table_find(&table, "cluster99", 9));
	ck_assert_ptr_null(tw_table_find(&table, "cluster", 7));
	ck_assert(table.duration_s > 3600 && table.duration_s < 30 * 86400.0);
}
END_TEST

START_TEST(tenant_specs_parse_options_and_refuse_bad_ones)
{
	struct tw_tenant t;
	char err[256];

	ck_assert_int_eq(tw_tenant_parse(&table, "cluster12:ws=0.3:share=2:soft=0.1:alpha=0.9:name=w",
					 &t, err, sizeof(err)),
			 0);
	ck_assert_int_eq(t.c->id, 12);
	ck_assert(t.ws_set && t.share_set && t.soft_set && t.alpha_set && t.name_set);
	ck_assert_double_eq_tol(t.ws, 0.3, 1e-12);
	ck_assert_double_eq_tol(t.share, 2, 1e-12);
	ck_assert_double_eq_tol(t.soft, 0.1, 1e-12);
	ck_assert_double_eq_tol(t.alpha, 0.9, 1e-12);
	ck_assert_str_eq(t.name, "w");
	ck_assert_int_eq(tw_tenant_parse(&table, "cluster77", &t, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "no such cluster"));
	ck_assert_int_eq(tw_tenant_parse(&table, "6:ws=-1", &t, err, sizeof(err)), -1);
	ck_assert_int_eq(tw_tenant_parse(&table, "6:soft=2", &t, err, sizeof(err)), -1);
	ck_assert_int_eq(tw_tenant_parse(&table, "6:share=0", &t, err, sizeof(err)), -1);
	ck_assert_int_eq(tw_tenant_parse(&table, "6:color=red", &t, err, sizeof(err)), -1);
	ck_assert_int_eq(tw_tenant_parse(&table, "6:ws", &t, err, sizeof(err)), -1);
}
END_TEST

static void generate(struct iso_trace *tr, const char *const *specs, int n, size_t reqs,
		     uint64_t seed)
{
	struct tw_tenant ten[TW_MAX_TENANTS];
	char err[256];

	iso_trace_init(tr);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(tw_tenant_parse(&table, specs[i], &ten[i], err, sizeof(err)), 0);
	ck_assert_msg(tw_trace_generate(tr, ten, n, 16 << 20, reqs, seed, TW_DEFAULT_RATE, err,
					sizeof(err)) == 0,
		      "%s", err);
}

START_TEST(a_tenant_has_its_clusters_shape)
{
	static const char *const specs[] = {"cluster14", "cluster22", "cluster12", "cluster14"};
	const size_t n = 200000;
	struct iso_trace tr;
	uint64_t count[4] = {0}, ops[4][ISO_OP_COUNT] = {{0}}, fresh[4] = {0};
	double kqps = 5.81 + 3.24 + 4.36 + 5.81;

	generate(&tr, specs, 4, n, 1);
	ck_assert_int_eq(tr.nnodes, 4);
	ck_assert_str_eq(tr.nodes[0].path, "c14");
	ck_assert_str_eq(tr.nodes[3].path, "c14-2"); /* the same cluster twice */
	ck_assert_uint_eq(tr.nodes[0].soft, (uint64_t)(0.2 * (16 << 20)));
	ck_assert_uint_eq(tr.warmup, n / 5);
	for (size_t i = 0; i < tr.nreqs; i++) {
		const struct iso_req *r = &tr.reqs[i];

		count[r->node]++;
		ops[r->node][r->op]++;
		fresh[r->node] += key_of(&tr, i)[0] == 'f';
		/* Keys are the cluster's mean key size. */
		ck_assert_uint_eq(r->keylen, r->node == 0 || r->node == 3 ? 96 : r->node == 1 ? 54 : 44);
		ck_assert_uint_eq(r->time_ms, (uint64_t)llround((double)i * 1000.0 / TW_DEFAULT_RATE));
	}
	/* Request shares follow the clusters' rates. */
	ck_assert_double_eq_tol((double)count[0] / (double)n, 5.81 / kqps, 0.01);
	ck_assert_double_eq_tol((double)count[1] / (double)n, 3.24 / kqps, 0.01);
	/* Op mixes follow the table: cluster14 get .65 delete .22 set .13;
	 * cluster22 get .72 incr .18 set .10. */
	ck_assert_double_eq_tol((double)ops[0][ISO_DELETE] / (double)count[0], 0.22, 0.01);
	ck_assert_double_eq_tol((double)ops[0][ISO_GETSET] / (double)count[0], 0.65, 0.01);
	ck_assert_double_eq_tol((double)ops[1][ISO_INCR] / (double)count[1], 0.18, 0.01);
	ck_assert_uint_eq(ops[1][ISO_DELETE], 0);
	/* One-hit wonders: ohw% / mean freq of the requests go to new keys
	 * (cluster12: 81.43% / 1.3). */
	ck_assert_double_eq_tol((double)fresh[2] / (double)count[2], 0.8143 / 1.3, 0.01);
	ck_assert_double_eq_tol((double)fresh[0] / (double)count[0], 0.1094 / 35.4, 0.005);
	/* Writes carry TTLs; deletes and incrs do not. */
	for (size_t i = 0; i < tr.nreqs; i++) {
		const struct iso_req *r = &tr.reqs[i];

		if (r->op == ISO_SET || r->op == ISO_GETSET)
			ck_assert_uint_gt(r->ttl_ms, 0);
		if (r->op == ISO_DELETE || r->op == ISO_INCR)
			ck_assert_uint_eq(r->ttl_ms, 0);
	}
	iso_trace_free(&tr);
}
END_TEST

START_TEST(generation_is_deterministic_per_seed)
{
	static const char *const specs[] = {"cluster6", "cluster19:ws=0.2", "cluster52"};
	struct iso_trace a, b, c;
	char *ta, *tb, *tc;

	generate(&a, specs, 3, 20000, 5);
	generate(&b, specs, 3, 20000, 5);
	generate(&c, specs, 3, 20000, 6);
	ta = write_text(&a);
	tb = write_text(&b);
	tc = write_text(&c);
	ck_assert_str_eq(ta, tb);
	ck_assert_str_ne(ta, tc);
	free(ta);
	free(tb);
	free(tc);
	iso_trace_free(&a);
	iso_trace_free(&b);
	iso_trace_free(&c);
}
END_TEST

START_TEST(a_row_without_what_a_tenant_needs_is_refused)
{
	struct tw_tenant ten[TW_MAX_TENANTS + 1];
	struct iso_trace tr;
	char err[256];

	ck_assert_int_eq(tw_tenant_parse(&table, "cluster5", &ten[0], err, sizeof(err)), 0);
	iso_trace_init(&tr);
	ck_assert_int_eq(tw_trace_generate(&tr, ten, 1, 1 << 20, 100, 1, 1000, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "cluster5 has no key size"));
	ck_assert_int_eq(tw_tenant_parse(&table, "cluster43", &ten[0], err, sizeof(err)), 0);
	ck_assert_int_eq(tw_trace_generate(&tr, ten, 1, 1 << 20, 100, 1, 1000, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "Zipf alpha"));
	ck_assert_int_eq(tw_tenant_parse(&table, "cluster43:alpha=1", &ten[0], err, sizeof(err)), 0);
	ck_assert_int_eq(tw_trace_generate(&tr, ten, 1, 1 << 20, 100, 1, 1000, err, sizeof(err)), 0);
	iso_trace_free(&tr);
	for (int i = 0; i <= TW_MAX_TENANTS; i++)
		ck_assert_int_eq(tw_tenant_parse(&table, "cluster6", &ten[i], err, sizeof(err)), 0);
	iso_trace_init(&tr);
	ck_assert_int_eq(tw_trace_generate(&tr, ten, TW_MAX_TENANTS + 1, 1 << 20, 100, 1, 1000, err,
					   sizeof(err)),
			 -1);
	iso_trace_free(&tr);
}
END_TEST

START_TEST(builtin_mixes_name_existing_clusters_and_generate)
{
	ck_assert_int_ge(tw_mix_count(), 3);
	for (int i = 0; i < tw_mix_count(); i++) {
		struct iso_trace tr;
		char err[256];

		iso_trace_init(&tr);
		ck_assert_msg(tw_mix_generate(&tr, &table, tw_mix_name(i), 4 << 20, 2000, 1,
					      TW_DEFAULT_RATE, err, sizeof(err)) == 0,
			      "%s: %s", tw_mix_name(i), err);
		ck_assert_str_eq(tr.name, tw_mix_name(i));
		ck_assert_int_ge(tr.nnodes, 4);
		ck_assert_int_le(tr.nnodes, TW_MAX_TENANTS);
		iso_trace_free(&tr);
	}
}
END_TEST

static Suite *trace_suite(void)
{
	Suite *s = suite_create("trace");
	TCase *tc;

	tc = tcase_create("format");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, seconds_parse_as_decimals_to_milliseconds);
	tcase_add_test(tc, four_field_lines_are_getsets_without_ttl_and_write_back_unchanged);
	tcase_add_test(tc, four_field_lines_take_any_time_and_keep_the_clock);
	tcase_add_test(tc, op_and_ttl_fields_parse_and_round_trip);
	tcase_add_test(tc, malformed_lines_are_refused_with_their_line_number);
	tcase_add_test(tc, synthetic_mixes_are_still_untimed_getsets);
	suite_add_tcase(s, tc);

	tc = tcase_create("twitter");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, table_setup, table_teardown);
	tcase_add_test(tc, table_has_every_cluster_and_reads_each_column);
	tcase_add_test(tc, tenant_specs_parse_options_and_refuse_bad_ones);
	tcase_add_test(tc, a_tenant_has_its_clusters_shape);
	tcase_add_test(tc, generation_is_deterministic_per_seed);
	tcase_add_test(tc, a_row_without_what_a_tenant_needs_is_refused);
	tcase_add_test(tc, builtin_mixes_name_existing_clusters_and_generate);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(trace_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
