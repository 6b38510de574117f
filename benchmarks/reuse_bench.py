# SPDX-License-Identifier: MIT
"""Issue Demand's slow-reuse workload for bench_fleet (etcd) and
bench_lease_host (shm): three slcache nodes share tenant A's budget; each of
its keys is read again every 1 to 30 s; the spread over the nodes flips
halfway.  See bench_fleet.sh for what each field measures."""
import time

from slcache_lease_lib import ReuseLoad, Sampler, Slcache, softlimitctl, teardown

# Issue Demand: tenant A's 24 MiB over the three nodes, its keys read again
# every 1 to 30 s, spread 70/25/5 then flipped to 5/25/70; leases with the
# period and ttl of the harness that checks it, everything else default.
REUSE_BUDGET = 24 << 20
REUSE_VALUE = 8000
REUSE_WS = 1.5
REUSE_WEIGHTS = [0.70, 0.25, 0.05]
REUSE_ARGS = ["--lease-period", "250", "--lease-ttl", "2000"]


def pop_workload(args, names):
    """Takes "--workload NAME" out of @args: (NAME,), @names when absent,
    None when NAME is not one of @names."""
    if "--workload" not in args:
        return names
    i = args.index("--workload")
    if i + 1 >= len(args) or args[i + 1] not in names:
        return None
    w = args[i + 1]
    del args[i:i + 2]
    return (w,)


def share(p, tenant):
    st = p.tenant(tenant)
    return int(st.get("lease", st.get("max", 0)))


def hits(procs, tenant):
    out = []
    for p in procs:
        st = p.tenant(tenant) if not p.dead else {}
        out.append((int(st.get("hits", 0)), int(st.get("misses", 0))))
    return out


def fences(procs, tenant):
    """The tenant's lease fences summed over the live nodes (0 unleased)."""
    return sum(int(p.tenant(tenant).get("lease_fences", 0)) for p in procs if not p.dead)


def usage_of(p, tenant):
    return int(p.tenant(tenant).get("usage", 0)) if not p.dead else 0


def ratio(h0, h1):
    dh = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(h0, h1)]
    th, tm = sum(x[0] for x in dh), sum(x[1] for x in dh)
    return round(th / max(1, th + tm), 4)


def until(pred, limit_s, step=0.02):
    """Seconds until pred() held (None: not within limit_s)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if pred():
            return round(time.monotonic() - t0, 2)
        time.sleep(step)
    return None


def kill_largest(procs, sampler, tenant, budget, ttl_ms, period_ms):
    """kill -9 of the node holding most of @tenant: how soon the live nodes'
    leases hold 80% of the budget, and how soon they use it."""
    victim = max(range(len(procs)), key=lambda i: share(procs[i], tenant))
    with sampler.lock:
        procs[victim].kill9()
    t0 = time.monotonic()
    live = [p for p in procs if not p.dead]
    held = until(lambda: sum(share(p, tenant) for p in live) >= 0.8 * budget, 30)
    used = until(lambda: sum(usage_of(p, tenant) for p in live) >= 0.8 * budget,
                 max(1.0, 30 - (time.monotonic() - t0)))
    if used is not None:
        used = round(time.monotonic() - t0, 2)
    return {"kill_leases_s": held, "kill_reuse_s": used,
            "kill_goal_s": (ttl_ms + period_ms + 1000) / 1000.0}


def start_reuse(binary, args, name, procs, seed):
    """Three slcache nodes (appended to @procs as they start), a sampler of
    tenant A's usage and the slow-reuse load at 70/25/5, all started."""
    for i in range(3):
        procs.append(Slcache(binary, args, "%s%d" % (name, i)))
    sampler = Sampler(procs, "A", REUSE_BUDGET)
    sampler.start()
    load = ReuseLoad(procs, "A", nkeys=int(REUSE_WS * REUSE_BUDGET / (REUSE_VALUE + 100)),
                     value_size=REUSE_VALUE, weights=REUSE_WEIGHTS, seed=seed)
    load.start()
    return sampler, load


def sampler_figures(sampler):
    """What a stopped Sampler saw, as a row's fields."""
    return {"samples": sampler.samples, "over_budget_samples": sampler.over,
            "over_budget_runs": sampler.over_runs,
            "max_over_budget_bytes": sampler.max_over_bytes}


def run_reuse(bench, variant, binary, ctl, url, warm_s, phase_s, log):
    """The slow-reuse workload, one variant, with its leases in the store
    at @url: a JSON row {"bench": @bench, "workload": "slow-reuse", ...}."""
    tenant = "A"
    args = ["-m", "64", "-t", "2"]
    if variant == "lease":
        softlimitctl(ctl, url, "budget", "set", tenant, "max=%d" % REUSE_BUDGET)
        args += ["--lease-store", url] + REUSE_ARGS
    else:
        args += ["--tenant", "%s:max=%d" % (tenant, REUSE_BUDGET // 3)]
    procs, load, sampler = [], None, None
    res = {"bench": bench, "workload": "slow-reuse", "variant": variant, "tenant": tenant,
           "budget_bytes": REUSE_BUDGET, "value_bytes": REUSE_VALUE, "reuse_s": [1, 30],
           "weights": REUSE_WEIGHTS, "lease_args": REUSE_ARGS if variant == "lease" else []}
    try:
        sampler, load = start_reuse(binary, args, "%s-reuse" % variant, procs, 3)
        time.sleep(warm_s)
        h0 = hits(procs, tenant)
        time.sleep(phase_s)
        h1 = hits(procs, tenant)
        load.set_weights(list(reversed(REUSE_WEIGHTS)))
        t0 = time.monotonic()
        hot = None
        shares3 = None
        while time.monotonic() - t0 < phase_s:
            s2 = share(procs[2], tenant)
            if hot is None and s2 > 0.40 * REUSE_BUDGET:
                hot = round(time.monotonic() - t0, 2)
            if shares3 is None and time.monotonic() - t0 >= 3.0:
                shares3 = [share(p, tenant) for p in procs]
            if h1 is not None and time.monotonic() - t0 >= min(30, phase_s):
                h30 = hits(procs, tenant)
                res["hit_ratio_after_30s"] = ratio(h1, h30)
                h1, h1_start = None, h1
            time.sleep(0.05)
        h2 = hits(procs, tenant)
        if h1 is not None:  # a phase of 30 s or less: the 30 s are all of it
            h1_start = h1
            res["hit_ratio_after_30s"] = ratio(h1, h2)
        res["hit_ratio_before"] = ratio(h0, h1_start)
        res["hit_ratio_after"] = ratio(h1_start, h2)
        res["hot_40pct_s"] = hot
        res["shares_at_3s_bytes"] = shares3
        res["shares_bytes"] = [share(p, tenant) for p in procs]
        res["fences"] = fences(procs, tenant)
        res["client_late_s"] = round(load.late, 2)
        if variant == "lease":
            res.update(kill_largest(procs, sampler, tenant, REUSE_BUDGET, 2000, 250))
        load.stop()
        load = None
        sampler.stop()
        res.update(sampler_figures(sampler))
        log("slow-reuse %s: hit ratio %.3f before, %s after (%s in 30 s), hot > 40%% at %s s, "
            "shares %s" % (variant, res["hit_ratio_before"], res["hit_ratio_after"],
                           res.get("hit_ratio_after_30s"), hot, res["shares_bytes"]))
        return res
    finally:
        teardown(load, sampler, procs)


