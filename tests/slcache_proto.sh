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

play_slcache() {
	local s
	for s in "$WORK"/session-*; do
		slc_start "$SLCACHE" -m 64 -t 2
		"$CLIENT" "$SLC_PORT" <"$s"
		slc_alive
		slc_stop
	done
}

mc_version() {
	command -v memcached >/dev/null 2>&1 && memcached -V 2>/dev/null | awk '{ print $2 }'
}

play_memcached() {
	local s port _ user=()
	[ "$(id -u)" -ne 0 ] || user=(-u root)
	for s in "$WORK"/session-*; do
		for _ in $(seq 1 20); do # another port when this one is taken
			port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
			memcached -l 127.0.0.1 -p "$port" -U 0 -m 64 -t 2 "${user[@]}" 2>/dev/null &
			MC_PID=$!
			for _ in $(seq 1 100); do
				kill -0 "$MC_PID" 2>/dev/null || break
				(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break 2
				sleep 0.05
			done
			wait "$MC_PID" 2>/dev/null || true
		done
		"$CLIENT" "$port" <"$s"
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
# fires at that time: no static exchange can say "now + 2", so slcache alone.
slc_start "$SLCACHE" -m 64 -t 2
slc_open 3
printf 'set fa 0 0 1\r\nx\r\nflush_all %d\r\nget fa\r\n' $(($(date +%s) + 2)) >&3
slc_expect 3 'STORED'
slc_expect 3 'OK'
slc_expect 3 'VALUE fa 0 1'
slc_expect 3 'x'
slc_expect 3 'END'
sleep 3
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
