#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/packaging.sh SRCDIR WORKDIR - build the Debian packages of debian/
# from a copy of SRCDIR's files (the source tree stays clean), check them
# with lintian (no errors), unpack them into a scratch root under WORKDIR
# and build tests/install's consumer against that root through pkg-config
# and through find_package(softlimit), shared and static, and run it.
# Exits 77 (ctest's skip) when dpkg-buildpackage, dh or lintian is missing.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: packaging.sh SRCDIR WORKDIR" >&2; exit 2; }
src=$(cd "$1" && pwd) work=$2
for tool in dpkg-buildpackage dh lintian; do
	command -v "$tool" >/dev/null 2>&1 || { echo "packaging: $tool is not installed: skipped"; exit 77; }
done
log() { printf 'packaging: %s\n' "$*"; }
die() { printf 'packaging: FAIL: %s\n' "$*"; exit 1; }

rm -rf "$work"
mkdir -p "$work/src/softlimit" "$work/root"
work=$(cd "$work" && pwd)
if git -C "$src" rev-parse --show-toplevel >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard) |
		(cd "$src" && tar --null -T - -cf -) | tar -xf - -C "$work/src/softlimit"
else
	tar -C "$src" --exclude=./build --exclude=./.git -cf - . | tar -xf - -C "$work/src/softlimit"
fi

log "dpkg-buildpackage -us -uc -b (log: $work/build.log)"
(cd "$work/src/softlimit" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 ||
	{ tail -n 30 "$work/build.log"; die "dpkg-buildpackage failed"; }
for pkg in libsoftlimit0.2 libsoftlimit-dev libsoftlimit-jemalloc0.2 libsoftlimit-jemalloc-dev \
	libsoftlimit-lease0.2 libsoftlimit-lease-dev softlimitctl slcache; do
	ls "$work/src/${pkg}"_*.deb >/dev/null 2>&1 || die "no ${pkg} package was built"
done
# dpkg-gensymbols: the symbols files must match what the libraries export.
if grep -q "dpkg-gensymbols: warning" "$work/build.log"; then
	grep -A 20 "dpkg-gensymbols: warning" "$work/build.log"
	die "debian/*.symbols and the libraries' exports differ (see above)"
fi

log "lintian"
lintian --fail-on error "$work/src/"softlimit_*.changes 2>&1 | grep -v 'root privileges' | tee "$work/lintian.txt" ||
	true
lintian --fail-on error "$work/src/"softlimit_*.changes >/dev/null 2>&1 || die "lintian reports errors"

log "unpacking into $work/root"
for deb in "$work/src/"*.deb; do
	case $deb in *-dbgsym_*) continue ;; esac
	dpkg -x "$deb" "$work/root"
done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
usr=$work/root/usr
libdir=$usr/lib/$multiarch
[ -e "$libdir/libsoftlimit.so.0.2" ] || die "no libsoftlimit.so.0.2 in the packages"

log "man pages"
man -M "$usr/share/man" -w sl_charge sl_uncharge sl_jemalloc_free sl_lease_join softlimit slcache softlimitctl >/dev/null ||
	die "man cannot find the packaged pages"
"$usr/bin/slcache" --help >/dev/null || die "the packaged slcache does not run"
LD_LIBRARY_PATH=$libdir "$usr/bin/softlimitctl" --help >/dev/null || die "the packaged softlimitctl does not run"
ls "$usr/share/doc/libsoftlimit-dev/design.md"* >/dev/null 2>&1 && [ -f "$usr/share/doc/libsoftlimit-dev/examples/threads_host.c" ] ||
	die "libsoftlimit-dev ships no design documents or examples"

# The build sets an install RUNPATH only for prefixes the dynamic linker
# does not search: /usr's packages must carry none (lintian's
# custom-library-search-path).
log "no RPATH or RUNPATH in the packaged programs and libraries"
for elf in "$usr"/bin/* "$libdir"/lib*.so.*; do
	[ -L "$elf" ] && continue
	if readelf -d "$elf" | grep -q -E '\((RPATH|RUNPATH)\)'; then
		die "$elf has an RPATH: $(readelf -d "$elf" | grep PATH)"
	fi
done
# Dependencies are named by imported target, never by a path of the
# building machine.
grep -n -E '(INTERFACE|IMPORTED)_[A-Z_]+ .*["; ]/[^"; )]+' "$libdir"/cmake/softlimit/*.cmake &&
	die "the packaged CMake files name absolute paths (above)"

log "consumer via pkg-config"
pc() { PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --define-variable=prefix="$usr" "$@"; }
# shellcheck disable=SC2046 # pkg-config prints a list of words
cc -std=c11 -Wall -Wextra -Werror -o "$work/consumer-pc" "$src/tests/install/consumer.c" \
	$(pc --cflags softlimit) $(pc --libs softlimit)
LD_LIBRARY_PATH=$libdir "$work/consumer-pc"
LD_LIBRARY_PATH=$libdir ldd "$work/consumer-pc" | grep -q "$libdir/libsoftlimit.so.0.2" ||
	die "consumer-pc did not load the packaged libsoftlimit"
pc --exists softlimit-jemalloc || die "pkg-config cannot find the packaged softlimit-jemalloc"
# shellcheck disable=SC2046 # pkg-config prints a list of words
cc -std=c11 -Wall -Wextra -Werror -o "$work/consumer-lease" "$src/tests/install/consumer_lease.c" \
	$(pc --cflags softlimit-lease) $(pc --libs softlimit-lease)
LD_LIBRARY_PATH=$libdir "$work/consumer-lease"

log "consumer via find_package(softlimit)"
cmake -S "$src/tests/install" -B "$work/consumer" -DCMAKE_C_COMPILER=gcc -DSL_COMPONENTS="jemalloc;lease" \
	-DCMAKE_PREFIX_PATH="$usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
	-DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$work/consumer.log" 2>&1 ||
	{ cat "$work/consumer.log"; die "find_package(softlimit) failed on the packaged files"; }
cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 ||
	{ cat "$work/consumer.log"; die "the consumer does not build against the packages"; }
LD_LIBRARY_PATH=$libdir "$work/consumer/consumer"
"$work/consumer/consumer_static"

log "ok: $(cd "$work/src" && ls ./*.deb | grep -vc dbgsym) packages built, installed and used"
