/* SPDX-License-Identifier: MIT */
/*
 * Run-time version checks: the library a program runs against may be newer
 * than the header it was compiled with.
 */
#include "internal.h"

const char *sl_version(void)
{
	return SL_VERSION_STRING;
}

unsigned sl_version_number(void)
{
	return SL_VERSION_NUMBER;
}
