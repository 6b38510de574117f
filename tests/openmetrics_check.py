#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""openmetrics_check.py DUMPER - run tests/openmetrics_dump (DUMPER), parse
its OpenMetrics output with python3-prometheus-client's strict OpenMetrics
parser, and check it against the JSON dump of the same tree:

- the text parses (HELP, TYPE, UNIT, "# EOF", escaping, +Inf);
- there is one family per counter and limit of struct sl_stats, with the
  expected type and unit, and each family has exactly one sample per group;
- the "group" label is "/" plus the group's path, and every value equals the
  JSON dump's (a limit of "max" in JSON is +Inf);
- every family is nonzero for some group, so the scenario exercises them all.

Exits 77 (ctest's skip) when the parser is not installed.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError:
    print("openmetrics_check: python3-prometheus-client is not installed: skipped")
    sys.exit(77)

# family -> (type, unit, JSON key path)
FAMILIES = {
    "softlimit_usage_bytes": ("gauge", "bytes", ("usage",)),
    "softlimit_stocked_bytes": ("gauge", "bytes", ("stocked",)),
    "softlimit_peak_bytes": ("gauge", "bytes", ("peak",)),
    "softlimit_min_bytes": ("gauge", "bytes", ("min",)),
    "softlimit_soft_bytes": ("gauge", "bytes", ("soft",)),
    "softlimit_high_bytes": ("gauge", "bytes", ("high",)),
    "softlimit_max_bytes": ("gauge", "bytes", ("max",)),
    "softlimit_effective_min_bytes": ("gauge", "bytes", ("emin",)),
    "softlimit_effective_soft_bytes": ("gauge", "bytes", ("esoft",)),
    "softlimit_low_events": ("counter", "", ("events", "low")),
    "softlimit_high_events": ("counter", "", ("events", "high")),
    "softlimit_max_events": ("counter", "", ("events", "max")),
    "softlimit_oom_events": ("counter", "", ("events", "oom")),
    "softlimit_reclaimed_bytes": ("counter", "bytes", ("reclaimed",)),
    "softlimit_refaults": ("counter", "", ("refaults",)),
}


def fail(msg):
    print("openmetrics_check: FAIL: " + msg)
    sys.exit(1)


def main():
    if len(sys.argv) != 2:
        fail("usage: openmetrics_check.py DUMPER")
    with tempfile.TemporaryDirectory() as tmp:
        om_file, json_file = os.path.join(tmp, "dump.om"), os.path.join(tmp, "dump.json")
        subprocess.run([sys.argv[1], om_file, json_file], check=True)
        with open(om_file, "rb") as f:
            om_bytes = f.read()
        with open(json_file, "rb") as f:
            # Group names may hold bytes that are not UTF-8; the OpenMetrics
            # dump writes each as U+FFFD, as this decoding does.
            js = json.loads(f.read().decode("utf-8", errors="replace"))

    try:
        text = om_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("the dump is not UTF-8: %s" % e)
    if not text.endswith("# EOF\n"):
        fail("the dump does not end with '# EOF'")
    try:
        families = {f.name: f for f in text_string_to_metric_families(text)}
    except ValueError as e:
        fail("the OpenMetrics parser rejects the dump: %s" % e)

    groups = {"/" + g["path"]: g for g in js["groups"]}
    if len(groups) < 4:
        fail("the JSON dump has %d groups, the scenario makes 5" % len(groups))

    info = families.pop("softlimit_tree", None)
    if info is None or info.type != "info":
        fail("no softlimit_tree info family")
    if [s.labels.get("policy") for s in info.samples] != [js["policy"]]:
        fail("softlimit_tree_info's policy is not %r" % js["policy"])

    if set(families) != set(FAMILIES):
        fail("families %s, expected %s" % (sorted(families), sorted(FAMILIES)))
    for name, (mtype, unit, key) in FAMILIES.items():
        fam = families[name]
        if fam.type != mtype or fam.unit != unit or not fam.documentation:
            fail("%s: type %r unit %r help %r" % (name, fam.type, fam.unit, fam.documentation))
        want_sample = name + ("_total" if mtype == "counter" else "")
        seen = {}
        for s in fam.samples:
            if s.name != want_sample or set(s.labels) != {"group"}:
                fail("%s: unexpected sample %s%s" % (name, s.name, s.labels))
            if s.labels["group"] in seen:
                fail("%s: group %r twice" % (name, s.labels["group"]))
            seen[s.labels["group"]] = s.value
        if set(seen) != set(groups):
            fail("%s: groups %s, JSON has %s" % (name, sorted(seen), sorted(groups)))
        nonzero = False
        for path, g in groups.items():
            want = g
            for k in key:
                want = want[k]
            want = math.inf if want == "max" else float(want)
            if seen[path] != want:
                fail("%s{group=%r} is %r, JSON says %r" % (name, path, seen[path], want))
            nonzero = nonzero or want != 0
        if not nonzero:
            fail("%s is 0 for every group: the scenario does not exercise it" % name)
    print("openmetrics_check: %d families, %d groups, all values match the JSON dump"
          % (len(FAMILIES) + 1, len(groups)))


if __name__ == "__main__":
    main()
