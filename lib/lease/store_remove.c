/* SPDX-License-Identifier: MIT */
/*
 * The shm: store's remove_store (store.h), apart from store_shm.c because
 * it needs nothing of the object's layout: sl_lease_store_remove() (store.c)
 * looks the URL up as an open does and lands here for shm:NAME.
 */
#include "lease_int.h"

#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>

/*
 * shm:NAME is the object /softlimit-NAME (store_shm.c).  Unlinking it is
 * the whole removal: a process that has it mapped keeps its mapping, and
 * finds the name gone or another object at its next check, which it takes
 * for a wiped store.
 */
int sl__shm_remove_store(const char *rest, const struct sl_lease_store_opts *opts)
{
	char name[SL_LEASE_NAME_MAX + 16];

	(void)opts; /* no wait: shm_unlink() does not block */
	if (!sl__lease_name_ok(rest))
		return -EINVAL;
	snprintf(name, sizeof(name), "/softlimit-%s", rest);
	if (shm_unlink(name) != 0)
		return errno == ENOENT ? -ENOENT : errno == EACCES ? -EACCES : -EIO;
	return 0;
}
