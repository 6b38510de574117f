#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# integrations/memcached/test.sh [--tenants] MEMCACHED - run memcached's own
# t/ suite (prove) against the binary MEMCACHED, as build.sh left it; prove's
# summary is the last line.
#
#   --tenants   every memcached the suite starts gets tenants declared:
#               $MC_TENANT_ARGS, by default
#               --tenant steady:soft=40% --tenant noisy:max=50% --tenant foo:min=1M
#               (the suite's keys are mostly unprefixed: they are charged
#               to the tenant "default", and evicted through softlimit).
#
# The suite is the one of the patched source tree build.sh leaves
# ($MEMCACHED_SRC, by default DIR/work/memcached-1.6.18 beside MEMCACHED);
# patch 0002 makes it start MEMCACHED (T_MEMD_EXE) with the extra options
# (T_MEMD_ARGS).  Left out, as Debian's build leaves it out: t/whitespace.t
# (it checks the files git knows of); against a binary that is not a debug
# build (build.sh leaves both OUTDIR/memcached and OUTDIR/memcached-debug,
# the same sources with -DMEMCACHED_DEBUG and assertions on, which is what
# Debian's own build tests), t/expirations.t.  With --tenants, the servers
# the suite starts with extstore or -e (which --tenant refuses) get no
# tenants; everything else runs with them.
# MC_PROVE_JOBS (default 2) tests run at once.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SL_PROG=integrations/memcached/test.sh
# shellcheck source=scripts/lib.sh
. "$HERE/../../scripts/lib.sh"

TENANTS=0
if [ "${1:-}" = --tenants ]; then
	TENANTS=1
	shift
fi
[ $# -eq 1 ] || sl_die "usage: test.sh [--tenants] MEMCACHED"
[ -x "$1" ] || sl_die "not an executable: $1"
EXE=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=${MEMCACHED_SRC:-$(dirname "$EXE")/work/memcached-1.6.18}
[ -f "$SRC/t/lib/MemcachedTest.pm" ] || sl_die "no memcached t/ suite in $SRC (set MEMCACHED_SRC)"
grep -q T_MEMD_EXE "$SRC/t/lib/MemcachedTest.pm" ||
	sl_die "$SRC/t is not patched (0002): it would test its own memcached-debug"

# prove, and IO::Socket::SSL (debian/control: the tests' Build-Depends).
sl_ensure_packages perl libio-socket-ssl-perl
[ -x "$SRC/timedrun" ] || (cd "$SRC" && make timedrun >/dev/null) ||
	sl_die "cannot build $SRC/timedrun"

# t/expirations.t moves the server's clock with "debugtime", which only a
# debug build (memcached-debug, -DMEMCACHED_DEBUG) has: run against the
# plain binary, it is left out.
DEBUG=0
"$EXE" -o relaxed_privileges -V >/dev/null 2>&1 && DEBUG=1
tests=()
for t in "$SRC"/t/*.t; do
	case $(basename "$t") in
	whitespace.t) continue ;;
	expirations.t) [ $DEBUG = 0 ] && continue ;;
	esac
	tests+=("t/$(basename "$t")")
done
[ $DEBUG = 1 ] || sl_log "==> $EXE is no debug build: t/expirations.t (debugtime) left out"

export T_MEMD_EXE=$EXE
if [ $TENANTS = 1 ]; then
	export T_MEMD_ARGS=${MC_TENANT_ARGS:---tenant steady:soft=40% --tenant noisy:max=50% --tenant foo:min=1M}
	sl_log "==> memcached's t/ suite against $EXE, with $T_MEMD_ARGS"
else
	unset T_MEMD_ARGS
	sl_log "==> memcached's t/ suite against $EXE"
fi
cd "$SRC"
prove -j"${MC_PROVE_JOBS:-2}" "${tests[@]}"
