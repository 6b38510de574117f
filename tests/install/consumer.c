/* SPDX-License-Identifier: MIT */
/*
 * A program outside the project, built against the *installed* softlimit
 * (pkg-config or find_package): the headers, the library and the version
 * must all be found from the install prefix alone.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <softlimit/softlimit.h>

#if !SL_CHECK_VERSION(0, 1, 0)
#error "SL_CHECK_VERSION(0, 1, 0) is false for a 0.1.0 or later header"
#endif
#if SL_CHECK_VERSION(SL_VERSION_MAJOR, SL_VERSION_MINOR, SL_VERSION_PATCH + 1)
#error "SL_CHECK_VERSION() is true for a version newer than the header"
#endif

#define FAIL(...) \
	do { \
		fprintf(stderr, "consumer: " __VA_ARGS__); \
		fputc('\n', stderr); \
		return 1; \
	} while (0)

int main(void)
{
	if (strcmp(sl_version(), SL_VERSION_STRING) != 0)
		FAIL("sl_version() is \"%s\", header says \"%s\"", sl_version(), SL_VERSION_STRING);
	if (sl_version_number() != SL_VERSION_NUMBER)
		FAIL("sl_version_number() is %#x, header says %#x", sl_version_number(),
		     (unsigned)SL_VERSION_NUMBER);

	struct sl_tree_opts opts;
	sl_tree_opts_init(&opts);
	opts.root.max = 4096;
	sl_tree *t;
	int err = sl_tree_create(&opts, &t);
	if (err)
		FAIL("sl_tree_create: %d", err);

	sl_group *g;
	err = sl_group_create(sl_tree_root(t), "consumer", NULL, NULL, NULL, &g);
	if (err)
		FAIL("sl_group_create: %d", err);
	if ((err = sl_charge(g, 4096, 0)) != 0)
		FAIL("sl_charge(4096) under a 4096 max: %d", err);
	if ((err = sl_charge(g, 1, 0)) != -ENOMEM)
		FAIL("sl_charge(1) past max: %d, want -ENOMEM", err);
	if ((err = sl_uncharge(g, 4096)) != 0)
		FAIL("sl_uncharge: %d", err);
	if ((err = sl_group_destroy(g)) != 0)
		FAIL("sl_group_destroy: %d", err);
	sl_tree_destroy(t);

	printf("consumer: softlimit %s ok\n", sl_version());
	return 0;
}
