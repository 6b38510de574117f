# SPDX-License-Identifier: MIT
"""slcache_lease_lib.py - what tests/slcache_lease*.py and
benchmarks/bench_lease_host.sh share: slcache processes on one shm: lease
store, a client that reads `stats tenants`, a cache-aside load of one
tenant's keys spread over the processes, and the sampler that sums the
tenant's usage over the processes every 10 ms, one process after another.

Processes are started, stopped and killed by their pid only, and waited for
(reaped) at once: a dead process's pid must be gone for the store to free
its share.
"""
import heapq
import os
import random
import signal
import socket
import subprocess
import tempfile
import threading
import time

from slcache_spawn import SpawnError, spawn


class Fail(Exception):
    pass


def wait_for(what, cond, deadline_s=60.0, step=0.05):
    """Polls cond() until it is true; Fail after deadline_s (generous: the
    machine may be loaded).  Returns cond()'s value and the seconds waited."""
    t0 = time.monotonic()
    while True:
        v = cond()
        if v:
            return v, time.monotonic() - t0
        if time.monotonic() - t0 > deadline_s:
            raise Fail("timed out after %.0f s waiting for %s" % (deadline_s, what))
        time.sleep(step)


class Conn:
    """One memcached text-protocol connection."""

    def __init__(self, port, timeout=10.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.s.close()

    def _fill(self):
        chunk = self.s.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def read_until(self, marker):
        while True:
            i = self.buf.find(marker)
            if i >= 0:
                out, self.buf = self.buf[:i + len(marker)], self.buf[i + len(marker):]
                return out
            self._fill()

    def stats(self, what="tenants"):
        self.s.sendall(b"stats " + what.encode() + b"\r\n")
        out = {}
        for line in self.read_until(b"END\r\n").split(b"\r\n"):
            parts = line.split(b" ", 2)
            if len(parts) == 3 and parts[0] == b"STAT":
                out[parts[1].decode()] = parts[2].decode()
        return out

    def multiget(self, keys):
        """The keys among @keys that hit."""
        self.s.sendall(b"get " + b" ".join(keys) + b"\r\n")
        hits = set()
        while True:
            while b"\r\n" not in self.buf:
                self._fill()
            line, self.buf = self.buf.split(b"\r\n", 1)
            if line == b"END":
                return hits
            if not line.startswith(b"VALUE "):
                raise ConnectionError("unexpected answer %r" % line[:80])
            _, key, _, n = line.split(b" ")[:4]
            need = int(n) + 2
            while len(self.buf) < need:
                self._fill()
            self.buf = self.buf[need:]
            hits.add(key)

    def set_many(self, keys, value):
        """noreply sets, then a meta no-op to know they were all read."""
        hdr = b" 0 0 %d noreply\r\n" % len(value)
        self.s.sendall(b"".join(b"set " + k + hdr + value + b"\r\n" for k in keys) + b"mn\r\n")
        self.read_until(b"MN\r\n")


class Slcache:
    """One slcache process; its stderr goes to a temporary file."""

    def __init__(self, binary, args, name, metrics=False):
        self.name = name
        self.log = tempfile.NamedTemporaryFile(prefix="slcache-lease-%s-" % name, suffix=".log",
                                               delete=False)
        self.proc = None
        self.port = None
        extra = (lambda ports: ["--metrics-port", str(ports[1])]) if metrics else None
        try:
            self.proc, ports = spawn([binary] + list(args), self.log, nports=2 if metrics else 1,
                                     extra=extra)
        except SpawnError as e:
            raise Fail("slcache %s did not start: %s" % (name, e))
        self.port = ports[0]
        self.mport = ports[1] if metrics else None  # --metrics-port, when asked for
        self.stopped = False
        self.dead = False
        self.conn = Conn(self.port)

    def log_tail(self, n=3000):
        try:
            with open(self.log.name, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def tenant(self, tenant):
        """{field: value} of `stats tenants` for @tenant ({} if absent)."""
        st = self.conn.stats("tenants")
        pre = "tenant:%s:" % tenant
        return {k[len(pre):]: v for k, v in st.items() if k.startswith(pre)}

    def sigstop(self):
        self.stopped = True
        os.kill(self.proc.pid, signal.SIGSTOP)

    def sigcont(self):
        os.kill(self.proc.pid, signal.SIGCONT)
        self.stopped = False

    def kill9(self):
        self.dead = True
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()  # reaped: the store sees the pid gone

    def stop(self, deadline_s=30):
        """SIGTERM; Fail unless it exits 0 within the deadline."""
        if self.dead:
            return
        self.dead = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail("slcache %s did not stop within %d s of SIGTERM" % (self.name, deadline_s))
        if rc != 0:
            raise Fail("slcache %s exited %d after SIGTERM: %s" % (self.name, rc, self.log_tail()))

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except OSError:
                pass
            self.proc.kill()
            self.proc.wait()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


class Sampler(threading.Thread):
    """Every 10 ms, the tenant's usage summed over the processes, read one
    process after another from `stats tenants`; a stopped process counts at
    its last report, a killed one at nothing (its memory is gone).  Counts
    samples over the budget's max, and runs of two or more in a row."""

    def __init__(self, procs, tenant, budget, interval=0.010):
        super().__init__(daemon=True)
        self.procs = procs  # a list the test may append to
        self.tenant = tenant
        self.budget = budget
        self.interval = interval
        self.last = {}
        self.samples = 0
        self.over = 0
        self.over_runs = 0  # two in a row
        self.max_sum = 0
        self.max_over_bytes = 0
        self.errors = []
        self._run = 0
        self._halt = threading.Event()
        self.conns = {}
        # Held across one sample: the test takes it to stop or kill a
        # process between two samples, never in the middle of a read.
        self.lock = threading.Lock()

    def usage_of(self, p):
        if p.dead:
            return 0
        if p.stopped:
            return self.last.get(p.name, 0)
        c = self.conns.get(p.name)
        if c is None:
            c = self.conns[p.name] = Conn(p.port)
        st = c.stats("tenants")
        u = int(st.get("tenant:%s:usage" % self.tenant, 0))
        self.last[p.name] = u
        return u

    def run(self):
        while not self._halt.is_set():
            t0 = time.monotonic()
            total = 0
            try:
                with self.lock:
                    for p in list(self.procs):
                        total += self.usage_of(p)
            except (OSError, ConnectionError, ValueError) as e:
                # A process killed or stopped while we read it: this
                # sample is incomplete, not over.
                self.conns = {k: v for k, v in self.conns.items()
                              if not any(p.name == k and (p.dead or p.stopped) for p in self.procs)}
                self.errors.append(str(e))
                continue
            self.samples += 1
            self.max_sum = max(self.max_sum, total)
            if total > self.budget:
                self.over += 1
                self._run += 1
                self.max_over_bytes = max(self.max_over_bytes, total - self.budget)
                if self._run == 2:
                    self.over_runs += 1
            else:
                self._run = 0
            dt = time.monotonic() - t0
            if dt < self.interval:
                time.sleep(self.interval - dt)

    def stop(self):
        self._halt.set()
        self.join()


class Load(threading.Thread):
    """Cache-aside reads of one tenant's keys: each key lives on one process
    (by weight), requests are Zipf over the keys (or uniform, zipf=0); a miss
    is set at once.  weights may be changed live (the skew moving) and a
    process may be taken out (its keys go to the others, as a client's
    hashing would send them)."""

    def __init__(self, procs, tenant, nkeys, value_size, weights, zipf=0.99, seed=1,
                 batch=32, sets_only=False):
        super().__init__(daemon=True)
        self.procs = procs
        self.tenant = tenant.encode()
        self.nkeys = nkeys
        self.value = b"v" * value_size
        self.batch = batch
        self.sets_only = sets_only
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.set_weights(weights)
        # Zipf over ranks; rank r is key perm[r], so hot keys are spread
        # over the processes as all keys are.
        self.perm = list(range(nkeys))
        self.rng.shuffle(self.perm)
        self.cum = None
        if zipf > 0:
            acc, cum = 0.0, []
            for r in range(1, nkeys + 1):
                acc += 1.0 / (r ** zipf)
                cum.append(acc)
            self.cum = [c / acc for c in cum]
        self.ops = 0
        self.errors = 0
        self._halt = threading.Event()
        self.conns = {}

    def set_weights(self, weights):
        with self.lock:
            self.weights = list(weights)

    def _owner(self, key):
        # A key's place among the processes: a fixed point in [0, 1) against
        # the cumulative weights of the live ones.
        with self.lock:
            w = [(wt if not p.dead and not p.stopped else 0.0)
                 for p, wt in zip(self.procs, self.weights)]
        tot = sum(w)
        if tot <= 0:
            return None
        x = ((key * 2654435761) % 4294967296) / 4294967296.0 * tot
        for i, wt in enumerate(w):
            if x < wt:
                return i
            x -= wt
        return len(w) - 1

    def _key(self):
        if self.cum is None:
            return self.rng.randrange(self.nkeys)
        import bisect
        return self.perm[bisect.bisect_left(self.cum, self.rng.random())]

    def run(self):
        while not self._halt.is_set():
            by = {}
            for _ in range(self.batch):
                k = self._key()
                i = self._owner(k)
                if i is not None:
                    by.setdefault(i, []).append(self.tenant + b":k%d" % k)
            if not by:
                time.sleep(0.01)
                continue
            for i, keys in by.items():
                self._read(self.procs[i], list(dict.fromkeys(keys)))

    def _read(self, p, keys):
        """Cache-aside reads of @keys on @p, 64 at a time: a miss is set."""
        try:
            c = self.conns.get(p.name)
            if c is None:
                c = self.conns[p.name] = Conn(p.port, timeout=5)
            for j in range(0, len(keys), 64):
                part = keys[j:j + 64]
                # One multiget per part (a comprehension would repeat it
                # per key, counting every hit and miss many times over).
                got = {} if self.sets_only else c.multiget(part)
                miss = [k for k in part if k not in got]
                if miss:
                    c.set_many(miss, self.value)
                self.ops += len(part)
        except (OSError, ConnectionError, ValueError):
            self.errors += 1
            old = self.conns.pop(p.name, None)
            if old:
                old.close()
            time.sleep(0.01)

    def stop(self):
        self._halt.set()
        self.join()


class ReuseLoad(Load):
    """Issue Demand's workload: each key is read again every r seconds, r
    drawn uniformly in [reuse_min, reuse_max] (first read at a random
    phase), cache-aside as Load (a miss is set at once), each key on one
    process by weight.  Reads are due on a clock, not as fast as possible,
    so the reuse intervals hold whatever the machine's speed (a late tick
    reads everything due)."""

    def __init__(self, procs, tenant, nkeys, value_size, weights, seed=1, reuse_min=1.0,
                 reuse_max=30.0, tick=0.05):
        super().__init__(procs, tenant, nkeys, value_size, weights, zipf=0, seed=seed)
        self.tick = tick
        now = time.monotonic()
        self.every = [self.rng.uniform(reuse_min, reuse_max) for _ in range(nkeys)]
        self.due = [(now + self.rng.uniform(0, r), k) for k, r in enumerate(self.every)]
        heapq.heapify(self.due)
        self.late = 0.0  # the longest a read was late, s

    def run(self):
        while not self._halt.is_set():
            now = time.monotonic()
            by = {}
            while self.due and self.due[0][0] <= now:
                at, k = heapq.heappop(self.due)
                self.late = max(self.late, now - at)
                heapq.heappush(self.due, (at + self.every[k], k))
                i = self._owner(k)
                if i is not None:
                    by.setdefault(i, []).append(self.tenant + b":k%d" % k)
            for i, keys in by.items():
                self._read(self.procs[i], keys)
            self._halt.wait(max(0.0, self.tick - (time.monotonic() - now)))


def softlimitctl(ctl, store, *args, check=True):
    r = subprocess.run([ctl, "--store", store] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    if check and r.returncode != 0:
        raise Fail("softlimitctl %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def store_remove(ctl, store):
    """Removes a store the test made (softlimitctl store remove)."""
    softlimitctl(ctl, store, "store", "remove", check=False)


def teardown(load, sampler, procs, ctl=None, store=None):
    """Whatever a test or benchmark started, stopped, killed and removed
    (the store too, when named)."""
    if load:
        load.stop()
    if sampler and sampler.is_alive():
        sampler.stop()
    for p in procs:
        p.cleanup()
    if store:
        store_remove(ctl, store)
