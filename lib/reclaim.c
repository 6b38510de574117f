/* SPDX-License-Identifier: MIT */
#include "internal.h"

uint64_t sl__reclaim_for_charge(sl_group *at, uint64_t need)
{
	(void)at;
	(void)need;
	return 0;
}

uint64_t sl_reclaim(sl_group *scope, uint64_t target, unsigned flags)
{
	(void)scope;
	(void)target;
	(void)flags;
	return 0;
}
