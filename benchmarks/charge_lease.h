/* SPDX-License-Identifier: MIT */
/*
 * bench_charge --lease-down: the charging group holds a lease whose store is
 * down, to show that a charge never waits for a store.
 *
 * A real etcd is started on loopback (the `etcd` of Debian's etcd-server,
 * found in PATH), a budget is set, the charged group joins it and a thread
 * runs sl_lease_run(); once the lease is held, the store goes down:
 *   refuse  etcd is killed: every request is refused at connect;
 *   hang    etcd is stopped (SIGSTOP): connections are accepted by the
 *           kernel and never answered, so each request waits out the
 *           store's timeout.
 * The benchmark then waits until the lease thread has seen a store error,
 * and the measured runs begin while that thread keeps failing (and, past
 * its own view of the lease, falls to the floor: the budget's min is set so
 * high that the floor never limits the benchmark's charges).
 */
#ifndef BENCH_CHARGE_LEASE_H
#define BENCH_CHARGE_LEASE_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <softlimit/lease.h>

#include "bench_common.h"

enum lease_mode { LEASE_NONE, LEASE_REFUSE, LEASE_HANG, LEASE_MODES };

static const char *const lease_mode_names[LEASE_MODES] = { "none", "refuse", "hang" };

struct lease_down {
	pid_t etcd;
	char dir[64];
	sl_lease_store *store;
	sl_lease *lease;
	pthread_t runner;
	bool running;
};

/* A TCP port on loopback that nothing listens on right now. */
static int lease_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Is an etcd binary in PATH? */
static bool lease_have_etcd(void)
{
	return system("command -v etcd >/dev/null 2>&1") == 0;
}

static void *lease_runner(void *arg)
{
	sl_lease_run(arg);
	return NULL;
}

static void lease_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void lease_down_start(struct lease_down *ld, enum lease_mode mode, sl_group *g, uint64_t budget)
{
	char url[128], client[64], peer[64], cluster[96], logpath[96];
	struct sl_lease_store_opts so;
	struct sl_lease_opts lo;
	struct sl_lease_stats st;
	struct sl_limits lim;
	int cport = lease_free_port(), pport = lease_free_port(), rc = -1;

	memset(ld, 0, sizeof(*ld));
	if (cport < 0 || pport < 0 || cport == pport)
		bench_fatal("lease: no free loopback ports");
	snprintf(ld->dir, sizeof(ld->dir), "/tmp/bench-charge-etcd-%ld", (long)getpid());
	snprintf(client, sizeof(client), "http://127.0.0.1:%d", cport);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", pport);
	snprintf(cluster, sizeof(cluster), "b=%s", peer);
	snprintf(logpath, sizeof(logpath), "%s.log", ld->dir);
	ld->etcd = fork();
	if (ld->etcd < 0)
		bench_fatal("lease: fork: %s", strerror(errno));
	if (ld->etcd == 0) {
		FILE *log = freopen(logpath, "w", stdout);

		if (log)
			dup2(fileno(log), 2);
		execlp("etcd", "etcd", "--name", "b", "--data-dir", ld->dir, "--listen-client-urls", client,
		       "--advertise-client-urls", client, "--listen-peer-urls", peer,
		       "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster,
		       "--initial-cluster-state", "new", (char *)NULL);
		_exit(127);
	}

	snprintf(url, sizeof(url), "etcd://127.0.0.1:%d/bench-charge", cport);
	sl_lease_store_opts_init(&so);
	so.timeout_ms = 250;
	if (sl_lease_store_open(url, &so, &ld->store) != 0)
		bench_fatal("lease: sl_lease_store_open(%s) failed", url);
	sl_limits_init(&lim);
	lim.high = SL_UNLIMITED;
	lim.max = budget;
	lim.min = budget; /* the floor is the whole budget: a fence never limits the run */
	for (int i = 0; i < 600 && (rc = sl_lease_budget_set(ld->store, "charge", &lim)) != 0; i++)
		lease_sleep_ms(100);
	if (rc != 0)
		bench_fatal("lease: etcd at %s never answered (log: %s): %d", url, logpath, rc);
	sl_lease_opts_init(&lo);
	lo.period_ms = 100;
	lo.ttl_ms = 2000;
	lo.margin_ms = 500;
	if ((rc = sl_lease_join(ld->store, "charge", g, &lo, &ld->lease)) != 0)
		bench_fatal("lease: sl_lease_join = %d", rc);
	if (pthread_create(&ld->runner, NULL, lease_runner, ld->store) != 0)
		bench_fatal("lease: pthread_create failed");
	ld->running = true;
	for (int i = 0; i < 600; i++) {
		sl_lease_stats(ld->lease, &st);
		if (st.state == SL_LEASE_HELD && st.renewals > 1)
			break;
		lease_sleep_ms(100);
	}
	if (st.state != SL_LEASE_HELD)
		bench_fatal("lease: the lease was never held (state %d)", (int)st.state);

	/* The store goes down. */
	if (kill(ld->etcd, mode == LEASE_HANG ? SIGSTOP : SIGKILL) != 0)
		bench_fatal("lease: kill(etcd): %s", strerror(errno));
	if (mode == LEASE_REFUSE) {
		waitpid(ld->etcd, NULL, 0);
		ld->etcd = 0;
	}
	uint64_t errors = st.store_errors;
	for (int i = 0; i < 1200; i++) {
		sl_lease_stats(ld->lease, &st);
		if (st.store_errors > errors)
			break;
		lease_sleep_ms(100);
	}
	if (st.store_errors <= errors)
		bench_fatal("lease: the lease thread never saw the store down");
}

static void lease_down_stop(struct lease_down *ld)
{
	char cmd[2 * sizeof(ld->dir) + 32]; /* "rm -rf" and the directory twice */

	if (ld->running) {
		sl_lease_stop(ld->store);
		pthread_join(ld->runner, NULL);
	}
	if (ld->lease)
		sl_lease_leave(ld->lease); /* the store is down: an error, and the lease ends */
	if (ld->store)
		sl_lease_store_close(ld->store);
	if (ld->etcd > 0) {
		kill(ld->etcd, SIGKILL);
		kill(ld->etcd, SIGCONT);
		waitpid(ld->etcd, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s.log'", ld->dir, ld->dir);
	if (system(cmd) != 0)
		bench_warn("lease: could not remove %s", ld->dir);
	memset(ld, 0, sizeof(*ld));
}

#endif /* BENCH_CHARGE_LEASE_H */
