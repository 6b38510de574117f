#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slcache_hostile.py SCENARIO [--check-mb N] -- SERVER [ARGS...] - issue 27's
floods of clients that hold memory, against a server started as
SERVER ARGS -l 127.0.0.1 -p PORT (slcache, or memcached to compare).

Scenarios (each fails unless every check holds):
- multiget (with --stall-timeout 0: they stay): a quiet tenant stores 400
  items; 4 connections each send a get of a 1 MB value 120 times on one
  line and do not read.  Once the server stops producing (its get_hits
  stop moving), its resident memory is within --check-mb, a new client is
  served, STAT usage is within limit_maxbytes, and after more sets the
  quiet tenant still has every item and nothing was evicted; then the
  flooders read, all at once (one may wait for room in their tenant's
  share that the others hold), each its whole answer, byte for byte.
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
- unread (issue "Isolation", 1; with --stall-timeout 2): 20 connections of
  tenant atk each pipeline 2,000 "get atk:big" (a 1 MB value), 20 more 20
  "gets" of 100 such keys, 10 more 2,000 gets of a 10 kB value, and none
  reads.  Once the attack has taken all it can (a holder closed for the
  others; or the connection memory spent, and then standing still),
  another tenant's gets of a 1 MB and a 100 kB value are answered whole,
  and a client of a third tenant that pipelines 300 gets and reads them
  gets every answer and is not closed; then the server closes attack
  connections (10 of them seen reset or closed), and the resident-memory
  check holds.
- cut (4): under the same attack, with 300 tenants, another tenant's "mg
  KEY v" of its 1 MB value is answered whole (VA, the value, and the
  connection still answers), and "stats" and "stats tenants" have every
  line they had before the attack, in the same order, then END.
- heldlines (2): 16 connections of atk each send a get line of 500 kB
  ("get atk:k0 atk:k1 ...") without its end, then a byte every second.
  Once the attack has taken all it can (the connection memory nearly
  spent, or an attack connection closed, and then it holds still), another
  tenant's 600 kB sets answer STORED, its get is answered whole, and the
  resident-memory check holds.
- trickle (3): --conns connections (4000 in ctest) of atk each send a 100
  kB set's line and 1 kB of its value, then a byte a second.  Once the
  attack has taken all it can (the connection memory nearly spent, or a
  value refused, and then it holds still), another tenant's get of 100 kB
  is answered whole, five times, and the resident-memory check holds.
- smallpool (with -m 16 -I 2m, a pool of 1.9 MB): a 1.5 MB value is
  stored and answered whole by get and mg, though it is more than half
  the connection memory (a tenant's share but for its largest values).
- halfclose: ten values of 1,000,000 bytes; a client sends
  "get k0 ... k7\\r\\nmn\\r\\n" and shuts down its side before reading: it
  gets all eight values, END and MN, byte for byte, then the close.

--check-mb 0 (sanitizers, whose shadow memory is not the server's) skips
the resident-memory check only.  SIGTERM then stops the server with status
0.  Every wait is for an event, with a deadline of 60 s; an answer the
isolation scenarios wait for, 30 s (a hang catcher: the server that fails
them never answers).
"""
import argparse
import random
import resource
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
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


def stands_still(c, stat, polls, what):
    """Waits for the stats line @stat to stay the same for @polls polls."""
    last, still = [-1], [0]

    def still_enough():
        v = int(c.stats()[stat])
        still[0] = still[0] + 1 if v == last[0] else 0
        last[0] = v
        return still[0] >= polls
    wait_for(what, still_enough)


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
    stands_still(c, "get_hits", 10, "the multigets to fill their sockets")
    check_held(port, check_mb, "4 connections hold 120-key multigets unread")
    want = b"VALUE atk:a 0 %d\r\n%s\r\n" % (len(big), big) * 120 + b"END\r\n"
    # All read at once: they share their tenant's part of the connection
    # memory, and one may wait for room that the others hold.
    got = {s: bytearray() for s in flood}
    sel = selectors.DefaultSelector()
    for s in flood:
        s.sendall(b"mn\r\n")
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    t0 = time.monotonic()
    while sel.get_map() and time.monotonic() - t0 < DEADLINE:
        for key, _ in sel.select(1.0):
            part = key.fileobj.recv(1 << 20)
            got[key.fileobj] += part
            if not part or len(got[key.fileobj]) >= len(want) + 4:
                sel.unregister(key.fileobj)
    for s in flood:
        if got[s] != want + b"MN\r\n":
            fail("a multiget's answer: %d bytes, %d wanted" % (len(got[s]), len(want) + 4))
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


ANSWER_DEADLINE = 30.0


def victim(port):
    c = Client(port)
    c.s.settimeout(ANSWER_DEADLINE)
    return c


def answered(what, fn):
    """fn()'s answer, or a failure naming @what if none comes (the hang
    catcher's deadline) or the connection is closed."""
    try:
        return fn()
    except socket.timeout:
        fail("%s: no answer within %.0f s" % (what, ANSWER_DEADLINE))
    except (OSError, ValueError, IndexError) as e:
        fail("%s: %r" % (what, e))


def closed_by_server(socks):
    """How many of @socks the server closed or reset (without reading them:
    their answers may wait unread)."""
    p = select.poll()
    for s in socks:
        p.register(s, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
    return sum(1 for _, ev in p.poll(0) if ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR))


def holds_still(c):
    stands_still(c, "conn_bytes", 5, "the connection memory to stand still")


class Trickle:
    """A byte a second to each of @socks: never silent, never done."""

    def __init__(self, socks, byte):
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, args=(socks, byte), daemon=True)
        self.t.start()

    def run(self, socks, byte):
        while not self.stop.wait(1.0):
            for s in socks:
                try:
                    s.send(byte)
                except OSError:
                    pass

    def end(self):
        self.stop.set()
        self.t.join()


def pool_spent(c, room):
    st = c.stats()
    return int(st["conn_bytes"]) + room > int(st["conn_memory"])


def check_rss(check_mb, what):
    hwm = status_kb("VmHWM") / 1024
    print("slcache_hostile: %s: peak RSS %.1f MiB" % (what, hwm))
    if check_mb and hwm > check_mb:
        fail("peak resident memory %.1f MiB is above %d MiB while %s" % (hwm, check_mb, what))


class Pipeliner(threading.Thread):
    """Sends @n gets of @key at once and reads every answer: a client that
    pipelines, and reads."""

    def __init__(self, port, key, val, n):
        super().__init__(daemon=True)
        self.s = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_DEADLINE)
        self.key, self.val, self.n, self.err = key, val, n, "did not finish"

    def run(self):
        want = b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (self.key, len(self.val), self.val)
        try:
            self.s.sendall(b"get %s\r\n" % self.key * self.n + b"mn\r\n")
            f = self.s.makefile("rb")
            for i in range(self.n):
                got = f.read(len(want))
                if got != want:
                    self.err = "answer %d of %d: %d bytes, not the value (%r)" % (
                        i, self.n, len(got), got[:40])
                    return
            if f.readline() != b"MN\r\n":
                self.err = "no MN after its gets"
                return
            self.err = None
        except OSError as e:  # closed, reset, or the hang catcher
            self.err = repr(e)


def unread_attack(port, c):
    """Issue "Isolation" 1: 50 connections of atk pipeline gets and never
    read; returns them once the attack took all it can."""
    c.set(b"atk:big", b"u" * 1000000)
    c.set(b"atk:small", b"s" * 10000)
    atk = senders(port, 20, b"get atk:big\r\n" * 2000, 4096)
    atk += senders(port, 20, (b"gets" + b" atk:big" * 100 + b"\r\n") * 20, 4096)
    atk += senders(port, 10, b"get atk:small\r\n" * 2000, 4096)
    closed = lambda: int(c.stats()["conn_stalled_closed"]) > 0
    wait_for("the unread answers to take the connection memory",
             lambda: closed() or pool_spent(c, 1000100))
    if not closed():
        holds_still(c)
    return atk


def unread(port, check_mb):
    c = Client(port)
    val = bytes(random.getrandbits(8) for _ in range(256)) * 400
    big = bytes(random.getrandbits(8) for _ in range(250)) * 4000
    c.set(b"vic:big", big)
    c.set(b"vic:v", val)
    c.set(b"pipe:v", val)
    atk = unread_attack(port, c)
    v = victim(port)
    if answered("another tenant's get under unread answers", lambda: v.get(b"vic:big")) != big:
        fail("another tenant's get of 1 MB under unread answers: not its value")
    if answered("another tenant's get under unread answers", lambda: v.get(b"vic:v")) != val:
        fail("another tenant's get of 100 kB under unread answers: not its value")
    pipe = Pipeliner(port, b"pipe:v", val, 300)
    pipe.start()
    pipe.join(ANSWER_DEADLINE * 2)
    if pipe.err:
        fail("a client that pipelines 300 gets and reads them: %s" % pipe.err)
    wait_for("the server to close attack connections", lambda: closed_by_server(atk) >= 10)
    st = c.stats()
    print("slcache_hostile: unread: victim served; %d of %d attack connections closed (%s stalled)"
          % (closed_by_server(atk), len(atk), st["conn_stalled_closed"]))
    check_rss(check_mb, "50 connections do not read their answers")
    for s in atk:
        s.close()
    pipe.s.close()
    v.close()
    c.close()


def stat_names(c, cmd):
    """The names of @cmd's lines, in order; fails unless it ends in END."""
    c.s.sendall(cmd + b"\r\n")
    names = []
    while True:
        line = c.f.readline()
        if line == b"END\r\n":
            return names
        if not line.startswith(b"STAT "):
            fail("%s: a line %r (after %d lines)" % (cmd.decode(), line[:60], len(names)))
        names.append(line.split()[1])


def cut(port, check_mb):
    c = Client(port)
    val = bytes(random.getrandbits(8) for _ in range(250)) * 4000
    c.set(b"vic:big", val)
    for i in range(300):  # 300 tenants: a stats of 150 kB
        c.s.sendall(b"set t%d:k 0 0 1 noreply\r\nx\r\n" % i)
    c.call(b"mn\r\n")
    before = {cmd: stat_names(c, cmd) for cmd in (b"stats", b"stats tenants")}
    atk = unread_attack(port, c)
    v = victim(port)

    def mg():
        got = v.call(b"mg vic:big v\r\n")[0]
        if got != b"VA %d\r\n" % len(val):
            fail("mg under unread answers: %r" % got[:60])
        if v.f.read(len(val) + 2) != val + b"\r\n":
            fail("mg under unread answers: its VA line, then not its value")
        return v.call(b"mn\r\n")
    if answered("mg under unread answers", mg) != [b"MN\r\n"]:
        fail("mg under unread answers: the connection did not answer after it")
    for cmd, names in before.items():
        got = answered(cmd.decode(), lambda: stat_names(v, cmd))
        if got != names:
            fail("%s under unread answers: %d lines, %d before the attack (first difference at %d)"
                 % (cmd.decode(), len(got), len(names),
                    next((i for i, (a, b) in enumerate(zip(got, names)) if a != b),
                         min(len(got), len(names)))))
    print("slcache_hostile: cut: mg and stats answered whole under unread answers")
    check_rss(check_mb, "50 connections do not read their answers")
    for s in atk:
        s.close()
    v.close()
    c.close()


def heldlines(port, check_mb):
    c = Client(port)
    line = b"get"
    while len(line) < 500000:
        line += b" atk:k%d" % len(line)
    atk = senders(port, 16, line)
    feed = Trickle(atk, b"x")
    wait_for("the held lines to take the connection memory",
             lambda: pool_spent(c, 650000) or closed_by_server(atk) > 0)
    holds_still(c)
    v = victim(port)
    val = bytes(random.getrandbits(8) for _ in range(256)) * 2400  # 614 kB
    for i in range(3):
        got = answered("a 600 kB set under held lines",
                       lambda: v.call(b"set vic:k%d 0 0 %d\r\n%s\r\n" % (i, len(val), val)))
        if got != [b"STORED\r\n"]:
            fail("a 600 kB set of another tenant under held lines: %r" % got)
    if answered("a get under held lines", lambda: v.get(b"vic:k1")) != val:
        fail("a get of another tenant under held lines: not its value")
    print("slcache_hostile: heldlines: another tenant served; %d of %d held lines closed"
          % (closed_by_server(atk), len(atk)))
    check_rss(check_mb, "16 connections hold 500 kB lines")
    feed.end()
    for s in atk:
        s.close()
    v.close()
    c.close()


def trickle(port, check_mb, conns):
    c = Client(port)
    val = bytes(random.getrandbits(8) for _ in range(256)) * 400
    c.set(b"vic:v", val)
    atk = []
    for i in range(conns):
        s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        s.sendall(b"set atk:k%d 0 0 100000\r\n" % i + b"t" * 1000)
        atk.append(s)
    feed = Trickle(atk, b"t")

    def refused():
        p = select.poll()
        for s in atk:
            p.register(s, select.POLLIN)
        return len(p.poll(0)) > 0
    wait_for("the trickled values to take the connection memory",
             lambda: pool_spent(c, 110000) or refused())
    holds_still(c)
    v = victim(port)
    for i in range(5):
        if answered("a get under trickled values", lambda: v.get(b"vic:v")) != val:
            fail("a get of another tenant under trickled values: not its value")
    print("slcache_hostile: trickle: another tenant's 5 gets answered among %d trickled values"
          % conns)
    check_rss(check_mb, "%d connections trickle 100 kB values" % conns)
    feed.end()
    for s in atk:
        s.close()
    v.close()
    c.close()


def smallpool(port, check_mb):
    c = victim(port)
    val = bytes(random.getrandbits(8) for _ in range(250)) * 6000
    c.set(b"big:k", val)
    if c.get(b"big:k") != val:
        fail("a 1.5 MB value under -m 16: not its value")
    if c.call(b"mg big:k v\r\n") != [b"VA %d\r\n" % len(val)] or c.f.read(len(val) + 2) != val + b"\r\n":
        fail("mg of a 1.5 MB value under -m 16: not VA and its value")
    check_rss(check_mb, "a 1.5 MB value under -m 16")
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


SCENARIOS = {"multiget": multiget, "contended": contended, "partial": partial, "metrics": metrics,
             "prefixes": prefixes, "halfclose": halfclose, "unread": unread, "cut": cut,
             "heldlines": heldlines, "trickle": trickle, "smallpool": smallpool}


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
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
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < want and a.scenario in ("partial", "trickle"):
        print("slcache_hostile: not enough file descriptors for %d connections: skipped" % a.conns)
        sys.exit(77)
    LOG = tempfile.TemporaryFile()
    # A server that hangs the test fails it, and is killed, within ctest's timeout.
    signal.signal(signal.SIGALRM, lambda *_: fail("the scenario did not end within 150 s"))
    signal.alarm(150)
    port = start(a.cmd, a.scenario == "metrics")
    try:
        if a.scenario in ("partial", "trickle"):
            SCENARIOS[a.scenario](port, a.check_mb, a.conns)
        elif a.scenario == "halfclose":
            halfclose(port)
        else:
            SCENARIOS[a.scenario](port, a.check_mb)
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
