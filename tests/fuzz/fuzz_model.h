/* SPDX-License-Identifier: MIT */
/*
 * The differential fuzzer's model, shared by its files: fuzz_model.c (the
 * tree, limits, charges and uncharges, the entry point) and fuzz_reclaim.c
 * (reclaims and background rounds, and what the policies grant).
 */
#ifndef SL_FUZZ_MODEL_H
#define SL_FUZZ_MODEL_H

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <softlimit/softlimit.h>

#define NG 8
#define U SL_UNLIMITED

enum cb_mode { CB_HONEST, CB_LIAR, CB_NOTHING, CB_GREEDY, CB_REENTRANT, CB_MODES };

struct mg {
	bool alive;
	int parent;
	uint64_t own;          /* what the host charged here and holds */
	struct sl_limits lim;
	uint64_t ev_max, ev_oom, ev_high;
	uint64_t refaults;     /* what sl_refault() reported here */
	bool may_exceed;       /* a forced charge or a lowered max may leave it above max */
	/* A forced charge went through it: its count may be above a limit
	 * while stocks still hold units charged before, which they hand out
	 * past it (only a limit change gives them back). */
	bool forced;
	/* Its limits changed and no charge went through it since: the first
	 * charge that takes its usage past high counts an event here. */
	bool high_fresh;
	uint64_t headroom;     /* as sl_group_set_headroom() set it */
	enum cb_mode mode;
	sl_group *g;
};

extern struct mg m[NG];
extern sl_tree *tree;
extern enum sl_policy policy;
extern bool exact; /* no stocks: every counter is predictable to the unit */
extern unsigned cb_calls;
extern bool cb_dishonest;
extern bool cb_reentered; /* a callback charged: usages may have risen mid-reclaim */
extern uint64_t cb_asked_max; /* largest target any callback was asked for */

/* A limit change to make inside the next reclaim callback that runs. */
struct in_cb {
	bool armed;
	int g;
	struct sl_limits lim;
};
extern struct in_cb in_cb;
extern bool cb_set_limits; /* a callback changed limits in this op */

extern const uint64_t limit_vals[8];
extern const uint64_t amount_vals[16];

/* SL_FUZZ_TRACE=1 in the environment: print every call, the tree as it
 * stood before each reclaim, and each callback (to read a crash input's
 * story). */
void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define FAIL(...)                                                               \
	do {                                                                    \
		fprintf(stderr, "fuzz_model: mismatch at %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                   \
		fputc('\n', stderr);                                            \
		abort();                                                        \
	} while (0)

struct input {
	const uint8_t *p;
	size_t n;
};

static inline unsigned take(struct input *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

/* fuzz_model.c */
uint64_t usage_of(int i);
uint64_t min_u64(uint64_t a, uint64_t b);
bool below(int j, int anc);
int pick_alive(struct input *in);

/* fuzz_reclaim.c */
void op_reclaim(struct input *in);
void op_background(struct input *in);

#endif /* SL_FUZZ_MODEL_H */
