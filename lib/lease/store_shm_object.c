/* SPDX-License-Identifier: MIT */
/*
 * shm:NAME, the store of one host's processes: its object, a POSIX
 * shared-memory object /softlimit-NAME holding a header (with a robust
 * process-shared mutex), a table of budgets and a table of participant
 * slots (store_shm.h); mapping it, locking it, and recovering it.
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
 * Liveness (LMDB's way).  Whether a process is alive is asked of the kernel,
 * not of its main thread: a process whose main thread called pthread_exit()
 * shows a zombie leader in /proc while its other threads run and hold its
 * memory.  Each process that has the object attached holds a POSIX
 * (fcntl, process-associated) write lock on the byte LOCK_BASE + its pid,
 * far beyond the object's end; the kernel drops it only when the whole
 * process is gone.  Another process is alive iff F_GETLK finds that byte
 * locked and its start time (read even from a zombie leader) is the slot's,
 * so a reused pid is still another process.  F_GETLK never reports the
 * caller's own locks: this process's slots are judged by pid == getpid().
 * POSIX locks go when the process closes ANY fd of the inode, so a process
 * keeps exactly one fd per object, open as long as any of its stores maps
 * it: a refcounted registry by dev/ino, under a mutex, that every open,
 * close and identity check goes through (the identity check stat()s the
 * name's path under /dev/shm, where glibc keeps the objects, and never
 * opens it).  A fork()ed child inherits no POSIX lock: it is another
 * process, and opens (and locks) the object again.
 *
 * Creation (LMDB's way too).  Whoever finds the object not ready (its
 * creator right after O_CREAT|O_EXCL included) takes an exclusive lock on
 * the byte LOCK_BASE - 1, polling within the store's timeout, checks again
 * under it, and if it is still not ready initialises the object completely
 * (size, zeroes, header, mutex, ready last).  An initialiser killed midway
 * leaves the lock to the kernel, which drops it, and the next opener
 * initialises the object again: a crash during creation never leaves an
 * object that every open times out on.
 *
 * Corruption.  Nothing read from the object is trusted: an entry that is
 * not well formed is free space, never returned (store_shm.c); the tables'
 * lengths are the ones seen at attach; before each lock the object's size
 * (fstat of the kept fd) and its header are checked again, and a mutex
 * of a kind it never was, or that answers garbage, is -EIO: a truncated or
 * scribbled object gives -EIO, never SIGBUS or an abort in the C library
 * (sl_lease_store_remove() is the way out).
 *
 * Wipes.  If the name is unlinked and created again, the object is another
 * one with another incarnation: every call first checks that the name still
 * refers to the mapped object and maps the new one if not, so holders see
 * the new incarnation and know their records are gone.
 */
#include "store_shm.h"

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

/* The lock bytes: far beyond any object (object_size() of the largest
 * tables is well below 1 GiB), so no lock byte is ever a byte of the table;
 * an off_t of 32 bits still holds LOCK_BASE + any pid (at most 2^22). */
#define LOCK_BASE ((off_t)1 << (sizeof(off_t) > 4 ? 40 : 30))
#define INIT_BYTE (LOCK_BASE - 1)
/* At most what sl_lease_store_opts allows (store.c): bounds what a header
 * may claim before anything is mapped. */
#define SHM_TABLE_MAX 65536u

void (*sl__lease_shm_test_init_hook)(void);

/* ---- processes ---- */

/* @pid's start time (clock ticks since boot), 0 if it is gone.  Whatever
 * the state of its main thread: a zombie leader whose other threads run
 * is a live process (its lock says whether the process is gone). */
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
	if (!p || p[1] != ' ')
		return 0;
	for (field = 2; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	return field == 22 ? strtoull(p, NULL, 10) : 0;
}

uint64_t sl__shm_self_start(void)
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

static struct flock lock_byte(short type, off_t at)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = at;
	fl.l_len = 1;
	return fl;
}

bool sl__shm_proc_alive(const struct shm_state *st, pid_t pid, uint64_t start)
{
	struct flock fl = lock_byte(F_WRLCK, LOCK_BASE + pid);

	if (pid <= 0)
		return false;
	if (pid == getpid())
		return start == sl__shm_self_start();
	/* A failed F_GETLK says nothing: the start time alone decides. */
	if (fcntl(st->fd, F_GETLK, &fl) == 0 && fl.l_type == F_UNLCK)
		return false;
	return proc_start(pid) == start;
}

/* ---- entries ---- */

/* What store.c's sl_lease_budget_set() accepts: lease.c divides by max. */
static bool limits_sane(const struct sl_limits *lim)
{
	return lim->max && lim->max != SL_UNLIMITED && lim->high == SL_UNLIMITED &&
	       lim->soft <= lim->max && lim->min <= lim->max;
}

bool sl__shm_budget_ok(const struct shm_budget_data *d)
{
	return d->used == 1 && memchr(d->name, '\0', sizeof(d->name)) &&
	       sl__lease_name_ok(d->name) && limits_sane(&d->lim);
}

bool sl__shm_slot_ok(const struct shm_state *st, const struct shm_slot_data *d)
{
	return d->used == 1 && d->budget < st->nb &&
	       sl__shm_budget_ok(bcur(&budgets(st)[d->budget])) && d->pid > 0 && d->id[0] && memchr(d->id, '\0', sizeof(d->id)) &&
	       d->floor <= d->held && d->expires_ns >= 0;
}

/* ---- the object ---- */

/* One object as this process has it: the registry's entry. */
struct shm_obj {
	struct shm_obj *next;
	pid_t pid; /* the process that opened it (a fork()ed child has a copy) */
	unsigned refs;
	int fd;
	dev_t dev;
	ino_t ino;
	struct shm_header *h;
	size_t size;
	uint32_t nb, ns;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static struct shm_obj *reg;

static void reg_prepare(void)
{
	pthread_mutex_lock(&reg_lock);
}

static void reg_parent(void)
{
	pthread_mutex_unlock(&reg_lock);
}

/* The child holds none of the parent's locks: its stores open their
 * objects again (the parent's entries stay with the parent's handles). */
static void reg_child(void)
{
	reg = NULL;
	pthread_mutex_unlock(&reg_lock);
}

static void reg_init(void)
{
	pthread_atfork(reg_prepare, reg_parent, reg_child);
}

static struct shm_obj *reg_find(dev_t dev, ino_t ino)
{
	struct shm_obj *o;

	for (o = reg; o; o = o->next)
		if (o->dev == dev && o->ino == ino)
			return o;
	return NULL;
}

/* glibc's shm_open() opens the name under /dev/shm: stat() there finds an
 * object's identity without an fd (closing one would drop the locks). */
static void object_path(const struct shm_state *st, char *buf, size_t size)
{
	snprintf(buf, size, "/dev/shm%s", st->name);
}

static uint64_t random_u64(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = (uint64_t)sl__lease_now_ns() ^ ((uint64_t)getpid() << 32);
	return v ? v : 1;
}

/* The store's mutex: process-shared and robust (a holder may die). */
static void mutex_attr(pthread_mutexattr_t *ma)
{
	pthread_mutexattr_init(ma);
	pthread_mutexattr_setpshared(ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(ma, PTHREAD_MUTEX_ROBUST);
}

/* Whether @m may be handed to pthread_mutex_trylock().  glibc asserts (and
 * aborts the process) on a mutex of a kind it never made, so a scribbled
 * kind must be found before the call; the kind is written only by
 * pthread_mutex_init().  Other C libraries: no such check is known. */
static bool mutex_kind_ok(const pthread_mutex_t *m)
{
#ifdef __GLIBC__
	static _Atomic int kind = -1;
	int k = atomic_load_explicit(&kind, memory_order_relaxed);

	if (k < 0) {
		pthread_mutexattr_t ma;
		pthread_mutex_t ref;

		mutex_attr(&ma);
		pthread_mutex_init(&ref, &ma);
		pthread_mutexattr_destroy(&ma);
		k = ref.__data.__kind;
		pthread_mutex_destroy(&ref);
		atomic_store_explicit(&kind, k, memory_order_relaxed);
	}
	return m->__data.__kind == k;
#else
	(void)m;
	return true;
#endif
}

/* Under the init lock: make the object a store of @nslots, whatever it held. */
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
	/* A dead initialiser's or a scribbler's bytes, ready first among them:
	 * every entry unused, copy 0 current. */
	memset(h, 0, size);
	h->magic = SHM_MAGIC;
	h->layout = SHM_LAYOUT;
	if (sl__lease_shm_test_init_hook)
		sl__lease_shm_test_init_hook();
	h->incarnation = random_u64();
	h->size = size;
	h->nbudgets = nslots;
	h->nslots = nslots;
	h->version_seq = 1;
	mutex_attr(&ma);
	rc = pthread_mutex_init(&h->mutex, &ma);
	pthread_mutexattr_destroy(&ma);
	if (rc) {
		munmap(h, size);
		return -rc;
	}
	/* Release: pairs with map_ready()'s acquire: the header before ready. */
	atomic_store_explicit(&h->ready, 1, memory_order_release);
	*out = h;
	*size_out = size;
	return 0;
}

/* Map the object of @fd if it is ready: 1 mapped, 0 not ready, -EIO if it
 * is marked ready but is not a whole store of this layout. */
static int map_ready(int fd, struct shm_header **out, size_t *size_out)
{
	struct shm_header *h;
	struct stat sb;
	size_t have, size;

	if (fstat(fd, &sb) < 0)
		return -errno;
	have = (size_t)sb.st_size;
	if (have < sizeof(*h))
		return 0; /* no ready flag yet */
	h = mmap(NULL, have, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return -errno;
	/* Acquire: pairs with init_object()'s release. */
	if (atomic_load_explicit(&h->ready, memory_order_acquire) != 1) {
		munmap(h, have);
		return 0;
	}
	size = (size_t)h->size;
	if (h->magic != SHM_MAGIC || h->layout != SHM_LAYOUT || !h->nbudgets || !h->nslots ||
	    h->nbudgets > SHM_TABLE_MAX || h->nslots > SHM_TABLE_MAX ||
	    h->size != object_size(h->nbudgets, h->nslots) || have < size) {
		munmap(h, have);
		return -EIO;
	}
	if (have > size)
		munmap((char *)h + size, have - size); /* keep only what we will check */
	*out = h;
	*size_out = size;
	return 1;
}

/* Does a process hold its liveness byte on @fd's object?  Then an object
 * that is not ready is not a creator's unfinished work but a store in use
 * whose header was damaged: initialising it would wipe the records of
 * live holders, so it is -EIO (remove it), never re-created under them. */
static bool in_use(int fd)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = LOCK_BASE;
	fl.l_len = (off_t)1 << 23; /* every pid: pid_max is at most 2^22 */
	return fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

/* Ready @fd's object: map it, or else initialise it, or wait for whoever
 * does, under the init lock (taken by polling, within @deadline). */
static int ready_object(struct shm_state *st, int fd, int64_t deadline, struct shm_header **out,
			size_t *size_out)
{
	struct flock fl = lock_byte(F_WRLCK, INIT_BYTE);
	long nap_ns = 50000;
	int rc = map_ready(fd, out, size_out);

	if (rc)
		return rc < 0 ? rc : 0;
	/* F_SETLK, not F_SETLKW: a stopped initialiser costs the timeout. */
	while (fcntl(fd, F_SETLK, &fl) < 0) {
		if (errno != EACCES && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (sl__lease_now_ns() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&(struct timespec){ 0, nap_ns }, NULL);
		if (nap_ns < 2000000)
			nap_ns *= 2;
	}
	rc = map_ready(fd, out, size_out);
	if (rc == 0)
		rc = in_use(fd) ? -EIO : init_object(fd, st->slots, out, size_out);
	else if (rc > 0)
		rc = 0;
	fl.l_type = F_UNLCK;
	fcntl(fd, F_SETLK, &fl);
	return rc;
}

/* A new entry for @fd (not in the registry): ready, mapped, locked. */
static int obj_new(struct shm_state *st, int fd, int64_t deadline, struct shm_obj **out)
{
	struct shm_header *h = NULL;
	struct shm_obj *o;
	struct stat sb;
	struct flock fl = lock_byte(F_WRLCK, LOCK_BASE + getpid());
	size_t size = 0;
	int rc;

	if (fstat(fd, &sb) < 0)
		return -errno;
	if (reg_find(sb.st_dev, sb.st_ino)) {
		/* The name was moved onto an object this process has open
		 * between stat() and shm_open() (a rename under /dev/shm):
		 * closing this fd would drop the locks, so it stays open. */
		return -EAGAIN;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	rc = ready_object(st, fd, deadline, &h, &size);
	/* Another process of this pid (another pid namespace) holds the byte:
	 * liveness would be its, not ours. */
	if (!rc && fcntl(fd, F_SETLK, &fl) < 0)
		rc = -EIO;
	if (rc) {
		if (h)
			munmap(h, size);
		free(o);
		return rc;
	}
	o->pid = getpid();
	o->refs = 1;
	o->fd = fd;
	o->dev = sb.st_dev;
	o->ino = sb.st_ino;
	o->h = h;
	o->size = size;
	o->nb = h->nbudgets;
	o->ns = h->nslots;
	o->next = reg;
	reg = o;
	*out = o;
	return 0;
}

/* Under reg_lock: this process's entry of the object named st->name,
 * opening (creating, initialising) it if there is none. */
static int obj_get(struct shm_state *st, struct shm_obj **out)
{
	int64_t deadline = sl__lease_now_ns() + (int64_t)st->timeout_ms * 1000000;
	char path[SHM_NAME_MAX + 16];
	int tries, fd, rc;

	object_path(st, path, sizeof(path));
	for (tries = 0; tries < 100; tries++) {
		struct stat sb;

		if (stat(path, &sb) == 0) {
			struct shm_obj *o = reg_find(sb.st_dev, sb.st_ino);

			if (o) {
				o->refs++;
				*out = o;
				return 0;
			}
			fd = shm_open(st->name, O_RDWR | O_CLOEXEC, 0);
		} else if (errno == ENOENT) {
			fd = shm_open(st->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		} else {
			return -errno;
		}
		if (fd < 0) {
			if (errno == ENOENT || errno == EEXIST) /* unlinked or created since */
				continue;
			return -errno;
		}
		rc = obj_new(st, fd, deadline, out);
		if (rc == -EAGAIN)
			continue; /* fd stays open: see obj_new() */
		if (rc)
			close(fd); /* no lock of ours on it but the init lock: let it go */
		return rc;
	}
	return -EIO;
}

static void obj_put(struct shm_obj *o)
{
	struct shm_obj **pp;

	if (--o->refs)
		return;
	if (o->pid != getpid()) {
		/* A fork()ed child's copy of its parent's entry (no longer in
		 * the child's registry): its memory goes, and its fd too
		 * unless the child has an entry of its own for the inode,
		 * whose locks any close would drop. */
		munmap(o->h, o->size);
		if (!reg_find(o->dev, o->ino))
			close(o->fd);
		free(o);
		return;
	}
	for (pp = &reg; *pp && *pp != o; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = o->next;
	munmap(o->h, o->size);
	close(o->fd); /* and with it the liveness lock */
	free(o);
}

void sl__shm_detach(struct shm_state *st)
{
	if (st->obj) {
		pthread_mutex_lock(&reg_lock);
		obj_put(st->obj);
		pthread_mutex_unlock(&reg_lock);
	}
	st->obj = NULL;
	st->h = NULL;
	st->size = 0;
	st->nb = st->ns = 0;
	st->fd = -1;
}

/*
 * Map the object named st->name, creating it if there is none.  The whole
 * of it under reg_lock, the wait for an initialiser included: two threads
 * of this process must never both hold an fd of one object, as the one
 * closed would drop the other's lock.  Opens are rare; the wait is bounded
 * by the store's timeout.
 */
int sl__shm_attach(struct shm_state *st)
{
	struct shm_obj *o = NULL;
	int rc;

	pthread_once(&reg_once, reg_init);
	pthread_mutex_lock(&reg_lock);
	rc = obj_get(st, &o);
	pthread_mutex_unlock(&reg_lock);
	if (rc)
		return rc;
	sl__shm_detach(st);
	st->obj = o;
	st->h = o->h;
	st->size = o->size;
	st->nb = o->nb;
	st->ns = o->ns;
	st->fd = o->fd;
	st->dev = o->dev;
	st->ino = o->ino;
	return 0;
}

/* Is the name still the object mapped?  If not (wiped), map the new one. */
int sl__shm_ensure_current(struct shm_state *st)
{
	char path[SHM_NAME_MAX + 16];
	struct stat sb;

	object_path(st, path, sizeof(path));
	if (stat(path, &sb) == 0) {
		if (st->obj && sb.st_dev == st->dev && sb.st_ino == st->ino)
			return 0;
	} else if (errno != ENOENT) {
		return -errno;
	}
	return sl__shm_attach(st);
}

/* The object still as mapped: as long, and the same header.  Checked
 * before each lock: a truncated object would raise SIGBUS on access. */
static int check_object(struct shm_state *st)
{
	const struct shm_header *h = st->h;
	struct stat sb;

	if (fstat(st->fd, &sb) < 0 || (uint64_t)sb.st_size < st->size)
		return -EIO;
	if (h->magic != SHM_MAGIC || h->layout != SHM_LAYOUT || h->size != st->size ||
	    h->nbudgets != st->nb || h->nslots != st->ns || !mutex_kind_ok(&h->mutex))
		return -EIO;
	return 0;
}

/* After a locker died: rebuild what is derived from the entries, and
 * clear what is not well formed. */
static void repair(struct shm_state *st)
{
	struct shm_header *h = st->h;
	struct shm_budget *b = budgets(st);
	struct shm_slot *sl = slots(st);
	uint64_t vmax = h->version_seq;
	uint32_t i, nb = 0, ns = 0;

	for (i = 0; i < st->nb; i++) {
		struct shm_budget_data *d = bcur(&b[i]);

		b[i].nrec = 0;
		if (d->used && !sl__shm_budget_ok(d)) {
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
	for (i = 0; i < st->ns; i++) {
		struct shm_slot_data *d = scur(&sl[i]);

		if (!d->used)
			continue;
		if (!sl__shm_slot_ok(st, d)) {
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

/*
 * Take the mutex within the store's timeout.  By trylock and short naps
 * rather than pthread_mutex_timedlock(): the wait counts on CLOCK_MONOTONIC,
 * not on a settable clock, and EOWNERDEAD comes from the one call that
 * every checker (ThreadSanitizer among them) knows to return it.  The lock
 * is held only across copies, so a wait is rare and short.  A mutex whose
 * bytes were scribbled answers anything: all but the four answers of a
 * robust mutex mean a corrupt object (-EIO).
 */
int sl__shm_lock(struct shm_state *st)
{
	int64_t deadline = sl__lease_now_ns() + (int64_t)st->timeout_ms * 1000000;
	long nap_ns = 20000;
	int rc;

	for (;;) {
		rc = check_object(st);
		if (rc)
			return rc;
		rc = pthread_mutex_trylock(&st->h->mutex);
		if (rc != EBUSY)
			break;
		if (sl__lease_now_ns() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&(struct timespec){ 0, nap_ns }, NULL);
		if (nap_ns < 1000000)
			nap_ns *= 2;
	}
	if (rc == EOWNERDEAD) {
		/* Its owner died holding it: nothing it kept beside the
		 * entries can be trusted. */
		repair(st);
		rc = pthread_mutex_consistent(&st->h->mutex);
		if (rc) {
			pthread_mutex_unlock(&st->h->mutex);
			return -EIO;
		}
		return 0;
	}
	return rc ? -EIO : 0;
}

void sl__shm_unlock(struct shm_state *st)
{
	pthread_mutex_unlock(&st->h->mutex);
}

/* Both: sl__shm_ensure_current() then sl__shm_lock(). */
int sl__shm_enter(struct shm_state *st)
{
	int rc = sl__shm_ensure_current(st);

	return rc ? rc : sl__shm_lock(st);
}
