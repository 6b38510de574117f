#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# benchmarks/bench_lease_host.sh [--quick] [--workload NAME] - issue 25's
# efficiency check:
# one tenant's budget shared by three slcache processes on one host through
# a shm: lease store, against the static split of the same budget
# (--tenant t:max=BUDGET/3 in each), in the same run.
#
# The tenant "t" has a 4 MiB budget; its keys (4000-byte values, a working
# set 1.25 times the budget) are spread over the processes 60/30/10 and read
# cache-aside with Zipf (0.9) popularity, a miss set at once
# (benchmarks/lease_host.py, with tests/slcache_lease_lib.py's client).
# Leases run with slcache's default period (200 ms), a ttl of 3 s, and give
# back memory unread for a second (--lease-idle 1000).  Per variant:
#   hit_ratio          hits / reads over the three processes after a warm-up
#                      (goal: leases at least 5 points above static);
#   reverse_share_3s   the skew reversed to 10/30/60: the share of the budget
#                      the newly hot process holds 3 s later (goal: well above
#                      a third), and reverse_s, when it passed 45%;
#   kill_reuse_s       kill -9 of the process that holds most (its keys go to
#                      the others): how soon the others have 80% of the budget
#                      in use (goal: within ttl + one period, kill_goal_s);
#   max_over_budget_bytes  the tenant's usage summed over the processes every
#                      10 ms, one process after another, past the budget.
# Then issue Demand's slow-reuse workload over the same shm: store (rows with
# "workload":"slow-reuse"; the fields are bench_fleet.sh's, which see).
# --workload zipf|slow-reuse runs one and replaces only its rows.
# Measures, never gates.  stdout and benchmarks/results/lease_host.jsonl: one
# JSON line per variant {"bench":"lease_host","variant":"static"|"lease",...}.
# slcache and softlimitctl are built (Release) in $SL_BUILD_DIR (default
# build/bench) unless they are there.  --quick: shorter warm-up and
# measurement (about 2 minutes in all, and 4 for slow-reuse).
set -euo pipefail

SL_PROG=benchmarks/bench_lease_host.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

quick=()
workload=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=(--quick) ;;
	--workload)
		case ${2:-} in
		zipf | slow-reuse) workload=$2 ;;
		*) sl_die "--workload takes zipf or slow-reuse" ;;
		esac
		shift
		;;
	-h | --help)
		sed -n '4,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) sl_die "unknown option '$1'" ;;
	esac
	shift
done

log() { printf '%s\n' "$*" >&2; }

PY=$(command -v /usr/bin/python3 || command -v python3 || true)
[ -n "$PY" ] || sl_die "python3 not found"

B=${SL_BUILD_DIR:-$SL_ROOT/build/bench}
if [ ! -f "$B/CMakeCache.txt" ]; then
	log "==> configuring a Release build in $B"
	sl_configure "$B" --log-level=WARNING -DCMAKE_BUILD_TYPE=Release -DSL_WERROR=OFF \
		-DSL_SANITIZE= -DSL_COVERAGE=OFF -DSL_BUILD_TESTS=OFF -DSL_BUILD_EXAMPLES=ON >&2
fi
cmake --build "$B" -j"$SL_JOBS" --target slcache softlimitctl >&2
SLCACHE=$B/examples/slcache
CTL=$B/tools/softlimitctl
[ -x "$SLCACHE" ] || sl_die "no slcache at $SLCACHE (is SL_BUILD_EXAMPLES on in $B?)"
[ -x "$CTL" ] || sl_die "no softlimitctl at $CTL (is libsoftlimit-lease built in $B?)"

R=$SL_ROOT/benchmarks/results
mkdir -p "$R"
OUT=$(mktemp "${TMPDIR:-/tmp}/bench-lease-host.XXXXXX")
trap 'rm -f "$OUT"' EXIT
"$PY" "$SL_ROOT/benchmarks/lease_host.py" "$SLCACHE" "$CTL" "${quick[@]}" \
	${workload:+--workload "$workload"} >"$OUT"
if [ -z "$workload" ] || [ ! -f "$R/lease_host.jsonl" ]; then
	cp "$OUT" "$R/lease_host.jsonl"
else
	"$PY" "$SL_ROOT/benchmarks/merge_rows.py" "$R/lease_host.jsonl" "$OUT" "$workload" zipf
fi
cat "$OUT"
