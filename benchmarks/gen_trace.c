/* SPDX-License-Identifier: MIT */
/*
 * gen_trace: write multi-tenant cache traces: bench_isolation's synthetic
 * mixes, its Twitter-shaped mixes, or a mix of Twitter clusters named on
 * the command line.
 *
 *     gen_trace [OPTIONS] MIX [FILE]
 *     gen_trace [OPTIONS] [-o FILE] clusterN[:ws=F][:share=F][:soft=F][:alpha=F][:name=S]...
 *
 * A named mix is the one bench_isolation replays for MIX with the same
 * options (the generators are shared), in the text format of
 * isolation_trace.h, preceded by the "# budget:", "# warmup:" and "# soft:"
 * directives.  So
 *
 *     gen_trace --quick zipf-mix t.txt && bench_isolation --trace t.txt
 *
 * gives the figures of `bench_isolation --quick --mix zipf-mix`.  Cluster
 * specs build one tenant per spec from a row of the Twitter table
 * (twitter_mix.h; benchmarks/README.md says how each column is used).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isolation_trace.h"
#include "twitter_mix.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gen_trace [OPTIONS] MIX [FILE]\n"
		"       gen_trace [OPTIONS] [-o FILE] CLUSTER[:ws=F][:share=F][:soft=F][:alpha=F][:name=S]...\n"
		"       gen_trace [--stats FILE] --list-clusters\n"
		"\n"
		"Writes a multi-tenant cache trace (\"time tenant key size [op [ttl]]\" per line)\n"
		"to FILE or stdout.  Mixes:\n");
	for (int i = 0; i < iso_mix_count(); i++)
		fprintf(f, "  %-16s %s\n", iso_mix_name(i), iso_mix_desc(i));
	for (int i = 0; i < tw_mix_count(); i++)
		fprintf(f, "  %-16s %s\n    (%s)\n", tw_mix_name(i), tw_mix_desc(i), tw_mix_specs(i));
	fprintf(f,
		"\n"
		"A CLUSTER (\"cluster12\" or \"12\") is a row of the Twitter table; 1 to %d of them\n"
		"make a mix, one tenant each (\"c12\"), shaped like the cluster: key and value\n"
		"sizes, Zipf alpha, op mix, one-hit wonders, TTLs.  Per tenant, in budgets:\n"
		"  ws=F     its Zipf key space (default 0.5)      soft=F   its soft limit (default 0.8/n)\n"
		"  share=F  its weight among the requests (default: the cluster's request rate)\n"
		"  alpha=F  Zipf alpha instead of the row's       name=S   its tenant name\n"
		"\n"
		"  --quick          16 MiB budget, 300000 requests (default 64 MiB, 2000000)\n"
		"  --budget BYTES   the budget the soft limits are sized for\n"
		"  --requests N     requests\n"
		"  --seed N         seed (default 1)\n"
		"  --rate R         Twitter tenants: requests per second of trace time (default %.0f)\n"
		"  --stats FILE     the Twitter table (default %s)\n"
		"  -o FILE          output file (default stdout)\n"
		"  --list-clusters  print the table's rows as gen_trace reads them\n",
		TW_MAX_TENANTS, TW_DEFAULT_RATE, SL_TWITTER_STATS);
}

static void list_clusters(const struct tw_table *t)
{
	printf("%-10s %6s %7s %8s %8s %6s %7s %6s %8s %-28s %s\n", "cluster", "key", "value",
	       "kqps", "freq", "ohw%", "wss_mb", "alpha", "ttl_s", "ops", "");
	for (int i = 0; i < t->n; i++) {
		const struct tw_cluster *c = &t->rows[i];
		char ops[128] = "";
		size_t len = 0;

		for (int k = 0; k < c->nops && len < sizeof(ops); k++)
			len += (size_t)snprintf(ops + len, sizeof(ops) - len, "%s%s:%.2f", k ? " " : "",
						iso_op_name(c->ops[k].op), c->ops[k].share);
		printf("cluster%-3d %6.0f %7.0f %8.2f %8.1f %6.2f %7.0f %6.3f %8.0f %-28s\n", c->id,
		       c->key_size, c->value_size, c->kqps, c->mean_freq, c->ohw_pct, c->wss_mb,
		       c->alpha, c->nttl ? c->ttl[0].seconds : NAN, ops);
	}
	printf("median trace duration (rows with a working set): %.0f s\n", t->duration_s);
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

/* "cluster12[:...]" or "12[:...]": a tenant spec, not a mix name. */
static bool is_cluster(const char *a)
{
	return strncmp(a, "cluster", 7) == 0 || (a[0] >= '0' && a[0] <= '9');
}

/* A summary of what was generated, per tenant, from the trace itself. */
static void summary(const struct iso_trace *tr)
{
	fprintf(stderr, "gen_trace: %s: %zu requests, budget %" PRIu64 " bytes\n", tr->name, tr->nreqs,
		tr->budget);
	fprintf(stderr, "  %-12s %7s %7s %7s %9s %9s\n", "tenant", "share", "reads", "writes",
		"mean size", "ttl (s)");
	for (int i = 0; i < tr->nnodes; i++) {
		uint64_t n = 0, reads = 0, writes = 0, bytes = 0, ttl_n = 0;
		double ttl_sum = 0;

		for (size_t q = 0; q < tr->nreqs; q++) {
			const struct iso_req *r = &tr->reqs[q];

			if (r->node != (uint32_t)i)
				continue;
			n++;
			reads += iso_op_is_read(r->op);
			if (r->op == ISO_GETSET || (r->op >= ISO_SET && r->op <= ISO_CAS)) {
				writes += r->op != ISO_GETSET;
				bytes += r->size;
			}
			if (r->ttl_ms) {
				ttl_sum += (double)r->ttl_ms / 1000.0;
				ttl_n++;
			}
		}
		if (!n)
			continue;
		fprintf(stderr, "  %-12s %6.1f%% %6.1f%% %6.1f%% %9.0f ", tr->nodes[i].path,
			100.0 * (double)n / (double)tr->nreqs, 100.0 * (double)reads / (double)n,
			100.0 * (double)writes / (double)n,
			reads + writes ? (double)bytes / (double)(reads + writes) : 0.0);
		if (ttl_n)
			fprintf(stderr, "%9.2f\n", ttl_sum / (double)ttl_n);
		else
			fprintf(stderr, "%9s\n", "-");
	}
}

int main(int argc, char **argv)
{
	bool quick = false, list = false;
	uint64_t budget = 0, requests = 0, seed = 1;
	double rate = TW_DEFAULT_RATE;
	const char *mix = NULL, *file = NULL, *stats = SL_TWITTER_STATS;
	const char *clusters[TW_MAX_TENANTS + 1];
	int nclusters = 0;
	struct iso_trace tr;
	struct tw_table tab;
	char err[512];
	FILE *f = stdout;
	int rc;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--quick") == 0) {
			quick = true;
		} else if (strcmp(a, "--list-clusters") == 0) {
			list = true;
		} else if (val && strcmp(a, "--budget") == 0 && parse_u64(val, &budget) == 0) {
			i++;
		} else if (val && strcmp(a, "--requests") == 0 && parse_u64(val, &requests) == 0) {
			i++;
		} else if (val && strcmp(a, "--seed") == 0 && parse_u64(val, &seed) == 0) {
			i++;
		} else if (val && strcmp(a, "--rate") == 0 && (rate = strtod(val, &end)) > 0 &&
			   !*end && rate <= 1e9) {
			i++;
		} else if (val && strcmp(a, "--stats") == 0) {
			stats = val;
			i++;
		} else if (val && strcmp(a, "-o") == 0 && !file) {
			file = val;
			i++;
		} else if (a[0] != '-' && !mix && nclusters == 0 && !is_cluster(a)) {
			mix = a;
		} else if (!mix && is_cluster(a) && nclusters < TW_MAX_TENANTS) {
			clusters[nclusters++] = a;
		} else if (!file && mix && (a[0] != '-' || strcmp(a, "-") == 0)) {
			file = a;
		} else {
			fprintf(stderr, "gen_trace: bad argument '%s'%s\n", a,
				nclusters == TW_MAX_TENANTS ? " (at most 8 clusters)" : "");
			usage(stderr);
			return 2;
		}
	}
	if (!mix && !nclusters && !list) {
		usage(stderr);
		return 2;
	}
	if (!budget)
		budget = quick ? 16u << 20 : 64u << 20;
	if (!requests)
		requests = quick ? 300000 : 2000000;

	memset(&tab, 0, sizeof(tab));
	if ((list || nclusters || tw_mix_find(mix) >= 0) &&
	    tw_table_load(&tab, stats, err, sizeof(err)) != 0) {
		fprintf(stderr, "gen_trace: %s\n", err);
		return 1;
	}
	if (list) {
		list_clusters(&tab);
		tw_table_free(&tab);
		return 0;
	}
	iso_trace_init(&tr);
	if (nclusters) {
		struct tw_tenant ten[TW_MAX_TENANTS];

		for (int k = 0; k < nclusters; k++)
			if (tw_tenant_parse(&tab, clusters[k], &ten[k], err, sizeof(err)) != 0)
				goto bad;
		if (tw_trace_generate(&tr, ten, nclusters, budget, (size_t)requests, seed, rate, err,
				      sizeof(err)) != 0)
			goto bad;
	} else if (tw_mix_find(mix) >= 0) {
		if (tw_mix_generate(&tr, &tab, mix, budget, (size_t)requests, seed, rate, err,
				    sizeof(err)) != 0)
			goto bad;
	} else if (iso_trace_generate(&tr, mix, budget, (size_t)requests, seed) != 0) {
		fprintf(stderr, "gen_trace: unknown mix '%s' (or bad sizes)\n", mix);
		usage(stderr);
		iso_trace_free(&tr);
		return 2;
	}
	tw_table_free(&tab);
	if (file && strcmp(file, "-") != 0) {
		f = fopen(file, "w");
		if (!f) {
			fprintf(stderr, "gen_trace: %s: %s\n", file, strerror(errno));
			iso_trace_free(&tr);
			return 1;
		}
	}
	if (tr.timed)
		summary(&tr);
	rc = iso_trace_write(&tr, f);
	if (f != stdout && fclose(f) != 0)
		rc = -1;
	iso_trace_free(&tr);
	if (rc != 0) {
		fprintf(stderr, "gen_trace: write error\n");
		return 1;
	}
	return 0;
bad:
	fprintf(stderr, "gen_trace: %s\n", err);
	iso_trace_free(&tr);
	tw_table_free(&tab);
	return 2;
}
