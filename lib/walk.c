/* SPDX-License-Identifier: MIT */
/*
 * Seeing the tree: walks, lookup by path, paths, and the stats dump that a
 * host serves from its admin endpoint.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pre-order walk of top's subtree; caller holds the topology lock. */
static int walk_locked(sl_group *top, sl_walk_fn fn, void *arg)
{
	sl_group *g = top;
	unsigned depth = 0;
	int rc;

	while (g) {
		rc = fn(g, depth, arg);
		if (rc)
			return rc;
		if (g->first_child) {
			g = g->first_child;
			depth++;
			continue;
		}
		while (g != top && !g->next_sibling) {
			g = g->parent;
			depth--;
		}
		g = g == top ? NULL : g->next_sibling;
	}
	return 0;
}

int sl_group_walk(sl_group *scope, sl_walk_fn fn, void *arg)
{
	struct sl__walk_frame frame;
	sl_tree *t;
	int rc;

	if (!sl__group_valid(scope) || !fn)
		return -EINVAL;
	t = scope->tree;
	if (sl__walking(t)) /* nested: the lock is ours already */
		return walk_locked(scope, fn, arg);
	pthread_mutex_lock(&t->lock);
	/* While we hold the topology lock, nothing this thread calls may
	 * reclaim (reclaim takes it) or change the topology. */
	sl__walk_enter(&frame, t);
	sl__tls_in_reclaim++;
	rc = walk_locked(scope, fn, arg);
	sl__tls_in_reclaim--;
	sl__walk_leave(&frame);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int sl_group_lookup(sl_group *scope, const char *path, sl_group **out)
{
	sl_group *g = scope;
	const char *p = path;
	bool locked;

	if (!sl__group_valid(scope) || !path || !out)
		return -EINVAL;
	/* The path's form first, so the answer does not depend on the tree. */
	for (p = path; *p; p++)
		if (*p == '/' && (p == path || p[1] == '/' || p[1] == '\0'))
			return -EINVAL;
	p = path;
	locked = !sl__walking(scope->tree);
	if (locked)
		pthread_mutex_lock(&scope->tree->lock);
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);

		g = sl__child_find(g, p, len);
		if (!g)
			break;
		p += len + (slash ? 1 : 0);
	}
	if (locked)
		pthread_mutex_unlock(&scope->tree->lock);
	if (!g)
		return -ENOENT;
	*out = g;
	return 0;
}

int sl_group_path(const sl_group *g, char *buf, size_t size)
{
	const sl_group *p;
	size_t len = 0, pos;

	if (!sl__group_valid(g) || !buf || !size)
		return -EINVAL;
	/* Names and parents never change while a group lives: no lock. */
	for (p = g; p->parent; p = p->parent)
		len += p->name_len + (p->parent->parent ? 1 : 0);
	if (len >= size) {
		buf[0] = '\0';
		/* Truncated: keep the leading components that fit. */
		char *full = sl__malloc(len + 1);

		if (full) {
			sl_group_path(g, full, len + 1);
			memcpy(buf, full, size - 1);
			buf[size - 1] = '\0';
			free(full);
		}
		return -ENOSPC;
	}
	buf[len] = '\0';
	pos = len;
	for (p = g; p->parent; p = p->parent) {
		pos -= p->name_len;
		memcpy(buf + pos, p->name, p->name_len);
		if (p->parent->parent)
			buf[--pos] = '/';
	}
	return 0;
}

/* ---- the dump ---- */

struct out {
	char *buf;
	size_t size, len;
};

static void emit(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->len < o->size ? o->buf + o->len : NULL, o->len < o->size ? o->size - o->len : 0,
		      fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

/* JSON string body: names may hold any byte but '/' and NUL. */
static void emit_json_str(struct out *o, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			emit(o, "\\%c", c);
		else if (c < 0x20)
			emit(o, "\\u%04x", c);
		else
			emit(o, "%c", c);
	}
}

struct dump {
	struct out o;
	int err;
	enum sl_dump_format fmt;
	sl_group *scope;
	bool first;
};

static void emit_limit(struct out *o, const char *key, uint64_t v, bool json)
{
	if (v == SL_UNLIMITED)
		emit(o, json ? ",\"%s\":\"max\"" : " %s=max", key);
	else
		emit(o, json ? ",\"%s\":%" PRIu64 : " %s=%" PRIu64, key, v);
}

static int dump_one(sl_group *g, unsigned depth, void *arg)
{
	struct dump *d = arg;
	struct sl_stats st;
	bool json = d->fmt == SL_DUMP_JSON;
	sl_group *p;

	sl_group_stats(g, &st);
	if (json) {
		emit(&d->o, "%s{\"path\":\"", d->first ? "" : ",");
		char stackbuf[512], *path = stackbuf;
		size_t need = 1;

		for (p = g; p->parent; p = p->parent)
			need += p->name_len + 1;
		if (need > sizeof(stackbuf))
			path = sl__malloc(need);
		if (!path)
			d->err = -ENOMEM;
		else if (sl_group_path(g, path, path == stackbuf ? sizeof(stackbuf) : need) == 0)
			emit_json_str(&d->o, path);
		if (path != stackbuf)
			free(path);
		emit(&d->o, "\",\"name\":\"");
		emit_json_str(&d->o, g->name);
		emit(&d->o,
		     "\",\"depth\":%u,\"usage\":%" PRIu64 ",\"stocked\":%" PRIu64 ",\"peak\":%" PRIu64,
		     depth, st.usage, st.stocked, st.peak);
	} else {
		emit(&d->o, "%*s%s", (int)(2 * depth), "", g->parent ? g->name : "/");
		emit(&d->o, " usage=%" PRIu64 " stocked=%" PRIu64 " peak=%" PRIu64, st.usage, st.stocked,
		     st.peak);
	}
	emit_limit(&d->o, "min", st.limits.min, json);
	emit_limit(&d->o, "soft", st.limits.soft, json);
	emit_limit(&d->o, "high", st.limits.high, json);
	emit_limit(&d->o, "max", st.limits.max, json);
	emit(&d->o,
	     json ? ",\"emin\":%" PRIu64 ",\"esoft\":%" PRIu64 ",\"events\":{\"low\":%" PRIu64
		    ",\"high\":%" PRIu64 ",\"max\":%" PRIu64 ",\"oom\":%" PRIu64 "},\"reclaimed\":%" PRIu64
		    ",\"refaults\":%" PRIu64 "}"
		  : " emin=%" PRIu64 " esoft=%" PRIu64 " low=%" PRIu64 " high_events=%" PRIu64
		    " max_events=%" PRIu64 " oom=%" PRIu64 " reclaimed=%" PRIu64 " refaults=%" PRIu64 "\n",
	     st.emin, st.esoft, st.events_low, st.events_high, st.events_max, st.events_oom, st.reclaimed,
	     st.refaults);
	d->first = false;
	return 0;
}

int sl_group_dump(sl_group *scope, enum sl_dump_format format, char *buf, size_t size, size_t *needed)
{
	struct dump d = { .o = { .buf = buf, .size = size }, .fmt = format, .scope = scope, .first = true };
	int rc;

	if (format == SL_DUMP_OPENMETRICS) /* written family by family: lib/openmetrics.c */
		return sl__dump_openmetrics(scope, buf, size, needed);
	if (!sl__group_valid(scope) || (format != SL_DUMP_TEXT && format != SL_DUMP_JSON) ||
	    (!buf && size))
		return -EINVAL;
	if (format == SL_DUMP_JSON)
		emit(&d.o, "{\"policy\":\"%s\",\"groups\":[", scope->tree->policy->name);
	rc = sl_group_walk(scope, dump_one, &d);
	if (format == SL_DUMP_JSON)
		emit(&d.o, "]}\n");
	if (rc)
		return rc;
	if (d.err)
		return d.err;
	if (needed)
		*needed = d.o.len;
	if (size && d.o.len >= size) {
		buf[size - 1] = '\0';
		return -ENOSPC;
	}
	return 0;
}
