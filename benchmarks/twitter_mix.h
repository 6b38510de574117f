/* SPDX-License-Identifier: MIT */
/*
 * twitter_mix: cache tenants shaped like Twitter's production clusters.
 *
 * benchmarks/data/twitter-2020Mar-stats.md is the statistics table that
 * Twitter published with its cache traces (Yang, Yue, Vinayak, "A large
 * scale analysis of hundreds of in-memory cache clusters at Twitter", OSDI
 * 2020; CC-BY 4.0): one row per cluster with its mean key and value sizes,
 * request rate, mean frequency, one-hit-wonder ratio, common TTLs, working
 * set sizes, operation mix and Zipf alpha.  This file reads that table and
 * builds a trace (isolation_trace.h) of 1 to TW_MAX_TENANTS tenants, each
 * with the shape of one cluster, scaled to a working set and a request share
 * chosen for the mix.  benchmarks/README.md says how every column is used.
 */
#ifndef TWITTER_MIX_H
#define TWITTER_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "isolation_trace.h"

#define TW_MAX_TENANTS 8
#define TW_MAX_TTLS 16
#define TW_MAX_OPS 8

/* One row; a missing value ("N/A", "NA") is NaN, a missing list is empty. */
struct tw_cluster {
	int id;                   /* N of "clusterN"                        */
	double miss_ratio;        /* production miss ratio                  */
	double category;
	double key_size, value_size; /* mean bytes                          */
	double kqps;              /* request rate, thousands per second     */
	double mean_freq;         /* requests per object                    */
	double ohw_pct;           /* one-hit wonders, % of objects          */
	double compulsory_pct;    /* compulsory misses, % of requests       */
	double wss_mb;            /* working set, not considering TTL       */
	double wss_ttl_mb;        /* working set, considering TTL           */
	double alpha;             /* Zipf alpha                             */
	int nttl;
	struct { double seconds, share; } ttl[TW_MAX_TTLS];
	int nops;
	struct { int op; double share; } ops[TW_MAX_OPS]; /* op: enum iso_op */
};

struct tw_table {
	struct tw_cluster *rows;
	int n;
	/* The median trace duration over the rows that give it (mean_freq *
	 * keys / rate): stands in for a row without a working-set size. */
	double duration_s;
};

/* Reads the markdown table in @file; 0, or -1 with a message in @err. */
int tw_table_load(struct tw_table *t, const char *file, char *err, size_t errlen);
void tw_table_free(struct tw_table *t);

/* The row of "clusterN" or "N"; NULL if absent. */
const struct tw_cluster *tw_table_find(const struct tw_table *t, const char *name, size_t len);

/* A tenant of a mix: which cluster, and how it is scaled (fractions of the
 * budget; share is a weight, normalised over the mix). */
struct tw_tenant {
	const struct tw_cluster *c;
	char name[64];   /* tenant path in the trace: "c12" by default */
	double ws;       /* Zipf key space, in budgets (default 0.5)   */
	double share;    /* share of requests (default: the row's kqps) */
	double soft;     /* soft limit, in budgets (default 0.8 / n)   */
	double alpha;    /* Zipf alpha (default: the row's)            */
	double duration_s; /* the table's median trace duration         */
	bool ws_set, share_set, soft_set, alpha_set, name_set;
};

/* Parses "clusterN[:ws=F][:share=F][:soft=F][:alpha=F][:name=NAME]" against
 * @t; 0, or -1 with a message in @err (unknown cluster, bad option). */
int tw_tenant_parse(const struct tw_table *t, const char *spec, struct tw_tenant *out, char *err,
		    size_t errlen);

/*
 * Generates a trace of the @n tenants: @nreqs requests over a @budget-byte
 * cache, @rate requests per second of trace time, from @seed.  Tenants get
 * their defaults here (and a unique name); the first fifth is the warm-up.
 * 0, or -1 with a message in @err (a row that lacks a column the tenant
 * needs, too many tenants, out of memory).
 */
int tw_trace_generate(struct iso_trace *tr, struct tw_tenant *ten, int n, uint64_t budget,
		      size_t nreqs, uint64_t seed, double rate, char *err, size_t errlen);

/* The built-in Twitter mixes (names start "twitter-"): their names,
 * descriptions and tenant specs (blank-separated tw_tenant_parse() specs). */
int tw_mix_count(void);
const char *tw_mix_name(int i);
const char *tw_mix_desc(int i);
const char *tw_mix_specs(int i);
int tw_mix_find(const char *name);

/* Generates built-in mix @name from table @t; 0, or -1 with @err. */
int tw_mix_generate(struct iso_trace *tr, const struct tw_table *t, const char *name,
		    uint64_t budget, size_t nreqs, uint64_t seed, double rate, char *err,
		    size_t errlen);

#define TW_DEFAULT_RATE 10000.0

#endif /* TWITTER_MIX_H */
