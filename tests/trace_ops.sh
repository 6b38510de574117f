#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/trace_ops.sh BENCH_ISOLATION - bench_isolation replays a trace's ops
# and TTLs as isolation_trace.h says: a read counts a hit or a miss, a
# getset fills on a miss, get does not, delete removes, replace needs the
# item, an item past its TTL misses and counts as expired, touch moves the
# expiry, and --server-ttl keeps TTLs as a memcached-protocol server does.
# The expected counts are worked out by hand in the comments; the
# cache is large enough that nothing is evicted, so every variant agrees.
set -eu

BENCH=$1
T=$(mktemp /tmp/sl-trace-ops-XXXXXX)
trap 'rm -f "$T" "$T.out"' EXIT
cat >"$T" <<'TRACE'
# budget: 1048576
# warmup: 0
# soft: t 100000
0 t a 10 set 1
0.5 t a 10 get
1 t a 10 get
1 t a 10 add
2 t a 10 get
2 t a 0 delete
3 t a 10 get
3 t b 10 replace
4 t b 10 get
4 t b 10 getset
5 t b 10
5 t c 0 incr
6 t b 5 append
6 t b 10 gets
6 t b 0 touch 1
8 t b 10 get
TRACE
# reads: 0.5 get a (hit), 1 get a (expired: miss), 2 get a (hit, the add stored it),
# 3 get a (deleted: miss), 4 get b (miss, no fill), 4 getset b (miss, fills),
# 5 getset b (hit), 6 gets b (hit), 8 get b (touched to expire at 7: miss).
# 9 reads, 4 hits, 2 found expired.
"$BENCH" --trace "$T" --json-only >"$T.out"
n=0
for v in shared static guarantee gatekeeper protection; do
	line=$(grep "\"bench\":\"isolation\",.*\"variant\":\"$v\",\"tenant\":\"t\"" "$T.out") || {
		echo "trace_ops: no line for variant $v" >&2
		exit 1
	}
	case $line in
	*'"gets":9,"hit_ratio":0.4444,'*'"expired":2,'*) n=$((n + 1)) ;;
	*)
		echo "trace_ops: variant $v: want gets 9, hit_ratio 0.4444, expired 2; got" >&2
		echo "$line" >&2
		exit 1
		;;
	esac
done
echo "trace_ops: $n variants replayed every op as specified"

# --server-ttl: a 0.3 s TTL set at 0.9 s is rounded up to 1 s and counted on
# a clock of whole seconds, so the item is gone at 1.0 s; exactly, it lives
# until 1.2 s.  The read at 1.05 s hits exactly and misses with --server-ttl.
cat >"$T" <<'TRACE'
# soft: t 100000
0.9 t a 10 set 0.3
1.05 t a 10 get
TRACE
exact=$("$BENCH" --trace "$T" --json-only | grep '"variant":"shared","tenant":"t"')
server=$("$BENCH" --trace "$T" --json-only --server-ttl | grep '"variant":"shared","tenant":"t"')
case $exact in *'"gets":1,"hit_ratio":1.0000,'*) ;; *)
	echo "trace_ops: exact TTL: want a hit; got $exact" >&2
	exit 1
	;;
esac
case $server in *'"gets":1,"hit_ratio":0.0000,'*'"expired":1,'*) ;; *)
	echo "trace_ops: --server-ttl: want an expired miss; got $server" >&2
	exit 1
	;;
esac
echo "trace_ops: --server-ttl expires on whole seconds"
