/* SPDX-License-Identifier: MIT */
/* bench_lease --workload slow-reuse (bench_lease_reuse.c). */
#ifndef BENCH_LEASE_REUSE_H
#define BENCH_LEASE_REUSE_H

#include <stdint.h>

/** Runs the workload: one JSON line per allocator on stdout.  0. */
int bench_lease_reuse(int quick, uint64_t seed);

#endif
