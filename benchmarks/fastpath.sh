#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# benchmarks/fastpath.sh [--quick] [ROUNDS] - the stocks' two protocols
# (lib/stock.c) side by side in one run: bench_charge and bench_handoff
# under the membarrier fence protocol (the default) and under
# compare-and-swap (SOFTLIMIT_MEMBARRIER=0), alternating ROUNDS times (3)
# so that drift in the machine's load hits both alike.  Prints a table of
# medians over the rounds; the JSON lines of every run, each tagged with
# its protocol, go to stdout.  Needs a Release build in build/bench
# (benchmarks/run makes one) or SL_BUILD_DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
quick=()
rounds=3
for a in "$@"; do
	case $a in
	--quick) quick=(--quick) ;;
	-h | --help)
		sed -n '3,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*[!0-9]* | '')
		echo "fastpath.sh: unknown argument '$a'" >&2
		exit 2
		;;
	*) rounds=$a ;;
	esac
done
bin=${SL_BUILD_DIR:-build/bench}/benchmarks
for b in bench_charge bench_handoff; do
	[ -x "$bin/$b" ] || { echo "fastpath.sh: no $bin/$b (run benchmarks/run, or set SL_BUILD_DIR)" >&2; exit 1; }
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; r++)); do
	for p in fence cas; do
		m=1
		[ $p = cas ] && m=0
		for b in bench_charge bench_handoff; do
			echo "fastpath.sh: round $r/$rounds, $p, $b" >&2
			SOFTLIMIT_MEMBARRIER=$m "$bin/$b" "${quick[@]}" --json-only |
				sed "s/^{/{\"protocol\":\"$p\",\"round\":$r,/" | tee -a "$out"
		done
	done
done
python3 - "$out" >&2 <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(proto, **kw):
    v = [r["ns_per_op" if r["bench"] == "charge" else "ns_per_item"] for r in rows
         if r.get("protocol") == proto and all(r.get(k) == x for k, x in kw.items())]
    return statistics.median(v) if v else float("nan")
def ratio(proto, num, den):
    vals = []
    for rnd in sorted({r["round"] for r in rows}):
        a, b = med(proto, round=rnd, **num), med(proto, round=rnd, **den)
        vals.append(a / b)
    return statistics.median(vals)
sl1 = dict(bench="charge", variant="softlimit", batch=32768, depth=4, threads=1)
sl2 = dict(bench="charge", variant="softlimit", batch=32768, depth=4, threads=2)
fl1 = dict(bench="charge", variant="floor", depth=4, threads=1)
ho = dict(bench="handoff", variant="softlimit", mode="handoff", batch=32768)
ring = dict(bench="handoff", variant="ring", mode="handoff")
print("| measure (medians over rounds) | fence | CAS | goal |")
print("|---|---:|---:|---|")
print("| charge+uncharge pair, default batch, depth 4, 1 thread (ns) | %.2f | %.2f | |" % (med("fence", **sl1), med("cas", **sl1)))
print("| floor: thread-local counter, depth 4, 1 thread (ns) | %.2f | %.2f | |" % (med("fence", **fl1), med("cas", **fl1)))
print("| softlimit / floor, 1 thread | %.2f | %.2f | <= 1.5 |" % (ratio("fence", sl1, fl1), ratio("cas", sl1, fl1)))
print("| 2 threads on one group / 1 thread | %.2f | %.2f | <= 1.3 |" % (ratio("fence", sl2, sl1), ratio("cas", sl2, sl1)))
print("| handoff, softlimit default batch (ns per item) | %.2f | %.2f | fence no worse than CAS |" % (med("fence", **ho), med("cas", **ho)))
print("| handoff, softlimit - ring (ns per item) | %.2f | %.2f | |" % (med("fence", **ho) - med("fence", **ring), med("cas", **ho) - med("cas", **ring)))
PY
