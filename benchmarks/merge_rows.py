#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""merge_rows.py RESULTS NEW WORKLOAD DEFAULT - a benchmark that ran one
workload: its JSON rows in NEW replace those of WORKLOAD in RESULTS (a row
without a "workload" field is of DEFAULT's), the other rows stay."""
import json
import sys


def main():
    results, new, workload, default = sys.argv[1:5]
    with open(results) as f:
        keep = [line for line in f
                if line.strip() and json.loads(line).get("workload", default) != workload]
    with open(new) as f:
        keep += [line for line in f if line.strip()]
    with open(results, "w") as f:
        f.writelines(keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
