#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slcache_lease.py SLCACHE SOFTLIMITCTL [PERIOD_MS TTL_MS] - issue 25's safety test: one
tenant's budget shared by slcache processes on a shm: store, never passed.

Three slcache processes (lease period 100 ms and ttl 1 s unless given,
memory unread for 2 s given back) join budget "hog" (8 MiB) in a fresh shm: store;
a cache-aside load of the tenant's keys (a working set four times the
budget: its demand exceeds the budget everywhere) moves between them.  A
sampler sums the tenant's usage over the processes every 10 ms, reading
`stats tenants` one process after another (a stopped process counts at its
last report).  Along the way:

  1. the load moves from one process to another, twice round: the hot
     one's share grows past half the budget (the shares follow demand);
  2. kill -9 of the process that holds most while the load moves to the
     others: its record leaves the store, the others grow into its room;
  3. a new process joins (the tenant created on first use by its keys);
  4. SIGSTOP of the process that holds most for three TTLs, while the
     others want more (the store shows it stalled), then SIGCONT;
  5. the budget deleted (each process logs it and keeps its share frozen)
     and set again (each rejoins and logs it);
  6. the OpenMetrics scrape carries the lease's families and parses;
  7. SIGTERM of every process: each exits 0.

Passes when no two samples in a row are over the budget's max.  Every wait
is for an event, with a deadline of 60 s or more.  Prints the samples taken
and the highest sum seen against the budget.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slcache_lease_lib import (Fail, Load, Sampler, Slcache,  # noqa: E402
                               softlimitctl, teardown, wait_for)
from slcache_spawn import request  # noqa: E402

TENANT = "hog"
BUDGET = 8 << 20
PERIOD_MS = 100  # or argv[3]
TTL_MS = 1000    # or argv[4]
VALUE = 2000


def members(ctl, store):
    r = softlimitctl(ctl, store, "--json", "budget", "show", TENANT)
    return json.loads(r.stdout)["members"]


def lease_of(p):
    st = p.tenant(TENANT)
    return int(st.get("lease", 0)), st.get("lease_state", "")


def check_metrics(mport):
    """The OpenMetrics scrape carries the lease's families for the budget,
    and parses (strictly, when python3-prometheus-client is there)."""
    data = request(mport, b"GET /metrics HTTP/1.0\r\n\r\n", 10)
    text = data.split(b"\r\n\r\n", 1)[1].decode()
    for fam in ("slcache_lease_share_bytes", "slcache_lease_floor_bytes",
                "slcache_lease_demand_bytes", "slcache_lease_expires_seconds",
                "slcache_lease_store_errors_total", "slcache_lease_fences_total",
                "slcache_lease_store_resets_total"):
        if '%s{budget="%s"}' % (fam, TENANT) not in text:
            raise Fail("the metrics lack %s for %s:\n%s" % (fam, TENANT, text[-2000:]))
    if not text.endswith("# EOF\n"):
        raise Fail("the metrics do not end in # EOF")
    try:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
    except ImportError:
        print("slcache_lease: (python3-prometheus-client missing: metrics not parsed)")
        return
    names = {f.name for f in text_string_to_metric_families(text)}
    if "slcache_lease_share_bytes" not in names or "slcache_lease_fences" not in names:
        raise Fail("the parser did not find the lease families: %s" % sorted(names))
    print("slcache_lease: the metrics carry the lease figures and parse")


def main():
    global PERIOD_MS, TTL_MS
    if len(sys.argv) not in (3, 5):
        print(__doc__)
        return 2
    binary, ctl = sys.argv[1], sys.argv[2]
    if len(sys.argv) == 5:
        PERIOD_MS, TTL_MS = int(sys.argv[3]), int(sys.argv[4])
    store = "shm:sltest-%d-%d" % (os.getpid(), int(time.time()))
    args = ["-m", "64", "-t", "2", "--lease-store", store, "--lease-period", str(PERIOD_MS),
            "--lease-ttl", str(TTL_MS), "--lease-idle", "2000"]
    procs, sampler, load = [], None, None
    try:
        softlimitctl(ctl, store, "budget", "set", TENANT, "max=%d" % BUDGET)
        for i in range(3):
            procs.append(Slcache(binary, args, "p%d" % i, metrics=i == 0))
        mport = procs[0].mport
        sampler = Sampler(procs, TENANT, BUDGET)
        sampler.start()
        load = Load(procs, TENANT, nkeys=4 * BUDGET // VALUE, value_size=VALUE,
                    weights=[1.0, 0.0, 0.0], zipf=0.9)
        load.start()

        def hot(i, what):
            """Load on process i only (and the others idle); waits for its
            share to pass half the budget."""
            load.set_weights([1.0 if j == i else 0.0 for j in range(len(procs))])
            _, t = wait_for(what, lambda: lease_of(procs[i])[0] > BUDGET // 2, 120)
            print("slcache_lease: %s after %.1f s" % (what, t))

        # 1. The load moves around the processes, twice: the share follows.
        for rnd in range(2):
            for i in range(3):
                hot(i, "round %d: p%d holds more than half the budget" % (rnd + 1, i))
        wait_for("three participants in the store", lambda: len(members(ctl, store)) == 3)

        # 2. kill -9 of the process that holds most, while the load moves to
        #    the others: its record goes, the others grow into its room.
        hot(1, "p1 hot before its kill")
        load.set_weights([1.0, 1.0, 1.0])
        with sampler.lock:
            procs[1].kill9()
        _, t = wait_for("p1's record gone from the store", lambda: len(members(ctl, store)) == 2)
        print("slcache_lease: p1 killed; its record left the store after %.1f s" % t)
        hot(0, "p0 holds more than half the budget after p1's death")

        # 3. A new process joins (the tenant created on first use).
        procs.append(Slcache(binary, args, "p3"))
        load.set_weights([1.0, 0.0, 1.0, 1.0])
        _, t = wait_for("p3 in the store", lambda: len(members(ctl, store)) == 3)
        print("slcache_lease: p3 joined the budget after %.1f s" % t)
        hot(3, "p3 holds more than half the budget")

        # 4. SIGSTOP of the process that holds most for three TTLs, while
        #    the others want more; then SIGCONT.
        hot(2, "p2 hot before its stop")
        with sampler.lock:
            procs[2].sigstop()
        load.set_weights([1.0, 0.0, 1.0, 1.0])
        time.sleep(3 * TTL_MS / 1000.0)
        states = [m["state"] for m in members(ctl, store)]
        print("slcache_lease: states with p2 stopped for 3 TTLs: %s" % " ".join(sorted(states)))
        procs[2].sigcont()
        _, t = wait_for("p2 answering again", lambda: lease_of(procs[2])[1] != "", 120)
        print("slcache_lease: p2 serving again %.1f s after SIGCONT" % t)
        hot(0, "p0 holds more than half the budget after p2's stop")
        hot(2, "p2 holds more than half the budget again")

        # 5. The budget deleted: each holder keeps its last share, frozen,
        #    and says so; set again: they rejoin, and say so.
        live = [p for p in procs if not p.dead]
        softlimitctl(ctl, store, "budget", "delete", TENANT)
        wait_for("every process saying its budget was deleted",
                 lambda: all("budget deleted" in p.log_tail(100000) for p in live), 120)
        softlimitctl(ctl, store, "budget", "set", TENANT, "max=%d" % BUDGET)
        wait_for("every process rejoining", lambda: len(members(ctl, store)) == len(live) and
                 all("budget back" in p.log_tail(100000) for p in live), 120)
        print("slcache_lease: budget deleted and set again: every process rejoined")
        hot(0, "p0 holds more than half the budget after the rejoin")
        check_metrics(mport)
        load.stop()
        ops, load = load.ops, None
        sampler.stop()
        for p in procs:
            p.stop()
        print("slcache_lease: %d samples, %d over the budget (%d runs of two in a row); "
              "highest sum %d of %d (%.1f%%); %d requests"
              % (sampler.samples, sampler.over, sampler.over_runs, sampler.max_sum, BUDGET,
                 100.0 * sampler.max_sum / BUDGET, ops))
        if sampler.samples < 100:
            raise Fail("only %d samples taken" % sampler.samples)
        if sampler.over_runs:
            raise Fail("the tenant's usage passed the budget in %d runs of two samples or more"
                       % sampler.over_runs)
        print("slcache_lease: PASS")
        return 0
    except Fail as e:
        print("slcache_lease: FAIL: %s" % e)
        for p in procs:
            try:
                print("%s: %s" % (p.name, "dead" if p.dead else p.tenant(TENANT)))
            except (OSError, ConnectionError):
                pass
            print("--- %s stderr:\n%s" % (p.name, p.log_tail(1500)))
        r = softlimitctl(ctl, store, "budget", "show", TENANT, check=False)
        print(r.stdout + r.stderr)
        return 1
    finally:
        teardown(load, sampler, procs, ctl, store)


if __name__ == "__main__":
    sys.exit(main())
