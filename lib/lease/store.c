/* SPDX-License-Identifier: MIT */
/*
 * Stores by URL: the scheme picks a struct sl__lease_store_ops (store.h),
 * and every call on a store goes through here, one at a time (store.h's
 * rule), so that a store file guards only what other processes share.
 * The budget calls check their arguments here, once for every store.
 */
#include "lease_int.h"
#ifdef SL_HAVE_ETCD
#include "store_etcd_coord.h"
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct sl__lease_store_ops *const stores[] = {
	&sl__lease_store_shm,
#ifdef SL_HAVE_ETCD
	&sl__lease_store_etcd,
#endif
};

int64_t sl__lease_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool sl__lease_name_ok(const char *name)
{
	size_t i;

	if (!name || !name[0])
		return false;
	for (i = 0; name[i]; i++) {
		char c = name[i];

		if (i >= SL_LEASE_NAME_MAX - 1)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == ':' || c == '-'))
			return false;
	}
	return true;
}

void sl__lease_view_free(struct sl__lease_view *v)
{
	if (!v)
		return;
	free(v->recs);
	v->recs = NULL;
	v->n = 0;
}

void sl_lease_store_opts_init(struct sl_lease_store_opts *opts)
{
	if (!opts)
		return;
	memset(opts, 0, sizeof(*opts));
	opts->size = sizeof(*opts);
	opts->timeout_ms = 1000;
	opts->slots = 256;
	opts->node = NULL;
}

/* A node name goes into participant ids "node:pid:start:n": no ':' in it,
 * and short enough that the id fits SL_LEASE_ID_MAX whole. */
static bool node_ok(const char *node)
{
	size_t i;

	for (i = 0; node[i]; i++) {
		char c = node[i];

		if (i >= SL__LEASE_NODE_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return i > 0;
}

/* The largest number of shm slots a store may be created with. */
#define SL__LEASE_SLOTS_MAX 65536u
/* A store call may wait this long at most (one hour). */
#define SL__LEASE_TIMEOUT_MAX 3600000u

static int opts_ok(const struct sl_lease_store_opts *o)
{
	if (o->size != sizeof(*o) || o->reserved != 0)
		return -EINVAL;
	if (o->timeout_ms == 0 || o->timeout_ms > SL__LEASE_TIMEOUT_MAX)
		return -EINVAL;
	if (o->slots == 0 || o->slots > SL__LEASE_SLOTS_MAX)
		return -EINVAL;
	if (o->node && !node_ok(o->node))
		return -EINVAL;
	return 0;
}

/*
 * The one URL-to-store lookup, for open and remove alike: @url's scheme
 * picks the ops, @opts (NULL: the defaults) are checked into *@o, and *@rest
 * is the URL after "scheme:".  -EINVAL for a NULL or malformed URL or bad
 * opts, -EPROTONOSUPPORT for a well-formed scheme this build lacks.
 */
static int lookup(const char *url, const struct sl_lease_store_opts *opts,
		  struct sl_lease_store_opts *o, const struct sl__lease_store_ops **ops,
		  const char **rest)
{
	const char *colon;
	size_t i, len;
	int rc;

	if (!url)
		return -EINVAL;
	if (opts)
		*o = *opts;
	else
		sl_lease_store_opts_init(o);
	rc = opts_ok(o);
	if (rc)
		return rc;
	colon = strchr(url, ':');
	if (!colon || colon == url)
		return -EINVAL;
	len = (size_t)(colon - url);
	*rest = colon + 1;
	for (i = 0; i < sizeof(stores) / sizeof(stores[0]); i++) {
		if (strlen(stores[i]->scheme) == len && !memcmp(stores[i]->scheme, url, len)) {
			*ops = stores[i];
			return 0;
		}
	}
	/* A well-formed scheme this build lacks (etcd without libcurl and
	 * jansson, or one of a later release) is not a bad URL. */
	for (i = 0; i < len; i++)
		if (!((url[i] >= 'a' && url[i] <= 'z') || (url[i] >= '0' && url[i] <= '9') ||
		      url[i] == '+' || url[i] == '-' || url[i] == '.'))
			return -EINVAL;
	return -EPROTONOSUPPORT;
}

/* The handle's own parts, its store closed. */
static void store_free(sl_lease_store *s)
{
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->wake_lock);
	pthread_mutex_destroy(&s->stat_lock);
	pthread_mutex_destroy(&s->pending_lock);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->op_lock);
	free(s);
}

int sl_lease_store_open(const char *url, const struct sl_lease_store_opts *opts,
			sl_lease_store **out)
{
	struct sl_lease_store_opts o;
	const struct sl__lease_store_ops *ops;
	const char *rest;
	pthread_condattr_t ca;
	sl_lease_store *s;
	int rc;

	if (!out)
		return -EINVAL;
	rc = lookup(url, opts, &o, &ops, &rest);
	if (rc)
		return rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ops = ops;
	s->opts = o;
	s->opts.node = NULL; /* the caller's string is not kept: the store copies it */
	rc = ops->open(rest, &o, &s->state);
	if (rc) {
		free(s);
		return rc;
	}
	pthread_mutex_init(&s->op_lock, NULL);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->pending_lock, NULL);
	pthread_mutex_init(&s->stat_lock, NULL);
	pthread_mutex_init(&s->wake_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&s->stop, false);
	atomic_init(&s->running, false);
	atomic_init(&s->kick, false);
	s->owner = getpid();
#ifdef SL_HAVE_ETCD
	if (ops == &sl__lease_store_etcd && sl__etcd_coordinated(s->state)) {
		rc = sl__coord_open(s);
		if (rc) {
			ops->close(s->state);
			store_free(s);
			return rc;
		}
	}
#endif
	*out = s;
	return 0;
}

/* No open store: a store's state outlives its processes, and an open
 * would create what is to be removed. */
int sl_lease_store_remove(const char *url, const struct sl_lease_store_opts *opts)
{
	struct sl_lease_store_opts o;
	const struct sl__lease_store_ops *ops;
	const char *rest;
	int rc;

	rc = lookup(url, opts, &o, &ops, &rest);
	if (rc)
		return rc;
	return ops->remove_store(rest, &o);
}

void sl_lease_store_close(sl_lease_store *s)
{
	if (!s)
		return;
	if (!sl__lease_inherited(s)) {
		/* A run thread still in sl_lease_run() would read the store
		 * after it is freed: stop it and wait for it to return. */
		sl_lease_stop(s);
		while (atomic_load_explicit(&s->running, memory_order_acquire))
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	sl__lease_leave_all(s);
#ifdef SL_HAVE_ETCD
	sl__coord_close(s);
#endif
	s->ops->close(s->state);
	if (sl__lease_inherited(s)) {
		/* A fork()ed child's copy: its locks may be held by threads
		 * that exist only in the parent. */
		free(s);
		return;
	}
	store_free(s);
}

/* ---- one store call at a time ---- */

int sl__store_read(sl_lease_store *s, const char *budget, struct sl__lease_view *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&s->op_lock);
	rc = s->ops->read(s->state, budget, out);
	pthread_mutex_unlock(&s->op_lock);
	if (rc)
		free(out->recs), out->recs = NULL, out->n = 0;
	return rc;
}

int sl__store_write(sl_lease_store *s, const char *budget, const struct sl__lease_rec *rec,
		    uint32_t ttl_ms, bool grows, uint64_t version, uint64_t incarnation)
{
	int rc;

	pthread_mutex_lock(&s->op_lock);
	rc = s->ops->write(s->state, budget, rec, ttl_ms, grows, version, incarnation);
	pthread_mutex_unlock(&s->op_lock);
	return rc;
}

int sl__store_remove(sl_lease_store *s, const char *budget, const char *id)
{
	int rc;

	pthread_mutex_lock(&s->op_lock);
	rc = s->ops->remove(s->state, budget, id);
	pthread_mutex_unlock(&s->op_lock);
	return rc;
}

/* Not under op_lock: a store makes ids without I/O, and a deferred join
 * must not wait for a store call in flight (store.h). */
int sl__store_make_id(sl_lease_store *s, char id[SL_LEASE_ID_MAX])
{
	return s->ops->make_id(s->state, id);
}

/* ---- budgets ---- */

static int limits_ok(const struct sl_limits *lim)
{
	if (lim->max == 0 || lim->max == SL_UNLIMITED || lim->high != SL_UNLIMITED)
		return -EINVAL;
	if (lim->soft > lim->max || lim->min > lim->max)
		return -EINVAL;
	return 0;
}

int sl_lease_budget_set(sl_lease_store *s, const char *name, const struct sl_limits *lim)
{
	int rc;

	if (!s || !lim || !sl__lease_name_ok(name))
		return -EINVAL;
	if (sl__lease_inherited(s))
		return -ECHILD;
	rc = limits_ok(lim);
	if (rc)
		return rc;
	pthread_mutex_lock(&s->op_lock);
	rc = s->ops->budget_set(s->state, name, lim);
	pthread_mutex_unlock(&s->op_lock);
	return rc;
}

int sl_lease_budget_get(sl_lease_store *s, const char *name, struct sl_limits *out)
{
	int rc;

	if (!s || !out || !sl__lease_name_ok(name))
		return -EINVAL;
	if (sl__lease_inherited(s))
		return -ECHILD;
	pthread_mutex_lock(&s->op_lock);
	rc = s->ops->budget_get(s->state, name, out);
	pthread_mutex_unlock(&s->op_lock);
	return rc;
}

int sl_lease_budget_delete(sl_lease_store *s, const char *name)
{
	int rc;

	if (!s || !sl__lease_name_ok(name))
		return -EINVAL;
	if (sl__lease_inherited(s))
		return -ECHILD;
	pthread_mutex_lock(&s->op_lock);
	rc = s->ops->budget_delete(s->state, name);
	pthread_mutex_unlock(&s->op_lock);
	return rc;
}

int sl_lease_budget_list(sl_lease_store *s, char (*names)[SL_LEASE_NAME_MAX], size_t cap,
			 size_t *count)
{
	int rc;

	if (!s || !count || (!names && cap > 0))
		return -EINVAL;
	if (sl__lease_inherited(s))
		return -ECHILD;
	pthread_mutex_lock(&s->op_lock);
	rc = s->ops->budget_list(s->state, names, cap, count);
	pthread_mutex_unlock(&s->op_lock);
	return rc;
}

int sl_lease_budget_participants(sl_lease_store *s, const char *name,
				 struct sl_lease_participant *out, size_t cap, size_t *count)
{
	struct sl__lease_view v;
	size_t i;
	int rc;

	if (!s || !count || (!out && cap > 0) || !sl__lease_name_ok(name))
		return -EINVAL;
	if (sl__lease_inherited(s))
		return -ECHILD;
	rc = sl__store_read(s, name, &v);
	if (rc)
		return rc;
	for (i = 0; i < v.n && i < cap; i++) {
		const struct sl__lease_rec *r = &v.recs[i];
		struct sl_lease_participant *p = &out[i];

		memset(p, 0, sizeof(*p));
		memcpy(p->id, r->id, sizeof(p->id));
		p->id[sizeof(p->id) - 1] = '\0';
		p->share = sl__lease_rec_counted(r);
		p->floor = r->floor;
		p->usage = r->usage;
		p->demand = r->demand;
		p->expires_ms = r->expires_ms;
		p->state = r->state;
	}
	*count = v.n;
	sl__lease_view_free(&v);
	return 0;
}
