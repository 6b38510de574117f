#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Isolation between slcache's tenants.

    slcache_isolation.py flush SLCACHE
    slcache_isolation.py tenants LIMIT_MIB -- SLCACHE ARGS...

flush: a connection is bound to the tenant of the first key it uses, and
its flush_all (now, or delayed) empties that tenant only; a connection
that has used no key flushes every tenant, as memcached; with -F,
flush_all answers "CLIENT_ERROR flush_all not allowed" (memcached's -F)
and flushes nothing.

tenants: fills the cache, then creates 4,000 tenants (key prefixes) with
a few items each, and
checks the server's peak resident memory (VmHWM) against LIMIT_MIB: -m
plus the 32 MiB README.md and slcache(1) promise, whatever the number of
tenants (the --no-arenas per-tenant overhead is charged within -m).
"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slcache_spawn import answers_as, spawn  # noqa: E402


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise SystemExit("FAIL: the server closed the connection")
            self.buf += chunk
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def cmd(self, data):
        self.s.sendall(data)
        return self.line()

    def get(self, key):
        """The value of @key, or None."""
        self.s.sendall(b"mg %s v\r\n" % key)
        ln = self.line()
        if ln == b"EN":
            return None
        if not ln.startswith(b"VA "):
            raise SystemExit("FAIL: mg %r answered %r" % (key, ln))
        return self.line()

    def close(self):
        self.s.close()


def expect(what, got, want):
    if got != want:
        raise SystemExit("FAIL: %s: got %r, want %r" % (what, got, want))


def start(cmd):
    return spawn(cmd, None, ready=lambda p, ports: answers_as(ports[0], p.pid))


def fill(port, keys):
    c = Conn(port)
    for k in keys:
        expect("set " + k.decode(), c.cmd(b"set %s 0 0 1\r\nx\r\n" % k), b"STORED")
    c.close()


def present(port, keys):
    c = Conn(port)
    got = [k for k in keys if c.get(k) is not None]
    c.close()
    return got


def flush(slcache):
    keys = [b"atk:1", b"atk:2", b"vic:1", b"vic:2", b"plain"]
    proc, ports = start([slcache, "-m", "64"])
    port = ports[0]
    try:
        # A connection of tenant atk: its flush_all empties atk only.
        fill(port, keys)
        c = Conn(port)
        expect("get atk:1", c.get(b"atk:1"), b"x")
        expect("flush_all (atk)", c.cmd(b"flush_all\r\n"), b"OK")
        c.close()
        expect("after atk's flush_all", present(port, keys), [b"vic:1", b"vic:2", b"plain"])
        # Bound by a miss too, and by a meta command's key; noreply.
        fill(port, keys)
        c = Conn(port)
        expect("mg vic:9", c.cmd(b"mg vic:9 v\r\n"), b"EN")
        c.s.sendall(b"flush_all noreply\r\n")
        expect("mn", c.cmd(b"mn\r\n"), b"MN")
        c.close()
        expect("after vic's flush_all", present(port, keys), [b"atk:1", b"atk:2", b"plain"])
        # A key without a prefix binds to "default".
        fill(port, keys)
        c = Conn(port)
        expect("get plain", c.cmd(b"get plain\r\n"), b"VALUE plain 0 1")
        c.line(), c.line()
        expect("flush_all (default)", c.cmd(b"flush_all\r\n"), b"OK")
        c.close()
        expect("after default's flush_all", present(port, keys),
               [b"atk:1", b"atk:2", b"vic:1", b"vic:2"])
        # Delayed: atk's items go once the time comes, vic's stay.
        fill(port, keys)
        c = Conn(port)
        c.get(b"atk:1")
        expect("flush_all 2 (atk)", c.cmd(b"flush_all 2\r\n"), b"OK")
        c.close()
        deadline = time.monotonic() + 60
        while present(port, [b"atk:1"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        expect("after atk's delayed flush_all", present(port, keys), [b"vic:1", b"vic:2", b"plain"])
        # A fresh connection flushes every tenant, as memcached.
        fill(port, keys)
        c = Conn(port)
        expect("flush_all (fresh)", c.cmd(b"flush_all\r\n"), b"OK")
        c.close()
        expect("after a fresh connection's flush_all", present(port, keys), [])
    finally:
        proc.kill()
        proc.wait()
    # -F: refused, nothing flushed, as memcached -F answers.
    proc, ports = start([slcache, "-m", "64", "-F"])
    port = ports[0]
    try:
        fill(port, keys)
        c = Conn(port)
        expect("flush_all with -F", c.cmd(b"flush_all\r\n"), b"CLIENT_ERROR flush_all not allowed")
        expect("flush_all 0 with -F", c.cmd(b"flush_all 0\r\n"),
               b"CLIENT_ERROR flush_all not allowed")
        c.s.sendall(b"flush_all noreply\r\n")
        expect("mn", c.cmd(b"mn\r\n"), b"MN")
        c.close()
        expect("after flush_all with -F", present(port, keys), keys)
        c = Conn(port)
        c.s.sendall(b"stats settings\r\n")
        settings = []
        while not settings or settings[-1] != b"END":
            settings.append(c.line())
        c.close()
        expect("stats settings flush_enabled", b"STAT flush_enabled no" in settings, True)
    finally:
        proc.kill()
        proc.wait()
    print("PASS: flush_all stays within the connection's tenant; fresh connections flush "
          "all; -F refuses it")
    return 0


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith(field + ":"):
                return int(ln.split()[1])
    raise SystemExit("FAIL: no %s for pid %d" % (field, pid))


def usage(c):
    c.s.sendall(b"stats\r\n")
    st = {}
    while True:
        ln = c.line()
        if ln == b"END":
            return int(st[b"usage"])
        _, k, v = ln.split(b" ", 2)
        st[k] = v


def accounted(cmd):
    """4,000 tenants made by misses (no item): what they cost the process
    must be in the tree's usage, within -m, as an arena's overhead is."""
    proc, ports = start(cmd)
    try:
        c = Conn(ports[0])
        u0, rss0 = usage(c), status_kib(proc.pid, "VmRSS")
        for base in range(0, 4000, 200):
            c.s.sendall(b"".join(b"mg t%d:k v q\r\n" % t for t in range(base, base + 200)))
            expect("mn", c.cmd(b"mn\r\n"), b"MN")
        u1, rss1 = usage(c), status_kib(proc.pid, "VmRSS")
        c.close()
    finally:
        proc.kill()
        proc.wait()
    grew, charged = (rss1 - rss0) / 1024.0, (u1 - u0) / 1048576.0
    print("4,000 empty tenants: resident memory grew %.1f MiB, usage %.1f MiB" % (grew, charged))
    if charged < grew:
        print("FAIL: the tenants' own memory is not charged within -m")
        return 1
    return 0


def tenants(limit_mib, cmd):
    if accounted(cmd):
        return 1
    proc, ports = start(cmd)
    port = ports[0]
    try:
        c = Conn(port)
        # A full cache first (100 MB of 100 KB values): the tenants' own
        # memory must then come out of -m, not on top of it.
        fill = b"f" * 100000
        for i in range(1000):
            c.s.sendall(b"set fill:k%d 0 0 %d noreply\r\n%s\r\n" % (i, len(fill), fill))
        expect("mn", c.cmd(b"mn\r\n"), b"MN")
        # 4,000 prefixes, 3 items each of 100 bytes, pipelined in batches.
        value = b"v" * 100
        for base in range(0, 4000, 100):
            req = b"".join(b"set t%d:%d 0 0 100 noreply\r\n%s\r\n" % (t, i, value)
                           for t in range(base, base + 100) for i in range(3))
            c.s.sendall(req)
            expect("mn", c.cmd(b"mn\r\n"), b"MN")
        c.s.sendall(b"stats settings\r\n")
        lines = []
        while not lines or lines[-1] != b"END":
            lines.append(c.line())
        c.close()
        if proc.poll() is not None:
            raise SystemExit("FAIL: slcache exited (%s)" % proc.returncode)
        peak = status_kib(proc.pid, "VmHWM") / 1024.0
    finally:
        proc.kill()
        proc.wait()
    print("peak resident %.1f MiB after 4,000 tenants (limit %d MiB)" % (peak, limit_mib))
    if peak > limit_mib:
        print("FAIL: peak resident memory past -m + 32 MiB")
        return 1
    print("PASS")
    return 0


def main():
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "flush":
        return flush(a[1])
    if len(a) >= 4 and a[0] == "tenants" and a[2] == "--":
        return tenants(int(a[1]), a[3:])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
