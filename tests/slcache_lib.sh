# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Shared by tests/slcache_*.sh: start examples/slcache on a free port, talk
# to it over bash's /dev/tcp, stop it with SIGTERM and check it shut down
# cleanly (exit status 0: under ASan that includes no leaks).

SLC_PID=
SLC_PORT=
# How long an answer may take: generous, a passing test never waits it out
# (a loaded 2-core machine, an ASan build).
SLC_WAIT=30
SLC_LOG=$(mktemp "${TMPDIR:-/tmp}/slcache-test.XXXXXX")

slc_cleanup() {
	if [ -n "$SLC_PID" ] && kill -0 "$SLC_PID" 2>/dev/null; then
		kill -KILL "$SLC_PID" 2>/dev/null || true
	fi
	rm -f "$SLC_LOG"
}
trap slc_cleanup EXIT

slc_fail() {
	printf 'FAIL: %s\n' "$*" >&2
	if [ -s "$SLC_LOG" ]; then
		printf -- '--- slcache stderr:\n' >&2
		tail -n 40 "$SLC_LOG" >&2
	fi
	exit 1
}

# slc_answers_as PORT PID - the server on PORT says its pid is PID (the
# "STAT pid" line of "stats", which slcache and memcached both answer).
slc_answers_as() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'stats\r\n' >&3 || exit 1
		while IFS= read -r -t 5 line <&3; do
			line=${line%$'\r'}
			[ "$line" = "STAT pid $2" ] && exit 0
			[ "$line" = END ] && exit 1
		done
		exit 1
	) 2>/dev/null
}

# slc_spawn LOG CMD [args...] - start CMD -l 127.0.0.1 -p PORT on a free
# port, its stderr to LOG: a port another program took makes it exit, so
# another is tried.  It is ours once the server on PORT answers with our
# pid: a connect alone may reach the program that took the port.  Sets
# SLC_SPAWN_PID and SLC_SPAWN_PORT; 1 if no port worked.  Up to 30 s for an
# answer: a loaded machine may start an ASan build slowly.
slc_spawn() {
	local log=$1 try _
	shift
	for try in $(seq 1 20); do
		SLC_SPAWN_PORT=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		"$@" -l 127.0.0.1 -p "$SLC_SPAWN_PORT" 2>"$log" &
		SLC_SPAWN_PID=$!
		for _ in $(seq 1 600); do
			kill -0 "$SLC_SPAWN_PID" 2>/dev/null || break
			slc_answers_as "$SLC_SPAWN_PORT" "$SLC_SPAWN_PID" && return 0
			sleep 0.05
		done
		kill -KILL "$SLC_SPAWN_PID" 2>/dev/null || true
		wait "$SLC_SPAWN_PID" 2>/dev/null || true
		SLC_SPAWN_PID=
		: "try $try: port $SLC_SPAWN_PORT was not usable"
	done
	return 1
}

# slc_start BIN [slcache args...] - start BIN on a free port of 127.0.0.1.
slc_start() {
	local bin=$1
	shift
	[ -x "$bin" ] || slc_fail "no slcache binary at '$bin'"
	slc_spawn "$SLC_LOG" "$bin" "$@" || slc_fail "could not start $bin on a free port"
	SLC_PID=$SLC_SPAWN_PID
	SLC_PORT=$SLC_SPAWN_PORT
}

# slc_stop - SIGTERM; the server must exit 0 within 60 s.
slc_stop() {
	local _ rc
	[ -n "$SLC_PID" ] || return 0
	kill -TERM "$SLC_PID" 2>/dev/null || slc_fail "slcache (pid $SLC_PID) died before the end"
	for _ in $(seq 1 1200); do
		kill -0 "$SLC_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$SLC_PID" 2>/dev/null && slc_fail "slcache did not stop within 60 s of SIGTERM"
	rc=0
	wait "$SLC_PID" || rc=$?
	SLC_PID=
	[ "$rc" -eq 0 ] || slc_fail "slcache exited with status $rc after SIGTERM"
}

slc_alive() {
	kill -0 "$SLC_PID" 2>/dev/null || slc_fail "slcache is not running any more"
}

# slc_open FD - open a connection on file descriptor FD (3..9).
slc_open() {
	eval "exec $1<>/dev/tcp/127.0.0.1/$SLC_PORT" || slc_fail "cannot connect to port $SLC_PORT"
}

slc_close() {
	eval "exec $1>&-" 2>/dev/null || true
}

# slc_line FD - print the next answer line from FD without its "\r".
slc_line() {
	local line
	IFS= read -r -t "$SLC_WAIT" line <&"$1" || slc_fail "no answer within $SLC_WAIT s (connection $1)"
	printf '%s\n' "${line%$'\r'}"
}

# slc_expect FD EXPECTED - the next line must be EXPECTED (a glob pattern).
# Read here, not through $(slc_line): a subshell per line is slow to fork
# on a loaded machine, and some tests expect a thousand lines.
slc_expect() {
	local got
	IFS= read -r -t "$SLC_WAIT" got <&"$1" || slc_fail "no answer within $SLC_WAIT s (connection $1)"
	got=${got%$'\r'}
	# shellcheck disable=SC2053 # a glob on purpose
	[[ $got == $2 ]] || slc_fail "expected '$2', got '$got'"
}

# slc_closed FD - the server closes FD without another answer line.  A
# reset counts as closed: a server that closes with the client's bytes
# still unread sends one, and a loaded machine may deliver it before the
# end of file is read.
slc_closed() {
	local line='' rc=0
	IFS= read -r -t "$SLC_WAIT" line <&"$1" 2>/dev/null || rc=$?
	[ "$rc" -le 128 ] || slc_fail "expected the connection to be closed; still open after $SLC_WAIT s"
	if [ "$rc" -eq 0 ] || [ -n "$line" ]; then
		slc_fail "expected the connection to be closed, got '${line%$'\r'}'"
	fi
}

# slc_version_ok - a fresh connection answers "version".
slc_version_ok() {
	slc_open 9
	printf 'version\r\n' >&9
	slc_expect 9 'VERSION *'
	slc_close 9
}
