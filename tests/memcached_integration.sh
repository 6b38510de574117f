#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/memcached_integration.sh NOISY - softlimit inside stock memcached
# (integrations/memcached): build softlimit (Release) and install it to a
# temporary prefix, build Debian's memcached 1.6.18 with the patches against
# it (build.sh), then
#  1. memcached's own t/ suite passes against the patched binary without
#     tenants (test.sh), and against its debug build (assertions on) with
#     tenants declared (test.sh --tenants);
#  2. the noisy-neighbour scene (NOISY: examples/slcache_noisy, as
#     scripts/demo runs it against slcache): tenant "steady", soft=40% of
#     -m 64, keeps reading a working set of 2000 x 4 KB while "noisy" floods
#     4 x -m of unique keys.  On the patched memcached steady's hit ratio
#     over the rounds and the share of its working set still there after
#     the last flood are both >= 99%; on Debian's unpatched memcached
#     (/usr/bin/memcached) the share kept is below 99%: it loses it.  Both
#     rows are printed;
#  3. a tenant with max=1M and one with high=1M each store 2 MB: each ends
#     within its 1 MiB, "stats tenants" counted its evictions and events,
#     and the default tenant's items stored before are all still there.
# Exit 77 (skipped) only when the build cannot run at all: not root with
# Debian packages missing, or no Debian source package to fetch.
# MC_KEEP=DIR keeps the work in DIR.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SL_PROG=tests/memcached_integration.sh
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
# shellcheck source=tests/slcache_lib.sh
. "$HERE/slcache_lib.sh"

NOISY=${1:?usage: memcached_integration.sh SLCACHE_NOISY}
[ -x "$NOISY" ] || sl_die "no scene client at $NOISY"

skip() {
	printf 'SKIP: %s\n' "$*"
	exit 77
}

NEED=(cmake make gcc pkg-config dpkg-dev autoconf automake patch libevent-dev libsasl2-dev
	libssl-dev perl libio-socket-ssl-perl memcached python3)
if [ "$(id -u)" -ne 0 ]; then
	missing=$(sl_missing_packages "${NEED[@]}")
	[ -z "$missing" ] || skip "not root, and these Debian packages are missing: $missing"
fi
sl_ensure_packages "${NEED[@]}"
[ -d /etc/apt/sources.list.d ] || [ -f /etc/apt/sources.list ] || skip "no apt sources"

if [ -n "${MC_KEEP:-}" ]; then
	T=$MC_KEEP
	mkdir -p "$T"
else
	T=$(mktemp -d "${TMPDIR:-/tmp}/memcached-integration.XXXXXX")
fi
MC_PIDS=()
cleanup() {
	local p
	for p in "${MC_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	[ -n "${MC_KEEP:-}" ] || rm -rf "$T"
	slc_cleanup
}
trap cleanup EXIT

t0=$SECONDS
step() { sl_log "==> [$((SECONDS - t0)) s] $*"; }

step "softlimit: Release build, installed to $T/prefix"
cmake -S "$ROOT" -B "$T/softlimit" --log-level=WARNING -DCMAKE_BUILD_TYPE=Release \
	-DSL_BUILD_TESTS=OFF -DSL_BUILD_BENCHMARKS=OFF -DSL_BUILD_EXAMPLES=OFF \
	-DSL_INSTALL_MAN=OFF >"$T/softlimit.log" 2>&1 || { cat "$T/softlimit.log"; exit 1; }
nice -n 5 cmake --build "$T/softlimit" -j2 >>"$T/softlimit.log" 2>&1 || { tail -n 40 "$T/softlimit.log"; exit 1; }
cmake --install "$T/softlimit" --prefix "$T/prefix" >>"$T/softlimit.log" 2>&1 ||
	{ tail -n 20 "$T/softlimit.log"; exit 1; }

step "integrations/memcached/build.sh"
set +e
"$ROOT/integrations/memcached/build.sh" "$T/prefix" "$T/out" 2>&1 | tee "$T/build.log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
	grep -q 'apt-get \(update\|source\).*failed' "$T/build.log" &&
		skip "Debian's memcached source package cannot be fetched here"
	exit 1
fi
MC=$T/out/memcached

# The product without tenants; the debug build (assertions on) with them.
step "memcached's t/ suite, no tenant"
"$ROOT/integrations/memcached/test.sh" "$MC"
step "memcached's t/ suite, tenants declared (memcached-debug)"
"$ROOT/integrations/memcached/test.sh" --tenants "$T/out/memcached-debug"

# tenant_stats PORT - the usage and evictions lines of "stats tenants"
# (slcache_noisy's MiB and evict columns read slcache's own stats: 0 here).
tenant_stats() {
	local line
	exec 3<>"/dev/tcp/127.0.0.1/$1"
	printf 'stats tenants\r\n' >&3
	while IFS= read -r -t 30 line <&3; do
		line=${line%$'\r'}
		[ "$line" != END ] || break
		case $line in *:usage\ * | *:evictions\ *) TSTATS+="    $line"$'\n' ;; esac
	done
	exec 3<&-
}

# scene LABEL MEMCACHED [args...] - one row of slcache_noisy's table.
ROOTARG=()
[ "$(id -u)" -ne 0 ] || ROOTARG=(-u root)
TSTATS=
scene() {
	local label=$1 row
	shift
	slc_spawn "$T/$label.stderr" "$@" "${ROOTARG[@]}" -U 0 -m 64 -t 2 ||
		sl_die "could not start $1 on a free port"
	MC_PIDS+=("$SLC_SPAWN_PID")
	row=$("$NOISY" -p "$SLC_SPAWN_PORT" -m 64 -L "$label" 2>/dev/null)
	[ "$label" != patched ] || tenant_stats "$SLC_SPAWN_PORT"
	kill -TERM "$SLC_SPAWN_PID"
	wait "$SLC_SPAWN_PID" 2>/dev/null || true
	printf '%s\n' "$row"
	SCENE_ROW=$row
}
# pct COLUMN ROW - "steady hits" is column 1, "steady kept" 2 (labels are
# one word here), as integer tenths of a percent.
pct() { printf '%s\n' "$2" | awk -v c=$(($1 + 1)) '{ v = $c; sub(/%/, "", v); printf "%d\n", v * 10 }'; }

step "the noisy-neighbour scene: steady (soft=40%) against a flood of 4 x -m 64"
"$NOISY" --header
scene patched "$MC" --tenant steady:soft=40%
PATCHED=$SCENE_ROW
scene debian /usr/bin/memcached
DEBIAN=$SCENE_ROW
printf 'stats tenants of the patched memcached after the scene:\n%s' "$TSTATS"
[ "$(pct 1 "$PATCHED")" -ge 990 ] || sl_die "patched memcached: steady's hit ratio below 99%"
[ "$(pct 2 "$PATCHED")" -ge 990 ] || sl_die "patched memcached: steady kept less than 99%"
[ "$(pct 2 "$DEBIAN")" -lt 990 ] ||
	sl_die "Debian's memcached kept steady's working set too: the scene shows nothing"

# The other limits, on the patched memcached: "capped" (max=1M) and
# "throttled" (high=1M) each store 2 MB, "default" 100 KB first; then
# capped and throttled each hold no more than 1 MiB, stats tenants counted
# their events and evictions, and not one default item was lost.
step "max and high: two tenants store twice their limit beside default's items"
slc_spawn "$T/limits.stderr" "$MC" "${ROOTARG[@]}" -U 0 -m 64 -t 2 --tenant capped:max=1M \
	--tenant throttled:high=1M || sl_die "could not start $MC on a free port"
MC_PIDS+=("$SLC_SPAWN_PID")
python3 - "$SLC_SPAWN_PORT" <<'PY'
import socket, sys

s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
f = s.makefile("rb")
value = b"v" * 4000

def call(req, last):
    s.sendall(req)
    out = []
    while True:
        line = f.readline()
        if not line:
            sys.exit("memcached closed the connection")
        out.append(line.decode().rstrip("\r\n"))
        if out[-1] in last:
            return out

def set_many(prefix, n):
    for i in range(n):
        r = call(b"set %s%d 0 0 %d\r\n%s\r\n" % (prefix, i, len(value), value),
                 ("STORED", "SERVER_ERROR out of memory storing object"))
        if r[-1] != "STORED":
            sys.exit("%s%d: %s" % (prefix.decode(), i, r[-1]))

set_many(b"plain", 25)
set_many(b"capped:", 500)
set_many(b"throttled:", 500)
st = {}
for line in call(b"stats tenants\r\n", ("END",))[:-1]:
    _, name, value_ = line.split(" ")
    st[name] = int(value_)
for name in ("capped", "throttled"):
    print("%-9s usage %7d  evictions %4d  events_max %4d  events_high %4d" % (
        name, st["tenant:%s:usage" % name], st["tenant:%s:evictions" % name],
        st["tenant:%s:events_max" % name], st["tenant:%s:events_high" % name]))
ok = True
for name, event in (("capped", "events_max"), ("throttled", "events_high")):
    if st["tenant:%s:usage" % name] > 1 << 20:
        print("FAIL: %s holds %d bytes, above its 1M" % (name, st["tenant:%s:usage" % name]))
        ok = False
    if st["tenant:%s:evictions" % name] == 0 or st["tenant:%s:%s" % (name, event)] == 0:
        print("FAIL: %s: no evictions or no %s counted" % (name, event))
        ok = False
got = call(b"get " + b" ".join(b"plain%d" % i for i in range(25)) + b"\r\n", ("END",))
kept = sum(1 for line in got if line.startswith("VALUE "))
print("default   kept %d of 25 items" % kept)
if kept != 25:
    print("FAIL: the default tenant lost items to the others' limits")
    ok = False
sys.exit(0 if ok else 1)
PY
step "passed: the patched memcached keeps steady's working set, Debian's loses it;" \
	"max and high hold"
