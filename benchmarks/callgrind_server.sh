#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# benchmarks/callgrind_server.sh - the cost of softlimit's accounting in
# slcache, counted in instructions (valgrind --tool=callgrind) instead of
# time, so that it does not move with the VM's +-20% noise.
#
# Each variant (slcache, slcache --no-arenas, slcache --no-accounting) runs
# twice under callgrind, one worker thread and four tenants, in two
# scenarios (evicting: -m 8, every set charges at max; fitting: -m 64):
#   base: the warm-up only (every key set once: the cache fills and evicts);
#   full: the same warm-up, then SL_CG_REQUESTS (default 20000) requests of
#         a 90% get / 10% set mix (benchmarks/callgrind_client.py).
# Instructions per request = (Ir(full) - Ir(base)) / requests, so start-up,
# the warm-up and shut-down cancel out; softlimit's part is the same
# difference over the functions defined in lib/ (the core and the jemalloc
# adapter, each function's own instructions, not what it calls back into
# the host), and jemalloc's over jemalloc's functions.
#
# stdout: one JSON line per variant (also benchmarks/results/callgrind.jsonl);
# stderr: progress and a markdown table.  slcache is built RelWithDebInfo
# (callgrind needs the debug info to name the files) in $SL_BUILD_DIR
# (default build/callgrind).  Takes a few minutes.
set -euo pipefail

SL_PROG=benchmarks/callgrind_server.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

case ${1:-} in
-h | --help)
	sed -n '3,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
"") ;;
*)
	echo "$SL_PROG: unknown argument '$1'" >&2
	exit 2
	;;
esac

REQUESTS=${SL_CG_REQUESTS:-20000}
WARMUP=16000 # 4 tenants x 4000 keys: every key once
log() { printf '%s\n' "$*" >&2; }

sl_ensure_packages "${SL_BUILD_PACKAGES[@]}" valgrind
command -v callgrind_annotate >/dev/null 2>&1 || sl_die "callgrind_annotate not found (valgrind)"
PY=$(command -v python3) || sl_die "python3 not found"

B=${SL_BUILD_DIR:-$SL_ROOT/build/callgrind}
if [ ! -f "$B/CMakeCache.txt" ]; then
	log "==> configuring a RelWithDebInfo build in $B"
	sl_configure "$B" --log-level=WARNING -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSL_WERROR=OFF \
		-DSL_SANITIZE= -DSL_COVERAGE=OFF -DSL_BUILD_TESTS=OFF -DSL_BUILD_BENCHMARKS=OFF \
		-DSL_BUILD_EXAMPLES=ON >&2
fi
cmake --build "$B" -j"$SL_JOBS" --target slcache >&2
SLCACHE=$B/examples/slcache
[ -x "$SLCACHE" ] || sl_die "no slcache at $SLCACHE"

OUT=$B/callgrind-runs
mkdir -p "$OUT"

SRV_PID=
cleanup() { [ -z "$SRV_PID" ] || kill -KILL "$SRV_PID" 2>/dev/null || true; }
trap cleanup EXIT

# run_once VARIANT PHASE MEASURED MB - slcache under callgrind, the client's
# sequence against it, then a clean shutdown (SIGTERM) so callgrind writes
# its profile to $OUT/VARIANT.PHASE.out.
run_once() {
	local variant=$1 phase=$2 measured=$3 mb=$4 port _ flags=() prof
	prof=$OUT/$variant.$phase.out
	case $variant in
	slcache) ;;
	no-arenas) flags=(--no-arenas) ;;
	no-accounting) flags=(--no-accounting) ;;
	esac
	rm -f "$prof"
	port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
	valgrind --tool=callgrind --callgrind-out-file="$prof" -q \
		"$SLCACHE" -l 127.0.0.1 -p "$port" -t 1 -m "$mb" "${flags[@]}" \
		--tenant t0:soft=25% --tenant t1:soft=25% --tenant t2 --tenant t3 \
		2>"$OUT/$variant.$phase.log" &
	SRV_PID=$!
	for _ in $(seq 1 600); do
		kill -0 "$SRV_PID" 2>/dev/null || sl_die "$variant: slcache exited ($(tail -n 3 "$OUT/$variant.$phase.log"))"
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			break
		fi
		sleep 0.1
	done
	local replies
	replies=$("$PY" "$SL_ROOT/benchmarks/callgrind_client.py" 127.0.0.1 "$port" "$WARMUP" "$measured")
	kill -TERM "$SRV_PID"
	wait "$SRV_PID" || true
	SRV_PID=
	[ -s "$prof" ] || sl_die "$variant: callgrind wrote no profile"
	log "    $variant $phase: $replies"
}

# totals PROFILE - "ALL SELF CALLS JEMALLOC": the instructions of the whole
# process; of the functions defined in lib/ (their own instructions); of
# what lib/ calls outside the program (libc's qsort and mutexes, jemalloc's
# mallctl), not counting lib/'s own functions called back from there (qsort's
# comparator); and of jemalloc's functions, whoever called them.  A call
# from lib/ into the host (a reclaim callback) is the host's.
totals() {
	local all self je calls
	read -r all self je < <(callgrind_annotate --inclusive=no --threshold=100 "$1" 2>/dev/null |
		awk -v root="$SL_ROOT/" "$CG_CLASSIFY"'
			/PROGRAM TOTALS/ { gsub(",", "", $1); all = $1 }
			parse() {
				if (cls == "lib") self += n
				else if (obj ~ /libjemalloc/) je += n
			}
			END { printf "%d %d %d\n", all, self, je }')
	calls=$(callgrind_annotate --tree=caller --inclusive=yes --threshold=100 "$1" 2>/dev/null |
		awk -v root="$SL_ROOT/" "$CG_CLASSIFY"'
			/^ *[0-9,]+ +\([ 0-9.]+%\) +< / { if (parse()) { cn[++nc] = n; cc[nc] = cls }; next }
			/^ *[0-9,]+ +\([ 0-9.]+%\) +\* / {
				if (parse())
					for (i = 1; i <= nc; i++) {
						if (cls == "ext" && cc[i] == "lib") out += cn[i]
						if (cls == "lib" && cc[i] == "ext") back += cn[i]
					}
				nc = 0; next
			}
			{ nc = 0 }
			END { printf "%d\n", out - back }')
	printf '%s %s %s %s\n' "$all" "$self" "$calls" "$je"
}

# An awk function, parse(): from a line of callgrind_annotate, n (the cost),
# cls (lib: defined in lib/; host: elsewhere in the repository; ext: libc,
# jemalloc, ...) and obj (the object file).
CG_CLASSIFY='
	function parse(   line, w, f) {
		line = $0
		if (line !~ /^ *[0-9,]+ +\([ 0-9.]+%\) +/) return 0
		n = $1; gsub(",", "", n)
		sub(/^ *[0-9,]+ +\([ 0-9.]+%\) +([<>*] +)?/, "", line)
		split(line, w, " ")
		f = w[1]; obj = $NF
		if (index(f, root) == 1) f = substr(f, length(root) + 1)
		if (f ~ /^lib\//) cls = "lib"
		else if (index(w[1], root) == 1 || f ~ /^(examples|benchmarks|tests)\//) cls = "host"
		else cls = "ext"
		return 1
	}'

VARIANTS=(slcache no-arenas no-accounting)
SCENARIOS=(evicting fitting)
JSON=""
declare -A ROW
per_req() { awk -v a="$1" -v b="$2" -v n="$REQUESTS" 'BEGIN { printf "%.0f", (a - b) / n }'; }
for sc in "${SCENARIOS[@]}"; do
	case $sc in
	evicting) MB=8 ;;  # about twice the data: every set charges at max and evicts
	fitting) MB=64 ;;  # everything fits: the charge's fast path
	esac
	log "==> callgrind, $sc (-m $MB): warm-up $WARMUP sets, then $REQUESTS requests (90% get), 1 thread"
	for v in "${VARIANTS[@]}"; do
		if [ -z "${SL_CG_REUSE:-}" ]; then
			run_once "$v" "$sc.base" 0 "$MB"
			run_once "$v" "$sc.full" "$REQUESTS" "$MB"
		fi
		read -r a0 s0 c0 j0 < <(totals "$OUT/$v.$sc.base.out")
		read -r a1 s1 c1 j1 < <(totals "$OUT/$v.$sc.full.out")
		per=$(per_req "$a1" "$a0")
		self=$(per_req "$s1" "$s0")
		sl=$(per_req "$((s1 + c1))" "$((s0 + c0))")
		je=$(per_req "$j1" "$j0")
		share=$(awk -v s="$sl" -v a="$per" 'BEGIN { printf "%.2f", a ? 100 * s / a : 0 }')
		ROW[$sc.$v]="$per $self $sl $share $je"
		JSON+=$(printf '{"bench":"callgrind","scenario":"%s","megabytes":%s,"variant":"%s","requests":%s,"ir_per_request":%s,"softlimit_self_ir_per_request":%s,"softlimit_ir_per_request":%s,"softlimit_share_pct":%s,"jemalloc_ir_per_request":%s}' \
			"$sc" "$MB" "$v" "$REQUESTS" "$per" "$self" "$sl" "$share" "$je")$'\n'
	done
done

R=$SL_ROOT/benchmarks/results
mkdir -p "$R"
printf '%s' "$JSON"
printf '%s' "$JSON" >"$R/callgrind.jsonl.tmp.$$" && mv "$R/callgrind.jsonl.tmp.$$" "$R/callgrind.jsonl"

log ""
log "| scenario | variant | instructions / request | vs --no-accounting | softlimit's own | softlimit with its libc/jemalloc calls | softlimit's share | in jemalloc |"
log "|---|---|---:|---:|---:|---:|---:|---:|"
for sc in "${SCENARIOS[@]}"; do
	read -r base _ <<<"${ROW[$sc.no-accounting]}"
	for v in "${VARIANTS[@]}"; do
		read -r per self sl share je <<<"${ROW[$sc.$v]}"
		log "| $sc | $v | $per | $(awk -v a="$per" -v b="$base" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }') | $self | $sl | $share% | $je |"
	done
done
