/* SPDX-License-Identifier: MIT */
/*
 * The coordinated etcd protocol (etcd://HOST:PORT/PREFIX?coordinated;
 * docs/leases.md, "Scale"): what the node side (store_etcd_coord.c) and the
 * coordinator side (store_etcd_leader.c) share.  Both run on the store's
 * sl_lease_run() thread; the watch threads (etcd_watch.c) only fill the
 * tables below under tlock and wake the run thread.
 *
 * Keys under PREFIX, beside the decentralized protocol's:
 *   budgets/NAME/version     {"counted":S}: an upper bound of what the store
 *                            counts for the budget; every write that makes it
 *                            count for more compares its mod_revision
 *   budgets/NAME/member/ID   {}: a participant (ID: its lease id), no lease
 *   budgets/NAME/rep/ID      its report, under its node's session
 *   budgets/NAME/grant/ID    its grant, written only by the coordinator
 *   grants/ID                the same grant, keyed so that a node watches
 *                            all of its own with one watch
 *   coord/NAME               the coordinator, under its session; the key's
 *                            create_revision is its term
 */
#ifndef SL_LEASE_STORE_ETCD_COORD_H
#define SL_LEASE_STORE_ETCD_COORD_H

#include "coord.h"
#include "etcd_store.h"
#include "etcd_watch.h"
#include "lease_int.h"

/* A grant as a node or a coordinator knows it. */
struct sl__cgrant {
	bool present;
	uint64_t held, floor, term;
	int64_t session;          /* the session it was made for                  */
	struct sl_limits lim;     /* the budget's limits when it was made         */
	int64_t rev;              /* node side: its key's mod_revision            */
};

/* A report as the coordinator knows it. */
struct sl__crep {
	bool present;
	uint64_t held, usage, demand;
	int64_t session;
	int64_t rev;             /* its key's mod_revision, as last seen          */
};

/* A member of a budget, in its coordinator's table. */
struct sl__cmember {
	char id[SL_LEASE_ID_MAX];
	bool member;
	uint64_t m_floor;        /* the floor its member key acknowledges         */
	struct sl__crep rep;
	struct sl__cgrant grant;
	/* A participant of the decentralized protocol under the same name:
	 * counted at its record's held, or its floor once the record is gone. */
	bool f_rec, f_floor;
	uint64_t f_held, f_floorv;
};

/* A budget this node coordinates. */
struct sl__cbudget {
	char name[SL_LEASE_NAME_MAX];
	int64_t term;            /* our coord key's create_revision                */
	struct sl__etcd_watch *w;
	struct sl__coord_node *node;
	/* Under node->tlock: filled by the watch. */
	bool have_lim;
	struct sl_limits lim;
	int64_t version_rev;     /* the version key's mod_revision (0: none)      */
	struct sl__cmember *m;
	size_t n, cap;
	bool dirty, lost;
	int64_t next_plan_ns;    /* changes are gathered for a quarter period     */
	struct sl__cbudget *next;
};

/* What the coord/ watch says of one budget's coordinator. */
struct sl__celect {
	char name[SL_LEASE_NAME_MAX];
	bool held;               /* a coord key exists                             */
	bool mine;               /* and it names this node (our campaign won)     */
	int64_t rev;             /* the revision that said so                      */
	int64_t campaign_ns;     /* when to campaign if still unheld (0: not due)  */
	struct sl__celect *next;
};

struct sl__coord_node {
	sl_lease_store *s;
	struct sl__etcd_store *st;
	char idprefix[SL_LEASE_ID_MAX]; /* "node:pid:nonce:": every lease id's start */
	/* The run thread's own connection (a leave uses the store's). */
	struct sl__etcd_conn conn;
	/* The session, the run thread's (changed under s->lock). */
	int64_t session;         /* etcd lease id, 0: none                          */
	int64_t new_session;     /* granted by the call in flight                  */
	int64_t asked_session;   /* the id of a grant not yet seen answered        */
	unsigned fails;          /* store calls failed in a row: the backoff       */
	bool lost_session;       /* coordinators to drop: the session went         */
	uint32_t ttl_ms, margin_ms, period_ms;
	int64_t view_end_ns;     /* our own view of the session ends               */
	int64_t keep_next_ns;    /* the first keepalive of a session granted (the keeper's) */
	int64_t retry_ns;        /* a failed call is tried again then (0: none)    */
	int64_t plan_wake_ns;    /* a coordinated budget is due to be planned      */
	uint64_t rnd;

	struct sl__etcd_watch *gw, *cw; /* grants/IDPREFIX, coord/               */
	pthread_mutex_t tlock;   /* the tables below, and every cbudget's table    */
	bool gw_lost, cw_lost;
	struct sl__cgrant *grants; /* indexed by a lease id's number               */
	size_t ngrants;
	struct sl__celect *elect;
	struct sl__cbudget *led;
	bool kicked;             /* a watch saw a change since the loop last looked */
	/* Pacing (coord.h): of our reports, and of the grants of the budgets
	 * we lead; the slowest write of the round so far (the run thread's). */
	struct sl__coord_pace pace, lpace;
	int64_t lat_ns;
	bool lat_failed;
	int64_t kslow_ns;        /* a failed keepalive slows the paces again from then */
	unsigned sweep;          /* collect()'s: a lease steps once a sweep          */
	/* The keeper: the session's keepalives, on a thread and a connection
	 * of their own, so that no slow call of a round (a coordinator's read
	 * of a thousand members, a txn behind etcd's backlog) delays them. */
	pthread_t keeper;
	bool keeper_on;          /* started by the run thread, joined at its end   */
	struct sl__etcd_conn kconn;
	pthread_mutex_t klock;   /* the k_ fields                                  */
	pthread_cond_t kcond;
	int64_t k_session;       /* the session to keep alive (0: none)            */
	int64_t k_view_end_ns;   /* our own view of it, from the last answer       */
	int64_t k_next_ns;       /* the next keepalive                             */
	int64_t k_keep_ns, k_view_ns, k_retry_ns; /* its timing, as handed over    */
	unsigned k_fails, k_errors; /* failures in a row; failures not yet counted */
	bool k_gone;             /* etcd said it ended                             */
	bool k_stop;
};

/* Node side (store_etcd_coord.c). */
int sl__coord_open(sl_lease_store *s);
void sl__coord_close(sl_lease_store *s);
int sl__coord_run(sl_lease_store *s);
int sl__coord_leave(struct sl_lease *l);
void sl__coord_kick(struct sl__coord_node *c);

/* Coordinator side (store_etcd_leader.c), on the run thread. */
void sl__coord_lead(struct sl__coord_node *c, int64_t now, char (*budgets)[SL_LEASE_NAME_MAX],
		    size_t nb, int64_t session);
void sl__coord_drop_all(struct sl__coord_node *c);
int sl__coord_elect_start(struct sl__coord_node *c);

/* JSON and txn helpers both sides use. */
json_t *sl__coord_op_put(const char *key, const char *value, int64_t lease);
json_t *sl__coord_op_del(const char *key);
json_t *sl__coord_cmp(const char *key, const char *target, const char *field, const char *result,
		      int64_t v);
/* A range request of [@key, @end) to start a watch from: serializable, so
 * that a member behind in applying answers at once (the watch from the
 * answer's revision on brings the rest). */
json_t *sl__coord_watch_read(const char *key, const char *end);
/* One txn on @conn (the caller serializes its use). */
int sl__coord_txn(struct sl__etcd_conn *conn, json_t *cmp, json_t *ops, bool *ok, int64_t *rev,
		  json_t **resp);
/* The same on the run thread's connection, its time (or failure) noted in
 * c->lat_ns and c->lat_failed for the pacing. */
int sl__coord_wtxn(struct sl__coord_node *c, json_t *cmp, json_t *ops, bool *ok, int64_t *rev,
		   json_t **resp);
/* Note for the pacing a write call begun at @t0 that answered @rc. */
void sl__coord_note_lat(struct sl__coord_node *c, int64_t t0, int rc);
/* Pacing's round: begin (the noted latency cleared), and the caller's
 * pace told how it went if anything was written. */
void sl__coord_pace_begin(struct sl__coord_node *c);
void sl__coord_pace_end(struct sl__coord_node *c, struct sl__coord_pace *p);
int sl__coord_parse_grant(const char *v, size_t len, struct sl__cgrant *g, char *budget);
/* A watch's reset: mark *@flag (under tlock) and wake the run thread,
 * which reads the range again and watches anew. */
void sl__coord_lost(struct sl__coord_node *c, bool *flag);
/* Call @fn for each key and value (decoded; an empty value as "") of a
 * range answer's kvs, with the key's mod_revision. */
void sl__coord_each_kv(json_t *kvs,
		       void (*fn)(void *ctx, const char *k, const char *v, size_t vl, int64_t rev),
		       void *ctx);
/* The number after the last ':' of a lease id (-1: not one of ours). */
long sl__coord_id_num(const struct sl__coord_node *c, const char *id);

#endif /* SL_LEASE_STORE_ETCD_COORD_H */
