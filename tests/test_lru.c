/* SPDX-License-Identifier: MIT */
/*
 * The example host, examples/lru_cache: get, set and delete; LRU order
 * within a tenant; soft limits deciding who is evicted (docs/reclaim.md, under
 * SL_POLICY_GUARANTEE); -ENOMEM that changes nothing; the tenant's bytes
 * equal to its group's usage after any sequence; the shared-LRU baseline;
 * and threads setting and getting across tenants that evict each other.
 *
 * Tests that charge run under both the default batch and SL_BATCH_NONE:
 * the loop index _i picks the batch (test_batch()).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "helpers.h"

#include "lru_cache.h"

/* ---- helpers ---- */

static struct lru_cache *cache_new(int batch_i, enum sl_policy policy, uint64_t root_max)
{
	struct sl_tree_opts opts;
	struct lru_cache *c = NULL;

	sl_tree_opts_init(&opts);
	opts.batch = test_batch(batch_i);
	opts.policy = policy;
	opts.root.max = root_max;
	ck_assert_int_eq(lru_cache_create(&opts, &c), 0);
	ck_assert_ptr_nonnull(c);
	return c;
}

static struct lru_tenant *tenant_new(struct lru_cache *c, struct lru_tenant *parent,
				     const char *name, uint64_t soft, uint64_t max)
{
	struct lru_tenant *t = NULL;
	struct sl_limits lim;

	sl_limits_init(&lim);
	lim.soft = soft;
	lim.max = max;
	ck_assert_int_eq(lru_tenant_create(c, parent, name, &lim, &t), 0);
	ck_assert_ptr_nonnull(t);
	return t;
}

static struct lru_stats lstats_of(struct lru_tenant *t)
{
	struct lru_stats s;

	ck_assert_int_eq(lru_tenant_stats(t, &s), 0);
	return s;
}

/* Keys "k<n>", values of @vlen bytes that say which key and version they hold. */
static size_t key_of(char *buf, size_t size, uint64_t n)
{
	int len = snprintf(buf, size, "k%" PRIu64, n);

	return (size_t)len;
}

static void value_of(unsigned char *buf, size_t vlen, uint64_t n, uint64_t version)
{
	size_t i;

	for (i = 0; i < vlen; i++)
		buf[i] = (unsigned char)(n * 31 + version * 7 + i);
}

static int set_n(struct lru_tenant *t, uint64_t n, uint64_t version, size_t vlen)
{
	unsigned char v[4096];
	char k[32];
	size_t klen = key_of(k, sizeof(k), n);

	ck_assert_uint_le(vlen, sizeof(v));
	value_of(v, vlen, n, version);
	return lru_set(t, k, klen, v, vlen);
}

/* 0 if key n holds exactly version @version of @vlen bytes, -ENOENT on a
 * miss, -EIO if it holds anything else. */
static int get_n(struct lru_tenant *t, uint64_t n, uint64_t version, size_t vlen)
{
	unsigned char v[4096], want[4096];
	char k[32];
	size_t klen = key_of(k, sizeof(k), n), got = 0;
	int err = lru_get(t, k, klen, v, sizeof(v), &got);

	if (err)
		return err;
	value_of(want, vlen, n, version);
	return got == vlen && memcmp(v, want, vlen) == 0 ? 0 : -EIO;
}

static int has_n(struct lru_tenant *t, uint64_t n)
{
	char k[32];
	size_t klen = key_of(k, sizeof(k), n);

	return lru_get(t, k, klen, NULL, 0, NULL) == 0;
}

/* A tenant's bytes are its group's usage less its child tenants'. */
static void assert_bytes_are_usage_less(struct lru_tenant *t, struct lru_tenant *child,
					const char *what)
{
	struct lru_stats ls = lstats_of(t);
	struct sl_stats s = stats_of(lru_tenant_group(t));

	if (child)
		s.usage -= usage_of(lru_tenant_group(child));
	ck_assert_msg(ls.bytes == s.usage, "%s: tenant bytes %" PRIu64 ", own usage %" PRIu64,
		      what, ls.bytes, s.usage);
}

/* A leaf tenant's bytes are its group's usage. */
static void assert_bytes_are_usage(struct lru_tenant *t, const char *what)
{
	assert_bytes_are_usage_less(t, NULL, what);
}

/* ---- get, set, delete ---- */

START_TEST(set_then_get_returns_the_value_and_delete_removes_it)
{
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, SL_UNLIMITED);
	struct lru_tenant *t = tenant_new(c, NULL, "t", 0, SL_UNLIMITED);
	char buf[8];
	size_t vlen = 0;
	struct lru_stats s;

	ck_assert_int_eq(lru_get(t, "a", 1, buf, sizeof(buf), &vlen), -ENOENT);
	ck_assert_int_eq(lru_set(t, "a", 1, "hello", 5), 0);
	ck_assert_int_eq(lru_get(t, "a", 1, buf, sizeof(buf), &vlen), 0);
	ck_assert_uint_eq(vlen, 5);
	ck_assert_int_eq(memcmp(buf, "hello", 5), 0);

	/* A set replaces; a short buffer gets the start and the full length. */
	ck_assert_int_eq(lru_set(t, "a", 1, "a longer value", 14), 0);
	ck_assert_int_eq(lru_get(t, "a", 1, buf, 4, &vlen), 0);
	ck_assert_uint_eq(vlen, 14);
	ck_assert_int_eq(memcmp(buf, "a lo", 4), 0);
	/* An empty value is a value. */
	ck_assert_int_eq(lru_set(t, "e", 1, NULL, 0), 0);
	ck_assert_int_eq(lru_get(t, "e", 1, NULL, 0, &vlen), 0);
	ck_assert_uint_eq(vlen, 0);

	s = lstats_of(t);
	ck_assert_uint_eq(s.items, 2);
	ck_assert_uint_eq(s.bytes, lru_item_size(1, 14) + lru_item_size(1, 0));
	ck_assert_uint_eq(s.sets, 3);
	ck_assert_uint_eq(s.hits, 3);
	ck_assert_uint_eq(s.misses, 1);
	assert_bytes_are_usage(t, "after sets");

	ck_assert_int_eq(lru_delete(t, "a", 1), 0);
	ck_assert_int_eq(lru_delete(t, "a", 1), -ENOENT);
	ck_assert_int_eq(lru_get(t, "a", 1, NULL, 0, NULL), -ENOENT);
	ck_assert_int_eq(lru_delete(t, "e", 1), 0);
	s = lstats_of(t);
	ck_assert_uint_eq(s.items, 0);
	ck_assert_uint_eq(s.bytes, 0);
	assert_bytes_are_usage(t, "after deletes");
	lru_cache_destroy(c);
}
END_TEST

START_TEST(many_keys_survive_the_table_growing)
{
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, SL_UNLIMITED);
	struct lru_tenant *t = tenant_new(c, NULL, "t", 0, SL_UNLIMITED);
	uint64_t n;

	for (n = 0; n < 5000; n++)
		ck_assert_int_eq(set_n(t, n, 1, 16), 0);
	for (n = 0; n < 5000; n++)
		ck_assert_int_eq(get_n(t, n, 1, 16), 0);
	ck_assert_uint_eq(lstats_of(t).items, 5000);
	assert_bytes_are_usage(t, "5000 keys");
	lru_cache_destroy(c);
}
END_TEST

START_TEST(bad_arguments_are_einval)
{
	struct lru_cache *c = cache_new(0, SL_POLICY_GUARANTEE, SL_UNLIMITED);
	struct lru_tenant *t = tenant_new(c, NULL, "t", 0, SL_UNLIMITED), *u = NULL;
	char longkey[LRU_KEY_MAX + 1];
	struct sl_limits bad;

	memset(longkey, 'k', sizeof(longkey));
	ck_assert_int_eq(lru_set(NULL, "a", 1, "v", 1), -EINVAL);
	ck_assert_int_eq(lru_set(t, NULL, 1, "v", 1), -EINVAL);
	ck_assert_int_eq(lru_set(t, "a", 0, "v", 1), -EINVAL);
	ck_assert_int_eq(lru_set(t, longkey, sizeof(longkey), "v", 1), -EINVAL);
	ck_assert_int_eq(lru_set(t, "a", 1, NULL, 1), -EINVAL);
	ck_assert_int_eq(lru_get(t, "a", 1, NULL, 1, NULL), -EINVAL);
	ck_assert_int_eq(lru_get(NULL, "a", 1, NULL, 0, NULL), -EINVAL);
	ck_assert_int_eq(lru_delete(t, NULL, 1), -EINVAL);
	ck_assert_int_eq(lru_tenant_stats(t, NULL), -EINVAL);
	ck_assert_int_eq(lru_tenant_create(c, NULL, "a/b", NULL, &u), -EINVAL);
	ck_assert_int_eq(lru_tenant_create(c, NULL, "t", NULL, &u), -EEXIST);
	sl_limits_init(&bad);
	bad.soft = 10;
	bad.max = 5;
	ck_assert_int_eq(lru_tenant_create(c, NULL, "u", &bad, &u), -EINVAL);
	ck_assert_int_eq(lru_tenant_destroy(NULL), -EINVAL);
	ck_assert_int_eq(lru_cache_create_shared(0, &c), -EINVAL);
	ck_assert_uint_eq(lstats_of(t).sets, 0);
	lru_cache_destroy(c);
}
END_TEST

/* ---- eviction ---- */

START_TEST(eviction_within_a_tenant_takes_the_least_recently_used_first)
{
	const size_t vlen = 100;
	uint64_t item = lru_item_size(2, vlen); /* keys k0..k9 */
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, SL_UNLIMITED);
	struct lru_tenant *t = tenant_new(c, NULL, "t", 0, 8 * item);
	struct lru_stats s;
	uint64_t n;

	for (n = 0; n < 8; n++)
		ck_assert_int_eq(set_n(t, n, 1, vlen), 0);
	/* Reading k0 and k1 makes k2 the least recently used. */
	ck_assert_int_eq(get_n(t, 0, 1, vlen), 0);
	ck_assert_int_eq(get_n(t, 1, 1, vlen), 0);
	ck_assert_int_eq(set_n(t, 8, 1, vlen), 0);
	ck_assert_int_eq(set_n(t, 9, 1, vlen), 0);

	s = lstats_of(t);
	ck_assert_uint_eq(s.evictions, 2);
	ck_assert_uint_eq(s.evicted_bytes, 2 * item);
	ck_assert_uint_eq(s.items, 8);
	ck_assert(!has_n(t, 2));
	ck_assert(!has_n(t, 3));
	for (n = 0; n < 10; n++)
		if (n != 2 && n != 3)
			ck_assert_msg(has_n(t, n), "k%" PRIu64 " was evicted", n);
	assert_bytes_are_usage(t, "after evictions");
	ck_assert_uint_eq(stats_of(lru_tenant_group(t)).reclaimed, 2 * item);
	lru_cache_destroy(c);
}
END_TEST

START_TEST(a_tenant_within_its_soft_limit_is_not_evicted_while_another_is_over_its_own)
{
	const size_t vlen = 1000;
	uint64_t item = lru_item_size(6, vlen);
	uint64_t budget = 1000 * item;
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, budget);
	struct lru_tenant *steady = tenant_new(c, NULL, "steady", budget / 2, SL_UNLIMITED);
	struct lru_tenant *noisy = tenant_new(c, NULL, "noisy", 0, SL_UNLIMITED);
	uint64_t n;

	for (n = 0; n < 400; n++)
		ck_assert_int_eq(set_n(steady, n, 1, vlen), 0);
	for (n = 100000; n < 103000; n++)
		ck_assert_int_eq(set_n(noisy, n, 1, vlen), 0);

	ck_assert_uint_eq(lstats_of(steady).evictions, 0);
	ck_assert_uint_eq(lstats_of(steady).items, 400);
	for (n = 0; n < 400; n++)
		ck_assert_int_eq(get_n(steady, n, 1, vlen), 0);
	ck_assert_uint_gt(lstats_of(noisy).evictions, 2000);
	ck_assert_uint_eq(stats_of(lru_tenant_group(steady)).events_low, 0);
	ck_assert_uint_le(usage_of(sl_tree_root(lru_cache_tree(c))), budget);
	assert_bytes_are_usage(steady, "steady");
	assert_bytes_are_usage(noisy, "noisy");
	lru_cache_destroy(c);
}
END_TEST

/* ---- -ENOMEM ---- */

/* lru_tenant_oldest(): the host fields of the item eviction would take next. */
START_TEST(oldest_is_the_item_eviction_would_take_next)
{
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, SL_UNLIMITED);
	struct lru_tenant *t = tenant_new(c, NULL, "t", 0, SL_UNLIMITED);
	struct lru_meta m = { 0 };
	uint32_t n;

	ck_assert_int_eq(lru_tenant_oldest(t, &m), -ENOENT);
	ck_assert_int_eq(lru_tenant_oldest(NULL, &m), -EINVAL);
	ck_assert_int_eq(lru_tenant_oldest(t, NULL), -EINVAL);
	for (n = 1; n <= 3; n++) {
		char key[8];
		struct lru_meta in = { .atime = n };

		ck_assert_int_eq(lru_store(t, key, key_of(key, sizeof(key), n), "v", 1, &in,
					   LRU_ALWAYS, NULL), 0);
	}
	ck_assert_int_eq(lru_tenant_oldest(t, &m), 0);
	ck_assert_uint_eq(m.atime, 1);
	/* A read makes k1 the newest: k2 is next. */
	ck_assert_int_eq(lru_get(t, "k1", 2, NULL, 0, NULL), 0);
	ck_assert_int_eq(lru_tenant_oldest(t, &m), 0);
	ck_assert_uint_eq(m.atime, 2);
	lru_tenant_clear(t);
	ck_assert_int_eq(lru_tenant_oldest(t, &m), -ENOENT);
	lru_cache_destroy(c);
}
END_TEST

START_TEST(set_larger_than_max_fails_with_enomem_and_evicts_nothing)
{
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, SL_UNLIMITED);
	struct lru_tenant *t = tenant_new(c, NULL, "t", 0, 2000);
	struct lru_stats before, after;
	uint64_t n;

	for (n = 0; n < 5; n++)
		ck_assert_int_eq(set_n(t, n, 1, 100), 0);
	before = lstats_of(t);
	ck_assert_int_eq(set_n(t, 99, 1, 3000), -ENOMEM);
	/* Replacing a key with a value that cannot fit keeps the old one. */
	ck_assert_int_eq(set_n(t, 0, 2, 3000), -ENOMEM);
	after = lstats_of(t);
	ck_assert_uint_eq(after.items, before.items);
	ck_assert_uint_eq(after.bytes, before.bytes);
	ck_assert_uint_eq(after.evictions, 0);
	ck_assert_uint_eq(after.set_fails, 2);
	ck_assert_uint_eq(after.set_fail_bytes, lru_item_size(3, 3000) + lru_item_size(2, 3000));
	for (n = 0; n < 5; n++)
		ck_assert_int_eq(get_n(t, n, 1, 100), 0);
	assert_bytes_are_usage(t, "after failed sets");
	ck_assert_uint_eq(stats_of(lru_tenant_group(t)).events_oom, 2);
	lru_cache_destroy(c);
}
END_TEST

START_TEST(set_at_max_fails_with_enomem_when_nothing_is_evictable)
{
	const size_t vlen = 100;
	uint64_t item = lru_item_size(2, vlen);
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, SL_UNLIMITED);
	struct lru_tenant *cust = tenant_new(c, NULL, "cust", 0, 4 * item);
	struct lru_tenant *t = NULL;
	struct sl_limits lim;
	uint64_t n;

	/* The customer is at its max and all it holds is its namespace's min,
	 * which no reclaim takes.  (A group's own min does not shield it from
	 * reclaim at its own max, as in cgroup v2: hence the customer.) */
	sl_limits_init(&lim);
	lim.min = 4 * item;
	ck_assert_int_eq(lru_tenant_create(c, cust, "pinned", &lim, &t), 0);
	for (n = 0; n < 4; n++)
		ck_assert_int_eq(set_n(t, n, 1, vlen), 0);
	ck_assert_int_eq(set_n(t, 4, 1, vlen), -ENOMEM);
	ck_assert_int_eq(set_n(t, 0, 2, vlen), -ENOMEM);
	for (n = 0; n < 4; n++)
		ck_assert_int_eq(get_n(t, n, 1, vlen), 0);
	ck_assert_int_eq(get_n(t, 4, 1, vlen), -ENOENT);
	ck_assert_uint_eq(lstats_of(t).evictions, 0);
	ck_assert_uint_eq(lstats_of(t).set_fails, 2);
	assert_bytes_are_usage(t, "pinned");
	/* Deleting makes room again. */
	ck_assert_int_eq(lru_delete(t, "k1", 2), 0);
	ck_assert_int_eq(set_n(t, 4, 1, vlen), 0);
	assert_bytes_are_usage(t, "pinned after delete");
	lru_cache_destroy(c);
}
END_TEST

/* ---- exactness against a model ---- */

#define MODEL_TENANTS 4
#define MODEL_KEYS 300

/*
 * Random sets, gets and deletes on the leaves of a small tree (two
 * customers of two namespaces) under a budget that keeps reclaim busy.
 * The model knows the last version set of every key: a hit must return
 * exactly it, a deleted key must miss.  After every operation each leaf's
 * bytes are its usage, and each customer's usage is its leaves'.
 */
START_TEST(usage_equals_the_tenants_bytes_after_any_sequence)
{
	uint64_t item_max = lru_item_size(4, 600);
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, 150 * item_max);
	struct lru_tenant *cust[2], *leaf[MODEL_TENANTS];
	uint64_t version[MODEL_TENANTS][MODEL_KEYS];
	size_t vlens[MODEL_TENANTS][MODEL_KEYS];
	uint64_t rng = 42, op;
	int i;

	cust[0] = tenant_new(c, NULL, "cust0", 60 * item_max, 100 * item_max);
	cust[1] = tenant_new(c, NULL, "cust1", 0, SL_UNLIMITED);
	leaf[0] = tenant_new(c, cust[0], "db0", 40 * item_max, SL_UNLIMITED);
	leaf[1] = tenant_new(c, cust[0], "db1", 0, 50 * item_max);
	leaf[2] = tenant_new(c, cust[1], "db0", 20 * item_max, SL_UNLIMITED);
	leaf[3] = tenant_new(c, cust[1], "db1", 0, SL_UNLIMITED);
	memset(version, 0, sizeof(version));
	memset(vlens, 0, sizeof(vlens));

	for (op = 0; op < 20000; op++) {
		int ti = (int)rng_range(&rng, 0, MODEL_TENANTS - 1);
		uint64_t k = rng_range(&rng, 0, MODEL_KEYS - 1);
		uint64_t what = rng_range(&rng, 0, 9);
		struct lru_tenant *t = leaf[ti];
		int err;

		if (what < 5) {
			size_t vlen = (size_t)rng_range(&rng, 0, 600);

			err = set_n(t, k, op + 1, vlen);
			ck_assert_int_eq(err, 0);
			version[ti][k] = op + 1;
			vlens[ti][k] = vlen;
		} else if (what < 9) {
			err = get_n(t, k, version[ti][k], vlens[ti][k]);
			ck_assert_msg(err == 0 || err == -ENOENT, "op %" PRIu64 ": get gave %d", op, err);
			ck_assert_msg(err == -ENOENT || version[ti][k],
				      "op %" PRIu64 ": a hit on a key never set or deleted", op);
		} else {
			char kb[32];
			size_t kl = key_of(kb, sizeof(kb), k);

			/* Present unless evicted: either answer may be right. */
			err = lru_delete(t, kb, kl);
			ck_assert_msg(err == 0 || err == -ENOENT, "op %" PRIu64 ": delete gave %d", op, err);
			ck_assert_msg(err == -ENOENT || version[ti][k],
				      "op %" PRIu64 ": deleted a key never set", op);
			version[ti][k] = 0;
		}
		for (i = 0; i < MODEL_TENANTS; i++)
			assert_bytes_are_usage(leaf[i], "leaf");
		for (i = 0; i < 2; i++)
			ck_assert_uint_eq(usage_of(lru_tenant_group(cust[i])),
					  lstats_of(leaf[2 * i]).bytes + lstats_of(leaf[2 * i + 1]).bytes);
	}
	ck_assert_uint_gt(lstats_of(leaf[3]).evictions, 0);
	assert_tree_ok(lru_cache_tree(c));
	lru_cache_destroy(c);
}
END_TEST

/* ---- ghosts: refaults of evicted keys ---- */

START_TEST(ghosts_report_refaults_of_evicted_keys_and_are_charged)
{
	const size_t vlen = 100;
	uint64_t item = lru_item_size(2, vlen); /* keys k0..k9 */
	struct lru_cache *c = NULL, *sh;
	struct lru_tenant *t, *sh_t;
	struct sl_tree_opts opts;
	struct lru_stats s;
	uint64_t n;

	/* Exact reclaim at max, so that the evictions can be counted. */
	sl_tree_opts_init(&opts);
	opts.batch = test_batch(_i);
	opts.policy = SL_POLICY_REFAULT;
	opts.reclaim_batch = 0;
	ck_assert_int_eq(lru_cache_create(&opts, &c), 0);
	t = tenant_new(c, NULL, "t", 0, 8 * item + 2 * LRU_GHOST_SIZE);

	ck_assert_int_eq(lru_tenant_set_ghosts(NULL, 1), -EINVAL);
	ck_assert_int_eq(lru_tenant_set_ghosts(t, 3 * item), 0);
	for (n = 0; n < 10; n++)
		ck_assert_int_eq(set_n(t, n, 1, vlen), 0);
	/* k0 and k1 were evicted, and are remembered, each charged. */
	s = lstats_of(t);
	ck_assert_uint_eq(s.evictions, 2);
	ck_assert_uint_eq(s.ghosts, 2);
	ck_assert_uint_eq(usage_of(lru_tenant_group(t)), s.bytes + 2 * LRU_GHOST_SIZE);

	/* A read of k0 misses: a refault, reported to softlimit. */
	ck_assert_int_eq(get_n(t, 0, 1, vlen), -ENOENT);
	s = lstats_of(t);
	ck_assert_uint_eq(s.misses, 1);
	ck_assert_uint_eq(s.refaults, 1);
	ck_assert_uint_eq(s.refault_bytes, item);
	ck_assert_uint_eq(s.ghosts, 1);
	ck_assert_uint_eq(stats_of(lru_tenant_group(t)).refaults, 1);
	/* Once only: the ghost is gone. */
	ck_assert_int_eq(get_n(t, 0, 1, vlen), -ENOENT);
	ck_assert_uint_eq(lstats_of(t).refaults, 1);

	/* A store of k1 forgets its ghost (and evicts k2, remembered). */
	ck_assert_int_eq(set_n(t, 1, 2, vlen), 0);
	s = lstats_of(t);
	ck_assert_uint_eq(s.evictions, 3);
	ck_assert_uint_eq(s.ghosts, 1);
	ck_assert_int_eq(get_n(t, 1, 2, vlen), 0);

	/* The reach bounds them: 3 items' worth, the oldest forgotten first. */
	for (n = 10; n < 16; n++)
		ck_assert_int_eq(set_n(t, n, 1, vlen), 0);
	s = lstats_of(t);
	ck_assert_uint_eq(s.ghosts, 3);
	ck_assert_uint_eq(usage_of(lru_tenant_group(t)), s.bytes + 3 * LRU_GHOST_SIZE);
	ck_assert_int_eq(lru_tenant_set_ghosts(t, item), 0);
	ck_assert_uint_eq(lstats_of(t).ghosts, 1);
	ck_assert_int_eq(lru_tenant_set_ghosts(t, 0), 0);
	s = lstats_of(t);
	ck_assert_uint_eq(s.ghosts, 0);
	ck_assert_uint_eq(usage_of(lru_tenant_group(t)), s.bytes);
	ck_assert_int_eq(lru_tenant_set_ghosts(t, 3 * item), 0);
	for (n = 16; n < 20; n++)
		ck_assert_int_eq(set_n(t, n, 1, vlen), 0);
	ck_assert_uint_ge(lstats_of(t).ghosts, 1);
	lru_tenant_clear(t);
	ck_assert_uint_eq(lstats_of(t).ghosts, 0);
	ck_assert_uint_eq(usage_of(lru_tenant_group(t)), 0);
	assert_tree_ok(lru_cache_tree(c));
	lru_cache_destroy(c);

	ck_assert_int_eq(lru_cache_create_shared(10 * item, &sh), 0);
	ck_assert_int_eq(lru_tenant_create(sh, NULL, "s", NULL, &sh_t), 0);
	ck_assert_int_eq(lru_tenant_set_ghosts(sh_t, item), -EOPNOTSUPP);
	lru_cache_destroy(sh);
}
END_TEST

/* Ghosts of a tenant destroyed or a cache destroyed with ghosts held are
 * given back (ASan and the tree's check see a leak otherwise). */
START_TEST(ghosts_go_with_their_tenant)
{
	const size_t vlen = 200;
	uint64_t item = lru_item_size(3, vlen);
	struct lru_cache *c = cache_new(_i, SL_POLICY_REFAULT, 20 * item);
	struct lru_tenant *a = tenant_new(c, NULL, "a", 0, SL_UNLIMITED);
	struct lru_tenant *b = tenant_new(c, NULL, "b", 0, SL_UNLIMITED);
	uint64_t n;

	ck_assert_int_eq(lru_tenant_set_ghosts(a, 10 * item), 0);
	ck_assert_int_eq(lru_tenant_set_ghosts(b, 10 * item), 0);
	for (n = 0; n < 60; n++)
		ck_assert_int_eq(set_n(n % 2 ? a : b, n, 1, vlen), 0);
	ck_assert_uint_gt(lstats_of(a).ghosts, 0);
	ck_assert_uint_gt(lstats_of(b).ghosts, 0);
	ck_assert_int_eq(lru_tenant_destroy(a), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(lru_cache_tree(c))), usage_of(lru_tenant_group(b)));
	assert_tree_ok(lru_cache_tree(c));
	lru_cache_destroy(c);
}
END_TEST

/* ---- tenants ---- */

START_TEST(tenants_nest_and_destroying_one_returns_its_bytes)
{
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, SL_UNLIMITED);
	struct lru_tenant *cust = tenant_new(c, NULL, "cust", 0, SL_UNLIMITED);
	struct lru_tenant *db = tenant_new(c, cust, "db", 0, SL_UNLIMITED);
	sl_group *root = sl_tree_root(lru_cache_tree(c));
	sl_group *g = NULL;
	uint64_t n;

	ck_assert_int_eq(sl_group_lookup(root, "cust/db", &g), 0);
	ck_assert_ptr_eq(g, lru_tenant_group(db));
	ck_assert_str_eq(lru_tenant_name(db), "db");
	for (n = 0; n < 10; n++)
		ck_assert_int_eq(set_n(db, n, 1, 50), 0);
	ck_assert_uint_eq(lstats_of(db).bytes, 10 * lru_item_size(2, 50));
	ck_assert_uint_eq(usage_of(lru_tenant_group(cust)), 10 * lru_item_size(2, 50));
	ck_assert_uint_eq(lstats_of(cust).items, 0);
	ck_assert_int_eq(lru_tenant_destroy(cust), -EBUSY);
	ck_assert_uint_eq(lstats_of(db).items, 10);
	ck_assert_int_eq(lru_tenant_destroy(db), 0);
	ck_assert_uint_eq(usage_of(lru_tenant_group(cust)), 0);
	ck_assert_int_eq(lru_tenant_destroy(cust), 0);
	ck_assert_int_eq(sl_group_lookup(root, "cust", &g), -ENOENT);
	ck_assert_uint_eq(usage_of(root), 0);
	assert_tree_ok(lru_cache_tree(c));
	lru_cache_destroy(c);
}
END_TEST

/* ---- the shared-LRU baseline ---- */

START_TEST(shared_mode_evicts_the_global_lru_whoever_owns_it)
{
	const size_t vlen = 100;
	uint64_t item = lru_item_size(2, vlen);
	struct lru_cache *c = NULL;
	struct lru_tenant *a = NULL, *b = NULL, *x = NULL;
	uint64_t n;

	ck_assert_int_eq(lru_cache_create_shared(6 * item, &c), 0);
	ck_assert_ptr_null(lru_cache_tree(c));
	ck_assert_int_eq(lru_tenant_create(c, NULL, "a", NULL, &a), 0);
	ck_assert_int_eq(lru_tenant_create(c, NULL, "b", NULL, &b), 0);
	ck_assert_int_eq(lru_tenant_create(c, NULL, "a", NULL, &x), -EEXIST);
	ck_assert_int_eq(lru_tenant_create(c, NULL, "a/b", NULL, &x), -EINVAL);
	ck_assert_ptr_null(lru_tenant_group(a));

	for (n = 0; n < 4; n++)
		ck_assert_int_eq(set_n(a, n, 1, vlen), 0);
	ck_assert_int_eq(get_n(a, 0, 1, vlen), 0); /* k1 is a's oldest now */
	for (n = 0; n < 4; n++)
		ck_assert_int_eq(set_n(b, n, 1, vlen), 0);
	/* 8 items into 6: the two globally oldest, both a's, went. */
	ck_assert_uint_eq(lstats_of(a).evictions, 2);
	ck_assert_uint_eq(lstats_of(b).evictions, 0);
	ck_assert(!has_n(a, 1));
	ck_assert(!has_n(a, 2));
	ck_assert(has_n(a, 0));
	ck_assert(has_n(a, 3));
	ck_assert_uint_eq(lstats_of(a).bytes + lstats_of(b).bytes, 6 * item);
	ck_assert_int_eq(set_n(b, 9, 1, 7 * item), -ENOMEM);
	ck_assert_uint_eq(lstats_of(b).set_fails, 1);

	ck_assert_int_eq(lru_tenant_destroy(a), 0);
	ck_assert_int_eq(set_n(b, 4, 1, vlen), 0);
	ck_assert_int_eq(set_n(b, 5, 1, vlen), 0);
	ck_assert_uint_eq(lstats_of(b).evictions, 0);
	ck_assert_uint_eq(lstats_of(b).items, 6);
	lru_cache_destroy(c);
}
END_TEST

/* ---- threads ---- */

#define MT_THREADS 4
#define MT_TENANTS 4
#define MT_KEYS 2000

struct mt {
	struct lru_tenant *t[MT_TENANTS];
	double until;
	uint64_t seed;
	uint64_t ops;
};

/* Values carry their key number, so a hit can be checked without knowing
 * which thread set it last. */
static void mt_value(unsigned char *v, size_t vlen, uint64_t k)
{
	size_t i;

	for (i = 0; i < vlen; i++)
		v[i] = (unsigned char)(k + i);
}

static void *mt_worker(void *arg)
{
	struct mt *m = arg;
	uint64_t rng = m->seed;
	unsigned char v[512], got[512], want[512];

	while (now_seconds() < m->until) {
		int i;

		for (i = 0; i < 64; i++) {
			struct lru_tenant *t = m->t[rng_range(&rng, 0, MT_TENANTS - 1)];
			uint64_t k = rng_range(&rng, 0, MT_KEYS - 1);
			uint64_t what = rng_range(&rng, 0, 9);
			size_t vlen = (size_t)rng_range(&rng, 1, sizeof(v)), glen = 0;
			char key[32];
			size_t klen = key_of(key, sizeof(key), k);
			int err;

			if (what < 4) {
				mt_value(v, vlen, k);
				err = lru_set(t, key, klen, v, vlen);
				T_CHECK(err == 0 || err == -ENOMEM, "set: %d", err);
			} else if (what < 9) {
				err = lru_get(t, key, klen, got, sizeof(got), &glen);
				T_CHECK(err == 0 || err == -ENOENT, "get: %d", err);
				if (err == 0) {
					mt_value(want, glen, k);
					T_CHECK(memcmp(got, want, glen) == 0, "torn value for key %" PRIu64, k);
				}
			} else {
				err = lru_delete(t, key, klen);
				T_CHECK(err == 0 || err == -ENOENT, "delete: %d", err);
			}
			m->ops++;
		}
	}
	return NULL;
}

/*
 * Threads set, get and delete on every tenant, so each one's sets reclaim
 * from tenants other threads are using, including ones they hold at that
 * moment.  One tenant has a high, so sl_handle_over_high() runs too.
 */
START_TEST(threads_set_and_get_across_tenants_that_evict_each_other)
{
	uint64_t budget = 400 * lru_item_size(5, 512);
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, budget);
	struct mt m[MT_THREADS];
	pthread_t th[MT_THREADS];
	struct lru_tenant *t[MT_TENANTS];
	struct sl_limits lim;
	uint64_t ops = 0, evictions = 0;
	int i;

	thread_failure_reset();
	t[0] = tenant_new(c, NULL, "a", budget / 4, SL_UNLIMITED);
	t[1] = tenant_new(c, NULL, "b", 0, budget / 2);
	t[2] = tenant_new(c, NULL, "cust", budget / 4, SL_UNLIMITED);
	t[3] = tenant_new(c, t[2], "db", 0, SL_UNLIMITED);
	ck_assert_int_eq(sl_group_limits(lru_tenant_group(t[1]), &lim), 0);
	lim.high = budget / 8;
	ck_assert_int_eq(sl_group_set_limits(lru_tenant_group(t[1]), &lim), 0);

	for (i = 0; i < MT_THREADS; i++) {
		memcpy(m[i].t, t, sizeof(t));
		m[i].until = now_seconds() + test_seconds("SL_LRU_SECONDS", 1.0);
		m[i].seed = 1234567 + (uint64_t)i * 7919;
		m[i].ops = 0;
		start_thread(&th[i], mt_worker, &m[i]);
	}
	for (i = 0; i < MT_THREADS; i++) {
		join_thread(th[i]);
		ops += m[i].ops;
	}
	ASSERT_NO_THREAD_FAILURE();
	ck_assert_uint_gt(ops, 0);
	for (i = 0; i < MT_TENANTS; i++) {
		assert_bytes_are_usage_less(t[i], i == 2 ? t[3] : NULL, lru_tenant_name(t[i]));
		evictions += lstats_of(t[i]).evictions;
	}
	ck_assert_uint_gt(evictions, 0);
	ck_assert_uint_le(usage_of(sl_tree_root(lru_cache_tree(c))), budget);
	assert_tree_ok(lru_cache_tree(c));
	for (i = MT_TENANTS - 1; i >= 0; i--)
		if (i != 2)
			ck_assert_int_eq(lru_tenant_destroy(t[i]), 0);
	ck_assert_int_eq(lru_tenant_destroy(t[2]), 0);
	ck_assert_uint_eq(usage_of(sl_tree_root(lru_cache_tree(c))), 0);
	lru_cache_destroy(c);
}
END_TEST

/* Items whose host flags are 1 are dead to the host (expired, flushed). */
static bool live_unless_flagged(void *ctx, const struct lru_meta *m)
{
	(void)ctx;
	return m->flags != 1;
}

START_TEST(a_dead_item_never_answers_for_another_key_of_its_chain)
{
	static const struct lru_hooks hooks = { .live = live_unless_flagged };
	struct lru_cache *c = cache_new(_i, SL_POLICY_GUARANTEE, SL_UNLIMITED);
	struct lru_tenant *t;
	unsigned char v[16];
	char k[32];
	uint64_t n;

	ck_assert_int_eq(lru_cache_set_hooks(c, &hooks, NULL), 0); /* before any tenant */
	t = tenant_new(c, NULL, "t", 0, SL_UNLIMITED);
	/* Enough keys that chains hold several, every other one dead. */
	for (n = 0; n < 4000; n++) {
		struct lru_meta m = { .flags = (uint32_t)(n % 2) };
		size_t klen = key_of(k, sizeof(k), n);

		value_of(v, sizeof(v), n, 1);
		ck_assert_int_eq(lru_store(t, k, klen, v, sizeof(v), &m, LRU_ALWAYS, NULL), 0);
	}
	for (n = 0; n < 4000; n++)
		ck_assert_int_eq(get_n(t, n, 1, sizeof(v)), n % 2 ? -ENOENT : 0);
	ck_assert_uint_eq(lstats_of(t).items, 2000);
	assert_bytes_are_usage(t, "dead items freed");
	lru_cache_destroy(c);
}
END_TEST

static Suite *lru_suite(void)
{
	Suite *s = suite_create("lru");
	TCase *tc;

	tc = tcase_create("get set delete");
	tcase_add_loop_test(tc, set_then_get_returns_the_value_and_delete_removes_it, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, many_keys_survive_the_table_growing, 0, SL_TEST_NBATCH);
	tcase_add_test(tc, bad_arguments_are_einval);
	tcase_add_loop_test(tc, a_dead_item_never_answers_for_another_key_of_its_chain, 0,
			    SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("eviction");
	tcase_add_loop_test(tc, eviction_within_a_tenant_takes_the_least_recently_used_first, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, a_tenant_within_its_soft_limit_is_not_evicted_while_another_is_over_its_own,
			    0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, oldest_is_the_item_eviction_would_take_next, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("enomem");
	tcase_add_loop_test(tc, set_larger_than_max_fails_with_enomem_and_evicts_nothing, 0,
			    SL_TEST_NBATCH);
	tcase_add_loop_test(tc, set_at_max_fails_with_enomem_when_nothing_is_evictable, 0,
			    SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("exactness");
	tcase_add_loop_test(tc, usage_equals_the_tenants_bytes_after_any_sequence, 0, SL_TEST_NBATCH);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("ghosts");
	tcase_add_loop_test(tc, ghosts_report_refaults_of_evicted_keys_and_are_charged, 0, SL_TEST_NBATCH);
	tcase_add_loop_test(tc, ghosts_go_with_their_tenant, 0, SL_TEST_NBATCH);
	suite_add_tcase(s, tc);

	tc = tcase_create("tenants");
	tcase_add_loop_test(tc, tenants_nest_and_destroying_one_returns_its_bytes, 0, SL_TEST_NBATCH);
	tcase_add_test(tc, shared_mode_evicts_the_global_lru_whoever_owns_it);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_add_loop_test(tc, threads_set_and_get_across_tenants_that_evict_each_other, 0,
			    SL_TEST_NBATCH);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(lru_suite());
}
