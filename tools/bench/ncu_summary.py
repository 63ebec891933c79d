#!/usr/bin/env python3
"""Summarises an `ncu --csv --metrics gpu__time_duration.sum` log: time per kernel name.

Usage: python3 tools/bench/ncu_summary.py ncu.csv [--steps N]
Prints, per kernel (demangled name shortened), the launch count, total and mean microseconds and
the share of the total, heaviest first. With --steps, totals are also given per step.
"""
import argparse
import collections
import csv
import io
import re


def short(name):
    name = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"<.*?>\(", "<>(", name)     # template arguments
    name = re.sub(r"\(.*", "", name)          # the argument list
    return name.split("::")[-1][:60]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=0)
    a = ap.parse_args()
    text = open(a.csv, errors="replace").read()
    start = text.find('"ID"')
    rows = csv.DictReader(io.StringIO(text[start:]))
    tot = collections.defaultdict(float)
    cnt = collections.Counter()
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        us = v / 1000.0 if unit.startswith("n") else (v if unit.startswith("u") else v * 1000.0)
        k = short(r["Kernel Name"])
        tot[k] += us
        cnt[k] += 1
    total = sum(tot.values())
    print(f"{'kernel':62} {'count':>6} {'total us':>10} {'mean us':>8} {'share':>6}" +
          (f" {'us/step':>8}" if a.steps else ""))
    for k, t in sorted(tot.items(), key=lambda kv: -kv[1]):
        line = f"{k:62} {cnt[k]:6d} {t:10.1f} {t / cnt[k]:8.2f} {100 * t / total:5.1f}%"
        if a.steps:
            line += f" {t / a.steps:8.1f}"
        print(line)
    print(f"{'total':62} {sum(cnt.values()):6d} {total:10.1f}")


if __name__ == "__main__":
    main()
