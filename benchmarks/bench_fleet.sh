#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# benchmarks/bench_fleet.sh [--quick] [--workload NAME] - issue
# Fleet's benchmark:
# three tenants' budgets shared by three slcache nodes through a real
# 3-member etcd cluster on loopback (etcd:// lease store), against the
# static split of the same budgets (--tenant T:max=BUDGET/3 on each node),
# in the same run.
#
# Tenants are Twitter-shaped (benchmarks/data/twitter-2020Mar-stats.md):
# clusters 4, 7 and 29, each with its cluster's mean value size and Zipf
# alpha, a 3 MiB budget over the fleet and a working set three times that.
# The client spreads c4's keys 80/15/5 over the nodes, c7's 5/15/80, c29's
# evenly (skewed false); halfway, every tenant's spread is reversed.  Leases
# run with period 200 ms, ttl 3 s, idle 1 s.  Per tenant and variant, one
# JSON line:
#   {"bench":"fleet","variant":"lease"|"static","tenant":T,"skewed":B,
#    "hit_ratio":H,"max_over_budget_bytes":X,"convergence_s":C,...}
#   hit_ratio       hits / reads over the fleet, both halves (after a warm-up)
#   convergence_s   after the reversal, when the newly hot node held more
#                   than 45% of the tenant's budget (null: never, or static)
#   max_over_budget_bytes  the tenant's usage summed over the nodes every
#                   10 ms, one node after another, past its budget
#   fences          the tenant's lease fences summed over the nodes before
#                   the kill below (stats tenants' lease_fences): 0 when no
#                   lease lapsed (static: 0)
#   kill_reuse_s    (first tenant) kill -9 of the node holding most: how soon
#                   the others have 80% of the budget in use (goal: ttl + a
#                   period, kill_goal_s)
# Issue Demand's workloads (rows with a "workload" field):
#   slow-reuse  tenant A's 24 MiB budget; its keys (8000-byte values, 1.5
#               times the budget) are each read again every r seconds, r
#               uniform in [1, 30], spread 70/25/5 then flipped to 5/25/70
#               (tests/slcache_lease_lib.py ReuseLoad); leases run with
#               --lease-period 250 --lease-ttl 2000, all else default.  Per
#               variant: hit_ratio_before, hit_ratio_after_30s (the 30 s
#               after the flip), hit_ratio_after (goal: leases 5 points
#               above static in each); hot_40pct_s, when the newly hot node
#               held more than 40% of the budget (goal: 3 s); over_budget_runs
#               (two samples in a row over the budget: goal 0); then kill -9
#               of the largest node: kill_leases_s, when the live nodes'
#               leases held 80% of the budget, and kill_reuse_s, when they
#               used it (goal: ttl + period + 1 s, kill_goal_s).
#   outage      slcache's lease defaults (period 200 ms, ttl 10 s), the same
#               load at 70/25/5: every etcd member killed (-9) for 5 s, then 10 s;
#               per outage, "kept" (each node's lowest usage through the
#               outage and 3 s after, over its usage before), "fences", and
#               etcd_back_s (the outage plus etcd's restart and election);
#               then kill_leases_s / kill_reuse_s as above.
# --workload NAME runs one of twitter (the tenants above), slow-reuse and
# outage, and replaces only its rows in fleet.jsonl.
# The store at scale (many participants, many budgets) is bench_scale.sh's.
# The shares over time: benchmarks/results/fleet_shares.csv (variant, time,
# tenant, node, share, usage), plotted to fleet_shares.svg when matplotlib
# is there.  Measures, never gates.  stdout and
# benchmarks/results/fleet.jsonl.  slcache and softlimitctl are built
# (Release) in $SL_BUILD_DIR (default build/bench) unless they are there.  --quick: under 15 minutes (about 5).
set -euo pipefail

SL_PROG=benchmarks/bench_fleet.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

opts=()
workload=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) opts+=("$1") ;;
	--workload)
		case ${2:-} in
		twitter | slow-reuse | outage) workload=$2 ;;
		*) sl_die "--workload takes twitter, slow-reuse or outage" ;;
		esac
		opts+=(--workload "$2")
		shift
		;;
	-h | --help)
		sed -n '4,58p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) sl_die "unknown option '$1'" ;;
	esac
	shift
done

log() { printf '%s\n' "$*" >&2; }

PY=$(command -v /usr/bin/python3 || command -v python3 || true)
[ -n "$PY" ] || sl_die "python3 not found"
command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
	sl_die "etcd is not installed (apt-get install etcd-server etcd-client)"

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
OUT=$(mktemp "${TMPDIR:-/tmp}/bench-fleet.XXXXXX")
trap 'rm -f "$OUT"' EXIT
SL_FLEET_SHARES=$R/fleet_shares.csv "$PY" "$SL_ROOT/benchmarks/fleet.py" "$SLCACHE" "$CTL" \
	"${opts[@]}" >"$OUT"
if [ -z "$workload" ] || [ ! -f "$R/fleet.jsonl" ]; then
	cp "$OUT" "$R/fleet.jsonl"
else
	# One workload run: its rows replace that workload's, the others stay.
	"$PY" "$SL_ROOT/benchmarks/merge_rows.py" "$R/fleet.jsonl" "$OUT" "$workload" twitter
fi
"$PY" - "$R/fleet_shares.csv" "$R/fleet_shares.svg" <<'PLOT' >&2 || true
import csv, sys
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("bench_fleet: no matplotlib: no plot (the CSV is there)")
    sys.exit(0)
rows = list(csv.DictReader(open(sys.argv[1])))
tenants = sorted({r["tenant"] for r in rows})
fig, axes = plt.subplots(len(tenants), 2, figsize=(11, 3 * len(tenants)), squeeze=False)
for i, t in enumerate(tenants):
    for j, v in enumerate(("static", "lease")):
        ax = axes[i][j]
        for node in sorted({r["node"] for r in rows}):
            pts = [(float(r["t_s"]), int(r["share_bytes"]) / 2**20) for r in rows
                   if r["tenant"] == t and r["variant"] == v and r["node"] == node]
            if pts:
                ax.plot(*zip(*pts), label="node %s" % node)
        ax.set_title("%s, %s" % (t, v))
        ax.set_xlabel("s")
        ax.set_ylabel("share (MiB)")
        ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(sys.argv[2])
print("bench_fleet: plot in %s" % sys.argv[2])
PLOT
cat "$OUT"
