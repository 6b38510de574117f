#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turn benchmarks/results/*.jsonl into gnuplot inputs or markdown tables.

    results.py plots  RESULTS_DIR   # writes RESULTS_DIR/plot/*.dat and *.gp
    results.py tables RESULTS_DIR   # prints markdown tables on stdout

Standard library only.  Missing or empty files are skipped.  The gnuplot
scripts write RESULTS_DIR/{charge,reclaim,full,isolation,lease}.png; benchmarks/run
runs them.
"""
import json
import math
import os
import sys

VARIANTS = ["shared", "static", "guarantee", "gatekeeper", "protection", "refault"]
POLICIES = ["guarantee", "gatekeeper", "protection", "refault"]
FULL_IMPLS = POLICIES + ["naive", "shared-lru"]


def load(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows


def q(s):
    return '"' + str(s).replace('"', "'") + '"'


# ------------------------------------------------------------------ plots

def charge_plot(res, out):
    rows = [r for r in load(os.path.join(res, "charge.jsonl")) if r.get("bench") == "charge"]
    if not rows:
        return None
    series = {}
    for r in rows:
        label = r["variant"] + (" batch %d" % r["batch"] if r["variant"] == "softlimit" else "")
        series.setdefault((r["threads"], label), []).append((r["depth"], r["ns_per_op"]))
    threads = sorted({t for t, _ in series})
    labels = sorted({l for _, l in series}, key=lambda l: (not l.startswith("softlimit"), l))
    gp = ["set terminal pngcairo size 1200,500 noenhanced",
          "set output %s" % q(os.path.join(res, "charge.png")),
          "set multiplot layout 1,%d title %s" % (len(threads), q(
              "bench_charge: ns per charge+uncharge pair (median; 2 threads charge the same group)")),
          "set logscale y", "set grid", "set key below horizontal",
          "set xlabel 'depth (levels below the root)'", "set ylabel 'ns/op (log)'",
          "set xtics (1,4,8)", "set xrange [0.5:8.5]"]
    for t in threads:
        plots = []
        for label in labels:
            pts = sorted(series.get((t, label), []))
            if not pts:
                continue
            fn = os.path.join(out, "charge_t%d_%s.dat" % (t, label.replace(" ", "_")))
            with open(fn, "w") as f:
                for d, ns in pts:
                    f.write("%d %.3f\n" % (d, ns))
            plots.append("%s using 1:2 with linespoints lw 2 title %s" % (q(fn), q(label)))
        gp.append("set title %s" % q("%d thread%s" % (t, "" if t == 1 else "s")))
        gp.append("plot " + ", ".join(plots))
    gp.append("unset multiplot")
    return gp


def reclaim_plot(res, out):
    rows = [r for r in load(os.path.join(res, "reclaim.jsonl")) if r.get("bench") == "reclaim"]
    if not rows:
        return None
    gp = ["set terminal pngcairo size 900,600 noenhanced",
          "set output %s" % q(os.path.join(res, "reclaim.png")),
          "set title %s" % q("bench_reclaim: cost of one sl_reclaim(root, 64) against tree size"),
          "set logscale x", "set logscale y", "set grid", "set key below horizontal maxcols 2",
          "set xrange [500:2000000]",
          "set xlabel 'groups in the tree (log)'", "set ylabel 'ns per call (log)'"]
    # The goal of each policy's ratio (largest tree / smallest <= bound),
    # drawn as a dashed line at bound x its smallest tree's figure.
    bounds = {}
    for r in load(os.path.join(res, "reclaim.jsonl")):
        if r.get("bench") == "reclaim_ratio" and str(r.get("goal", "")).startswith("<="):
            bounds[r["policy"]] = float(r["goal"][2:])
    plots = []
    pols = sorted({r["policy"] for r in rows}, key=lambda p: POLICIES.index(p) if p in POLICIES else 9)
    for i, pol in enumerate(pols):
        pts = sorted((r["groups"], r["ns_per_call"]) for r in rows if r["policy"] == pol)
        fn = os.path.join(out, "reclaim_%s.dat" % pol)
        with open(fn, "w") as f:
            for g, ns in pts:
                f.write("%d %.1f\n" % (g, ns))
        plots.append("%s using 1:2 with linespoints lw 2 lt %d title %s" % (q(fn), i + 1, q(pol)))
        if pol in bounds and len(pts) > 1:
            fn = os.path.join(out, "reclaim_%s_goal.dat" % pol)
            with open(fn, "w") as f:
                for g in (pts[0][0], pts[-1][0]):
                    f.write("%d %.1f\n" % (g, bounds[pol] * pts[0][1]))
            plots.append("%s using 1:2 with lines lw 1 dt 2 lt %d title %s" % (
                q(fn), i + 1, q("%s goal: <= %g x its %d-group figure" % (pol, bounds[pol], pts[0][0]))))
    gp.append("plot " + ", ".join(plots))
    return gp


def full_rows(res):
    return [r for r in load(os.path.join(res, "full.jsonl")) if r.get("bench") == "full"]


def full_panels(rows):
    panels = []
    for r in rows:
        k = (r["tenants"], r["sizes"])
        if k not in panels:
            panels.append(k)
    return panels


def full_impls(rows):
    return [i for i in FULL_IMPLS if any(r["impl"] == i for r in rows)]


def full_plot(res, out):
    rows = full_rows(res)
    if not rows:
        return None
    panels = full_panels(rows)
    cols = 2 if len(panels) > 1 else 1
    nrows = int(math.ceil(len(panels) / cols))
    gp = ["set terminal pngcairo size %d,%d noenhanced" % (700 * cols, 450 * nrows),
          "set output %s" % q(os.path.join(res, "full.png")),
          "set multiplot layout %d,%d title %s" % (nrows, cols, q(
              "bench_full: total charges per second on a full tree (root max %d MiB), against threads"
              % (rows[0]["budget"] >> 20))),
          "set logscale x 2", "set logscale y", "set grid", "set key below horizontal",
          "set xlabel 'threads'", "set ylabel 'Mops/s, all threads (log)'",
          "set xtics (1,2,4,8)", "set xrange [0.8:10]"]
    for pi, (ten, sz) in enumerate(panels):
        plots = []
        for impl in full_impls(rows):
            pts = sorted((r["threads"], r["ops_per_s"]) for r in rows
                         if r["tenants"] == ten and r["sizes"] == sz and r["impl"] == impl)
            if not pts:
                continue
            fn = os.path.join(out, "full_%d_%s.dat" % (pi, impl))
            with open(fn, "w") as f:
                for t, ops in pts:
                    f.write("%d %.4f\n" % (t, ops / 1e6))
            style = "lw 2" if impl in POLICIES else "lw 2 dt 2"
            plots.append("%s using 1:2 with linespoints %s title %s" % (q(fn), style, q(impl)))
        gp.append("set title %s" % q("tenants: %s, item sizes: %s" % (ten, sz)))
        gp.append("plot " + ", ".join(plots))
    gp.append("unset multiplot")
    return gp


def isolation_rows(res):
    return load(os.path.join(res, "isolation.jsonl"))


def isolation_plot(res, out):
    rows = isolation_rows(res)
    per = [r for r in rows if r.get("bench") == "isolation"]
    if not per:
        return None
    mixes = []
    for r in per:
        if r["mix"] not in mixes:
            mixes.append(r["mix"])
    cols = 2 if len(mixes) > 1 else 1
    nrows = int(math.ceil(len(mixes) / cols))
    gp = ["set terminal pngcairo size %d,%d noenhanced" % (820 * cols, 430 * nrows),
          "set output %s" % q(os.path.join(res, "isolation.png")),
          "set multiplot layout %d,%d title %s" % (nrows, cols, q(
              "bench_isolation: hit ratio per tenant (alone = the tenant alone in an LRU of its soft limit)")),
          "set style data histograms", "set style histogram clustered gap 1",
          "set style fill solid 0.85 border -1", "set boxwidth 0.9",
          "set yrange [0:1.05]", "set grid ytics", "set ylabel 'hit ratio'",
          "set key outside right top vertical", "set xtics scale 0 font ',9'"]
    for mi, mix in enumerate(mixes):
        tenants = []
        for r in per:
            if r["mix"] == mix and r["tenant"] not in tenants:
                tenants.append(r["tenant"])
        fn = os.path.join(out, "isolation_%d.dat" % mi)
        with open(fn, "w") as f:
            f.write("# tenant alone " + " ".join(VARIANTS) + "\n")
            for t in tenants:
                vals = {r["variant"]: r for r in per if r["mix"] == mix and r["tenant"] == t}
                alone = next((v.get("alone_hit_ratio") for v in vals.values()), None)
                line = [t, "%.4f" % alone if alone is not None else "NaN"]
                for v in VARIANTS:
                    line.append("%.4f" % vals[v]["hit_ratio"] if v in vals else "NaN")
                f.write(" ".join(line) + "\n")
            # The whole cache, as the last group of bars.
            tv = {t["variant"]: t["hit_ratio"] for t in rows
                  if t.get("bench") == "isolation_total" and t["mix"] == mix}
            if tv:
                f.write("whole-cache NaN " + " ".join(
                    "%.4f" % tv[v] if v in tv else "NaN" for v in VARIANTS) + "\n")
        gp.append("set title %s" % q(mix))
        parts = ["%s using 2:xtic(1) title 'alone' lc rgb '#888888'" % q(fn)]
        colors = ["#d62728", "#9467bd", "#2ca02c", "#ff7f0e", "#1f77b4", "#17becf"]
        for i, v in enumerate(VARIANTS):
            parts.append("'' using %d title %s lc rgb '%s'" % (i + 3, q(v), colors[i]))
        gp.append("plot " + ", ".join(parts))
    gp.append("unset multiplot")
    return gp


LEASE_ALLOCATORS = ["static", "proportional", "maxmin", "gradient"]


def lease_rows(res):
    # A workload's rows (bench_lease --workload) have figures of their own.
    return [r for r in load(os.path.join(res, "lease.jsonl"))
            if r.get("bench") == "lease_sim" and "workload" not in r]


def lease_configs(rows):
    cfgs = []
    for r in rows:
        k = (r["participants"], r["budgets"])
        if k not in cfgs:
            cfgs.append(k)
    return cfgs


def lease_plot(res, out):
    rows = lease_rows(res)
    if not rows:
        return None
    cfgs = lease_configs(rows)
    allocs = [a for a in LEASE_ALLOCATORS if any(r["allocator"] == a for r in rows)]
    allocs += sorted({r["allocator"] for r in rows} - set(allocs))
    xtics = "set xtics (%s)" % ", ".join("%s %d" % (q("%dx%d" % c), i) for i, c in enumerate(cfgs))
    gp = ["set terminal pngcairo size 1200,450 noenhanced",
          "set output %s" % q(os.path.join(res, "lease.png")),
          "set multiplot layout 1,2 title %s" % q(
              "bench_lease: simulated leases, participants x budgets (Twitter-shaped tenants)"),
          "set grid", "set key below horizontal", xtics,
          "set xrange [-0.3:%f]" % (len(cfgs) - 0.7), "set xlabel 'participants x budgets'"]
    for metric, title, ylabel in (("utilization", "utilization: demanded memory held / budget",
                                   "utilization"),
                                  ("convergence_s", "convergence after the load moves",
                                   "seconds (simulated)")):
        plots = []
        for a in allocs:
            fn = os.path.join(out, "lease_%s_%s.dat" % (metric, a))
            with open(fn, "w") as f:
                for i, c in enumerate(cfgs):
                    v = [r[metric] for r in rows if r["allocator"] == a
                         and (r["participants"], r["budgets"]) == c]
                    if v:
                        f.write("%d %.4f\n" % (i, v[0]))
            plots.append("%s using 1:2 with linespoints lw 2 title %s" % (q(fn), q(a)))
        gp.append("set title %s" % q(title))
        gp.append("set ylabel %s" % q(ylabel))
        gp.append("plot " + ", ".join(plots))
    gp.append("unset multiplot")
    return gp


def lease_tables(res):
    rows = lease_rows(res)
    if not rows:
        return
    print("#### bench_lease: simulated leases (utilization and fairness: 1 is best)\n")
    out = []
    for c in lease_configs(rows):
        base = next((r for r in rows if r["allocator"] == "static"
                     and (r["participants"], r["budgets"]) == c), None)
        for r in rows:
            if (r["participants"], r["budgets"]) != c:
                continue
            gain = "%+.1f" % (100 * (r["utilization"] - base["utilization"])) if base else "-"
            out.append(["%dx%d" % c, r["allocator"], "%.3f" % r["utilization"], gain,
                        "%.3f" % r["fairness"], "%.2f" % r["convergence_s"],
                        "%.0f" % r["store_ops_per_s"], r["over_budget_samples"]])
    print(table(["participants x budgets", "allocator", "utilization", "points over static",
                 "fairness", "convergence s", "store ops/s", "over budget"], out))


def plots(res):
    out = os.path.join(res, "plot")
    os.makedirs(out, exist_ok=True)
    for name, fn in (("charge", charge_plot), ("reclaim", reclaim_plot), ("full", full_plot),
                     ("isolation", isolation_plot), ("lease", lease_plot)):
        gp = fn(res, out)
        path = os.path.join(out, name + ".gp")
        if gp is None:
            if os.path.exists(path):
                os.remove(path)
            print("results.py: no data for %s.png" % name, file=sys.stderr)
            continue
        with open(path, "w") as f:
            f.write("\n".join(gp) + "\n")
        print(path)


# ----------------------------------------------------------------- tables

def table(header, rows):
    s = "| " + " | ".join(header) + " |\n"
    s += "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|\n"
    for r in rows:
        s += "| " + " | ".join(str(c) for c in r) + " |\n"
    return s


def tables(res):
    rows = load(os.path.join(res, "charge.jsonl"))
    ch = [r for r in rows if r.get("bench") == "charge"]
    if ch:
        cols = sorted({(r["threads"], r["depth"]) for r in ch})
        keys = []
        for r in ch:
            k = (r["variant"], r["batch"])
            if k not in keys:
                keys.append(k)
        out = []
        for k in keys:
            line = [k[0], k[1]]
            for c in cols:
                v = [r["ns_per_op"] for r in ch if (r["variant"], r["batch"]) == k and (r["threads"], r["depth"]) == c]
                line.append("%.2f" % v[0] if v else "-")
            out.append(line)
        print("#### bench_charge: ns per charge+uncharge pair\n")
        print(table(["variant", "batch"] + ["t%d/d%d" % c for c in cols], out))
        rat = [r for r in rows if r.get("bench") == "charge_ratio"]
        if rat:
            print(table(["ratio", "value", "goal", "met"],
                        [[r["name"], "%.2f" % r["value"], r["goal"], "yes" if r["met"] else "**no**"] for r in rat]))

    charge_lease_table(res)
    handoff_tables(res)

    rows = load(os.path.join(res, "reclaim.jsonl"))
    rc = [r for r in rows if r.get("bench") == "reclaim"]
    if rc:
        sizes = sorted({r["groups"] for r in rc})
        pols = [p for p in POLICIES if any(r["policy"] == p for r in rc)]
        out = []
        for p in pols:
            line = [p]
            for s in sizes:
                v = [r["ns_per_call"] for r in rc if r["policy"] == p and r["groups"] == s]
                line.append("%.0f" % v[0] if v else "-")
            out.append(line)
        print("#### bench_reclaim: ns per sl_reclaim(root, 64)\n")
        print(table(["policy"] + ["%d groups" % s for s in sizes], out))
        rat = [r for r in rows if r.get("bench") == "reclaim_ratio"]
        if rat:
            print(table(["policy", "ratio", "value", "goal", "met"],
                        [[r["policy"], r["name"], "%.2f" % r["value"], r["goal"],
                          "-" if r["met"] is None else ("yes" if r["met"] else "**no**")] for r in rat]))

    full_tables(res)

    rows = isolation_rows(res)
    per = [r for r in rows if r.get("bench") == "isolation"]
    tot = [r for r in rows if r.get("bench") == "isolation_total"]
    goals = [r for r in rows if r.get("bench") == "isolation_goal"]
    mixes = []
    for r in per:
        if r["mix"] not in mixes:
            mixes.append(r["mix"])
    for mix in mixes:
        t0 = next((t for t in tot if t["mix"] == mix), None)
        head = "#### bench_isolation: %s" % mix
        if t0:
            head += " (budget %d MiB, %d requests, first %d not counted)" % (
                t0["budget"] >> 20, t0["requests"], t0["warmup"])
        print(head + "\n")
        print("Hit ratio, and in parentheses the ratio to the tenant alone in an LRU of its soft limit.\n")
        tenants = []
        for r in per:
            if r["mix"] == mix and r["tenant"] not in tenants:
                tenants.append(r["tenant"])
        out = []
        for t in tenants:
            vals = {r["variant"]: r for r in per if r["mix"] == mix and r["tenant"] == t}
            any_ = next(iter(vals.values()))
            soft = any_["soft"]
            alone = any_.get("alone_hit_ratio")
            line = [t, "%.1f MiB" % (soft / 1048576.0) if soft else "0",
                    "%.3f" % alone if alone is not None else "-"]
            for v in VARIANTS:
                if v not in vals:
                    line.append("-")
                    continue
                r = vals[v]
                cell = "%.3f" % r["hit_ratio"]
                if r.get("ratio_to_alone") is not None:
                    cell += " (%.2f)" % r["ratio_to_alone"]
                line.append(cell)
            out.append(line)
        line = ["**whole cache**", "", ""]
        for v in VARIANTS:
            x = [t["hit_ratio"] for t in tot if t["mix"] == mix and t["variant"] == v]
            line.append("**%.3f**" % x[0] if x else "-")
        out.append(line)
        print(table(["tenant", "soft", "alone"] + VARIANTS, out))
    if mixes:
        print("#### bench_isolation: summary\n")
        print("Per mix and variant: the whole cache's hit ratio / the worst ratio to alone of a "
              "tenant with a soft limit.\n")
        out = []
        for mix in mixes:
            line = [mix]
            for v in VARIANTS:
                x = [t["hit_ratio"] for t in tot if t["mix"] == mix and t["variant"] == v]
                w = [r["ratio_to_alone"] for r in per if r["mix"] == mix and r["variant"] == v
                     and r.get("ratio_to_alone") is not None]
                line.append("%.3f / %.2f" % (x[0], min(w)) if x and w else "-")
            met = [g["met"] for g in goals if g["mix"] == mix]
            line.append("%d of %d" % (sum(met), len(met)) if met else "-")
            out.append(line)
        print(table(["mix"] + VARIANTS + ["goals met"], out))
        print("#### bench_isolation: goals\n")
        print("Tenants with a soft limit: the worst ratio to alone (goal: >= 0.95 under "
              "guarantee, protection and refault; the others for comparison).\n")
        out = []
        for mix in mixes:
            line = [mix]
            for v in VARIANTS:
                worst = None
                for r in per:
                    if r["mix"] == mix and r["variant"] == v and r.get("ratio_to_alone") is not None:
                        if worst is None or r["ratio_to_alone"] < worst[0]:
                            worst = (r["ratio_to_alone"], r["tenant"])
                line.append("%.3f (%s)" % worst if worst else "-")
            met = [g["met"] for g in goals if g["mix"] == mix and g["goal"] == "keep_95pct_of_alone"]
            line.append("met" if met and all(met) else "**not met**" if met else "-")
            out.append(line)
        print(table(["mix"] + VARIANTS + ["goal"], out))
        print("The whole cache's hit ratio (goals: guarantee, gatekeeper and protection within "
              "2 points of shared and above static; refault 3 points above shared and 1 above "
              "the best of static and the other policies).\n")
        out = []
        for mix in mixes:
            line = [mix]
            tv = {t["variant"]: t["hit_ratio"] for t in tot if t["mix"] == mix}
            for v in VARIANTS:
                if v not in tv:
                    line.append("-")
                elif v in POLICIES and "shared" in tv and "static" in tv:
                    line.append("%.3f (%+.1f / %+.1f)" % (tv[v], 100 * (tv[v] - tv["shared"]),
                                                         100 * (tv[v] - tv["static"])))
                else:
                    line.append("%.3f" % tv[v])
            met = [g["met"] for g in goals if g["mix"] == mix and g["goal"] != "keep_95pct_of_alone"]
            line.append("%d of %d met" % (sum(met), len(met)) if met else "-")
            out.append(line)
        print(table(["mix"] + VARIANTS + ["goals"], out))
        print("(in parentheses: points against shared / against static)\n")

    replay_tables(res)

    lease_tables(res)

    rows = load(os.path.join(res, "server.jsonl"))
    if rows:
        print("#### bench_server\n")
        keys = []
        for r in rows:
            for k in r:
                if k not in keys and k != "bench":
                    keys.append(k)
        print(table(keys, [[r.get(k, "") for k in keys] for r in rows]))


def ordered(values):
    """The distinct values, in the order they first appear."""
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def charge_lease_table(res):
    """bench_charge --lease-down (charge_lease.jsonl): a lease whose store is down."""
    rows = load(os.path.join(res, "charge_lease.jsonl"))
    ch = [r for r in rows if r.get("bench") == "charge_lease"]
    stores = ordered(r["store"] for r in ch)
    out = []
    for t in sorted({r["threads"] for r in ch}):
        line = [t]
        for s in stores:
            v = [r["ns_per_op"] for r in ch if r["threads"] == t and r["store"] == s]
            line.append("%.2f" % v[0] if v else "-")
        for s in stores[1:]:
            v = [r["value"] for r in rows if r.get("bench") == "charge_lease_ratio"
                 and r["threads"] == t and r["store"] == s]
            line.append("%.2f" % v[0] if v else "-")
        out.append(line)
    if not out:
        return
    print("#### bench_charge --lease-down: ns per pair, depth 4, default batch\n")
    print(table(["threads"] + ["store " + s for s in stores] + ["%s / none" % s for s in stores[1:]],
                out))


def handoff_tables(res):
    """bench_handoff: ns per item per variant and mode, then its ratios."""
    rows = load(os.path.join(res, "handoff.jsonl"))
    ho = [r for r in rows if r.get("bench") == "handoff"]
    keys = ordered((r["variant"], r["batch"] if r["variant"] == "softlimit" else "-") for r in ho)
    if not keys:
        return
    out = []
    for k in keys:
        line = [k[0], k[1]]
        cpu = []
        for mode in ("handoff", "roundtrip"):
            v = [r for r in ho if r["variant"] == k[0] and r["mode"] == mode
                 and (k[1] == "-" or r["batch"] == k[1])]
            line.append("%.2f" % v[0]["ns_per_item"] if v else "-")
            cpu += [x["cpu_min"] for x in v]
        line.append("%.2f" % min(cpu) if cpu else "-")
        out.append(line)
    print("#### bench_handoff: ns per item (depth 4, 64 units, ring of 1024)\n")
    print(table(["variant", "batch", "handoff", "round trip", "cpu min"], out))
    rat = [r for r in rows if r.get("bench") == "handoff_ratio"]
    if rat:
        print(table(["ratio", "value"], [[r["name"], "%.2f" % r["value"]] for r in rat]))


def full_tables(res):
    rows = full_rows(res)
    if not rows:
        return
    threads = sorted({r["threads"] for r in rows})
    for ten, sz in full_panels(rows):
        print("#### bench_full: tenants %s, item sizes %s (root max %d MiB)\n" % (
            ten, sz, rows[0]["budget"] >> 20))
        print("ns per charge / total Mops/s / failed charges (median of the runs; failures summed "
              "over them).\n")
        out = []
        for impl in full_impls(rows):
            line = [impl]
            for t in threads:
                v = [r for r in rows if r["tenants"] == ten and r["sizes"] == sz
                     and r["impl"] == impl and r["threads"] == t]
                line.append("%.0f / %.2f / %d" % (v[0]["ns_per_charge"], v[0]["ops_per_s"] / 1e6,
                                                   v[0]["failed"]) if v else "-")
            out.append(line)
        print(table(["impl"] + ["%d thread%s" % (t, "" if t == 1 else "s") for t in threads], out))
    goals = [r for r in load(os.path.join(res, "full.jsonl")) if r.get("bench") == "full_goal"]
    if goals:
        names = []
        for g in goals:
            if g["name"] not in names:
                names.append(g["name"])
        keys = []
        for g in goals:
            k = (g["impl"], g["tenants"], g["sizes"])
            if k not in keys:
                keys.append(k)
        print("#### bench_full: goals (issue \"Limit\"; **bold** = not met)\n")
        out = []
        for k in keys:
            line = list(k)
            for n in names:
                v = [g for g in goals if (g["impl"], g["tenants"], g["sizes"]) == k and g["name"] == n]
                if not v:
                    line.append("-")
                    continue
                cell = ("%d" % v[0]["value"]) if n == "failed" else ("%.2f" % v[0]["value"])
                line.append(cell if v[0]["met"] else "**%s**" % cell)
            out.append(line)
        goal_of = {g["name"]: g["goal"] for g in goals}
        print(table(["impl", "tenants", "sizes"] + ["%s (%s)" % (n, goal_of[n]) for n in names], out))


REPLAY_SERVERS = ["slcache-shared", "memcached", "slcache-guarantee", "slcache-noarenas-guarantee",
                  "slcache-gatekeeper", "slcache-protection", "slcache-refault"]


def replay_tables(res):
    """bench_replay.sh: the simulation and the servers, side by side per trace."""
    rows = load(os.path.join(res, "replay.jsonl"))
    sim = [r for r in rows if r.get("bench") == "isolation"]
    simtot = [r for r in rows if r.get("bench") == "isolation_total"]
    rep = [r for r in rows if r.get("bench") == "replay"]
    reptot = [r for r in rows if r.get("bench") == "replay_total"]
    traces = []
    for r in rep:
        if r["trace"] not in traces:
            traces.append(r["trace"])
    # (column title, simulated variant or None, server label or None)
    cols = [("sim shared", "shared", None), ("slcache shared", None, "slcache-shared"),
            ("memcached", None, "memcached")]
    for p in POLICIES:
        cols += [("sim " + p, p, None), ("slcache " + p, None, "slcache-" + p)]
        if p == "guarantee":
            cols.append(("slcache --no-arenas " + p, None, "slcache-noarenas-" + p))
    for tr in traces:
        mix = "trace:" + tr
        servers = [s for s in REPLAY_SERVERS if any(r["server"] == s for r in rep if r["trace"] == tr)]
        use = [c for c in cols if c[2] is None or c[2] in servers]
        tenants = []
        for r in rep:
            if r["trace"] == tr and r["tenant"] not in tenants:
                tenants.append(r["tenant"])
        t0 = next((t for t in reptot if t["trace"] == tr), None)
        head = "#### replay: %s" % tr
        if t0:
            head += " (%d requests, first %d not counted)" % (t0["requests"], t0["warmup"])
        print(head + "\n")
        print("Hit ratio on reads: bench_isolation's simulation (sim) and trace_replay against "
              "the servers.\n")
        out = []
        for t in tenants:
            line = [t]
            for _, v, srv in use:
                if v:
                    x = [r["hit_ratio"] for r in sim if r["mix"] == mix and r["variant"] == v
                         and r["tenant"] == t]
                else:
                    x = [r["hit_ratio"] for r in rep if r["trace"] == tr and r["server"] == srv
                         and r["tenant"] == t]
                line.append("%.3f" % x[0] if x and x[0] is not None else "-")
            out.append(line)
        line = ["**whole cache**"]
        for _, v, srv in use:
            if v:
                x = [r["hit_ratio"] for r in simtot if r["mix"] == mix and r["variant"] == v]
            else:
                x = [r["hit_ratio"] for r in reptot if r["trace"] == tr and r["server"] == srv]
            line.append("**%.3f**" % x[0] if x else "-")
        out.append(line)
        print(table(["tenant"] + [c[0] for c in use], out))
        lag = [(r["server"], r["max_lag_s"], r["req_per_s"]) for r in reptot if r["trace"] == tr]
        if lag:
            print("Replays: " + ", ".join("%s %.0f req/s (max lag %.2f s)" % (s, q_, l)
                                         for s, l, q_ in lag) + ".\n")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("plots", "tables"):
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "plots":
        plots(sys.argv[2])
    else:
        tables(sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
