#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slcache_lease_demand.py SLCACHE SOFTLIMITCTL - issue Demand: a cache
whose items nobody reads again gives its share to one whose items are read.

Two slcache processes (lease period 100 ms, ttl 1 s, --lease-idle 600 s so
that no memory is old enough to go back by idleness alone) share budget
"rt" (4 MiB) in a fresh shm: store.  Both evict all the time:

  - "dead": a client sets new keys and never reads one (a write-only load,
    as a cache whose keys moved elsewhere sees misses of keys it will not
    see again);
  - "live": a cache-aside client reads its own 3 MiB of keys again and
    again (uniformly at random), setting what it misses.

"dead" starts alone and takes most of the budget; then "live" starts.
Evictions alone say both want more, and max-min fairness then splits the
budget evenly; reuse says only "live" does.  Passes when "live" holds more
than 70% of the budget and "dead" less than 30% (waited for, with a
deadline of 120 s as a hang catcher), and no two samples of the summed
usage in a row were over the budget.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slcache_lease_lib import (Fail, Load, Sampler, Slcache,  # noqa: E402
                               softlimitctl, teardown, wait_for)

TENANT = "rt"
BUDGET = 4 << 20
VALUE = 2000


def lease(p):
    return int(p.tenant(TENANT).get("lease", 0))


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    binary, ctl = sys.argv[1:3]
    store = "shm:sldemand-%d" % os.getpid()
    args = ["-m", "64", "-t", "2", "--lease-store", store, "--lease-period", "100",
            "--lease-ttl", "1000", "--lease-idle", "600000"]
    procs, loads, sampler = [], [], None
    try:
        softlimitctl(ctl, store, "budget", "set", TENANT, "max=%d" % BUDGET)
        dead = Slcache(binary, args, "dead")
        procs.append(dead)
        live = Slcache(binary, args, "live")
        procs.append(live)
        sampler = Sampler(procs, TENANT, BUDGET)
        sampler.start()
        # Each load sends every key to its own process: weight 1 there.
        loads.append(Load(procs, TENANT, nkeys=200000, value_size=VALUE, weights=[1, 0],
                          zipf=0, seed=5, sets_only=True))
        nlive = (3 << 20) // (VALUE + 100)
        loads.append(Load(procs, TENANT, nkeys=nlive, value_size=VALUE, weights=[0, 1],
                          zipf=0, seed=6))
        # The dead cache first, alone: it fills and holds most of the
        # budget, evicting all the while; then the live one starts.
        loads[0].start()
        wait_for("the dead cache to hold 70% of the budget", lambda: lease(dead) > 0.7 * BUDGET)
        loads[1].start()
        wait_for("the live cache to evict", lambda: int(live.tenant(TENANT).get("evictions", 0)))
        _, secs = wait_for("the live cache to hold 70% of the budget and the dead one 30%",
                           lambda: lease(live) > 0.7 * BUDGET and lease(dead) < 0.3 * BUDGET,
                           deadline_s=120)
        print("slcache_lease_demand: after %.1f s live holds %d, dead %d of %d bytes" % (
            secs, lease(live), lease(dead), BUDGET))
        for ld in loads:
            ld.stop()
        loads = []
        sampler.stop()
        if sampler.over_runs:
            raise Fail("%d runs of two samples in a row over the budget (max %d bytes over)" % (
                sampler.over_runs, sampler.max_over_bytes))
        print("slcache_lease_demand: %d samples, never two in a row over the budget" %
              sampler.samples)
        for p in procs:
            p.stop()
        return 0
    except Fail as e:
        print("slcache_lease_demand: FAIL: %s" % e, file=sys.stderr)
        for p in procs:
            print("--- %s:\n%s" % (p.name, p.log_tail()), file=sys.stderr)
        return 1
    finally:
        teardown(loads[0] if loads else None, sampler, procs, ctl, store)
        for ld in loads[1:]:
            ld.stop()


if __name__ == "__main__":
    sys.exit(main())
