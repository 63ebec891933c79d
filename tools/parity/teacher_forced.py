#!/usr/bin/env python3
"""Teacher-forced logits: transformers in float32 (reference) vs `vireo serve` per device/dtype.

Every prompt is fed whole (teacher forcing: the prompt is its own continuation). At each position i
both sides give log_softmax over the vocabulary for the token at i+1; the tool compares
  - the log-probability of the actual next token (max / mean |ref - vireo|),
  - the top-1 token (agreement rate) and its log-probability (max / mean |ref - vireo|),
and reports the reference's top-1 margins (top-1 minus top-2 log-probability; min / median, and the
largest margin at which the top-1 disagreed: small means only near-ties flip).

  python3 tools/parity/teacher_forced.py --preset qwen3-0.6b --runs cuda:bfloat16,cpu:float32 \\
      --output-md tf-0.6b.md --output-json tf-0.6b.json
  python3 tools/parity/teacher_forced.py --config-json benchmarks/configs/llama3-small.json \\
      --runs cuda:bfloat16 -- --tokenizer models/qwen3

Model and prompts as in parity.py (same helpers): a preset / --config-json random-initialised with
normal(0, --initializer-range 0.1) and --seed, saved in float32; --num-prompts sonnet lines (each
prompt joins --lines-per-prompt of them) or random ids for a model without a tokenizer.
Vireo side: for each --runs entry DEVICE:DTYPE, a `vireo serve --device DEVICE --dtype DTYPE` on
the float32 checkpoint, queried with /v1/completions {prompt: ids, echo, logprobs: top-k,
max_tokens: 1} (the prompt's logprobs); top-1 tokens are compared as the server's token strings
(/detokenize of the reference's top-1 id). Arguments after "--" go to every `vireo serve`.

Without torch: --skip-reference compares each run against the first one (e.g. --runs
cpu:float32,cpu:float32); --fixture tests/fixtures/model/qwen3 uses the fp32 transformers logits
stored there as the reference (a self-test of the whole pipeline on the CPU).
Exit status: 0 on success (the figures are a report, not a pass/fail), 2 on a setup error.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402  (PRESETS, build_random_model, make_prompts)

REPO = parity.REPO


def parse_args(argv):
    argv, passthrough = parity.split_passthrough(argv)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="HF model folder (config.json + safetensors)")
    p.add_argument("--preset", choices=sorted(parity.PRESETS))
    p.add_argument("--arch", help="architecture name for --config-json")
    p.add_argument("--config-json", help="config.json of a random-initialised model")
    p.add_argument("--tokenizer", help="folder with tokenizer.json for the prompts (default: the model's / preset's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--initializer-range", type=float, default=0.1)
    p.add_argument("--num-prompts", type=int, default=8)
    p.add_argument("--lines-per-prompt", type=int, default=4, help="sonnet lines joined into one prompt")
    p.add_argument("--prompt-len", type=int, default=64, help="length of random token-id prompts")
    p.add_argument("--dataset", default=os.path.join(REPO, "benchmarks", "data", "sonnet.txt"))
    p.add_argument("--device", default=None, help="reference device (default cuda if available)")
    p.add_argument("--runs", default="cuda:bfloat16,cpu:float32", help="vireo DEVICE:DTYPE list")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--vireo", default=os.path.join(REPO, "build", "vireo"))
    p.add_argument("--serve-timeout", type=float, default=900, help="seconds to wait for /health")
    p.add_argument("--output-md")
    p.add_argument("--output-json")
    p.add_argument("--keep-model", help="save the random-initialised model here instead of a temp folder")
    p.add_argument("--skip-reference", action="store_true", help="no torch: the first run is the reference")
    p.add_argument("--fixture", help="self-test: a tests/fixtures/model/<arch> folder (its reference.json)")
    args = p.parse_args(argv)
    args.passthrough = passthrough
    args.runs = [tuple(r.split(":", 1)) if ":" in r else (r, "auto") for r in args.runs.split(",") if r]
    sources = sum(x is not None for x in (args.model, args.preset, args.config_json, args.fixture))
    if sources != 1:
        p.error("give exactly one of: a model folder, --preset, --config-json, --fixture")
    if args.skip_reference and len(args.runs) < 2:
        p.error("--skip-reference needs two or more --runs (the first is the reference)")
    return args


# ------------------------------------------------------------------------------------------ records
# One position: {"actual": logprob of the actual next token, "top1": token string or id,
#                "top1_lp": ..., "top2_lp": ... (None if unknown)}


def log_softmax(row):
    m = max(row)
    s = math.log(sum(math.exp(x - m) for x in row)) + m
    return [x - s for x in row]


def reference_from_logits(prompt, logits_rows):
    """Records for positions 0..L-2 from fp32 logits rows (row i predicts prompt[i+1])."""
    recs = []
    for i in range(len(prompt) - 1):
        lp = log_softmax(logits_rows[i])
        order = sorted(range(len(lp)), key=lambda j: -lp[j])[:2]
        recs.append({"actual": lp[prompt[i + 1]], "top1": order[0], "top1_lp": lp[order[0]],
                     "top2_lp": lp[order[1]]})
    return recs


def reference_torch(model_dir, prompts, device):
    """transformers float32, one full forward per prompt."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    model = parity._with_dtype(AutoModelForCausalLM.from_pretrained, model_dir, torch.float32).to(device).eval()
    out = []
    with torch.no_grad():
        for ids in prompts:
            logits = model(input_ids=torch.tensor([ids], device=device)).logits[0].float()
            lp = torch.log_softmax(logits, dim=-1)
            nxt = torch.tensor(ids[1:], device=device)
            actual = lp[:-1].gather(1, nxt[:, None])[:, 0]
            vals, idx = torch.topk(lp[:-1], 2, dim=-1)
            out.append([{"actual": float(a), "top1": int(i[0]), "top1_lp": float(v[0]), "top2_lp": float(v[1])}
                        for a, v, i in zip(actual.tolist(), vals.tolist(), idx.tolist())])
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------------------------------- vireo serve

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args, model_dir, device, dtype, max_model_len, log_path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [args.vireo, "serve", "--model", model_dir, "--host", "127.0.0.1", "--port", str(self.port),
               "--device", device, "--dtype", dtype, "--max-model-len", str(max_model_len),
               "--max-num-seqs", "8", "--no-enable-prefix-caching", "--served-model-name", "tf"] + args.passthrough
        print("+ " + " ".join(cmd), file=sys.stderr)
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        end = time.time() + args.serve_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vireo serve exited ({self.proc.returncode}); log {log_path}:\n" +
                                   open(log_path).read()[-3000:])
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.time() > end:
                self.stop()
                raise RuntimeError(f"vireo serve not healthy after {args.serve_timeout}s; log {log_path}")
            time.sleep(0.5)

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"POST {path} -> {e.code}: {e.read().decode()[:500]}") from None

    def tokenize(self, text):
        return self.post("/tokenize", {"model": "tf", "prompt": text, "add_special_tokens": True})["tokens"]

    def detokenize(self, token_id):
        return self.post("/detokenize", {"model": "tf", "tokens": [int(token_id)]})["prompt"]

    def prompt_logprobs(self, ids, top_k):
        """Records for positions 0..L-2 from echo + logprobs (entry i+1 is the token at i+1)."""
        r = self.post("/v1/completions", {"model": "tf", "prompt": ids, "max_tokens": 1, "temperature": 0,
                                          "echo": True, "logprobs": top_k})
        lp = r["choices"][0]["logprobs"]
        if len(lp["token_logprobs"]) != len(ids) + 1:
            raise RuntimeError(f"expected {len(ids) + 1} logprob entries, got {len(lp['token_logprobs'])}")
        recs = []
        for k in range(1, len(ids)):
            top = sorted(lp["top_logprobs"][k].items(), key=lambda kv: -kv[1])
            # top_logprobs is a dict keyed by token string, the actual token's entry first: a top-k token
            # whose string equals the actual token's (byte fragments all decode to U+FFFD) is lost.
            recs.append({"actual": lp["token_logprobs"][k], "top1": top[0][0], "top1_lp": top[0][1],
                         "top2_lp": top[1][1] if len(top) > 1 else None,
                         "ambiguous": "\ufffd" in lp["tokens"][k]})
        return recs

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# ------------------------------------------------------------------------------------------- compare

def compare(ref, got):
    """ref / got: per prompt lists of records with string top1. Returns the summary dict."""
    d_actual, d_top1, margins, agree, disagree_margins = [], [], [], 0, []
    n = n_top = 0
    for rp, gp in zip(ref, got):
        if len(rp) != len(gp):
            raise RuntimeError(f"position counts differ: {len(rp)} vs {len(gp)}")
        for r, g in zip(rp, gp):
            n += 1
            d_actual.append(abs(r["actual"] - g["actual"]))
            margin = r["top1_lp"] - r["top2_lp"] if r["top2_lp"] is not None else None
            if margin is not None:
                margins.append(margin)
            if r.get("ambiguous") or g.get("ambiguous"):
                continue   # top-1 unknowable from the string-keyed dict: left out of the top-1 figures
            n_top += 1
            if r["top1"] == g["top1"]:
                agree += 1
                d_top1.append(abs(r["top1_lp"] - g["top1_lp"]))
            elif margin is not None:
                disagree_margins.append(margin)
    med = statistics.median
    return {
        "positions": n,
        "actual_abs_diff_max": max(d_actual), "actual_abs_diff_mean": sum(d_actual) / n,
        "top1_positions": n_top, "top1_agree": agree, "top1_agree_rate": agree / n_top if n_top else None,
        "top1_lp_abs_diff_max": max(d_top1) if d_top1 else None,
        "top1_lp_abs_diff_mean": sum(d_top1) / len(d_top1) if d_top1 else None,
        "ref_margin_min": min(margins) if margins else None,
        "ref_margin_median": med(margins) if margins else None,
        "ref_margin_max_at_disagreement": max(disagree_margins) if disagree_margins else None,
    }


def _f(x, spec=".4f"):
    return "-" if x is None else format(x, spec)


def markdown(rows, ref_label):
    out = [f"Reference: {ref_label}. Per position: log_softmax of the actual next token (|ref - vireo|), "
           "top-1 agreement, |ref - vireo| of the top-1 logprob where the top-1 agrees, and the reference's "
           "top-1 margin (top-1 minus top-2 logprob). Top-1 figures leave out positions whose actual token is a "
           "byte fragment (its string, U+FFFD, hides other fragments in the string-keyed top_logprobs).", "",
           "| model | vireo device | dtype | prompts | positions | next-token logprob abs diff (max / mean) | "
           "top-1 agree | top-1 logprob abs diff (max / mean) | ref margin min / median | "
           "largest ref margin at a top-1 disagreement |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["summary"]
        out.append(f"| {r['model']} | {r['device']} | {r['dtype']} | {r['num_prompts']} ({r['prompt_kind']}) | "
                   f"{s['positions']} | {_f(s['actual_abs_diff_max'])} / {_f(s['actual_abs_diff_mean'])} | "
                   f"{s['top1_agree']}/{s['top1_positions']} ({100 * (s['top1_agree_rate'] or 0):.1f}%) | "
                   f"{_f(s['top1_lp_abs_diff_max'])} / {_f(s['top1_lp_abs_diff_mean'])} | "
                   f"{_f(s['ref_margin_min'])} / {_f(s['ref_margin_median'])} | "
                   f"{_f(s['ref_margin_max_at_disagreement'])} |")
    return "\n".join(out) + "\n"


def main(argv):
    args = parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="vireo-tf-")
    servers = []
    try:
        # model + prompts
        fixture_ref = None
        if args.fixture:
            model_dir, label = args.fixture, "fixture:" + os.path.basename(os.path.normpath(args.fixture))
            with open(os.path.join(args.fixture, "reference.json")) as f:
                fx = json.load(f)
            full = fx["full_logits"]
            prompt = next(p for p in fx["prompts"] if len(p) == len(full))
            prompts, prompt_kind = [prompt], "fixture ids"
            fixture_ref = [reference_from_logits(prompt, full)]
        elif args.model:
            model_dir, label = args.model, os.path.basename(os.path.normpath(args.model))
        else:
            model_dir = args.keep_model or os.path.join(workdir, "model")
            os.makedirs(model_dir, exist_ok=True)
            parity.build_random_model(args, "float32", model_dir)
            label = args.preset or os.path.basename(args.config_json)
        if fixture_ref is None:
            with open(os.path.join(model_dir, "config.json")) as f:
                vocab = json.load(f).get("vocab_size", 32000)
            try:
                want = args.num_prompts * max(1, args.lines_per_prompt)
                sub = argparse.Namespace(**{**vars(args), "num_prompts": want})
                flat, prompt_kind = parity.make_prompts(sub, model_dir, vocab)
            except ImportError:
                flat, prompt_kind = None, None   # no transformers: tokenized by the first server below
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        max_pos = cfg.get("max_position_embeddings", 4096)

        def group(flat_prompts):
            if prompt_kind != "sonnet":
                return flat_prompts[:args.num_prompts]
            k = max(1, args.lines_per_prompt)
            return [sum(flat_prompts[i:i + k], []) for i in range(0, k * args.num_prompts, k)
                    if flat_prompts[i:i + k]]

        results = []   # (device, dtype, per-prompt records)
        for n, (device, dtype) in enumerate(args.runs):
            srv = Server(args, model_dir, device, dtype, min(max_pos, 4096),
                         os.path.join(workdir, f"serve-{n}-{device}-{dtype}.log"))
            servers.append(srv)
            try:
                if fixture_ref is None and flat is None:
                    with open(args.dataset, encoding="utf-8") as f:
                        lines = [l.strip() for l in f if l.strip()]
                    import random
                    picked = random.Random(args.seed).sample(lines, args.num_prompts * max(1, args.lines_per_prompt))
                    flat, prompt_kind = [srv.tokenize(l) for l in picked], "sonnet"
                if fixture_ref is None and n == 0:
                    prompts = group(flat)
                recs = [srv.prompt_logprobs(ids, args.top_k) for ids in prompts]
                results.append((device, dtype, recs))
                # reference top-1 ids -> this server's token strings
                if n == 0 and not args.skip_reference:
                    if fixture_ref is not None:
                        ref = fixture_ref
                    else:
                        import torch
                        ref_dev = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
                        ref = reference_torch(model_dir, prompts, ref_dev)
                    cache = {}
                    for pr in ref:
                        for r in pr:
                            if r["top1"] not in cache:
                                cache[r["top1"]] = srv.detokenize(r["top1"])
                            r["top1"] = cache[r["top1"]]
            finally:
                srv.stop()
                servers.remove(srv)

        if args.skip_reference:
            ref_label = f"vireo {args.runs[0][0]} {args.runs[0][1]} (--skip-reference)"
            ref, compared = results[0][2], results[1:]
        else:
            ref_label = ("transformers float32 logits stored in the fixture" if fixture_ref is not None
                         else f"transformers {getattr(__import__('transformers'), '__version__', '?')} float32")
            compared = results
        rows = []
        for device, dtype, recs in compared:
            s = compare(ref, recs)
            rows.append({"model": label, "device": device, "dtype": dtype, "num_prompts": len(prompts),
                         "prompt_kind": prompt_kind, "summary": s})
            print(f"{label} {device} {dtype}: next-token |d| max {s['actual_abs_diff_max']:.4f} mean "
                  f"{s['actual_abs_diff_mean']:.4f}, top-1 agree {s['top1_agree']}/{s['top1_positions']}",
                  file=sys.stderr)
    finally:
        for srv in servers:
            srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    md = markdown(rows, ref_label)
    print(md)
    if args.output_md:
        with open(args.output_md, "w") as f:
            f.write(md)
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump({"reference": ref_label, "seed": args.seed, "initializer_range": args.initializer_range,
                       "top_k": args.top_k, "vireo_args": args.passthrough, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        print(f"teacher_forced: {e}", file=sys.stderr)
        sys.exit(2)
