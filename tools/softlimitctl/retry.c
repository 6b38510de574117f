/* SPDX-License-Identifier: MIT */
/*
 * retry.c: an etcd cluster that is electing a leader, or whose members are
 * restarting, answers with errors for a few seconds; an operator's command
 * should wait that out rather than fail, but never for ever.  Store calls
 * are retried on those errors, with a growing pause, until --timeout.
 * Other errors (no such budget, bad limits) are final at once, and so is
 * everything from a shm: store, which has no such transient state (its
 * lock's timeout means a stopped process holds it: retrying would not help
 * within a command's patience).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool transient(int err)
{
	return err == -ETIMEDOUT || err == -ECONNREFUSED || err == -EIO || err == -EAGAIN ||
	       err == -EHOSTUNREACH || err == -ECONNRESET;
}

/* Starts the deadline; fills c->opts. */
static void ctl_begin(struct ctl *c)
{
	int64_t left_ms;

	c->deadline_ns = now_ns() + (int64_t)c->timeout_s * 1000000000;
	c->retry = strncmp(c->url, "etcd://", 7) == 0;
	sl_lease_store_opts_init(&c->opts);
	/* One operation may use the whole deadline, but no more: a command
	 * with --timeout 1 answers within about a second. */
	left_ms = (int64_t)c->timeout_s * 1000;
	if (left_ms < 100)
		left_ms = 100;
	if ((int64_t)c->opts.timeout_ms > left_ms)
		c->opts.timeout_ms = (uint32_t)left_ms;
}

int ctl_open(struct ctl *c)
{
	ctl_begin(c);
	return sl_lease_store_open(c->url, &c->opts, &c->store);
}

static int do_remove(struct ctl *c, void *arg)
{
	(void)arg;
	return sl_lease_store_remove(c->url, &c->opts);
}

int ctl_remove(struct ctl *c)
{
	ctl_begin(c);
	return ctl_call(c, do_remove, NULL);
}

int ctl_call(struct ctl *c, ctl_fn fn, void *arg)
{
	int64_t pause_ns = 100 * 1000000;
	int rc;

	for (;;) {
		int64_t left;
		struct timespec ts;

		rc = fn(c, arg);
		if (rc == 0 || !c->retry || !transient(rc))
			return rc;
		left = c->deadline_ns - now_ns();
		if (left <= 0)
			return rc;
		if (pause_ns > left)
			pause_ns = left;
		ts.tv_sec = pause_ns / 1000000000;
		ts.tv_nsec = pause_ns % 1000000000;
		nanosleep(&ts, NULL);
		if (pause_ns < 1000000000)
			pause_ns *= 2;
	}
}

const char *ctl_strerror(int err)
{
	switch (err) {
	case -ENOENT: return "no such budget";
	case -ETIMEDOUT: return "the store did not answer in time";
	case -ECONNREFUSED: return "the store cannot be reached";
	case -EIO: return "the store gave a bad answer or cannot be reached";
	case -EAGAIN: return "the budget changed concurrently; try again";
	case -EPROTONOSUPPORT: return "unknown store scheme (shm:NAME or etcd://HOST:PORT/PREFIX), or etcd:// not built in";
	case -EACCES: return "permission denied on the store";
	case -ENOSPC: return "the store is full";
	case -EDOM: return "the store refused these limits";
	default: return strerror(-err);
	}
}
