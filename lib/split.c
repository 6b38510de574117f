/* SPDX-License-Identifier: MIT */
/*
 * The proportional split: amount over parts in proportion to their weights,
 * each part at most its weight, by largest remainder.  Used by pass 2 and by
 * the policies that reclaim in proportion.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 sl_u128;

/* a * b / c without overflow; c > 0. */
uint64_t sl__muldiv(uint64_t a, uint64_t b, uint64_t c)
{
	return (uint64_t)((sl_u128)a * b / c);
}

/* Order of parts for the remainder: larger fractional share first, then
 * larger weight, then position, so that the split is deterministic. */
struct frac {
	uint64_t rem, w;
	size_t i;
};

static int frac_cmp(const void *pa, const void *pb)
{
	const struct frac *a = pa, *b = pb;

	if (a->rem != b->rem)
		return a->rem < b->rem ? 1 : -1;
	if (a->w != b->w)
		return a->w < b->w ? 1 : -1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/*
 * Split amount over parts of weights w[0..k) in proportion, each at most its
 * weight, rounding by largest remainder so that no part is favoured by its
 * position (small steps add up, as PROTECTION's rounds do).  A part of
 * weight 0 gets nothing, whatever happens: weights are what a part may
 * give, so a unit past its weight would come out of a protection.
 */
void sl__split(uint64_t amount, const uint64_t *w, uint64_t *out, size_t k)
{
	uint64_t sum = 0, given = 0;
	struct frac *f;
	size_t i, nf = 0;

	for (i = 0; i < k; i++)
		sum += w[i];
	if (!sum) {
		memset(out, 0, k * sizeof(*out));
		return;
	}
	if (amount > sum)
		amount = sum;
	for (i = 0; i < k; i++) {
		out[i] = (uint64_t)((sl_u128)amount * w[i] / sum);
		given += out[i];
	}
	if (given == amount)
		return;
	/* Each part is short of its exact share by less than one unit, so
	 * fewer units remain than parts below their weight: one unit each. */
	f = sl__malloc(k * sizeof(*f));
	if (!f) {
		/* Without memory for the order: by position, which favours the
		 * first parts by at most one unit each. */
		for (i = 0; given < amount && i < k; i++) {
			if (out[i] < w[i]) {
				out[i]++;
				given++;
			}
		}
		return;
	}
	for (i = 0; i < k; i++) {
		if (out[i] >= w[i])
			continue;
		f[nf].rem = (uint64_t)(((sl_u128)amount * w[i]) % sum);
		f[nf].w = w[i];
		f[nf].i = i;
		nf++;
	}
	qsort(f, nf, sizeof(*f), frac_cmp);
	for (i = 0; given < amount && i < nf; i++, given++)
		out[f[i].i]++;
	free(f);
}
