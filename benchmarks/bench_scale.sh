#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# benchmarks/bench_scale.sh [--quick] [--only NxB] [scale.py options] - issue
# Scale's benchmark: the etcd:// lease store with 10 to 1,000 participants
# x 1 to 100 budgets, against a real 3-member etcd on loopback
# (tests/etcd_cluster.py), or the cluster named in SL_ETCD_ENDPOINTS
# (HOST:PORT,...: all of its members, for their /metrics).
#
# Participants are threads of bench_scale_node processes (100 each; 1,000
# are 10 x 100), each with its own store handle (its own session) and
# sl_lease_run() thread, joining every budget with a group of its own.
# Their demand is immediate (bench_scale_node.c): the equal share at
# first; then, at SIGUSR1, for budget b0 (--moved K: b0..bK-1) the even
# participants want 3 times it and the odd ones a third.  Per configuration,
# one JSON line:
#   {"bench":"fleet_scale","store":"etcd","protocol":"decentralized"|"coordinated",
#    "participants":N,"budgets":B,"store_requests_per_s":R,"convergence_s":C,
#    "over_budget_samples":K,...}
#   store_requests_per_s  growth of grpc_server_msg_received_total summed
#                   over the members (every unary request and every message
#                   on a keepalive or watch stream) over the steady state
#                   (--measure S after the joins), less the harness's own
#                   requests (counted); requests_per_participant_s = R / N;
#                   store_messages_sent_per_s: grpc_server_msg_sent_total's
#                   growth (answers and watch events) in that interval
#   joins_s, initial_convergence_s  from the start of the processes until
#                   every lease registered, and until every participant of
#                   the moved budgets held its equal share (within 10%)
#   joins_requests_per_participant_s  the same counter from the start to
#                   that point, per participant and second
#   convergence_s   after the move, until every participant's share of each
#                   moved budget is within 10% of its max-min fair target,
#                   read from the store every 100 ms (null and "timeout":true
#                   when not within --timeout S)
#   over_budget_samples  reads in which a budget's counted sum (decentralized:
#                   each record's held, or its floor once the record is
#                   gone; coordinated: what the store counts from grants
#                   and reports, lib/lease/coord.h) exceeded its max.  Every 100 ms the moved
#                   budgets are read, plus one other budget in rotation,
#                   from a mirror of the store that one watch keeps (on a
#                   member that is not the leader; each read is one
#                   budget at one revision); the reads (budget_reads)
#                   start after registration; read_round_ms: how long a
#                   round of reads really took; watch_events: the events
#                   the mirror applied
# Default configurations 10x1 30x1 100x1 10x10 100x10 1000x1 100x100
# 1000x10 1000x100; --quick 10x1 100x10 1000x100 (under 20 minutes on 2
# cores: deadlines join 180 s, joins' convergence 45 s, convergence 60 s).
# --only NxB runs one.  scale.py's other options: --protocol (coordinated,
# the default, or decentralized), --period MS
# (250), --ttl MS (10000), --ramp MS (0: participant I starts I x MS / N
# after the first, a fleet rolled out rather than started within a second),
# --per-process P, --moved K, --measure S, --timeout S, --join-timeout S,
# --settle-timeout S.
# stdout, and appended to benchmarks/results/scale.jsonl.  bench_scale_node
# is built (Release) in $SL_BUILD_DIR (default build/bench) unless it is
# there.  Measures, never gates.
set -euo pipefail

SL_PROG=benchmarks/bench_scale.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

case ${1:-} in
-h | --help)
	sed -n '4,58p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac

PY=$(command -v /usr/bin/python3 || command -v python3 || true)
[ -n "$PY" ] || sl_die "python3 not found"
if [ -z "${SL_ETCD_ENDPOINTS:-}" ]; then
	command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
		sl_die "etcd is not installed (apt-get install etcd-server etcd-client)"
fi

B=${SL_BUILD_DIR:-$SL_ROOT/build/bench}
if [ ! -f "$B/CMakeCache.txt" ]; then
	printf '==> configuring a Release build in %s\n' "$B" >&2
	sl_configure "$B" --log-level=WARNING -DCMAKE_BUILD_TYPE=Release -DSL_WERROR=OFF \
		-DSL_SANITIZE= -DSL_COVERAGE=OFF -DSL_BUILD_TESTS=OFF >&2
fi
cmake --build "$B" -j"$SL_JOBS" --target bench_scale_node >&2
NODE=$B/benchmarks/bench_scale_node
[ -x "$NODE" ] || sl_die "no bench_scale_node at $NODE (libcurl and jansson found in $B?)"

R=$SL_ROOT/benchmarks/results
mkdir -p "$R"
# Each line is appended as soon as its configuration ends: a long run
# stopped midway keeps what it measured.
"$PY" "$SL_ROOT/benchmarks/scale.py" "$NODE" "$@" | tee -a "$R/scale.jsonl"
