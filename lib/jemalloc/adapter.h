/* SPDX-License-Identifier: MIT */
/*
 * The jemalloc adapter's private declarations: the adapter object and the
 * calling thread's allocation in progress, shared by the setup and the
 * allocation path (sl_jemalloc.c) and the extent hooks (hooks.c).
 */
#ifndef SL_JEMALLOC_ADAPTER_H
#define SL_JEMALLOC_ADAPTER_H

#include <softlimit/jemalloc.h>

#include <stdbool.h>
#include <stdint.h>

#include <jemalloc/jemalloc.h>

#include "atomic.h"

struct sl_jemalloc {
	/* First: the hooks receive &a->hooks and find the adapter from it. */
	extent_hooks_t hooks;
	extent_hooks_t *dflt; /* the default hooks, which ours wrap */
	sl_group *group;
	struct sl_jemalloc_ops ops;
	void *ctx;
	unsigned arena;
	bool arena_live;
	int flags; /* MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE */
	size_t purge_mib[3];
	size_t page;
	/* Bytes the hooks hold charged to group; what sl_jemalloc_stats() reports. */
	sl_atomic64 charged;
	/* Bytes the host's evict said it freed: room in the arena for an
	 * allocation at max even when no page came free (alloc_at_max()). */
	sl_atomic64 evicted;
};

/*
 * The calling thread's allocation in progress: a reservation already charged
 * to the group, which the hooks consume before charging, and the amount a
 * hook was refused.  Only sl_jemalloc_alloc() sets a; hooks running for
 * another adapter, or in a thread that is purging, see a != theirs.
 *
 * refused_by is the adapter whose commit this thread was last refused, until
 * a charge for it succeeds or a grow is declined.  When a commit of retained
 * memory is refused, jemalloc goes on to grow its retained memory, maps a new
 * and larger chunk, is refused its commit too and keeps the chunk: at max,
 * every failed allocation would leave more virtual memory behind (jemalloc
 * 5.3 maps with MAP_NORESERVE, so this is address space and VMAs, not RSS).
 * The alloc hook declines that grow instead.  sl_jemalloc_alloc() clears it
 * first; a host calling mallocx() itself may see one NULL too many after a
 * refusal, never a grow past the max.
 *
 * initial-exec like the core's stocks: no lazy TLS allocation inside a hook.
 */
struct sl__je_tls {
	sl_jemalloc *a;
	uint64_t reserved;
	uint64_t refused;
	sl_jemalloc *refused_by;
};
extern _Thread_local struct sl__je_tls sl__je_tls __attribute__((tls_model("initial-exec")));

/* hooks.c */
/* The hooks that wrap a->dflt, into a->hooks. */
void sl__je_hooks_init(sl_jemalloc *a);
/* Give back n bytes the hooks held charged. */
void sl__je_uncharge(sl_jemalloc *a, uint64_t n);

#endif /* SL_JEMALLOC_ADAPTER_H */
