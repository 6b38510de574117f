/* SPDX-License-Identifier: MIT */
/*
 * size.c: SIZE arguments, read by slcache's rules so that an operator
 * writes a budget as she writes a tenant's --tenant NAME:max=SIZE.
 */
#include <errno.h>
#include <stdio.h>

#include "size.h"

int parse_size(const char *s, uint64_t *out)
{
	uint64_t x = 0, mul = 1;
	const char *p = s;

	if (!s || *p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (x > (UINT64_MAX - d) / 10)
			return -ERANGE;
		x = x * 10 + d;
	}
	switch (*p) {
	case 'k': case 'K': mul = 1ull << 10; p++; break;
	case 'm': case 'M': mul = 1ull << 20; p++; break;
	case 'g': case 'G': mul = 1ull << 30; p++; break;
	default: break;
	}
	if (mul != 1 && (*p == 'b' || *p == 'B'))
		p++;
	if (*p != '\0')
		return -EINVAL;
	if (x != 0 && x > UINT64_MAX / mul)
		return -ERANGE;
	*out = x * mul;
	return 0;
}

const char *format_size(uint64_t v, char *buf, size_t cap)
{
	static const char units[] = "KMG";
	int u;

	if (v == UINT64_MAX) {
		snprintf(buf, cap, "unlimited");
		return buf;
	}
	for (u = 2; u >= 0; u--) {
		uint64_t unit = 1ull << (10 * (u + 1));

		if (v < unit)
			continue;
		if (v % unit == 0)
			snprintf(buf, cap, "%llu%c", (unsigned long long)(v / unit), units[u]);
		else
			snprintf(buf, cap, "%.1f%c", (double)v / (double)unit, units[u]);
		return buf;
	}
	snprintf(buf, cap, "%llu", (unsigned long long)v);
	return buf;
}
