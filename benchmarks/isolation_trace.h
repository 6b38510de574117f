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
 *     time tenant key size [op [ttl]]
 *
 *   time    seconds (a decimal, milliseconds kept): the trace's clock, which
 *           TTLs are measured on; requests are replayed in file order.  On a
 *           line of 4 fields it may be anything (it was informational before
 *           ops and TTLs existed): such a line takes the previous line's time
 *           when it is not a number
 *   tenant  1..255 bytes per component, components separated by '/'
 *           ("custA/ns1"); every prefix is a tenant of its own
 *   key     1..250 bytes, no blanks
 *   size    the value's size in bytes (the cache charges it plus the key
 *           and a header, lru_item_size()); for append/prepend the bytes
 *           added; ignored by delete, incr, decr, touch
 *   op      one of iso_op_name()'s names; absent: getset
 *   ttl     seconds (a decimal) from this request's time until the item it
 *           stores expires; 0 or absent: never
 *
 * getset is a read that the client fills on a miss (look-aside caching): a
 * get, and on a miss a set of size bytes with the ttl.  A line of 4 fields
 * is a getset without a TTL: every trace written before ops existed keeps
 * its meaning.  get and gets are reads without a fill; the writes (set,
 * add, replace, cas, append, prepend), delete, incr, decr and touch act as
 * in memcached.  Only reads (getset, get, gets) count hits and misses.  An
 * item whose TTL has passed (time >= stored time + ttl) is gone: a read
 * misses, add stores, replace/cas/append/prepend/incr/decr/touch find
 * nothing.
 *
 * Blank lines are skipped, and so are lines starting with '#', except these
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

/* What a request does (see the format above). */
enum iso_op {
	ISO_GETSET, /* get; on a miss, set (the 4-field line) */
	ISO_GET,
	ISO_GETS,
	ISO_SET,
	ISO_ADD,
	ISO_REPLACE,
	ISO_CAS,
	ISO_APPEND,
	ISO_PREPEND,
	ISO_DELETE,
	ISO_INCR,
	ISO_DECR,
	ISO_TOUCH,
	ISO_OP_COUNT
};

struct iso_req {
	uint64_t key_off; /* into the key pool                  */
	uint64_t time_ms; /* the trace's clock                   */
	uint64_t ttl_ms;  /* 0: never expires                    */
	uint32_t node;    /* index into nodes                    */
	uint32_t size;    /* value bytes                         */
	uint16_t keylen;
	uint8_t op;       /* enum iso_op                         */
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
	bool timed;          /* some request has a time of its own (written, not the index) */
	bool has_ttl;        /* some request carries a TTL          */
	bool has_ops;        /* some request is not a getset        */
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

/* Appends a getset without a TTL, at the previous request's time; 0 or -1
 * (out of memory, bad key length). */
int iso_req_append(struct iso_trace *t, int node, const char *key, size_t keylen, uint32_t size);

/* Appends a request of any kind at @time_ms (which marks the trace timed);
 * 0 or -1 (out of memory, bad key length, bad op). */
int iso_req_append_op(struct iso_trace *t, int node, const char *key, size_t keylen, uint32_t size,
		      enum iso_op op, uint64_t ttl_ms, uint64_t time_ms);

/* The op's name in the text format ("getset", "get", ...); NULL if out of range. */
const char *iso_op_name(int op);

/* The op named @name (@len bytes), or -1. */
int iso_op_parse(const char *name, size_t len);

/* True for the ops that count hits and misses: getset, get, gets. */
bool iso_op_is_read(int op);

/* Parses seconds written as a decimal ("12", "0.25"; no sign, no exponent)
 * into milliseconds: digits past the third decimal are dropped, but a
 * positive value never becomes 0 (it becomes 1 ms).  0 or -1. */
int iso_parse_seconds(const char *s, uint64_t *ms);

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
