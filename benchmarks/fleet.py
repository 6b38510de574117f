#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fleet.py SLCACHE SOFTLIMITCTL [--quick]
[--workload twitter|slow-reuse|outage] - issues Fleet's and Demand's benchmark
(run by bench_fleet.sh, which says what it measures; every workload unless
--workload names one).
One JSON line per tenant and variant on stdout;
progress on stderr; the shares over time in $SL_FLEET_SHARES (CSV)."""
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import etcd_cluster  # noqa: E402
from slcache_lease_lib import (Fail, Load, Sampler, Slcache, softlimitctl,  # noqa: E402
                               teardown)
from reuse_bench import (REUSE_BUDGET, fences, hits, kill_largest, pop_workload,  # noqa: E402
                         run_reuse, share, start_reuse, usage_of)

NODES = 3
BUDGET = 3 << 20    # per tenant, over the fleet
WS = 3.0            # working set against the budget
PERIOD_MS = 200
TTL_MS = 3000
IDLE_MS = 1000
# Twitter-shaped tenants (benchmarks/data/twitter-2020Mar-stats.md): the
# cluster's mean value size and Zipf alpha; how the client spreads its keys
# over the three nodes before and after the skew changes halfway.
TENANTS = [
    {"name": "c4", "cluster": 4, "skewed": True, "weights": [0.8, 0.15, 0.05]},
    {"name": "c7", "cluster": 7, "skewed": True, "weights": [0.05, 0.15, 0.8]},
    {"name": "c29", "cluster": 29, "skewed": False, "weights": [1 / 3.0, 1 / 3.0, 1 / 3.0]},
]


def log(msg):
    print("fleet: " + msg, file=sys.stderr, flush=True)


def twitter_rows():
    path = os.path.join(HERE, "data", "twitter-2020Mar-stats.md")
    with open(path) as f:
        hdr = [x.strip() for x in f.readline().strip().strip("|").split("|")]
        rows = {}
        for line in f:
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            if c and c[0].startswith("cluster"):
                rows[int(c[0][7:])] = dict(zip(hdr, c))
    return rows


def tenant_shape(rows, t):
    r = rows[t["cluster"]]
    value = int(min(8000, max(100, float(r["value size"]))))
    alpha = float(r["Zipf alpha"])
    return value, alpha


class ShareLog(threading.Thread):
    """Every half second, each node's share and usage of each tenant."""

    def __init__(self, variant, procs, out):
        super().__init__(daemon=True)
        self.variant, self.procs, self.out = variant, procs, out
        self.halt = threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while not self.halt.wait(0.5):
            t = time.monotonic() - self.t0
            for i, p in enumerate(self.procs):
                if p.dead:
                    continue
                try:
                    for tn in TENANTS:
                        st = p.tenant(tn["name"])
                        self.out.append((self.variant, round(t, 2), tn["name"], i,
                                         int(st.get("lease", st.get("max", 0))),
                                         int(st.get("usage", 0))))
                except (OSError, ConnectionError, ValueError):
                    pass


def run(variant, binary, ctl, url, rows, warm_s, phase_s, shares):
    args = ["-m", "64", "-t", "2"]
    if variant == "lease":
        for t in TENANTS:
            softlimitctl(ctl, url, "budget", "set", t["name"], "max=%d" % BUDGET)
        args += ["--lease-store", url, "--lease-period", str(PERIOD_MS), "--lease-ttl",
                 str(TTL_MS), "--lease-idle", str(IDLE_MS)]
    else:
        for t in TENANTS:
            args += ["--tenant", "%s:max=%d" % (t["name"], BUDGET // NODES)]
    procs, loads, samplers, sharelog = [], [], [], None
    res = {}
    try:
        for i in range(NODES):
            procs.append(Slcache(binary, args, "%s%d" % (variant, i)))
        for t in TENANTS:
            value, alpha = tenant_shape(rows, t)
            s = Sampler(procs, t["name"], BUDGET)
            s.start()
            samplers.append(s)
            ld = Load(procs, t["name"], nkeys=int(WS * BUDGET / (value + 100)), value_size=value,
                      weights=t["weights"], zipf=alpha, seed=t["cluster"])
            ld.start()
            loads.append(ld)
            res[t["name"]] = {"bench": "fleet", "variant": variant, "tenant": t["name"],
                              "skewed": t["skewed"], "cluster": t["cluster"],
                              "value_bytes": value, "zipf": alpha, "budget_bytes": BUDGET}
        sharelog = ShareLog(variant, procs, shares)
        sharelog.start()
        time.sleep(warm_s)
        h0 = {t["name"]: hits(procs, t["name"]) for t in TENANTS}
        time.sleep(phase_s)
        # The skew changes halfway: each tenant's weights reversed.
        for t, ld in zip(TENANTS, loads):
            ld.set_weights(list(reversed(t["weights"])))
        t0 = time.monotonic()
        hot = {t["name"]: max(range(NODES), key=lambda i: t["weights"][::-1][i]) for t in TENANTS}
        conv = {t["name"]: None for t in TENANTS}
        while time.monotonic() - t0 < phase_s:
            for t in TENANTS:
                n = t["name"]
                if t["skewed"] and conv[n] is None and share(procs[hot[n]], n) > 0.45 * BUDGET:
                    conv[n] = round(time.monotonic() - t0, 2)
            time.sleep(0.05)
        h1 = {t["name"]: hits(procs, t["name"]) for t in TENANTS}
        for t in TENANTS:
            n = t["name"]
            dh = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(h0[n], h1[n])]
            th, tm = sum(x[0] for x in dh), sum(x[1] for x in dh)
            res[n]["hit_ratio"] = round(th / max(1, th + tm), 4)
            res[n]["requests"] = th + tm
            res[n]["convergence_s"] = conv[n]
            res[n]["shares_bytes"] = [share(p, n) for p in procs]
            # Before the kill below: a run with no fault fences nothing.
            res[n]["fences"] = fences(procs, n)
        # kill -9 the node that holds most of the first tenant: how soon the
        # others have 80% of its budget in use (its keys go to them).
        first = TENANTS[0]["name"]
        victim = max(range(NODES), key=lambda i: share(procs[i], first))
        with samplers[0].lock, samplers[1].lock, samplers[2].lock:
            procs[victim].kill9()
        t0 = time.monotonic()
        reuse = None
        while time.monotonic() - t0 < 20:
            used = sum(int(p.tenant(first).get("usage", 0)) for p in procs if not p.dead)
            if used >= 0.8 * BUDGET:
                reuse = round(time.monotonic() - t0, 2)
                break
            time.sleep(0.02)
        res[first]["kill_reuse_s"] = reuse
        res[first]["kill_goal_s"] = (TTL_MS + PERIOD_MS) / 1000.0
        for ld in loads:
            ld.stop()
        loads = []
        for t, s in zip(TENANTS, samplers):
            s.stop()
            res[t["name"]]["max_over_budget_bytes"] = s.max_over_bytes
            res[t["name"]]["over_budget_samples"] = s.over
            res[t["name"]]["samples"] = s.samples
        for t in TENANTS:
            r = res[t["name"]]
            log("%s %s: hit ratio %.3f, shares %s, convergence %s s, over budget %d B" % (
                variant, t["name"], r["hit_ratio"], r["shares_bytes"], r["convergence_s"],
                r["max_over_budget_bytes"]))
        return [res[t["name"]] for t in TENANTS]
    finally:
        if sharelog:
            sharelog.halt.set()
        for ld in loads:
            ld.stop()
        for s in samplers:
            if s.is_alive():
                s.stop()
        for p in procs:
            p.cleanup()


def run_outage(binary, ctl, cl, warm_s, outages):
    """Leases with slcache's defaults (period, ttl) and the slow-reuse load
    at 70/25/5: every etcd member stopped for each of @outages seconds; each
    node's usage kept through it, the fences; then a kill -9."""
    tenant = "A"
    url = cl.url("fleet-outage")
    softlimitctl(ctl, url, "budget", "set", tenant, "max=%d" % REUSE_BUDGET)
    procs, load, sampler, rows = [], None, None, []
    try:
        sampler, load = start_reuse(binary, ["-m", "64", "-t", "2", "--lease-store", url],
                                    "outage", procs, 4)
        time.sleep(warm_s)
        for secs in outages:
            before = [usage_of(p, tenant) for p in procs]
            f0 = fences(procs, tenant)
            low = list(before)
            # kill -9, as etcd_faults' all-down: a SIGTERM'd member takes
            # seconds to shut down, which would lengthen the outage.
            t0 = time.monotonic()
            for i in range(cl.n):
                cl.kill(i)
            while time.monotonic() - t0 < secs:
                low = [min(a, usage_of(p, tenant)) for a, p in zip(low, procs)]
                time.sleep(0.1)
            cl.start_all()
            cl.wait_healthy()
            back = round(time.monotonic() - t0, 2)
            t1 = time.monotonic()
            while time.monotonic() - t1 < 3:
                low = [min(a, usage_of(p, tenant)) for a, p in zip(low, procs)]
                time.sleep(0.1)
            row = {"bench": "fleet", "workload": "outage", "variant": "lease", "tenant": tenant,
                   "outage_s": secs, "etcd_back_s": back, "budget_bytes": REUSE_BUDGET,
                   "lease_args": "defaults", "usage_before_bytes": before,
                   "usage_low_bytes": low,
                   "kept": [round(lo / max(1, b), 3) for lo, b in zip(low, before)],
                   "fences": fences(procs, tenant) - f0}
            log("outage %d s (etcd back after %.1f s): kept %s, fences %d" % (
                secs, back, row["kept"], row["fences"]))
            rows.append(row)
            time.sleep(5)
        k = kill_largest(procs, sampler, tenant, REUSE_BUDGET, 10000, 200)
        rows[-1].update(k)
        log("outage run: kill -9: leases hold 80%% after %s s, in use after %s s" % (
            k["kill_leases_s"], k["kill_reuse_s"]))
        load.stop()
        load = None
        sampler.stop()
        for r in rows:
            r["over_budget_runs"] = sampler.over_runs
        return rows
    finally:
        teardown(load, sampler, procs)


def main():
    quick = "--quick" in sys.argv
    args = sys.argv[1:]
    workloads = pop_workload(args, ("twitter", "slow-reuse", "outage"))
    if workloads is None:
        print(__doc__, file=sys.stderr)
        return 2
    argv = [a for a in args if not a.startswith("--")]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if not etcd_cluster.etcd_binaries():
        log("etcd is not installed (apt-get install etcd-server etcd-client)")
        return 77
    warm, phase = (10, 20) if quick else (20, 60)
    rows = twitter_rows()
    shares = []
    lines = []
    try:
        with etcd_cluster.EtcdCluster(3) as cl:
            for v in ("static", "lease") if "twitter" in workloads else ():
                lines += run(v, argv[0], argv[1], cl.url("fleet-" + v), rows, warm, phase,
                             shares)
            # Every key is read once in 30 s: the warm-up sees them all.
            for v in ("static", "lease") if "slow-reuse" in workloads else ():
                lines.append(run_reuse("fleet", v, argv[0], argv[1], cl.url("fleet-reuse-" + v),
                                       35, 30 if quick else 60, log))
            if "outage" in workloads:
                lines += run_outage(argv[0], argv[1], cl, 35, (5, 10))
    except Fail as e:
        log("FAIL: %s" % e)
        return 1
    for r in lines:
        print(json.dumps(r, separators=(",", ":")))
    path = os.environ.get("SL_FLEET_SHARES")
    if path:
        with open(path, "w") as f:
            f.write("variant,t_s,tenant,node,share_bytes,usage_bytes\n")
            for row in shares:
                f.write(",".join(str(x) for x in row) + "\n")
    by = {(r.get("variant"), r.get("tenant")): r for r in lines
          if r.get("bench") == "fleet" and "workload" not in r}
    reuse = {r["variant"]: r for r in lines if r.get("workload") == "slow-reuse"}
    if len(reuse) == 2:
        for k in ("hit_ratio_before", "hit_ratio_after_30s", "hit_ratio_after"):
            log("slow-reuse %s: leases %.3f vs static %.3f: %+.1f points" % (
                k, reuse["lease"][k], reuse["static"][k],
                100 * (reuse["lease"][k] - reuse["static"][k])))
    for t in TENANTS if by else ():
        s, le = by[("static", t["name"])], by[("lease", t["name"])]
        log("%s (skewed %s): leases %.3f vs static %.3f: %+.1f points" % (
            t["name"], t["skewed"], le["hit_ratio"], s["hit_ratio"],
            100 * (le["hit_ratio"] - s["hit_ratio"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
