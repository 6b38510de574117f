#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/man_check.sh MANDIR LINKDIR LIB.so [ADAPTER.so...] - the manual pages
# and the libraries cannot drift apart:
#   - mandoc -Tlint has nothing to say about any page in MANDIR;
#   - every sl_* function a library exports is named in the NAME section of a
#     section 3 page, and every name there is exported (sl_jemalloc_* and
#     sl_lease_* pages are checked only when a library given exports such
#     names);
#   - each named function appears in its page's SYNOPSIS as NAME(;
#   - LINKDIR (CMake's generated .so link pages) holds a link for every name
#     but the page's own, pointing at that page.
# Exits 77 (ctest's skip) when mandoc is not installed.
set -euo pipefail

[ $# -ge 3 ] || { echo "usage: man_check.sh MANDIR LINKDIR LIB.so [ADAPTER.so...]" >&2; exit 2; }
mandir=$1 linkdir=$2
shift 2
command -v mandoc >/dev/null 2>&1 || { echo "man_check: mandoc is not installed: skipped"; exit 77; }

fail=0
bad() { echo "man_check: FAIL: $*"; fail=1; }

for page in "$mandir"/*.[137]; do
	out=$(mandoc -Tlint "$page" 2>&1) || true
	[ -z "$out" ] || bad "mandoc -Tlint $(basename "$page"):"$'\n'"$out"
done

# names PAGE - the names before "\-" in the NAME section, one a line.
names() {
	awk '/^\.SH NAME/ { on = 1; next } on && /^\./ { exit } on { printf "%s ", $0 }' "$1" |
		sed 's/ \\-.*//' | tr ',' '\n' | tr -d ' ' | grep -v '^$'
}

exported=$(for so in "$@"; do
	nm -D --defined-only "$so" | awk '{ sub(/@.*/, "", $3); if ($3 ~ /^sl_/) print $3 }'
done | sort -u)
[ -n "$exported" ] || bad "no sl_* symbol exported by $*"
# The pages of an optional library (sl_jemalloc_*, sl_lease_*) are checked
# only when a library given exports names of that prefix.
have_prefix() { grep -q "^$1" <<<"$exported"; }

documented=""
for page in "$mandir"/*.3; do
	base=$(basename "$page" .3)
	case $base in
	sl_jemalloc_*) have_prefix sl_jemalloc_ || continue ;;
	sl_lease_*) have_prefix sl_lease_ || continue ;;
	esac
	list=$(names "$page")
	[ -n "$list" ] || bad "$base.3 has no NAME section"
	grep -qx "$base" <<<"$list" || bad "$base.3: its NAME does not list $base"
	for n in $list; do
		grep -qx "$n" <<<"$exported" || bad "$base.3 documents $n, which no library exports"
		grep -q "$n(" "$page" || bad "$base.3 names $n but shows no $n( in its SYNOPSIS"
		if [ "$n" != "$base" ]; then
			[ "$(cat "$linkdir/$n.3" 2>/dev/null)" = ".so man3/$base.3" ] ||
				bad "no link page $linkdir/$n.3 to man3/$base.3 (reconfigure CMake)"
		fi
		documented+="$n"$'\n'
	done
done
for n in $exported; do
	[ "$(grep -cx "$n" <<<"$documented")" -ge 1 ] || bad "$n is exported but no page names it"
	[ "$(grep -cx "$n" <<<"$documented")" -le 1 ] || bad "$n is named by more than one page"
done

[ "$fail" = 0 ] || exit 1
echo "man_check: $(ls "$mandir"/*.[137] | wc -l) pages lint clean; $(wc -w <<<"$exported") exported functions, each on one page"
