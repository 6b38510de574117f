#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hostile client of examples/slcache's text and meta protocols.

    slcache_fuzz.py [--seconds S] [--seed N] -- SLCACHE [slcache args...]

Starts SLCACHE on a free loopback port and, for S seconds (default 20, or
$SL_FUZZ_SECONDS), sends it random and mutated commands: valid text and meta
commands with random keys, values and flags; the same with bytes flipped,
inserted, dropped or replaced by binary ones; data blocks shorter or longer
than declared; huge declared lengths; long lines; NUL and 0x80 bytes; lines
ended by "\\n" or "\\r" alone; pipelines of up to 60 commands cut at random
into packets; connections half-closed (shutdown SHUT_WR) or reset mid-way.
Answers are read and dropped: what is checked is that the server lives, that
a fresh connection gets a "version" answer every 200 connections and at the
end, that SIGTERM then stops it with status 0 (under ASan, no error and no
leak), and that its stderr holds no sanitizer report.  The seed is printed;
--seed replays a run.  Exit status: 0 passed, 1 failed.
"""

import argparse
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

from slcache_spawn import SpawnError, spawn

DEADLINE = 60.0  # generous: a loaded 2-core machine, an ASan build

TEXT_CMDS = ["get", "gets", "gat", "gats", "set", "add", "replace", "append", "prepend",
             "cas", "delete", "incr", "decr", "touch", "flush_all", "version", "stats",
             "verbosity", "mn", "mg", "ms", "md", "ma", "me", "quit", "slabs", "watch",
             "cache_memlimit", "lru_crawler", "shutdown"]
META_FLAGS = "bNTRlOPLkstcfvhuqFCMJDIxZW!"


def rkey(r):
    pick = r.random()
    if pick < 0.6:
        return "k%d" % r.randrange(40)
    if pick < 0.7:
        return "t%d:k%d" % (r.randrange(4), r.randrange(20))  # tenant prefixes
    if pick < 0.8:
        return "k" * r.choice([1, 249, 250, 251, 300])
    if pick < 0.9:
        return "HTTP/1.%d" % r.randrange(3)
    return "".join(chr(r.randrange(33, 127)) for _ in range(r.randrange(1, 12)))


def rnum(r):
    return r.choice(["0", "1", "-1", "+1", "10", "4294967295", "4294967296", "99999999999",
                     "18446744073709551615", "18446744073709551616", "-0", "1\t",
                     "2147483645", "abc", "", " 1", str(r.randrange(1 << 20))])


def rvalue(r):
    n = r.choice([0, 1, 2, 10, 100, 1000, r.randrange(70000)])
    if r.random() < 0.3:
        return str(r.randrange(1 << 64)).encode()[:n]
    return bytes(r.randrange(256) for _ in range(min(n, 64))) * (n // 64 + 1)


def data_block(r, line, value):
    """A storage line (its length written \\x01) and its data, with a wrong
    length or end at times."""
    pick = r.random()
    n = len(value)
    if pick < 0.1:
        n += r.choice([-2, -1, 1, 2, 1000])
    elif pick < 0.13:
        n = r.choice([2147483645, 1 << 31, 1 << 32, 2000000])
    end = b"\r\n" if r.random() > 0.1 else r.choice([b"", b"\n", b"\r", b"XY"])
    return line.replace("\x01", str(max(n, 0))).encode() + b"\r\n" + value + end


def text_command(r):
    cmd = r.choice(TEXT_CMDS)
    k = rkey(r)
    noreply = " noreply" if r.random() < 0.15 else ""
    if cmd in ("get", "gets"):
        return ("%s %s\r\n" % (cmd, " ".join(rkey(r) for _ in range(r.randrange(1, 30))))).encode()
    if cmd in ("gat", "gats"):
        return ("%s %s %s\r\n" % (cmd, rnum(r), " ".join(rkey(r) for _ in range(r.randrange(4))))).encode()
    if cmd in ("set", "add", "replace", "append", "prepend"):
        line = "%s %s %s %s \x01%s" % (cmd, k, rnum(r), rnum(r), noreply)
        return data_block(r, line, rvalue(r))
    if cmd == "cas":
        line = "cas %s %s %s \x01 %s%s" % (k, rnum(r), rnum(r), rnum(r), noreply)
        return data_block(r, line, rvalue(r))
    if cmd == "ms":
        flags = " ".join(meta_flag(r) for _ in range(r.randrange(6)))
        return data_block(r, "ms %s \x01 %s" % (k, flags), rvalue(r))
    if cmd in ("mg", "md", "ma", "me", "mn"):
        flags = " ".join(meta_flag(r) for _ in range(r.randrange(8)))
        return ("%s %s %s\r\n" % (cmd, k, flags)).encode()
    if cmd in ("incr", "decr", "touch"):
        return ("%s %s %s%s\r\n" % (cmd, k, rnum(r), noreply)).encode()
    if cmd == "verbosity":
        return ("verbosity %s%s\r\n" % (r.choice(["0", "x", "", "0 0"]), noreply)).encode()
    if cmd == "cache_memlimit":
        return ("cache_memlimit %s\r\n" % r.choice(["64", "128", "7", "x", "4294967296"])).encode()
    if cmd == "flush_all":
        if r.random() < 0.9:  # a flush now and then, not a cache that is always empty
            return b"version\r\n"
        return ("flush_all %s%s\r\n" % (r.choice(["", "0", "2", "-1", "1000000000", "x"]), noreply)).encode()
    if cmd == "stats":
        return ("stats %s\r\n" % r.choice(["", "items", "slabs", "settings", "sizes", "conns",
                                           "tenants", "detail dump", "cachedump 1 1",
                                           "reset", "x"])).encode()
    if cmd == "slabs":
        return ("slabs %s\r\n" % r.choice(["automove 1", "automove x", "reassign 1 2", ""])).encode()
    if cmd == "delete":
        return ("delete %s%s\r\n" % (k, r.choice(["", " 0", " 1", noreply]))).encode()
    return (cmd + "\r\n").encode()


def meta_flag(r):
    f = r.choice(META_FLAGS)
    if f in "NTRCFJDOM":
        return f + r.choice([rnum(r), "I", "E", "S", "+", "x" * r.randrange(40)])
    return f


def mutate(r, data):
    b = bytearray(data)
    for _ in range(r.randrange(1, 6)):
        if not b:
            break
        op = r.random()
        i = r.randrange(len(b))
        if op < 0.3:
            b[i] = r.randrange(256)
        elif op < 0.5:
            del b[i:i + r.randrange(1, 20)]
        elif op < 0.7:
            b[i:i] = bytes(r.randrange(256) for _ in range(r.randrange(1, 20)))
        elif op < 0.8:
            b[i:i] = r.choice([b"\r\n", b"\n", b"\r", b"\x00", b"\x80", b" ", b"noreply"])
        else:
            b[i:i] = b[i:i + r.randrange(1, 200)]
    return bytes(b)


def payload(r):
    pick = r.random()
    if pick < 0.05:
        return bytes(r.randrange(256) for _ in range(r.randrange(1, 4096)))
    if pick < 0.08:
        return b"\x80" + bytes(r.randrange(256) for _ in range(r.randrange(40)))
    if pick < 0.11:
        return b"get " + b"k" * r.randrange(1000, 40000) + r.choice([b"", b"\r\n"])
    if pick < 0.13:
        return b"x" * r.randrange(2000, 10000)
    out = b"".join(text_command(r) for _ in range(r.randrange(1, 60)))
    if r.random() < 0.4:
        out = mutate(r, out)
    if r.random() < 0.1:
        out = out.replace(b"\r\n", r.choice([b"\n", b"\r", b"\r\r\n"]))
    return out


def drain(sock, wait):
    sock.settimeout(wait)
    try:
        while sock.recv(1 << 16):
            pass
    except (socket.timeout, OSError):
        pass


def play(r, port):
    """One hostile connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    data = payload(r)
    try:
        i = 0
        while i < len(data):
            n = r.choice([1, 7, 100, 4096, len(data)])
            s.settimeout(0.5)
            try:
                i += s.send(data[i:i + n])
            except socket.timeout:
                drain(s, 0)  # the server waits for us to read
            if r.random() < 0.05:
                time.sleep(0.002)
        end = r.random()
        if end < 0.3:
            s.shutdown(socket.SHUT_WR)  # half-close: the answers must still come
            drain(s, 0.2)
        elif end < 0.4:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            drain(s, 0.02)
    except OSError:
        pass  # the server closed on us: allowed
    finally:
        s.close()


def version_ok(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    try:
        s.sendall(b"version\r\n")
        got = b""
        end = time.monotonic() + DEADLINE
        while not got.endswith(b"\r\n") and time.monotonic() < end:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        return got.startswith(b"VERSION ")
    finally:
        s.close()


def start(cmd, log):
    try:
        proc, ports = spawn(cmd, log, deadline_s=DEADLINE)
    except SpawnError as e:
        raise SystemExit("FAIL: could not start slcache: %s" % e)
    return proc, ports[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SL_FUZZ_SECONDS", 20)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SL_FUZZ_SEED", 0)) or None)
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()
    seed = a.seed or random.randrange(1, 1 << 31)
    r = random.Random(seed)
    print("slcache_fuzz: seed %d, %.0f s" % (seed, a.seconds), flush=True)
    log = tempfile.TemporaryFile()
    proc, port = start(a.cmd, log)
    conns = 0
    failed = None
    end = time.monotonic() + a.seconds
    try:
        while time.monotonic() < end:
            play(r, port)
            conns += 1
            if proc.poll() is not None:
                failed = "slcache died (status %s) after %d connections" % (proc.returncode, conns)
                break
            if conns % 200 == 0 and not version_ok(port):
                failed = "no version answer after %d connections" % conns
                break
        if not failed and not version_ok(port):
            failed = "no version answer at the end (%d connections)" % conns
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                failed = failed or "slcache did not stop on SIGTERM"
    if not failed and proc.returncode != 0:
        failed = "slcache exited with status %d" % proc.returncode
    log.seek(0)
    err = log.read().decode("utf-8", "replace")
    for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer"):
        if bad in err:
            failed = failed or "sanitizer report on stderr"
    if failed:
        print("FAIL: %s (seed %d)" % (failed, seed))
        print(err[-4000:])
        return 1
    print("slcache_fuzz: %d hostile connections, server alive and answering, clean exit" % conns)
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
