/* SPDX-License-Identifier: MIT */
/*
 * The stats dump in the OpenMetrics text format, the one Prometheus scrapes:
 * one metric family per counter and per limit, the group's path as the
 * "group" label, HELP, TYPE and UNIT lines, "# EOF" at the end.
 *
 * OpenMetrics wants every sample of a family together, so the dump cannot
 * be written group by group as the text and JSON dumps are: one walk copies
 * the stats and path of every group (so each family shows the same set of
 * groups, read at about the same moment), then the families are written
 * from the copy.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum om_kind { OM_GAUGE, OM_LIMIT, OM_COUNTER };

/* Amounts are labelled bytes, the unit of most hosts (softlimit.h). */
static const struct om_family {
	const char *name; /* without the counter's _total */
	enum om_kind kind;
	bool bytes;
	size_t off; /* of the uint64_t in struct sl_stats */
	const char *help;
} families[] = {
	{ "softlimit_usage_bytes", OM_GAUGE, true, offsetof(struct sl_stats, usage),
	  "Charged by the host to the group and its descendants." },
	{ "softlimit_stocked_bytes", OM_GAUGE, true, offsetof(struct sl_stats, stocked),
	  "Pre-charged into per-thread stocks for the subtree, not yet handed out." },
	{ "softlimit_peak_bytes", OM_GAUGE, true, offsetof(struct sl_stats, peak),
	  "Highest usage plus stocked seen." },
	{ "softlimit_min_bytes", OM_LIMIT, true, offsetof(struct sl_stats, limits.min),
	  "Hard protection: never reclaimed." },
	{ "softlimit_soft_bytes", OM_LIMIT, true, offsetof(struct sl_stats, limits.soft),
	  "Soft limit: what the group may keep when memory is short." },
	{ "softlimit_high_bytes", OM_LIMIT, true, offsetof(struct sl_stats, limits.high),
	  "Throttle threshold: above it the host is told to reclaim." },
	{ "softlimit_max_bytes", OM_LIMIT, true, offsetof(struct sl_stats, limits.max),
	  "Hard limit: no unforced charge takes usage past it." },
	{ "softlimit_effective_min_bytes", OM_GAUGE, true, offsetof(struct sl_stats, emin),
	  "Effective hard protection the policy grants, as the last reclaim computed it." },
	{ "softlimit_effective_soft_bytes", OM_GAUGE, true, offsetof(struct sl_stats, esoft),
	  "Effective soft protection the policy grants, as the last reclaim computed it." },
	{ "softlimit_low_events", OM_COUNTER, false, offsetof(struct sl_stats, events_low),
	  "Reclaims from the group while it was within its soft limit or effective protection." },
	{ "softlimit_high_events", OM_COUNTER, false, offsetof(struct sl_stats, events_high),
	  "Charges that went past the group's high." },
	{ "softlimit_max_events", OM_COUNTER, false, offsetof(struct sl_stats, events_max),
	  "Charges that hit the group's max (failed, reclaimed or forced)." },
	{ "softlimit_oom_events", OM_COUNTER, false, offsetof(struct sl_stats, events_oom),
	  "Charges that failed for good at the group's max." },
	{ "softlimit_reclaimed_bytes", OM_COUNTER, true, offsetof(struct sl_stats, reclaimed),
	  "Freed from the group by its reclaim callback." },
	{ "softlimit_refaults", OM_COUNTER, false, offsetof(struct sl_stats, refaults),
	  "Reads that missed what reclaim evicted from the group lately, as the host reported them." },
};

struct om_row {
	struct sl_stats st;
	char *path; /* "/" for the tree's root, else "/a/b" */
};

struct om_copy {
	struct om_row *rows;
	size_t n, cap;
};

static int om_collect(sl_group *g, unsigned depth, void *arg)
{
	struct om_copy *c = arg;
	struct om_row *row;
	size_t need = 2;
	sl_group *p;

	(void)depth;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		struct om_row *rows = sl__realloc(c->rows, cap * sizeof(*rows));

		if (!rows)
			return -ENOMEM;
		c->rows = rows;
		c->cap = cap;
	}
	row = &c->rows[c->n];
	/* Names and parents never change while a group lives. */
	for (p = g; p->parent; p = p->parent)
		need += p->name_len + 1u;
	row->path = sl__malloc(need);
	if (!row->path)
		return -ENOMEM;
	row->path[0] = '/';
	if (sl_group_path(g, row->path + 1, need - 1) != 0 || sl_group_stats(g, &row->st) != 0) {
		free(row->path);
		return -EIO; /* cannot happen: g is alive and the buffer fits */
	}
	c->n++;
	return 0;
}

struct om_out {
	char *buf;
	size_t size, len;
};

static void om_emit(struct om_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void om_emit(struct om_out *o, const char *fmt, ...)
{
	bool room = o->len < o->size;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? o->buf + o->len : NULL, room ? o->size - o->len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s)
{
	size_t len, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1fu;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0fu;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07u;
	else
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

/*
 * A label value: OpenMetrics escapes only backslash, double quote and line
 * feed, and requires UTF-8.  A group name may hold any byte but '/' and
 * NUL, so a byte that is not part of valid UTF-8 is written as U+FFFD.
 */
static void om_label(struct om_out *o, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		size_t len = utf8_len(p);

		if (*p == '\\' || *p == '"')
			om_emit(o, "\\%c", *p);
		else if (*p == '\n')
			om_emit(o, "\\n");
		else if (len)
			om_emit(o, "%.*s", (int)len, (const char *)p);
		else
			om_emit(o, "\xef\xbf\xbd");
		p += len ? len : 1;
	}
}

static void om_family(struct om_out *o, const struct om_family *f, const struct om_copy *c)
{
	size_t i;

	om_emit(o, "# TYPE %s %s\n", f->name, f->kind == OM_COUNTER ? "counter" : "gauge");
	if (f->bytes)
		om_emit(o, "# UNIT %s bytes\n", f->name);
	om_emit(o, "# HELP %s %s\n", f->name, f->help);
	for (i = 0; i < c->n; i++) {
		uint64_t v;

		memcpy(&v, (const char *)&c->rows[i].st + f->off, sizeof(v));
		om_emit(o, "%s%s{group=\"", f->name, f->kind == OM_COUNTER ? "_total" : "");
		om_label(o, c->rows[i].path);
		if (f->kind == OM_LIMIT && v == SL_UNLIMITED)
			om_emit(o, "\"} +Inf\n");
		else
			om_emit(o, "\"} %" PRIu64 "\n", v);
	}
}

int sl__dump_openmetrics(sl_group *scope, char *buf, size_t size, size_t *needed)
{
	struct om_copy c = { 0 };
	struct om_out o = { .buf = buf, .size = size };
	size_t i;
	int rc;

	if (!sl__group_valid(scope) || (!buf && size))
		return -EINVAL;
	rc = sl_group_walk(scope, om_collect, &c);
	if (rc == 0) {
		om_emit(&o, "# TYPE softlimit_tree info\n# HELP softlimit_tree The tree's soft-limit policy.\n");
		om_emit(&o, "softlimit_tree_info{policy=\"%s\"} 1\n", scope->tree->policy->name);
		for (i = 0; i < sizeof(families) / sizeof(families[0]); i++)
			om_family(&o, &families[i], &c);
		om_emit(&o, "# EOF\n");
	}
	for (i = 0; i < c.n; i++)
		free(c.rows[i].path);
	free(c.rows);
	if (rc)
		return rc;
	if (needed)
		*needed = o.len;
	if (size && o.len >= size) {
		buf[size - 1] = '\0';
		return -ENOSPC;
	}
	return 0;
}
