/* SPDX-License-Identifier: MIT */
/*
 * lease.c: --lease-store, where slcache meets libsoftlimit-lease.  A tenant
 * whose name is the name of a budget in the store joins it: its group's max
 * becomes its share of the budget, which the lease thread moves toward the
 * processes (or nodes) where the tenant's memory is worth most.  Nothing
 * here runs on a request but lease_tenant_created(), which only notes the
 * join for the watcher, and lease_write_wait(), which only reads the
 * lease's figures: the store (and the library's locks, which are held
 * across store calls) is touched by threads of ours, never by a worker.
 *
 *  - The lease thread runs sl_lease_run(): renewals, shares, fences.
 *  - The demand hook (on that thread) tells the library what the tenant's
 *    memory is worth at the margin: how long the least recently used item
 *    has gone untouched, and what was evicted and refaulted since the last
 *    period, in bytes.
 *  - The watcher, once a period, logs what an operator must hear about
 *    (a lease fenced to its floor, a store found reset, a budget deleted),
 *    and about once a second reads the store's budget names: a tenant that
 *    exists when a budget of its name appears joins it then (it may hold
 *    memory: a plain join; if that does not fit in the room no one holds,
 *    a deferred one, which empties it first).  Woken by
 *    lease_tenant_created(), it also joins the tenants just created.
 *
 * A tenant created on first use joins at once if the watcher has seen a
 * budget of its name: the watcher joins it deferred (it holds nothing
 * until the lease thread has registered it, then its floor until its first
 * grant), and until its share is known its writes wait, their connections
 * parked (lease_write_wait()), so that none is refused because the lease is
 * starting.  One whose budget the watcher has not seen yet joins at the
 * watcher's next read.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lease.h"
#include "slcache.h"
#include "tenants.h"

#ifndef SLCACHE_LEASE

int lease_start(void)
{
	if (!opt.lease_store)
		return 0;
	fprintf(stderr, "slcache: --lease-store: this slcache was built without libsoftlimit-lease\n");
	return -EPROTONOSUPPORT;
}

void lease_stop(void) {}
void lease_tenant_created(struct lru_tenant *t) { (void)t; }
int lease_write_wait(struct lru_tenant *t, int64_t *since_ms)
{
	(void)t;
	(void)since_ms;
	return 0;
}
void lease_tenant(struct lru_tenant *t, struct tenant_lease *out)
{
	(void)t;
	memset(out, 0, sizeof(*out));
}
int lease_metrics(char **buf, size_t *len) { (void)buf; (void)len; return 0; }

#else

#include <softlimit/lease.h>

#define REFRESH_MS 1000 /* the watcher reads the budgets' names this often */

/* One tenant that joined a budget (or tried to: l is NULL until it has). */
struct entry {
	struct lru_tenant *t;
	/* Release-stored once joined; acquire-loaded by the readers (stats,
	 * metrics, the watcher), so the lease they see is whole. */
	_Atomic(sl_lease *) l;
	/* The demand hook's last figures: the lease thread's only. */
	uint64_t last_evicted, last_refaulted;
	int64_t last_ms; /* when the hook last ran (0: never) */
	uint64_t own_max; /* the group's max before it joined (--tenant max=) */
	/* What the watcher last logged about: the watcher's only. */
	uint64_t seen_fences, seen_resets, seen_share;
	enum sl_lease_state seen_state;
	int join_err; /* the last join's error, logged once: the watcher's */
	/* Created on first use with a budget: the watcher is to join it. */
	_Atomic bool join_wanted;
	/* Its writes wait (lease_write_wait()) until its share is known. */
	_Atomic bool starting;
};

static struct {
	sl_lease_store *store;
	pthread_mutex_t lock;            /* entries[] appends and names[]         */
	struct entry *entries;           /* opt.max_tenants of them               */
	_Atomic unsigned n;
	char (*names)[SL_LEASE_NAME_MAX]; /* the budgets last read, sorted        */
	size_t nnames;
	_Atomic unsigned starting;       /* entries whose writes wait             */
	bool list_failing;               /* the last refresh() failed: watcher's  */
	pthread_t runner, watcher;
	bool running;
	pthread_mutex_t wlock;           /* stopping, joins, the watcher's sleeps */
	pthread_cond_t wcond;
	bool stopping;
	bool joins;                      /* entries want joining: wake up         */
} ls = { .lock = PTHREAD_MUTEX_INITIALIZER, .wlock = PTHREAD_MUTEX_INITIALIZER,
	 .wcond = PTHREAD_COND_INITIALIZER };

/* By enum sl_lease_state. */
static const char *const state_names[] = { "joining", "held", "fenced", "stalled", "orphaned" };

/* Logged whatever -v says: an operator must hear about a fence. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("slcache: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* A tenant name that is also a valid budget name ([A-Za-z0-9_.:-]). */
static bool budget_name_ok(const char *name)
{
	size_t i, len = strlen(name);

	if (len == 0 || len >= SL_LEASE_NAME_MAX)
		return false;
	for (i = 0; i < len; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '.' || ch == ':' || ch == '-'))
			return false;
	}
	return true;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Caller holds ls.lock. */
static bool has_budget(const char *name)
{
	return ls.nnames &&
	       bsearch(name, ls.names, ls.nnames, sizeof(*ls.names), name_cmp) != NULL;
}

static struct entry *entry_find(struct lru_tenant *t)
{
	/* Acquire: pairs with entry_add()'s release of the count. */
	unsigned i, n = atomic_load_explicit(&ls.n, memory_order_acquire);

	for (i = 0; i < n; i++)
		if (ls.entries[i].t == t)
			return &ls.entries[i];
	return NULL;
}

/* Caller holds ls.lock. */
static struct entry *entry_add(struct lru_tenant *t)
{
	unsigned n = atomic_load_explicit(&ls.n, memory_order_relaxed);
	struct entry *e;

	if (n >= opt.max_tenants)
		return NULL;
	e = &ls.entries[n];
	memset(e, 0, sizeof(*e));
	e->t = t;
	atomic_store_explicit(&ls.n, n + 1, memory_order_release);
	return e;
}

/* ---- the demand hook: on the lease thread ---- */

static uint64_t pressed(const struct lru_stats *st)
{
	return st->evicted_bytes + st->set_fail_bytes;
}

static int64_t now_ms(void);

/* How long ago a refaulted key was last read, a guess: it sat idle as long
 * as the coldest item does now, then among the ghosts for about half their
 * reach, at the rate this tenant evicts. */
static uint64_t refault_age_ms(uint64_t idle_ms, uint64_t evicted, uint64_t elapsed_ms)
{
	uint64_t ghosted = evicted ? (uint64_t)((double)opt.ghosts / 2 * (double)elapsed_ms /
						(double)evicted) : 0;
	uint64_t age = idle_ms + ghosted;

	return age < idle_ms || age > opt.lease_idle_ms ? opt.lease_idle_ms : age;
}

static void demand(sl_lease *l, struct sl_lease_demand *out, void *ctx)
{
	struct entry *e = ctx;
	struct lru_stats st;
	struct lru_meta oldest;
	struct sl_limits cur;
	uint64_t reused = 0, reuse_ms = 0, elapsed_ms;
	int64_t now = now_ms();
	bool own_cap;

	elapsed_ms = e->last_ms && now > e->last_ms ? (uint64_t)(now - e->last_ms) : opt.lease_period_ms;
	e->last_ms = now;
	/* A tenant whose own max (--tenant NAME:max=) is what holds it back
	 * would gain nothing from a larger share: its evictions are no demand
	 * on the budget. */
	own_cap = e->own_max != SL_UNLIMITED && sl_group_limits(lru_tenant_group(e->t), &cur) == 0 &&
		  cur.max >= e->own_max;
	/* storage.c keeps each item's last read (or store) in atime, in
	 * seconds: idle time to the second is plenty against --lease-idle. */
	if (lru_tenant_oldest(e->t, &oldest) == 0) {
		int64_t secs = (int64_t)time(NULL);

		out->idle_ms = secs > (int64_t)oldest.atime ? (uint64_t)(secs - oldest.atime) * 1000 : 0;
	}
	/* A set refused for want of room is pressure at the share as much as
	 * an eviction: without it, a tenant at a share of 0 (it joined while
	 * others held everything) would evict nothing and never ask. */
	if (lru_tenant_stats(e->t, &st) == 0) {
		out->evicted = own_cap ? 0 : pressed(&st) - e->last_evicted;
		out->refaulted = own_cap ? 0 : st.refault_bytes - e->last_refaulted;
		e->last_evicted = pressed(&st);
		e->last_refaulted = st.refault_bytes;
	}
	/* Reuse: storage.c notes every read's bytes times how long the item
	 * sat idle; a refault (--ghosts) is a read the share was too small
	 * to hit, counted at its guessed age.  Memory no one reads again adds
	 * nothing, however much of it is evicted. */
	if (lru_tenant_take_reuse(e->t, &reused, &reuse_ms) == 0 && !own_cap) {
		uint64_t idle = out->idle_ms == UINT64_MAX ? 0 : out->idle_ms;
		uint64_t age = refault_age_ms(idle, out->evicted, elapsed_ms);
		uint64_t rf = out->refaulted * age;

		if (age && rf / age != out->refaulted)
			rf = UINT64_MAX;
		sl_lease_report_reuse(l, reused + rf < reused ? UINT64_MAX : reused + rf, reuse_ms);
	}
}

/* ---- joining ---- */

static void lease_opts(struct sl_lease_opts *lo, struct entry *e, uint32_t flags)
{
	sl_lease_opts_init(lo);
	lo->flags = flags;
	lo->period_ms = opt.lease_period_ms;
	lo->ttl_ms = opt.lease_ttl_ms;
	lo->idle_ms = opt.lease_idle_ms;
	/* The margin must stay below the ttl: a third of it for short ttls. */
	if (lo->margin_ms > lo->ttl_ms / 3)
		lo->margin_ms = lo->ttl_ms / 3;
	lo->demand = demand;
	lo->demand_ctx = e;
}

/* Joins @e's tenant; the lease is published only once whole. */
static int entry_join(struct entry *e, uint32_t flags)
{
	struct sl_lease_opts lo;
	struct lru_stats st;
	struct sl_limits own;
	sl_lease *l = NULL;
	int rc;

	/* The hook counts from here: what was evicted before the tenant held
	 * a share says nothing about the share. */
	if (lru_tenant_stats(e->t, &st) == 0) {
		e->last_evicted = pressed(&st);
		e->last_refaulted = st.refault_bytes;
	}
	e->own_max = sl_group_limits(lru_tenant_group(e->t), &own) == 0 ? own.max : SL_UNLIMITED;
	lease_opts(&lo, e, flags);
	rc = sl_lease_join(ls.store, lru_tenant_name(e->t), lru_tenant_group(e->t), &lo, &l);
	if (rc == 0)
		atomic_store_explicit(&e->l, l, memory_order_release);
	return rc;
}

void lease_tenant_created(struct lru_tenant *t)
{
	const char *name = lru_tenant_name(t);
	struct entry *e;

	if (!ls.store || !lru_tenant_group(t) || !budget_name_ok(name))
		return;
	pthread_mutex_lock(&ls.lock);
	e = has_budget(name) ? entry_add(t) : NULL;
	pthread_mutex_unlock(&ls.lock);
	if (!e)
		return;
	/* No library call here: even a deferred join takes locks that the
	 * lease thread holds across its store calls (seconds, with etcd
	 * down).  The watcher joins it; its writes wait until then. */
	atomic_store_explicit(&e->starting, true, memory_order_relaxed);
	atomic_fetch_add_explicit(&ls.starting, 1, memory_order_relaxed);
	atomic_store_explicit(&e->join_wanted, true, memory_order_release);
	pthread_mutex_lock(&ls.wlock);
	ls.joins = true;
	pthread_cond_signal(&ls.wcond);
	pthread_mutex_unlock(&ls.wlock);
}

/* The tenants lease_tenant_created() noted: deferred joins, on the watcher.
 * One that fails is retried by refresh() (join_existing()). */
static void join_created(void)
{
	unsigned i, n = atomic_load_explicit(&ls.n, memory_order_acquire);

	for (i = 0; i < n; i++) {
		struct entry *e = &ls.entries[i];
		int rc;

		if (!atomic_exchange_explicit(&e->join_wanted, false, memory_order_acquire) ||
		    atomic_load_explicit(&e->l, memory_order_relaxed))
			continue;
		rc = entry_join(e, SL_LEASE_DEFERRED);
		if (rc != 0 && rc != e->join_err)
			say("tenant %s: cannot join its budget yet: %s (retried every second)",
			    lru_tenant_name(e->t), strerror(-rc));
		e->join_err = rc;
	}
}

/* Its share is known: the lease left JOINING and the store has computed
 * its share once (the first renewal after the registration, which counts
 * one: the registration itself gives only the floor); or it is fenced or
 * orphaned, when the share is what it is. */
static bool share_known(const struct sl_lease_stats *st)
{
	return st->state != SL_LEASE_JOINING && (st->state != SL_LEASE_HELD || st->renewals >= 2);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lease_write_wait(struct lru_tenant *t, int64_t *since_ms)
{
	struct entry *e;
	sl_lease *l;
	struct sl_lease_stats st;
	int64_t now;

	/* The common case, one load: no tenant is starting.  A tenant seen
	 * (its slot's acquire) was counted before it was published. */
	if (!ls.store || !atomic_load_explicit(&ls.starting, memory_order_relaxed))
		return 0;
	e = entry_find(t);
	if (!e || !atomic_load_explicit(&e->starting, memory_order_relaxed))
		return 0;
	l = atomic_load_explicit(&e->l, memory_order_acquire);
	if (l && sl_lease_stats(l, &st) == 0 && share_known(&st)) {
		/* Once: a share known stays known (a fence or a deleted
		 * budget later is no start). */
		if (atomic_exchange_explicit(&e->starting, false, memory_order_relaxed))
			atomic_fetch_sub_explicit(&ls.starting, 1, memory_order_relaxed);
		return 0;
	}
	now = now_ms() + 1; /* never 0: 0 is "not waiting yet" */
	if (*since_ms == 0)
		*since_ms = now;
	return now - *since_ms >= (int64_t)opt.lease_wait_ms ? -ETIMEDOUT : -EAGAIN;
}

/* An existing tenant whose name has a budget, not yet leased: joins it
 * with its memory (or, if that does not fit, deferred: emptied first).
 * The watcher's (and lease_start()'s) only, so no two threads join the
 * same entry; ls.lock is not held across the store calls. */
static void join_existing(struct lru_tenant *t, void *arg)
{
	const char *name = lru_tenant_name(t);
	struct entry *e;
	int rc;

	(void)arg;
	if (!lru_tenant_group(t) || !budget_name_ok(name))
		return;
	pthread_mutex_lock(&ls.lock);
	e = entry_find(t);
	if (e && atomic_load_explicit(&e->l, memory_order_acquire)) {
		pthread_mutex_unlock(&ls.lock);
		return;
	}
	if (!has_budget(name) || (!e && (e = entry_add(t)) == NULL)) {
		pthread_mutex_unlock(&ls.lock);
		return;
	}
	pthread_mutex_unlock(&ls.lock);
	rc = entry_join(e, 0);
	if (rc == -EBUSY) {
		say("tenant %s: holds more than its budget has free: emptied to join it", name);
		rc = entry_join(e, SL_LEASE_DEFERRED);
	}
	if (rc == 0)
		say("tenant %s: joined budget %s in %s", name, name, opt.lease_store);
	else if (rc != -ENOENT && rc != e->join_err)
		say("tenant %s: cannot join its budget: %s (retried every second)", name,
		    strerror(-rc));
	e->join_err = rc;
}

/* Reads the budgets' names; joins the tenants that have one. */
static void refresh(void)
{
	char(*names)[SL_LEASE_NAME_MAX] = NULL;
	size_t cap = 64, count = 0;
	int rc;

	for (;;) {
		char(*nn)[SL_LEASE_NAME_MAX] = realloc(names, cap * sizeof(*nn));

		if (!nn) {
			free(names);
			return;
		}
		names = nn;
		rc = sl_lease_budget_list(ls.store, names, cap, &count);
		if (rc != 0 || count <= cap)
			break;
		cap = count + 16;
	}
	/* Said once each way: tenants created meanwhile are not leased (their
	 * budgets are unknown) until the store answers again. */
	if (rc != 0) {
		if (!ls.list_failing)
			say("lease store %s: cannot list the budgets: %s (tenants join once it answers)",
			    opt.lease_store, strerror(-rc));
		ls.list_failing = true;
		free(names);
		return;
	}
	if (ls.list_failing)
		say("lease store %s: answering again", opt.lease_store);
	ls.list_failing = false;
	pthread_mutex_lock(&ls.lock);
	free(ls.names);
	ls.names = names;
	ls.nnames = count;
	pthread_mutex_unlock(&ls.lock);
	tenants_each(join_existing, NULL);
}

/* ---- the threads ---- */

/* What an operator must hear about, once each. */
static void report(struct entry *e)
{
	sl_lease *l = atomic_load_explicit(&e->l, memory_order_acquire);
	const char *name = lru_tenant_name(e->t);
	struct sl_lease_stats st;

	if (!l || sl_lease_stats(l, &st) != 0)
		return;
	/* The maintainer keeps --headroom percent of a max free ahead of the
	 * sets (tenants.c); a lease moves the max, so the headroom follows. */
	if (opt.headroom_pct && st.share != e->seen_share) {
		sl_group_set_headroom(lru_tenant_group(e->t),
				      st.share == SL_UNLIMITED ? 0 : st.share / 100 * opt.headroom_pct);
		e->seen_share = st.share;
	}
	/* A store found reset fences too: one line says both. */
	if (st.store_resets > e->seen_resets)
		say("tenant %s: the lease store %s was reset (wiped or recreated): "
		    "share down to its floor, %" PRIu64 " bytes, rejoining", name, opt.lease_store,
		    st.floor);
	else if (st.fences > e->seen_fences)
		say("tenant %s: lease fenced: share down to its floor, %" PRIu64
		    " bytes (the store was not reached within the lease; %" PRIu64 " store errors)",
		    name, st.floor, st.store_errors);
	if (st.state != e->seen_state && st.state == SL_LEASE_ORPHANED)
		say("tenant %s: budget deleted: keeping the last share, %" PRIu64 " bytes, frozen",
		    name, st.share);
	if (st.state != e->seen_state && e->seen_state == SL_LEASE_ORPHANED)
		say("tenant %s: budget back: rejoining it", name);
	e->seen_fences = st.fences;
	e->seen_resets = st.store_resets;
	e->seen_state = st.state;
}

/* Adds @ms to the CLOCK_REALTIME time *@ts (the condition's clock). */
static void ts_add_ms(struct timespec *ts, unsigned ms)
{
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	ts->tv_sec += ms / 1000 + ts->tv_nsec / 1000000000;
	ts->tv_nsec %= 1000000000;
}

static void *watcher_main(void *arg)
{
	unsigned tick = 0, every = (REFRESH_MS + opt.lease_period_ms - 1) / opt.lease_period_ms;
	struct timespec until;

	(void)arg;
	clock_gettime(CLOCK_REALTIME, &until);
	ts_add_ms(&until, opt.lease_period_ms);
	pthread_mutex_lock(&ls.wlock);
	while (!ls.stopping) {
		unsigned i, n;
		bool joins;
		int err = 0;

		/* Until the period ends, or new tenants want joining. */
		while (!ls.stopping && !ls.joins && err != ETIMEDOUT)
			err = pthread_cond_timedwait(&ls.wcond, &ls.wlock, &until);
		if (ls.stopping)
			break;
		joins = ls.joins;
		ls.joins = false;
		pthread_mutex_unlock(&ls.wlock);
		if (joins)
			join_created();
		if (err == ETIMEDOUT) {
			n = atomic_load_explicit(&ls.n, memory_order_acquire);
			for (i = 0; i < n; i++)
				report(&ls.entries[i]);
			if (++tick % every == 0)
				refresh();
			clock_gettime(CLOCK_REALTIME, &until);
			ts_add_ms(&until, opt.lease_period_ms);
		}
		pthread_mutex_lock(&ls.wlock);
	}
	pthread_mutex_unlock(&ls.wlock);
	return NULL;
}

static void *runner_main(void *arg)
{
	int rc = sl_lease_run(arg);

	if (rc != 0)
		say("lease thread: %s", strerror(-rc));
	return NULL;
}

/* Both threads are born with every signal blocked: signals are the main
 * thread's (net.c's signalfd). */
static int start_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(th, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

int lease_start(void)
{
	struct sl_lease_store_opts so;
	int rc;

	if (!opt.lease_store)
		return 0;
	ls.entries = calloc(opt.max_tenants, sizeof(*ls.entries));
	if (!ls.entries)
		return -ENOMEM;
	sl_lease_store_opts_init(&so);
	rc = sl_lease_store_open(opt.lease_store, &so, &ls.store);
	if (rc != 0) {
		fprintf(stderr, "slcache: --lease-store %s: %s\n", opt.lease_store,
			rc == -EINVAL ? "not a store URL (shm:NAME or etcd://HOST:PORT[,...]/PREFIX)"
			: rc == -EPROTONOSUPPORT ? "unknown scheme, or etcd:// not built in"
						 : strerror(-rc));
		free(ls.entries);
		ls.entries = NULL;
		return rc;
	}
	/* The tenants there now (--tenant, "default") join before the server
	 * listens; an unreachable store is retried by the watcher. */
	refresh();
	ls.stopping = false;
	ls.joins = false;
	rc = start_thread(&ls.runner, runner_main, ls.store);
	if (rc == 0) {
		rc = start_thread(&ls.watcher, watcher_main, NULL);
		if (rc != 0) {
			sl_lease_stop(ls.store);
			pthread_join(ls.runner, NULL);
		}
	}
	if (rc != 0) {
		fprintf(stderr, "slcache: cannot start the lease threads: %s\n", strerror(-rc));
		sl_lease_store_close(ls.store);
		ls.store = NULL;
		return rc;
	}
	ls.running = true;
	logv("lease store %s: period %u ms, ttl %u ms", opt.lease_store, opt.lease_period_ms,
	     opt.lease_ttl_ms);
	return 0;
}

void lease_stop(void)
{
	if (!ls.store)
		return;
	if (ls.running) {
		pthread_mutex_lock(&ls.wlock);
		ls.stopping = true;
		pthread_cond_signal(&ls.wcond);
		pthread_mutex_unlock(&ls.wlock);
		pthread_join(ls.watcher, NULL);
		sl_lease_stop(ls.store);
		pthread_join(ls.runner, NULL);
		ls.running = false;
	}
	/* Every lease leaves: the shares go back to the budget at once. */
	sl_lease_store_close(ls.store);
	ls.store = NULL;
	free(ls.entries);
	free(ls.names);
	ls.entries = NULL;
	ls.names = NULL;
	ls.nnames = 0;
	atomic_store_explicit(&ls.n, 0, memory_order_relaxed);
	atomic_store_explicit(&ls.starting, 0, memory_order_relaxed);
}

/* ---- stats and metrics ---- */

void lease_tenant(struct lru_tenant *t, struct tenant_lease *out)
{
	struct entry *e = ls.store ? entry_find(t) : NULL;
	sl_lease *l = e ? atomic_load_explicit(&e->l, memory_order_acquire) : NULL;
	struct sl_lease_stats st;

	memset(out, 0, sizeof(*out));
	if (!l || sl_lease_stats(l, &st) != 0)
		return;
	out->on = true;
	out->share = st.share;
	out->floor = st.floor;
	out->demand = st.demand;
	out->expires_ms = st.expires_ms;
	out->fences = st.fences;
	out->state = (unsigned)st.state < sizeof(state_names) / sizeof(state_names[0])
			     ? state_names[st.state] : "unknown";
}

/* The families, in the order of the exposition: name, type, unit, help. */
static const struct {
	const char *name;
	bool counter, bytes;
	const char *help;
} fam[] = {
	{ "slcache_lease_share_bytes", false, true, "The tenant's share of its budget: its group's max." },
	{ "slcache_lease_floor_bytes", false, true, "What the share falls to when the store cannot be reached." },
	{ "slcache_lease_demand_bytes", false, true, "What the tenant last asked of its budget." },
	{ "slcache_lease_usage_bytes", false, true, "The usage the tenant last reported to the store." },
	{ "slcache_lease_expires_seconds", false, false, "Until the tenant's own view of its lease ends (negative: ended)." },
	{ "slcache_lease_state", false, false, "0 joining, 1 held, 2 fenced, 3 stalled, 4 orphaned (budget deleted)." },
	{ "slcache_lease_renewals", true, false, "Successful renewals of the lease." },
	{ "slcache_lease_grants", true, false, "Times the share grew." },
	{ "slcache_lease_shrinks", true, false, "Times the share shrank." },
	{ "slcache_lease_store_errors", true, false, "Store calls that failed." },
	{ "slcache_lease_fences", true, false, "Times the share fell to the floor (lease not renewed in time)." },
	{ "slcache_lease_store_resets", true, false, "Times the store was found wiped or recreated." },
};

static void metric_value(FILE *f, size_t k, const struct sl_lease_stats *st)
{
	const uint64_t v[] = { st->share, st->floor, st->demand, st->usage, 0, (uint64_t)st->state,
			       st->renewals, st->grants, st->shrinks, st->store_errors, st->fences,
			       st->store_resets };

	if (k == 4)
		fprintf(f, "%.3f\n", (double)st->expires_ms / 1000.0);
	else
		fprintf(f, "%" PRIu64 "\n", v[k]);
}

int lease_metrics(char **buf, size_t *len)
{
	static const char eof[] = "# EOF\n";
	size_t k, i, n, base = *len, olen = 0;
	char *out = NULL;
	FILE *f;

	if (!ls.store)
		return 0;
	/* The exposition ends in "# EOF": the families go before it. */
	if (base >= sizeof(eof) - 1 && memcmp(*buf + base - (sizeof(eof) - 1), eof, sizeof(eof) - 1) == 0)
		base -= sizeof(eof) - 1;
	f = open_memstream(&out, &olen);
	if (!f)
		return -ENOMEM;
	fwrite(*buf, 1, base, f);
	n = atomic_load_explicit(&ls.n, memory_order_acquire);
	for (k = 0; k < sizeof(fam) / sizeof(fam[0]); k++) {
		fprintf(f, "# TYPE %s %s\n", fam[k].name, fam[k].counter ? "counter" : "gauge");
		if (fam[k].bytes)
			fprintf(f, "# UNIT %s bytes\n", fam[k].name);
		else if (k == 4)
			fprintf(f, "# UNIT %s seconds\n", fam[k].name);
		fprintf(f, "# HELP %s %s\n", fam[k].name, fam[k].help);
		for (i = 0; i < n; i++) {
			sl_lease *l = atomic_load_explicit(&ls.entries[i].l, memory_order_acquire);
			struct sl_lease_stats st;

			if (!l || sl_lease_stats(l, &st) != 0)
				continue;
			/* Budget names are [A-Za-z0-9_.:-]: nothing to escape. */
			fprintf(f, "%s%s{budget=\"%s\"} ", fam[k].name, fam[k].counter ? "_total" : "",
				lru_tenant_name(ls.entries[i].t));
			metric_value(f, k, &st);
		}
	}
	fputs(eof, f);
	if (fclose(f) != 0 || !out) {
		free(out);
		return -ENOMEM;
	}
	free(*buf);
	*buf = out;
	*len = olen;
	return 0;
}

#endif /* SLCACHE_LEASE */
