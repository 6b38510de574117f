#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# proof/check.sh - run the SPIN models of proof/ exhaustively: the clean
# models must pass, each mutant (a fixed bug put back, or a step of the
# fence protocol broken) must fail with a trail.  Prints a table (model, states, time, result); exits nonzero on
# any surprise.  Needs spin and gcc.  Trails are kept in $SL_PROOF_DIR
# (default build/proof): replay one with
#   cd build/proof/<case> && spin -t -p -g <defines> <model>.pml
# SL_PROOF_ONLY=REGEX runs only the cases whose name matches (bash =~).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${SL_PROOF_DIR:-$here/../build/proof}
mkdir -p "$out"
command -v spin >/dev/null || { echo "check.sh: spin not found (apt-get install spin)" >&2; exit 2; }

# reclaim.pml with the C code's bounds: 16 rounds without progress, 8
# proportional rounds; 4 rounds of waiting for others' reclaims (4096 in C;
# 1 with the re-entrant callback, whose 4 take 20 M states).
full="-DRETRIES=16 -DPROP_ROUNDS=8"
# lease.pml without the crash and the stop (CRASHES, STALLS), 3 ticks.
lease="-DCRASHES=0 -DSTALLS=0 -DTMAX=3"
# Its join while the group is charged: a late joiner, 2 ticks (3: 11.9 M
# states, 4 min); the rejoin after a wipe, the usage sum (the wipe's known
# gap) left out, no tick (1 tick: more than 23 M states).
join="-DCRASHES=0 -DSTALLS=0 -DTMAX=2 -DCFG_JOIN"
rejoin="-DCRASHES=0 -DSTALLS=0 -DTMAX=0 -DCFG_WIPE -DNO_USAGE_SUM"
# coord.pml, two grant txns (PLANS): with rejoins and no deposal, or a
# deposal and no rejoin (both: more than 30 M states, not finished in
# 3 min; PLANS=3: more than 8 M each, idem).
coord="-DPLANS=2 -DDEPOSES=0"
coord_dep="-DPLANS=2 -DSESSMAX=1"

# name | model | defines | expect (pass or fail) | gcc's -O (default -O0:
# gcc -O2 takes 6-35 s on these pan.c files, and gains at most 10 % on the
# largest search, 35 M states) | pan's hash table (default -w24; -w26 for
# the searches of 24 M states and more: about 20 % faster) | more
# flags for pan.c (-DBFS: breadth first, the shortest trail)
cases=(
	"handoff|stock|-DCFG_HANDOFF|pass"
	"handoff-fold0|stock|-DCFG_HANDOFF -DFOLD_ROUNDS=0|pass"
	"handoff-own|stock|-DCFG_HANDOFF -DOWN_UNIT|pass"
	"enomem|stock|-DCFG_ENOMEM|pass||-w26"
	"setmax|stock|-DCFG_SETMAX|pass"
	"mutant-false-overuncharge|stock|-DCFG_HANDOFF -DMUTANT_FALSE_OVERUNCHARGE|fail"
	"mutant-refill-after-drain|stock|-DCFG_HANDOFF -DFOLD_ROUNDS=0 -DMUTANT_REFILL_AFTER_DRAIN|fail"
	"mutant-set-max|stock|-DCFG_SETMAX -DMUTANT_SET_MAX|fail"
	"mutant-keep-no-room|stock|-DCFG_SETMAX -DMUTANT_KEEP_NO_ROOM|fail"
	"fence-handoff|stock|-DFENCE -DCFG_HANDOFF|pass"
	"fence-handoff-fold0|stock|-DFENCE -DCFG_HANDOFF -DFOLD_ROUNDS=0|pass"
	"fence-handoff-own|stock|-DFENCE -DCFG_HANDOFF -DOWN_UNIT|pass"
	"fence-enomem|stock|-DFENCE -DCFG_ENOMEM|pass||-w26"
	"fence-setmax|stock|-DFENCE -DCFG_SETMAX|pass"
	"mutant-enter-look-first|stock|-DFENCE -DCFG_HANDOFF -DMUTANT_ENTER_LOOK_FIRST|fail"
	"mutant-enter-no-look|stock|-DFENCE -DCFG_HANDOFF -DMUTANT_ENTER_NO_LOOK|fail"
	"mutant-answer-no-inflight|stock|-DFENCE -DCFG_HANDOFF -DMUTANT_ANSWER_NO_INFLIGHT|fail"
	"mutant-eager-unflagged|stock|-DFENCE -DCFG_HANDOFF -DOWN_UNIT -DMUTANT_EAGER_UNFLAGGED|fail"
	"mutant-take-others-unfenced|stock|-DFENCE -DCFG_ENOMEM -DMUTANT_TAKE_OTHERS_UNFENCED|fail"
	"reclaim-pair|reclaim|-DCFG_PAIR $full -DWAIT_ROUNDS=4|pass"
	"reclaim-pair-reentrant|reclaim|-DCFG_PAIR -DREENTRANT $full|pass"
	"reclaim-destroy|reclaim|-DCFG_DESTROY $full -DWAIT_ROUNDS=4|pass"
	"reclaim-destroy-reentrant|reclaim|-DCFG_DESTROY -DREENTRANT $full -DWAIT_ROUNDS=4|pass"
	"claim-refill|reclaim|-DCFG_CLAIM_REFILL $full|pass"
	"claim-keep|reclaim|-DCFG_CLAIM_REFILL -DCLAIM_KEEP $full|pass"
	"reclaim-oom|reclaim|-DCFG_OOM $full -DWAIT_ROUNDS=4|pass"
	"fence-reclaim-pair|reclaim|-DFENCE -DCFG_PAIR $full -DWAIT_ROUNDS=4|pass"
	"fence-reclaim-destroy|reclaim|-DFENCE -DCFG_DESTROY $full -DWAIT_ROUNDS=4|pass"
	"fence-reclaim-oom|reclaim|-DFENCE -DCFG_OOM $full -DWAIT_ROUNDS=4|pass"
	"fence-claim-keep|reclaim|-DFENCE -DCFG_CLAIM_REFILL -DCLAIM_KEEP $full|pass"
	"mutant-usage-split|reclaim|-DCFG_CLAIM_REFILL -DMUTANT_USAGE_SPLIT $full|fail"
	"mutant-claim-order|reclaim|-DCFG_PAIR -DMUTANT_CLAIM_ORDER -DMUTANT_NO_CALLBACK_TURNS $full|fail"
	"mutant-force-no-drain|reclaim|-DCFG_OOM -DMUTANT_FORCE_NO_DRAIN $full -DWAIT_ROUNDS=4|fail"
	"mutant-keep-no-transit|reclaim|-DCFG_CLAIM_REFILL -DCLAIM_KEEP -DMUTANT_KEEP_NO_TRANSIT $full|fail"
	# lease.pml: the lease protocol (lib/lease/, include/softlimit/lease.h),
	# bounded to 3 clock ticks with store errors and delays; its mutants.
	"lease|lease|$lease|pass"
	"mutant-lease-report-first|lease|$lease -DMUTANT_REPORT_FIRST|fail"
	"mutant-lease-no-version|lease|$lease -DMUTANT_NO_VERSION|fail"
	"mutant-lease-store-first|lease|$lease -DMUTANT_STORE_FIRST|fail"
	"mutant-lease-no-floor|lease|$lease -DMUTANT_NO_FLOOR|fail"
	"mutant-lease-renew-expired|lease|$lease -DMUTANT_RENEW_EXPIRED|fail"
	# A join (and a rejoin) lowers the group's max before it claims, and
	# raises it only after the write; the mutant is lease.c's order before
	# the fix: read the usage, write, then set the max.
	"lease-join|lease|$join|pass"
	"mutant-lease-join-lower-last|lease|$join -DMUTANT_JOIN_LOWER_LAST|fail"
	"lease-rejoin|lease|$rejoin|pass"
	"mutant-lease-rejoin-lower-last|lease|$rejoin -DMUTANT_JOIN_LOWER_LAST|fail"
	# A known gap, not a mutant: a store that restarts empty loses the
	# floors of holders that have not rejoined yet (proof/README.md).
	"gap-lease-wipe|lease|-DCFG_WIPE $lease|fail"
	# coord.pml: the coordinated etcd protocol as implemented
	# (store_etcd_coord.c, store_etcd_leader.c, coord.c): two nodes, two
	# coordinators, one deposed while it runs, floors that move; its
	# mutants (breadth first: the shortest trail, in seconds).
	"coord|coord|$coord|pass"
	"coord-depose|coord|$coord_dep|pass"
	"mutant-coord-no-term|coord|$coord_dep -DMUTANT_NO_TERM|fail|||-DBFS"
	"mutant-coord-other-session|coord|$coord -DMUTANT_OTHER_SESSION|fail|||-DBFS"
	"mutant-coord-early-free|coord|$coord -DMUTANT_EARLY_FREE|fail|||-DBFS"
	"mutant-coord-raise-early|coord|$coord -DMUTANT_RAISE_EARLY|fail|||-DBFS"
	"mutant-coord-store-first|coord|$coord -DMUTANT_STORE_FIRST|fail|||-DBFS"
	"mutant-coord-raise-no-grev|coord|$coord -DMUTANT_RAISE_NO_GREV|fail|||-DBFS"
	"mutant-coord-raise-first|coord|$coord -DMUTANT_RAISE_FIRST|fail|||-DBFS"
	"mutant-coord-cut-no-rrev|coord|$coord -DMUTANT_CUT_NO_RREV|fail|||-DBFS"
	"mutant-coord-fence-grant-floor|coord|$coord -DMUTANT_FENCE_GRANT_FLOOR|fail|||-DBFS"
	# The bug this model found in lease_register() (fixed in a991cfb):
	# a rejoin claimed the floor of the grant it knew, which may have
	# been rewritten since, without a compare.
	"mutant-coord-rejoin-grant-floor|coord|-DPLANS=3 -DDEPOSES=0 -DREJOIN_GRANT_FLOOR|fail|||-DBFS"
)
# The crash and the stop: tens of millions of states each, more than this
# run's budget; SL_PROOF_LEASE_BIG=1 adds them.
if [ "${SL_PROOF_LEASE_BIG:-0}" = 1 ]; then
	cases+=(
		"lease-crash|lease|-DSTALLS=0 -DTMAX=3|pass||-w26"
		"lease-stall|lease|-DCRASHES=0 -DTMAX=3|pass||-w26"
		"mutant-lease-shrink-raises|lease|$lease -DMID_TARGETS -DMUTANT_SHRINK_RAISES|fail||-w26"
	)
fi

if [ -n "${SL_PROOF_ONLY:-}" ]; then
	only=()
	for c in "${cases[@]}"; do
		[[ ! ${c%%|*} =~ $SL_PROOF_ONLY ]] || only+=("$c")
	done
	cases=("${only[@]}")
fi

# One case: its row of the table into $dir/row, and "bad" into $dir/bad on
# a surprise.
run_case() {
	local name model defs expect opt hash cflags dir t0 t1 states errors result
	IFS='|' read -r name model defs expect opt hash cflags <<<"$1"
	dir=$out/$name
	rm -rf "$dir"
	mkdir -p "$dir"
	cp "$here"/*.pml "$dir"/
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # defs is a list of words
	(cd "$dir" && spin $defs -a "$model.pml" >spin.log 2>&1 &&
		# shellcheck disable=SC2086 # cflags is a list of words
		gcc "${opt:--O0}" -w -DCOLLAPSE -DSAFETY $cflags -o pan pan.c >>spin.log 2>&1 &&
		./pan -m200000 "${hash:--w24}" >pan.log 2>&1) || true
	t1=$(date +%s.%N)
	states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' "$dir/pan.log" 2>/dev/null | head -1)
	errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$dir/pan.log" 2>/dev/null | head -1)
	if [ -z "$errors" ]; then
		result="ERROR (see $dir/spin.log, pan.log)"
		echo bad >"$dir/bad"
	elif [ "$errors" = 0 ] && [ "$expect" = pass ]; then
		result="pass"
	elif [ "$errors" != 0 ] && [ "$expect" = fail ] && [ -f "$dir/$model.pml.trail" ]; then
		result="caught: $(grep -m1 -o 'assertion violated.*\|invalid end state.*' "$dir/pan.log" | cut -c1-60)"
	else
		result="SURPRISE: expected $expect, errors $errors (trail in $dir)"
		echo bad >"$dir/bad"
	fi
	printf '%-28s %-11s %12s %7.1fs  %s\n' "$name" "$model.pml" "${states:-?}" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$result" >"$dir/row"
}

# SL_PROOF_JOBS cases at a time (default 1; 2 made the whole run slower
# here, with other sessions on the 2 cores), the largest first (so that
# the small ones fill in around them); the table keeps the list's order.
first="fence-enomem enomem reclaim-pair-reentrant fence-setmax setmax fence-handoff-own lease lease-join coord mutant-eager-unflagged"
jobs_max=${SL_PROOF_JOBS:-1}
t_start=$(date +%s)
launch=()
for n in $first; do
	for c in "${cases[@]}"; do
		[ "${c%%|*}" != "$n" ] || launch+=("$c")
	done
done
for c in "${cases[@]}"; do
	case " $first " in *" ${c%%|*} "*) ;; *) launch+=("$c") ;; esac
done
for c in "${launch[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
		wait -n || true
	done
	run_case "$c" &
done
wait

printf '%-28s %-11s %12s %8s  %s\n' model file states time result
bad=0
for c in "${cases[@]}"; do
	name=${c%%|*}
	cat "$out/$name/row" 2>/dev/null || { echo "$name: no result"; bad=1; }
	[ ! -f "$out/$name/bad" ] || bad=1
done
echo "whole run: $(($(date +%s) - t_start)) s, $jobs_max at a time"
exit $bad
