#!/usr/bin/env python3
"""Long-context check: a --len-token sonnet prompt (default 32,000) served with chunked prefill on CUDA,
and its first --max-tokens greedy tokens compared with the CPU backend's. Stdlib only.

  python3 tools/parity/long_context.py --vireo build/vireo --len 32000 --cpu-budget-s 180 \\
      --output-json long.json

Prompt: benchmarks/data/sonnet.txt repeated and tokenized by `vireo tokenize --tokenizer models/qwen3`,
cut to exactly --len ids, given to `vireo generate --prompts-file` ({"prompt_ids": [...]}).
Runs `vireo generate --model builtin:qwen3-0.6b --load-format dummy --max-model-len 32768
--max-num-batched-tokens 8192 --temperature 0 --ignore-eos --max-tokens 16 --logprobs 5 --json` with
--device cuda --dtype <--cuda-dtype> and with --device cpu (float32; the dummy weights are the same
bf16-rounded values on both backends).
The CPU prefill of 32k tokens can take many minutes: with --cpu-budget-s S the tool first times the CPU
at --probe-lens (default 2048,4096), fits t = c + a*L + b*L^2 (c from a 16-token run) and compares at the
longest L <= --len (a multiple of 1024) predicted to fit in S seconds; the CUDA side then also runs at
that L (besides the full --len run, which proves the long prompt is served). --cpu-len L forces it.
Prints EXACT or the first mismatch position (with both sides' top-5 there); exit 0 on EXACT, 1 on a
mismatch, 2 on a setup error.
"""
from __future__ import annotations

import argparse
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
    p.add_argument("--cuda-dtype", default="bfloat16")
    p.add_argument("--cpu-len", type=int, help="prompt tokens of the comparison (default: --len, or the budget's)")
    p.add_argument("--cpu-budget-s", type=float, help="fit the CPU comparison run into about this many seconds")
    p.add_argument("--probe-lens", default="2048,4096")
    p.add_argument("--devices", default="cuda,cpu", help="first = device under test, second = reference")
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


def generate(args, ids, device, workdir, max_tokens=None):
    """(record, wall seconds) of one greedy `vireo generate` run."""
    pf = os.path.join(workdir, f"prompt-{len(ids)}.jsonl")
    with open(pf, "w") as f:
        f.write(json.dumps({"prompt_ids": ids}) + "\n")
    cmd = [args.vireo, "generate", "--model", args.model, "--load-format", "dummy", "--tokenizer", args.tokenizer,
           "--device", device, "--max-model-len", str(args.max_model_len),
           "--max-num-batched-tokens", str(args.max_num_batched_tokens), "--max-num-seqs", "1",
           "--prompts-file", pf, "--max-tokens", str(max_tokens or args.max_tokens), "--temperature", "0",
           "--ignore-eos", "--logprobs", "5", "--json"]
    # The CPU backend caps its KV cache at 4 GiB unless told: a 32k-token fp32 cache of the 0.6B shape is 7 GiB.
    cmd += ["--dtype", args.cuda_dtype] if device == "cuda" else ["--dtype", "float32", "--kv-cache-memory-bytes",
                                                                  str(16 << 30)]
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
    print(f"  {device}: {len(ids)} tokens in {wall:.1f} s -> {rec.get('token_ids')}", file=sys.stderr, flush=True)
    return rec, wall


def top5(rec, pos):
    lps = rec.get("logprobs") or []
    if pos >= len(lps) or not isinstance(lps[pos], dict):
        return None
    top = lps[pos].get("top_logprobs", lps[pos].get("top"))
    if isinstance(top, dict):
        top = sorted(((int(k), v) for k, v in top.items()), key=lambda kv: -kv[1])
    return [[int(t[0]), round(float(t[1]), 4)] if not isinstance(t, dict) else
            [int(t.get("token_id", t.get("id"))), round(float(t["logprob"]), 4)] for t in (top or [])]


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
    test_dev, ref_dev = args.devices.split(",")
    workdir = tempfile.mkdtemp(prefix="vireo-long-")
    try:
        return run(args, test_dev, ref_dev, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run(args, test_dev, ref_dev, workdir):
    prompt = make_prompt(args, args.len)
    print(f"prompt: {len(prompt)} tokens of {os.path.basename(args.dataset)}", file=sys.stderr)
    doc = {"model": args.model, "len": args.len, "max_tokens": args.max_tokens, "cuda_dtype": args.cuda_dtype,
           "devices": [test_dev, ref_dev]}
    full, t_full = generate(args, prompt, test_dev, workdir)
    doc["full_run"] = {"device": test_dev, "len": args.len, "wall_s": round(t_full, 2),
                       "token_ids": full.get("token_ids")}
    if args.cpu_len:
        cmp_len = min(args.cpu_len, args.len)
    elif args.cpu_budget_s:
        cmp_len, doc["cpu_fit"] = fit_len(args, workdir, prompt)
    else:
        cmp_len = args.len
    test = full if cmp_len == args.len else generate(args, prompt[:cmp_len], test_dev, workdir)[0]
    ref, t_ref = generate(args, prompt[:cmp_len], ref_dev, workdir)
    a, b = test.get("token_ids") or [], ref.get("token_ids") or []
    n = min(len(a), len(b), args.max_tokens)
    first = next((i for i in range(n) if a[i] != b[i]), None)
    doc["compare"] = {"len": cmp_len, "ref_wall_s": round(t_ref, 2), "test_tokens": a, "ref_tokens": b,
                      "compared": n, "first_mismatch": first}
    if first is None and n == args.max_tokens:
        verdict = "EXACT"
        line = f"EXACT: first {n} greedy tokens of {test_dev} == {ref_dev} at a {cmp_len}-token prompt"
    else:
        verdict = "MISMATCH"
        doc["compare"]["test_top5_at_mismatch"] = top5(test, first or 0)
        doc["compare"]["ref_top5_at_mismatch"] = top5(ref, first or 0)
        line = (f"MISMATCH at position {first} of {n} ({test_dev} {a[first] if first is not None else '-'}, "
                f"{ref_dev} {b[first] if first is not None else '-'}) at a {cmp_len}-token prompt; top-5 "
                f"{test_dev} {doc['compare']['test_top5_at_mismatch']} / {ref_dev} "
                f"{doc['compare']['ref_top5_at_mismatch']}")
    doc["verdict"] = verdict
    if cmp_len < args.len:
        line += f" (the {args.len}-token prompt was served on {test_dev} in {t_full:.1f} s; the {ref_dev} " \
                f"comparison is shorter to fit the time budget)"
    else:
        line += f" ({test_dev} {t_full:.1f} s, {ref_dev} {t_ref:.1f} s)"
    print(line)
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0 if verdict == "EXACT" else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        print(f"long_context: {e}", file=sys.stderr)
        sys.exit(2)
