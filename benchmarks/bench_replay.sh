#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# benchmarks/bench_replay.sh [--quick] [MIX...] - bench_isolation's quick
# trace of each MIX (default twitter-a twitter-c; --quick: twitter-c),
# simulated by bench_isolation --trace and replayed by trace_replay against
# examples/slcache under each policy, slcache --no-accounting (one shared
# LRU) and Debian's memcached, each with the trace's budget as its memory
# (-m 16), and slcache --no-arenas --policy guarantee (items from malloc,
# charged their exact size, as the simulation does).  slcache gets the
# trace's soft limits as --tenant NAME:soft=BYTES (trace_replay
# --slcache-args).  The simulation runs with --server-ttl: TTLs on whole
# seconds, as the servers keep them.
#
# The traces are `gen_trace --quick MIX` (16 MiB, 300000 requests, 10000
# requests per trace second), the very requests of `bench_isolation --quick
# --mix MIX`, written to $SL_REPLAY_DIR (default build/bench/replay).  They
# carry TTLs, so each replay runs at the trace's clock: 30 s per server.
#
# stdout: bench_isolation's JSON lines for each trace, then trace_replay's
# ({"bench":"replay",...} per tenant and server, {"bench":"replay_total",...}).
# stderr: progress.  `python3 benchmarks/results.py tables DIR` prints the
# comparison table from DIR/replay.jsonl.  Missing memcached is installed
# when root, else skipped.
set -euo pipefail

SL_PROG=benchmarks/bench_replay.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

BUDGET_MB=16
QUICK=0
MIXES=()
for arg in "$@"; do
	case $arg in
	--quick) QUICK=1 ;;
	-h | --help)
		sed -n '4,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "$SL_PROG: unknown argument '$arg' (usage: bench_replay.sh [--quick] [MIX...])" >&2
		exit 2
		;;
	*) MIXES+=("$arg") ;;
	esac
done
if [ "${#MIXES[@]}" -eq 0 ]; then
	MIXES=(twitter-a twitter-c)
	[ "$QUICK" = 0 ] || MIXES=(twitter-c)
fi

log() { printf '%s\n' "$*" >&2; }

MEMCACHED=$(command -v memcached 2>/dev/null || true)
if [ -z "$MEMCACHED" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	log "==> installing memcached"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends memcached \
		>/dev/null 2>&1 || true
	MEMCACHED=$(command -v memcached 2>/dev/null || true)
fi
[ -n "$MEMCACHED" ] || log "$SL_PROG: memcached not found (apt-get install memcached): skipped"

B=${SL_BUILD_DIR:-$SL_ROOT/build/bench}
if [ ! -f "$B/CMakeCache.txt" ]; then
	log "==> configuring a Release build in $B"
	sl_configure "$B" --log-level=WARNING -DCMAKE_BUILD_TYPE=Release -DSL_WERROR=OFF \
		-DSL_SANITIZE= -DSL_COVERAGE=OFF -DSL_BUILD_TESTS=OFF -DSL_BUILD_EXAMPLES=ON >&2
fi
cmake --build "$B" -j"$SL_JOBS" --target slcache gen_trace bench_isolation trace_replay >&2
BIN=$B/benchmarks
SLCACHE=$B/examples/slcache
[ -x "$SLCACHE" ] || sl_die "no slcache at $SLCACHE (is SL_BUILD_EXAMPLES on in $B?)"
D=${SL_REPLAY_DIR:-$B/replay}
mkdir -p "$D"

SRV_PID=
SRV_PORT=
cleanup() { [ -z "$SRV_PID" ] || kill -KILL "$SRV_PID" 2>/dev/null || true; }
trap cleanup EXIT

# start_server CMD... - on a free port of 127.0.0.1 (CMD gets -p PORT appended).
start_server() {
	local _ __
	for _ in $(seq 1 20); do
		SRV_PORT=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		"$@" -l 127.0.0.1 -p "$SRV_PORT" 2>"$D/server.log" &
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
	sl_die "could not start $1 on a free port (see $D/server.log)"
}

stop_server() {
	kill -TERM "$SRV_PID" 2>/dev/null || true
	wait "$SRV_PID" 2>/dev/null || true
	SRV_PID=
}

K=0
N=$((${#MIXES[@]} * (7 + 1)))
[ -z "$MEMCACHED" ] || N=$((N + ${#MIXES[@]}))
step() {
	K=$((K + 1))
	log "==> [$K/$N] $*"
}

for mix in "${MIXES[@]}"; do
	T=$D/$mix.txt
	log "==> $mix: gen_trace --quick $mix ${T#"$SL_ROOT"/}"
	"$BIN/gen_trace" --quick "$mix" "$T"
	step "$mix: bench_isolation --server-ttl --trace (the simulation)"
	"$BIN/bench_isolation" --json-only --server-ttl --trace "$T"

	read -r -a SLARGS < <("$BIN/trace_replay" --slcache-args "$T")
	for policy in guarantee gatekeeper protection refault; do
		step "$mix: slcache --policy $policy ${SLARGS[*]}"
		start_server "$SLCACHE" -t 1 --policy "$policy" "${SLARGS[@]}"
		"$BIN/trace_replay" --port "$SRV_PORT" --label "slcache-$policy" "$T"
		stop_server
	done
	step "$mix: slcache --no-arenas --policy guarantee (items from malloc, charged exactly)"
	start_server "$SLCACHE" -t 1 --no-arenas --policy guarantee "${SLARGS[@]}"
	"$BIN/trace_replay" --port "$SRV_PORT" --label "slcache-noarenas-guarantee" "$T"
	stop_server
	step "$mix: slcache --no-accounting -m $BUDGET_MB (one shared LRU)"
	start_server "$SLCACHE" -t 1 --no-accounting -m "$BUDGET_MB"
	"$BIN/trace_replay" --port "$SRV_PORT" --label "slcache-shared" "$T"
	stop_server
	if [ -n "$MEMCACHED" ]; then
		user=()
		[ "$(id -u)" -ne 0 ] || user=(-u root)
		step "$mix: memcached -m $BUDGET_MB"
		start_server "$MEMCACHED" "${user[@]}" -U 0 -t 1 -m "$BUDGET_MB"
		"$BIN/trace_replay" --port "$SRV_PORT" --label memcached "$T"
		stop_server
	fi
done
