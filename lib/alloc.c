/* SPDX-License-Identifier: MIT */
/*
 * Every allocation the library makes goes through these, so that a test can
 * make them fail on demand and check that each public call then fails
 * cleanly with -ENOMEM (or degrades, where the contract says so) and leaves
 * the tree as it was.  The check is one relaxed load on paths that are
 * about to call malloc anyway.
 */
#include "internal.h"

#include "testing.h"

#include <stdlib.h>

/* < 0: never fail; otherwise allocations left before failing starts. */
static sl_atomic64 fail_after = (uint64_t)-1;
static _Atomic bool fail_sticky;

void sl__fault_inject(long after, bool sticky)
{
	sl__store(&fail_sticky, sticky, SL_RELAXED);
	sl__store(&fail_after, (uint64_t)after, SL_RELAXED);
}

static bool should_fail(void)
{
	uint64_t left = sl__load(&fail_after, SL_RELAXED);

	while (left != (uint64_t)-1) {
		if (left == 0) {
			if (!sl__load(&fail_sticky, SL_RELAXED))
				sl__store(&fail_after, (uint64_t)-1, SL_RELAXED);
			return true;
		}
		if (sl__cas_weak(&fail_after, &left, left - 1, SL_RELAXED, SL_RELAXED))
			return false;
	}
	return false;
}

void *sl__malloc(size_t size)
{
	return should_fail() ? NULL : malloc(size);
}

void *sl__calloc(size_t n, size_t size)
{
	return should_fail() ? NULL : calloc(n, size);
}

void *sl__realloc(void *p, size_t size)
{
	return should_fail() ? NULL : realloc(p, size);
}

void *sl__aligned_alloc(size_t align, size_t size)
{
	return should_fail() ? NULL : aligned_alloc(align, size);
}
