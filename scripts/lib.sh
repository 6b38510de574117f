# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Shared by scripts/test and scripts/demo: where the repository is, logging,
# and making sure the Debian packages a script needs are installed.

SL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SL_JOBS=${SL_JOBS:-2}

sl_log() { printf '%s\n' "$*"; }
sl_die() { printf '%s: error: %s\n' "${SL_PROG:-softlimit}" "$*" >&2; exit 1; }

# The compiler-rt package that holds clang's sanitizer runtimes is only a
# Recommends of clang, so --no-install-recommends would leave it out.
sl_clang_rt_package() {
	local major=14
	if command -v clang >/dev/null 2>&1; then
		major=$(clang -dumpversion 2>/dev/null | cut -d. -f1)
	fi
	printf 'libclang-rt-%s-dev\n' "${major:-14}"
}

# What building needs, and what the full test run needs on top of it.
# shellcheck disable=SC2034 # used by the scripts that source this file
# libcurl4-openssl-dev and libjansson-dev: the lease library's etcd:// store.
SL_BUILD_PACKAGES=(cmake make gcc libc6-dev pkg-config libjemalloc-dev libcurl4-openssl-dev libjansson-dev)
# shellcheck disable=SC2034
# libmemcached-tools (memccapable, memcaslap) and memcached: the slcache
# server's protocol test and benchmark.  python3-prometheus-client: the
# OpenMetrics parser that checks sl_group_dump()'s SL_DUMP_OPENMETRICS.
# mandoc: the manual pages' lint.  man-db: `man -w` on the installed pages.
# dpkg-dev, debhelper, lintian: the Debian packages' test.  abigail-tools:
# the ABI check.  spin: the model checks of proof/ (proof/check.sh).
# etcd-server, etcd-client: the fleet tests start a real etcd cluster on
# loopback.  autoconf, automake, patch, libevent-dev, libsasl2-dev,
# libssl-dev, libio-socket-ssl-perl: building Debian's memcached with
# integrations/memcached and running its t/ suite (memcached_integration),
# installed up front so that the test does not run apt beside other tests.
SL_TEST_PACKAGES=("${SL_BUILD_PACKAGES[@]}" g++ clang "$(sl_clang_rt_package)" check
	libmemcached-tools memcached python3-prometheus-client mandoc man-db
	dpkg-dev debhelper lintian abigail-tools spin etcd-server etcd-client
	autoconf automake patch libevent-dev libsasl2-dev libssl-dev libio-socket-ssl-perl)

sl_missing_packages() {
	local pkg status
	for pkg in "$@"; do
		status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
		case $status in
		*" ok installed") ;;
		*) printf '%s ' "$pkg" ;;
		esac
	done
}

# sl_ensure_packages PKG... - install what is missing when root, else say
# exactly what to run and exit 1.
sl_ensure_packages() {
	command -v dpkg-query >/dev/null 2>&1 ||
		sl_die "dpkg-query not found: these scripts expect Debian 12 (install: $*)"
	local missing
	missing=$(sl_missing_packages "$@")
	missing=${missing% }
	[ -z "$missing" ] && return 0

	if [ "$(id -u)" -ne 0 ]; then
		printf '%s: missing Debian packages: %s\n' "${SL_PROG:-softlimit}" "$missing" >&2
		printf 'run:\n  sudo apt-get install -y --no-install-recommends %s\n' "$missing" >&2
		exit 1
	fi

	sl_log "==> installing Debian packages: $missing"
	export DEBIAN_FRONTEND=noninteractive
	local -a pkgs
	read -r -a pkgs <<<"$missing"
	if ! apt-get install -y --no-install-recommends "${pkgs[@]}"; then
		sl_log "==> apt-get install failed; updating the package lists and retrying"
		apt-get update
		apt-get install -y --no-install-recommends "${pkgs[@]}" ||
			sl_die "apt-get install $missing failed"
	fi
	missing=$(sl_missing_packages "$@")
	[ -z "$missing" ] || sl_die "still missing after apt-get install: $missing"
}

# sl_configure DIR [cmake args...] - configure a build tree under the repository.
sl_configure() {
	local dir=$1
	shift
	cmake -S "$SL_ROOT" -B "$dir" "$@"
}

sl_build() {
	cmake --build "$1" -j"$SL_JOBS"
}
