/* SPDX-License-Identifier: MIT */
/*
 * Background reclaim, driven by the host: a thread of the host's own runs
 * sl_background_run(), which keeps every group that has a headroom at or
 * below max - headroom, and sleeps while there is nothing to do, so that
 * foreground charges rarely meet max (kswapd's watermarks, memcached's LRU
 * maintainer, CacheLib's background evictors).  The library starts no
 * thread itself.  A charge that takes a group past its watermark wakes the
 * sleeper through a futex word (counter.c), with no lock on the charge path.
 */
#include "internal.h"

#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long the reclaimer sleeps with nothing to do, or after a round that
 * could free nothing. */
#define SL__BACKGROUND_NAP_NS (100 * 1000 * 1000)

static uint64_t watermark(const sl_group *g)
{
	uint64_t headroom = sl__load(&g->headroom, SL_RELAXED), max = sl__load(&g->max, SL_RELAXED);

	return max > headroom ? max - headroom : 0;
}

/* Caller holds the tree's lock. */
void sl__headroom_forget(sl_tree *t, sl_group *g)
{
	size_t i;

	for (i = 0; i < t->nr_headroom; i++) {
		if (t->headroom_groups[i] == g) {
			t->headroom_groups[i] = t->headroom_groups[--t->nr_headroom];
			return;
		}
	}
}

int sl_group_set_headroom(sl_group *g, uint64_t headroom)
{
	sl_tree *t;
	size_t i;
	int rc = 0;

	if (!sl__group_valid(g))
		return -EINVAL;
	t = g->tree;
	if (sl__walking(t))
		return -EBUSY;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nr_headroom && t->headroom_groups[i] != g; i++)
		;
	if (headroom && i == t->nr_headroom) {
		if (t->nr_headroom == t->cap_headroom) {
			size_t cap = t->cap_headroom ? 2 * t->cap_headroom : 8;
			sl_group **v = cap < SIZE_MAX / sizeof(*v) ? sl__realloc(t->headroom_groups, cap * sizeof(*v))
								   : NULL;

			if (!v) {
				rc = -ENOMEM;
				goto out;
			}
			t->headroom_groups = v;
			t->cap_headroom = cap;
		}
		t->headroom_groups[t->nr_headroom++] = g;
	} else if (!headroom && i < t->nr_headroom) {
		sl__headroom_forget(t, g);
	}
	/* Relaxed: read on its own by charges and the reclaimer. */
	sl__store(&g->headroom, headroom, SL_RELAXED);
out:
	pthread_mutex_unlock(&t->lock);
	if (rc == 0 && headroom && sl__usage_of(g) > watermark(g))
		sl__counter_wake_background(t);
	return rc;
}

/* The groups with a headroom that are over their watermark now, pinned;
 * *n_out of them.  NULL when none or on no memory. */
static sl_group **over_watermarks(sl_tree *t, size_t *n_out)
{
	sl_group **v = NULL;
	size_t i, n = 0;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nr_headroom; i++) {
		sl_group *g = t->headroom_groups[i];

		if (sl__usage_of(g) <= watermark(g))
			continue;
		if (!v && !(v = sl__malloc(t->nr_headroom * sizeof(*v))))
			break;
		sl__pin(g);
		v[n++] = g;
	}
	pthread_mutex_unlock(&t->lock);
	*n_out = n;
	return v;
}

/* One round; *over: how many groups were over their watermark. */
static uint64_t one_round(sl_tree *t, size_t *over)
{
	uint64_t freed = 0;
	sl_group **v;
	size_t i, n;

	v = over_watermarks(t, &n);
	*over = n;
	for (i = 0; i < n; i++) {
		uint64_t wm = watermark(v[i]), usage;

		/* Idle stock units are not usage. */
		sl__stock_drain_subtree(v[i]);
		usage = sl__usage_of(v[i]);
		if (usage > wm)
			/* Ahead of need: pass 1 only, and what the policy
			 * grants v[i] and its ancestors stays theirs. */
			freed += sl__reclaim_ahead(v[i], usage - wm);
		sl__unpin(v[i]);
	}
	free(v);
	return freed;
}

uint64_t sl_background_reclaim(sl_tree *t)
{
	size_t over;

	if (!t || sl__reclaim_forbidden())
		return 0;
	return one_round(t, &over);
}

/* Is any group over its watermark now? */
static bool pressure(sl_tree *t)
{
	bool any = false;
	size_t i;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nr_headroom && !any; i++)
		any = sl__usage_of(t->headroom_groups[i]) > watermark(t->headroom_groups[i]);
	pthread_mutex_unlock(&t->lock);
	return any;
}

static void nap(sl_tree *t, bool need_pressure_check)
{
	struct timespec ts = { 0, SL__BACKGROUND_NAP_NS };
	uint32_t seen;

	/* Acquire: pairs with the wakers' release bump. */
	seen = sl__load(&t->bg_wake, SL_ACQUIRE);
	/* seq_cst: store the flag, then read the counts; a charger CASes its
	 * count, then reads the flag (counter.c). */
	sl__store(&t->bg_sleeping, 1, SL_SEQ_CST);
	if ((need_pressure_check && pressure(t)) || sl__load(&t->bg_stop, SL_SEQ_CST)) {
		sl__store(&t->bg_sleeping, 0, SL_RELAXED);
		return;
	}
	syscall(SYS_futex, (uint32_t *)&t->bg_wake, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
	sl__store(&t->bg_sleeping, 0, SL_RELAXED);
}

int sl_background_run(sl_tree *t)
{
	if (!t)
		return -EINVAL;
	if (sl__reclaim_forbidden())
		return -EBUSY;
	/* Acquire: pairs with sl_background_stop()'s release. */
	while (!sl__load(&t->bg_stop, SL_ACQUIRE)) {
		size_t over;

		if (one_round(t, &over))
			continue;
		/* Nothing freed.  With nothing to do, sleep until a charge
		 * passes a watermark (looking once more after saying so);
		 * with work that cannot be done now, nap in any case. */
		nap(t, over == 0);
	}
	return 0;
}

void sl_background_stop(sl_tree *t)
{
	if (!t)
		return;
	/* Release: pairs with the loop's acquire. */
	sl__store(&t->bg_stop, 1, SL_RELEASE);
	sl__fetch_add(&t->bg_wake, 1, SL_RELEASE);
	syscall(SYS_futex, (uint32_t *)&t->bg_wake, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}
