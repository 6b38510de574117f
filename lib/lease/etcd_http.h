/* SPDX-License-Identifier: MIT */
/*
 * The etcd client layer of the etcd:// store: one call of etcd's v3 API
 * through its JSON gateway (POST /v3/...), failing over between the
 * cluster's listed endpoints, bounded by the store's timeout.  And the
 * small JSON helpers the store builds its requests with (etcd's keys and
 * values are base64 in JSON, its 64-bit integers decimal strings).
 *
 * JSON is jansson's: a Debian package (libjansson-dev), small, with a
 * stable API since 2.0 and an MIT licence, like this library's; it parses
 * and builds the few objects the gateway speaks without a code generator.
 *
 * Not thread-safe: one connection is used by one thread at a time (the
 * store serializes its operations).
 */
#ifndef SL_LEASE_ETCD_HTTP_H
#define SL_LEASE_ETCD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define SL__ETCD_ENDPOINTS_MAX 16
/* The largest answer taken, of a call or of one watch response: a view of
 * 1000 participants is a few hundred KB; anything far larger is not an
 * answer this library asked for. */
#define SL__ETCD_BODY_MAX (64u << 20)

struct sl__etcd_conn {
	char *endpoints[SL__ETCD_ENDPOINTS_MAX]; /* "http://HOST:PORT", malloc'd */
	size_t n_endpoints;
	size_t current;      /* the endpoint that answered last: tried first */
	uint32_t timeout_ms; /* the bound of one sl__etcd_call(), all retries included */
	/* Writes that cost etcd an entry even when abandoned: the first
	 * member tried gets all of the time but ETCD_ATTEMPT_MIN_MS for each
	 * other, not an even share (a queue of a second behind a join storm
	 * is not a dead member, and a write sent again to the next is a
	 * second entry for etcd to apply).  A call whose first member did
	 * not answer in that time starts at the next member the next time
	 * (a stopped member accepts connections and never answers). */
	bool patient;
	void *curl;          /* a CURL easy handle, reused so connections stay open */
	char *buf;           /* the response body being received */
	size_t len, cap;
};

/* What every answer's "header" says. */
struct sl__etcd_hdr {
	uint64_t cluster_id;
	int64_t revision;
};

/*
 * Parse "HOST:PORT[,HOST:PORT...]" (the URL's authority) into @c.
 * -EINVAL for an empty, malformed or too long list; -ENOMEM.
 */
int sl__etcd_conn_init(struct sl__etcd_conn *c, const char *hosts, size_t hosts_len,
		       uint32_t timeout_ms);
void sl__etcd_conn_fini(struct sl__etcd_conn *c);

/*
 * POST @req (not consumed) to @path ("/v3/kv/range", ...) and parse the
 * answer into *@resp (the caller's, json_decref), its header into @hdr
 * (may be NULL).  A streamed answer ({"result": {...}}) is unwrapped.
 * Tries the endpoints in turn, starting with the last one that answered,
 * on a connection failure, a timeout or an etcd "unavailable" error (no
 * leader, leader changed, a timed out proposal), until one answers or the
 * timeout has passed.  A request may then have been applied by a member
 * that did not answer: callers make their writes safe to repeat or to
 * fail after the fact.
 * Errors: -ETIMEDOUT (no answer in time), -ECONNREFUSED (every endpoint
 * refused), -EIO (a malformed answer), -ENOMEM, and etcd's own errors by
 * their gRPC code: -ENOENT (not found), -EINVAL (invalid argument),
 * -ENOSPC (resource exhausted: quota), -EIO for the rest.
 */
int sl__etcd_call(struct sl__etcd_conn *c, const char *path, json_t *req, json_t **resp,
		  struct sl__etcd_hdr *hdr);

/*
 * A new CURL easy handle set up as every request of this library's is: no
 * signals (CURLOPT_NOSIGNAL: the host's threads and handlers are its own),
 * plain http, no redirects, no proxy from the environment.  libcurl's
 * global init is done once per process first.  NULL on ENOMEM.
 */
void *sl__etcd_curl_new(void);

/*
 * The error in an answer of etcd: {"error":"...","code":N} or, streamed,
 * {"error":{"grpc_code":N}}; 0 when @doc is none.  The errno of the gRPC
 * code as sl__etcd_call() returns it; *@retry when another member may
 * answer better (no leader, a proposal timed out).
 */
int sl__etcd_answer_error(const json_t *doc, bool *retry);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t sl__etcd_now_ms(void);

/* Base64 of @len bytes of @data as a new JSON string; NULL on ENOMEM. */
json_t *sl__etcd_b64(const void *data, size_t len);
/* The same for a C string. */
json_t *sl__etcd_b64s(const char *s);
/*
 * Decode the base64 JSON string @v into a new NUL-terminated buffer
 * (malloc'd, *@len without the NUL).  NULL when @v is not a valid base64
 * string, or on ENOMEM.
 */
char *sl__etcd_unb64(const json_t *v, size_t *len);

/* A 64-bit integer as etcd's gateway writes it (a decimal string). */
json_t *sl__etcd_int(int64_t v);
/* Read one (string or number); @def if @v is NULL (the gateway omits zeros). */
int sl__etcd_get_int(const json_t *v, int64_t def, int64_t *out);

#endif /* SL_LEASE_ETCD_HTTP_H */
