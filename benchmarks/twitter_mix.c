/* SPDX-License-Identifier: MIT */
/*
 * twitter_mix: tenants shaped like Twitter's cache clusters.  See
 * twitter_mix.h, and benchmarks/README.md for how each column is used.
 */
#define _POSIX_C_SOURCE 200809L

#include "twitter_mix.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_rand.h"

#define LINE_MAX_CELLS 32
#define ITEM_HEADER 48 /* what lru_cache charges an item beyond key and value */
#define KEY_MIN 10     /* room for a kind letter and 8 hex digits, unpadded   */
#define KEY_MAX 200    /* leaves room for slcache's "tenant:" prefix under 250 */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------- the table */

/* The columns, found by a word of their header, in any order. */
enum col {
	C_CLUSTER, C_MISS, C_CATEGORY, C_KEY, C_VALUE, C_RATE, C_FREQ, C_OHW, C_COMPULSORY,
	C_TTL, C_WSS, C_WSS_TTL, C_OPS, C_ALPHA, C_COUNT
};

static const char *const col_header[C_COUNT] = {
	[C_CLUSTER] = "cluster",
	[C_MISS] = "production miss ratio",
	[C_CATEGORY] = "category",
	[C_KEY] = "key size",
	[C_VALUE] = "value size",
	[C_RATE] = "request rate",
	[C_FREQ] = "mean freq",
	[C_OHW] = "one-hit-wonder",
	[C_COMPULSORY] = "compulsory miss",
	[C_TTL] = "common ttl",
	[C_WSS] = "not considering ttl",
	[C_WSS_TTL] = "(working set size)",
	[C_OPS] = "operation",
	[C_ALPHA] = "zipf alpha",
};

/* Splits a "| a | b |" row into trimmed cells (in place); returns how many. */
static int cells(char *line, char **cell, int max)
{
	int n = 0;
	char *p = strchr(line, '|');

	while (p && n < max) {
		char *start = p + 1, *end;

		p = strchr(start, '|');
		if (!p)
			break;
		*p = '\0';
		while (isspace((unsigned char)*start))
			start++;
		end = start + strlen(start);
		while (end > start && isspace((unsigned char)end[-1]))
			*--end = '\0';
		cell[n++] = start;
	}
	return n;
}

static bool missing(const char *s)
{
	return !*s || strcmp(s, "N/A") == 0 || strcmp(s, "NA") == 0;
}

static int number(const char *s, double *out)
{
	char *end;

	if (missing(s)) {
		*out = NAN;
		return 0;
	}
	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !isfinite(*out) || *out < 0 ? -1 : 0;
}

/* "240s", "1.8h", "4d", "10m": a duration in seconds. */
static int duration(const char *s, size_t len, double *out)
{
	char buf[32], *end;
	double v, mul;

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtod(buf, &end);
	if (errno || end == buf || v < 0)
		return -1;
	mul = strcmp(end, "s") == 0 ? 1 : strcmp(end, "m") == 0 ? 60 : strcmp(end, "h") == 0 ? 3600
	    : strcmp(end, "d") == 0 ? 86400 : -1;
	if (mul < 0)
		return -1;
	*out = v * mul;
	return 0;
}

/* A list of "name:share" items separated by blanks or commas.  @kind 0:
 * TTLs, 1: ops.  Returns 0 or -1. */
static int share_list(const char *s, struct tw_cluster *c, int kind)
{
	if (missing(s))
		return 0;
	while (*s) {
		const char *item, *colon;
		size_t len;
		char *end;
		double share;

		while (*s == ' ' || *s == ',')
			s++;
		if (!*s)
			break;
		item = s;
		while (*s && *s != ' ' && *s != ',')
			s++;
		len = (size_t)(s - item);
		colon = memchr(item, ':', len);
		if (!colon)
			return -1;
		errno = 0;
		share = strtod(colon + 1, &end);
		if (errno || end != s || share < 0 || share > 1)
			return -1;
		if (kind == 0) {
			if (c->nttl == TW_MAX_TTLS)
				continue; /* the table lists at most 10 */
			if (duration(item, (size_t)(colon - item), &c->ttl[c->nttl].seconds) != 0)
				return -1;
			c->ttl[c->nttl++].share = share;
		} else {
			size_t nlen = (size_t)(colon - item);
			int op = iso_op_parse(item, nlen);

			/* A get is a look-aside read: the client fills what it missed.
			 * gets reads the same way (its cas unique is not modelled). */
			if (op == ISO_GET || op == ISO_GETS)
				op = ISO_GETSET;
			if (op < 0)
				return -1;
			if (c->nops == TW_MAX_OPS)
				return -1;
			c->ops[c->nops].op = op;
			c->ops[c->nops++].share = share;
		}
	}
	return 0;
}

static int row_parse(char **cell, int ncell, const int *col, struct tw_cluster *c)
{
	static const struct { enum col col; size_t off; } nums[] = {
		{C_MISS, offsetof(struct tw_cluster, miss_ratio)},
		{C_CATEGORY, offsetof(struct tw_cluster, category)},
		{C_KEY, offsetof(struct tw_cluster, key_size)},
		{C_VALUE, offsetof(struct tw_cluster, value_size)},
		{C_RATE, offsetof(struct tw_cluster, kqps)},
		{C_FREQ, offsetof(struct tw_cluster, mean_freq)},
		{C_OHW, offsetof(struct tw_cluster, ohw_pct)},
		{C_COMPULSORY, offsetof(struct tw_cluster, compulsory_pct)},
		{C_WSS, offsetof(struct tw_cluster, wss_mb)},
		{C_WSS_TTL, offsetof(struct tw_cluster, wss_ttl_mb)},
		{C_ALPHA, offsetof(struct tw_cluster, alpha)},
	};
	const char *name = cell[col[C_CLUSTER]];
	char *end;
	long id;

	memset(c, 0, sizeof(*c));
	if (strncmp(name, "cluster", 7) != 0)
		return -1;
	errno = 0;
	id = strtol(name + 7, &end, 10);
	if (errno || end == name + 7 || *end || id <= 0 || id > 100000)
		return -1;
	c->id = (int)id;
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		double *field = (double *)((char *)c + nums[i].off);

		if (col[nums[i].col] >= ncell || number(cell[col[nums[i].col]], field) != 0)
			return -1;
	}
	if (share_list(cell[col[C_TTL]], c, 0) != 0 || share_list(cell[col[C_OPS]], c, 1) != 0)
		return -1;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Keys in the cluster's working set, from its size and the mean item; NaN
 * when the table gives no usable size. */
static double cluster_keys(const struct tw_cluster *c)
{
	if (!(c->wss_mb > 0) || !(c->key_size + c->value_size > 0))
		return NAN;
	return c->wss_mb * 1048576.0 / (c->key_size + c->value_size);
}

int tw_table_load(struct tw_table *t, const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "r");
	char *line = NULL, *cell[LINE_MAX_CELLS];
	size_t cap = 0, lineno = 0;
	int col[C_COUNT], cap_rows = 0, rc = -1;
	bool header = false;
	double *dur = NULL;
	int ndur = 0;

	memset(t, 0, sizeof(*t));
	if (!f) {
		set_err(err, errlen, "%s: %s", file, strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) >= 0) {
		int n;

		lineno++;
		if (!strchr(line, '|'))
			continue;
		n = cells(line, cell, LINE_MAX_CELLS);
		if (!header) {
			for (int c = 0; c < C_COUNT; c++) {
				col[c] = -1;
				for (int k = 0; k < n && col[c] < 0; k++) {
					char low[128];
					size_t i;

					for (i = 0; cell[k][i] && i + 1 < sizeof(low); i++)
						low[i] = (char)tolower((unsigned char)cell[k][i]);
					low[i] = '\0';
					/* "cluster" must be the whole header, not a word in one. */
					if (c == C_CLUSTER ? strcmp(low, "cluster") == 0
							   : strstr(low, col_header[c]) != NULL)
						col[c] = k;
				}
				if (col[c] < 0) {
					set_err(err, errlen, "%s:%zu: no '%s' column in the header", file,
						lineno, col_header[c]);
					goto out;
				}
			}
			header = true;
			continue;
		}
		if (n > 0 && cell[0][0] == ':')
			continue; /* the alignment row */
		if (t->n == cap_rows) {
			int nc = cap_rows ? 2 * cap_rows : 64;
			struct tw_cluster *nr = realloc(t->rows, (size_t)nc * sizeof(*nr));

			if (!nr) {
				set_err(err, errlen, "out of memory");
				goto out;
			}
			t->rows = nr;
			cap_rows = nc;
		}
		if (n < C_COUNT || row_parse(cell, n, col, &t->rows[t->n]) != 0) {
			set_err(err, errlen, "%s:%zu: malformed row", file, lineno);
			goto out;
		}
		t->n++;
	}
	if (!header || t->n == 0) {
		set_err(err, errlen, "%s: no table", file);
		goto out;
	}
	dur = malloc((size_t)t->n * sizeof(*dur));
	if (!dur) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < t->n; i++) {
		const struct tw_cluster *c = &t->rows[i];
		double keys = cluster_keys(c);

		if (keys > 0 && c->mean_freq > 0 && c->kqps > 0)
			dur[ndur++] = c->mean_freq * keys / (c->kqps * 1000.0);
	}
	if (ndur) {
		qsort(dur, (size_t)ndur, sizeof(*dur), cmp_double);
		t->duration_s = ndur % 2 ? dur[ndur / 2] : (dur[ndur / 2 - 1] + dur[ndur / 2]) / 2;
	}
	rc = 0;
out:
	free(dur);
	free(line);
	fclose(f);
	if (rc != 0)
		tw_table_free(t);
	return rc;
}

void tw_table_free(struct tw_table *t)
{
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

const struct tw_cluster *tw_table_find(const struct tw_table *t, const char *name, size_t len)
{
	char buf[32], *end;
	long id;

	if (len >= 7 && strncmp(name, "cluster", 7) == 0) {
		name += 7;
		len -= 7;
	}
	if (len == 0 || len >= sizeof(buf))
		return NULL;
	memcpy(buf, name, len);
	buf[len] = '\0';
	errno = 0;
	id = strtol(buf, &end, 10);
	if (errno || *end || end == buf)
		return NULL;
	for (int i = 0; i < t->n; i++)
		if (t->rows[i].id == id)
			return &t->rows[i];
	return NULL;
}

/* ----------------------------------------------------------- the tenants */

int tw_tenant_parse(const struct tw_table *t, const char *spec, struct tw_tenant *out, char *err,
		    size_t errlen)
{
	const char *colon = strchr(spec, ':');
	size_t len = colon ? (size_t)(colon - spec) : strlen(spec);

	memset(out, 0, sizeof(*out));
	out->duration_s = t->duration_s;
	out->c = tw_table_find(t, spec, len);
	if (!out->c) {
		set_err(err, errlen, "'%.*s': no such cluster in the table", (int)len, spec);
		return -1;
	}
	while (colon) {
		const char *opt = colon + 1, *eq;
		size_t olen;
		double v;
		char buf[64], *end;

		colon = strchr(opt, ':');
		olen = colon ? (size_t)(colon - opt) : strlen(opt);
		eq = memchr(opt, '=', olen);
		if (!eq || olen >= sizeof(buf))
			goto bad;
		if (strncmp(opt, "name=", 5) == 0) {
			size_t nlen = olen - 5;

			if (nlen == 0 || nlen >= sizeof(out->name))
				goto bad;
			memcpy(out->name, opt + 5, nlen);
			out->name[nlen] = '\0';
			out->name_set = true;
			continue;
		}
		memcpy(buf, eq + 1, olen - (size_t)(eq + 1 - opt));
		buf[olen - (size_t)(eq + 1 - opt)] = '\0';
		errno = 0;
		v = strtod(buf, &end);
		if (errno || end == buf || *end || !isfinite(v) || v < 0)
			goto bad;
		if (strncmp(opt, "ws=", 3) == 0 && v > 0) {
			out->ws = v;
			out->ws_set = true;
		} else if (strncmp(opt, "share=", 6) == 0 && v > 0) {
			out->share = v;
			out->share_set = true;
		} else if (strncmp(opt, "soft=", 5) == 0 && v <= 1) {
			out->soft = v;
			out->soft_set = true;
		} else if (strncmp(opt, "alpha=", 6) == 0 && v <= 10) {
			out->alpha = v;
			out->alpha_set = true;
		} else {
			goto bad;
		}
		continue;
bad:
		set_err(err, errlen,
			"'%s': bad option '%.*s' (ws=F, share=F, soft=F, alpha=F, name=NAME; "
			"ws and soft in budgets, soft <= 1, share > 0)", spec, (int)olen, opt);
		return -1;
	}
	return 0;
}

/* What a tenant needs from its row, checked before anything is generated. */
static int tenant_check(const struct tw_tenant *tt, char *err, size_t errlen)
{
	const struct tw_cluster *c = tt->c;
	const char *what = !(c->key_size >= 0) ? "key size"
			 : !(c->value_size >= 0) ? "value size"
			 : c->nops == 0 ? "operation"
			 : !tt->alpha_set && !(c->alpha >= 0) ? "Zipf alpha (give :alpha=F)"
			 : NULL;

	if (what) {
		set_err(err, errlen, "cluster%d has no %s in the table", c->id, what);
		return -1;
	}
	return 0;
}

struct gen {
	const struct tw_tenant *tt;
	int node;
	uint64_t rng, nkeys, fresh;
	double *cdf;
	double p_fresh;       /* requests to a new key, never requested again */
	double op_cdf[TW_MAX_OPS], ttl_cdf[TW_MAX_TTLS];
	double ttl_scale;     /* trace seconds per cluster second (0: no TTLs) */
	unsigned keylen;
	double value;
};

/* Value sizes around the row's mean: x0.38, x0.77, x1.54, x3.08 with
 * probabilities .4 .3 .2 .1 (mean 1), fixed per key. */
static uint32_t value_size(const struct gen *g, uint64_t key)
{
	static const double factor[4] = {256 / 666.0, 512 / 666.0, 1024 / 666.0, 2048 / 666.0};
	uint64_t s = key * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)g->node;
	unsigned r = (unsigned)(trace_rng_next(&s) % 10);
	double v = g->value * factor[r < 4 ? 0 : r < 7 ? 1 : r < 9 ? 2 : 3];

	return v < 1 ? 1 : v > 1e9 ? 1000000000u : (uint32_t)llround(v);
}

/* The key's TTL in trace milliseconds (0: none), fixed per key: a key is
 * written by one code path, with one TTL. */
static uint64_t key_ttl(const struct gen *g, uint64_t key)
{
	const struct tw_cluster *c = g->tt->c;
	uint64_t s = key * UINT64_C(0xD1B54A32D192ED03) ^ (uint64_t)g->node;
	double u, ms;
	int i = 0;

	if (!g->ttl_scale || c->nttl == 0)
		return 0;
	u = trace_rng_unit(&s) * g->ttl_cdf[c->nttl - 1];
	while (i < c->nttl - 1 && u >= g->ttl_cdf[i])
		i++;
	ms = c->ttl[i].seconds * g->ttl_scale * 1000.0;
	return ms < 1 ? 1 : ms > 1e15 ? (uint64_t)1e15 : (uint64_t)llround(ms);
}

/* The generalised harmonic number H(n, alpha) = sum_{k=1..n} k^-alpha:
 * summed up to a million terms, the rest by Euler-Maclaurin. */
static double zipf_h(double n, double alpha)
{
	const double m = 1e6;
	double sum = 0, tail;

	for (double k = 1; k <= n && k <= m; k++)
		sum += pow(k, -alpha);
	if (n <= m)
		return sum;
	/* sum_{k=m+1..n} k^-a ~ integral from m to n + (n^-a - m^-a) / 2 */
	tail = fabs(alpha - 1) < 1e-9 ? log(n / m)
				       : (pow(n, 1 - alpha) - pow(m, 1 - alpha)) / (1 - alpha);
	return sum + tail + (pow(n, -alpha) - pow(m, -alpha)) / 2;
}

static int pick(const double *cdf, int n, double u)
{
	int i = 0;

	u *= cdf[n - 1];
	while (i < n - 1 && u >= cdf[i])
		i++;
	return i;
}

int tw_trace_generate(struct iso_trace *tr, struct tw_tenant *ten, int n, uint64_t budget,
		      size_t nreqs, uint64_t seed, double rate, char *err, size_t errlen)
{
	struct gen g[TW_MAX_TENANTS];
	double share_cdf[TW_MAX_TENANTS], share_sum = 0;
	uint64_t pickr = seed * UINT64_C(0x2545F4914F6CDD1D) + 7;
	size_t dlen = 0;
	int rc = -1;

	if (n < 1 || n > TW_MAX_TENANTS || budget == 0 || nreqs == 0 || !(rate > 0)) {
		set_err(err, errlen, "1 to %d tenants, a budget, requests and a rate are needed",
			TW_MAX_TENANTS);
		return -1;
	}
	memset(g, 0, sizeof(g));
	for (int i = 0; i < n; i++)
		if (tenant_check(&ten[i], err, errlen) != 0)
			return -1;
	/* Defaults, and names unique in the mix. */
	for (int i = 0; i < n; i++) {
		struct tw_tenant *t = &ten[i];

		if (!t->ws_set)
			t->ws = 0.5;
		if (!t->soft_set)
			t->soft = 0.8 / n;
		if (!t->alpha_set)
			t->alpha = t->c->alpha;
		if (!t->share_set)
			t->share = t->c->kqps > 0 ? t->c->kqps : 1.0;
		if (!t->name_set) {
			int dup = 0;

			for (int k = 0; k < i; k++)
				dup += ten[k].c == t->c && !ten[k].name_set;
			if (dup)
				snprintf(t->name, sizeof(t->name), "c%d-%d", t->c->id, dup + 1);
			else
				snprintf(t->name, sizeof(t->name), "c%d", t->c->id);
		}
		share_sum += t->share;
		share_cdf[i] = share_sum;
	}

	snprintf(tr->name, sizeof(tr->name), "twitter");
	dlen = (size_t)snprintf(tr->desc, sizeof(tr->desc), "Twitter-shaped tenants:");
	tr->budget = budget;
	tr->budget_set = true;
	tr->warmup = nreqs / 5;
	tr->warmup_set = true;

	for (int i = 0; i < n; i++) {
		struct gen *x = &g[i];
		const struct tw_tenant *t = &ten[i];
		const struct tw_cluster *c = t->c;
		double item, acc = 0, keys_real;

		x->tt = t;
		x->node = iso_node_register(tr, t->name, strlen(t->name));
		if (x->node < 0) {
			set_err(err, errlen, "bad tenant name '%s'", t->name);
			goto out;
		}
		tr->nodes[x->node].soft = (uint64_t)(t->soft * (double)budget);
		tr->nodes[x->node].soft_set = true;
		if (dlen < sizeof(tr->desc))
			dlen += (size_t)snprintf(tr->desc + dlen, sizeof(tr->desc) - dlen,
						 " %s=cluster%d", t->name, c->id);
		x->rng = seed ^ (UINT64_C(0xD1B54A32D192ED03) * (uint64_t)(i + 1));
		x->value = c->value_size;
		x->keylen = c->key_size < KEY_MIN ? KEY_MIN
			  : c->key_size > KEY_MAX ? KEY_MAX : (unsigned)llround(c->key_size);
		item = (double)x->keylen + c->value_size + ITEM_HEADER;
		x->nkeys = (uint64_t)(t->ws * (double)budget / item);
		if (x->nkeys < 1)
			x->nkeys = 1;
		x->cdf = trace_zipf_cdf(x->nkeys, t->alpha);
		if (!x->cdf) {
			set_err(err, errlen, "out of memory");
			goto out;
		}
		/* One-hit wonders are a share of the objects; as a share of the
		 * requests that is the ratio over the mean frequency. */
		x->p_fresh = c->ohw_pct > 0 && c->mean_freq > 0 ? c->ohw_pct / 100.0 / c->mean_freq : 0;
		if (x->p_fresh > 1)
			x->p_fresh = 1;
		for (int k = 0; k < c->nops; k++) {
			acc += c->ops[k].share;
			x->op_cdf[k] = acc;
		}
		acc = 0;
		for (int k = 0; k < c->nttl; k++) {
			acc += c->ttl[k].share;
			x->ttl_cdf[k] = acc;
		}
		/*
		 * TTLs.  The tenant is the cluster's nkeys most popular keys: its
		 * key of rank k is the cluster's key of rank k, which gets
		 * rate_real / H(keys_real) * k^-alpha requests per second there and
		 * rate_trace / H(nkeys) * k^-alpha here, the same ratio at every
		 * rank.  Scaling every TTL by that ratio keeps the requests a key
		 * gets within its TTL (rate * TTL), so the share of reads that find
		 * an item expired, as in the cluster.
		 */
		keys_real = cluster_keys(c);
		if (!(keys_real > 0) && c->mean_freq > 0 && c->kqps > 0 && t->duration_s > 0)
			keys_real = c->kqps * 1000.0 * t->duration_s / c->mean_freq;
		if (keys_real > 0 && c->kqps > 0) {
			double rate_trace = rate * (t->share / share_sum);

			if (keys_real < (double)x->nkeys)
				keys_real = (double)x->nkeys;
			x->ttl_scale = c->kqps * 1000.0 / rate_trace * x->cdf[x->nkeys - 1] /
				       zipf_h(keys_real, t->alpha);
		}
	}

	for (size_t r = 0; r < nreqs; r++) {
		int i = pick(share_cdf, n, trace_rng_unit(&pickr));
		struct gen *x = &g[i];
		const struct tw_cluster *c = x->tt->c;
		int op = c->ops[pick(x->op_cdf, c->nops, trace_rng_unit(&x->rng))].op;
		uint64_t key, ttl = 0, now = (uint64_t)llround((double)r * 1000.0 / rate);
		uint32_t size = 0;
		char kbuf[KEY_MAX + 32];
		int klen;
		bool fresh = trace_rng_unit(&x->rng) < x->p_fresh;

		if (fresh)
			key = x->fresh++;
		else
			key = (trace_zipf_draw(x->cdf, x->nkeys, &x->rng) * UINT64_C(0x9E3779B1)) &
			      0xffffffffu;
		/* Fresh keys ('f') and Zipf keys ('k') never collide. */
		klen = snprintf(kbuf, sizeof(kbuf), "%c%0*" PRIx64, fresh ? 'f' : 'k',
				(int)x->keylen - 1, key);
		switch (op) {
		case ISO_GETSET:
		case ISO_SET:
		case ISO_ADD:
		case ISO_REPLACE:
		case ISO_CAS:
			size = value_size(x, key * 2 + fresh);
			ttl = key_ttl(x, key * 2 + fresh);
			break;
		case ISO_APPEND:
		case ISO_PREPEND:
			size = value_size(x, key * 2 + fresh) / 16 + 1;
			break;
		case ISO_TOUCH:
			ttl = key_ttl(x, key * 2 + fresh);
			break;
		default:
			break;
		}
		if (iso_req_append_op(tr, x->node, kbuf, (size_t)klen, size, (enum iso_op)op, ttl,
				      now) != 0) {
			set_err(err, errlen, "out of memory");
			goto out;
		}
	}
	iso_trace_finish(tr);
	rc = 0;
out:
	for (int i = 0; i < n; i++)
		free(g[i].cdf);
	return rc;
}

/* ------------------------------------------------------------- the mixes */

/*
 * Each mix puts clusters of different shapes side by side: a skewed
 * read-mostly cache next to a write-heavy one full of one-hit wonders, a
 * near-uniform one, counters, deletes, large values, short TTLs.  Every
 * tenant keeps the defaults (a working set of half the budget, soft limit
 * 0.8 / n of it, requests in proportion to the cluster's rate).
 */
static const struct {
	const char *name, *desc, *specs;
} tw_mixes[] = {
	{"twitter-a",
	 "4 clusters: skewed reads (6), writes of one-hit wonders (12), near-uniform reads and "
	 "writes (19), adds and cas (52)",
	 "cluster6 cluster12 cluster19 cluster52"},
	{"twitter-b",
	 "6 clusters: large values (7, 26), deletes (14), counters (22), 60 s TTLs (26), "
	 "skewed reads (29, 34)",
	 "cluster7 cluster14 cluster22 cluster26 cluster29 cluster34"},
	{"twitter-c",
	 "8 clusters: no working-set size (4), adds (11, 45), very skewed (16), 20 KB values "
	 "with 20 s TTLs (37), one-hit wonders (48, 54), prepends (53)",
	 "cluster4 cluster11 cluster16 cluster37 cluster45 cluster48 cluster53 cluster54"},
};

#define N_TW_MIXES ((int)(sizeof(tw_mixes) / sizeof(tw_mixes[0])))

int tw_mix_count(void)
{
	return N_TW_MIXES;
}

const char *tw_mix_name(int i)
{
	return i >= 0 && i < N_TW_MIXES ? tw_mixes[i].name : NULL;
}

const char *tw_mix_desc(int i)
{
	return i >= 0 && i < N_TW_MIXES ? tw_mixes[i].desc : NULL;
}

const char *tw_mix_specs(int i)
{
	return i >= 0 && i < N_TW_MIXES ? tw_mixes[i].specs : NULL;
}

int tw_mix_find(const char *name)
{
	for (int i = 0; i < N_TW_MIXES; i++)
		if (strcmp(tw_mixes[i].name, name) == 0)
			return i;
	return -1;
}

int tw_mix_generate(struct iso_trace *tr, const struct tw_table *t, const char *name,
		    uint64_t budget, size_t nreqs, uint64_t seed, double rate, char *err,
		    size_t errlen)
{
	struct tw_tenant ten[TW_MAX_TENANTS];
	char specs[256], *save = NULL, *tok;
	int m = tw_mix_find(name), n = 0;

	if (m < 0) {
		set_err(err, errlen, "no Twitter mix named '%s'", name);
		return -1;
	}
	snprintf(specs, sizeof(specs), "%s", tw_mixes[m].specs);
	for (tok = strtok_r(specs, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		if (n == TW_MAX_TENANTS || tw_tenant_parse(t, tok, &ten[n], err, errlen) != 0)
			return -1;
		n++;
	}
	if (tw_trace_generate(tr, ten, n, budget, nreqs, seed, rate, err, errlen) != 0)
		return -1;
	snprintf(tr->name, sizeof(tr->name), "%s", name);
	return 0;
}
