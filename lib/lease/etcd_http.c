/* SPDX-License-Identifier: MIT */
/*
 * etcd's v3 JSON gateway over libcurl: one POST per call, failover between
 * the listed endpoints, every call bounded by the store's timeout
 * (etcd_http.h).  No signal is used for timeouts (CURLOPT_NOSIGNAL): the
 * host's threads and signal handlers are its own.
 */
#define _GNU_SOURCE /* memrchr */
#include "etcd_http.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

/* A member that is merely slow should get a fair part of the timeout; one
 * that hangs must leave time for the others: each attempt gets the time
 * left divided among the endpoints not yet tried, but at least this. */
#define ETCD_ATTEMPT_MIN_MS 300
/* Between two rounds over every endpoint (all without a leader: an
 * election takes about a second), so a call does not spin. */
#define ETCD_ROUND_PAUSE_MS 50

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

/* curl_global_init() is not thread-safe in every libcurl: once per process. */
static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int64_t sl__etcd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static bool host_char_ok(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '.' || ch == '-' || ch == ':' || ch == '[' || ch == ']' || ch == '_';
}

int sl__etcd_conn_init(struct sl__etcd_conn *c, const char *hosts, size_t hosts_len,
		       uint32_t timeout_ms)
{
	size_t i = 0;

	memset(c, 0, sizeof(*c));
	c->timeout_ms = timeout_ms;
	if (hosts_len == 0)
		return -EINVAL;
	while (i <= hosts_len) {
		size_t j = i;
		const char *colon;

		while (j < hosts_len && hosts[j] != ',')
			j++;
		if (j == i || c->n_endpoints == SL__ETCD_ENDPOINTS_MAX || j - i > 255)
			goto bad;
		/* HOST:PORT with a port: the gateway has no default one. */
		colon = memrchr(hosts + i, ':', j - i);
		if (!colon || colon == hosts + i || colon + 1 == hosts + j)
			goto bad;
		for (size_t k = i; k < j; k++) {
			if (!host_char_ok(hosts[k]))
				goto bad;
		}
		for (const char *p = colon + 1; p < hosts + j; p++) {
			if (*p < '0' || *p > '9')
				goto bad;
		}
		c->endpoints[c->n_endpoints] = malloc(j - i + sizeof("http://"));
		if (!c->endpoints[c->n_endpoints]) {
			sl__etcd_conn_fini(c);
			return -ENOMEM;
		}
		memcpy(c->endpoints[c->n_endpoints], "http://", 7);
		memcpy(c->endpoints[c->n_endpoints] + 7, hosts + i, j - i);
		c->endpoints[c->n_endpoints][7 + j - i] = '\0';
		c->n_endpoints++;
		i = j + 1;
	}
	return 0;
bad:
	sl__etcd_conn_fini(c);
	return -EINVAL;
}

void sl__etcd_conn_fini(struct sl__etcd_conn *c)
{
	for (size_t i = 0; i < c->n_endpoints; i++)
		free(c->endpoints[i]);
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
	struct sl__etcd_conn *c = ud;
	size_t n = size * nmemb;

	if (n > SL__ETCD_BODY_MAX - c->len)
		return 0; /* makes curl fail with CURLE_WRITE_ERROR */
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 4096;
		char *p;

		while (cap < c->len + n + 1)
			cap *= 2;
		p = realloc(c->buf, cap);
		if (!p)
			return 0;
		c->buf = p;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, data, n);
	c->len += n;
	c->buf[c->len] = '\0';
	return n;
}

void *sl__etcd_curl_new(void)
{
	CURL *h;

	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK)
		return NULL;
	h = curl_easy_init();
	if (!h)
		return NULL;
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	/* Only loopback or LAN peers: no proxy from the environment. */
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	return h;
}

static int get_handle(struct sl__etcd_conn *c)
{
	if (c->curl)
		return 0;
	c->curl = sl__etcd_curl_new();
	if (!c->curl)
		return -ENOMEM;
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
	return 0;
}

/* etcd's errors by gRPC code; *retry when another member may do better. */
static int map_grpc(int64_t code, bool *retry)
{
	*retry = false;
	switch (code) {
	case 3: /* INVALID_ARGUMENT */
		return -EINVAL;
	case 4:  /* DEADLINE_EXCEEDED: a proposal that timed out */
	case 14: /* UNAVAILABLE: no leader, leader changed, not capable */
		*retry = true;
		return -ETIMEDOUT;
	case 5: /* NOT_FOUND: a lease */
		return -ENOENT;
	case 8: /* RESOURCE_EXHAUSTED: the database is over its quota */
		return -ENOSPC;
	default:
		return -EIO;
	}
}

int sl__etcd_answer_error(const json_t *doc, bool *retry)
{
	json_t *err = json_object_get(doc, "error");
	int64_t code = 2; /* UNKNOWN */

	if (!err)
		return 0;
	if (json_is_object(err))
		sl__etcd_get_int(json_object_get(err, "grpc_code"), 2, &code);
	else
		sl__etcd_get_int(json_object_get(doc, "code"), 2, &code);
	return map_grpc(code, retry);
}

static int parse_answer(struct sl__etcd_conn *c, long status, json_t **resp,
			struct sl__etcd_hdr *hdr, bool *retry)
{
	json_t *doc, *res, *h;
	int rc;

	*retry = true; /* a garbled answer: perhaps a member going down */
	doc = json_loadb(c->buf ? c->buf : "", c->len, 0, NULL);
	if (!doc || !json_is_object(doc)) {
		json_decref(doc);
		return -EIO;
	}
	rc = sl__etcd_answer_error(doc, retry);
	if (rc == 0 && (res = json_object_get(doc, "result")) != NULL) {
		/* A streamed call (keepalive) answers {"result": {...}}. */
		json_incref(res);
		json_decref(doc);
		doc = res;
		rc = sl__etcd_answer_error(doc, retry);
	}
	if (rc == 0 && status != 200) {
		*retry = status >= 500;
		rc = -EIO;
	}
	if (rc != 0 || !json_is_object(doc)) {
		json_decref(doc);
		return rc ? rc : -EIO;
	}
	if (hdr) {
		int64_t v;

		h = json_object_get(doc, "header");
		if (!h || sl__etcd_get_int(json_object_get(h, "cluster_id"), 0, &v) != 0) {
			json_decref(doc);
			return -EIO;
		}
		hdr->cluster_id = (uint64_t)v;
		if (sl__etcd_get_int(json_object_get(h, "revision"), 0, &hdr->revision) != 0) {
			json_decref(doc);
			return -EIO;
		}
	}
	*resp = doc;
	return 0;
}

static int curl_rc(CURLcode cc)
{
	switch (cc) {
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		return -ECONNREFUSED;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

int sl__etcd_call(struct sl__etcd_conn *c, const char *path, json_t *req, json_t **resp,
		  struct sl__etcd_hdr *hdr)
{
	int64_t deadline = sl__etcd_now_ms() + c->timeout_ms;
	char url[320];
	char *body;
	int rc, last = -ECONNREFUSED;
	bool timed_out = false, first_timed_out = false;
	size_t first = c->current;

	*resp = NULL;
	rc = get_handle(c);
	if (rc)
		return rc;
	body = json_dumps(req, JSON_COMPACT);
	if (!body)
		return -ENOMEM;
	for (size_t attempt = 0;; attempt++) {
		size_t idx = (c->current + attempt) % c->n_endpoints;
		int64_t left = deadline - sl__etcd_now_ms();
		int64_t per = left;
		size_t untried = attempt < c->n_endpoints ? c->n_endpoints - attempt : 1;
		long status = 0;
		bool retry;
		CURLcode cc;

		if (attempt > 0 && attempt % c->n_endpoints == 0 && left > 0) {
			sleep_ms(left < ETCD_ROUND_PAUSE_MS ? left : ETCD_ROUND_PAUSE_MS);
			left = deadline - sl__etcd_now_ms();
			per = left;
		}
		if (left <= 0) {
			rc = timed_out ? -ETIMEDOUT : last;
			break;
		}
		if (c->patient && untried > 1 &&
		    left > ETCD_ATTEMPT_MIN_MS * (int64_t)untried)
			per = left - ETCD_ATTEMPT_MIN_MS * (int64_t)(untried - 1);
		else if (untried > 1 && left / (int64_t)untried > ETCD_ATTEMPT_MIN_MS)
			per = left / (int64_t)untried;
		else if (untried > 1 && left > ETCD_ATTEMPT_MIN_MS)
			per = ETCD_ATTEMPT_MIN_MS;
		snprintf(url, sizeof(url), "%s%s", c->endpoints[idx], path);
		c->len = 0;
		curl_easy_setopt(c->curl, CURLOPT_URL, url);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)per);
		curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)per);
		cc = curl_easy_perform(c->curl);
		if (cc != CURLE_OK) {
			int err = curl_rc(cc);

			/* An attempt that the call's own deadline cut short (begun
			 * with little time left) says nothing about the members
			 * when an earlier attempt already did: on a loaded machine
			 * a refused member's last try may not even connect. */
			if (err == -ETIMEDOUT && attempt > 0 && per == left && per < ETCD_ATTEMPT_MIN_MS)
				continue;
			last = err;
			if (last == -ETIMEDOUT)
				timed_out = true;
			if (last == -ETIMEDOUT && attempt == 0)
				first_timed_out = true;
			if (last == -ENOMEM) {
				rc = last;
				break;
			}
			continue;
		}
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
		rc = parse_answer(c, status, resp, hdr, &retry);
		if (rc == 0 || !retry) {
			c->current = idx;
			break;
		}
		last = rc;
		if (rc == -ETIMEDOUT)
			timed_out = true;
	}
	/* A patient call that got no answer from the member it waited on
	 * starts at the next one the next time: a stopped member accepts
	 * connections and never answers, and would take most of every call. */
	if (rc && c->patient && first_timed_out && c->n_endpoints > 1)
		c->current = (first + 1) % c->n_endpoints;
	free(body);
	return rc;
}

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

json_t *sl__etcd_b64(const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t out_len = (len + 2) / 3 * 4;
	char *out = malloc(out_len + 1);
	size_t o = 0;
	json_t *v;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t w = (uint32_t)p[i] << 16;

		if (i + 1 < len)
			w |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < len)
			w |= p[i + 2];
		out[o++] = b64_alphabet[(w >> 18) & 63];
		out[o++] = b64_alphabet[(w >> 12) & 63];
		out[o++] = i + 1 < len ? b64_alphabet[(w >> 6) & 63] : '=';
		out[o++] = i + 2 < len ? b64_alphabet[w & 63] : '=';
	}
	out[o] = '\0';
	v = json_stringn(out, o);
	free(out);
	return v;
}

json_t *sl__etcd_b64s(const char *s)
{
	return sl__etcd_b64(s, strlen(s));
}

static int b64_value(char ch)
{
	const char *p = ch ? strchr(b64_alphabet, ch) : NULL;

	return p ? (int)(p - b64_alphabet) : -1;
}

char *sl__etcd_unb64(const json_t *v, size_t *len)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v), o = 0;
	char *out;

	if (!s || n % 4 != 0)
		return NULL;
	out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 4) {
		int a = b64_value(s[i]), b = b64_value(s[i + 1]);
		int c = s[i + 2] == '=' ? 0 : b64_value(s[i + 2]);
		int d = s[i + 3] == '=' ? 0 : b64_value(s[i + 3]);
		bool pad2 = s[i + 2] == '=', pad3 = s[i + 3] == '=';
		uint32_t w;

		/* Padding only at the very end, and "x=y" is not base64. */
		if (a < 0 || b < 0 || c < 0 || d < 0 || ((pad2 || pad3) && i + 4 != n) ||
		    (pad2 && !pad3)) {
			free(out);
			return NULL;
		}
		w = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
		out[o++] = (char)(w >> 16);
		if (!pad2)
			out[o++] = (char)(w >> 8);
		if (!pad3)
			out[o++] = (char)w;
	}
	out[o] = '\0';
	*len = o;
	return out;
}

json_t *sl__etcd_int(int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%lld", (long long)v);
	return json_string(s);
}

int sl__etcd_get_int(const json_t *v, int64_t def, int64_t *out)
{
	const char *s;
	char *end;
	long long x;

	if (!v) {
		*out = def;
		return 0;
	}
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	s = json_string_value(v);
	if (!s || !*s)
		return -EIO;
	errno = 0;
	/* Unsigned fields (cluster and member ids) use all 64 bits. */
	if (*s == '-') {
		x = strtoll(s, &end, 10);
	} else {
		unsigned long long u = strtoull(s, &end, 10);

		x = (long long)u;
	}
	if (errno || *end)
		return -EIO;
	*out = x;
	return 0;
}
