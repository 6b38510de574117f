#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scale.py NODE_BINARY [--quick] [--only NxB] [options] - issue Scale's
benchmark (run by bench_scale.sh, which says what it measures).

One JSON line per configuration on stdout; progress on stderr.  Options:
  --protocol coordinated|decentralized  (coordinated, the default: the URL
                     ends in ?coordinated)
  --period MS (250)  --ttl MS (10000)  --per-process P (100)
  --ramp MS (0)      participant I starts I * MS / N after the first: a
                     fleet rolled out over MS, not started in one second
  --moved K (1)      budgets whose demand moves (b0..bK-1)
  --measure S        steady-state interval (20; --quick 10)
  --timeout S        convergence deadline after the move (120; --quick 60)
  --join-timeout S   registration deadline (300; --quick 180)
  --settle-timeout S deadline of the joins' convergence (60; --quick 45)
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from scale_store import Gateway, Mirror, count_budget, maxmin, within  # noqa: E402

UNIT = 1 << 20          # an equal share: each budget's max is N x UNIT
TICK_S = 0.1            # the store is read every 100 ms
FULL = [(10, 1), (30, 1), (100, 1), (10, 10), (100, 10), (1000, 1), (100, 100), (1000, 10),
        (1000, 100)]
QUICK = [(10, 1), (100, 10), (1000, 100)]


def log(msg):
    print("bench_scale: %s" % msg, file=sys.stderr, flush=True)


class Nodes:
    """The bench_scale_node processes of one configuration, and the last
    status line of each (what its leases say about themselves)."""

    def __init__(self, binary, url, n, budgets, args, per):
        self.procs, self.status = [], []
        for first in range(0, n, per):
            count = min(per, n - first)
            cmd = [binary, url, "--first", str(first), "--count", str(count), "--total", str(n),
                   "--budgets", str(budgets), "--unit", str(UNIT)] + args
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
            self.procs.append(p)
            self.status.append({})
            threading.Thread(target=self._read, args=(len(self.procs) - 1,), daemon=True).start()

    def _read(self, i):
        for line in self.procs[i].stdout:
            try:
                self.status[i] = json.loads(line)
            except ValueError:
                pass

    def total(self, field):
        return sum(s.get(field, 0) for s in self.status)

    def dead(self):
        return [p.pid for p in self.procs if p.poll() is not None]

    def signal(self, sig):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(sig)

    def stop(self, deadline_s=30.0):
        self.signal(signal.SIGTERM)
        end = time.monotonic() + deadline_s
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class Reader:
    """The harness's reads of the store (a Mirror of it, kept by a watch):
    every tick, the moved budgets (for convergence and over-budget) and one
    more budget in rotation through all of them (over-budget only)."""

    def __init__(self, mirror, budgets, moved):
        self.mirror = mirror
        self.budgets, self.moved = budgets, moved
        self.rot = 0
        self.reads = 0
        self.over = 0
        self.errors = 0
        self.strays = 0
        self.version_low = 0
        self.ticks = 0
        self.tick_s = 0.0

    def read(self, b):
        try:
            kvs = self.mirror.budget_kvs("b%d" % b)
        except OSError:
            self.errors += 1
            return None
        bud = count_budget(kvs)
        self.reads += 1
        self.strays = max(self.strays, bud.strays)
        if bud.version_low:
            self.version_low += 1
            log("b%d counted %d > its version's bound %d" % (b, bud.counted,
                                                             bud.version_counted))
        if bud.over:
            self.over += 1
            log("over budget: b%d counted %d > max %d" % (b, bud.counted, bud.max))
        return bud

    def tick(self, targets):
        """One round of reads; True when every moved budget is within 10%
        of @targets for every participant."""
        ok = True
        for b in range(self.moved):
            bud = self.read(b)
            ok = ok and bud is not None and within(bud.shares, targets[b])
        if self.budgets > self.moved:
            self.read(self.moved + self.rot % (self.budgets - self.moved))
            self.rot += 1
        return ok

    def until(self, targets, deadline_s, what):
        t0 = time.monotonic()
        last = t0
        while time.monotonic() - t0 < deadline_s:
            start = time.monotonic()
            done = self.tick(targets)
            self.ticks += 1
            self.tick_s += time.monotonic() - start
            if done:
                return time.monotonic() - t0
            if start - last >= 5:
                log("%s: %.0f s, not yet" % (what, start - t0))
                last = start
            time.sleep(max(0.0, TICK_S - (time.monotonic() - start)))
        return None


def demands(n, moved):
    return {"p%d" % i: (3 * UNIT if i % 2 == 0 else UNIT // 3) if moved else UNIT
            for i in range(n)}


def run_config(node, eps, gw, n, budgets, o):
    t_cfg = time.monotonic()
    prefix = "scale-%dx%d-%d" % (n, budgets, int(time.time()))
    url = "etcd://%s/%s" % (eps, prefix)
    if o["protocol"] == "coordinated":
        url += "?coordinated"
    moved = min(o["moved"], budgets)
    r = subprocess.run([node, url, "--set-budgets", str(budgets), "--total", str(n),
                        "--unit", str(UNIT)])
    if r.returncode:
        raise RuntimeError("setting the budgets failed (%d)" % r.returncode)
    row = {"bench": "fleet_scale", "store": "etcd", "protocol": o["protocol"],
           "participants": n, "budgets": budgets, "processes": -(-n // o["per"]),
           "period_ms": o["period"], "ttl_ms": o["ttl"], "ramp_ms": o["ramp"],
           "moved_budgets": moved}
    args = ["--moved", str(moved), "--period", str(o["period"]), "--ttl", str(o["ttl"]),
            "--ramp", str(o["ramp"])]
    mirror = Mirror(gw, prefix)
    reader = Reader(mirror, budgets, moved)
    own0, msg0 = gw.requests + mirror.requests, gw.messages_received()
    t0 = time.monotonic()
    nodes = Nodes(node, url, n, budgets, args, o["per"])
    try:
        # Registration: every lease has left JOINING (the processes say so).
        last = 0
        while nodes.total("registered") < n * budgets:
            el = time.monotonic() - t0
            if nodes.dead():
                raise RuntimeError("bench_scale_node exited: pids %s" % nodes.dead())
            if el > o["join_timeout"]:
                break
            if el - last >= 2:
                log("%dx%d: registered %d of %d leases (%.0f s)" % (
                    n, budgets, nodes.total("registered"), n * budgets, el))
                last = el
            time.sleep(0.2)
        row["registered"] = nodes.total("registered")
        row["joins_s"] = round(time.monotonic() - t0, 2) \
            if row["registered"] == n * budgets else None
        # The joins' shares: every participant at its equal share.
        eq = [maxmin(n * UNIT, demands(n, False))] * moved
        settle = reader.until(eq, o["settle_timeout"], "%dx%d: joins converging" % (n, budgets))
        row["initial_convergence_s"] = round(time.monotonic() - t0, 2) \
            if settle is not None else None
        msg1 = gw.messages_received()
        join_s = time.monotonic() - t0
        row["joins_requests_per_participant_s"] = round(
            (msg1 - msg0 - (gw.requests + mirror.requests - own0)) / n / join_s, 2)
        # The steady state, without reads of ours.
        log("%dx%d: steady state, %d s" % (n, budgets, o["measure"]))
        sent = "grpc_server_msg_sent_total"
        own1, m0, s0 = gw.requests + mirror.requests, gw.messages_received(), time.monotonic()
        t0_sent = gw.metric(sent)
        time.sleep(o["measure"])
        m1, s1 = gw.messages_received(), time.monotonic()
        rate = (m1 - m0 - (gw.requests + mirror.requests - own1)) / (s1 - s0)
        row["store_requests_per_s"] = round(rate, 1)
        row["requests_per_participant_s"] = round(rate / n, 3)
        # What etcd sends back: an answer per request, and every event on
        # a watch stream (a watch costs one request however much it carries).
        row["store_messages_sent_per_s"] = round((gw.metric(sent) - t0_sent) / (s1 - s0), 1)
        # The move: half the participants want 3 U, half U / 3.
        log("%dx%d: demand moved" % (n, budgets))
        nodes.signal(signal.SIGUSR1)
        targets = [maxmin(n * UNIT, demands(n, True))] * moved
        conv = reader.until(targets, o["timeout"], "%dx%d: converging" % (n, budgets))
        row["convergence_s"] = round(conv, 2) if conv is not None else None
        if conv is None:
            row["timeout"] = True
            row["timeout_s"] = o["timeout"]
        row["over_budget_samples"] = reader.over
        row["budget_reads"] = reader.reads
        row["read_errors"] = reader.errors
        # 100 ms, unless one round of reads takes longer (a loaded etcd).
        row["read_round_ms"] = round(1000 * max(TICK_S, reader.tick_s / max(1, reader.ticks)))
        row["watch_events"] = mirror.events
        if mirror.restarts:
            row["watch_restarts"] = mirror.restarts
        if reader.strays:
            row["strays"] = reader.strays
        if reader.version_low:
            row["version_below_counted_samples"] = reader.version_low
        row["store_errors"] = nodes.total("store_errors")
        row["fences"] = nodes.total("fences")
    finally:
        nodes.stop()
        mirror.close()
        try:
            gw.delete_prefix(prefix)
        except OSError:
            pass
    row["config_s"] = round(time.monotonic() - t_cfg, 1)
    return row


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    node = args.pop(0)
    quick = "--quick" in args
    o = {"protocol": "coordinated", "period": 250, "ttl": 10000, "ramp": 0, "per": 100, "moved": 1,
         "measure": 10 if quick else 20, "timeout": 60 if quick else 120,
         "join_timeout": 180 if quick else 300, "settle_timeout": 45 if quick else 60}
    names = {"--protocol": "protocol", "--period": "period", "--ttl": "ttl", "--ramp": "ramp",
             "--per-process": "per", "--moved": "moved", "--measure": "measure",
             "--timeout": "timeout", "--join-timeout": "join_timeout",
             "--settle-timeout": "settle_timeout"}
    configs = QUICK if quick else FULL
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--quick":
            i += 1
            continue
        if i + 1 >= len(args):
            print("bench_scale: %s needs a value" % a, file=sys.stderr)
            return 2
        v = args[i + 1]
        if a == "--only":
            try:
                configs = [tuple(int(x) for x in v.lower().split("x"))]
            except ValueError:
                configs = []
            if len(configs) != 1 or len(configs[0]) != 2 or min(configs[0]) < 1:
                print("bench_scale: --only takes NxB (e.g. 100x10)", file=sys.stderr)
                return 2
        elif a == "--protocol" and v in ("decentralized", "coordinated"):
            o["protocol"] = v
        elif a in names and a != "--protocol" and v.isdigit() and int(v) > 0:
            o[names[a]] = int(v)
        else:
            print("bench_scale: bad option %s %s" % (a, v), file=sys.stderr)
            return 2
        i += 2
    eps = os.environ.get("SL_ETCD_ENDPOINTS")
    cluster = None
    if not eps:
        import etcd_cluster
        if not etcd_cluster.etcd_binaries():
            log("etcd is not installed (apt-get install etcd-server etcd-client)")
            return 77
        log("starting a 3-member etcd on loopback")
        cluster = etcd_cluster.EtcdCluster(3)
        eps = cluster.endpoints()
    gw = Gateway(eps.split(","))
    try:
        for n, b in configs:
            log("%dx%d (%s): %d process(es)" % (n, b, o["protocol"], -(-n // o["per"])))
            try:
                row = run_config(node, eps, gw, n, b, o)
            except (OSError, RuntimeError) as e:
                # A member gone (killed, crashed), a node that exited: the
                # configuration has no figures, the next ones may.
                log("%dx%d failed: %s" % (n, b, e))
                row = {"bench": "fleet_scale", "store": "etcd", "protocol": o["protocol"],
                       "participants": n, "budgets": b, "error": str(e)}
            print(json.dumps(row, separators=(",", ":")), flush=True)
            log("%dx%d done in %.0f s" % (n, b, row.get("config_s", 0)))
    finally:
        if cluster:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
