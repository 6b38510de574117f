#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/slcache_capable.sh SLCACHE - run libmemcached's `memccapable -a`
# (27 ascii-protocol checks) against examples/slcache, with accounting (items
# from per-tenant arenas, and from malloc with --no-arenas), with
# --no-accounting, and under --policy refault (ghosts on).  Exits 77 (skipped) when memccapable is missing and
# cannot be installed (not root).
set -euo pipefail

# shellcheck source=tests/slcache_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/slcache_lib.sh"

SLCACHE=${1:?usage: slcache_capable.sh PATH_TO_SLCACHE}

find_capable() {
	command -v memccapable 2>/dev/null || command -v memcapable 2>/dev/null || true
}

CAPABLE=$(find_capable)
if [ -z "$CAPABLE" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "installing libmemcached-tools for memccapable"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends libmemcached-tools >/dev/null 2>&1 ||
		{ apt-get update >/dev/null 2>&1 &&
			apt-get install -y --no-install-recommends libmemcached-tools >/dev/null 2>&1; } || true
	CAPABLE=$(find_capable)
fi
if [ -z "$CAPABLE" ]; then
	echo "SKIP: memccapable not found; install it with:"
	echo "  sudo apt-get install -y --no-install-recommends libmemcached-tools"
	exit 77
fi

run_capable() {
	local out passed failed
	# -t: its own bound on one reply is 2 s, which an ASan server beside busy
	# loops once took (errno 110 on "ascii replace"); a passing run never waits.
	out=$("$CAPABLE" -a -t 60 -h 127.0.0.1 -p "$SLC_PORT" 2>&1) || true
	printf '%s\n' "$out"
	passed=$(grep -c '\[pass\]' <<<"$out" || true)
	failed=$(grep -c '\[FAIL\]' <<<"$out" || true)
	echo "memccapable -a ($*): $passed passed, $failed failed"
	if [ "$failed" -ne 0 ] || [ "$passed" -lt 27 ] || ! grep -q 'All tests passed' <<<"$out"; then
		slc_fail "memccapable -a ($*): $passed passed, $failed failed"
	fi
}

for mode in "" "--no-arenas" "--no-accounting" "--policy refault"; do
	# shellcheck disable=SC2086 # mode is a few words or none
	slc_start "$SLCACHE" -m 16 -t 2 --tenant "test:soft=4M" $mode
	run_capable "${mode:-accounting}"
	slc_alive
	slc_stop
done
echo "PASS"
