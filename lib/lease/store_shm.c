/* SPDX-License-Identifier: MIT */
/*
 * shm:NAME, the store of one host's processes: a POSIX shared-memory object
 * /softlimit-NAME holding a header (with a robust process-shared mutex), a
 * table of budgets and a table of participant slots.
 *
 * Crashes.  A process may die anywhere, also while it holds the mutex.  So:
 *  - every budget and slot has two copies and an index to the current one,
 *    stored last (release): a write fills the other copy and flips the
 *    index, so a half-written entry is never current;
 *  - the totals kept beside the tables (records per budget, entries in use)
 *    are never trusted after a crash: the next locker gets EOWNERDEAD and
 *    rebuilds them from the entries before it marks the mutex consistent;
 *  - a slot is stamped with its process's pid and start time (field 22 of
 *    /proc/PID/stat), so a dead process's slot, or a slot whose pid was
 *    reused, is found and freed by the next read; the check runs outside the
 *    lock, and the free under it only if the slot has not changed since.
 * A stopped process can hold the mutex forever: it is held only across
 * copies to and from the tables, and taken with a timeout (-ETIMEDOUT).
 *
 * Wipes.  If the name is unlinked and created again, the object is another
 * one with another incarnation: every call first checks that the name still
 * refers to the mapped object and maps the new one if not, so holders see
 * the new incarnation and know their records are gone.
 */
#include "lease_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC UINT64_C(0x657361656c2d6c73) /* "sl-lease", little-endian */
#define SHM_LAYOUT 1u
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

struct shm_state {
	char name[SHM_NAME_MAX];
	char node[64];
	uint32_t timeout_ms;
	uint32_t slots;
	struct shm_header *h;
	size_t size;
	dev_t dev;
	ino_t ino;
};

static struct shm_budget *budgets(struct shm_header *h)
{
	return (struct shm_budget *)(void *)((char *)h + sizeof(*h));
}

static struct shm_slot *slots(struct shm_header *h)
{
	return (struct shm_slot *)(void *)((char *)budgets(h) + h->nbudgets * sizeof(struct shm_budget));
}

static size_t object_size(uint32_t nbudgets, uint32_t nslots)
{
	return sizeof(struct shm_header) + nbudgets * sizeof(struct shm_budget) +
	       nslots * sizeof(struct shm_slot);
}

static struct shm_budget_data *bcur(struct shm_budget *b)
{
	return &b->d[atomic_load_explicit(&b->cur, memory_order_relaxed) & 1];
}

static struct shm_slot_data *scur(struct shm_slot *s)
{
	return &s->d[atomic_load_explicit(&s->cur, memory_order_relaxed) & 1];
}

/* Fill the other copy, then flip: release orders the copy before the index,
 * so a process that dies between the two leaves the old copy current. */
static void bput(struct shm_budget *b, const struct shm_budget_data *d)
{
	uint32_t next = (atomic_load_explicit(&b->cur, memory_order_relaxed) & 1) ^ 1;

	b->d[next] = *d;
	atomic_store_explicit(&b->cur, next, memory_order_release);
}

static void sput(struct shm_slot *s, const struct shm_slot_data *d)
{
	uint32_t next = (atomic_load_explicit(&s->cur, memory_order_relaxed) & 1) ^ 1;

	s->d[next] = *d;
	atomic_store_explicit(&s->cur, next, memory_order_release);
}

/* ---- processes ---- */

/* @pid's start time (clock ticks since boot), 0 if it is gone. */
static uint64_t proc_start(pid_t pid)
{
	char path[64], buf[1024];
	const char *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command name (field 2) may hold spaces and parentheses: fields
	 * are counted from its last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	for (field = 2; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	return field == 22 ? strtoull(p, NULL, 10) : 0;
}

static uint64_t self_start(void)
{
	/* Per pid: a fork()ed child has its own. */
	static _Atomic int64_t cached_pid;
	static _Atomic uint64_t cached;
	pid_t pid = getpid();

	if (atomic_load_explicit(&cached_pid, memory_order_acquire) != pid) {
		atomic_store_explicit(&cached, proc_start(pid), memory_order_relaxed);
		/* Release: pairs with the acquire above, the value before the key. */
		atomic_store_explicit(&cached_pid, pid, memory_order_release);
	}
	return atomic_load_explicit(&cached, memory_order_relaxed);
}

static bool proc_alive(pid_t pid, uint64_t start)
{
	if (pid == getpid())
		return start == self_start();
	return pid > 0 && proc_start(pid) == start;
}

/* ---- the object ---- */

static uint64_t random_u64(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = (uint64_t)sl__lease_now_ns() ^ ((uint64_t)getpid() << 32);
	return v ? v : 1;
}

static int init_object(int fd, uint32_t nslots, struct shm_header **out, size_t *size_out)
{
	size_t size = object_size(nslots, nslots);
	pthread_mutexattr_t ma;
	struct shm_header *h;
	int rc;

	if (ftruncate(fd, (off_t)size) < 0)
		return -errno;
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return -errno;
	/* ftruncate() zeroed it: every entry is unused, copy 0 current. */
	h->magic = SHM_MAGIC;
	h->layout = SHM_LAYOUT;
	h->incarnation = random_u64();
	h->size = size;
	h->nbudgets = nslots;
	h->nslots = nslots;
	h->version_seq = 1;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	rc = pthread_mutex_init(&h->mutex, &ma);
	pthread_mutexattr_destroy(&ma);
	if (rc) {
		munmap(h, size);
		return -rc;
	}
	/* Release: pairs with attach_existing()'s acquire: the header before ready. */
	atomic_store_explicit(&h->ready, 1, memory_order_release);
	*out = h;
	*size_out = size;
	return 0;
}

/* Map an object another process created, once its creator has set it up. */
static int attach_existing(struct shm_state *st, int fd, struct shm_header **out, size_t *size_out)
{
	int64_t deadline = sl__lease_now_ns() + (int64_t)st->timeout_ms * 1000000;
	struct timespec nap = { 0, 1000000 };

	for (;;) {
		struct stat sb;

		if (fstat(fd, &sb) < 0)
			return -errno;
		if ((size_t)sb.st_size >= sizeof(struct shm_header)) {
			struct shm_header *h = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE,
						    MAP_SHARED, fd, 0);

			if (h == MAP_FAILED)
				return -errno;
			/* Acquire: pairs with init_object()'s release. */
			if (atomic_load_explicit(&h->ready, memory_order_acquire)) {
				if (h->magic != SHM_MAGIC || h->layout != SHM_LAYOUT ||
				    h->size != (uint64_t)sb.st_size ||
				    h->size != object_size(h->nbudgets, h->nslots)) {
					munmap(h, (size_t)sb.st_size);
					return -EIO;
				}
				*out = h;
				*size_out = (size_t)sb.st_size;
				return 0;
			}
			munmap(h, (size_t)sb.st_size);
		}
		if (sl__lease_now_ns() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
}

static void detach(struct shm_state *st)
{
	if (st->h)
		munmap(st->h, st->size);
	st->h = NULL;
	st->size = 0;
}

/* Map the object named st->name, creating it if there is none. */
static int attach(struct shm_state *st)
{
	struct shm_header *h = NULL;
	size_t size = 0;
	struct stat sb;
	int fd, rc, tries;

	for (tries = 0; tries < 100; tries++) {
		fd = shm_open(st->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			rc = init_object(fd, st->slots, &h, &size);
			if (rc) {
				shm_unlink(st->name);
				close(fd);
				return rc;
			}
			break;
		}
		if (errno != EEXIST)
			return -errno;
		fd = shm_open(st->name, O_RDWR | O_CLOEXEC, 0);
		if (fd < 0) {
			if (errno == ENOENT) /* unlinked since: create it */
				continue;
			return -errno;
		}
		rc = attach_existing(st, fd, &h, &size);
		if (rc) {
			close(fd);
			return rc;
		}
		break;
	}
	if (!h)
		return -EIO;
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
		close(fd);
		munmap(h, size);
		return rc;
	}
	close(fd);
	detach(st);
	st->h = h;
	st->size = size;
	st->dev = sb.st_dev;
	st->ino = sb.st_ino;
	return 0;
}

/* Is the name still the object mapped?  If not (wiped), map the new one. */
static int ensure_current(struct shm_state *st)
{
	struct stat sb;
	int fd = shm_open(st->name, O_RDWR | O_CLOEXEC, 0);

	if (fd >= 0) {
		int same = fstat(fd, &sb) == 0 && sb.st_dev == st->dev && sb.st_ino == st->ino;

		close(fd);
		if (same && st->h)
			return 0;
	} else if (errno != ENOENT) {
		return -errno;
	}
	return attach(st);
}

/* After a locker died: rebuild what is derived from the entries. */
static void repair(struct shm_header *h)
{
	struct shm_budget *b = budgets(h);
	struct shm_slot *sl = slots(h);
	uint64_t vmax = h->version_seq;
	uint32_t i, nb = 0, ns = 0;

	for (i = 0; i < h->nbudgets; i++) {
		struct shm_budget_data *d = bcur(&b[i]);

		b[i].nrec = 0;
		if (d->used && (d->used != 1 || !memchr(d->name, '\0', sizeof(d->name)) ||
				!sl__lease_name_ok(d->name))) {
			struct shm_budget_data z;

			memset(&z, 0, sizeof(z));
			bput(&b[i], &z);
			continue;
		}
		if (d->used) {
			nb++;
			if (d->version > vmax)
				vmax = d->version;
		}
	}
	for (i = 0; i < h->nslots; i++) {
		struct shm_slot_data *d = scur(&sl[i]);

		if (!d->used)
			continue;
		if (d->used != 1 || d->budget >= h->nbudgets || !bcur(&b[d->budget])->used) {
			struct shm_slot_data z;

			memset(&z, 0, sizeof(z));
			z.gen = d->gen + 1;
			sput(&sl[i], &z);
			continue;
		}
		b[d->budget].nrec++;
		ns++;
	}
	h->budgets_used = nb;
	h->slots_used = ns;
	h->version_seq = vmax + 1;
}

static int lock(struct shm_state *st)
{
	struct timespec ts;
	int rc;

	/* timedlock counts on CLOCK_REALTIME; a step of that clock only
	 * lengthens or shortens one wait. */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += st->timeout_ms / 1000;
	ts.tv_nsec += (long)(st->timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	rc = pthread_mutex_timedlock(&st->h->mutex, &ts);
	if (rc == EOWNERDEAD) {
		repair(st->h);
		rc = pthread_mutex_consistent(&st->h->mutex);
		if (rc) {
			pthread_mutex_unlock(&st->h->mutex);
			return -EIO;
		}
		return 0;
	}
	if (rc == ETIMEDOUT)
		return -ETIMEDOUT;
	if (rc)
		return rc == ENOTRECOVERABLE ? -EIO : -rc;
	return 0;
}

static void unlock(struct shm_state *st)
{
	pthread_mutex_unlock(&st->h->mutex);
}

/* Both: ensure_current() then lock(). */
static int enter(struct shm_state *st)
{
	int rc = ensure_current(st);

	return rc ? rc : lock(st);
}

static int find_budget(struct shm_header *h, const char *name)
{
	struct shm_budget *b = budgets(h);
	uint32_t i;

	for (i = 0; i < h->nbudgets; i++) {
		struct shm_budget_data *d = bcur(&b[i]);

		if (d->used && !strncmp(d->name, name, sizeof(d->name)))
			return (int)i;
	}
	return -ENOENT;
}

static int find_slot(struct shm_header *h, uint32_t budget, const char *id)
{
	struct shm_slot *sl = slots(h);
	uint32_t i;

	for (i = 0; i < h->nslots; i++) {
		struct shm_slot_data *d = scur(&sl[i]);

		if (d->used && d->budget == budget && !strncmp(d->id, id, sizeof(d->id)))
			return (int)i;
	}
	return -ENOENT;
}

static void free_slot(struct shm_header *h, uint32_t i)
{
	struct shm_slot *sl = &slots(h)[i];
	struct shm_slot_data z, *d = scur(sl);

	memset(&z, 0, sizeof(z));
	z.gen = d->gen + 1;
	if (d->budget < h->nbudgets && budgets(h)[d->budget].nrec)
		budgets(h)[d->budget].nrec--;
	if (h->slots_used)
		h->slots_used--;
	sput(sl, &z);
}

/* ---- the operations ---- */

static int shm_open_store(const char *rest, const struct sl_lease_store_opts *opts, void **state)
{
	struct shm_state *st;
	int rc;

	if (!sl__lease_name_ok(rest))
		return -EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	snprintf(st->name, sizeof(st->name), "/softlimit-%s", rest);
	st->timeout_ms = opts->timeout_ms;
	st->slots = opts->slots;
	if (opts->node) {
		snprintf(st->node, sizeof(st->node), "%s", opts->node);
	} else {
		size_t i;

		if (gethostname(st->node, 49) < 0 || !st->node[0])
			snprintf(st->node, sizeof(st->node), "localhost");
		st->node[48] = '\0';
		/* A participant id is "node:pid:start:n": keep ':' out of node. */
		for (i = 0; st->node[i]; i++)
			if (st->node[i] == ':')
				st->node[i] = '_';
	}
	rc = attach(st);
	if (rc) {
		free(st);
		return rc;
	}
	*state = st;
	return 0;
}

static void shm_close_store(void *state)
{
	struct shm_state *st = state;

	detach(st);
	free(st);
}

static int shm_budget_set(void *state, const char *name, const struct sl_limits *lim)
{
	struct shm_state *st = state;
	struct shm_budget_data d;
	struct shm_header *h;
	int rc = enter(st), i;

	if (rc)
		return rc;
	h = st->h;
	i = find_budget(h, name);
	if (i < 0) {
		uint32_t j;

		for (j = 0; j < h->nbudgets && bcur(&budgets(h)[j])->used; j++)
			;
		if (j == h->nbudgets) {
			unlock(st);
			return -ENOSPC;
		}
		i = (int)j;
		memset(&d, 0, sizeof(d));
		d.used = 1;
		snprintf(d.name, sizeof(d.name), "%s", name);
		budgets(h)[i].nrec = 0;
		h->budgets_used++;
	} else {
		d = *bcur(&budgets(h)[i]);
	}
	d.lim = *lim;
	/* New limits change what is free: a grow computed on the old ones
	 * must fail its compare. */
	d.version = ++h->version_seq;
	bput(&budgets(h)[i], &d);
	unlock(st);
	return 0;
}

static int shm_budget_get(void *state, const char *name, struct sl_limits *out)
{
	struct shm_state *st = state;
	int rc = enter(st), i;

	if (rc)
		return rc;
	i = find_budget(st->h, name);
	if (i >= 0)
		*out = bcur(&budgets(st->h)[i])->lim;
	unlock(st);
	return i < 0 ? i : 0;
}

static int shm_budget_delete(void *state, const char *name)
{
	struct shm_state *st = state;
	struct shm_budget_data z;
	struct shm_header *h;
	uint32_t j;
	int rc = enter(st), i;

	if (rc)
		return rc;
	h = st->h;
	i = find_budget(h, name);
	if (i < 0) {
		unlock(st);
		return i;
	}
	/* Records first: a crash between leaves a budget with fewer records,
	 * never records of no budget. */
	for (j = 0; j < h->nslots; j++) {
		struct shm_slot_data *d = scur(&slots(h)[j]);

		if (d->used && d->budget == (uint32_t)i)
			free_slot(h, j);
	}
	memset(&z, 0, sizeof(z));
	bput(&budgets(h)[i], &z);
	if (h->budgets_used)
		h->budgets_used--;
	unlock(st);
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int shm_budget_list(void *state, char (*names)[SL_LEASE_NAME_MAX], size_t cap, size_t *count)
{
	struct shm_state *st = state;
	char (*all)[SL_LEASE_NAME_MAX];
	uint32_t i, n = 0, nb;
	int rc = ensure_current(st);

	if (rc)
		return rc;
	nb = st->h->nbudgets;
	all = calloc(nb ? nb : 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	rc = lock(st);
	if (rc) {
		free(all);
		return rc;
	}
	for (i = 0; i < nb; i++) {
		struct shm_budget_data *d = bcur(&budgets(st->h)[i]);

		if (d->used)
			memcpy(all[n++], d->name, SL_LEASE_NAME_MAX);
	}
	unlock(st);
	qsort(all, n, sizeof(*all), name_cmp);
	for (i = 0; i < n && i < cap; i++)
		memcpy(names[i], all[i], SL_LEASE_NAME_MAX);
	*count = n;
	free(all);
	return 0;
}

struct raw_slot {
	uint32_t index;
	struct shm_slot_data d;
};

/* Free the slots of dead processes found by a read, each only if unchanged. */
static void reap(struct shm_state *st, const struct raw_slot *dead, size_t n)
{
	size_t i;

	if (!n || lock(st))
		return;
	for (i = 0; i < n; i++) {
		struct shm_slot_data *d = scur(&slots(st->h)[dead[i].index]);

		if (d->used && d->gen == dead[i].d.gen)
			free_slot(st->h, dead[i].index);
	}
	unlock(st);
}

static int shm_read(void *state, const char *budget, struct sl__lease_view *out)
{
	struct shm_state *st = state;
	struct raw_slot *raw;
	size_t n = 0, nlive = 0, ndead = 0, k;
	int64_t now;
	uint32_t i;
	int rc = ensure_current(st), b;

	if (rc)
		return rc;
	raw = calloc(st->h->nslots ? st->h->nslots : 1, sizeof(*raw));
	if (!raw)
		return -ENOMEM;
	rc = lock(st);
	if (rc) {
		free(raw);
		return rc;
	}
	out->incarnation = st->h->incarnation;
	b = find_budget(st->h, budget);
	if (b < 0) {
		unlock(st);
		free(raw);
		return b;
	}
	out->limits = bcur(&budgets(st->h)[b])->lim;
	out->version = bcur(&budgets(st->h)[b])->version;
	for (i = 0; i < st->h->nslots; i++) {
		struct shm_slot_data *d = scur(&slots(st->h)[i]);

		if (d->used && d->budget == (uint32_t)b) {
			raw[n].index = i;
			raw[n].d = *d;
			n++;
		}
	}
	unlock(st);

	out->recs = calloc(n ? n : 1, sizeof(*out->recs));
	if (!out->recs) {
		free(raw);
		return -ENOMEM;
	}
	now = sl__lease_now_ns();
	/* Liveness outside the lock (it reads /proc); dead slots go to the
	 * front of raw, live records to out. */
	for (k = 0; k < n; k++) {
		struct sl__lease_rec *r;
		int64_t left;

		if (!proc_alive(raw[k].d.pid, raw[k].d.start)) {
			raw[ndead++] = raw[k];
			continue;
		}
		r = &out->recs[nlive++];
		memcpy(r->id, raw[k].d.id, sizeof(r->id));
		r->id[sizeof(r->id) - 1] = '\0';
		r->held = raw[k].d.held;
		r->floor = raw[k].d.floor;
		r->usage = raw[k].d.usage;
		r->demand = raw[k].d.demand;
		left = raw[k].d.expires_ns - now;
		r->expires_ms = left > 0 ? left / 1000000 : left / 1000000 - 1;
		/* One host: a live process past its lease still holds its memory. */
		r->state = raw[k].d.expires_ns > now ? SL_LEASE_HELD : SL_LEASE_STALLED;
	}
	out->n = nlive;
	reap(st, raw, ndead);
	free(raw);
	return 0;
}

static int shm_write(void *state, const char *budget, const struct sl__lease_rec *rec,
		     uint32_t ttl_ms, bool grows, uint64_t version, uint64_t incarnation)
{
	struct shm_state *st = state;
	struct shm_budget_data bd;
	struct shm_slot_data d;
	struct shm_header *h;
	int64_t expires = sl__lease_now_ns() + (int64_t)ttl_ms * 1000000;
	uint64_t start = self_start();
	int rc = enter(st), b, i;

	if (rc)
		return rc;
	h = st->h;
	if (h->incarnation != incarnation) {
		unlock(st);
		return -ESTALE;
	}
	b = find_budget(h, budget);
	if (b < 0) {
		unlock(st);
		return b;
	}
	bd = *bcur(&budgets(h)[b]);
	if (grows && bd.version != version) {
		unlock(st);
		return -EAGAIN;
	}
	i = find_slot(h, (uint32_t)b, rec->id);
	if (i < 0) {
		uint32_t j;

		/* A new record counts for more than none: only by a grow. */
		if (!grows) {
			unlock(st);
			return -ENOENT;
		}
		for (j = 0; j < h->nslots && scur(&slots(h)[j])->used; j++)
			;
		if (j == h->nslots) {
			unlock(st);
			return -ENOSPC;
		}
		i = (int)j;
		budgets(h)[b].nrec++;
		h->slots_used++;
	}
	memset(&d, 0, sizeof(d));
	d.used = 1;
	d.budget = (uint32_t)b;
	d.pid = (int32_t)getpid();
	d.start = start;
	d.gen = scur(&slots(h)[i])->gen + 1;
	memcpy(d.id, rec->id, sizeof(d.id));
	d.id[sizeof(d.id) - 1] = '\0';
	d.held = rec->held;
	d.floor = rec->floor;
	d.usage = rec->usage;
	d.demand = rec->demand;
	d.expires_ns = expires;
	sput(&slots(h)[i], &d);
	if (grows) {
		bd.version = ++h->version_seq;
		bput(&budgets(h)[b], &bd);
	}
	unlock(st);
	return 0;
}

static int shm_remove(void *state, const char *budget, const char *id)
{
	struct shm_state *st = state;
	int rc = enter(st), b, i;

	if (rc)
		return rc;
	b = find_budget(st->h, budget);
	i = b < 0 ? b : find_slot(st->h, (uint32_t)b, id);
	if (i >= 0)
		free_slot(st->h, (uint32_t)i);
	unlock(st);
	return i < 0 ? i : 0;
}

static int shm_make_id(void *state, char id[SL_LEASE_ID_MAX])
{
	/* Process-wide, so two stores of one process never give one id. */
	static atomic_uint_fast64_t seq;
	struct shm_state *st = state;

	snprintf(id, SL_LEASE_ID_MAX, "%s:%d:%llu:%llu", st->node, (int)getpid(),
		 (unsigned long long)self_start(),
		 (unsigned long long)atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed));
	return 0;
}

const struct sl__lease_store_ops sl__lease_store_shm = {
	.scheme = "shm",
	.open = shm_open_store,
	.close = shm_close_store,
	.budget_set = shm_budget_set,
	.budget_get = shm_budget_get,
	.budget_delete = shm_budget_delete,
	.budget_list = shm_budget_list,
	.read = shm_read,
	.write = shm_write,
	.remove = shm_remove,
	.make_id = shm_make_id,
};

/* ---- test hooks (lease_int.h) ---- */

int sl__lease_shm_test_lock(sl_lease_store *s)
{
	return s->ops == &sl__lease_store_shm ? enter(s->state) : -EINVAL;
}

void sl__lease_shm_test_crash_locked(sl_lease_store *s)
{
	struct shm_state *st = s->state;
	struct shm_header *h = st->h;
	uint32_t i;

	/* What a crash in the middle of a write leaves: wrong totals, and the
	 * next copy of every slot in use half-written. */
	h->budgets_used = 7777;
	h->slots_used = 9999;
	for (i = 0; i < h->nbudgets; i++)
		budgets(h)[i].nrec = 4242;
	for (i = 0; i < h->nslots; i++) {
		struct shm_slot *sl = &slots(h)[i];
		uint32_t next = (atomic_load_explicit(&sl->cur, memory_order_relaxed) & 1) ^ 1;

		if (scur(sl)->used)
			memset(&sl->d[next], 0xa5, sizeof(sl->d[next]));
	}
	_exit(0);
}
