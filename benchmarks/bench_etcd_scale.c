/* SPDX-License-Identifier: MIT */
/*
 * bench_etcd_scale URL N [SECONDS] - N participants of one budget, each with
 * its own etcd:// store handle (its own connection, its own sl_lease_run()
 * thread, as N nodes would), in one process against a real etcd
 * (benchmarks/bench_fleet.sh --scale starts a 3-member cluster on loopback).
 *
 * Measures, never gates, one JSON line:
 *   convergence_s         from the joins until every participant holds a
 *                         lease and at least 90% of an equal share (the
 *                         groups are idle: room nobody asks for is spread
 *                         equally), registrations contending on the budget's
 *                         version included;
 *   store_requests_per_s  requests etcd handled (the sum over the members of
 *                         grpc_server_handled_total, read from /metrics)
 *                         per second over SECONDS of steady state, and per
 *                         participant and period;
 *   store_errors          the participants' store errors in that time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include <softlimit/lease.h>
#include <softlimit/softlimit.h>

#define PERIOD_MS 200
#define TTL_MS 3000
#define UNITS_EACH 1000

struct node {
	sl_lease_store *s;
	sl_lease *l;
	sl_group *g;
	pthread_t t;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
	sl_lease_run(arg);
	return NULL;
}

struct body {
	char *p;
	size_t n;
};

static size_t on_body(char *d, size_t sz, size_t nm, void *ud)
{
	struct body *b = ud;
	char *p = realloc(b->p, b->n + sz * nm + 1);

	if (!p)
		return 0;
	memcpy(p + b->n, d, sz * nm);
	b->p = p;
	b->n += sz * nm;
	b->p[b->n] = '\0';
	return sz * nm;
}

/* The requests etcd has handled, summed over the members in @hosts. */
static double etcd_requests(const char *hosts)
{
	char *list = strdup(hosts), *save = NULL, *h;
	double total = 0;

	for (h = strtok_r(list, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
		CURL *c = curl_easy_init();
		struct body b = { NULL, 0 };
		char url[256];

		snprintf(url, sizeof(url), "http://%s/metrics", h);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		if (curl_easy_perform(c) == CURLE_OK && b.p) {
			for (char *line = strtok(b.p, "\n"); line; line = strtok(NULL, "\n")) {
				const char *sp;

				if (strncmp(line, "grpc_server_handled_total{", 26) != 0)
					continue;
				sp = strrchr(line, ' ');
				if (sp)
					total += strtod(sp + 1, NULL);
			}
		}
		free(b.p);
		curl_easy_cleanup(c);
	}
	free(list);
	return total;
}

int main(int argc, char **argv)
{
	const char *url = argc > 2 ? argv[1] : NULL;
	int n = argc > 2 ? atoi(argv[2]) : 0;
	double measure = argc > 3 ? atof(argv[3]) : 10.0;
	char hosts[1024];
	struct sl_tree_opts to;
	struct sl_lease_store_opts so;
	struct sl_lease_opts lo;
	struct sl_limits lim;
	struct node *nodes;
	sl_tree *t = NULL;
	double t0, conv = -1, r0, r1, m0;
	uint64_t err0 = 0, err1 = 0, ren0 = 0, ren1 = 0;
	const char *slash;
	int rc;

	if (!url || n <= 0 || strncmp(url, "etcd://", 7) != 0) {
		fprintf(stderr, "usage: bench_etcd_scale etcd://HOST:PORT[,...]/PREFIX N [SECONDS]\n");
		return 2;
	}
	slash = strchr(url + 7, '/');
	snprintf(hosts, sizeof(hosts), "%.*s", (int)(slash ? slash - (url + 7) : 1000), url + 7);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	nodes = calloc((size_t)n, sizeof(*nodes));
	sl_tree_opts_init(&to);
	if (!nodes || sl_tree_create(&to, &t))
		return 1;
	sl_lease_store_opts_init(&so);
	sl_lease_opts_init(&lo);
	lo.period_ms = PERIOD_MS;
	lo.ttl_ms = TTL_MS;
	lo.flags = SL_LEASE_DEFERRED;
	sl_limits_init(&lim);
	lim.max = (uint64_t)n * UNITS_EACH;
	lim.min = lim.max / 10;
	for (int i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "p%d", i);
		so.node = name;
		rc = sl_lease_store_open(url, &so, &nodes[i].s);
		if (!rc && i == 0)
			rc = sl_lease_budget_set(nodes[0].s, "scale", &lim);
		if (!rc)
			rc = sl_group_create(sl_tree_root(t), name, NULL, NULL, NULL, &nodes[i].g);
		if (rc) {
			fprintf(stderr, "bench_etcd_scale: participant %d: %s\n", i, strerror(-rc));
			return 1;
		}
	}
	t0 = now_s();
	for (int i = 0; i < n; i++) {
		rc = sl_lease_join(nodes[i].s, "scale", nodes[i].g, &lo, &nodes[i].l);
		if (rc || pthread_create(&nodes[i].t, NULL, run, nodes[i].s)) {
			fprintf(stderr, "bench_etcd_scale: join %d: %s\n", i, strerror(-rc));
			return 1;
		}
	}
	/* Converged: every one held, at 90% of an equal share or more. */
	while (now_s() - t0 < 600) {
		int ok = 0;

		for (int i = 0; i < n; i++) {
			struct sl_lease_stats st;

			if (sl_lease_stats(nodes[i].l, &st) == 0 && st.state == SL_LEASE_HELD &&
			    st.share * 10 >= (uint64_t)UNITS_EACH * 9)
				ok++;
		}
		if (ok == n) {
			conv = now_s() - t0;
			break;
		}
		usleep(20000);
	}
	r0 = etcd_requests(hosts);
	m0 = now_s();
	for (int i = 0; i < n; i++) {
		struct sl_lease_stats st;

		sl_lease_stats(nodes[i].l, &st);
		err0 += st.store_errors;
		ren0 += st.renewals;
	}
	usleep((useconds_t)(measure * 1e6));
	r1 = etcd_requests(hosts);
	m0 = now_s() - m0;
	for (int i = 0; i < n; i++) {
		struct sl_lease_stats st;

		sl_lease_stats(nodes[i].l, &st);
		err1 += st.store_errors;
		ren1 += st.renewals;
	}
	printf("{\"bench\":\"etcd_scale\",\"participants\":%d,\"period_ms\":%d,\"ttl_ms\":%d,"
	       "\"convergence_s\":%.2f,\"store_requests_per_s\":%.0f,"
	       "\"requests_per_participant_period\":%.2f,\"renewals_per_s\":%.0f,"
	       "\"store_errors\":%" PRIu64 "}\n",
	       n, PERIOD_MS, TTL_MS, conv, (r1 - r0) / m0,
	       (r1 - r0) / m0 / n / (1000.0 / PERIOD_MS), (double)(ren1 - ren0) / m0,
	       err1 - err0);
	fflush(stdout);
	for (int i = 0; i < n; i++)
		sl_lease_stop(nodes[i].s);
	for (int i = 0; i < n; i++) {
		pthread_join(nodes[i].t, NULL);
		sl_lease_leave(nodes[i].l);
		sl_lease_store_close(nodes[i].s);
	}
	sl_tree_destroy(t);
	free(nodes);
	return conv < 0 ? 1 : 0;
}
