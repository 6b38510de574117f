/* SPDX-License-Identifier: MIT */
/*
 * sl_lease_store_remove(): a store's state outlives the processes that use
 * it (a shared-memory object, keys in etcd); this removes it.  No open
 * store is needed, so the call dispatches on the URL's scheme itself.
 */
#include "lease_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* shm:NAME is the object /softlimit-NAME (store_shm.c). */
static int shm_remove_store(const char *rest)
{
	char name[SL_LEASE_NAME_MAX + 16];

	if (!sl__lease_name_ok(rest))
		return -EINVAL;
	snprintf(name, sizeof(name), "/softlimit-%s", rest);
	if (shm_unlink(name) != 0)
		return errno == ENOENT ? -ENOENT : errno == EACCES ? -EACCES : -EIO;
	return 0;
}

int sl_lease_store_remove(const char *url, const struct sl_lease_store_opts *opts)
{
	struct sl_lease_store_opts o;

	if (!url)
		return -EINVAL;
	if (opts && (opts->size != sizeof(*opts) || opts->reserved != 0))
		return -EINVAL;
	if (!strncmp(url, "shm:", 4))
		return shm_remove_store(url + 4);
	if (!strncmp(url, "etcd:", 5)) {
#ifdef SL_HAVE_ETCD
		if (!sl__lease_store_etcd.remove_store)
			return -EPROTONOSUPPORT;
		if (opts)
			o = *opts;
		else
			sl_lease_store_opts_init(&o);
		return sl__lease_store_etcd.remove_store(url + 5, &o);
#else
		(void)o;
		return -EPROTONOSUPPORT;
#endif
	}
	(void)o;
	return strchr(url, ':') ? -EPROTONOSUPPORT : -EINVAL;
}
