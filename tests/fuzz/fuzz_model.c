/* SPDX-License-Identifier: MIT */
/*
 * A differential fuzzer: the input is decoded into a sequence of API calls on
 * a small tree; each runs on the library and on a plain, sequential model of
 * what the library promises, and after every call results, counters and
 * invariants are compared.  Any mismatch aborts (the fuzzer's crash).
 *
 * Built two ways: with clang's libFuzzer (SL_FUZZ=ON, LLVMFuzzerTestOneInput)
 * and as a standalone driver (fuzz_model_run) that replays files or runs
 * random inputs for a bounded time, which is what .ci/run uses.
 *
 * Limits change in every context a host may change them from: plain code,
 * an sl_group_walk() visitor, and a reclaim callback (the change waits for
 * the next callback to run: of a reclaim, a charge at max or a background
 * round).  Where no reclaim may run, sl_group_set_limits() must give back
 * the stocks of the subtree and return 0 exactly when usage fits the new
 * max, and every later charge must meet the new limits whether a stock
 * serves it or not (issue 24).  Background rounds (sl_background_reclaim())
 * run on groups given a headroom.
 *
 * SL_FUZZ_BG_GRANTS=1 also checks that a background round takes no group
 * below its min, nor a group with a headroom below its own soft limit
 * (GUARANTEE and REFAULT): issue 24's defect 3 and its family, which the
 * background code still has; off until that fix is in (it fails within
 * seconds without it).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softlimit/softlimit.h>

#include "fuzz_model.h"

struct mg m[NG];
sl_tree *tree;
enum sl_policy policy;
bool exact;
unsigned cb_calls;
bool cb_dishonest;
bool cb_reentered;
uint64_t cb_asked_max;
struct in_cb in_cb;
bool cb_set_limits;

const uint64_t limit_vals[8] = { 0, 10, 50, 100, 200, 1000, 5000, U };
const uint64_t amount_vals[16] = { 0, 1, 3, 7, 10, 16, 50, 64, 100, 128, 500, 999, 4096, 40000,
				   UINT64_MAX - 5, UINT64_MAX / 2 };

static int trace_on = -1;

void trace(const char *fmt, ...)
{
	va_list ap;

	if (trace_on < 0)
		trace_on = getenv("SL_FUZZ_TRACE") != NULL;
	if (!trace_on)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static bool exhausted(const struct input *in)
{
	return in->n == 0;
}

uint64_t usage_of(int i)
{
	uint64_t u = m[i].own;
	int j;

	for (j = 0; j < NG; j++)
		if (m[j].alive && j != i && m[j].parent == i)
			u += usage_of(j);
	return u;
}

/* j is anc or below it. */
bool below(int j, int anc)
{
	for (; j >= 0; j = m[j].parent)
		if (j == anc)
			return true;
	return false;
}

static int nr_children(int i)
{
	int j, n = 0;

	for (j = 0; j < NG; j++)
		n += m[j].alive && j != i && m[j].parent == i;
	return n;
}

static int over_at(int i, uint64_t amount);

uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}
static void set_limits_in(int ctx, int i, const struct sl_limits *l);

/* The host's charge of amount to i went in. */
static void model_charged(int i, uint64_t amount)
{
	int k;

	m[i].own += amount;
	for (k = i; k >= 0; k = m[k].parent) {
		m[k].high_fresh = false;
		if (usage_of(k) > m[k].lim.max)
			m[k].may_exceed = true;
		if (usage_of(k) > m[k].lim.high)
			m[k].ev_high++;
	}
}

static int index_of(sl_group *g)
{
	int i;

	for (i = 0; i < NG; i++)
		if (m[i].alive && m[i].g == g)
			return i;
	FAIL("callback for a group the model does not know");
}

static uint64_t reclaim_cb(sl_group *g, uint64_t target, void *ctx)
{
	struct mg *x = ctx;
	uint64_t f = target < x->own ? target : x->own;

	if (x != &m[index_of(g)])
		FAIL("callback ctx does not match its group");
	cb_calls++;
	if (in_cb.armed) {
		in_cb.armed = false;
		cb_set_limits = true;
		if (m[in_cb.g].alive)
			set_limits_in(2, in_cb.g, &in_cb.lim);
	}
	if (target > cb_asked_max)
		cb_asked_max = target;
	switch (x->mode) {
	case CB_LIAR: /* frees half, claims everything asked */
		f /= 2;
		cb_dishonest = true;
		break;
	case CB_NOTHING:
		f = 0;
		break;
	case CB_GREEDY: /* frees more than asked (whole objects) */
		f = x->own < 2 * f + 1 ? x->own : 2 * f + 1;
		cb_dishonest = true;
		break;
	case CB_REENTRANT:
		cb_reentered = true;
		/* Nested calls must neither deadlock nor reclaim. */
		if (sl_reclaim(g, 1, 0) != 0)
			FAIL("sl_reclaim nested in a callback returned nonzero");
		if (sl_group_destroy(g) != -EBUSY)
			FAIL("sl_group_destroy in a callback did not return -EBUSY");
		break;
	default:
		break;
	}
	if (f) {
		if (sl_uncharge(g, f) != 0)
			FAIL("host uncharge of %" PRIu64 " it holds failed", f);
		x->own -= f;
	}
	if (x->mode == CB_REENTRANT && f) {
		/* A nested charge is allowed (it never reclaims); keep the
		 * model in step whichever way it goes. */
		int i = index_of(g), at = over_at(i, 1);

		if (sl_charge(g, 1, SL_NORECLAIM) == 0) {
			if (at >= 0)
				FAIL("nested charge passed a max");
			model_charged(i, 1);
			f -= 1;
		} else {
			if (at < 0)
				FAIL("nested charge that fits failed");
			m[at].ev_max++;
			m[at].ev_oom++;
		}
	}
	trace("  callback g%d (mode %d) asked %" PRIu64 ", frees %" PRIu64 "\n", index_of(g), (int)x->mode,
	      target, f);
	if (x->mode == CB_LIAR)
		return target;
	return f;
}

static const struct sl_ops ops = { .reclaim = reclaim_cb };

/* Returns the last byte read: bit 0 was used, the others are free. */
static unsigned decode_limits(struct input *in, struct sl_limits *l)
{
	unsigned last;

	l->min = limit_vals[take(in) & 7];
	l->soft = limit_vals[take(in) & 7];
	l->high = limit_vals[take(in) & 7];
	l->max = limit_vals[take(in) & 7];
	last = take(in);
	if (last & 1) { /* mostly consistent limits */
		if (l->min > l->max)
			l->min = l->max;
		if (l->soft > l->max)
			l->soft = l->max;
	}
	return last;
}

static bool limits_ok(const struct sl_limits *l)
{
	return l->min <= l->max && l->soft <= l->max;
}

int pick_alive(struct input *in)
{
	int k = take(in) % NG, i;

	for (i = 0; i < NG; i++, k = (k + 1) % NG)
		if (m[k].alive)
			return k;
	FAIL("no live group (root gone?)");
}

static void check_all(void)
{
	int i;

	for (i = 0; i < NG; i++) {
		struct sl_stats st;
		uint64_t u;

		if (!m[i].alive)
			continue;
		if (sl_group_stats(m[i].g, &st) != 0)
			FAIL("stats of a live group failed");
		u = usage_of(i);
		if (st.usage != u)
			FAIL("group %d usage %" PRIu64 " model %" PRIu64, i, st.usage, u);
		if (exact && st.stocked)
			FAIL("stocked %" PRIu64 " without stocks", st.stocked);
		if (!m[i].may_exceed && st.usage + st.stocked > m[i].lim.max)
			FAIL("group %d usage+stocked %" PRIu64 " above max %" PRIu64, i, st.usage + st.stocked,
			     m[i].lim.max);
		if (st.events_max != m[i].ev_max || st.events_oom != m[i].ev_oom)
			FAIL("group %d events max/oom %" PRIu64 "/%" PRIu64 " model %" PRIu64 "/%" PRIu64, i,
			     st.events_max, st.events_oom, m[i].ev_max, m[i].ev_oom);
		if (exact && st.events_high != m[i].ev_high)
			FAIL("group %d events high %" PRIu64 " model %" PRIu64, i, st.events_high, m[i].ev_high);
		if (st.peak < st.usage + st.stocked)
			FAIL("peak below usage");
		if (memcmp(&st.limits, &m[i].lim, sizeof(st.limits)) != 0)
			FAIL("limits differ");
	}
	if (sl_tree_check(tree) != 0)
		FAIL("sl_tree_check found a broken invariant");
}

/* Lowest group on i's path that amount does not fit under. */
static int over_at(int i, uint64_t amount)
{
	for (; i >= 0; i = m[i].parent)
		if (usage_of(i) + amount > m[i].lim.max || usage_of(i) + amount < amount)
			return i;
	return -1;
}

static void op_create(struct input *in)
{
	struct sl_limits l;
	char name[16];
	int parent = pick_alive(in), slot = -1, sib = -1, i, rc;
	bool clash = (take(in) & 3) == 0;
	sl_group *g = NULL;

	decode_limits(in, &l);
	for (i = NG - 1; i > 0; i--) {
		if (!m[i].alive)
			slot = i;
		else if (clash && m[i].parent == parent)
			sib = i;
	}
	if (slot < 0)
		return;
	/* Slot numbers make names unique; a clash reuses a live sibling's. */
	snprintf(name, sizeof(name), "g%d", sib >= 0 ? sib : slot);
	rc = sl_group_create(m[parent].g, name, &l, &ops, &m[slot], &g);
	trace("create g%d under g%d max %" PRIu64 ": %d\n", slot, parent, l.max, rc);
	if (!limits_ok(&l)) {
		if (rc != -EINVAL)
			FAIL("create with bad limits gave %d", rc);
		return;
	}
	if (sib >= 0) {
		if (rc != -EEXIST)
			FAIL("create with a sibling's name gave %d", rc);
		return;
	}
	if (rc != 0)
		FAIL("create gave %d", rc);
	m[slot] = (struct mg){ .alive = true, .parent = parent, .lim = l, .g = g,
			       .mode = (enum cb_mode)(take(in) % CB_MODES) };
}

static void op_destroy(struct input *in)
{
	int i = pick_alive(in), rc = sl_group_destroy(m[i].g);

	trace("destroy g%d: %d\n", i, rc);
	if (i == 0) {
		if (rc != -EINVAL)
			FAIL("destroying the root gave %d", rc);
		return;
	}
	if (nr_children(i) || usage_of(i)) {
		if (rc != -EBUSY)
			FAIL("destroy of a busy group gave %d", rc);
		return;
	}
	if (rc != 0)
		FAIL("destroy of an idle group gave %d", rc);
	m[i].alive = false;
}

/* The limits of i changed: the first charge through i meets them. */
static void limits_changed(int i)
{
	m[i].high_fresh = true;
}

/*
 * sl_group_set_limits(i, l) in context ctx (0 plain, 1 a walk visitor, 2 a
 * reclaim callback) and what the model expects of it.  Where no reclaim may
 * run (1, 2), the stocks of i's subtree go back and the answer is exact:
 * 0 when the host's usage fits the new max, else -EBUSY.
 */
static void set_limits_in(int ctx, int i, const struct sl_limits *l)
{
	int rc;

	/* The new limits are in force while set_limits reclaims toward
	 * them: callbacks' nested charges see them. */
	if (limits_ok(l))
		m[i].lim = *l;
	rc = sl_group_set_limits(m[i].g, l);
	trace("set_limits g%d (%s) min %" PRIu64 " soft %" PRIu64 " high %" PRIu64 " max %" PRIu64 ": %d\n", i,
	      ctx == 0 ? "plain" : ctx == 1 ? "in a walk" : "in a callback", l->min, l->soft, l->high, l->max, rc);
	if (!limits_ok(l)) {
		if (rc != -EINVAL)
			FAIL("set_limits with bad limits gave %d", rc);
		return;
	}
	if (rc == 0 && usage_of(i) > l->max)
		FAIL("set_limits said usage fits but it does not");
	if (rc == -EBUSY && usage_of(i) <= l->max && (exact || ctx))
		FAIL("set_limits said -EBUSY but usage %" PRIu64 " fits max %" PRIu64, usage_of(i), l->max);
	if (rc != 0 && rc != -EBUSY)
		FAIL("set_limits gave %d", rc);
	if (rc == -EBUSY)
		m[i].may_exceed = true;
	limits_changed(i);
}

struct walk_set {
	int i;
	const struct sl_limits *lim;
	int done;
};

static int walk_set_limits(sl_group *g, unsigned depth, void *arg)
{
	struct walk_set *ws = arg;

	(void)depth;
	if (g == m[ws->i].g) {
		set_limits_in(1, ws->i, ws->lim);
		ws->done++;
	}
	return 0;
}

static void op_set_limits(struct input *in)
{
	struct sl_limits l;
	int i = pick_alive(in);
	/* The limits' last byte has bits to spare: they pick the context,
	 * so corpus inputs from before contexts keep their calls. */
	unsigned ctx = (decode_limits(in, &l) >> 1) & 3;

	if (ctx == 1) {
		struct walk_set ws = { i, &l, 0 };

		if (sl_group_walk(m[0].g, walk_set_limits, &ws) != 0 || ws.done != 1)
			FAIL("walk to set limits of g%d", i);
	} else if (ctx == 2) {
		/* At the next callback of a reclaim, a charge at max or a
		 * background round; replaces one still waiting. */
		in_cb.armed = true;
		in_cb.g = i;
		in_cb.lim = l;
	} else {
		set_limits_in(0, i, &l);
	}
}

/* Units the (only) thread's stock holds for i itself. */
static uint64_t stock_of(int i)
{
	struct sl_stats st;
	uint64_t units;
	int j;

	sl_group_stats(m[i].g, &st);
	units = st.stocked;
	for (j = 0; j < NG; j++) {
		if (m[j].alive && j != i && m[j].parent == i) {
			sl_group_stats(m[j].g, &st);
			units -= st.stocked;
		}
	}
	return units;
}

/* A forced charge went through some group on i's path. */
static bool path_forced(int i)
{
	for (; i >= 0; i = m[i].parent)
		if (m[i].forced)
			return true;
	return false;
}

/*
 * After a charge of amount to i that succeeded, before the model takes it:
 * a group whose limits changed since the last charge through it (nested
 * ones in callbacks included), and whose usage the charge takes past its
 * high, counted a high event and the thread's flag is up, stock or no
 * stock (issue 24, defect 2).
 */
static void check_fresh_high(int i, uint64_t amount, const uint64_t *high_before)
{
	struct sl_stats st;
	int k;

	for (k = i; k >= 0; k = m[k].parent) {
		if (m[k].high_fresh && !cb_set_limits && usage_of(k) + amount > m[k].lim.high) {
			sl_group_stats(m[k].g, &st);
			if (st.events_high <= high_before[k])
				FAIL("g%d: a charge took usage %" PRIu64 " past a new high %" PRIu64 " unseen", k,
				     usage_of(k) + amount, m[k].lim.high);
			if (!sl_high_pending())
				FAIL("g%d: a charge past a new high left no pending flag", k);
		}
	}
}

static void op_charge(struct input *in)
{
	uint64_t high_before[NG];
	int i = pick_alive(in), rc, first, k;
	uint64_t amount = amount_vals[take(in) & 15];
	/* Bit 2 of the input asks for an unknown flag (1 << 3; 1 << 2 is
	 * SL_TRY, which only changes the oom event count). */
	unsigned flags = take(in) & 7, calls;
	bool overflow = false;
	struct sl_stats st;

	/* Overflow is judged on the counters, stocks included. */
	for (k = i; k >= 0; k = m[k].parent) {
		sl_group_stats(m[k].g, &st);
		if (st.usage + st.stocked > UINT64_MAX - amount)
			overflow = true;
	}
	first = over_at(i, amount);
	/* Units already in this thread's stock for i were charged when they
	 * fit: handing them out passes no max, even over a max that a forced
	 * charge has since put the group above.  A limit change gives them
	 * back (issue 24): after one, stocks hold only what fits under it. */
	if (first >= 0 && !exact && amount <= sl_tree_batch(tree) && stock_of(i) >= amount && path_forced(i))
		first = -1;
	if (flags & 4)
		flags = (flags & 3) | (1u << 3);
	for (k = i; k >= 0; k = m[k].parent) {
		sl_group_stats(m[k].g, &st);
		high_before[k] = st.events_high;
	}
	calls = cb_calls;
	cb_set_limits = false;
	rc = sl_charge(m[i].g, amount, flags);
	trace("charge g%d %" PRIu64 " flags %u: %d\n", i, amount, flags, rc);
	if (flags & (1u << 3)) {
		if (rc != -EINVAL)
			FAIL("unknown flag gave %d", rc);
		return;
	}
	if (amount == 0) {
		if (rc != 0 || cb_calls != calls)
			FAIL("charge of 0 gave %d", rc);
		return;
	}
	if (overflow) {
		/* Where the overflow and a max meet on one path, which one the
		 * charge runs into first depends on stocks and reclaim: accept
		 * either answer and take the events as counted. */
		if (rc != 0 && rc != -EINVAL && rc != -ENOMEM)
			FAIL("overflowing charge gave %d", rc);
		if (rc == 0)
			model_charged(i, amount);
		for (k = 0; k < NG; k++) {
			if (!m[k].alive)
				continue;
			sl_group_stats(m[k].g, &st);
			m[k].ev_max = st.events_max;
			m[k].ev_oom = st.events_oom;
			m[k].ev_high = st.events_high;
			m[k].may_exceed = true;
			m[k].forced = true;
			m[k].high_fresh = false;
		}
		return;
	}
	if (first < 0) {
		/* Fits by real usage: nothing may be reclaimed or counted. */
		if (rc != 0 || cb_calls != calls)
			FAIL("charge that fits gave %d (%u callbacks)", rc, cb_calls - calls);
	} else {
		m[first].ev_max++;
		if ((flags & SL_NORECLAIM) && cb_calls != calls)
			FAIL("SL_NORECLAIM charge called a callback");
		if (flags & SL_FORCE) {
			if (rc != 0)
				FAIL("forced charge gave %d", rc);
			for (k = i; k >= 0; k = m[k].parent)
				m[k].forced = true;
		} else if (rc == -ENOMEM) {
			int last = over_at(i, amount);

			if (last < 0)
				FAIL("charge failed although it fits after reclaim");
			m[last].ev_oom++;
		} else if (rc != 0) {
			FAIL("charge gave %d", rc);
		}
	}
	if (rc == 0) {
		check_fresh_high(i, amount, high_before);
		model_charged(i, amount);
	}
}

static void op_uncharge(struct input *in)
{
	int i = pick_alive(in), rc;
	uint64_t amount = amount_vals[take(in) & 15];

	if (take(in) & 1)
		amount = m[i].own ? m[i].own / 2 + 1 : amount;
	rc = sl_uncharge(m[i].g, amount);
	trace("uncharge g%d %" PRIu64 " (holds %" PRIu64 "): %d\n", i, amount, m[i].own, rc);
	if (amount <= m[i].own) {
		if (rc != 0)
			FAIL("uncharge of %" PRIu64 " held %" PRIu64 " gave %d", amount, m[i].own, rc);
		m[i].own -= amount;
	} else {
		if (rc != -EINVAL)
			FAIL("over-uncharge gave %d", rc);
		m[i].own = 0;
	}
}


static int walk_count(sl_group *g, unsigned depth, void *arg)
{
	(void)g;
	(void)depth;
	++*(int *)arg;
	return 0;
}

static void op_see(struct input *in)
{
	int i = pick_alive(in), n = 0, alive = 0, j;
	char path[128];
	sl_group *g;

	if (sl_group_path(m[i].g, path, sizeof(path)) != 0)
		FAIL("path failed");
	if (sl_group_lookup(m[0].g, path, &g) != 0 || g != m[i].g)
		FAIL("lookup of '%s' did not find its group", path);
	sl_group_walk(m[0].g, walk_count, &n);
	for (j = 0; j < NG; j++)
		alive += m[j].alive;
	if (n != alive)
		FAIL("walk saw %d groups, model has %d", n, alive);
	/* A refault report (no input byte: corpus inputs keep their calls);
	 * under REFAULT it reorders later reclaims, which the checks of
	 * op_reclaim() must not notice beyond what GUARANTEE allows. */
	{
		struct sl_stats st;

		if (sl_refault(m[i].g, (uint64_t)n) != 0 || sl_group_stats(m[i].g, &st) != 0)
			FAIL("refault or stats failed");
		m[i].refaults += (uint64_t)n;
		if (st.refaults != m[i].refaults)
			FAIL("group %d refaults %" PRIu64 ", model %" PRIu64, i, st.refaults, m[i].refaults);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct sl_tree_opts o;
	unsigned b, p;
	int steps = 0;

	sl_tree_opts_init(&o);
	p = take(&in);
	o.policy = (enum sl_policy)(p % 3);
	/* Bit 0 of its top part turns GUARANTEE into REFAULT (the same grants,
	 * another order), so corpus inputs from before REFAULT keep theirs. */
	if (o.policy == SL_POLICY_GUARANTEE && (p / 9) % 2)
		o.policy = SL_POLICY_REFAULT;
	b = take(&in) % 3;
	o.batch = b == 0 ? SL_BATCH_NONE : b == 1 ? 16 : 0;
	/* The policy byte's high part picks the reclaim batch: none, small
	 * against the model's limits, or the default (capped at max/16).  The
	 * model's ledger is what the callbacks free, and a charge at max is
	 * judged by whether it fits after reclaim, so a batch changes only how
	 * much such a charge frees; corpus inputs from before the batch keep
	 * their calls. */
	b = (p / 3) % 3;
	o.reclaim_batch = b == 0 ? 0 : b == 1 ? 7 : SL_RECLAIM_BATCH_DEFAULT;
	decode_limits(&in, &o.root);
	if (!limits_ok(&o.root))
		sl_limits_init(&o.root);
	if (sl_tree_create(&o, &tree) != 0)
		FAIL("tree create failed");
	policy = o.policy;
	exact = o.batch == SL_BATCH_NONE;
	memset(m, 0, sizeof(m));
	in_cb.armed = false;
	m[0] = (struct mg){ .alive = true, .parent = -1, .lim = o.root, .g = sl_tree_root(tree) };
	while (!exhausted(&in) && steps++ < 400) {
		unsigned op = take(&in);

		switch (op % 8) {
		case 0:
		case 1:
			op_create(&in);
			break;
		case 2:
			op_destroy(&in);
			break;
		case 3:
			op_set_limits(&in);
			break;
		case 4:
			op_charge(&in);
			break;
		case 5:
			op_uncharge(&in);
			break;
		case 6:
			/* The op byte's high bits, unused before: a quarter of
			 * reclaims become background rounds. */
			if ((op >> 3) % 4 == 3)
				op_background(&in);
			else
				op_reclaim(&in);
			break;
		default:
			op_see(&in);
			break;
		}
		check_all();
	}
	sl_tree_destroy(tree);
	tree = NULL;
	return 0;
}
