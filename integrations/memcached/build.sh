#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# integrations/memcached/build.sh PREFIX OUTDIR - build Debian 12's memcached
# 1.6.18 with the patches of this directory (tenants kept by softlimit),
# linked against the softlimit installed at PREFIX; leaves OUTDIR/memcached
# and OUTDIR/memcached-debug (the same, -DMEMCACHED_DEBUG and assertions on:
# what memcached's t/ suite is written for, and what Debian's build tests).
#
#  - The source comes from `apt-get source memcached`, through a private apt
#    configuration in OUTDIR/work/apt: deb-src entries made from the
#    machine's own /etc/apt/sources.list.d/debian.sources (or sources.list),
#    their own package lists.  The system's apt configuration is only read.
#  - The patches (000N-*.patch, in order) go on top of Debian's; then
#    autoreconf (Makefile.am gains tenants.c), as dh_autoreconf would.
#  - configure gets Debian's options (debian/rules' dh_auto_configure
#    arguments and dh's defaults) and flags (dpkg-buildflags with the
#    package's DEB_BUILD_MAINT_OPTIONS), plus softlimit's from pkg-config,
#    with an rpath to PREFIX's libdir.
#  - The build tree stays in OUTDIR/work/memcached-1.6.18 (test.sh runs its
#    t/ suite).
# Missing Debian packages are installed when run as root, else named.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SL_PROG=integrations/memcached/build.sh
# shellcheck source=scripts/lib.sh
. "$HERE/../../scripts/lib.sh"

[ $# -eq 2 ] || sl_die "usage: build.sh PREFIX OUTDIR"
PREFIX=$(cd "$1" && pwd) || sl_die "no such prefix: $1"
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
VERSION=1.6.18
WORK=$OUT/work
SRC=$WORK/memcached-$VERSION

# What building needs (debian/control's Build-Depends, and autoreconf).
MC_BUILD_PACKAGES=(dpkg-dev gcc make autoconf automake pkg-config patch libevent-dev
	libsasl2-dev libssl-dev)
sl_ensure_packages "${MC_BUILD_PACKAGES[@]}"

PC=
for d in "$PREFIX"/lib/pkgconfig "$PREFIX"/lib/*/pkgconfig "$PREFIX"/lib64/pkgconfig; do
	[ -f "$d/softlimit.pc" ] && PC=$d && break
done
[ -n "$PC" ] || sl_die "no softlimit.pc under $PREFIX/lib*: install softlimit there first"
export PKG_CONFIG_PATH=$PC
LIBDIR=$(pkg-config --variable=libdir softlimit)
sl_log "==> softlimit $(pkg-config --modversion softlimit) from $PREFIX ($LIBDIR)"

# deb-src entries from the machine's deb ones: deb822 stanzas keep their
# URIs, Suites, Components and Signed-By; one-line "deb" lines become
# "deb-src" lines.
sources() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk 'BEGIN { RS = ""; FS = "\n" }
		     /(^|\n)Types:[^\n]*deb([ \t\n]|$)/ {
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^Types:/) print "Types: deb-src"
				else if ($i !~ /^#/) print $i
			}
			print ""
		     }' "$f" >>"$1/sources.list.d/src.sources"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >>"$1/sources.list.d/src.list"
	done
}

rm -rf "$WORK"
mkdir -p "$WORK"/apt/{lists/partial,cache/archives/partial,sources.list.d}
sources "$WORK/apt"
cat >"$WORK/apt/apt.conf" <<EOF
Dir::Etc::sourcelist "/dev/null";
Dir::Etc::sourceparts "$WORK/apt/sources.list.d";
Dir::State::Lists "$WORK/apt/lists";
Dir::Cache "$WORK/apt/cache";
APT::Sandbox::User "root";
EOF
export APT_CONFIG=$WORK/apt/apt.conf
sl_log "==> apt-get update (private lists in $WORK/apt)"
apt-get update -qq >"$WORK/apt-update.log" 2>&1 || {
	cat "$WORK/apt-update.log" >&2
	sl_die "apt-get update with the deb-src entries failed"
}
sl_log "==> apt-get source memcached"
(cd "$WORK" && apt-get source -qq memcached >"$WORK/apt-source.log" 2>&1) || {
	cat "$WORK/apt-source.log" >&2
	sl_die "apt-get source memcached failed"
}
unset APT_CONFIG
[ -d "$SRC" ] || sl_die "apt-get source did not give memcached-$VERSION: $(ls "$WORK")"
sl_log "    $(cd "$WORK" && ls ./*.dsc)"

for p in "$HERE"/000*.patch; do
	sl_log "==> patch $(basename "$p")"
	patch -d "$SRC" -p1 --forward --quiet <"$p" || sl_die "$(basename "$p") does not apply"
done

sl_log "==> autoreconf"
(cd "$SRC" && autoreconf -fi >"$WORK/autoreconf.log" 2>&1) || {
	cat "$WORK/autoreconf.log" >&2
	sl_die "autoreconf failed"
}

# Debian's configure: dh_auto_configure's defaults, then debian/rules' own
# arguments (override_dh_auto_configure: dh_auto_configure -- ARGS).
read -r -a RULES_ARGS <<<"$(sed -n 's/^[[:space:]]*dh_auto_configure[[:space:]]*--[[:space:]]*//p' \
	"$SRC/debian/rules" | head -n 1)"
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
DH_ARGS=(--build="$(dpkg-architecture -qDEB_BUILD_GNU_TYPE)" --prefix=/usr
	--includedir=/usr/include --mandir=/usr/share/man --infodir=/usr/share/info
	--sysconfdir=/etc --localstatedir=/var --disable-option-checking
	--disable-silent-rules --libdir="/usr/lib/$MA" --runstatedir=/run
	--disable-maintainer-mode --disable-dependency-tracking)
flags() { (cd "$SRC" && DEB_BUILD_MAINT_OPTIONS=$(sed -n \
	's/^export DEB_BUILD_MAINT_OPTIONS[[:space:]]*=[[:space:]]*//p' debian/rules) \
	dpkg-buildflags --get "$1"); }
CFLAGS=$(flags CFLAGS)
CPPFLAGS="$(flags CPPFLAGS) $(pkg-config --cflags softlimit)"
LDFLAGS="$(flags LDFLAGS) -Wl,-rpath,$LIBDIR"
LIBS=$(pkg-config --libs softlimit)
sl_log "==> configure ${RULES_ARGS[*]}"
sl_log "    CFLAGS=$CFLAGS"
sl_log "    CPPFLAGS=$CPPFLAGS"
sl_log "    LDFLAGS=$LDFLAGS LIBS=$LIBS"
(cd "$SRC" && ./configure "${DH_ARGS[@]}" "${RULES_ARGS[@]}" CFLAGS="$CFLAGS" \
	CPPFLAGS="$CPPFLAGS" LDFLAGS="$LDFLAGS" LIBS="$LIBS" >"$WORK/configure.log" 2>&1) || {
	tail -n 30 "$WORK/configure.log" >&2
	sl_die "configure failed (log: $WORK/configure.log)"
}

sl_log "==> make memcached memcached-debug timedrun"
(cd "$SRC" && nice -n 5 make -j"$SL_JOBS" memcached memcached-debug timedrun >"$WORK/make.log" 2>&1) || {
	grep -E 'error|Error' "$WORK/make.log" | head -n 30 >&2
	sl_die "make failed (log: $WORK/make.log)"
}
cp "$SRC/memcached" "$SRC/memcached-debug" "$OUT/"
"$OUT/memcached" -V >/dev/null || sl_die "$OUT/memcached does not run"
sl_log "==> $OUT/memcached: $("$OUT/memcached" -V), $(ldd "$OUT/memcached" | grep -c softlimit) softlimit library linked"
