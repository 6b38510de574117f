#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slcache_hostile.py SCENARIO [--check-mb N] -- SERVER [ARGS...] - issue 27's
floods of clients that hold memory, against a server started as
SERVER ARGS -l 127.0.0.1 -p PORT (slcache, or memcached to compare).

Scenarios (each fails unless every check holds):
- multiget: a quiet tenant stores 400 items; 4 connections each send a get
  of a 1 MB value 300 times on one line and do not read.  Once the server
  stops producing (its get_hits stop moving), its resident memory is within
  --check-mb, a new client is served, STAT usage is within limit_maxbytes,
  and after more sets the quiet tenant still has every item and nothing was
  evicted; then each flooder reads its whole answer, byte for byte.
- contended (with --stall-timeout 2): 10 connections each send a 100-key
  multiget of a 1 MB value and do not read, more than the connection
  memory holds; once it is spent, a new client's get of that value is
  answered in full (the connections that hold memory without moving are
  closed for it), and the same checks hold.
- partial: a quiet tenant stores 400 items; 4000 connections each send 24
  bytes of a get line and go silent.  Once the server has read them all,
  the same checks (a new client served, memory, usage, the quiet tenant
  keeps every item, no eviction).
- metrics (with --metrics-port): a quiet tenant stores 400 items; 300
  clients of the metrics port send their request a byte at a time, and 20
  more send a whole request and never read the answer; meanwhile ten
  scrapes are each answered in full, and the same checks hold.
- prefixes (with --max-tenants 1000): the cache filled with 100 MB of
  items, then one 1-byte item under each of 1000 key prefixes, each a new
  tenant with an arena: resident memory within --check-mb, usage within
  limit_maxbytes, and the server still serves.
- halfclose: ten values of 1,000,000 bytes; a client sends
  "get k0 ... k7\\r\\nmn\\r\\n" and shuts down its side before reading: it
  gets all eight values, END and MN, byte for byte, then the close.

--check-mb 0 (sanitizers, whose shadow memory is not the server's) skips
the resident-memory check only.  SIGTERM then stops the server with status
0.  Every wait is for an event, with a deadline of 60 s.
"""
import argparse
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time

from slcache_spawn import SpawnError, request, spawn

DEADLINE = 60.0
LOG = None
PROC = None
MPORT = None


def fail(msg):
    print("slcache_hostile: FAIL: " + msg)
    if PROC is not None:
        if PROC.poll() is None:
            PROC.kill()
        print("--- server exit status %s; its standard error ends:" % PROC.wait())
        LOG.seek(0)
        sys.stdout.write(LOG.read()[-4000:].decode(errors="replace"))
    sys.exit(1)


def status_kb(field):
    with open("/proc/%d/status" % PROC.pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def start(cmd, metrics=False):
    global PROC, MPORT
    extra = (lambda ports: ["--metrics-port", str(ports[1])]) if metrics else None
    try:
        PROC, ports = spawn(cmd, LOG, nports=2 if metrics else 1, extra=extra)
    except SpawnError as e:
        fail("could not start %s: %s" % (cmd[0], e))
    MPORT = ports[-1]
    return ports[0]


def senders(port, n, data, rcvbuf=None):
    """n connections to @port, each sent @data (with a receive buffer of
    @rcvbuf bytes, if given), and none read."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.sendall(data)
        socks.append(s)
    return socks


class Client:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        self.f = self.s.makefile("rb")

    def call(self, req, lines=1):
        self.s.sendall(req)
        return [self.f.readline() for _ in range(lines)]

    def stats(self):
        self.s.sendall(b"stats\r\n")
        out = {}
        while True:
            line = self.f.readline()
            if not line:
                fail("the server closed a stats connection")
            if line == b"END\r\n":
                return out
            parts = line.split()
            if len(parts) == 3:
                out[parts[1].decode()] = parts[2].decode()

    def set(self, key, val):
        got = self.call(b"set %s 0 0 %d\r\n%s\r\n" % (key, len(val), val))
        if got != [b"STORED\r\n"]:
            fail("set %s: %r" % (key.decode(), got))

    def get(self, key):
        self.s.sendall(b"get %s\r\n" % key)
        head = self.f.readline()
        if head == b"END\r\n":
            return None
        n = int(head.split()[3])
        val = self.f.read(n + 2)[:-2]
        if self.f.readline() != b"END\r\n":
            fail("get %s: no END" % key.decode())
        return val

    def close(self):
        self.s.close()


def quiet_value(i):
    return (b"quiet%04d" % i) * 100


def store_quiet(c):
    for i in range(400):
        c.set(b"quiet:k%d" % i, quiet_value(i))


def wait_for(what, cond):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > DEADLINE:
            fail("waited %.0f s for %s" % (DEADLINE, what))
        time.sleep(0.2)


def check_held(port, check_mb, what):
    """While the flood holds: memory, a new client, usage; then more sets,
    after which the quiet tenant must have every item."""
    rss = status_kb("VmRSS") / 1024
    c = Client(port)
    c.set(b"fresh:k", b"served while the flood holds")
    if c.get(b"fresh:k") != b"served while the flood holds":
        fail("a new client was not served while %s" % what)
    # A line that arrives in two reads costs only its bytes: it needs no
    # room the flood took (under a pool spent by others a partial line once
    # asked for 32 KiB, and its client was closed).
    c.s.sendall(b"set fresh:k2 0 0 5")
    time.sleep(0.2)
    if c.call(b"\r\nhello\r\n") != [b"STORED\r\n"]:
        fail("a set line sent in two pieces was not answered STORED while %s" % what)
    st = c.stats()
    usage, limit = int(st["usage"]), int(st["limit_maxbytes"])
    print("slcache_hostile: %s: RSS %.1f MiB, usage %d of %d, conn_bytes %s"
          % (what, rss, usage, limit, st.get("conn_bytes", "?")))
    if check_mb and rss > check_mb:
        fail("resident memory %.1f MiB is above %d MiB while %s" % (rss, check_mb, what))
    if usage > limit:
        fail("usage %d is above limit_maxbytes %d while %s" % (usage, limit, what))
    val = b"a" * 100000
    for i in range(200):  # 20 MB more items: room for them, if the flood took none
        c.s.sendall(b"set after:k%d 0 0 %d noreply\r\n%s\r\n" % (i, len(val), val))
    if c.call(b"mn\r\n") != [b"MN\r\n"]:
        fail("the sets after the flood were not answered")
    lost = [i for i in range(400) if c.get(b"quiet:k%d" % i) != quiet_value(i)]
    st = c.stats()
    if lost:
        fail("the quiet tenant lost %d of its 400 items while %s" % (len(lost), what))
    if int(st["evictions"]) != 0:
        fail("%s evictions while %s" % (st["evictions"], what))
    if check_mb and status_kb("VmHWM") / 1024 > check_mb:
        fail("peak resident memory %.1f MiB is above %d MiB" % (status_kb("VmHWM") / 1024, check_mb))
    c.close()
    return st


def multiget(port, check_mb):
    c = Client(port)
    store_quiet(c)
    # Under -I 1m as memcached counts an item (header, key, value).
    big = bytes(random.getrandbits(8) for _ in range(256)) * 3900
    c.set(b"atk:a", big)
    line = b"get" + b" atk:a" * 120 + b"\r\n"
    flood = senders(port, 4, line, 65536)
    # The event: the server stops answering them (their sockets are full);
    # get_hits stands still for 10 polls in a row.
    hits, still = [-1], [0]

    def settled():
        h = int(c.stats()["get_hits"])
        still[0] = still[0] + 1 if h == hits[0] else 0
        hits[0] = h
        return still[0] >= 10
    wait_for("the multigets to fill their sockets", settled)
    check_held(port, check_mb, "4 connections hold 120-key multigets unread")
    want = b"VALUE atk:a 0 %d\r\n%s\r\n" % (len(big), big) * 120 + b"END\r\n"
    for s in flood:
        s.sendall(b"mn\r\n")
        got, t0 = bytearray(), time.monotonic()
        while len(got) < len(want) + 4 and time.monotonic() - t0 < DEADLINE:
            part = s.recv(1 << 20)
            if not part:
                break
            got += part
        if got != want + b"MN\r\n":
            fail("a multiget's answer: %d bytes, %d wanted" % (len(got), len(want) + 4))
        s.close()
    # A line that streams (leading spaces, as memcached's tokenizer skips
    # them) goes on from the right key; one whose last key is too long
    # answers the error alone, though its answer would have streamed.
    s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(b"  " + line[:-2] + b" " + b"k" * 251 + b"\r\n" + b"  " + line + b"mn\r\n")
    want = b"CLIENT_ERROR bad command line format\r\n" + want + b"MN\r\n"
    got, t0 = bytearray(), time.monotonic()
    while len(got) < len(want) and time.monotonic() - t0 < DEADLINE:
        part = s.recv(1 << 20)
        if not part:
            break
        got += part
    if got != want:
        fail("a streamed multiget after a bad one: %d bytes, %d wanted; begins %r"
             % (len(got), len(want), bytes(got[:60])))
    s.close()
    c.close()


def contended(port, check_mb):
    c = Client(port)
    store_quiet(c)
    big = b"b" * 1000000
    c.set(b"atk:a", big)
    flood = senders(port, 10, b"get" + b" atk:a" * 100 + b"\r\n", 4096)

    def spent():
        st = c.stats()
        return int(st["conn_bytes"]) + 1000100 > int(st["conn_memory"]) or \
            int(st["conn_stalled_closed"]) > 0
    wait_for("the multigets to spend the connection memory", spent)
    if c.get(b"atk:a") != big:
        fail("a get while the connection memory is spent: not the value")
    print("slcache_hostile: contended: a get served; %s connections closed as stalled"
          % c.stats()["conn_stalled_closed"])
    check_held(port, check_mb, "10 connections spend the connection memory")
    for s in flood:
        s.close()
    c.close()


def partial(port, check_mb, conns):
    c = Client(port)
    store_quiet(c)
    before = int(c.stats()["bytes_read"])
    flood = []
    for i in range(conns):
        s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        s.sendall(b"get quiet:k%-13d" % (i % 400))  # 24 bytes, no end of line
        flood.append(s)
    polls = [0]  # "before" counts the stats line that measured it; each poll adds one

    def all_read():  # every partial line, and our own "stats\r\n" lines
        polls[0] += 1
        return int(c.stats()["bytes_read"]) >= before + 24 * conns + 7 * polls[0]
    wait_for("the server to read every partial line", all_read)
    check_held(port, check_mb, "%d connections hold partial lines" % conns)
    # They are still served once their lines end.
    for i in (0, conns // 2, conns - 1):
        flood[i].sendall(b"\r\n")
        f = flood[i].makefile("rb")
        head = f.readline()
        if not head.startswith(b"VALUE quiet:k%d " % (i % 400)):
            fail("a partial line, ended, was answered %r" % head)
    for s in flood:
        s.close()
    c.close()


def scrape():
    data = request(MPORT, b"GET /metrics HTTP/1.0\r\n\r\n", DEADLINE)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = [int(l.split(b":")[1]) for l in lines if l.lower().startswith(b"content-length:")]
    if lines[0] != b"HTTP/1.0 200 OK" or length != [len(body)] or b"softlimit_usage_bytes" not in body:
        fail("a scrape behind slow clients got %r (%d bytes of body)" % (lines[0], len(body)))


def metrics(port, check_mb):
    c = Client(port)
    store_quiet(c)
    for i in range(300):  # 300 tenants: a dump of some size
        c.s.sendall(b"set t%d:k 0 0 1 noreply\r\nx\r\n" % i)
    c.call(b"mn\r\n")
    req = b"GET /metrics HTTP/1.0\r\nHost: slow\r\n\r\n"
    slow = senders(MPORT, 300, req[:1])
    unread = senders(MPORT, 20, req, 4096)
    for n in range(10):
        for i, s in enumerate(slow):  # one more byte each, never the end
            try:
                s.sendall(req[1 + n:2 + n])
            except OSError:
                slow[i] = None  # the server may drop the oldest: allowed
        slow = [s for s in slow if s is not None]
        scrape()
    print("slcache_hostile: metrics: 10 scrapes answered among %d trickling and %d unread clients"
          % (len(slow), len(unread)))
    check_held(port, check_mb, "slow clients hold the metrics port")
    scrape()
    for s in slow + unread:
        s.close()
    c.close()


def prefixes(port, check_mb):
    c = Client(port)
    val = b"f" * 100000
    for i in range(1000):
        c.s.sendall(b"set fill:k%d 0 0 %d noreply\r\n%s\r\n" % (i, len(val), val))
    for i in range(1000):
        c.s.sendall(b"set p%d:k 0 0 1 noreply\r\nx\r\n" % i)
    if c.call(b"mn\r\n") != [b"MN\r\n"]:
        fail("the sets were not answered")
    st = c.stats()
    tenants = len([k for k in st if k.startswith("tenant:") and k.endswith(":usage")])
    usage, limit = int(st["usage"]), int(st["limit_maxbytes"])
    hwm = status_kb("VmHWM") / 1024
    print("slcache_hostile: prefixes: %d tenants, peak RSS %.1f MiB, usage %d of %d"
          % (tenants, hwm, usage, limit))
    if check_mb and hwm > check_mb:
        fail("peak resident memory %.1f MiB is above %d MiB with %d tenants" % (hwm, check_mb, tenants))
    if usage > limit:
        fail("usage %d is above limit_maxbytes %d" % (usage, limit))
    c.set(b"p999:k", b"still served")
    if c.get(b"p999:k") != b"still served":
        fail("not served after the prefixes")
    c.close()


def halfclose(port):
    c = Client(port)
    vals = [(b"%d" % i) * (1000000 // len(b"%d" % i)) for i in range(10)]
    for i, v in enumerate(vals):
        c.set(b"k%d" % i, v)
    c.close()
    s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    s.sendall(b"get " + b" ".join(b"k%d" % i for i in range(8)) + b"\r\nmn\r\n")
    s.shutdown(socket.SHUT_WR)
    got, t0 = bytearray(), time.monotonic()
    while time.monotonic() - t0 < DEADLINE:
        part = s.recv(1 << 20)
        if not part:
            break
        got += part
    s.close()
    want = b"".join(b"VALUE k%d 0 %d\r\n%s\r\n" % (i, len(vals[i]), vals[i]) for i in range(8))
    want += b"END\r\nMN\r\n"
    print("slcache_hostile: half-close: %d bytes of %d" % (len(got), len(want)))
    if got != want:
        fail("after a half-close: %d bytes, %d wanted (ends %r)" % (len(got), len(want), got[-40:]))


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=["multiget", "contended", "partial", "metrics", "prefixes",
                                         "halfclose"])
    ap.add_argument("--check-mb", type=int, default=0)
    ap.add_argument("--conns", type=int, default=4000)
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.conns * 2 + 256
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
        except (ValueError, OSError):
            pass
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < want and a.scenario == "partial":
        print("slcache_hostile: not enough file descriptors for %d connections: skipped" % a.conns)
        sys.exit(77)
    LOG = tempfile.TemporaryFile()
    # A server that hangs the test fails it, and is killed, within ctest's timeout.
    signal.signal(signal.SIGALRM, lambda *_: fail("the scenario did not end within 150 s"))
    signal.alarm(150)
    port = start(a.cmd, a.scenario == "metrics")
    try:
        if a.scenario == "metrics":
            metrics(port, a.check_mb)
        elif a.scenario == "prefixes":
            prefixes(port, a.check_mb)
        elif a.scenario == "contended":
            contended(port, a.check_mb)
        elif a.scenario == "multiget":
            multiget(port, a.check_mb)
        elif a.scenario == "partial":
            partial(port, a.check_mb, a.conns)
        else:
            halfclose(port)
    except (OSError, ValueError, LookupError) as e:  # a timeout, a reset, a bad answer
        fail("%s: %r" % (a.scenario, e))
    PROC.send_signal(signal.SIGTERM)
    try:
        rc = PROC.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        fail("the server did not stop within %.0f s of SIGTERM" % DEADLINE)
    if rc != 0:
        fail("the server exited with status %d after SIGTERM" % rc)
    print("slcache_hostile: %s: passed" % a.scenario)


if __name__ == "__main__":
    main()
