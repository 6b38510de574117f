/* SPDX-License-Identifier: MIT */
/*
 * isolation_trace: synthetic multi-tenant cache traces, and the text format
 * that carries them.  See isolation_trace.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "isolation_trace.h"
#include "trace_rand.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define ISO_KEY_MAX 250      /* LRU_KEY_MAX */
#define ISO_NAME_MAX 255     /* SL_NAME_MAX */
#define ISO_PATH_MAX 1024

/* ------------------------------------------------------------- the mixes */

enum kind { K_ZIPF, K_SCAN, K_BURST };

struct tenant_spec {
	const char *path;
	enum kind kind;
	double skew;   /* Zipf exponent (K_ZIPF, K_BURST)                    */
	double keys;   /* key space, in cache budgets (bytes of distinct items) */
	double soft;   /* soft limit, in cache budgets                        */
	double weight; /* share of the requests (K_BURST: ignored, see below) */
};

struct mix_spec {
	const char *name;
	const char *desc;
	double burst_duty;  /* fraction of each period the bursty tenant is active */
	double burst_share; /* its share of the requests while active              */
	int nbursts;        /* periods in the trace                                */
	struct tenant_spec t[8];
	int n;
};

/*
 * Sizes are fractions of the budget, so a mix keeps its shape at any budget.
 * Every mix has more distinct data than the cache holds (pressure), and its
 * soft limits add up to at most 90% of the budget.
 */
static const struct mix_spec mixes[] = {
	{
		.name = "zipf-mix",
		.desc = "five Zipf namespaces of different skews and sizes under three customers",
		.t = {
			{"custA/ns1", K_ZIPF, 1.0, 0.30, 0.20, 0.20},
			{"custA/ns2", K_ZIPF, 0.8, 0.40, 0.20, 0.15},
			{"custB/ns1", K_ZIPF, 1.2, 0.10, 0.10, 0.25},
			{"custB/ns2", K_ZIPF, 0.6, 0.50, 0.15, 0.15},
			{"custC/ns1", K_ZIPF, 0.9, 0.20, 0.20, 0.25},
		},
		.n = 5,
	},
	{
		.name = "scan-flood",
		.desc = "four Zipf namespaces and a scanner (sequential keys, never reused, soft 0) "
			"making 40% of the requests",
		.t = {
			{"custA/ns1", K_ZIPF, 1.0, 0.30, 0.20, 0.20},
			{"custA/ns2", K_ZIPF, 0.8, 0.40, 0.20, 0.15},
			{"custB/ns1", K_ZIPF, 1.2, 0.10, 0.10, 0.15},
			{"custB/ns2", K_ZIPF, 0.9, 0.25, 0.20, 0.10},
			{"custC/scan", K_SCAN, 0, 0, 0, 0.40},
		},
		.n = 5,
	},
	{
		.name = "bursty",
		.desc = "three Zipf namespaces and one whose demand arrives in bursts "
			"(60% of the requests for 30% of the time, idle between)",
		.burst_duty = 0.30,
		.burst_share = 0.60,
		.nbursts = 6,
		.t = {
			{"custA/ns1", K_ZIPF, 1.0, 0.30, 0.20, 0.30},
			{"custA/ns2", K_ZIPF, 0.5, 1.50, 0.15, 0.30},
			{"custB/ns1", K_ZIPF, 1.1, 0.20, 0.15, 0.40},
			{"custB/burst", K_BURST, 0.9, 0.25, 0.25, 0},
		},
		.n = 4,
	},
	{
		.name = "overgrown-child",
		.desc = "custA over its soft limit because ns2 overgrew (a huge flat working set), "
			"while its sibling ns1 stays within its own",
		.t = {
			{"custA/ns1", K_ZIPF, 0.9, 0.20, 0.25, 0.25},
			{"custA/ns2", K_ZIPF, 0.6, 2.00, 0.10, 0.35},
			{"custB/ns1", K_ZIPF, 1.0, 0.30, 0.25, 0.20},
			{"custB/ns2", K_ZIPF, 0.8, 0.30, 0.20, 0.20},
		},
		.n = 4,
	},
};

#define N_MIXES ((int)(sizeof(mixes) / sizeof(mixes[0])))

int iso_mix_count(void)
{
	return N_MIXES;
}

const char *iso_mix_name(int i)
{
	return i >= 0 && i < N_MIXES ? mixes[i].name : NULL;
}

const char *iso_mix_desc(int i)
{
	return i >= 0 && i < N_MIXES ? mixes[i].desc : NULL;
}

/* ---------------------------------------------------------------- traces */

void iso_trace_init(struct iso_trace *t)
{
	memset(t, 0, sizeof(*t));
}

void iso_trace_free(struct iso_trace *t)
{
	for (int i = 0; i < t->nnodes; i++)
		free(t->nodes[i].path);
	free(t->nodes);
	free(t->index);
	free(t->reqs);
	free(t->pool);
	iso_trace_init(t);
}

static uint64_t fnv(const char *s, size_t len)
{
	uint64_t h = UINT64_C(14695981039346656037);

	while (len--) {
		h ^= (unsigned char)*s++;
		h *= UINT64_C(1099511628211);
	}
	return h;
}

static int index_rebuild(struct iso_trace *t, size_t cap)
{
	int *ix = malloc(cap * sizeof(*ix));

	if (!ix)
		return -1;
	for (size_t i = 0; i < cap; i++)
		ix[i] = -1;
	for (int n = 0; n < t->nnodes; n++) {
		const char *p = t->nodes[n].path;
		size_t h = (size_t)fnv(p, strlen(p)) & (cap - 1);

		while (ix[h] >= 0)
			h = (h + 1) & (cap - 1);
		ix[h] = n;
	}
	free(t->index);
	t->index = ix;
	t->index_cap = cap;
	return 0;
}

static int node_find(const struct iso_trace *t, const char *path, size_t len)
{
	size_t h;

	if (!t->index_cap)
		return -1;
	h = (size_t)fnv(path, len) & (t->index_cap - 1);
	for (; t->index[h] >= 0; h = (h + 1) & (t->index_cap - 1)) {
		const char *p = t->nodes[t->index[h]].path;

		if (strlen(p) == len && memcmp(p, path, len) == 0)
			return t->index[h];
	}
	return -1;
}

/* Adds @path whose parent (index @parent) exists already. */
static int node_add(struct iso_trace *t, const char *path, size_t len, int parent)
{
	struct iso_node *n;

	if (t->nnodes == t->nodes_cap) {
		int cap = t->nodes_cap ? 2 * t->nodes_cap : 16;
		struct iso_node *nn = realloc(t->nodes, (size_t)cap * sizeof(*nn));

		if (!nn)
			return -1;
		t->nodes = nn;
		t->nodes_cap = cap;
	}
	if ((size_t)(t->nnodes + 1) * 2 > t->index_cap &&
	    index_rebuild(t, t->index_cap ? 2 * t->index_cap : 64) != 0)
		return -1;
	n = &t->nodes[t->nnodes];
	memset(n, 0, sizeof(*n));
	n->path = malloc(len + 1);
	if (!n->path)
		return -1;
	memcpy(n->path, path, len);
	n->path[len] = '\0';
	n->name = strrchr(n->path, '/') ? strrchr(n->path, '/') + 1 : n->path;
	n->parent = parent;
	t->nnodes++;
	{
		size_t h = (size_t)fnv(path, len) & (t->index_cap - 1);

		while (t->index[h] >= 0)
			h = (h + 1) & (t->index_cap - 1);
		t->index[h] = t->nnodes - 1;
	}
	return t->nnodes - 1;
}

int iso_node_register(struct iso_trace *t, const char *path, size_t len)
{
	int found = node_find(t, path, len), parent = -1;
	size_t start = 0;

	if (found >= 0)
		return found;
	if (len == 0 || len > ISO_PATH_MAX)
		return -1;
	/* Every prefix, parents first. */
	for (size_t i = 0; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		if (i == start || i - start > ISO_NAME_MAX)
			return -1;
		found = node_find(t, path, i);
		if (found < 0)
			found = node_add(t, path, i, parent);
		if (found < 0)
			return -1;
		parent = found;
		start = i + 1;
	}
	return parent;
}

static const char *const op_names[ISO_OP_COUNT] = {
	[ISO_GETSET] = "getset", [ISO_GET] = "get",       [ISO_GETS] = "gets",
	[ISO_SET] = "set",       [ISO_ADD] = "add",       [ISO_REPLACE] = "replace",
	[ISO_CAS] = "cas",       [ISO_APPEND] = "append", [ISO_PREPEND] = "prepend",
	[ISO_DELETE] = "delete", [ISO_INCR] = "incr",     [ISO_DECR] = "decr",
	[ISO_TOUCH] = "touch",
};

const char *iso_op_name(int op)
{
	return op >= 0 && op < ISO_OP_COUNT ? op_names[op] : NULL;
}

int iso_op_parse(const char *name, size_t len)
{
	for (int i = 0; i < ISO_OP_COUNT; i++)
		if (strlen(op_names[i]) == len && memcmp(op_names[i], name, len) == 0)
			return i;
	return -1;
}

bool iso_op_is_read(int op)
{
	return op == ISO_GETSET || op == ISO_GET || op == ISO_GETS;
}

int iso_parse_seconds(const char *s, uint64_t *ms)
{
	uint64_t whole = 0, frac = 0;
	int digits = 0;
	bool any = false, tail = false;

	for (; *s >= '0' && *s <= '9'; s++) {
		if (whole > (UINT64_MAX / 1000 - 9) / 10)
			return -1;
		whole = whole * 10 + (uint64_t)(*s - '0');
		any = true;
	}
	if (*s == '.') {
		for (s++; *s >= '0' && *s <= '9'; s++) {
			if (digits < 3) {
				frac = frac * 10 + (uint64_t)(*s - '0');
				digits++;
			} else if (*s != '0') {
				tail = true;
			}
			any = true;
		}
	}
	if (!any || *s)
		return -1;
	while (digits++ < 3)
		frac *= 10;
	*ms = whole * 1000 + frac;
	if (*ms == 0 && tail)
		*ms = 1;
	return 0;
}

static int req_push(struct iso_trace *t, int node, const char *key, size_t keylen, uint32_t size,
		    enum iso_op op, uint64_t ttl_ms, uint64_t time_ms)
{
	struct iso_req *r;

	if (keylen == 0 || keylen > ISO_KEY_MAX || node < 0 || node >= t->nnodes ||
	    (unsigned)op >= ISO_OP_COUNT)
		return -1;
	if (t->nreqs == t->reqs_cap) {
		size_t cap = t->reqs_cap ? 2 * t->reqs_cap : 4096;
		struct iso_req *nr = realloc(t->reqs, cap * sizeof(*nr));

		if (!nr)
			return -1;
		t->reqs = nr;
		t->reqs_cap = cap;
	}
	if (t->pool_len + keylen > t->pool_cap) {
		size_t cap = t->pool_cap ? 2 * t->pool_cap : 65536;
		char *np;

		while (cap < t->pool_len + keylen)
			cap *= 2;
		np = realloc(t->pool, cap);
		if (!np)
			return -1;
		t->pool = np;
		t->pool_cap = cap;
	}
	memcpy(t->pool + t->pool_len, key, keylen);
	r = &t->reqs[t->nreqs++];
	memset(r, 0, sizeof(*r));
	r->key_off = t->pool_len;
	r->keylen = (uint16_t)keylen;
	r->node = (uint32_t)node;
	r->size = size;
	r->op = (uint8_t)op;
	r->ttl_ms = ttl_ms;
	r->time_ms = time_ms;
	t->pool_len += keylen;
	t->nodes[node].holds = true;
	if (size > t->max_size)
		t->max_size = size;
	t->has_ttl |= ttl_ms != 0;
	t->has_ops |= op != ISO_GETSET;
	return 0;
}

int iso_req_append(struct iso_trace *t, int node, const char *key, size_t keylen, uint32_t size)
{
	uint64_t now = t->nreqs ? t->reqs[t->nreqs - 1].time_ms : 0;

	return req_push(t, node, key, keylen, size, ISO_GETSET, 0, now);
}

int iso_req_append_op(struct iso_trace *t, int node, const char *key, size_t keylen, uint32_t size,
		      enum iso_op op, uint64_t ttl_ms, uint64_t time_ms)
{
	if (req_push(t, node, key, keylen, size, op, ttl_ms, time_ms) != 0)
		return -1;
	t->timed = true;
	return 0;
}

void iso_trace_finish(struct iso_trace *t)
{
	uint64_t *sum = calloc((size_t)t->nnodes + 1, sizeof(*sum));

	if (!sum)
		return;
	/* Children come after their parents: one backward pass sums them up. */
	for (int i = t->nnodes - 1; i >= 0; i--) {
		struct iso_node *n = &t->nodes[i];

		if (!n->soft_set && sum[i])
			n->soft = sum[i];
		if (n->parent >= 0)
			sum[n->parent] += n->soft;
	}
	free(sum);
}

/* ------------------------------------------------------------ generation */

/* The mean bytes an item costs the cache (value + key + header), to turn a
 * key space given in budgets into a number of keys. */
#define MEAN_ITEM 720.0

/* Value sizes: 256, 512, 1024, 2048 bytes with probabilities .4 .3 .2 .1
 * (mean 666), fixed per key. */
static uint32_t size_of_key(uint64_t tenant, uint64_t key)
{
	uint64_t s = tenant * UINT64_C(0x100000001B3) ^ key;
	unsigned r = (unsigned)(trace_rng_next(&s) % 10);

	return r < 4 ? 256 : r < 7 ? 512 : r < 9 ? 1024 : 2048;
}

struct gen_tenant {
	int node;
	uint64_t rng;
	uint64_t nkeys;
	double *cdf; /* unnormalised Zipf CDF over ranks 1..nkeys */
	uint64_t next_scan;
};

int iso_trace_generate(struct iso_trace *t, const char *name, uint64_t budget, size_t nreqs,
		       uint64_t seed)
{
	const struct mix_spec *m = NULL;
	struct gen_tenant g[8];
	double w_idle[8], w_active[8], sum_idle = 0, sum_active = 0;
	uint64_t pick = seed * UINT64_C(0x2545F4914F6CDD1D) + 1;
	size_t period;
	int rc = -1;

	for (int i = 0; i < N_MIXES; i++)
		if (strcmp(mixes[i].name, name) == 0)
			m = &mixes[i];
	if (!m || budget == 0 || nreqs == 0)
		return -1;
	snprintf(t->name, sizeof(t->name), "%s", m->name);
	snprintf(t->desc, sizeof(t->desc), "%s", m->desc);
	t->budget = budget;
	t->budget_set = true;
	t->warmup = nreqs / 5;
	t->warmup_set = true;
	memset(g, 0, sizeof(g));

	for (int i = 0; i < m->n; i++) {
		const struct tenant_spec *s = &m->t[i];
		struct iso_node *n;

		g[i].node = iso_node_register(t, s->path, strlen(s->path));
		if (g[i].node < 0)
			goto out;
		n = &t->nodes[g[i].node];
		n->soft = (uint64_t)(s->soft * (double)budget);
		n->soft_set = true;
		n->scan = s->kind == K_SCAN;
		n->burst = s->kind == K_BURST;
		g[i].rng = seed ^ (UINT64_C(0xD1B54A32D192ED03) * (uint64_t)(i + 1));
		if (s->kind != K_SCAN) {
			g[i].nkeys = (uint64_t)(s->keys * (double)budget / MEAN_ITEM);
			if (g[i].nkeys < 1)
				g[i].nkeys = 1;
			g[i].cdf = trace_zipf_cdf(g[i].nkeys, s->skew);
			if (!g[i].cdf)
				goto out;
		}
		w_idle[i] = s->kind == K_BURST ? 0 : s->weight;
		sum_idle += w_idle[i];
	}
	for (int i = 0; i < m->n; i++) {
		w_active[i] = m->t[i].kind == K_BURST ? m->burst_share
						      : w_idle[i] / sum_idle * (1 - m->burst_share);
		sum_active += w_active[i];
	}
	period = m->nbursts ? nreqs / (size_t)m->nbursts : 0;
	if (period == 0)
		period = nreqs;

	for (size_t r = 0; r < nreqs; r++) {
		bool active = m->nbursts && (double)(r % period) < m->burst_duty * (double)period;
		const double *w = active ? w_active : w_idle;
		double u = trace_rng_unit(&pick) * (active ? sum_active : sum_idle), acc = 0;
		int i = 0;
		uint64_t key;
		char kbuf[32];
		int klen;

		for (i = 0; i < m->n - 1; i++) {
			acc += w[i];
			if (u < acc && w[i] > 0)
				break;
		}
		while (w[i] <= 0 && i > 0) /* rounding at the very end */
			i--;
		if (m->t[i].kind == K_SCAN) {
			key = g[i].next_scan++;
		} else {
			/* A rank, scattered so that hot keys are not neighbours. */
			key = (trace_zipf_draw(g[i].cdf, g[i].nkeys, &g[i].rng) * UINT64_C(0x9E3779B1)) &
			      0xffffffffu;
		}
		klen = snprintf(kbuf, sizeof(kbuf), "k%" PRIx64, key);
		if (iso_req_append(t, g[i].node, kbuf, (size_t)klen, size_of_key((uint64_t)i, key)) != 0)
			goto out;
	}
	iso_trace_finish(t);
	rc = 0;
out:
	for (int i = 0; i < m->n; i++)
		free(g[i].cdf);
	return rc;
}

/* --------------------------------------------------------------- text I/O */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Splits @s into up to @max blank-separated fields; returns how many. */
static int split(char *s, char **f, int max)
{
	int n = 0;

	while (*s) {
		while (*s && isspace((unsigned char)*s))
			*s++ = '\0';
		if (!*s)
			break;
		if (n == max)
			return max + 1;
		f[n++] = s;
		while (*s && !isspace((unsigned char)*s))
			s++;
	}
	return n;
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

static int directive(struct iso_trace *t, char *line, char *err, size_t errlen, size_t lineno)
{
	char *f[4];
	int n;
	uint64_t v;

	line++; /* '#' */
	while (*line == ' ' || *line == '\t')
		line++;
	if (strncmp(line, "budget:", 7) == 0) {
		n = split(line + 7, f, 3);
		if (n != 1 || parse_u64(f[0], &v) != 0 || v == 0)
			goto bad;
		t->budget = v;
		t->budget_set = true;
	} else if (strncmp(line, "warmup:", 7) == 0) {
		n = split(line + 7, f, 3);
		if (n != 1 || parse_u64(f[0], &v) != 0)
			goto bad;
		t->warmup = (size_t)v;
		t->warmup_set = true;
	} else if (strncmp(line, "soft:", 5) == 0) {
		int node;

		n = split(line + 5, f, 3);
		if (n != 2 || parse_u64(f[1], &v) != 0)
			goto bad;
		node = iso_node_register(t, f[0], strlen(f[0]));
		if (node < 0)
			goto bad;
		t->nodes[node].soft = v;
		t->nodes[node].soft_set = true;
	}
	return 0;
bad:
	set_err(err, errlen, "line %zu: bad directive", lineno);
	return -1;
}

int iso_trace_load(struct iso_trace *t, const char *file, char *err, size_t errlen)
{
	FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t len;
	int rc = -1;
	const char *base;

	if (!f) {
		set_err(err, errlen, "%s: %s", file, strerror(errno));
		return -1;
	}
	base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
	snprintf(t->name, sizeof(t->name), "trace:%s", base);
	snprintf(t->desc, sizeof(t->desc), "trace file %s", file);
	while ((len = getline(&line, &cap, f)) >= 0) {
		char *fl[7], *p = line;
		uint64_t size, time_ms, ttl_ms;
		int n, node, op;

		lineno++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#') {
			if (directive(t, p, err, errlen, lineno) != 0)
				goto out;
			continue;
		}
		n = split(p, fl, 6);
		if (n == 0)
			continue;
		if (n < 4 || n > 6) {
			set_err(err, errlen,
				"%s:%zu: expected 4 to 6 fields (time tenant key size [op [ttl]])", file,
				lineno);
			goto out;
		}
		if (parse_u64(fl[3], &size) != 0 || size > UINT32_MAX) {
			set_err(err, errlen, "%s:%zu: bad size '%s'", file, lineno, fl[3]);
			goto out;
		}
		node = iso_node_register(t, fl[1], strlen(fl[1]));
		if (node < 0) {
			set_err(err, errlen, "%s:%zu: bad tenant '%s'", file, lineno, fl[1]);
			goto out;
		}
		if (n == 4 && iso_parse_seconds(fl[0], &time_ms) != 0) {
			/* Informational in 4-field traces: keep the clock where it was. */
			time_ms = t->nreqs ? t->reqs[t->nreqs - 1].time_ms : 0;
		} else if (n > 4 && iso_parse_seconds(fl[0], &time_ms) != 0) {
			set_err(err, errlen, "%s:%zu: bad time '%s' (seconds, e.g. 12.5)", file, lineno,
				fl[0]);
			goto out;
		}
		op = ISO_GETSET;
		if (n > 4 && (op = iso_op_parse(fl[4], strlen(fl[4]))) < 0) {
			set_err(err, errlen, "%s:%zu: unknown op '%s'", file, lineno, fl[4]);
			goto out;
		}
		ttl_ms = 0;
		if (n > 5 && iso_parse_seconds(fl[5], &ttl_ms) != 0) {
			set_err(err, errlen, "%s:%zu: bad ttl '%s' (seconds, e.g. 300)", file, lineno,
				fl[5]);
			goto out;
		}
		if (n == 4 ? req_push(t, node, fl[2], strlen(fl[2]), (uint32_t)size, ISO_GETSET, 0,
				      time_ms) != 0
			   : iso_req_append_op(t, node, fl[2], strlen(fl[2]), (uint32_t)size,
					       (enum iso_op)op, ttl_ms, time_ms) != 0) {
			set_err(err, errlen, "%s:%zu: bad key (1..%d bytes) or out of memory", file,
				lineno, ISO_KEY_MAX);
			goto out;
		}
	}
	if (ferror(f)) {
		set_err(err, errlen, "%s: read error", file);
		goto out;
	}
	if (t->nreqs == 0) {
		set_err(err, errlen, "%s: no requests", file);
		goto out;
	}
	iso_trace_finish(t);
	rc = 0;
out:
	free(line);
	if (f != stdin)
		fclose(f);
	return rc;
}

/* Writes @ms as seconds, with as many decimals as it needs (up to 3). */
static void put_seconds(FILE *f, uint64_t ms)
{
	if (ms % 1000 == 0)
		fprintf(f, "%" PRIu64, ms / 1000);
	else if (ms % 100 == 0)
		fprintf(f, "%" PRIu64 ".%01" PRIu64, ms / 1000, ms % 1000 / 100);
	else if (ms % 10 == 0)
		fprintf(f, "%" PRIu64 ".%02" PRIu64, ms / 1000, ms % 1000 / 10);
	else
		fprintf(f, "%" PRIu64 ".%03" PRIu64, ms / 1000, ms % 1000);
}

int iso_trace_write(const struct iso_trace *t, FILE *f)
{
	fprintf(f, "# softlimit cache trace: %s\n", t->name);
	if (t->desc[0])
		fprintf(f, "# %s\n", t->desc);
	if (t->has_ops || t->has_ttl)
		fprintf(f, "# format: time tenant key size [op [ttl]]  (time and ttl in seconds; "
			   "no op: getset, a get and on a miss a set of size value bytes)\n");
	else
		fprintf(f, "# format: time tenant key size  (a get; on a miss, a set of size value bytes)\n");
	if (t->budget_set)
		fprintf(f, "# budget: %" PRIu64 "\n", t->budget);
	if (t->warmup_set)
		fprintf(f, "# warmup: %zu\n", t->warmup);
	for (int i = 0; i < t->nnodes; i++)
		if (t->nodes[i].soft_set)
			fprintf(f, "# soft: %s %" PRIu64 "\n", t->nodes[i].path, t->nodes[i].soft);
	for (size_t i = 0; i < t->nreqs; i++) {
		const struct iso_req *r = &t->reqs[i];

		/* An untimed trace numbers its lines, as before ops and TTLs existed. */
		if (t->timed)
			put_seconds(f, r->time_ms);
		else
			fprintf(f, "%zu", i);
		fprintf(f, " %s %.*s %" PRIu32, t->nodes[r->node].path, (int)r->keylen,
			t->pool + r->key_off, r->size);
		if (r->op != ISO_GETSET || r->ttl_ms) {
			fprintf(f, " %s", op_names[r->op]);
			if (r->ttl_ms) {
				fputc(' ', f);
				put_seconds(f, r->ttl_ms);
			}
		}
		fputc('\n', f);
	}
	fflush(f);
	return ferror(f) ? -1 : 0;
}
