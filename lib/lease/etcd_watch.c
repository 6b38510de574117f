/* SPDX-License-Identifier: MIT */
/*
 * A watch on a range of etcd keys over the JSON gateway's streamed
 * POST /v3/watch (etcd_watch.h), one thread per watch.  What the gateway
 * of etcd 3.4 sends, one JSON object after another (each followed by a
 * newline, which this code does not rely on):
 *
 *   {"result":{"header":{...,"revision":"5"},"created":true}}
 *   {"result":{"header":{...},"events":[{"kv":{"key":"YS94",
 *     "create_revision":"6","mod_revision":"6","version":"1","value":"djE=",
 *     "lease":"4111..."}},{"type":"DELETE","kv":{"key":"YS94",
 *     "mod_revision":"7"}}]}}                     a put has no "type"
 *   {"result":{"header":{...,"revision":"7"}}}    a progress notify
 *   {"result":{"header":{... no revision},"canceled":true,
 *     "compact_revision":"4"}}                    the start was compacted
 *   {"error":"...","message":"...","code":2}      a request it cannot parse
 *
 * The header of a created answer is the store's revision when the watch
 * was made, not the watch's start; zeros are omitted (a watch_id of 0, a
 * put's "type").  A compacted start does not end the stream: it is
 * canceled, and stays open and silent.  All events of one revision (a txn)
 * come in one answer.
 */
#define _POSIX_C_SOURCE 200809L
#include "etcd_watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "etcd_http.h"

/*
 * A stream that is silent this long is taken as broken, and the watch
 * resumes elsewhere.  etcd sends a progress notify to a quiet watch every
 * --experimental-watch-progress-notify-interval, 10 minutes by default, so
 * three intervals: a bound that a healthy member never reaches.  It is only
 * the last resort, for a member process that hangs with its sockets open.
 * A dead or unreachable host is found much sooner by TCP keepalive (below):
 * its probes get no answer about a minute after the stream goes quiet.  A
 * shorter silence bound would cost a quiet range a new watch every few
 * minutes, each replaying the history since its last event (the cluster's
 * whole write history of that time, which the member must scan); the
 * gateway gives no way to ask a member "are you there" on the stream.
 */
#define WATCH_SILENCE_MS (3 * 10 * 60 * 1000)
#define WATCH_KEEPIDLE_S 10L
#define WATCH_KEEPINTVL_S 5L
/* Between two rounds of attempts that all failed: a cluster that is down
 * costs a few connection attempts a second, never a busy loop. */
#define WATCH_ROUND_PAUSE_MS 500
/* A stream that lived this long counts as a success: the next attempt
 * follows at once and starts a new round (a member killed under a watch). */
#define WATCH_LIVED_MS 2000

struct sl__etcd_watch {
	struct sl__etcd_conn conn; /* the parsed endpoints only */
	struct sl__etcd_watch_cbs cbs;
	json_t *key, *range_end;   /* base64 JSON strings; range_end may be NULL */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	atomic_bool stop;
	_Atomic int64_t delivered; /* sl__etcd_watch_revision() */
	int64_t next;              /* the revision to resume from, 0: from now */
	bool reset;                /* reset called: deliver nothing more */
	/* The stream of the current attempt. */
	CURL *curl;
	char *buf;
	size_t len, cap;
	size_t scan;               /* how far buf was scanned for the object's end */
	int depth;                 /* { and [ open at scan */
	bool in_str, esc;
	bool created;              /* the watch answered "created" */
	int broken;                /* 0, or why the stream was given up */
	int64_t attempt_start, last_byte;
};

/* What breaks one stream (w->broken). */
enum { BROKE_NONE, BROKE_RETRY, BROKE_RESET };

static void *watch_main(void *arg);

int sl__etcd_watch_start(struct sl__etcd_watch **out, const char *hosts, size_t hosts_len,
			 uint32_t timeout_ms, const char *key, const char *range_end,
			 int64_t start_revision, const struct sl__etcd_watch_cbs *cbs)
{
	struct sl__etcd_watch *w;
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	if (!hosts || !key || !*key || !cbs || !cbs->events || start_revision < 0 || timeout_ms == 0)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	rc = sl__etcd_conn_init(&w->conn, hosts, hosts_len, timeout_ms);
	if (rc) {
		free(w);
		return rc;
	}
	w->cbs = *cbs;
	w->next = start_revision;
	w->key = sl__etcd_b64s(key);
	w->range_end = range_end ? sl__etcd_b64s(range_end) : NULL;
	w->curl = sl__etcd_curl_new();
	rc = -ENOMEM;
	if (!w->key || (range_end && !w->range_end) || !w->curl)
		goto fail;
	pthread_mutex_init(&w->lock, NULL);
	/* The pause between rounds is on the monotonic clock. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&w->thread, NULL, watch_main, w);
	if (rc) {
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->lock);
		rc = -EAGAIN;
		goto fail;
	}
	*out = w;
	return 0;
fail:
	if (w->curl)
		curl_easy_cleanup(w->curl);
	json_decref(w->key);
	json_decref(w->range_end);
	sl__etcd_conn_fini(&w->conn);
	free(w);
	return rc;
}

int64_t sl__etcd_watch_revision(const struct sl__etcd_watch *w)
{
	return atomic_load(&((struct sl__etcd_watch *)w)->delivered);
}

void sl__etcd_watch_stop(struct sl__etcd_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->stop, true);
	pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	curl_easy_cleanup(w->curl);
	json_decref(w->key);
	json_decref(w->range_end);
	sl__etcd_conn_fini(&w->conn);
	free(w->buf);
	free(w);
}

/* Sleep @ms or until stopped; false when stopped. */
static bool pause_ms(struct sl__etcd_watch *w, int64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&w->lock);
	while (!atomic_load(&w->stop) && pthread_cond_timedwait(&w->wake, &w->lock, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&w->lock);
	return !atomic_load(&w->stop);
}

static void free_events(struct sl__etcd_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free((char *)ev[i].key);
		free((char *)ev[i].value);
	}
	free(ev);
}

/* One event of the answer into @e (its key and value malloc'd); -EIO when
 * it is not one. */
static int decode_event(const json_t *je, struct sl__etcd_event *e)
{
	const json_t *kv = json_object_get(je, "kv"), *type = json_object_get(je, "type");
	const json_t *val;

	if (!json_is_object(kv))
		return -EIO;
	if (type && json_is_string(type) && strcmp(json_string_value(type), "DELETE") == 0)
		e->deleted = 1;
	else if (type && !(json_is_string(type) && strcmp(json_string_value(type), "PUT") == 0))
		return -EIO;
	if (sl__etcd_get_int(json_object_get(kv, "mod_revision"), 0, &e->mod_revision) ||
	    sl__etcd_get_int(json_object_get(kv, "create_revision"), 0, &e->create_revision) ||
	    sl__etcd_get_int(json_object_get(kv, "lease"), 0, &e->lease) || e->mod_revision <= 0)
		return -EIO;
	e->key = sl__etcd_unb64(json_object_get(kv, "key"), &e->key_len);
	/* A delete carries no value, and neither does a put of "". */
	val = json_object_get(kv, "value");
	if (val)
		e->value = sl__etcd_unb64(val, &e->value_len);
	else
		e->value = strdup("");
	if (!e->key || !e->value || e->key_len == 0)
		return -EIO;
	return 0;
}

/* Deliver the events of one answer; BROKE_RESET when they are not events. */
static int deliver_events(struct sl__etcd_watch *w, const json_t *events, int64_t revision)
{
	size_t n = json_array_size(events);
	struct sl__etcd_event *ev = calloc(n, sizeof(*ev));
	int64_t last;

	if (!ev)
		return BROKE_RETRY; /* ENOMEM: try again from the same revision */
	for (size_t i = 0; i < n; i++) {
		if (decode_event(json_array_get(events, i), &ev[i]) != 0 ||
		    (i > 0 && ev[i].mod_revision < ev[i - 1].mod_revision)) {
			free_events(ev, n);
			return BROKE_RESET;
		}
	}
	last = ev[n - 1].mod_revision;
	/* Before the call: whoever saw its effects reads this revision. */
	w->next = last + 1;
	atomic_store(&w->delivered, last);
	w->cbs.events(w->cbs.ctx, ev, n, revision > last ? revision : last);
	free_events(ev, n);
	return BROKE_NONE;
}

/* One complete JSON object of the stream. */
static int on_answer(struct sl__etcd_watch *w, const char *text, size_t len)
{
	json_t *doc = json_loadb(text, len, 0, NULL), *res, *h, *events;
	int64_t rev = 0, compact = 0;
	bool retry;
	int rc = BROKE_NONE;

	if (!doc)
		return BROKE_RETRY; /* garbled: perhaps a member going down */
	if (sl__etcd_answer_error(doc, &retry) != 0) {
		rc = retry ? BROKE_RETRY : BROKE_RESET;
		goto out;
	}
	res = json_object_get(doc, "result");
	h = json_object_get(res, "header");
	if (!json_is_object(res) || !json_is_object(h) ||
	    sl__etcd_get_int(json_object_get(h, "revision"), 0, &rev) ||
	    sl__etcd_get_int(json_object_get(res, "compact_revision"), 0, &compact)) {
		rc = BROKE_RESET;
		goto out;
	}
	if (json_is_true(json_object_get(res, "canceled"))) {
		if (w->cbs.reset)
			w->cbs.reset(w->cbs.ctx, compact > 0 ? -ESTALE : -EIO);
		w->reset = true;
		rc = BROKE_RESET;
		goto out;
	}
	if (json_is_true(json_object_get(res, "created"))) {
		/* A watch from now starts after the header's revision: resume
		 * from there, or a break before the first event loses events. */
		w->created = true;
		if (w->next == 0)
			w->next = rev + 1;
	}
	events = json_object_get(res, "events");
	if (json_array_size(events) > 0) {
		rc = deliver_events(w, events, rev);
	} else if (events && !json_is_array(events)) {
		rc = BROKE_RESET;
	} else if (!json_is_true(json_object_get(res, "created")) && w->created &&
		   rev >= w->next && w->next > 0) {
		/* A progress notify: every event up to rev has been sent. */
		w->next = rev + 1;
		atomic_store(&w->delivered, rev);
		w->cbs.events(w->cbs.ctx, NULL, 0, rev);
	}
out:
	if (rc == BROKE_RESET && !w->reset) {
		if (w->cbs.reset)
			w->cbs.reset(w->cbs.ctx, -EIO);
		w->reset = true;
	}
	json_decref(doc);
	return rc;
}

/*
 * Find the complete objects in buf: a scan that knows strings and escapes
 * and counts brackets, resumed where the last chunk ended.  Between
 * objects only whitespace.
 */
static int split_stream(struct sl__etcd_watch *w)
{
	size_t start = 0;
	int rc = BROKE_NONE;

	for (size_t i = w->scan; i < w->len && rc == BROKE_NONE; i++) {
		char ch = w->buf[i];

		if (w->in_str) {
			if (w->esc)
				w->esc = false;
			else if (ch == '\\')
				w->esc = true;
			else if (ch == '"')
				w->in_str = false;
		} else if (w->depth == 0) {
			if (ch == '{') {
				w->depth = 1;
				start = i;
			} else if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') {
				rc = BROKE_RETRY; /* not the gateway's JSON */
			} else {
				start = i + 1;
			}
		} else if (ch == '"') {
			w->in_str = true;
		} else if (ch == '{' || ch == '[') {
			w->depth++;
		} else if ((ch == '}' || ch == ']') && --w->depth == 0) {
			rc = on_answer(w, w->buf + start, i + 1 - start);
			start = i + 1;
		}
	}
	if (rc != BROKE_NONE)
		return rc;
	/* Keep the object under way at the start of buf. */
	if (w->depth == 0)
		start = w->len;
	memmove(w->buf, w->buf + start, w->len - start);
	w->len -= start;
	w->scan = w->len;
	return BROKE_NONE;
}

static size_t on_stream(char *data, size_t size, size_t nmemb, void *ud)
{
	struct sl__etcd_watch *w = ud;
	size_t n = size * nmemb;

	w->last_byte = sl__etcd_now_ms();
	if (n > SL__ETCD_BODY_MAX - w->len) {
		w->broken = BROKE_RETRY;
		return 0;
	}
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 16384;
		char *p;

		while (cap < w->len + n)
			cap *= 2;
		p = realloc(w->buf, cap);
		if (!p) {
			w->broken = BROKE_RETRY;
			return 0;
		}
		w->buf = p;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, data, n);
	w->len += n;
	w->broken = split_stream(w);
	return w->broken ? 0 : n; /* 0: curl ends the transfer (CURLE_WRITE_ERROR) */
}

/* libcurl calls this about once a second even on a silent stream. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct sl__etcd_watch *w = ud;
	int64_t now = sl__etcd_now_ms();

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	if (atomic_load(&w->stop))
		return 1;
	/* The attempt's bound: connected and the watch created. */
	if (!w->created && now - w->attempt_start > w->conn.timeout_ms)
		return 1;
	return now - w->last_byte > WATCH_SILENCE_MS;
}

/* One stream from endpoint @idx, until it breaks or the watch stops. */
static void stream_once(struct sl__etcd_watch *w, size_t idx, const char *body)
{
	char url[320];

	snprintf(url, sizeof(url), "%s/v3/watch", w->conn.endpoints[idx]);
	w->len = w->scan = 0;
	w->depth = 0;
	w->in_str = w->esc = w->created = false;
	w->broken = BROKE_NONE;
	w->attempt_start = w->last_byte = sl__etcd_now_ms();
	curl_easy_setopt(w->curl, CURLOPT_URL, url);
	curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(w->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)w->conn.timeout_ms);
	curl_easy_perform(w->curl);
}

/* The create request, from w->next. */
static char *create_request(struct sl__etcd_watch *w)
{
	json_t *req = json_object(), *cr = json_object();
	char *body = NULL;

	if (!req || !cr || json_object_set(cr, "key", w->key) ||
	    (w->range_end && json_object_set(cr, "range_end", w->range_end)) ||
	    (w->next > 0 && json_object_set_new(cr, "start_revision", sl__etcd_int(w->next))) ||
	    json_object_set_new(cr, "progress_notify", json_true()) ||
	    json_object_set(req, "create_request", cr))
		goto out;
	body = json_dumps(req, JSON_COMPACT);
out:
	json_decref(cr);
	json_decref(req);
	return body;
}

/* The member each new watch starts on: the watches of a process (a node's
 * grants, its elections, a coordinator's budgets; a benchmark's thousand
 * nodes) spread over the cluster rather than all on its first member. */
static atomic_size_t first_member;

static void *watch_main(void *arg)
{
	struct sl__etcd_watch *w = arg;
	size_t idx = atomic_fetch_add(&first_member, 1) % w->conn.n_endpoints, failed = 0;

	curl_easy_setopt(w->curl, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(w->curl, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(w->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(w->curl, CURLOPT_XFERINFODATA, w);
	curl_easy_setopt(w->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(w->curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(w->curl, CURLOPT_TCP_KEEPIDLE, WATCH_KEEPIDLE_S);
	curl_easy_setopt(w->curl, CURLOPT_TCP_KEEPINTVL, WATCH_KEEPINTVL_S);
	while (!atomic_load(&w->stop) && !w->reset) {
		char *body = create_request(w);

		w->created = false; /* until this attempt's answer says so */
		if (body) {
			stream_once(w, idx, body);
			free(body);
		}
		if (w->reset || atomic_load(&w->stop))
			break;
		/* Resume on the next member: this one broke the stream. */
		idx = (idx + 1) % w->conn.n_endpoints;
		if (w->created && sl__etcd_now_ms() - w->attempt_start >= WATCH_LIVED_MS) {
			failed = 0;
			continue;
		}
		if (++failed >= w->conn.n_endpoints) {
			failed = 0;
			pause_ms(w, WATCH_ROUND_PAUSE_MS);
		}
	}
	/* After a reset, nothing more until stopped. */
	pthread_mutex_lock(&w->lock);
	while (!atomic_load(&w->stop))
		pthread_cond_wait(&w->wake, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}
