/* SPDX-License-Identifier: MIT */
/*
 * isolation_trace: the cache traces of bench_isolation and gen_trace.
 *
 * A trace is a list of requests, each naming a tenant (a path such as
 * "custA/ns1": customer, then namespace), a key and an item size, plus what
 * the replay needs to know: the cache budget, each tenant's soft limit and
 * how many requests warm the cache up before hits are counted.
 *
 * The synthetic mixes are generated here, deterministically from a seed, so
 * that bench_isolation (which replays them in memory) and gen_trace (which
 * writes them to a file in the text format below) produce the same requests.
 *
 * Text format, one request per line, fields separated by blanks:
 *
 *     time tenant key size
 *
 *   time    a number, informational: requests are replayed in file order
 *   tenant  1..255 bytes per component, components separated by '/'
 *           ("custA/ns1"); every prefix is a tenant of its own
 *   key     1..250 bytes, no blanks
 *   size    the value's size in bytes (the cache charges it plus the key
 *           and a header, lru_item_size())
 *
 * Each request is a get; a miss is followed by a set of that size.  Blank
 * lines are skipped, and so are lines starting with '#', except these
 * directives (the command line overrides them):
 *
 *   # budget: BYTES           the cache's whole budget
 *   # warmup: N               the first N requests are not counted
 *   # soft: TENANT BYTES      TENANT's soft limit (also declares it, in order)
 */
#ifndef ISOLATION_TRACE_H
#define ISOLATION_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct iso_req {
	uint64_t key_off; /* into the key pool */
	uint32_t node;    /* index into nodes  */
	uint32_t size;    /* value bytes       */
	uint32_t keylen;
};

struct iso_node {
	char *path;       /* "custA/ns1"                                  */
	const char *name; /* last component, inside path                   */
	int parent;       /* index, -1 for a child of the root             */
	uint64_t soft;
	bool soft_set;    /* given explicitly (else inner = sum of children) */
	bool holds;       /* some request names it                         */
	bool scan;        /* synthetic: a scanning tenant (for the reports) */
	bool burst;       /* synthetic: a bursty tenant                     */
};

struct iso_trace {
	char name[128];
	char desc[256];
	uint64_t budget;
	bool budget_set;
	size_t warmup;
	bool warmup_set;

	struct iso_node *nodes;
	int nnodes, nodes_cap;
	int *index;          /* open-addressing hash of node paths -> node */
	size_t index_cap;

	struct iso_req *reqs;
	size_t nreqs, reqs_cap;
	char *pool;
	size_t pool_len, pool_cap;
	uint32_t max_size;
};

/* The synthetic mixes. */
int iso_mix_count(void);
const char *iso_mix_name(int i);
const char *iso_mix_desc(int i);

void iso_trace_init(struct iso_trace *t);
void iso_trace_free(struct iso_trace *t);

/* Finds or declares @path (and its prefixes); returns its index or -1 on a
 * bad path (empty component, too long) or out of memory. */
int iso_node_register(struct iso_trace *t, const char *path, size_t len);

/* Appends a request; 0 or -1 (out of memory, bad key length). */
int iso_req_append(struct iso_trace *t, int node, const char *key, size_t keylen, uint32_t size);

/* After the last request: inner tenants without an explicit soft limit get
 * the sum of their children's. */
void iso_trace_finish(struct iso_trace *t);

/* Generates mix @name: @budget bytes, @nreqs requests, @seed.  0, or -1 for
 * an unknown mix (or out of memory). */
int iso_trace_generate(struct iso_trace *t, const char *name, uint64_t budget, size_t nreqs,
		       uint64_t seed);

/* Reads a trace file ("-" is stdin).  0, or -1 with a message in @err. */
int iso_trace_load(struct iso_trace *t, const char *file, char *err, size_t errlen);

/* Writes @t in the text format, directives first.  0 or -1 (write error). */
int iso_trace_write(const struct iso_trace *t, FILE *f);

#endif /* ISOLATION_TRACE_H */
