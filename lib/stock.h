/* SPDX-License-Identifier: MIT */
/*
 * What the three files of the per-thread stocks share and no other file
 * needs: stock.c (the owner's side), stock_take.c (the takers' side),
 * stock_handover.c (the handover).  docs/stocks.md is the design.
 */
#ifndef SL_STOCK_H
#define SL_STOCK_H

/* stock.c: every live stock, linked under the registry lock. */
extern pthread_mutex_t sl__registry_lock;
extern struct sl__stock *sl__registry;
/* stock.c: usage reads (sl__stock_usage()) at work, 0 or 1; a transit
 * waits for it to fall. */
extern sl_atomic32 sl__usage_reads;

/* Give a slot's taken contents back to its group: units leave the path's
 * counters, the ledger becomes the group's local charge. */
static inline void sl__slot_flush(sl_group *g, uint64_t units, uint64_t ledger)
{
	if (ledger)
		sl__fetch_add(&g->local, ledger, SL_RELAXED);
	if (units)
		sl__counter_cancel(g, units);
}

/* stock_take.c: the monotonic clock in ns; the fence (membarrier()), timed:
 * its running average is how long a folder waits for answers. */
uint64_t sl__now_ns(void);
void sl__fence_timed(void);
extern uint64_t sl__fence_ns;
/* stock_take.c: wait until no owner holds units between a slot and the
 * counters; under the registry lock. */
void sl__quiesce_locked(void);

/*
 * Visit every slot of every thread whose word has a bit of mask set and
 * whose group match() accepts, under the registry lock; visit() gets the
 * stock, the slot, its group and the word it read.  The one registry scan.
 */
typedef bool (*sl__match_fn)(const sl_group *p, const void *arg);
typedef void (*sl__visit_fn)(struct sl__stock *s, struct sl__slot *sl, sl_group *p, uint64_t w, void *acc);

void sl__scan_stock(struct sl__stock *s, uint64_t mask, sl__match_fn match, const void *arg, sl__visit_fn visit,
		    void *acc);

/* stock_handover.c */
bool sl__charge_flagged(struct sl__stock *s, sl_group *g, uint64_t amount);
bool sl__fold_by_owners(sl__match_fn match, const void *arg);

#endif /* SL_STOCK_H */
