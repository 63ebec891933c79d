#!/usr/bin/env python3
"""Time share of each kernel in an ncu per-launch CSV (where a serving step's GPU time goes).

Usage (on the GPU machine):
  ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
      --launch-skip 40000 --launch-count 3000 vireo bench throughput ... > launches.csv
  python3 scripts/ncu_kernel_shares.py launches.csv
Kernels are grouped by name (template arguments cut to 60 characters); ncu serialises them, so the shares
are of kernel time, not of wall time.
"""
import collections
import csv
import re
import sys


def short_name(name):
    base = re.sub(r"\(.*", "", name)
    head = re.sub(r"<.*", "", base)[:48]
    return head + ("<" + re.sub(r"^[^<]*<", "", base)[:60] if "<" in base else "")


def main(path):
    lines = [l for l in open(path, errors="replace") if l.startswith('"')]
    total, count, grid = collections.defaultdict(float), collections.Counter(), {}
    for row in csv.DictReader(lines):
        try:
            ns = float(row["gpu__time_duration.sum"].replace(",", ""))
        except (KeyError, ValueError):
            continue  # the units row
        k = short_name(row["Kernel Name"])
        total[k] += ns
        count[k] += 1
        grid[k] = row.get("Grid Size", "")
    s = sum(total.values()) or 1.0
    print(f"total {s / 1e3:.1f} us over {sum(count.values())} launches")
    for k, ns in sorted(total.items(), key=lambda kv: -kv[1])[:40]:
        print(f"{100 * ns / s:5.1f}%  {ns / 1e3:10.1f} us  n={count[k]:5d}  avg {ns / count[k] / 1e3:8.1f} us  "
              f"grid {grid[k]}  {k}")


if __name__ == "__main__":
    main(sys.argv[1])
