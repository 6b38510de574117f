#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lease_host.py SLCACHE SOFTLIMITCTL [--quick] [--workload zipf|slow-reuse] -
issue 25's efficiency benchmark, and issue Demand's slow-reuse workload (run
by bench_lease_host.sh, which says what they measure; both unless --workload
names one).  One JSON line per variant and workload on stdout; progress on
stderr."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from slcache_lease_lib import (Fail, Load, Sampler, Slcache, softlimitctl,  # noqa: E402
                               store_remove, teardown)
from reuse_bench import pop_workload, run_reuse, sampler_figures  # noqa: E402

TENANT = "t"
BUDGET = 4 << 20
VALUE = 4000
WS = 1.25           # the tenant's working set against the budget
ZIPF = 0.9
SKEW = [0.6, 0.3, 0.1]
PERIOD_MS = 200     # slcache's default
TTL_MS = 3000       # shorter than slcache's default (10 s): the kill is measured
IDLE_MS = 1000      # memory unread for a second goes back: the reversal's signal


def log(msg):
    print("lease_host: " + msg, file=sys.stderr, flush=True)


def hits(procs):
    out = []
    for p in procs:
        st = p.tenant(TENANT) if not p.dead else {}
        out.append((int(st.get("hits", 0)), int(st.get("misses", 0))))
    return out


def share(p):
    st = p.tenant(TENANT)
    return int(st.get("lease", st.get("max", 0)))


def usage(p):
    return int(p.tenant(TENANT).get("usage", 0))


def run(variant, binary, ctl, warm_s, measure_s):
    store = "shm:slbench-%d-%s" % (os.getpid(), variant)
    args = ["-m", "64", "-t", "2"]
    if variant == "lease":
        softlimitctl(ctl, store, "budget", "set", TENANT, "max=%d" % BUDGET)
        args += ["--lease-store", store, "--lease-period", str(PERIOD_MS), "--lease-ttl",
                 str(TTL_MS), "--lease-idle", str(IDLE_MS)]
    else:
        args += ["--tenant", "%s:max=%d" % (TENANT, BUDGET // 3)]
    procs, load, sampler = [], None, None
    res = {"bench": "lease_host", "variant": variant, "processes": 3, "budget_bytes": BUDGET,
           "value_bytes": VALUE, "working_set": WS, "zipf": ZIPF, "skew": SKEW}
    try:
        for i in range(3):
            procs.append(Slcache(binary, args, "%s%d" % (variant, i)))
        sampler = Sampler(procs, TENANT, BUDGET)
        sampler.start()
        nkeys = int(WS * BUDGET / (VALUE + 100))
        load = Load(procs, TENANT, nkeys=nkeys, value_size=VALUE, weights=SKEW, zipf=ZIPF)
        load.start()

        # 1. Hit ratio over the fleet at 60/30/10, after a warm-up.
        time.sleep(warm_s)
        h0 = hits(procs)
        time.sleep(measure_s)
        h1 = hits(procs)
        dh = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(h0, h1)]
        tot_h, tot_m = sum(x[0] for x in dh), sum(x[1] for x in dh)
        res["hit_ratio"] = round(tot_h / max(1, tot_h + tot_m), 4)
        res["hit_ratio_per_process"] = [round(x[0] / max(1, x[0] + x[1]), 4) for x in dh]
        res["shares_bytes"] = [share(p) for p in procs]
        res["requests"] = tot_h + tot_m
        log("%s: hit ratio %.3f (per process %s), shares %s" % (
            variant, res["hit_ratio"], res["hit_ratio_per_process"], res["shares_bytes"]))

        # 2. The skew reverses: how soon the newly hot process (the 10% one)
        #    holds well above a third (45%) of the budget, and what it holds
        #    3 s after.
        load.set_weights(list(reversed(SKEW)))
        t0 = time.monotonic()
        res["reverse_s"] = None
        at3 = None
        while time.monotonic() - t0 < 30:
            s = share(procs[2])
            if res["reverse_s"] is None and s > 0.45 * BUDGET:
                res["reverse_s"] = round(time.monotonic() - t0, 2)
            if at3 is None and time.monotonic() - t0 >= 3.0:
                at3 = s
            if at3 is not None and res["reverse_s"] is not None:
                break
            time.sleep(0.05)
        res["reverse_share_3s"] = round((at3 or 0) / BUDGET, 3)
        log("%s: skew reversed: the new hot process holds %.0f%% of the budget at 3 s; past "
            "45%% after %s s" % (variant, 100 * res["reverse_share_3s"], res["reverse_s"]))

        # 3. kill -9 of the process that holds most: how soon the others
        #    have 80% of the budget in use (its keys go to them).
        time.sleep(3)
        victim = max(range(3), key=lambda i: share(procs[i]))
        with sampler.lock:
            procs[victim].kill9()
        t0 = time.monotonic()
        res["kill_reuse_s"] = None
        best = 0
        while time.monotonic() - t0 < 20:
            used = sum(usage(p) for p in procs if not p.dead)
            best = max(best, used)
            if used >= 0.8 * BUDGET:
                res["kill_reuse_s"] = round(time.monotonic() - t0, 2)
                break
            time.sleep(0.02)
        res["kill_reuse_fraction"] = round(best / BUDGET, 3)
        res["kill_goal_s"] = (TTL_MS + PERIOD_MS) / 1000.0
        log("%s: killed p%d: the others used %.0f%% of the budget; 80%% after %s s" % (
            variant, victim, 100 * res["kill_reuse_fraction"], res["kill_reuse_s"]))
        load.stop()
        load = None
        sampler.stop()
        res.update(sampler_figures(sampler))
        for p in procs:
            p.stop()
        return res
    finally:
        teardown(load, sampler, procs, ctl, store)


def reuse(variant, binary, ctl, quick):
    store = "shm:slbench-%d-reuse-%s" % (os.getpid(), variant)
    try:
        return run_reuse("lease_host", variant, binary, ctl, store, 35, 30 if quick else 60, log)
    finally:
        store_remove(ctl, store)


def main():
    args = sys.argv[1:]
    workloads = pop_workload(args, ("zipf", "slow-reuse"))
    if workloads is None:
        print(__doc__, file=sys.stderr)
        return 2
    argv = [a for a in args if a != "--quick"]
    quick = "--quick" in sys.argv
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    warm, measure = (10, 10) if quick else (20, 30)
    out = []
    try:
        if "zipf" in workloads:
            out += [run(v, argv[0], argv[1], warm, measure) for v in ("static", "lease")]
        if "slow-reuse" in workloads:
            out += [reuse(v, argv[0], argv[1], quick) for v in ("static", "lease")]
    except Fail as e:
        log("FAIL: %s" % e)
        return 1
    for r in out:
        print(json.dumps(r, separators=(",", ":")))
    by = {(r.get("workload", "zipf"), r["variant"]): r for r in out}
    if ("zipf", "lease") in by:
        st, le = by[("zipf", "static")], by[("zipf", "lease")]
        log("hit ratio: lease %.3f, static %.3f: %+.1f points (goal +5)" % (
            le["hit_ratio"], st["hit_ratio"], 100 * (le["hit_ratio"] - st["hit_ratio"])))
    if ("slow-reuse", "lease") in by:
        st, le = by[("slow-reuse", "static")], by[("slow-reuse", "lease")]
        for k in ("hit_ratio_before", "hit_ratio_after_30s", "hit_ratio_after"):
            log("slow-reuse %s: lease %.3f, static %.3f: %+.1f points (goal +5)" % (
                k, le[k], st[k], 100 * (le[k] - st[k])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
