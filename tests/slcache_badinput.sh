#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/slcache_badinput.sh SLCACHE - bad input must get the right error
# reply and leave the server serving: garbage lines, bad numbers, huge
# lengths, a data block without its "\r\n", an endless line, binary junk,
# random bytes, requests cut at every byte, pipelining, abrupt disconnects.
# Ends with SIGTERM, which must give a clean exit.
set -euo pipefail

# shellcheck source=tests/slcache_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/slcache_lib.sh"

SLCACHE=${1:?usage: slcache_badinput.sh PATH_TO_SLCACHE}

run_all() {
	slc_start "$SLCACHE" -m 8 -t 2 -I 64K "$@"
	slc_open 3

	echo "--- garbage and malformed commands"
	local cmd
	for cmd in 'foo' '' '   ' 'GET x' 'get' 'gets' 'set' 'set k 0 0' 'cas k 0 0 1' \
		'incr' 'touch k' 'delete' 'delete a b c d e' 'flush_all a b c' 'stats nonsense' \
		'verbosity'; do
		printf '%s\r\n' "$cmd" >&3
		slc_expect 3 'ERROR'
	done
	for cmd in 'set k 0 0 abc' 'set k 0 0 -1' 'set k x 0 1' 'set k 0 y 1' 'set k 18446744073709551616 0 1' \
		'set k 0 0 2147483648' 'set k 0 0 99999999999999999999999' 'cas k 0 0 1 x' \
		"get $(printf 'k%.0s' $(seq 1 251))" "set $(printf 'k%.0s' $(seq 1 251)) 0 0 1"; do
		printf '%s\r\n' "$cmd" >&3
		slc_expect 3 'CLIENT_ERROR bad command line format*'
	done
	printf 'delete k 5\r\n' >&3
	slc_expect 3 'CLIENT_ERROR bad command line format*'
	printf 'incr k abc\r\n' >&3
	slc_expect 3 'CLIENT_ERROR invalid numeric delta argument'
	printf 'incr k -1\r\n' >&3
	slc_expect 3 'CLIENT_ERROR invalid numeric delta argument'
	printf 'touch k soon\r\n' >&3
	slc_expect 3 'CLIENT_ERROR invalid exptime argument'
	printf 'flush_all soon\r\n' >&3
	slc_expect 3 'CLIENT_ERROR invalid exptime argument'
	printf 'set n 0 0 2\r\nno\r\nincr n 1\r\n' >&3
	slc_expect 3 'STORED'
	slc_expect 3 'CLIENT_ERROR cannot increment or decrement non-numeric value'
	printf 'set n 0 0 20\r\n18446744073709551615\r\nincr n 1\r\ndecr n 5\r\n' >&3
	slc_expect 3 'STORED'
	slc_expect 3 '0'
	slc_expect 3 '0'
	printf 'version\r\n' >&3
	slc_expect 3 'VERSION *'

	echo "--- a data block without its terminator"
	printf 'set k 0 0 3\r\nabcXY\r\n' >&3
	slc_expect 3 'CLIENT_ERROR bad data chunk'
	slc_expect 3 'ERROR' # the "\r\n" left over is an empty command line
	printf 'get k\r\n' >&3
	slc_expect 3 'END'
	printf 'set k 0 0 3 noreply\r\nabcXY\r\n' >&3 # noreply silences errors too (memcached)
	slc_expect 3 'ERROR'
	printf 'set k 0 0 3\r\nabc\r\nget k\r\n' >&3
	slc_expect 3 'STORED'
	slc_expect 3 'VALUE k 0 3'
	slc_expect 3 'abc'
	slc_expect 3 'END'

	echo "--- too large: refused, data swallowed, old value dropped"
	printf 'set k 0 0 70000\r\n' >&3
	head -c 70000 /dev/zero | tr '\0' 'z' >&3
	printf '\r\nget k\r\n' >&3
	slc_expect 3 'SERVER_ERROR object too large for cache'
	slc_expect 3 'END'
	# Swallowed: this connection is gone for good, and (as memcached) the
	# answer waits for 2 GB that never come.
	printf 'set big 0 0 2000000000\r\n' >&3
	slc_close 3
	slc_version_ok

	echo "--- a line that never ends"
	slc_open 3
	head -c 200000 /dev/zero | tr '\0' 'a' >&3 2>/dev/null || true
	slc_closed 3 # past 2 KiB, a line that is not a get is closed on, as memcached does
	slc_close 3
	slc_open 3

	echo "--- binary protocol and junk"
	printf '\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\r\n' >&3
	slc_closed 3 # the binary protocol is not spoken: closed
	slc_close 3
	slc_open 3
	printf '\x00\xff\x01get\x00k\r\n' >&3
	slc_expect 3 'ERROR'
	printf 'version\r\n' >&3
	slc_expect 3 'VERSION *'
	slc_close 3

	local i
	for i in $(seq 1 20); do
		slc_open 4
		head -c $((RANDOM * 8 + 1)) /dev/urandom >&4 2>/dev/null || true
		slc_close 4
	done
	for i in $(seq 1 20); do # random printable lines that look like commands
		slc_open 4
		head -c 20000 /dev/urandom | tr -dc 'a-z0-9 :\r\n' |
			sed -e 's/^\([a-z]\)/set \1/' >&4 2>/dev/null || true
		slc_close 4
	done
	slc_alive
	slc_version_ok

	echo "--- byte by byte, then pipelined"
	slc_open 3
	local req='set p:1 7 0 5\r\nhello\r\nget p:1\r\n' j
	local bytes
	bytes=$(printf '%b' "$req")
	for ((j = 0; j < ${#bytes}; j++)); do
		printf '%s' "${bytes:j:1}" >&3
	done
	printf '\n' >&3 # the final "\n" that $(...) stripped
	slc_expect 3 'STORED'
	slc_expect 3 'VALUE p:1 7 5'
	slc_expect 3 'hello'
	slc_expect 3 'END'
	{
		for i in $(seq 1 500); do printf 'set p:%d 0 0 1\r\n%d\r\n' "$i" $((i % 10)); done
		for i in $(seq 1 500); do printf 'get p:%d\r\n' "$i"; done
	} >&3
	for i in $(seq 1 500); do slc_expect 3 'STORED'; done
	for i in $(seq 1 500); do
		slc_expect 3 "VALUE p:$i 0 1"
		slc_expect 3 "$((i % 10))"
		slc_expect 3 'END'
	done
	slc_close 3

	echo "--- cut off in the middle of requests"
	for i in $(seq 1 30); do
		slc_open 4
		printf 'set cut:%d 0 0 100\r\nabc' "$i" >&4
		slc_close 4
		slc_open 4
		printf 'get a b c d e f' >&4
		slc_close 4
	done
	slc_alive
	slc_version_ok
	slc_stop
}

echo "=== with accounting"
run_all --tenant p:soft=1M
echo "=== --no-accounting"
run_all --no-accounting
echo "PASS"
