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

# name | model | defines | expect (pass or fail)
cases=(
	"handoff|stock|-DCFG_HANDOFF|pass"
	"handoff-fold0|stock|-DCFG_HANDOFF -DFOLD_ROUNDS=0|pass"
	"enomem|stock|-DCFG_ENOMEM|pass"
	"setmax|stock|-DCFG_SETMAX|pass"
	"mutant-false-overuncharge|stock|-DCFG_HANDOFF -DMUTANT_FALSE_OVERUNCHARGE|fail"
	"mutant-refill-after-drain|stock|-DCFG_HANDOFF -DFOLD_ROUNDS=0 -DMUTANT_REFILL_AFTER_DRAIN|fail"
	"mutant-set-max|stock|-DCFG_SETMAX -DMUTANT_SET_MAX|fail"
)

printf '%-28s %-8s %12s %8s  %s\n' model file states time result
bad=0
for c in "${cases[@]}"; do
	IFS='|' read -r name model defs expect <<<"$c"
	dir=$out/$name
	rm -rf "$dir"
	mkdir -p "$dir"
	cp "$here"/*.pml "$dir"/
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # defs is a list of words
	(cd "$dir" && spin $defs -a "$model.pml" >spin.log 2>&1 &&
		gcc -O2 -w -DCOLLAPSE -DSAFETY -o pan pan.c >>spin.log 2>&1 &&
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
	printf '%-28s %-8s %12s %7.1fs  %s\n' "$name" "$model.pml" "${states:-?}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$result"
done
exit $bad
