/* SPDX-License-Identifier: MIT */
/*
 * sl_lease_run() and sl_lease_stop(): the thread the host gives the store.
 * Each lease is stepped once per its period (lease.c does the step); the
 * thread sleeps in between on a condition variable that sl_lease_stop()
 * signals, so a stop never waits for a period to end.
 */
#include "lease_int.h"

#include <errno.h>
#include <time.h>

/* The longest sleep with no lease joined: a join is seen this soon. */
#define IDLE_NS INT64_C(100000000)

static void sleep_until(sl_lease_store *s, int64_t deadline_ns)
{
	struct timespec ts = { (time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000) };

	pthread_mutex_lock(&s->wake_lock);
	/* Acquire: pairs with sl_lease_stop()'s release. */
	while (!atomic_load_explicit(&s->stop, memory_order_acquire) &&
	       sl__lease_now_ns() < deadline_ns)
		pthread_cond_timedwait(&s->wake, &s->wake_lock, &ts);
	pthread_mutex_unlock(&s->wake_lock);
}

int sl_lease_run(sl_lease_store *s)
{
	if (!s)
		return -EINVAL;
	if (atomic_exchange_explicit(&s->running, true, memory_order_acq_rel))
		return -EBUSY;
	/* Acquire: pairs with sl_lease_stop()'s release. */
	while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
		int64_t now = sl__lease_now_ns(), wake = now + IDLE_NS;
		struct sl_lease *l;

		pthread_mutex_lock(&s->lock);
		for (l = s->leases; l; l = sl__lease_next(l)) {
			int64_t *next = sl__lease_next_ns(l);

			if (now >= *next) {
				sl__lease_step(l);
				/* From this period's start: a slow store call
				 * does not push every later period back. */
				*next += sl__lease_period_ns(l);
				if (*next <= now)
					*next = now + sl__lease_period_ns(l);
			}
			if (*next < wake)
				wake = *next;
		}
		pthread_mutex_unlock(&s->lock);
		sleep_until(s, wake);
	}
	atomic_store_explicit(&s->running, false, memory_order_release);
	return 0;
}

void sl_lease_stop(sl_lease_store *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->wake_lock);
	/* Release: pairs with the loop's acquire. */
	atomic_store_explicit(&s->stop, true, memory_order_release);
	pthread_cond_broadcast(&s->wake);
	pthread_mutex_unlock(&s->wake_lock);
}
