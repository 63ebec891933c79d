#!/usr/bin/env python3
"""Long-context check: a --len-token sonnet prompt (default 32,000) served with chunked prefill on CUDA,
and its first --max-tokens greedy tokens compared with the CPU backend's. Stdlib only.

  # on the device, against the committed CPU reference (CUDA float32 and bfloat16 runs):
  python3 tools/parity/long_context.py --vireo build/vireo \
      --reference-json tests/fixtures/long_context/qwen3-0.6b_cpu_32000.json --cuda-dtype float32,bfloat16 \
      --output-json long.json
  # writing that reference (the CPU side only; ~an hour on a 2-core VM):
  python3 tools/parity/long_context.py --vireo build/vireo --devices cpu --len 32000 \
      --write-reference tests/fixtures/long_context/qwen3-0.6b_cpu_32000.json
  # both sides live, the CPU at a length fitted to a time budget:
  python3 tools/parity/long_context.py --vireo build/vireo --len 32000 --cpu-budget-s 180

Prompt: benchmarks/data/sonnet.txt repeated and tokenized by `vireo tokenize --tokenizer models/qwen3`,
cut to exactly --len ids (sha256 of the JSON id list recorded and checked against a reference), given
to `vireo generate --prompts-file` ({"prompt_ids": [...]}).
Runs `vireo generate --model builtin:qwen3-0.6b --load-format dummy --max-model-len 32768
--max-num-batched-tokens 8192 --temperature 0 --ignore-eos --max-tokens 16 --logprobs 5 --json` with
--device cuda --dtype <each of --cuda-dtype> and with --device cpu --dtype float32.
Dummy weights (model/dummy_weights.cc) are a counter-based function of (seed 0, tensor name, index),
generated on the host in the run's weight dtype: fp32 on the CPU and with CUDA --dtype float32 (the
same bits), the bf16 rounding of those values with --dtype bfloat16. So CUDA fp32 vs CPU differs only
in summation order; CUDA bf16 also in weight/activation/KV rounding, and may flip a near-tied greedy
token: every comparison reports the reference's top-1 margin (top-1 minus top-2 logprob) per position.
The CPU prefill of 32k tokens takes long: with --reference-json the reference side is read from a file
written once by --write-reference; with --cpu-budget-s S the tool first times the CPU at --probe-lens
(default 2048,4096), fits t = c + a*L + b*L^2 (c from a 16-token run) and compares at the longest
L <= --len (a multiple of 1024) predicted to fit in S seconds; the CUDA side then also runs at that L
(besides the full --len run, which proves the long prompt is served). --cpu-len L forces it.
Prints EXACT or the first mismatch position (with both sides' top-5 there) per compared run; exit 0
when all are EXACT, 1 on a mismatch, 2 on a setup error.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vireo", default=os.path.join(REPO, "build", "vireo"))
    p.add_argument("--model", default="builtin:qwen3-0.6b")
    p.add_argument("--tokenizer", default=os.path.join(REPO, "models", "qwen3"))
    p.add_argument("--dataset", default=os.path.join(REPO, "benchmarks", "data", "sonnet.txt"))
    p.add_argument("--len", type=int, default=32000, help="prompt tokens of the CUDA run")
    p.add_argument("--max-model-len", type=int, default=32768)
    p.add_argument("--max-num-batched-tokens", type=int, default=8192, help="prefill chunk size")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--cuda-dtype", default="bfloat16", help="comma list: one device-under-test run per dtype")
    p.add_argument("--cpu-len", type=int, help="prompt tokens of the comparison (default: --len, or the budget's)")
    p.add_argument("--cpu-budget-s", type=float, help="fit the CPU comparison run into about this many seconds")
    p.add_argument("--probe-lens", default="2048,4096")
    p.add_argument("--devices", default="cuda,cpu", help="first = device under test, second = reference")
    p.add_argument("--reference-json", help="compare against this file (from --write-reference) instead of "
                   "running the reference device; --len/--max-tokens/shape options come from the file")
    p.add_argument("--write-reference", help="run only the reference device (the last of --devices) at --len "
                   "and write its tokens and top-5 logprobs here")
    p.add_argument("--cpu-kv-cache-bytes", type=int, default=16 << 30,
                   help="--kv-cache-memory-bytes of CPU runs (allocated lazily; 32k tokens of the 0.6B shape "
                   "in fp32 touch 7 GiB)")
    p.add_argument("--source-commit", help="with --write-reference: the commit the vireo binary was built from "
                   "(default: this checkout's HEAD, '-dirty' when tracked files differ)")
    p.add_argument("--output-json")
    p.add_argument("--timeout", type=float, default=3600, help="per vireo generate run")
    return p.parse_args(argv)


def make_prompt(args, n):
    with open(args.dataset, encoding="utf-8") as f:
        text = f.read()
    ids = []
    reps = 1
    while len(ids) < n:
        reps *= 2
        doc = "\n".join([text] * reps)
        proc = subprocess.run([args.vireo, "tokenize", "--tokenizer", args.tokenizer, "--jsonl"],
                              input=json.dumps(doc) + "\n", capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"vireo tokenize failed: {proc.stderr[-2000:]}")
        ids = json.loads(proc.stdout.strip().splitlines()[0])
    return ids[:n]


def prompt_sha256(ids):
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()


def generate_cmd(args, prompts_file, device, dtype=None, max_tokens=None):
    cmd = [args.vireo, "generate", "--model", args.model, "--load-format", "dummy", "--tokenizer", args.tokenizer,
           "--device", device, "--max-model-len", str(args.max_model_len),
           "--max-num-batched-tokens", str(args.max_num_batched_tokens), "--max-num-seqs", "1",
           "--prompts-file", prompts_file, "--max-tokens", str(max_tokens or args.max_tokens), "--temperature", "0",
           "--ignore-eos", "--logprobs", "5", "--json"]
    # The CPU backend caps its KV cache at 4 GiB unless told: a 32k-token fp32 cache of the 0.6B shape is 7 GiB.
    if device == "cpu":
        cmd += ["--dtype", "float32", "--kv-cache-memory-bytes", str(args.cpu_kv_cache_bytes)]
    else:
        cmd += ["--dtype", dtype or args.cuda_dtype.split(",")[0]]
    return cmd


def generate(args, ids, device, workdir, max_tokens=None, dtype=None):
    """(record, wall seconds) of one greedy `vireo generate` run."""
    pf = os.path.join(workdir, f"prompt-{len(ids)}.jsonl")
    with open(pf, "w") as f:
        f.write(json.dumps({"prompt_ids": ids}) + "\n")
    cmd = generate_cmd(args, pf, device, dtype, max_tokens)
    print(f"+ {' '.join(cmd)}   # prompt of {len(ids)} tokens", file=sys.stderr, flush=True)
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    wall = time.time() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"vireo generate ({device}, {len(ids)} tokens) failed ({proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}")
    recs = [json.loads(l) for l in proc.stdout.splitlines() if l.strip().startswith("{")]
    if len(recs) != 1:
        raise RuntimeError(f"expected one JSON record, got {len(recs)}:\n{proc.stdout[-2000:]}")
    rec = recs[0].get("output", recs[0])
    print(f"  {device}{'' if device == 'cpu' else ' ' + cmd[cmd.index('--dtype') + 1]}: {len(ids)} tokens in "
          f"{wall:.1f} s -> {rec.get('token_ids')}", file=sys.stderr, flush=True)
    return rec, wall


def top5(rec, pos, digits=4):
    lps = rec.get("logprobs") or []
    if pos >= len(lps) or not isinstance(lps[pos], dict):
        return None
    top = lps[pos].get("top_logprobs", lps[pos].get("top"))
    if isinstance(top, dict):
        top = sorted(((int(k), v) for k, v in top.items()), key=lambda kv: -kv[1])
    return [[int(t[0]), round(float(t[1]), digits)] if not isinstance(t, dict) else
            [int(t.get("token_id", t.get("id"))), round(float(t["logprob"]), digits)] for t in (top or [])]


def margins(top5s):
    """Top-1 minus top-2 logprob per position (None where fewer than 2 are known)."""
    return [round(t[0][1] - t[1][1], 6) if t and len(t) > 1 else None for t in top5s]


def fit_len(args, workdir, prompt):
    """Times the CPU; returns (length, fit details) predicted to fit args.cpu_budget_s."""
    dev = args.devices.split(",")[1]
    _, c = generate(args, prompt[:16], dev, workdir)
    pts = []
    for L in [int(x) for x in args.probe_lens.split(",")]:
        _, t = generate(args, prompt[:L], dev, workdir)
        pts.append((L, max(t - c, 1e-3)))
    (l1, t1), (l2, t2) = pts[0], pts[-1]
    # t = a L + b L^2 through both points (b >= 0; else linear through the longer one)
    b = (t2 / l2 - t1 / l1) / (l2 - l1) if l2 != l1 else 0.0
    a = t1 / l1 - b * l1
    if b < 0 or a < 0:
        a, b = t2 / l2, 0.0
    predict = lambda L: c + a * L + b * L * L  # noqa: E731
    best = 1024
    for L in range(1024, args.len + 1, 1024):
        if predict(L) <= args.cpu_budget_s:
            best = L
    if predict(args.len) <= args.cpu_budget_s:
        best = args.len
    info = {"startup_s": round(c, 2), "probes": [[L, round(t + c, 2)] for L, t in pts], "a_s_per_token": a,
            "b_s_per_token2": b, "predicted_s_at_len": round(predict(args.len), 1),
            "chosen_len": best, "predicted_s_at_chosen": round(predict(best), 1)}
    print(f"  cpu fit: {info}", file=sys.stderr, flush=True)
    return best, info


def main(argv):
    args = parse_args(argv)
    devs = args.devices.split(",")
    test_dev, ref_dev = devs[0], devs[-1]
    workdir = tempfile.mkdtemp(prefix="vireo-long-")
    try:
        if args.write_reference:
            return write_reference(args, ref_dev, workdir)
        if args.reference_json:
            return run_against_reference(args, test_dev, workdir)
        return run(args, test_dev, ref_dev, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def git_commit():
    if args_source_commit[0]:
        return args_source_commit[0]
    try:
        out = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except OSError:
        return "unknown"


args_source_commit = [None]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def write_reference(args, ref_dev, workdir):
    """The reference device's greedy run at --len, stored with what the comparison needs."""
    args_source_commit[0] = args.source_commit
    prompt = make_prompt(args, args.len)
    print(f"prompt: {len(prompt)} tokens of {os.path.basename(args.dataset)}, sha256 {prompt_sha256(prompt)}",
          file=sys.stderr)
    started = datetime.datetime.now(datetime.timezone.utc)
    rec, wall = generate(args, prompt, ref_dev, workdir)
    tops = [top5(rec, i, 6) for i in range(len(rec.get("token_ids") or []))]
    cmd = generate_cmd(args, "PROMPT.jsonl", ref_dev)
    cmd[0] = "vireo"
    cmd[cmd.index("--tokenizer") + 1] = os.path.relpath(args.tokenizer, REPO)
    doc = {
        "what": "greedy reference for tools/parity/long_context.py --reference-json",
        "model": args.model, "len": len(prompt), "max_tokens": args.max_tokens,
        "max_model_len": args.max_model_len, "max_num_batched_tokens": args.max_num_batched_tokens,
        "dataset": os.path.relpath(args.dataset, REPO), "tokenizer": os.path.relpath(args.tokenizer, REPO),
        "prompt_sha256": prompt_sha256(prompt), "prompt_head": prompt[:8], "prompt_tail": prompt[-8:],
        "device": ref_dev, "dtype": "float32" if ref_dev == "cpu" else args.cuda_dtype.split(",")[0],
        "command": " ".join(cmd) + "   # PROMPT.jsonl: one line {\"prompt_ids\": [the len ids]}",
        "token_ids": rec.get("token_ids"),
        "logprobs": [round(float(x["logprob"]), 6) for x in (rec.get("logprobs") or [])],
        "top5": tops, "top1_margin": margins(tops),
        "git_commit": git_commit(), "date": started.isoformat(timespec="seconds"), "wall_s": round(wall, 1),
        "host": {"cpus": os.cpu_count(), "cpu": cpu_name(),
                 "env": {k: v for k, v in os.environ.items() if k.startswith(("OPENBLAS_", "OMP_"))}},
    }
    with open(args.write_reference, "w") as f:  # one key a line
        f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items()) + "\n}\n")
    print(f"reference: {len(prompt)}-token prompt on {ref_dev} in {wall:.1f} s -> {doc['token_ids']}; "
          f"top-1 margins {doc['top1_margin']}")
    return 0


def compare(label, ref_label, rec, ref_tokens, ref_tops, max_tokens, cmp_len):
    """(result dict, one-line verdict) of one run's greedy tokens against the reference's."""
    a, b = rec.get("token_ids") or [], ref_tokens or []
    n = min(len(a), len(b), max_tokens)
    first = next((i for i in range(n) if a[i] != b[i]), None)
    test_tops = [top5(rec, i, 6) for i in range(len(a))]
    ref_margins = margins(ref_tops)
    upto = n if first is None else first + 1
    lp_diff = [abs(t[0][1] - r[0][1]) for t, r in zip(test_tops[:upto], ref_tops[:upto])
               if t and r and t[0][0] == r[0][0]]
    res = {"len": cmp_len, "test_tokens": a, "ref_tokens": b, "compared": n, "first_mismatch": first,
           "ref_top1_margin": ref_margins[:n], "test_top1_margin": margins(test_tops)[:n],
           "max_abs_top1_logprob_diff": round(max(lp_diff), 6) if lp_diff else None}
    shown = [m for m in ref_margins[:upto] if m is not None]
    if first is None and n == max_tokens:
        res["verdict"] = "EXACT"
        line = (f"EXACT: first {n} greedy tokens of {label} == {ref_label} at a {cmp_len}-token prompt "
                f"(reference top-1 margin min {min(shown):.4f}, max |top-1 logprob diff| "
                f"{res['max_abs_top1_logprob_diff']})" if shown else
                f"EXACT: first {n} greedy tokens of {label} == {ref_label} at a {cmp_len}-token prompt")
    else:
        res["verdict"] = "MISMATCH"
        at = first or 0
        res["test_top5_at_mismatch"] = top5(rec, at)
        res["ref_top5_at_mismatch"] = [[t, round(v, 4)] for t, v in ref_tops[at]] if at < len(ref_tops) \
            and ref_tops[at] else None
        m = ref_margins[at] if at < len(ref_margins) else None
        line = (f"MISMATCH at position {first} of {n} ({label} {a[first] if first is not None else '-'}, "
                f"{ref_label} {b[first] if first is not None else '-'}) at a {cmp_len}-token prompt; top-5 "
                f"{label} {res['test_top5_at_mismatch']} / {ref_label} {res['ref_top5_at_mismatch']}; "
                f"reference top-1 margin there {m}, at the positions before "
                f"{[round(x, 4) for x in ref_margins[:at] if x is not None]}")
    return res, line


def run_against_reference(args, test_dev, workdir):
    with open(args.reference_json) as f:
        ref = json.load(f)
    # The reference fixes the shape of the run.
    args.len, args.max_tokens = ref["len"], ref["max_tokens"]
    args.max_model_len, args.max_num_batched_tokens = ref["max_model_len"], ref["max_num_batched_tokens"]
    if ref["model"] != args.model:
        raise ValueError(f"{args.reference_json} is for --model {ref['model']}, not {args.model}")
    prompt = make_prompt(args, args.len)
    if prompt_sha256(prompt) != ref["prompt_sha256"]:
        raise ValueError(f"the {len(prompt)}-token prompt's sha256 {prompt_sha256(prompt)} differs from the "
                         f"reference's {ref['prompt_sha256']} (dataset or tokenizer changed?)")
    print(f"prompt: {len(prompt)} tokens of {os.path.basename(args.dataset)}, sha256 matches {args.reference_json}",
          file=sys.stderr)
    ref_label = f"{ref['device']} {ref['dtype']} ref"
    print(f"reference: {ref['device']} {ref['dtype']}, {ref['git_commit']}, {ref['date']}, {ref['wall_s']:.0f} s, "
          f"tokens {ref['token_ids']}, top-1 margins {ref['top1_margin']}")
    doc = {"model": args.model, "len": args.len, "max_tokens": args.max_tokens, "reference_json": args.reference_json,
           "reference": {k: ref[k] for k in ("device", "dtype", "git_commit", "date", "wall_s", "token_ids",
                                              "top1_margin")}, "runs": []}
    lines, ok = [], True
    for dtype in args.cuda_dtype.split(","):
        rec, wall = generate(args, prompt, test_dev, workdir, dtype=dtype)
        label = f"{test_dev} {dtype}" if test_dev != "cpu" else "cpu float32"
        res, line = compare(label, ref_label, rec, ref["token_ids"], ref["top5"], args.max_tokens, args.len)
        res.update({"device": test_dev, "dtype": dtype, "wall_s": round(wall, 2)})
        doc["runs"].append(res)
        lines.append(f"{line} ({label} {wall:.1f} s)")
        ok = ok and res["verdict"] == "EXACT"
    doc["verdict"] = "EXACT" if ok else "MISMATCH"
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump(doc, f, indent=2)
    print("\n".join(lines))
    return 0 if ok else 1


def run(args, test_dev, ref_dev, workdir):
    prompt = make_prompt(args, args.len)
    print(f"prompt: {len(prompt)} tokens of {os.path.basename(args.dataset)}", file=sys.stderr)
    dtypes = args.cuda_dtype.split(",")
    doc = {"model": args.model, "len": args.len, "max_tokens": args.max_tokens, "cuda_dtype": args.cuda_dtype,
           "devices": [test_dev, ref_dev]}
    fulls = {d: generate(args, prompt, test_dev, workdir, dtype=d) for d in dtypes}
    doc["full_runs"] = [{"device": test_dev, "dtype": d, "len": args.len, "wall_s": round(t, 2),
                         "token_ids": r.get("token_ids")} for d, (r, t) in fulls.items()]
    if args.cpu_len:
        cmp_len = min(args.cpu_len, args.len)
    elif args.cpu_budget_s:
        cmp_len, doc["cpu_fit"] = fit_len(args, workdir, prompt)
    else:
        cmp_len = args.len
    ref, t_ref = generate(args, prompt[:cmp_len], ref_dev, workdir)
    ref_tops = [top5(ref, i, 6) for i in range(len(ref.get("token_ids") or []))]
    doc["ref_wall_s"], doc["runs"], lines, ok = round(t_ref, 2), [], [], True
    for d in dtypes:
        full, t_full = fulls[d]
        test = full if cmp_len == args.len else generate(args, prompt[:cmp_len], test_dev, workdir, dtype=d)[0]
        label = f"{test_dev} {d}" if test_dev != "cpu" else "cpu float32"
        res, line = compare(label, ref_dev, test, ref.get("token_ids"), ref_tops, args.max_tokens, cmp_len)
        res["dtype"] = d
        doc["runs"].append(res)
        if cmp_len < args.len:
            line += (f" (the {args.len}-token prompt was served on {label} in {t_full:.1f} s; the {ref_dev} "
                     f"comparison is shorter to fit the time budget)")
        else:
            line += f" ({label} {t_full:.1f} s, {ref_dev} {t_ref:.1f} s)"
        lines.append(line)
        ok = ok and res["verdict"] == "EXACT"
    doc["verdict"] = "EXACT" if ok else "MISMATCH"
    print("\n".join(lines))
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        print(f"long_context: {e}", file=sys.stderr)
        sys.exit(2)
