#!/usr/bin/env python3
"""transformers `generate` baseline on the shapes of `vireo bench latency`, same JSON fields.

  python3 tools/bench/hf_generate.py --preset qwen3-0.6b --batch-size 8 --input-len 128 \
      --output-len 128 --num-iters 10 --dtype bfloat16 --device cuda --output-json hf.json

Model: an HF folder (--model), or a random-initialised --preset / --config-json (dummy weights are
fine for timing). Each iteration times generate(max_new_tokens=1) (prefill: time to the first token
of the whole batch) and generate(max_new_tokens=output_len, min_new_tokens=output_len) (latency);
decode = latency - prefill over output_len - 1 steps. Prompts are random ids, fresh per iteration.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
from hf_summary import latency_summary  # noqa: E402


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="HF model folder")
    p.add_argument("--preset", help="qwen3-tiny | qwen3-0.6b (random-initialised)")
    p.add_argument("--config-json", help="config.json of a random-initialised model")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--input-len", type=int, default=32)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--num-iters-warmup", type=int, default=3)
    p.add_argument("--num-iters", type=int, default=10)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--attn-implementation", default=None, help="e.g. sdpa, eager, flash_attention_2")
    p.add_argument("--output-json")
    args = p.parse_args(argv)
    if sum(x is not None for x in (args.model, args.preset, args.config_json)) != 1:
        p.error("give exactly one of --model, --preset, --config-json")

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    dtype = getattr(torch, {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(args.dtype, args.dtype))
    kw = {}
    if args.attn_implementation:
        kw["attn_implementation"] = args.attn_implementation

    def with_dtype(fn, arg, **extra):
        try:
            return fn(arg, dtype=dtype, **extra)
        except TypeError:
            return fn(arg, torch_dtype=dtype, **extra)

    torch.manual_seed(args.seed)
    if args.model:
        model = with_dtype(AutoModelForCausalLM.from_pretrained, args.model, **kw)
        label = args.model
    else:
        if args.preset:
            from parity import PRESETS
            cfg = dict(PRESETS[args.preset])
            label = args.preset
        else:
            with open(args.config_json) as f:
                cfg = json.load(f)
            label = args.config_json
        cfg.pop("tokenizer_dir", None)
        config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
        # Initialise on the device: random init of an 8B model on the host takes minutes.
        with torch.device(args.device):
            model = with_dtype(AutoModelForCausalLM.from_config, config, **kw)
    model = model.to(args.device).eval()
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed)

    def sync():
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    def timed_generate(ids, n):
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                           do_sample=False, pad_token_id=0)
        sync()
        return time.perf_counter() - t0

    def one_iteration():
        ids = torch.randint(0, min(vocab, 10000), (args.batch_size, args.input_len), generator=gen).to(args.device)
        prefill = timed_generate(ids, 1)
        latency = timed_generate(ids, args.output_len)
        return {"latency": latency, "prefill": prefill, "decode": max(latency - prefill, 0.0),
                "decode_steps": args.output_len - 1}

    for _ in range(args.num_iters_warmup):
        one_iteration()
    iters = []
    for i in range(args.num_iters):
        iters.append(one_iteration())
        print(f"iteration {i + 1}/{args.num_iters}: {iters[-1]['latency']:.4f} s", file=sys.stderr)
    j = latency_summary(iters, args.batch_size, args.input_len, args.output_len)
    j.update({"backend": "transformers", "model": label, "device": args.device, "dtype": args.dtype,
              "transformers_generate": True})
    print(f"Avg latency: {j['avg_latency']:.6f} seconds")
    print(f"Prefill time (ms): mean {j['mean_prefill_time_ms']:.3f}, median {j['median_prefill_time_ms']:.3f}")
    print(f"Decode time per step (ms): mean {j['mean_decode_step_ms']:.3f}, median {j['median_decode_step_ms']:.3f}")
    print(f"Decode throughput (tok/s): mean {j['mean_decode_tokens_per_s']:.2f}")
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump(j, f, indent=4)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
