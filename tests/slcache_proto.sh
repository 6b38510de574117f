#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/slcache_proto.sh SLCACHE PROTO_CLIENT [CASES] - plays the exchanges
# of CASES (tests/slcache_proto.txt; tests/slcache_conform.txt holds the
# conformance cases, written by tests/slcache_conform_gen.py) against
# examples/slcache and compares its answers
# byte for byte with memcached's, recorded from Debian's memcached 1.6.18 in
# CASES with .expected for .txt.  When that memcached is installed, it is
# played against too and must still give the recorded answers (so the
# recording is checked, not trusted).  Masked, as they legitimately differ:
# version strings, and the lines of a STAT block (each server has its own
# statistics; a block becomes one "STAT ..." line).
#
# To record the expectation again (after adding exchanges), with memcached
# 1.6.18 installed:  SL_PROTO_RECORD=1 tests/slcache_proto.sh SLCACHE CLIENT [CASES]
set -euo pipefail

# shellcheck source=tests/slcache_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/slcache_lib.sh"

SLCACHE=${1:?usage: slcache_proto.sh SLCACHE PROTO_CLIENT}
CLIENT=${2:?usage: slcache_proto.sh SLCACHE PROTO_CLIENT}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SCRIPT=${3:-$HERE/slcache_proto.txt}
EXPECTED=${SCRIPT%.txt}.expected
WORK=$(mktemp -d "${TMPDIR:-/tmp}/slcache-proto.XXXXXX")
MC_PID=
MC_PORT=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup_all() {
	[ -z "$MC_PID" ] || kill -KILL "$MC_PID" 2>/dev/null || true
	rm -rf "$WORK"
	slc_cleanup
}
trap cleanup_all EXIT

# mask < TRANSCRIPT: what may differ between two memcached-protocol servers:
# the answer of an exchange named "... [differs]" (one of the differences
# README.md lists, each with its reason; its name stays, to keep it counted).
mask() {
	sed -e 's/^VERSION .*/VERSION <version>\\r\\n/' -e 's/ la=[0-9]* / la=<s> /' |
		awk '/^=== / { differs = index($0, "[differs]") > 0; print; next }
			differs { next }
			/^STAT / { if (!instat) print "STAT ..."; instat = 1; next } { instat = 0; print }'
}

# The sessions of the script, each in its own file: a fresh server each.
awk -v dir="$WORK" '/^### session / { n++; f = sprintf("%s/session-%02d", dir, n); next }
	n { print > f }' "$SCRIPT"

# --stall-timeout 0: memcached never closes a connection that stops in the
# middle of a value, and the cases that expect that silence end after 5 s of
# it.  slcache's own close (10 s; the slcache_hostile tests) showed as
# "<closed>" when a loaded machine kept the client from seeing the 5 s.
play_slcache() {
	local s
	for s in "$WORK"/session-*; do
		slc_start "$SLCACHE" -m 64 -t 2 --stall-timeout 0
		"$CLIENT" "$SLC_PORT" <"$s" || slc_fail "the client failed against slcache, $(basename "$s")"
		slc_alive
		slc_stop
	done
}

mc_version() {
	command -v memcached >/dev/null 2>&1 && memcached -V 2>/dev/null | awk '{ print $2 }'
}

# mc_start - start memcached on a free port of 127.0.0.1 (MC_PID, MC_PORT).
mc_start() {
	local user=()
	[ "$(id -u)" -ne 0 ] || user=(-u root)
	slc_spawn /dev/null memcached -U 0 -m 64 -t 2 "${user[@]}" ||
		slc_fail "could not start memcached on a free port"
	MC_PID=$SLC_SPAWN_PID
	MC_PORT=$SLC_SPAWN_PORT
}

play_memcached() {
	local s
	for s in "$WORK"/session-*; do
		mc_start
		"$CLIENT" "$MC_PORT" <"$s" || slc_fail "the client failed against memcached, $(basename "$s")"
		kill -TERM "$MC_PID"
		wait "$MC_PID" 2>/dev/null || true
		MC_PID=
	done
}

play_slcache | mask >"$WORK/slcache.out"

status=0
if [ "$(mc_version)" = 1.6.18 ]; then
	play_memcached | mask >"$WORK/memcached.out"
	if [ "${SL_PROTO_RECORD:-0}" = 1 ]; then
		cp "$WORK/memcached.out" "$EXPECTED"
		echo "recorded $EXPECTED"
	fi
	if ! diff -u "$EXPECTED" "$WORK/memcached.out"; then
		echo "FAIL: memcached 1.6.18 no longer answers as recorded in $EXPECTED" >&2
		status=1
	fi
else
	echo "memcached 1.6.18 is not installed: slcache is compared with the recording only"
fi
if ! diff -u "$EXPECTED" "$WORK/slcache.out"; then
	echo "FAIL: slcache answers differently from memcached (- memcached, + slcache)" >&2
	status=1
fi

# flush_all with an absolute unix time (more than 30 days' worth of seconds)
# fires at that time: no static exchange can say "now + 3", so slcache alone.
# The item is there until then, gone after; a get answered when the time
# may have come already (a loaded machine) may find it either way.
slc_start "$SLCACHE" -m 64 -t 2
slc_open 3
at=$(($(date +%s) + 3))
printf 'set fa 0 0 1\r\nx\r\nflush_all %d\r\nget fa\r\n' "$at" >&3
slc_expect 3 'STORED'
slc_expect 3 'OK'
got=$(slc_line 3)
if [ "$got" = 'VALUE fa 0 1' ]; then
	slc_expect 3 'x'
	slc_expect 3 'END'
elif [ "$got" != END ] || [ "$(date +%s)" -lt "$at" ]; then
	slc_fail "get before the flush time: expected 'VALUE fa 0 1', got '$got'"
fi
while [ "$(date +%s)" -le "$at" ]; do
	sleep 0.2
done
printf 'get fa\r\n' >&3
slc_expect 3 'END'
slc_close 3
slc_stop
echo "flush_all with an absolute time fired"

# flush_all with an absolute time already past (but after the server
# started) flushes everything at once, as memcached 1.6.18 does.
slc_start "$SLCACHE" -m 64 -t 2
slc_open 3
printf 'set fp 0 0 1\r\nx\r\nflush_all %d\r\nget fp\r\n' $(($(date +%s) - 5)) >&3
slc_expect 3 'STORED'
slc_expect 3 'OK'
slc_expect 3 'END'
slc_close 3
slc_stop
echo "flush_all with an absolute time past flushed"

if [ "$status" -eq 0 ]; then
	all=$(grep -c '^=== ' "$EXPECTED")
	differ=$(grep -c '^=== .*\[differs\]' "$EXPECTED" || true)
	echo "PASS: $((all - differ)) exchanges answered as memcached 1.6.18 does ($differ more differ on purpose, README.md)"
fi
exit "$status"
