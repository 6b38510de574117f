#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Differential run: the same random commands to memcached and to slcache.

    slcache_diff.py [--seed N] [--count N] SLCACHE [MEMCACHED]

Starts both on loopback ports (memcached -U 0 -m 64 -t 2, as Debian's
1.6.18; slcache -m 64 -t 2), then sends each, on fresh connections, the same
--count requests of 1 to 3 commands made by slcache_fuzz.py's generator,
each followed by "mn", and prints every request whose answers differ, with
the first differing bytes.  A tool for finding conformance cases to add to
tests/slcache_conform_gen.py, not a test: it needs memcached, and some
differences are not the protocol's:

- items that expire in a second or two expire at different instants (the
  servers' clocks tick apart);
- memcached holds its answers while a value is still arriving (README.md
  lists this), so an answer that is a prefix of slcache's is not counted;
- a request that ends in a partial value waits for the timeout on both.

Commands whose answers are each server's own (stats, version, verbosity,
cache_memlimit, flush_all, shutdown, watch, me, lru_crawler) are left out.
"""

import argparse
import os
import random
import re
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slcache_fuzz as fuzz  # noqa: E402 (the generator)
from slcache_spawn import SpawnError, answers_as, spawn  # noqa: E402

VERSION = re.compile(rb"VERSION [^\r]*")  # each server's own
SKIP = re.compile(rb"(stats|watch|verbosity|cache_memlimit|quit|me |lru|shutdown|slabs|flush_all)")


def start(cmd):
    """Either server, known as ours by its pid in "stats" (slcache_spawn)."""
    try:
        proc, ports = spawn(cmd, None, ready=lambda p, ports: answers_as(ports[0], p.pid))
    except SpawnError as e:
        raise SystemExit("could not start %s: %s" % (cmd[0], e))
    return proc, ports[0]


def exchange(port, data):
    """The answer to @data and an "mn", up to the MN (or a 1 s silence)."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return b"<refused>"
    out = b""
    try:
        s.sendall(data + b"\r\nmn\r\n")
        s.settimeout(1.0)
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                return out + b"<closed>"
            out += chunk
            if out.endswith(b"MN\r\n") and out.count(b"MN\r\n") > data.count(b"mn"):
                return out
    except socket.timeout:
        return out + b"<timeout>"
    except OSError:
        return out + b"<reset>"
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("slcache")
    ap.add_argument("memcached", nargs="?", default="memcached")
    a = ap.parse_args()
    r = random.Random(a.seed)
    user = ["-u", "root"] if os.getuid() == 0 else []
    mc, mc_port = start([a.memcached, "-U", "0", "-m", "64", "-t", "2"] + user)
    sl, sl_port = start([a.slcache, "-m", "64", "-t", "2"])
    differ = 0
    try:
        for _ in range(a.count):
            cmds = [fuzz.text_command(r) for _ in range(r.randrange(1, 4))]
            data = b"".join(c for c in cmds if not SKIP.match(c))
            if not data or data[:1] == b"\x80":
                continue
            got_mc, got_sl = (VERSION.sub(b"VERSION", exchange(port, data))
                              for port in (mc_port, sl_port))
            if got_mc.endswith(b"<timeout>") and got_sl.startswith(got_mc[:-9]):
                continue  # memcached holds answers while a value is arriving
            if got_mc == got_sl:
                continue
            differ += 1
            at = next((i for i, (x, y) in enumerate(zip(got_mc, got_sl)) if x != y),
                      min(len(got_mc), len(got_sl)))
            print("request  %r (%d bytes)" % (data[:200], len(data)))
            print("  memcached at %d: %r" % (at, got_mc[max(0, at - 60):at + 100]))
            print("  slcache   at %d: %r" % (at, got_sl[max(0, at - 60):at + 100]))
    finally:
        for p in (mc, sl):
            p.kill()
            p.wait()
    print("%d of %d requests answered differently (seed %d)" % (differ, a.count, a.seed))


if __name__ == "__main__":
    main()
