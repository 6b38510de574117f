#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The fleet's fault tests (issue Fleet): nodes sharing one budget through a
real 3-member etcd cluster on loopback, under one fault each.

    etcd_faults.py --node PATH/lease_node SCENARIO

SCENARIO: node-kill (kill -9 a node), node-stall (SIGSTOP a node for three
TTLs, then SIGCONT), member-kill (kill -9 the etcd leader), all-down (every
member down for 30 s, then back), wipe (every member's data wiped, the
cluster restarted empty).  With --coordinated the nodes run the coordinated
protocol (etcd://...?coordinated), and two more scenarios apply:
coord-kill (kill -9 the node that coordinates the budget) and coord-stall
(SIGSTOP it for three TTLs, then SIGCONT: another is elected meanwhile).

The invariant, sampled every 10 ms one node after another: the usages of
the nodes whose leases run plus the floors of the others sum to at most the
budget's max.  A node that is stopped or dead counts its last published
share (its usage can be no more) until its own view of its lease ends, then
its floor; a stalled node counts its live usage again once it has fenced or
renewed after waking.  A node's status block mirrors its lease at every
change (tests/lease_node.c), and a stopped node is read only once every one
of its threads has stopped, so the block is the node's state at the stop.
One sample over the budget is tolerated (the samples are not one instant),
two in a row fail the test.  Every wait is for an event, with a generous
deadline; no rate or time window is asserted.  Exit 77 (skip) when etcd is
not installed.
"""
import argparse
import base64
import json
import mmap
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import etcd_cluster  # noqa: E402

BUDGET = "tenant"
MAX = 30000
MIN = 6000
NODES = 3
PERIOD_MS = 200
TTL_MS = 2000
MARGIN_MS = 1000
DEADLINE_S = 60.0
SAMPLE_S = 0.010

# The status block of tests/lease_node.c.
(ST_SEQ, ST_PID, ST_USAGE, ST_SHARE, ST_FLOOR, ST_STATE, ST_EXPIRES, ST_RESETS, ST_FENCES,
 ST_RENEWALS, ST_ERRORS, ST_GRANTS, ST_SHRINKS, ST_MONO_NS, ST_DEMAND, ST_MAX) = range(16)
HELD, FENCED = 1, 2
ST_BYTES = 3 * 128  # the version count, then two slots of 16 words


def log(msg):
    print("[%8.3f] %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


class Node:
    def __init__(self, idx, args, url, workdir, demand):
        self.idx = idx
        self.status_path = os.path.join(workdir, "n%d.status" % idx)
        self.err_path = os.path.join(workdir, "n%d.err" % idx)
        self.map = None
        self.last = None
        self.lock = threading.Lock()
        self.mode = "live"   # live | frozen (stopped or dead) | waking
        self.frozen = None
        self.own_end = 0.0
        out = open(os.path.join(workdir, "n%d.out" % idx), "wb")
        err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(
            [args.node, "--store", url, "--budget", BUDGET, "--status", self.status_path,
             "--demand", str(demand), "--period", str(PERIOD_MS), "--ttl", str(TTL_MS),
             "--margin", str(MARGIN_MS), "--node", "n%d" % idx],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        out.close()
        err.close()

    def read(self):
        """The node's last consistent status (None before its first)."""
        if self.map is None:
            try:
                with open(self.status_path, "rb") as f:
                    if os.fstat(f.fileno()).st_size < ST_BYTES:
                        return None
                    self.map = mmap.mmap(f.fileno(), ST_BYTES, prot=mmap.PROT_READ)
            except FileNotFoundError:
                return None
        for _ in range(100):
            # Version n is complete in slot n % 2 while the count stays n.
            s1 = struct.unpack_from("<Q", self.map, 0)[0]
            v = struct.unpack_from("<16Q", self.map, 128 * (1 + s1 % 2))
            s2 = struct.unpack_from("<Q", self.map, 0)[0]
            if s1 == s2 and s1 > 0 and v[ST_SEQ] == s1:
                self.last = v
                return v
        return self.last

    def counted(self, now):
        with self.lock:
            mode = self.mode
            v = self.read() if mode != "frozen" else None
            if mode == "waking" and v and (v[ST_FENCES] > self.frozen[ST_FENCES] or
                                           v[ST_RENEWALS] > self.frozen[ST_RENEWALS]):
                # Its first step after waking: the floor first if its own
                # view ended, or a renewal; from now on its usage is its own.
                self.mode = mode = "live"
        if mode == "live":
            return v[ST_USAGE] if v else 0
        return self.frozen[ST_SHARE] if now < self.own_end else self.frozen[ST_FLOOR]

    def stopped(self):
        """Every thread of the node is stopped (state T in /proc)."""
        task = "/proc/%d/task" % self.proc.pid
        try:
            for tid in os.listdir(task):
                with open(os.path.join(task, tid, "stat")) as f:
                    # The state follows the command name's closing parenthesis.
                    if f.read().rsplit(")", 1)[1].split()[0] not in "tT":
                        return False
        except FileNotFoundError:
            return False
        return True

    def freeze(self, sig):
        """Stop or kill the node; from now on it counts by its last status,
        read once the signal has taken hold of every thread."""
        with self.lock:
            self.proc.send_signal(sig)
            if sig == signal.SIGKILL:
                self.proc.wait()
            else:
                end = time.monotonic() + DEADLINE_S
                while not self.stopped():
                    if time.monotonic() > end:
                        raise AssertionError("node %d did not stop" % self.idx)
                    time.sleep(0.001)
            v = self.read()
            self.frozen = v
            # Its own view of its lease ends expires_ms after that status.
            exp = struct.unpack("<q", struct.pack("<Q", v[ST_EXPIRES]))[0]
            self.own_end = v[ST_MONO_NS] / 1e9 + max(exp, 0) / 1e3
            if v[ST_STATE] != HELD:
                self.own_end = 0.0
            self.mode = "frozen"

    def wake(self):
        with self.lock:
            self.proc.send_signal(signal.SIGCONT)
            self.mode = "waking"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def stderr_text(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode(errors="replace")


class Checker(threading.Thread):
    """Sum the nodes' counted usage every 10 ms, one after another."""

    def __init__(self, nodes):
        super().__init__(daemon=True)
        self.nodes = nodes
        self.stop_ev = threading.Event()
        self.samples = 0
        self.over = 0
        self.in_a_row = 0
        self.violations = []
        self.max_sum = 0

    def run(self):
        while not self.stop_ev.is_set():
            now = time.monotonic()
            parts = [n.counted(now) for n in list(self.nodes)]
            total = sum(parts)
            self.samples += 1
            self.max_sum = max(self.max_sum, total)
            if total > MAX:
                self.over += 1
                self.in_a_row += 1
                if self.in_a_row >= 2:
                    self.violations.append((now - T0, total, parts))
            else:
                self.in_a_row = 0
            self.stop_ev.wait(SAMPLE_S)


def wait_for(what, pred, deadline_s=DEADLINE_S):
    end = time.monotonic() + deadline_s
    t0 = time.monotonic()
    while time.monotonic() < end:
        if pred():
            log("%s (after %.2f s)" % (what, time.monotonic() - t0))
            return time.monotonic() - t0
        time.sleep(0.02)
    raise AssertionError("timed out after %.0f s waiting for: %s" % (deadline_s, what))


def stat(n, field):
    v = n.read()
    return v[field] if v else 0


def shares_at_one_instant(nodes):
    """The nodes' shares summed at one instant: two passes over their
    statuses that find every version unchanged overlap in time."""
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        first = [n.read() for n in nodes]
        second = [n.read() for n in nodes]
        if all(a and b and a[ST_SEQ] == b[ST_SEQ] for a, b in zip(first, second)):
            return sum(v[ST_SHARE] for v in second)
    raise AssertionError("the nodes' statuses never held still for two passes")


def set_budget(args, url):
    subprocess.run([args.node, "--store", url, "--set-budget", BUDGET, "--max", str(MAX),
                    "--min", str(MIN), "--soft", str(MAX // 2)], check=True, timeout=120)


def coordinator(cl, nodes):
    """The node whose session holds the budget's coord key (its id carries
    the pid), or None while no one does."""
    key = "faults/coord/%s" % BUDGET
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    for i in range(cl.n):
        if not cl.alive(i):
            continue
        try:
            req = urllib.request.Request("http://%s/v3/kv/range" % cl.endpoint(i), data=body)
            with urllib.request.urlopen(req, timeout=2) as r:
                kvs = json.load(r).get("kvs", [])
        except OSError:
            continue
        if not kvs:
            return None
        node = json.loads(base64.b64decode(kvs[0]["value"]))["node"]
        pid = int(node.split(":")[1])
        return next((n for n in nodes if n.proc.pid == pid), None)
    return None


def all_held(nodes):
    return all(stat(n, ST_STATE) == HELD for n in nodes)


def renewed(nodes, base, more=5):
    return all(stat(n, ST_RENEWALS) >= base[i] + more for i, n in enumerate(nodes))


def run(args):
    work = tempfile.mkdtemp(prefix="sl-faults-")
    try:
        return run_in(args, work)
    finally:
        if not os.environ.get("SL_ETCD_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("node logs kept in %s" % work)


def run_in(args, work):
    nodes = []
    checker = None
    figures = {}
    try:
        with etcd_cluster.EtcdCluster(3) as cl:
            url = cl.url("faults") + ("?coordinated" if args.coordinated else "")
            set_budget(args, url)
            for i in range(NODES):
                nodes.append(Node(i, args, url, work, MAX))
            checker = Checker(nodes)
            checker.start()
            wait_for("every node holds its lease", lambda: all_held(nodes))
            wait_for("the shares fill 90% of the budget",
                     lambda: sum(stat(n, ST_SHARE) for n in nodes) >= 0.9 * MAX)
            figures["converge_s"] = round(time.monotonic() - T0, 2)
            scenario(args.scenario, args, cl, url, nodes, work, figures)
            log("settling: one more TTL under the checker")
            time.sleep(TTL_MS / 1e3)
    finally:
        if checker:
            checker.stop_ev.set()
            checker.join()
        for n in nodes:
            n.stop()
    figures.update(samples=checker.samples, over_once=checker.over,
                   max_sum=checker.max_sum, budget=MAX)
    print("FIGURES %s %s" % (args.scenario, " ".join("%s=%s" % kv for kv in figures.items())))
    for n in nodes:
        text = n.stderr_text()
        for bad in ("runtime error", "AddressSanitizer", "ThreadSanitizer", "LeakSanitizer"):
            if bad in text:
                print("node %d's stderr reports a sanitizer error:\n%s" % (n.idx, text))
                return 1
    if checker.violations:
        for t, total, parts in checker.violations[:10]:
            print("OVER BUDGET twice in a row at %.3f s: sum %d > %d: %s" % (t, total, MAX, parts))
        return 1
    print("PASS %s: the sum never passed the budget twice in a row (%d samples)" %
          (args.scenario, checker.samples))
    return 0


def scenario(name, args, cl, url, nodes, work, figures):
    base = [stat(n, ST_RENEWALS) for n in nodes]
    if name == "node-kill":
        victim = nodes[0]
        floor = stat(victim, ST_FLOOR)
        log("kill -9 node 0 (share %d, floor %d)" % (stat(victim, ST_SHARE), floor))
        victim.freeze(signal.SIGKILL)
        others = nodes[1:]
        figures["reuse_s"] = round(wait_for(
            "the others use 80% of what the dead node does not hold",
            lambda: sum(stat(n, ST_USAGE) for n in others) >= 0.8 * (MAX - floor)), 2)
        log("a new node joins")
        nodes.append(Node(len(nodes), args, url, work, MAX))
        wait_for("the new node holds a lease", lambda: stat(nodes[-1], ST_STATE) == HELD)
    elif name == "node-stall":
        victim = nodes[0]
        # The case under test: a floor that stays counted.  A node's floor
        # settles a few periods after the last join (a raise is a grow, and
        # grows race), so the stall waits for every floor to be min / N
        # (coordinated: min over the least power of two at or above N).
        part = MIN // NODES
        if args.coordinated:
            part = MIN >> (NODES - 1).bit_length()
        wait_for("every node's floor is its part of min (%d)" % part,
                 lambda: all(stat(n, ST_FLOOR) == part for n in nodes))
        fences = stat(victim, ST_FENCES)
        log("SIGSTOP node 0 for three TTLs (share %d)" % stat(victim, ST_SHARE))
        victim.freeze(signal.SIGSTOP)
        floor = victim.frozen[ST_FLOOR]
        time.sleep(3 * TTL_MS / 1e3)
        others = shares_at_one_instant(nodes[1:])
        figures["floor_in_stall"] = floor
        figures["others_share_in_stall"] = others
        if others + floor > MAX:
            raise AssertionError("the others hold %d in the stall, past max %d less node 0's "
                                 "floor %d" % (others, MAX, floor))
        log("SIGCONT node 0")
        victim.wake()
        wait_for("node 0 fell to its floor on waking", lambda: stat(victim, ST_FENCES) > fences)
        wait_for("node 0 holds its lease again", lambda: stat(victim, ST_STATE) == HELD and
                 stat(victim, ST_RENEWALS) > base[0] + 2)
    elif name == "member-kill":
        # The leader: the others elect a new one, which extends every lease.
        lead = cl.leader()
        log("kill -9 etcd member e%d, the leader" % lead)
        cl.kill(lead)
        base = [stat(n, ST_RENEWALS) for n in nodes]
        wait_for("every node renews through the other members", lambda: renewed(nodes, base))
        log("restart e%d" % lead)
        cl.start(lead)
        cl.wait_healthy()
        base = [stat(n, ST_RENEWALS) for n in nodes]
        wait_for("every node renews with the member back", lambda: renewed(nodes, base) and all_held(nodes))
    elif name == "all-down":
        log("kill -9 every etcd member, for 30 s")
        down = time.monotonic()
        for i in range(cl.n):
            cl.kill(i)
        wait_for("every node fenced (at its floor)",
                 lambda: all(stat(n, ST_STATE) == FENCED and
                             stat(n, ST_MAX) <= stat(n, ST_FLOOR) for n in nodes))
        time.sleep(max(0.0, 30.0 - (time.monotonic() - down)))
        log("start every member again")
        cl.start_all()
        cl.wait_healthy()
        base = [stat(n, ST_RENEWALS) for n in nodes]
        figures["back_s"] = round(wait_for(
            "every node holds its lease again",
            lambda: all_held(nodes) and renewed(nodes, base, 2)), 2)
    elif name == "wipe":
        resets = [stat(n, ST_RESETS) for n in nodes]
        log("wipe etcd: stop, delete every member's data, start empty")
        cl.wipe()
        cl.wait_healthy()
        wait_for("every node saw the store reset (a metric)",
                 lambda: all(stat(n, ST_RESETS) > resets[i] for i, n in enumerate(nodes)))
        for n in nodes:
            if stat(n, ST_MAX) > stat(n, ST_FLOOR):
                raise AssertionError("node %d above its floor after the reset" % n.idx)
        wait_for("every node logged the reset",
                 lambda: all("store reset" in n.stderr_text() for n in nodes))
        # The operator sets it again some time later, not at once.
        time.sleep(2 * TTL_MS / 1e3)
        log("set the budget again")
        set_budget(args, url)
        base = [stat(n, ST_RENEWALS) for n in nodes]
        wait_for("every node rejoined", lambda: all_held(nodes) and renewed(nodes, base, 2))
        wait_for("the shares fill 90% of the budget again",
                 lambda: sum(stat(n, ST_SHARE) for n in nodes) >= 0.9 * MAX)
    elif name in ("coord-kill", "coord-stall"):
        wait_for("a coordinator is elected", lambda: coordinator(cl, nodes))
        victim = coordinator(cl, nodes)
        others = [n for n in nodes if n is not victim]
        floor = stat(victim, ST_FLOOR)
        if name == "coord-kill":
            log("kill -9 node %d, the coordinator (share %d)" % (victim.idx, stat(victim, ST_SHARE)))
            victim.freeze(signal.SIGKILL)
        else:
            fences = stat(victim, ST_FENCES)
            log("SIGSTOP node %d, the coordinator, for three TTLs" % victim.idx)
            victim.freeze(signal.SIGSTOP)
        figures["reelected_s"] = round(wait_for(
            "another node is elected",
            lambda: coordinator(cl, nodes) not in (None, victim)), 2)
        figures["reuse_s"] = round(wait_for(
            "the others use 80% of what the old coordinator does not hold",
            lambda: sum(stat(n, ST_USAGE) for n in others) >= 0.8 * (MAX - floor)), 2)
        if name == "coord-stall":
            time.sleep(max(0.0, 3 * TTL_MS / 1e3 - figures["reuse_s"]))
            log("SIGCONT node %d" % victim.idx)
            victim.wake()
            wait_for("the old coordinator fell to its floor on waking",
                     lambda: stat(victim, ST_FENCES) > fences)
            wait_for("it holds its lease again", lambda: stat(victim, ST_STATE) == HELD and
                     stat(victim, ST_RENEWALS) > base[victim.idx] + 2)
    else:
        raise SystemExit("unknown scenario %s" % name)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--node", required=True, help="tests/lease_node")
    p.add_argument("--coordinated", action="store_true",
                   help="the coordinated protocol (etcd://...?coordinated)")
    p.add_argument("scenario", choices=["node-kill", "node-stall", "member-kill", "all-down",
                                        "wipe", "coord-kill", "coord-stall"])
    args = p.parse_args()
    if args.scenario.startswith("coord-") and not args.coordinated:
        p.error("%s needs --coordinated" % args.scenario)
    if not etcd_cluster.etcd_binaries():
        print("SKIP: etcd is not installed (apt-get install etcd-server etcd-client)")
        return etcd_cluster.SKIP
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
