#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slcache_lease_start.py shm|etcd SLCACHE SOFTLIMITCTL - a leased tenant created
by its first key: its writes wait for its share, and never a worker thread.

shm: a budget of 100 MiB in a fresh shm: store, one slcache; a client
     creates tenant "fresh" with its first set and floods sets for it at
     once (pipelined, each answered).  Passes when every set answers STORED
     and every key is then there: none was refused because the lease was
     starting (the connection waited for the share instead).

etcd: a real 1-member etcd on loopback (tests/etcd_cluster.py; 77, skipped,
     without etcd), budgets "old" and "fresh", one slcache with one worker
     thread.  Tenant "old" is running; etcd is stopped (SIGSTOP); a client
     sends a set that creates tenant "fresh".  While that set waits, the
     same worker answers another client's gets and sets of "old": the
     test asserts they are answered while the set of "fresh" still is not
     (its connection parked, the worker free).  etcd is resumed; the set
     ends with STORED or an error naming the lease store, never hangs.

Every wait is for an event, with a deadline of 60 s or more (hang
catchers); --lease-wait is set far beyond them in the shm case, and to
60 s in the etcd case, so that the set of "fresh" cannot end while the
test checks that it waits.
"""
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slcache_lease_lib import Conn, Fail, Slcache, softlimitctl, store_remove, wait_for  # noqa: E402

SKIP = 77
NSETS = 2000
VALUE = b"v" * 1000
STORE_ERROR = b"SERVER_ERROR lease store unavailable"


def lines(conn, n):
    """The next n answer lines on conn."""
    out = []
    while len(out) < n:
        while b"\r\n" not in conn.buf:
            conn._fill()
        line, conn.buf = conn.buf.split(b"\r\n", 1)
        out.append(line)
    return out


def flood(binary, ctl, procs):
    store = "shm:sltest-start-%d-%d" % (os.getpid(), int(time.time()))
    try:
        softlimitctl(ctl, store, "budget", "set", "fresh", "max=%d" % (100 << 20))
        # The budget is read before the server listens (lease_start()).
        p = Slcache(binary, ["-m", "256", "-t", "2", "--lease-store", store,
                             "--lease-wait", "600000"], "start")
        procs.append(p)
        c = Conn(p.port, timeout=120)
        keys = [b"fresh:k%d" % i for i in range(NSETS)]
        hdr = b" 0 0 %d\r\n" % len(VALUE)
        c.s.sendall(b"".join(b"set " + k + hdr + VALUE + b"\r\n" for k in keys))
        answers = lines(c, NSETS)
        refused = [a for a in answers if a != b"STORED"]
        if refused:
            raise Fail("%d of %d sets of a new leased tenant not stored (first: %r; first "
                       "answer: %r)" % (len(refused), NSETS, refused[0], answers[0]))
        hits = set()
        for i in range(0, NSETS, 100):
            hits |= c.multiget(keys[i:i + 100])
        if len(hits) != NSETS:
            raise Fail("%d of %d keys stored are there" % (len(hits), NSETS))
        st = p.tenant("fresh")
        if st.get("lease_state") != "held":
            raise Fail("tenant fresh is not leased: %s" % st)
        if st.get("lease_fences") != "0":  # no fault: no fence (bench_fleet's "fences")
            raise Fail("tenant fresh's lease_fences is %r, not 0" % st.get("lease_fences"))
        print("slcache_lease_start: %d sets of a new leased tenant, all stored (share %s)"
              % (NSETS, st.get("lease")))
        p.stop()
        return 0
    finally:
        store_remove(ctl, store)


def answered(conn):
    """What conn has to read now, without waiting (b"" when nothing)."""
    conn.s.setblocking(False)
    try:
        return conn.buf + conn.s.recv(65536, socket.MSG_PEEK)
    except BlockingIOError:
        return conn.buf
    finally:
        conn.s.setblocking(True)


def etcd_stopped(binary, ctl, procs):
    from etcd_cluster import EtcdCluster, etcd_binaries
    if not etcd_binaries():
        print("SKIP: etcd is not installed (apt-get install etcd-server etcd-client)")
        return SKIP
    with EtcdCluster(1) as cl:
        member, frozen = cl.procs, False
        try:
            cl.wait_healthy()
            store = cl.url("slcache-start")
            for b in ("old", "fresh"):
                softlimitctl(ctl, store, "budget", "set", b, "max=%d" % (64 << 20))
            p = Slcache(binary, ["-m", "256", "-t", "1", "--lease-store", store,
                                 "--lease-wait", "60000"], "etcd")
            procs.append(p)
            other = Conn(p.port, timeout=120)

            def stored():
                other.s.sendall(b"set old:k0 0 0 2\r\nok\r\n")
                return lines(other, 1) == [b"STORED"]

            # Tenant old running, with its share (the store answering).
            wait_for("tenant old's set stored", stored)
            wait_for("tenant old's lease held", lambda: p.tenant("old").get("lease_state") == "held")

            member[0].send_signal(signal.SIGSTOP)
            frozen = True
            new = Conn(p.port, timeout=120)
            new.s.sendall(b"set fresh:k0 0 0 5\r\nhello\r\n")
            # The worker has read the set once the tenant exists.
            wait_for("tenant fresh created by its first set",
                     lambda: "usage" in p.tenant("fresh"), 120)
            for i in range(20):
                other.s.sendall(b"get old:k0\r\nset old:k%d 0 0 2\r\nok\r\n" % (i + 1))
                got = lines(other, 4)
                if got[0] != b"VALUE old:k0 0 2" or got[2] != b"END":
                    raise Fail("tenant old's get answered %r" % got[:3])
                if got[3] != b"STORED" and not got[3].startswith(b"SERVER_ERROR"):
                    raise Fail("tenant old's set answered %r" % got[3])
            early = answered(new)
            if early:
                raise Fail("the set of new tenant fresh was answered (%r) before another "
                           "tenant's requests, with etcd stopped: it held the worker" % early)
            print("slcache_lease_start: etcd stopped: 20 gets and sets of tenant old answered "
                  "while the set of new tenant fresh waits")
            member[0].send_signal(signal.SIGCONT)
            frozen = False
            end = lines(new, 1)[0]
            if end != b"STORED" and not end.startswith(STORE_ERROR):
                raise Fail("the set of new tenant fresh ended with %r" % end)
            print("slcache_lease_start: etcd resumed: the set of tenant fresh answered %r" % end)
            p.stop()
            return 0
        finally:
            if frozen:
                member[0].send_signal(signal.SIGCONT)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("shm", "etcd"):
        print(__doc__)
        return 2
    mode, binary, ctl = sys.argv[1:]
    procs = []
    try:
        rc = (flood if mode == "shm" else etcd_stopped)(binary, ctl, procs)
    except Fail as e:
        print("slcache_lease_start: FAIL: %s" % e)
        for p in procs:
            print("--- %s stderr:\n%s" % (p.name, p.log_tail(3000)))
        return 1
    finally:
        for p in procs:
            p.cleanup()
    if rc == 0:
        print("slcache_lease_start: PASS")
    return rc


if __name__ == "__main__":
    sys.exit(main())
