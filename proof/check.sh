#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# proof/check.sh - run the SPIN models of proof/ exhaustively: the clean
# models must pass, each mutant (a fixed bug put back) must fail with a
# trail.  Prints a table (model, states, time, result); exits nonzero on
# any surprise.  Needs spin and gcc.  Trails are kept in $SL_PROOF_DIR
# (default build/proof): replay one with
#   cd build/proof/<case> && spin -t -p -g <defines> <model>.pml
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${SL_PROOF_DIR:-$here/../build/proof}
mkdir -p "$out"
command -v spin >/dev/null || { echo "check.sh: spin not found (apt-get install spin)" >&2; exit 2; }

# reclaim.pml with the C code's bounds: 16 rounds without progress, 8
# proportional rounds; 4 rounds of waiting for others' reclaims (4096 in C;
# 1 with the re-entrant callback, whose 4 take 20 M states).
full="-DRETRIES=16 -DPROP_ROUNDS=8"

# name | model | defines | expect (pass or fail) | gcc's -O (default -O2;
# reclaim.pml's pan.c takes gcc -O2 half a minute, more than its search)
cases=(
	"handoff|stock|-DCFG_HANDOFF|pass"
	"handoff-fold0|stock|-DCFG_HANDOFF -DFOLD_ROUNDS=0|pass"
	"enomem|stock|-DCFG_ENOMEM|pass"
	"setmax|stock|-DCFG_SETMAX|pass"
	"mutant-false-overuncharge|stock|-DCFG_HANDOFF -DMUTANT_FALSE_OVERUNCHARGE|fail"
	"mutant-refill-after-drain|stock|-DCFG_HANDOFF -DFOLD_ROUNDS=0 -DMUTANT_REFILL_AFTER_DRAIN|fail"
	"mutant-set-max|stock|-DCFG_SETMAX -DMUTANT_SET_MAX|fail"
	"reclaim-pair|reclaim|-DCFG_PAIR $full -DWAIT_ROUNDS=4|pass|-O0"
	"reclaim-pair-reentrant|reclaim|-DCFG_PAIR -DREENTRANT $full|pass|-O0"
	"reclaim-destroy|reclaim|-DCFG_DESTROY $full -DWAIT_ROUNDS=4|pass|-O0"
	"reclaim-destroy-reentrant|reclaim|-DCFG_DESTROY -DREENTRANT $full -DWAIT_ROUNDS=4|pass|-O0"
	"claim-refill|reclaim|-DCFG_CLAIM_REFILL $full|pass|-O0"
	"mutant-usage-split|reclaim|-DCFG_CLAIM_REFILL -DMUTANT_USAGE_SPLIT $full|fail|-O0"
	"mutant-claim-order|reclaim|-DCFG_PAIR -DMUTANT_CLAIM_ORDER -DMUTANT_NO_CALLBACK_TURNS $full|fail|-O0"
)

printf '%-28s %-11s %12s %8s  %s\n' model file states time result
bad=0
for c in "${cases[@]}"; do
	IFS='|' read -r name model defs expect opt <<<"$c"
	dir=$out/$name
	rm -rf "$dir"
	mkdir -p "$dir"
	cp "$here"/*.pml "$dir"/
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # defs is a list of words
	(cd "$dir" && spin $defs -a "$model.pml" >spin.log 2>&1 &&
		gcc "${opt:--O2}" -w -DCOLLAPSE -DSAFETY -o pan pan.c >>spin.log 2>&1 &&
		./pan -m200000 >pan.log 2>&1) || true
	t1=$(date +%s.%N)
	states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' "$dir/pan.log" 2>/dev/null | head -1)
	errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$dir/pan.log" 2>/dev/null | head -1)
	if [ -z "$errors" ]; then
		result="ERROR (see $dir/spin.log, pan.log)"
		bad=1
	elif [ "$errors" = 0 ] && [ "$expect" = pass ]; then
		result="pass"
	elif [ "$errors" != 0 ] && [ "$expect" = fail ] && [ -f "$dir/$model.pml.trail" ]; then
		result="caught: $(grep -m1 -o 'assertion violated.*\|invalid end state.*' "$dir/pan.log" | cut -c1-60)"
	else
		result="SURPRISE: expected $expect, errors $errors (trail in $dir)"
		bad=1
	fi
	printf '%-28s %-11s %12s %7.1fs  %s\n' "$name" "$model.pml" "${states:-?}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$result"
done
exit $bad
