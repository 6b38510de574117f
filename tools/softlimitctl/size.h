/* SPDX-License-Identifier: MIT */
/*
 * size.h: sizes on softlimitctl's command line and in its tables.
 */
#ifndef SOFTLIMITCTL_SIZE_H
#define SOFTLIMITCTL_SIZE_H

#include <stddef.h>
#include <stdint.h>

/*
 * parse_size() - @s as slcache(1) takes a SIZE: decimal digits with an
 * optional K, M or G suffix (or KB, MB, GB; any case), powers of 1024;
 * a bare number is bytes.  0 with the bytes in *@out, -EINVAL for anything
 * else (empty, a sign, spaces, another suffix) and -ERANGE past 2^64 - 1.
 */
int parse_size(const char *s, uint64_t *out);

/*
 * format_size() - @v for a table, in @buf of @cap bytes: exact with a
 * suffix when it is a whole number of G, M or K ("64M"), else to one
 * decimal ("21.3M"), or bytes below 1 K; "unlimited" for UINT64_MAX.
 * Returns @buf.
 */
const char *format_size(uint64_t v, char *buf, size_t cap);

#endif /* SOFTLIMITCTL_SIZE_H */
