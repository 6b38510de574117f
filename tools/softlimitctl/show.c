/* SPDX-License-Identifier: MIT */
/*
 * show.c: what a store holds, as a table for people (sizes with K, M, G
 * suffixes, as they are typed) or as JSON for scripts (every size in bytes).
 * A budget deleted between listing and reading it is left out, not an
 * error: the store is live and the command shows one moment of it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "size.h"

static const char *state_name(enum sl_lease_state s)
{
	switch (s) {
	case SL_LEASE_JOINING: return "joining";
	case SL_LEASE_HELD: return "held";
	case SL_LEASE_FENCED: return "fenced";
	case SL_LEASE_STALLED: return "stalled";
	case SL_LEASE_ORPHANED: return "orphaned";
	}
	return "unknown";
}

/* A JSON string: ids carry a host name, which is the host's to choose. */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* ---- one budget: its limits and participants, read with retries ---- */

struct budget {
	const char *name;
	struct sl_limits lim;
	struct sl_lease_participant *parts;
	size_t n;
	uint64_t share, floor, usage, demand; /* sums over the participants */
};

static int get_limits(struct ctl *c, void *arg)
{
	struct budget *b = arg;

	return sl_lease_budget_get(c->store, b->name, &b->lim);
}

/* The participants, however many: a second call when the first was short
 * (someone joined between the two). */
static int get_parts(struct ctl *c, void *arg)
{
	struct budget *b = arg;
	size_t cap = b->n ? b->n : 16, count = 0;
	int rc;

	for (;;) {
		struct sl_lease_participant *p = realloc(b->parts, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		b->parts = p;
		rc = sl_lease_budget_participants(c->store, b->name, b->parts, cap, &count);
		if (rc != 0)
			return rc;
		if (count <= cap)
			break;
		cap = count + 8;
	}
	b->n = count;
	return 0;
}

static int budget_read(struct ctl *c, struct budget *b)
{
	size_t i;
	int rc;

	rc = ctl_call(c, get_limits, b);
	if (rc == 0)
		rc = ctl_call(c, get_parts, b);
	if (rc != 0)
		return rc;
	b->share = b->floor = b->usage = b->demand = 0;
	for (i = 0; i < b->n; i++) {
		b->share += b->parts[i].share;
		b->floor += b->parts[i].floor;
		b->usage += b->parts[i].usage;
		b->demand += b->parts[i].demand;
	}
	return 0;
}

/* The room no one holds: what a grow may take now. */
static uint64_t budget_free(const struct budget *b)
{
	return b->share < b->lim.max ? b->lim.max - b->share : 0;
}

static void json_budget_fields(const struct budget *b)
{
	printf("\"name\":");
	json_str(b->name);
	printf(",\"max\":%" PRIu64 ",\"soft\":%" PRIu64 ",\"min\":%" PRIu64
	       ",\"participants\":%zu,\"share\":%" PRIu64 ",\"free\":%" PRIu64
	       ",\"floor\":%" PRIu64 ",\"usage\":%" PRIu64 ",\"demand\":%" PRIu64,
	       b->lim.max, b->lim.soft, b->lim.min, b->n, b->share, budget_free(b), b->floor,
	       b->usage, b->demand);
}

#define SZ 24

static void table_budget_line(const struct budget *b)
{
	char s[6][SZ];

	printf("%-24s %9s %9s %9s %6zu %9s %9s %9s\n", b->name, format_size(b->lim.max, s[0], SZ),
	       format_size(b->lim.soft, s[1], SZ), format_size(b->lim.min, s[2], SZ), b->n,
	       format_size(b->share, s[3], SZ), format_size(budget_free(b), s[4], SZ),
	       format_size(b->usage, s[5], SZ));
}

#define BUDGET_HEADER "%-24s %9s %9s %9s %6s %9s %9s %9s\n", "BUDGET", "MAX", "SOFT", "MIN", \
		      "PARTS", "SHARE", "FREE", "USAGE"

int show_budget(struct ctl *c, const char *name)
{
	struct budget b = { .name = name };
	size_t i;
	int rc = budget_read(c, &b);

	if (rc != 0) {
		free(b.parts);
		return rc;
	}
	if (c->json) {
		putchar('{');
		json_budget_fields(&b);
		printf(",\"members\":[");
		for (i = 0; i < b.n; i++) {
			const struct sl_lease_participant *p = &b.parts[i];

			printf("%s{\"id\":", i ? "," : "");
			json_str(p->id);
			printf(",\"share\":%" PRIu64 ",\"floor\":%" PRIu64 ",\"usage\":%" PRIu64
			       ",\"demand\":%" PRIu64 ",\"expires_ms\":%" PRId64 ",\"state\":\"%s\"}",
			       p->share, p->floor, p->usage, p->demand, p->expires_ms,
			       state_name(p->state));
		}
		printf("]}\n");
	} else {
		printf(BUDGET_HEADER);
		table_budget_line(&b);
		printf("\n%-40s %9s %9s %9s %9s %10s %s\n", "PARTICIPANT", "SHARE", "FLOOR", "USAGE",
		       "DEMAND", "EXPIRES", "STATE");
		for (i = 0; i < b.n; i++) {
			const struct sl_lease_participant *p = &b.parts[i];
			char s[4][SZ], exp[SZ];

			snprintf(exp, sizeof(exp), "%.1fs", (double)p->expires_ms / 1000.0);
			printf("%-40s %9s %9s %9s %9s %10s %s\n", p->id, format_size(p->share, s[0], SZ),
			       format_size(p->floor, s[1], SZ), format_size(p->usage, s[2], SZ),
			       format_size(p->demand, s[3], SZ), exp, state_name(p->state));
		}
		if (b.n == 0)
			printf("(no participants)\n");
	}
	free(b.parts);
	return 0;
}

/* ---- every budget ---- */

struct names {
	char (*v)[SL_LEASE_NAME_MAX];
	size_t n;
};

static int get_names(struct ctl *c, void *arg)
{
	struct names *nm = arg;
	size_t cap = nm->n ? nm->n : 32, count = 0;
	int rc;

	for (;;) {
		char(*v)[SL_LEASE_NAME_MAX] = realloc(nm->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		nm->v = v;
		rc = sl_lease_budget_list(c->store, nm->v, cap, &count);
		if (rc != 0)
			return rc;
		if (count <= cap)
			break;
		cap = count + 8;
	}
	nm->n = count;
	return 0;
}

int list_budgets(struct ctl *c)
{
	struct names nm = { 0 };
	size_t i;
	int rc = ctl_call(c, get_names, &nm);

	if (rc != 0) {
		free(nm.v);
		return rc;
	}
	if (c->json) {
		putchar('[');
		for (i = 0; i < nm.n; i++) {
			if (i)
				putchar(',');
			json_str(nm.v[i]);
		}
		printf("]\n");
	} else {
		for (i = 0; i < nm.n; i++)
			printf("%s\n", nm.v[i]);
	}
	free(nm.v);
	return 0;
}

int show_all(struct ctl *c)
{
	struct names nm = { 0 };
	size_t i, shown = 0;
	int rc = ctl_call(c, get_names, &nm);

	if (rc != 0) {
		free(nm.v);
		return rc;
	}
	if (c->json)
		printf("{\"budgets\":[");
	else
		printf(BUDGET_HEADER);
	for (i = 0; i < nm.n; i++) {
		struct budget b = { .name = nm.v[i] };

		rc = budget_read(c, &b);
		free(b.parts);
		if (rc == -ENOENT) /* deleted since the list */
			continue;
		if (rc != 0)
			break;
		if (c->json) {
			printf("%s{", shown ? "," : "");
			json_budget_fields(&b);
			putchar('}');
		} else {
			table_budget_line(&b);
		}
		shown++;
	}
	if (c->json)
		printf("]}\n");
	free(nm.v);
	return rc == -ENOENT ? 0 : rc;
}
