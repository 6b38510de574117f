#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# benchmarks/bench_server.sh [--quick] - memcaslap (libmemcached-tools)
# against Debian's memcached, examples/slcache, slcache --no-arenas and
# slcache --no-accounting, in the same run on the same machine, in two mixes.
#
# default: 2 client threads, 16 connections, memcaslap's default 90% get /
# 10% set mix of 1 KB values; servers get 2 worker threads and 1 GB (nothing
# is evicted).  Each variant runs SL_SERVER_RUNS times (default 3, --quick
# 1) for SL_SERVER_SECONDS (default 5, --quick 2) seconds, interleaved; the
# median ops/s counts.  Goals: slcache >= 80% of memcached; accounting cost
# < 3%, measured as 1 - no-arenas/no-accounting: both take items from the
# same malloc, so the difference is softlimit's charge/uncharge and the
# per-tenant LRUs.  The arena cost, 1 - slcache/no-arenas, is what
# per-tenant jemalloc arenas (without a thread cache) add on top; the total
# is 1 - slcache/no-accounting.
#
# set90: a full cache.  Servers get -m 16 -t 2; memcaslap -F with cmd rows
# "0 0.9" (set) and "1 0.1" (get), 64-byte keys, 1 KiB values, -T 2 -c 32,
# SL_SERVER_SET90_SECONDS (default 8, --quick 3) per run, SL_SERVER_RUNS
# runs interleaved.  Every set past the first 16 MiB evicts.  Reported: the
# median ops/s, its ratio to memcached, and the "SERVER_ERROR out of memory"
# answers summed over the runs (slcache's oom_errors stat; memcached's
# outofmemory of "stats items").  Goals: zero such answers, and slcache
# (default and --no-arenas) >= 0.9x memcached's ops/s.
#
# stdout: one JSON line per mix and variant, {"bench":"server","mix":...,
# "variant":...,"ops_per_s":...}, also written to
# benchmarks/results/server.jsonl; stderr: progress and the tables.
# slcache is built (Release) in $SL_BUILD_DIR (default build/bench) unless
# it is there.  Missing packages (libmemcached-tools, memcached) are
# installed when root; memcached is otherwise skipped, memcaslap is required.
set -euo pipefail

SL_PROG=benchmarks/bench_server.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

RUNS=${SL_SERVER_RUNS:-3}
SECS=${SL_SERVER_SECONDS:-5}
SECS90=${SL_SERVER_SET90_SECONDS:-8}
for arg in "$@"; do
	case $arg in
	--quick)
		RUNS=${SL_SERVER_RUNS:-1}
		SECS=${SL_SERVER_SECONDS:-2}
		SECS90=${SL_SERVER_SET90_SECONDS:-3}
		;;
	-h | --help)
		sed -n '3,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "$SL_PROG: unknown argument '$arg' (usage: bench_server.sh [--quick])" >&2
		exit 2
		;;
	esac
done

log() { printf '%s\n' "$*" >&2; }

# Tools -------------------------------------------------------------------

apt_install() {
	[ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1 || return 0
	log "==> installing $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1 ||
		{ apt-get update >/dev/null 2>&1 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
				>/dev/null 2>&1; } || true
}
find_slap() { command -v memcaslap || command -v memaslap || true; } 2>/dev/null
SLAP=$(find_slap)
[ -n "$SLAP" ] || { apt_install libmemcached-tools; SLAP=$(find_slap); }
[ -n "$SLAP" ] || sl_die "memcaslap not found: apt-get install libmemcached-tools"
MEMCACHED=$(command -v memcached 2>/dev/null || true)
[ -n "$MEMCACHED" ] || { apt_install memcached; MEMCACHED=$(command -v memcached 2>/dev/null || true); }
[ -n "$MEMCACHED" ] || log "$SL_PROG: memcached not found (apt-get install memcached): skipped"

B=${SL_BUILD_DIR:-$SL_ROOT/build/bench}
if [ ! -f "$B/CMakeCache.txt" ]; then
	log "==> configuring a Release build in $B"
	sl_configure "$B" --log-level=WARNING -DCMAKE_BUILD_TYPE=Release -DSL_WERROR=OFF \
		-DSL_SANITIZE= -DSL_COVERAGE=OFF -DSL_BUILD_TESTS=OFF -DSL_BUILD_EXAMPLES=ON >&2
fi
cmake --build "$B" -j"$SL_JOBS" --target slcache >&2
SLCACHE=$B/examples/slcache
[ -x "$SLCACHE" ] || sl_die "no slcache at $SLCACHE (is SL_BUILD_EXAMPLES on in $B?)"

# Servers -----------------------------------------------------------------

SRV_PID=
SRV_PORT=
cleanup() { [ -z "$SRV_PID" ] || kill -KILL "$SRV_PID" 2>/dev/null || true; }
trap cleanup EXIT

# start_server VARIANT [MEGABYTES] - on a free port of 127.0.0.1, with -m
# MEGABYTES (default 1024).
start_server() {
	local _ __ mb=${2:-1024}
	for _ in $(seq 1 20); do
		SRV_PORT=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		case $1 in
		memcached)
			local user=()
			[ "$(id -u)" -ne 0 ] || user=(-u root)
			"$MEMCACHED" "${user[@]}" -l 127.0.0.1 -p "$SRV_PORT" -U 0 -t 2 -m "$mb" -c 4096 2>/dev/null &
			;;
		slcache) "$SLCACHE" -l 127.0.0.1 -p "$SRV_PORT" -t 2 -m "$mb" -c 4096 2>/dev/null & ;;
		no-arenas)
			"$SLCACHE" -l 127.0.0.1 -p "$SRV_PORT" -t 2 -m "$mb" -c 4096 --no-arenas 2>/dev/null &
			;;
		no-accounting)
			"$SLCACHE" -l 127.0.0.1 -p "$SRV_PORT" -t 2 -m "$mb" -c 4096 --no-accounting 2>/dev/null &
			;;
		esac
		SRV_PID=$!
		for __ in $(seq 1 100); do
			kill -0 "$SRV_PID" 2>/dev/null || break
			if (exec 3<>"/dev/tcp/127.0.0.1/$SRV_PORT") 2>/dev/null; then
				kill -0 "$SRV_PID" 2>/dev/null && return 0
				break
			fi
			sleep 0.05
		done
		kill -KILL "$SRV_PID" 2>/dev/null || true
		wait "$SRV_PID" 2>/dev/null || true
		SRV_PID=
	done
	sl_die "could not start $1 on a free port"
}

stop_server() {
	kill -TERM "$SRV_PID" 2>/dev/null || true
	wait "$SRV_PID" 2>/dev/null || true
	SRV_PID=
}

# server_cpu - the server's CPU seconds (user + system) and requests served,
# from its "stats".
server_cpu() {
	local line cpu=0 ops=0 k v
	exec 3<>"/dev/tcp/127.0.0.1/$SRV_PORT"
	printf 'stats\r\n' >&3
	while IFS= read -r -t 5 line <&3; do
		line=${line%$'\r'}
		[ "$line" != END ] || break
		read -r _ k v <<<"$line"
		case $k in
		rusage_user | rusage_system) cpu=$(awk -v a="$cpu" -v b="$v" 'BEGIN { print a + b }') ;;
		cmd_get | cmd_set) ops=$((ops + v)) ;;
		esac
	done
	exec 3>&-
	printf '%s %s\n' "$cpu" "$ops"
}

# server_oom - the "SERVER_ERROR out of memory" answers the server gave:
# slcache's oom_errors, or the sum of memcached's items:N:outofmemory.
server_oom() {
	local line n=0 k v
	exec 3<>"/dev/tcp/127.0.0.1/$SRV_PORT"
	printf 'stats\r\nstats items\r\n' >&3
	for _ in 1 2; do
		while IFS= read -r -t 5 line <&3; do
			line=${line%$'\r'}
			[ "$line" != END ] || break
			read -r _ k v <<<"$line"
			case $k in
			oom_errors | items:*:outofmemory) n=$((n + v)) ;;
			esac
		done
	done
	exec 3>&-
	printf '%s\n' "$n"
}

# one_run VARIANT - prints the ops/s memcaslap measured and the server's
# CPU microseconds per request.
one_run() {
	local out tps cpu ops
	start_server "$1"
	out=$("$SLAP" -s "127.0.0.1:$SRV_PORT" -T 2 -c 16 -t "${SECS}s" 2>&1) || true
	read -r cpu ops < <(server_cpu)
	stop_server
	tps=$(sed -n 's/.*TPS: *\([0-9][0-9]*\).*/\1/p' <<<"$out" | tail -n 1)
	[ -n "$tps" ] || sl_die "$1: no TPS in memcaslap's output: $(tail -n 3 <<<"$out")"
	printf '%s %s\n' "$tps" "$(awk -v c="$cpu" -v n="$ops" 'BEGIN { printf "%.3f", n ? 1e6 * c / n : 0 }')"
}

# one_run_set90 VARIANT CONFIG - the set90 mix against a 16 MiB server:
# prints the ops/s memcaslap measured and the server's out-of-memory answers.
one_run_set90() {
	local out tps oom
	start_server "$1" 16
	out=$("$SLAP" -s "127.0.0.1:$SRV_PORT" -F "$2" -T 2 -c 32 -t "${SECS90}s" 2>&1) || true
	oom=$(server_oom)
	stop_server
	tps=$(sed -n 's/.*TPS: *\([0-9][0-9]*\).*/\1/p' <<<"$out" | tail -n 1)
	[ -n "$tps" ] || sl_die "$1 (set90): no TPS in memcaslap's output: $(tail -n 3 <<<"$out")"
	printf '%s %s\n' "$tps" "$oom"
}

# variant_name VARIANT - what the tables call it.
variant_name() {
	case $1 in
	memcached) echo "memcached $("$MEMCACHED" -V 2>/dev/null | awk '{ print $2 }')" ;;
	slcache) echo "slcache (softlimit)" ;;
	no-arenas) echo "slcache --no-arenas" ;;
	no-accounting) echo "slcache --no-accounting" ;;
	esac
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

VARIANTS=(slcache no-arenas no-accounting)
[ -z "$MEMCACHED" ] || VARIANTS=(memcached "${VARIANTS[@]}")
declare -A RES CPU
for v in "${VARIANTS[@]}"; do RES[$v]=""; CPU[$v]=""; done

log "==> $(basename "$SLAP") -T 2 -c 16 -t ${SECS}s, $RUNS run(s) per server, interleaved"
for r in $(seq 1 "$RUNS"); do
	for v in "${VARIANTS[@]}"; do
		read -r t c < <(one_run "$v")
		log "    run $r/$RUNS  $(printf '%-14s' "$v") $t ops/s, server CPU $c us/request"
		RES[$v]+="$t"$'\n'
		CPU[$v]+="$c"$'\n'
	done
done

declare -A MED MEDCPU
for v in "${VARIANTS[@]}"; do
	MED[$v]=$(printf '%s' "${RES[$v]}" | median)
	MEDCPU[$v]=$(printf '%s' "${CPU[$v]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
done

# Results -------------------------------------------------------------------

R=$SL_ROOT/benchmarks/results
mkdir -p "$R"
JSON=""
for v in "${VARIANTS[@]}"; do
	JSON+=$(printf '{"bench":"server","mix":"default","variant":"%s","ops_per_s":%s,"server_cpu_us_per_req":%s,"runs":%s,"seconds":%s,"client":"memcaslap -T 2 -c 16"}' \
		"$v" "${MED[$v]}" "${MEDCPU[$v]}" "$RUNS" "$SECS")$'\n'
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", 100 * a / b }'; }
log ""
log "$(printf '%-28s %12s %10s %16s' server 'ops/s' 'relative' 'CPU us/request')"
for v in "${VARIANTS[@]}"; do
	name=$(variant_name "$v")
	base=${MED[memcached]:-${MED[no-accounting]}}
	log "$(printf '%-28s %12s %9s%% %16s' "$name" "${MED[$v]}" "$(ratio "${MED[$v]}" "$base")" "${MEDCPU[$v]}")"
done
log ""
# cost A B - percent of B's ops/s that A loses; cpucost A B - percent more
# server CPU per request that A spends than B.
cost() { awk -v a="${MED[$1]}" -v b="${MED[$2]}" 'BEGIN { printf "%.1f", 100 * (1 - a / b) }'; }
cpucost() { awk -v a="${MEDCPU[$1]}" -v b="${MEDCPU[$2]}" 'BEGIN { printf "%.1f", (b > 0 ? 100 * (a / b - 1) : 0) }'; }
acc=$(cost no-arenas no-accounting)
goal_cost=$(awk -v c="$acc" 'BEGIN { print (c < 3) ? "met" : "NOT met" }')
log "$(printf '%-44s %8s %14s' cost 'ops/s' 'CPU/request')"
log "$(printf '%-44s %7s%% %13s%%' 'accounting = 1 - no-arenas/no-accounting' "$acc" "$(cpucost no-arenas no-accounting)")"
log "$(printf '%-44s %7s%% %13s%%' 'arenas = 1 - slcache/no-arenas' "$(cost slcache no-arenas)" "$(cpucost slcache no-arenas)")"
log "$(printf '%-44s %7s%% %13s%%' 'total = 1 - slcache/no-accounting' "$(cost slcache no-accounting)" "$(cpucost slcache no-accounting)")"
log "accounting cost goal < 3% (ops/s, same malloc on both sides): $goal_cost"
if [ -n "$MEMCACHED" ]; then
	vs=$(ratio "${MED[slcache]}" "${MED[memcached]}")
	goal_vs=$(awk -v c="$vs" 'BEGIN { print (c >= 80) ? "met" : "NOT met" }')
	log "slcache / memcached = $vs%  (goal >= 80%: $goal_vs)"
fi
log "(one machine, client and server share its $(nproc) CPUs: expect a few % of noise per run)"

# The set90 mix ---------------------------------------------------------------

CFG=$(mktemp)
trap 'cleanup; rm -f "$CFG"' EXIT
printf 'key\n64 64 1\nvalue\n1024 1024 1\ncmd\n0 0.9\n1 0.1\n' >"$CFG"
declare -A OOM
for v in "${VARIANTS[@]}"; do RES[$v]=""; OOM[$v]=0; done
log ""
log "==> set90: servers -m 16 -t 2; $(basename "$SLAP") -F (90% sets, 1 KiB values) -T 2 -c 32 -t ${SECS90}s, $RUNS run(s) per server, interleaved"
for r in $(seq 1 "$RUNS"); do
	for v in "${VARIANTS[@]}"; do
		read -r t o < <(one_run_set90 "$v" "$CFG")
		log "    run $r/$RUNS  $(printf '%-14s' "$v") $t ops/s, $o out-of-memory answers"
		RES[$v]+="$t"$'\n'
		OOM[$v]=$((OOM[$v] + o))
	done
done
for v in "${VARIANTS[@]}"; do
	MED[$v]=$(printf '%s' "${RES[$v]}" | median)
	JSON+=$(printf '{"bench":"server","mix":"set90","variant":"%s","ops_per_s":%s,"oom_answers":%s,"runs":%s,"seconds":%s,"client":"memcaslap -F set90 -T 2 -c 32","server_mb":16}' \
		"$v" "${MED[$v]}" "${OOM[$v]}" "$RUNS" "$SECS90")$'\n'
done
printf '%s' "$JSON"
printf '%s' "$JSON" >"$R/server.jsonl.tmp.$$" && mv "$R/server.jsonl.tmp.$$" "$R/server.jsonl"

log ""
log "$(printf '%-28s %12s %14s %22s' 'server (set90)' 'ops/s' 'x memcached' 'out-of-memory answers')"
for v in "${VARIANTS[@]}"; do
	name=$(variant_name "$v")
	x=-
	[ -z "${MED[memcached]:-}" ] || x=$(awk -v a="${MED[$v]}" -v b="${MED[memcached]}" 'BEGIN { printf "%.2f", a / b }')
	log "$(printf '%-28s %12s %14s %22s' "$name" "${MED[$v]}" "$x" "${OOM[$v]}")"
done
log ""
ooms=0
for v in slcache no-arenas no-accounting; do ooms=$((ooms + OOM[$v])); done
log "set90 goal, no out-of-memory answer from slcache in any mode: $([ "$ooms" -eq 0 ] && echo met || echo "NOT met ($ooms)")"
if [ -n "${MED[memcached]:-}" ]; then
	for v in slcache no-arenas; do
		x=$(awk -v a="${MED[$v]}" -v b="${MED[memcached]}" 'BEGIN { printf "%.2f", a / b }')
		log "set90 goal, $v >= 0.9x memcached's ops/s: $(awk -v x="$x" 'BEGIN { print (x >= 0.9) ? "met" : "NOT met" }') (${x}x)"
	done
fi
