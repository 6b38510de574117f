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

/* ---- processes ---- */

/* @pid's start time (clock ticks since boot), 0 if it is gone.  A zombie
 * is gone: its memory was freed when it died, whether reaped or not. */
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
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X' || p[2] == 'x')
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

bool sl__shm_proc_alive(pid_t pid, uint64_t start)
{
	if (pid == getpid())
		return start == sl__shm_self_start();
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

void sl__shm_detach(struct shm_state *st)
{
	if (st->h)
		munmap(st->h, st->size);
	st->h = NULL;
	st->size = 0;
}

/* Map the object named st->name, creating it if there is none. */
int sl__shm_attach(struct shm_state *st)
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
	sl__shm_detach(st);
	st->h = h;
	st->size = size;
	st->dev = sb.st_dev;
	st->ino = sb.st_ino;
	return 0;
}

/* Is the name still the object mapped?  If not (wiped), map the new one. */
int sl__shm_ensure_current(struct shm_state *st)
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
	return sl__shm_attach(st);
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

/*
 * Take the mutex within the store's timeout.  By trylock and short naps
 * rather than pthread_mutex_timedlock(): the wait counts on CLOCK_MONOTONIC,
 * not on a settable clock, and EOWNERDEAD comes from the one call that
 * every checker (ThreadSanitizer among them) knows to return it.  The lock
 * is held only across copies, so a wait is rare and short.
 */
int sl__shm_lock(struct shm_state *st)
{
	int64_t deadline = sl__lease_now_ns() + (int64_t)st->timeout_ms * 1000000;
	long nap_ns = 20000;
	int rc;

	for (;;) {
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
		repair(st->h);
		rc = pthread_mutex_consistent(&st->h->mutex);
		if (rc) {
			pthread_mutex_unlock(&st->h->mutex);
			return -EIO;
		}
		return 0;
	}
	if (rc)
		return rc == ENOTRECOVERABLE ? -EIO : -rc;
	return 0;
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
