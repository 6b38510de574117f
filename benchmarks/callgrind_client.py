#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""callgrind_client.py - a fixed, scripted memcached-text-protocol request
sequence for benchmarks/callgrind_server.sh.

    callgrind_client.py HOST PORT WARMUP MEASURED

Sends WARMUP requests, then MEASURED more, one at a time: each request waits
for its whole reply before the next goes out, so the server handles exactly
one request per read and its instruction count does not depend on how the
network batched the bytes.  The sequence depends on nothing but the two
counts (a fixed linear congruential generator), so two runs ask the server
for exactly the same work.

The workload: 4 tenants (key prefixes t0: .. t3:), 4000 keys each, values
of 64..2047 bytes: about 17 MB with the items' overhead, so with -m 8 sets
evict and with -m 64 everything fits.  The warm-up sets every key once, in order; the
measured part is 90% get and 10% set on uniformly drawn keys.

Prints the counts of each reply kind to stdout, so a caller can check that
the server answered every request.
"""
import socket
import sys

TENANTS = 4
KEYS = 4000


class Lcg:
    """Numerical Recipes' 32-bit LCG: deterministic and language-neutral."""

    def __init__(self, seed):
        self.x = seed

    def next(self):
        self.x = (self.x * 1664525 + 1013904223) & 0xFFFFFFFF
        return self.x >> 8


def value_size(tenant, key):
    return 64 + (tenant * 7919 + key * 104729) % 1984


class Client:
    def __init__(self, host, port):
        self.s = socket.create_connection((host, port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.counts = {}

    def _fill(self):
        chunk = self.s.recv(65536)
        if not chunk:
            raise SystemExit("callgrind_client: the server closed the connection")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _count(self, kind):
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def set(self, tenant, key):
        n = value_size(tenant, key)
        data = bytes([97 + (key % 26)]) * n
        self.s.sendall(b"set t%d:k%d 0 0 %d\r\n%s\r\n" % (tenant, key, n, data))
        reply = self._line()
        self._count(reply.decode(errors="replace").split(" ")[0])

    def get(self, tenant, key):
        self.s.sendall(b"get t%d:k%d\r\n" % (tenant, key))
        line = self._line()
        if line.startswith(b"VALUE "):
            n = int(line.split()[3])
            while len(self.buf) < n + 2:
                self._fill()
            self.buf = self.buf[n + 2:]
            line = self._line()
            if line != b"END":
                raise SystemExit("callgrind_client: no END after a value")
            self._count("HIT")
        elif line == b"END":
            self._count("MISS")
        else:
            raise SystemExit("callgrind_client: unexpected reply %r" % line)


def main():
    if len(sys.argv) != 5:
        raise SystemExit("usage: callgrind_client.py HOST PORT WARMUP MEASURED")
    host, port = sys.argv[1], int(sys.argv[2])
    warmup, measured = int(sys.argv[3]), int(sys.argv[4])
    c = Client(host, port)
    for i in range(warmup):
        c.set(i % TENANTS, (i // TENANTS) % KEYS)
    rng = Lcg(12345)
    for _ in range(measured):
        r = rng.next()
        tenant, key = r % TENANTS, (r // TENANTS) % KEYS
        if rng.next() % 10 == 0:
            c.set(tenant, key)
        else:
            c.get(tenant, key)
    print(" ".join("%s=%d" % kv for kv in sorted(c.counts.items())))


if __name__ == "__main__":
    main()
