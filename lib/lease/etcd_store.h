/* SPDX-License-Identifier: MIT */
/*
 * What store_etcd.c (open, budgets), store_etcd_read.c and
 * store_etcd_write.c (records) share: the store's state, its keys and its
 * JSON values.
 */
#ifndef SL_LEASE_ETCD_STORE_H
#define SL_LEASE_ETCD_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "etcd_http.h"
#include "store.h"

/* PREFIX (<= 200) + "/budgets/" + NAME + "/floor/" + ID, with room to spare. */
#define SL__ETCD_KEY_MAX 512

/* The etcd lease under which one participant's record lives. */
struct sl__etcd_lease {
	char id[SL_LEASE_ID_MAX];
	int64_t lease; /* etcd's lease id; 0: none granted yet */
	uint32_t ttl_s;
	uint64_t incarnation; /* of the store it last wrote to; 0: none yet */
};

struct sl__etcd_store {
	pthread_mutex_t lock; /* one request at a time on the connection */
	struct sl__etcd_conn conn;
	char *hosts;          /* the URL's HOST:PORT[,...], for the watches    */
	size_t hosts_len;
	bool coordinated;     /* "?coordinated": store_etcd_coord.h             */
	char prefix[208];
	char node[64];
	_Atomic uint64_t ids; /* participant ids made so far (make_id takes no lock) */
	uint64_t nonce;       /* random, per open: two nodes of one name and pid
			       * (containers: every process is pid 1) never
			       * make one id */

	/* The store's incarnation as last read: PREFIX/incarnation's value and
	 * the cluster id it came with. */
	bool have_inc;
	uint64_t cluster_id;
	uint64_t incarnation;
	char inc_value[40];

	struct sl__etcd_lease *leases;
	size_t n_leases, cap_leases;
};

/*
 * A key under the store's prefix into @out (SL__ETCD_KEY_MAX):
 * @name NULL: PREFIX/incarnation; @kind NULL: PREFIX/budgets/@name;
 * else PREFIX/budgets/@name/@kind, then /@id when @id is not NULL.
 */
void sl__etcd_key(const struct sl__etcd_store *st, char *out, const char *name, const char *kind,
		  const char *id);
/* The range end of every key starting with @prefix (which ends in '/'). */
void sl__etcd_prefix_end(char *out, const char *prefix);

/* The @i-th response of a txn answer, if it is a range with a key: its first kv. */
json_t *sl__etcd_txn_kv(json_t *txn_resp, size_t i);
/* The kvs array of the @i-th response of a txn answer (NULL if none). */
json_t *sl__etcd_txn_kvs(json_t *txn_resp, size_t i);

/* Limits as the budget key's JSON value (malloc'd), and back from a kv. */
char *sl__etcd_limits_json(const struct sl_limits *lim);
int sl__etcd_parse_limits(json_t *kv, struct sl_limits *out);
/* A kv's value as a JSON object (the caller's), NULL if it is not one. */
json_t *sl__etcd_kv_json(json_t *kv);
/* An unsigned field of a record's JSON (decimal strings). */
int sl__etcd_get_u64(json_t *obj, const char *field, uint64_t *out);
int sl__etcd_set_u64(json_t *obj, const char *field, uint64_t v);

/* Wall-clock ms: only for the expiry estimates that tools show. */
int64_t sl__etcd_wall_ms(void);

/* The record operations (store_etcd_read.c, store_etcd_write.c). */
int sl__etcd_read(void *state, const char *budget, struct sl__lease_view *out);
int sl__etcd_write(void *state, const char *budget, const struct sl__lease_rec *rec,
		   uint32_t ttl_ms, bool grows, uint64_t version, uint64_t incarnation);
int sl__etcd_remove(void *state, const char *budget, const char *id);
int sl__etcd_make_id(void *state, char id[SL_LEASE_ID_MAX]);
void sl__etcd_store_free_rec_state(struct sl__etcd_store *st);

#endif /* SL_LEASE_ETCD_STORE_H */
