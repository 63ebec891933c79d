#!/usr/bin/env python3
"""Where a kernel's warps stall, instruction by instruction, from ncu's source page.

Input: the CSV of `ncu -i REPORT.ncu-rep --page source --csv --print-source sass` (plain or .xz), from a
report taken with `--set full` (its warp-state sampling). Prints the instructions with the most samples,
the samples summed by opcode, and the per-reason sample columns summed over the kernel, so a profile says
which loop (producer copies, barrier waits, wgmma waits, softmax, epilogue) the time goes to.
Usage: scripts/ncu_sass_stalls.py ws_sass.csv[.xz] [top_n]
"""
import collections
import csv
import lzma
import re
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    path = sys.argv[1]
    top_n = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", errors="replace") as f:
        rows = list(csv.reader(f))
    head_at = next(i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r))
    head, data = rows[head_at], [r for r in rows[head_at + 1:] if len(r) == len(rows[head_at])]

    def column(name):
        exact = [i for i, c in enumerate(head) if c.strip() == name]
        if exact:
            return exact[0]
        loose = [i for i, c in enumerate(head) if name.lower() in c.lower()]
        return loose[0] if loose else None

    src, addr = column("Source"), column("Address")
    samples = column("Warp Stall Sampling (All Samples)")
    if samples is None:
        sys.exit("no 'Warp Stall Sampling (All Samples)' column: take the report with --set full")
    total = sum(number(r[samples]) for r in data) or 1.0
    print(f"{len(data)} instructions, {total:.0f} samples")
    for r in sorted(data, key=lambda r: -number(r[samples]))[:top_n]:
        where = r[addr] if addr is not None else ""
        print(f"{where:>8} {100 * number(r[samples]) / total:5.1f}%  {r[src][:100]}")
    by_opcode = collections.Counter()
    for r in data:
        opcode = re.sub(r"^@!?U?P\w+\s+", "", r[src].strip()).split(" ")[0]
        by_opcode[opcode] += number(r[samples])
    print("--- by opcode")
    for opcode, n in by_opcode.most_common(25):
        print(f"{opcode:28s} {100 * n / total:5.1f}%")
    print("--- by stall reason (sample columns)")
    reasons = []
    for i, c in enumerate(head):
        if i != samples and "stall" in c.lower() and "not-issued" not in c.lower():
            n = sum(number(r[i]) for r in data)
            if n > 0:
                reasons.append((n, c))
    for n, c in sorted(reasons, reverse=True)[:25]:
        print(f"{c[:72]:72s} {100 * n / total:5.1f}%")


if __name__ == "__main__":
    main()
