#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slcache_lease.py SLCACHE SOFTLIMITCTL - issue 25's safety test: one
tenant's budget shared by slcache processes on a shm: store, never passed.

Three slcache processes join budget "hog" (8 MiB) in a fresh shm: store;
a cache-aside load of the tenant's keys (a working set four times the
budget: its demand exceeds the budget everywhere) moves between them.  A
sampler sums the tenant's usage over the processes every 10 ms, reading
`stats tenants` one process after another (a stopped process counts at its
last report).  Along the way:

  1. the load moves from one process to another: the hot one's share grows
     past half the budget (the shares follow demand);
  2. kill -9 of one process: its record leaves the store;
  3. a new process joins (the tenant created on first use by its keys);
  4. SIGSTOP of one process for three TTLs, then SIGCONT: it serves again;
  5. SIGTERM of every process: each exits 0.

Passes when no two samples in a row are over the budget's max.  Every wait
is for an event, with a deadline of 60 s or more.  Prints the samples taken
and the highest sum seen against the budget.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slcache_lease_lib import (Fail, Load, Sampler, Slcache, shm_unlink,  # noqa: E402
                               softlimitctl, wait_for)

TENANT = "hog"
BUDGET = 8 << 20
PERIOD_MS = 100
TTL_MS = 1000
VALUE = 2000


def members(ctl, store):
    r = softlimitctl(ctl, store, "--json", "budget", "show", TENANT)
    return json.loads(r.stdout)["members"]


def lease_of(p):
    st = p.tenant(TENANT)
    return int(st.get("lease", 0)), st.get("lease_state", "")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, ctl = sys.argv[1], sys.argv[2]
    store = "shm:sltest-%d-%d" % (os.getpid(), int(time.time()))
    args = ["-m", "64", "-t", "2", "--lease-store", store, "--lease-period", str(PERIOD_MS),
            "--lease-ttl", str(TTL_MS)]
    procs, sampler, load = [], None, None
    try:
        softlimitctl(ctl, store, "budget", "set", TENANT, "max=%d" % BUDGET)
        for i in range(3):
            procs.append(Slcache(binary, args, "p%d" % i))
        sampler = Sampler(procs, TENANT, BUDGET)
        sampler.start()
        load = Load(procs, TENANT, nkeys=4 * BUDGET // VALUE, value_size=VALUE,
                    weights=[1.0, 0.0, 0.0], zipf=0, sets_only=True)
        load.start()

        # Every process has registered (tenants created on first use).
        wait_for("the three processes in the store", lambda: len(members(ctl, store)) >= 1)
        _, t = wait_for("p0's share past half the budget",
                        lambda: lease_of(procs[0])[0] > BUDGET // 2, 120)
        print("slcache_lease: p0 holds more than half the budget after %.1f s" % t)
        load.set_weights([0.0, 1.0, 1.0])
        _, t = wait_for("the share moving to p1 and p2",
                        lambda: lease_of(procs[1])[0] > BUDGET // 4 and
                        lease_of(procs[2])[0] > BUDGET // 4, 120)
        print("slcache_lease: the load moved, p1 and p2 each hold a quarter after %.1f s" % t)

        # kill -9: the dead process's record goes; the others take its room.
        with sampler.lock:
            procs[1].kill9()
        _, t = wait_for("p1's record gone from the store", lambda: len(members(ctl, store)) == 2)
        print("slcache_lease: p1 killed; its record left the store after %.1f s" % t)

        # A new process joins; its tenant is created on first use.
        procs.append(Slcache(binary, args, "p3"))
        load.set_weights([1.0, 0.0, 1.0, 1.0])
        _, t = wait_for("p3 holding a share", lambda: lease_of(procs[3])[0] > 0 and
                        lease_of(procs[3])[1] == "held", 120)
        print("slcache_lease: p3 joined and holds a share after %.1f s" % t)

        # SIGSTOP for three TTLs, then SIGCONT.
        with sampler.lock:
            procs[2].sigstop()
        time.sleep(3 * TTL_MS / 1000.0)
        procs[2].sigcont()
        _, t = wait_for("p2 answering again with a held lease",
                        lambda: lease_of(procs[2])[1] == "held", 120)
        print("slcache_lease: p2 stopped for 3 TTLs, held again %.1f s after SIGCONT" % t)
        time.sleep(2)

        load.stop()
        load = None
        sampler.stop()
        for p in procs:
            p.stop()
        print("slcache_lease: %d samples, %d over the budget (%d runs of two in a row); "
              "highest sum %d of %d (%.1f%%); load ops %s"
              % (sampler.samples, sampler.over, sampler.over_runs, sampler.max_sum, BUDGET,
                 100.0 * sampler.max_sum / BUDGET, "n/a"))
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
            print("--- %s stderr:\n%s" % (p.name, p.log_tail(1500)))
        return 1
    finally:
        if load:
            load.stop()
        if sampler and sampler.is_alive():
            sampler.stop()
        for p in procs:
            p.cleanup()
        shm_unlink(store)


if __name__ == "__main__":
    sys.exit(main())
