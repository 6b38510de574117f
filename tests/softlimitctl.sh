#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# softlimitctl.sh SOFTLIMITCTL - softlimitctl(1) end to end on a fresh
# shm: store: budget set, show (table and --json), list, delete, store
# remove, and bad input refused with exit status 2 (a bad command line:
# the store is left as it was, or not created) or 1 (the store refused: no
# such budget), with a message.
#
# softlimitctl.sh SOFTLIMITCTL etcd - the same commands on an etcd://
# store, under tests/etcd_cluster.py (SL_ETCD_ENDPOINTS): store remove.
set -u

CTL=$1
MODE=${2:-shm}
STORE="shm:slctl-$$-$RANDOM"
NEVER="slctl-never-$$-$RANDOM" # a shm: store no command may create
OUT=$(mktemp "${TMPDIR:-/tmp}/softlimitctl-test.XXXXXX")
ERR=$(mktemp "${TMPDIR:-/tmp}/softlimitctl-test.XXXXXX")
trap 'rm -f "$OUT" "$ERR" "/dev/shm/softlimit-${STORE#shm:}" "/dev/shm/softlimit-$NEVER"' EXIT
failures=0

fail() {
	printf 'FAIL: %s\n' "$*" >&2
	printf -- '--- stdout:\n%s\n--- stderr:\n%s\n' "$(cat "$OUT")" "$(cat "$ERR")" >&2
	failures=$((failures + 1))
}

# expect STATUS ARGS... - run softlimitctl --store STORE ARGS...; check the status.
expect() {
	local want=$1 rc
	shift
	"$CTL" --store "$STORE" "$@" >"$OUT" 2>"$ERR"
	rc=$?
	[ "$rc" -eq "$want" ] || fail "softlimitctl $*: exit $rc, expected $want"
	if [ "$want" -ne 0 ] && ! grep -q '^softlimitctl: ' "$ERR"; then
		fail "softlimitctl $*: failed without a message"
	fi
	return 0
}

has() { grep -q -- "$1" "$OUT" || fail "output lacks '$1'"; }

finish() {
	if [ "$failures" -ne 0 ]; then
		echo "softlimitctl.sh: $failures failures"
		exit 1
	fi
	echo "softlimitctl.sh: PASS"
	exit 0
}

# etcd://: store remove deletes the store's keys; a second finds nothing.
if [ "$MODE" = etcd ]; then
	[ -n "${SL_ETCD_ENDPOINTS:-}" ] || { echo "softlimitctl.sh etcd: run under etcd_cluster.py" >&2; exit 2; }
	STORE="etcd://$SL_ETCD_ENDPOINTS/slctl-$$"
	expect 0 --timeout 60 budget set web max=64M min=8M
	expect 0 --timeout 60 budget set db max=1G
	expect 0 --timeout 60 budget list
	[ "$(tr '\n' ' ' <"$OUT")" = "db web " ] || fail "etcd budget list: '$(cat "$OUT")'"
	expect 0 --timeout 60 store remove
	expect 1 --timeout 60 store remove
	grep -q 'no such store' "$ERR" || fail "etcd store remove twice: '$(cat "$ERR")'"
	expect 0 --timeout 60 budget list
	[ ! -s "$OUT" ] || fail "a removed etcd store still lists budgets: '$(cat "$OUT")'"
	expect 1 --timeout 60 budget show web
	# etcd out of reach (nothing listens on port 1): a store error, exit 1.
	STORE="etcd://127.0.0.1:1/slctl-$$"
	expect 1 --timeout 3 store remove
	grep -q 'cannot be reached' "$ERR" || fail "etcd store remove, no etcd: '$(cat "$ERR")'"
	finish
fi

# --help and usage errors need no store.
"$CTL" --help >"$OUT" 2>"$ERR" || fail "--help: exit $?"
has 'budget set NAME max=SIZE'
"$CTL" budget list >"$OUT" 2>"$ERR" </dev/null
rc=$?
if [ -z "${SOFTLIMIT_STORE:-}" ] && [ "$rc" -ne 2 ]; then fail "no store: exit $rc, expected 2"; fi

# An empty store.
expect 0 budget list
[ ! -s "$OUT" ] || fail "a new store lists budgets"
expect 0 --json budget list
has '^\[\]$'

# set, then show the limits back, in bytes (--json) and with suffixes.
expect 0 budget set web max=64M soft=48M min=8M
expect 0 budget set db max=1G
expect 0 budget set tiny max=1500
expect 0 --json budget show web
has '"name":"web","max":67108864,"soft":50331648,"min":8388608,"participants":0,"share":0,"free":67108864,'
has '"members":\[\]'
expect 0 budget show web
has '64M'
has '48M'
has 'no participants'
expect 0 --json budget show tiny
has '"max":1500,'
expect 0 budget list
[ "$(tr '\n' ' ' <"$OUT")" = "db tiny web " ] || fail "budget list: '$(cat "$OUT")', expected db tiny web"
expect 0 --json budget show
has '"budgets":\[{"name":"db","max":1073741824,"soft":0,"min":0'
expect 0 budget show
has '^BUDGET'
has '^db  *1G'

# Set again: the limits are replaced (soft and min not given are 0).
expect 0 budget set web max=32m
expect 0 --json budget show web
has '"max":33554432,"soft":0,"min":0,'
# Suffixes as slcache takes them: K, M, G, with or without B, any case.
expect 0 budget set web max=2GB soft=512kb min=1k
expect 0 --json budget show web
has '"max":2147483648,"soft":524288,"min":1024,'

# A refused budget set creates no store: every argument is checked first.
for bad in "max=18446744073709551616" "max=1M min=2M" "max=1M soft=2M" "max=12X" "max=0" \
	"max=18446744073709551615" "soft=1M"; do
	# shellcheck disable=SC2086 # the words of $bad are the arguments
	"$CTL" --store "shm:$NEVER" budget set web $bad >"$OUT" 2>"$ERR"
	rc=$?
	[ "$rc" -eq 2 ] || fail "budget set web $bad on a new store: exit $rc, expected 2"
	grep -q '^softlimitctl: budget set web: ' "$ERR" || fail "budget set web $bad: '$(cat "$ERR")'"
	[ ! -e "/dev/shm/softlimit-$NEVER" ] || fail "a refused budget set web $bad created the store"
	rm -f "/dev/shm/softlimit-$NEVER"
done

# Bad input: exit 2, and the budget is as it was.
for bad in "max=" "max=12X" "max=-5" "max=0" "soft=1M" "max=1M soft=2M" "max=1M min=2M" \
	"max=1M max=2M" "max=1M foo=1" "max=99999999999999999999" "max=18446744073709551615" \
	"max=1M soft" "max=17179869184G"; do
	# shellcheck disable=SC2086 # the words of $bad are the arguments
	expect 2 budget set web $bad
done
expect 2 budget set "bad/name" max=1M
expect 2 budget set "" max=1M
expect 2 budget set "$(printf 'x%.0s' $(seq 1 64))" max=1M
expect 2 budget set web
expect 2 budget frob web
expect 2 budget
expect 2 nonsense
expect 2 budget show web extra
expect 2 budget delete
expect 2 budget list extra
expect 2 --timeout 0 budget list
expect 2 --timeout x budget list
expect 2 --bogus budget list
expect 0 --json budget show web
has '"max":2147483648,"soft":524288,"min":1024,'
"$CTL" --store "nope://x" budget list >"$OUT" 2>"$ERR"
rc=$?
[ "$rc" -eq 1 ] || [ "$rc" -eq 2 ] || fail "an unknown scheme: exit $rc"
grep -q '^softlimitctl: ' "$ERR" || fail "an unknown scheme: no message"
"$CTL" --store "shm:" budget list >"$OUT" 2>"$ERR"
rc=$?
[ "$rc" -eq 2 ] || fail "shm: without a name: exit $rc, expected 2"

# Unknown budgets: exit 1 with a message.
expect 1 budget show nosuch
grep -q 'no such budget' "$ERR" || fail "show nosuch: '$(cat "$ERR")'"
expect 1 budget delete nosuch

# delete.
expect 0 budget delete db
expect 0 budget list
[ "$(tr '\n' ' ' <"$OUT")" = "tiny web " ] || fail "after delete: '$(cat "$OUT")'"
expect 1 budget show db
expect 0 budget delete tiny
expect 0 budget delete web
expect 0 --json budget show
has '^{"budgets":\[\]}$'

# store remove: the object goes (a later command creates an empty one).
expect 0 budget set gone max=1M
expect 0 store remove
[ ! -e "/dev/shm/softlimit-${STORE#shm:}" ] || fail "store remove left /dev/shm/softlimit-${STORE#shm:}"
expect 1 store remove
grep -q 'no such store' "$ERR" || fail "store remove twice: '$(cat "$ERR")'"
expect 2 store frob
expect 2 store remove extra
expect 0 budget list
[ ! -s "$OUT" ] || fail "a removed store still lists budgets"

finish
