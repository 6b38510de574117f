/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the suites that run against a real etcd started by
 * tests/etcd_cluster.py (test_etcd_store.c, test_etcd_watch.c): its
 * endpoints, and a member that accepts and never answers.
 */
#ifndef SL_TESTS_ETCD_HELPERS_H
#define SL_TESTS_ETCD_HELPERS_H

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

/* SL_ETCD_ENDPOINTS=host:port,... of the cluster etcd_cluster.py runs. */
static inline const char *endpoints(void)
{
	const char *e = getenv("SL_ETCD_ENDPOINTS");

	ck_assert_msg(e && *e, "run under tests/etcd_cluster.py (SL_ETCD_ENDPOINTS)");
	return e;
}

/* A socket that accepts connections and never answers: a hung member. */
static inline int hung_listener(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 16), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

#endif /* SL_TESTS_ETCD_HELPERS_H */
