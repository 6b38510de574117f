/* SPDX-License-Identifier: MIT */
/*
 * trace_rand: the deterministic randomness the trace generators share
 * (isolation_trace.c's synthetic mixes, twitter_mix.c's cluster-shaped
 * tenants): splitmix64 and a Zipf sampler over a precomputed CDF.  The same
 * seed gives the same trace on every machine.
 */
#ifndef TRACE_RAND_H
#define TRACE_RAND_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* splitmix64: small, fast, and the same sequence everywhere. */
static inline uint64_t trace_rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double trace_rng_unit(uint64_t *s)
{
	return (double)(trace_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* The unnormalised Zipf CDF over ranks 1..n with exponent @skew (0 is
 * uniform); NULL when out of memory.  The caller frees it. */
static inline double *trace_zipf_cdf(uint64_t n, double skew)
{
	double *cdf = malloc(n * sizeof(double)), acc = 0;

	if (!cdf)
		return NULL;
	for (uint64_t k = 0; k < n; k++) {
		acc += 1.0 / pow((double)(k + 1), skew);
		cdf[k] = acc;
	}
	return cdf;
}

/* A rank in [0, n) drawn from @cdf (trace_zipf_cdf()). */
static inline uint64_t trace_zipf_draw(const double *cdf, uint64_t n, uint64_t *rng)
{
	double u = trace_rng_unit(rng) * cdf[n - 1];
	uint64_t lo = 0, hi = n - 1;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (cdf[mid] >= u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

#endif /* TRACE_RAND_H */
