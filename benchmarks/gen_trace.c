/* SPDX-License-Identifier: MIT */
/*
 * gen_trace: write bench_isolation's synthetic mixes as trace files.
 *
 *     gen_trace [--quick] [--budget BYTES] [--requests N] [--seed N] MIX [FILE]
 *
 * The trace is the one bench_isolation replays for MIX with the same
 * options (the generator is shared), in the text format of
 * isolation_trace.h: "time tenant key size" per line, preceded by the
 * "# budget:", "# warmup:" and "# soft:" directives.  So
 *
 *     gen_trace --quick zipf-mix t.txt && bench_isolation --trace t.txt
 *
 * gives the figures of `bench_isolation --quick --mix zipf-mix`.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isolation_trace.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gen_trace [--quick] [--budget BYTES] [--requests N] [--seed N] MIX [FILE]\n"
		"\n"
		"Writes a synthetic multi-tenant cache trace (\"time tenant key size\" per line)\n"
		"to FILE or stdout.  Mixes:\n");
	for (int i = 0; i < iso_mix_count(); i++)
		fprintf(f, "  %-16s %s\n", iso_mix_name(i), iso_mix_desc(i));
	fprintf(f,
		"\n"
		"  --quick          16 MiB budget, 300000 requests (default 64 MiB, 2000000)\n"
		"  --budget BYTES   the budget the soft limits are sized for\n"
		"  --requests N     requests\n"
		"  --seed N         seed (default 1)\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	bool quick = false;
	uint64_t budget = 0, requests = 0, seed = 1;
	const char *mix = NULL, *file = NULL;
	struct iso_trace tr;
	FILE *f = stdout;
	int rc;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--quick") == 0) {
			quick = true;
		} else if (val && strcmp(a, "--budget") == 0 && parse_u64(val, &budget) == 0) {
			i++;
		} else if (val && strcmp(a, "--requests") == 0 && parse_u64(val, &requests) == 0) {
			i++;
		} else if (val && strcmp(a, "--seed") == 0 && parse_u64(val, &seed) == 0) {
			i++;
		} else if (a[0] != '-' && !mix) {
			mix = a;
		} else if (!file && mix && (a[0] != '-' || strcmp(a, "-") == 0)) {
			file = a;
		} else {
			fprintf(stderr, "gen_trace: bad argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (!mix) {
		usage(stderr);
		return 2;
	}
	if (!budget)
		budget = quick ? 16u << 20 : 64u << 20;
	if (!requests)
		requests = quick ? 300000 : 2000000;

	iso_trace_init(&tr);
	if (iso_trace_generate(&tr, mix, budget, (size_t)requests, seed) != 0) {
		fprintf(stderr, "gen_trace: unknown mix '%s' (or bad sizes)\n", mix);
		usage(stderr);
		return 2;
	}
	if (file && strcmp(file, "-") != 0) {
		f = fopen(file, "w");
		if (!f) {
			fprintf(stderr, "gen_trace: %s: %s\n", file, strerror(errno));
			iso_trace_free(&tr);
			return 1;
		}
	}
	rc = iso_trace_write(&tr, f);
	if (f != stdout && fclose(f) != 0)
		rc = -1;
	iso_trace_free(&tr);
	if (rc != 0) {
		fprintf(stderr, "gen_trace: write error\n");
		return 1;
	}
	return 0;
}
