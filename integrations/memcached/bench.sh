#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# integrations/memcached/bench.sh MEMCACHED [DEBIAN_MEMCACHED] - throughput
# of the patched memcached against Debian's unpatched one (default
# /usr/bin/memcached), with memcaslap (libmemcached-tools): a check, not a
# test.  Three servers:
#   debian    DEBIAN_MEMCACHED
#   none      MEMCACHED without --tenant (softlimit is never called)
#   tenants   MEMCACHED --tenant steady:soft=40% --tenant noisy:max=50%
# Each round starts each server afresh (-m $MC_BENCH_MB, default 64; -t 2)
# and runs memcaslap against it for $MC_BENCH_SECONDS (default 10) s, in an
# order that rotates from round to round, so that a slow stretch of a shared
# machine falls on every server alike.  After $MC_BENCH_ROUNDS (default 7)
# rounds it prints each server's median TPS and its ratio to debian's.
# memcaslap's keys have no ':' : every item is charged to "default", so
# "tenants" measures the charge and uncharge of every set, and the key
# lookup; with -m below memcaslap's ~30 MB of objects (MC_BENCH_MB=16) the
# evictions go through softlimit's reclaim too.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SL_PROG=integrations/memcached/bench.sh
# shellcheck source=scripts/lib.sh
. "$HERE/../../scripts/lib.sh"
# shellcheck source=tests/slcache_lib.sh
. "$HERE/../../tests/slcache_lib.sh"

[ $# -ge 1 ] || sl_die "usage: bench.sh MEMCACHED [DEBIAN_MEMCACHED]"
MC=$1
DEB=${2:-/usr/bin/memcached}
MB=${MC_BENCH_MB:-64}
SECS=${MC_BENCH_SECONDS:-10}
ROUNDS=${MC_BENCH_ROUNDS:-7}
sl_ensure_packages libmemcached-tools memcached
[ -x "$MC" ] || sl_die "not an executable: $MC"
[ -x "$DEB" ] || sl_die "not an executable: $DEB"

ROOTARG=()
[ "$(id -u)" -ne 0 ] || ROOTARG=(-u root)
NAMES=(debian none tenants)
declare -A TPS=()

# run NAME - one memcaslap run against a fresh server; appends its TPS.
run() {
	local cmd out tps
	case $1 in
	debian) cmd=("$DEB") ;;
	none) cmd=("$MC") ;;
	tenants) cmd=("$MC" --tenant steady:soft=40% --tenant noisy:max=50%) ;;
	esac
	slc_spawn /dev/null "${cmd[@]}" "${ROOTARG[@]}" -U 0 -m "$MB" -t 2 ||
		sl_die "could not start ${cmd[*]}"
	out=$(timeout $((SECS + 60)) memcaslap -s "127.0.0.1:$SLC_SPAWN_PORT" -T 1 -c 16 \
		-t "${SECS}s" 2>&1) || true
	kill -TERM "$SLC_SPAWN_PID"
	wait "$SLC_SPAWN_PID" 2>/dev/null || true
	tps=$(printf '%s\n' "$out" | sed -n 's/.*TPS: \([0-9]*\).*/\1/p' | tail -n 1)
	[ -n "$tps" ] || sl_die "memcaslap gave no TPS against $1: $(printf '%s' "$out" | tail -n 3)"
	TPS[$1]="${TPS[$1]:-} $tps"
	printf '%-8s %8s\n' "$1" "$tps"
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

sl_log "==> $ROUNDS rounds of memcaslap -T 1 -c 16 -t ${SECS}s against -m $MB -t 2 servers"
for r in $(seq 0 $((ROUNDS - 1))); do
	sl_log "--- round $((r + 1))"
	for i in 0 1 2; do
		run "${NAMES[$(((r + i) % 3))]}"
	done
done
base=$(printf '%s\n' "${TPS[debian]}" | median)
sl_log "==> medians of $ROUNDS rounds (TPS; ratio to debian's)"
for n in "${NAMES[@]}"; do
	m=$(printf '%s\n' "${TPS[$n]}" | median)
	printf '%-8s %8s  %s\n' "$n" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
done
