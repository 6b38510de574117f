#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slcache_flood.py [options] -- SERVER [ARGS...] - many connections each send
most of a large value and stall; a well-behaved client sets and gets small
values meanwhile.  The server is started as SERVER ARGS -l 127.0.0.1 -p PORT
(so it may be memcached as well as slcache), and its peak resident memory
(VmHWM in /proc/PID/status) is reported.

With --check (the test, tests/CMakeLists.txt), it fails unless:
- with --check-mb LIMIT, the peak resident memory stays at or under LIMIT
  MiB (not under sanitizers, whose shadow memory and quarantine are not
  the server's);
- every answer a flooding connection got is "SERVER_ERROR out of memory
  storing object" (a refused value), and the server closes every stalled
  connection within --stall-wait seconds of the end of the flood;
- the well-behaved client's every set and get was answered correctly;
- SIGTERM then stops the server with status 0.
Without it, it only measures (benchmarks and the figures of issue 15).
"""
import argparse
import atexit
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from slcache_spawn import SpawnError, spawn


LOG = None  # the server's standard error


def fail(msg, proc=None):
    print("slcache_flood: FAIL: " + msg)
    if proc is not None and proc.poll() is None:
        proc.kill()
    if proc is not None:
        print("--- server exit status %s; its standard error ends:" % proc.wait())
        LOG.seek(0)
        sys.stdout.write(LOG.read()[-4000:].decode(errors="replace"))
    sys.exit(1)


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def start(cmd, log):
    try:
        proc, ports = spawn(cmd, log)
    except SpawnError as e:
        fail("could not start %s: %s" % (cmd[0], e))
    return proc, ports[0]


class Good(threading.Thread):
    """Sets and gets a small value in a loop on one connection."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop, self.ok, self.errors, self.worst = port, False, 0, [], 0.0

    def run(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        f = s.makefile("rb")
        i = 0
        while not self.stop:
            val = b"%06d" % i * 16
            t0 = time.monotonic()
            try:
                s.sendall(b"set good:k 0 0 %d\r\n%s\r\nget good:k\r\n" % (len(val), val))
                got = [f.readline() for _ in range(4)]
            except OSError as e:
                self.errors.append("exchange %d: %s" % (i, e))
                return
            want = [b"STORED\r\n", b"VALUE good:k 0 %d\r\n" % len(val), val + b"\r\n", b"END\r\n"]
            if got != want:
                self.errors.append("exchange %d: %r" % (i, got))
                return
            self.worst = max(self.worst, time.monotonic() - t0)
            self.ok += 1
            i += 1
            time.sleep(0.01)
        s.close()


def read_answer(s, answers, closed):
    """Adds what the server sent on s to answers; False (s in closed) at its end."""
    try:
        data = s.recv(4096)
    except OSError:
        data = b""
    if data:
        answers[s] = answers.get(s, b"") + data
        return True
    closed.add(s)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conns", type=int, default=400)
    ap.add_argument("--value", type=int, default=1000000, help="declared value size")
    ap.add_argument("--send", type=int, default=900000, help="bytes of it sent")
    ap.add_argument("--prefill-mb", type=int, default=0,
                    help="store this many MiB of 100 KB values first")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--check-mb", type=int, default=0)
    ap.add_argument("--stall-wait", type=float, default=30.0)
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--log", help="the server's standard error goes here")
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()

    want = a.conns + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(want, soft), hard), hard))
        except (ValueError, OSError):
            pass
    global LOG
    LOG = open(a.log, "w+b") if a.log else tempfile.TemporaryFile()
    proc, port = start(a.cmd, LOG)
    # Whatever ends this script, the server goes too: it holds ctest's
    # output pipe, and a test that stopped on an exception would otherwise
    # wait for ctest's timeout.
    atexit.register(lambda: proc.poll() is None and proc.kill())
    base_kb = status_kb(proc.pid, "VmRSS")
    if a.prefill_mb:
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        val = b"f" * 100000
        i = reconnects = 0
        while i < a.prefill_mb * 1048576 // len(val):
            try:
                s.sendall(b"set fill:k%d 0 0 %d noreply\r\n%s\r\n" % (i, len(val), val))
                i += 1
            except (ConnectionResetError, BrokenPipeError):
                # The server closes a connection that stops in the middle
                # of a value for --stall-timeout: on a loaded machine this
                # client can be descheduled that long.  Go on, on another.
                reconnects += 1
                if reconnects > 20:
                    fail("the prefill connection was closed %d times" % reconnects, proc)
                s.close()
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
        f = s.makefile("rb")
        s.sendall(b"version\r\n")
        if not f.readline().startswith(b"VERSION"):
            fail("the prefill was not answered", proc)
        s.close()
    fill_kb = status_kb(proc.pid, "VmRSS")
    good = Good(port)
    good.start()

    sel = selectors.DefaultSelector()
    chunk = b"v" * 65536
    left = {}
    t0 = time.monotonic()
    for i in range(a.conns):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        # What is left to send: the command, the bytes of the value, and
        # when this client last sent on it.
        left[s] = [b"set flood:k%d 0 0 %d\r\n" % (i, a.value), a.send, time.monotonic()]
        sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ)
    answers, closed = {}, set()
    sent_all = resets = stalled = 0
    while sent_all < a.conns and time.monotonic() - t0 < a.time_limit:
        for key, ev in sel.select(timeout=1):
            s = key.fileobj
            st = left[s]
            if ev & selectors.EVENT_READ:
                read_answer(s, answers, closed)
            if s in closed or st[1] == 0 and not st[0]:
                if st[1] >= 0:
                    sent_all += 1
                    st[1] = -1
                    sel.modify(s, selectors.EVENT_READ)
                if s in closed:
                    sel.unregister(s)
                continue
            if ev & selectors.EVENT_WRITE:
                try:
                    if st[0]:
                        n = s.send(st[0])
                        st[0] = st[0][n:]
                    else:
                        n = s.send(chunk[:min(len(chunk), st[1])])
                        st[1] -= n
                    st[2] = time.monotonic()
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    # The server closes a connection that sent nothing for
                    # --stall-timeout in the middle of a value (counted in
                    # whole seconds: a gap of just over a second can do).
                    # A loaded machine can keep this one loop from coming
                    # back to a connection that long: such a reset is the
                    # server doing its job, not a fault.
                    if time.monotonic() - st[2] >= 1.0:
                        stalled += 1
                    else:
                        resets += 1
                    closed.add(s)
    flood_s = time.monotonic() - t0
    if sent_all < a.conns:
        fail("only %d of %d connections sent their %d bytes within %.0f s"
             % (sent_all, a.conns, a.send, a.time_limit), proc)
    hwm_kb = status_kb(proc.pid, "VmHWM")
    rss_kb = status_kb(proc.pid, "VmRSS")

    # The stall: read answers until the server closes the stalled connections.
    t1 = time.monotonic()
    while len(closed) < a.conns and time.monotonic() - t1 < a.stall_wait:
        for key, _ in sel.select(timeout=0.5):
            if not read_answer(key.fileobj, answers, closed):
                sel.unregister(key.fileobj)
    stall_s = time.monotonic() - t1
    hwm_kb = max(hwm_kb, status_kb(proc.pid, "VmHWM"))
    # The well-behaved client must have been served (checked below): on a
    # loaded machine its thread may not have run yet, so wait for its first
    # exchange, up to 30 s.
    t2 = time.monotonic()
    while good.ok == 0 and not good.errors and good.is_alive() and time.monotonic() - t2 < 30:
        time.sleep(0.05)
    good.stop = True
    good.join(timeout=30)
    refused = sum(1 for v in answers.values() if v == b"SERVER_ERROR out of memory storing object\r\n")
    other = [v for v in answers.values() if v != b"SERVER_ERROR out of memory storing object\r\n"]

    print("slcache_flood: %s: %d connections x %d of %d bytes in %.1f s: peak RSS (VmHWM) %.1f MiB "
          "(idle %.1f, prefilled %.1f, at the end of the flood %.1f); %d refused with SERVER_ERROR out of memory, "
          "%d other answers, %d resets (and %d after this client stalled); %d of %d closed by the server %.1f s after the flood; well-behaved "
          "client: %d exchanges, worst %.3f s, %d errors"
          % (os.path.basename(a.cmd[0]), a.conns, a.send, a.value, flood_s, hwm_kb / 1024,
             base_kb / 1024, fill_kb / 1024, rss_kb / 1024, refused, len(other), resets, stalled, len(closed), a.conns, stall_s,
             good.ok, good.worst, len(good.errors)))
    for s in left:
        s.close()
    if a.check:
        if a.check_mb and hwm_kb > a.check_mb * 1024:
            fail("peak resident memory %.1f MiB is above %d MiB" % (hwm_kb / 1024, a.check_mb), proc)
        if resets:
            fail("%d connections were reset while they sent their value" % resets, proc)
        if other:
            fail("a flooding connection got %r" % other[0][:100], proc)
        if len(closed) < a.conns:
            fail("%d stalled connections still open %.0f s after the flood"
                 % (a.conns - len(closed), a.stall_wait), proc)
        if good.errors or good.ok == 0:
            fail("the well-behaved client: %s" % (good.errors[:1] or "no exchange"), proc)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("the server did not stop within 60 s of SIGTERM", proc)
    if a.check and rc != 0:
        fail("the server exited with status %d after SIGTERM" % rc)


if __name__ == "__main__":
    main()
