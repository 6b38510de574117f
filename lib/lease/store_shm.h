/* SPDX-License-Identifier: MIT */
/*
 * The shm: store's object, shared by store_shm_object.c (mapping, locking,
 * recovery) and store_shm.c (the store's operations): its layout and the
 * calls between the two files.  See store_shm_object.c for how crashes and
 * wipes are survived.
 */
#ifndef SL_LEASE_STORE_SHM_H
#define SL_LEASE_STORE_SHM_H

/* First: it defines _GNU_SOURCE before any system header. */
#include "lease_int.h"

#include <stdatomic.h>
#include <sys/types.h>

#define SHM_MAGIC UINT64_C(0x657361656c2d6c73) /* "sl-lease", little-endian */
/* 2: the same bytes as 1, but liveness by a lock per process and creation
 * under the init lock (store_shm_object.c).  A process of layout 1 holds no
 * such lock and would be taken for dead: the two never share an object
 * (each answers -EIO on the other's). */
#define SHM_LAYOUT 2u
#define SHM_NAME_MAX (sizeof("/softlimit-") + SL_LEASE_NAME_MAX)

struct shm_budget_data {
	uint32_t used;
	uint32_t pad;
	char name[SL_LEASE_NAME_MAX];
	struct sl_limits lim;
	uint64_t version;
};

struct shm_budget {
	_Atomic uint32_t cur; /* the current copy, stored last */
	uint32_t nrec;        /* derived: its slots in use (rebuilt after a crash) */
	struct shm_budget_data d[2];
};

struct shm_slot_data {
	uint32_t used;
	uint32_t budget; /* index in the budget table */
	int32_t pid;
	uint32_t pad;
	uint64_t start; /* the pid's start time: a reused pid is another process */
	uint64_t gen;   /* bumped by every write: a dead slot is freed only unchanged */
	char id[SL_LEASE_ID_MAX];
	uint64_t held, floor, usage, demand;
	int64_t expires_ns; /* CLOCK_MONOTONIC: one clock for the whole host */
};

struct shm_slot {
	_Atomic uint32_t cur;
	uint32_t pad;
	struct shm_slot_data d[2];
};

struct shm_header {
	uint64_t magic;
	uint32_t layout;
	_Atomic uint32_t ready; /* set last by the creator (release) */
	uint64_t incarnation;   /* random, at creation */
	uint64_t size;          /* bytes of the whole object */
	uint32_t nbudgets, nslots;
	uint64_t version_seq;   /* budget versions come from here: never reused */
	uint32_t budgets_used;  /* derived (rebuilt after a crash) */
	uint32_t slots_used;    /* derived (rebuilt after a crash) */
	pthread_mutex_t mutex;
};

/* One object as this process has it open: one fd and one mapping for all of
 * the process's stores on it (store_shm_object.c says why). */
struct shm_obj;

struct shm_state {
	char name[SHM_NAME_MAX];
	char node[64];
	uint32_t timeout_ms;
	uint32_t slots;
	struct shm_obj *obj; /* the object mapped (NULL before the first attach) */
	/* Copies of obj's, fixed while it is mapped: */
	struct shm_header *h;
	size_t size;
	uint32_t nb, ns; /* the tables' lengths when mapped: loop bounds, never re-read */
	int fd;
	dev_t dev;
	ino_t ino;
};

static inline struct shm_budget *budgets(const struct shm_state *st)
{
	return (struct shm_budget *)(void *)((char *)st->h + sizeof(*st->h));
}

static inline struct shm_slot *slots(const struct shm_state *st)
{
	return (struct shm_slot *)(void *)((char *)budgets(st) +
					   st->nb * sizeof(struct shm_budget));
}

static inline size_t object_size(uint32_t nbudgets, uint32_t nslots)
{
	return sizeof(struct shm_header) + nbudgets * sizeof(struct shm_budget) +
	       nslots * sizeof(struct shm_slot);
}

static inline struct shm_budget_data *bcur(struct shm_budget *b)
{
	return &b->d[atomic_load_explicit(&b->cur, memory_order_relaxed) & 1];
}

static inline struct shm_slot_data *scur(struct shm_slot *s)
{
	return &s->d[atomic_load_explicit(&s->cur, memory_order_relaxed) & 1];
}

/* Fill the other copy, then flip: release orders the copy before the index,
 * so a process that dies between the two leaves the old copy current. */
static inline void bput(struct shm_budget *b, const struct shm_budget_data *d)
{
	uint32_t next = (atomic_load_explicit(&b->cur, memory_order_relaxed) & 1) ^ 1;

	b->d[next] = *d;
	atomic_store_explicit(&b->cur, next, memory_order_release);
}

static inline void sput(struct shm_slot *s, const struct shm_slot_data *d)
{
	uint32_t next = (atomic_load_explicit(&s->cur, memory_order_relaxed) & 1) ^ 1;

	s->d[next] = *d;
	atomic_store_explicit(&s->cur, next, memory_order_release);
}

/* A process's start time; liveness of the process stamped @pid, @start on
 * a slot of st's object (it holds its lock on the object, and its start
 * time matches). */
uint64_t sl__shm_self_start(void);
bool sl__shm_proc_alive(const struct shm_state *st, pid_t pid, uint64_t start);

/* Entries as read from shared memory: only a well-formed one counts as in
 * use; anything else is free space (and never returned). */
bool sl__shm_budget_ok(const struct shm_budget_data *d);
bool sl__shm_slot_ok(const struct shm_state *st, const struct shm_slot_data *d);

/* Map st->name (creating or initialising the object if needed); unmap. */
int sl__shm_attach(struct shm_state *st);
void sl__shm_detach(struct shm_state *st);
/* Is the name still the object mapped?  If not (wiped), map the new one. */
int sl__shm_ensure_current(struct shm_state *st);
/* The mutex, within the store's timeout (-ETIMEDOUT); repairs after a
 * holder's death; -EIO if the object is truncated, its header changed or
 * its mutex is garbage.  enter: ensure_current, then lock. */
int sl__shm_lock(struct shm_state *st);
void sl__shm_unlock(struct shm_state *st);
int sl__shm_enter(struct shm_state *st);

#endif /* SL_LEASE_STORE_SHM_H */
