#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# benchmarks/fastpath.sh [--quick] [--pin] [ROUNDS] - the stocks' two protocols
# (docs/stocks.md) side by side in one run: bench_charge and bench_handoff
# under the membarrier fence protocol (the default) and under
# compare-and-swap (SOFTLIMIT_MEMBARRIER=0), alternating ROUNDS times (3)
# so that drift in the machine's load hits both alike.  Prints a table of
# medians over the rounds; the JSON lines of every run, each tagged with
# its protocol, go to stdout.  Needs a Release build in build/bench
# (benchmarks/run makes one) or SL_BUILD_DIR.  SL_BASE_DIR=DIR (a Release
# build of other code, e.g. the commit before a change) runs that build's
# benchmarks too, in the same alternation, as two more columns
# (SL_BASE_PROTOCOLS=cas: one, for code from before the fence protocol,
# where SOFTLIMIT_MEMBARRIER changes nothing).  --pin
# pins bench_handoff's two threads to two CPUs (its --pin; a base build
# needs a bench_handoff that knows it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
quick=()
pin=()
rounds=3
for a in "$@"; do
	case $a in
	--quick) quick=(--quick) ;;
	--pin) pin=(--pin) ;;
	-h | --help)
		sed -n '3,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*[!0-9]* | '')
		echo "fastpath.sh: unknown argument '$a'" >&2
		exit 2
		;;
	*) rounds=$a ;;
	esac
done
bins=("${SL_BUILD_DIR:-build/bench}/benchmarks")
tags=("")
if [ -n "${SL_BASE_DIR:-}" ]; then
	bins+=("$SL_BASE_DIR/benchmarks")
	tags+=("-base")
fi
for bin in "${bins[@]}"; do
	for b in bench_charge bench_handoff; do
		[ -x "$bin/$b" ] || { echo "fastpath.sh: no $bin/$b (run benchmarks/run, or set SL_BUILD_DIR)" >&2; exit 1; }
	done
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; r++)); do
	for i in "${!bins[@]}"; do
		protos=(fence cas)
		[ -n "${tags[i]}" ] && read -r -a protos <<<"${SL_BASE_PROTOCOLS:-fence cas}"
		for p in "${protos[@]}"; do
			m=1
			[ $p = cas ] && m=0
			for b in bench_charge bench_handoff; do
				echo "fastpath.sh: round $r/$rounds, $p${tags[i]}, $b" >&2
				extra=()
				[ $b = bench_handoff ] && extra=("${pin[@]}")
				SOFTLIMIT_MEMBARRIER=$m "${bins[i]}/$b" "${quick[@]}" "${extra[@]}" --json-only |
					sed "s/^{/{\"protocol\":\"$p${tags[i]}\",\"round\":$r,/" | tee -a "$out"
			done
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
cols = [p for p in ("fence", "cas", "fence-base", "cas-base") if any(r.get("protocol") == p for r in rows)]
names = {"fence": "fence", "cas": "CAS", "fence-base": "fence (base)", "cas-base": "CAS (base)"}
def line(label, f, goal=""):
    print("| %s | %s | %s |" % (label, " | ".join("%.2f" % f(p) for p in cols), goal))
print("| measure (medians over rounds) | %s | goal |" % " | ".join(names[p] for p in cols))
print("|---|%s---|" % ("---:|" * len(cols)))
line("charge+uncharge pair, default batch, depth 4, 1 thread (ns)", lambda p: med(p, **sl1))
line("floor: thread-local counter, depth 4, 1 thread (ns)", lambda p: med(p, **fl1))
line("softlimit / floor, 1 thread", lambda p: ratio(p, sl1, fl1), "<= 1.5")
line("2 threads on one group / 1 thread", lambda p: ratio(p, sl2, sl1), "<= 1.3")
line("handoff, softlimit default batch (ns per item)", lambda p: med(p, **ho), "no worse than before")
line("round trip, softlimit default batch (ns per item)", lambda p: med(p, **dict(ho, mode="roundtrip")))
line("handoff, softlimit - ring (ns per item)", lambda p: med(p, **ho) - med(p, **ring))
line("handoff, softlimit / ring", lambda p: ratio(p, ho, ring))
def shared(p):
    cpu = [c for r in rows if r.get("protocol") == p and all(r.get(k) == x for k, x in ho.items()) for c in r["cpu"]]
    return "%d of %d" % (sum(c < 0.9 for c in cpu), len(cpu))
print("| handoff runs in which the two threads shared a core (cpu < 0.9) | %s | |" % " | ".join(shared(p) for p in cols))
PY
