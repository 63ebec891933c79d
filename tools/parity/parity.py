#!/usr/bin/env python3
"""Greedy-decoding parity: transformers (reference) vs `vireo generate`, classified like vllm-metal.

Runs on the device machine (python3 + torch + transformers; no internet):

  python3 tools/parity/parity.py --preset qwen3-tiny --dtype float32 bfloat16 \
      --vireo build/vireo --output-md parity.md --output-json parity.json -- --device cuda

  python3 tools/parity/parity.py /path/to/hf_model --dtype bfloat16 -- --device cuda --dtype bfloat16

Model: an HF folder, or a preset (qwen3-tiny, qwen3-0.6b, gemma3-small, gemma3-1b, ...) / --arch + --config-json, random-initialised
(normal(0, --initializer-range), --seed) and saved in --dtype to a temp folder that both sides load.
Prompts: --num-prompts lines of benchmarks/data/sonnet.txt, tokenized by the model's tokenizer; a model
without a tokenizer gets random token-id prompts drawn with --seed.
For every dtype: the reference decodes each prompt alone (no padding) with a KV cache and keeps the
chosen token's logprob and the top-k; vireo runs all prompts in one process per --batch-sizes value
(--max-num-seqs B). Arguments after "--" go to `vireo generate` unchanged.
Exit status: 0 when no prompt FAILs, 1 otherwise, 2 on a setup error.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_lib as pl  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

_GEMMA3_1B = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": 262144,
    "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 26, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 256, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
    "query_pre_attn_scalar": 256, "sliding_window": 512, "hidden_activation": "gelu_pytorch_tanh",
    "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(26)],
    "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
    "tokenizer_dir": "models/gemma3",
}

PRESETS = {
    # google/gemma-3-1b-it's config.json, random-initialised, with the real Gemma 3 tokenizer.
    "gemma3-1b": _GEMMA3_1B,
    # The same architecture, small: 4 layers (sliding, sliding, full, sliding), a window of 32 keys.
    # Phi-3-mini's layer at a small size: head_dim 96 (3072 / 32 in the real one), MHA, LongRoPE, Llama 2's
    # tokenizer (Phi-3 extends its 32,000 tokens to 32,064).
    "phi3-small": {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 32064,
        "hidden_size": 384, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 4, "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
        "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "sliding_window": 262144,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0 + 0.05 * i for i in range(48)],
                         "long_factor": [1.0 + 1.5 * i for i in range(48)]},
        "bos_token_id": 1, "eos_token_id": 32000, "tokenizer_dir": "models/llama2",
    },
    # gpt-oss-20b's layer at a small size: 4 layers (sliding, full, ...; window 32), 8 query heads on 2 KV
    # heads of 64 dims with sinks, 8 experts top-2 with biases and the clamped SwiGLU, YaRN x32, the real
    # o200k_harmony vocabulary and tokenizer.
    "gpt-oss-small": {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 201088,
        "hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 64, "num_local_experts": 8, "num_experts_per_tok": 2,
        "sliding_window": 32, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "attention_bias": True,
        "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                            "truncate": False, "original_max_position_embeddings": 4096, "rope_theta": 150000.0},
        "tie_word_embeddings": False, "eos_token_id": [200002, 199999, 200012], "pad_token_id": 199999,
        "tokenizer_dir": "models/gptoss",
    },
    "gemma2-small": {
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "vocab_size": 256000,
        "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "query_pre_attn_scalar": 64, "sliding_window": 32,
        "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "max_position_embeddings": 8192,
        "bos_token_id": 2, "eos_token_id": 1, "tokenizer_dir": "models/gemma3",
    },
    "gemma3-small": dict(_GEMMA3_1B, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, query_pre_attn_scalar=64,
                         sliding_window=32, layer_types=["sliding_attention", "sliding_attention",
                                                         "full_attention", "sliding_attention"]),
    # A small Qwen3 with the real vocabulary, so the Qwen3 tokenizer (models/qwen3) can be used.
    "qwen3-tiny": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False,
        "bos_token_id": 151643, "eos_token_id": 151645, "tokenizer_dir": "models/qwen3",
    },
    # Qwen/Qwen3-0.6B's config.json, random-initialised.
    "qwen3-0.6b": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
        "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False,
        "bos_token_id": 151643, "eos_token_id": 151645, "tokenizer_dir": "models/qwen3",
    },
    # Qwen3.5-shaped hybrid (3 Gated DeltaNet layers, then gated attention), small, Qwen3 vocabulary.
    "qwen3_5-small": {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": 151936,
        "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 32,
        "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [4, 2, 2], "mrope_interleaved": True},
        "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False,
        "bos_token_id": 151643, "eos_token_id": 151645, "tokenizer_dir": "models/qwen3",
    },
    # The MoE variant: 16 experts top-4 plus a gated shared expert.
    "qwen3_5_moe-small": {
        "architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text", "vocab_size": 151936,
        "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 32,
        "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
        "num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 128,
        "shared_expert_intermediate_size": 256,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [4, 2, 2], "mrope_interleaved": True},
        "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False,
        "bos_token_id": 151643, "eos_token_id": 151645, "tokenizer_dir": "models/qwen3",
    },
}

TORCH_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
                "float16": "float16", "fp16": "float16"}


def split_passthrough(argv):
    """(our arguments, the ones after `--` that go to vireo unchanged)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def parse_args(argv):
    argv, passthrough = split_passthrough(argv)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="HF model folder (config.json + safetensors)")
    p.add_argument("--preset", choices=sorted(PRESETS))
    p.add_argument("--arch", help="architecture name for --config-json, e.g. Qwen3ForCausalLM")
    p.add_argument("--config-json", help="config.json of a random-initialised model")
    p.add_argument("--tokenizer", help="folder with tokenizer.json (default: the model's / the preset's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--initializer-range", type=float, default=0.1)
    p.add_argument("--dtype", nargs="+", default=["float32"], help="float32 and/or bfloat16")
    p.add_argument("--device", default=None, help="reference device (default cuda if available)")
    p.add_argument("--num-prompts", type=int, default=40)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--prompt-len", type=int, default=24, help="length of random token-id prompts")
    p.add_argument("--batch-sizes", default="1,2")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--vireo", default=os.path.join(REPO, "build", "vireo"))
    p.add_argument("--max-tokens-flag", default="--max-tokens",
                   help="vireo generate's flag for the output length ('' = only in the prompts file)")
    p.add_argument("--dataset", default=os.path.join(REPO, "benchmarks", "data", "sonnet.txt"))
    p.add_argument("--output-json")
    p.add_argument("--output-md")
    p.add_argument("--keep-model", help="save the random-initialised model here instead of a temp folder")
    args = p.parse_args(argv)
    args.passthrough = passthrough
    sources = sum(x is not None for x in (args.model, args.preset, args.config_json))
    if sources != 1:
        p.error("give exactly one of: a model folder, --preset, --config-json")
    for d in args.dtype:
        if d not in TORCH_DTYPES:
            p.error(f"unknown --dtype {d}")
    return args


def _with_dtype(fn, arg, dtype, **kw):
    """transformers 5 names it dtype=, 4.x torch_dtype=."""
    try:
        return fn(arg, dtype=dtype, **kw)
    except TypeError:
        return fn(arg, torch_dtype=dtype, **kw)


def _attention_kwargs(model_dir):
    """Gemma 2's attention soft-capping exists in the eager attention only (sdpa drops the softcap)."""
    try:
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
    except OSError:
        return {}
    eager = cfg.get("attn_logit_softcapping") or cfg.get("model_type") == "gpt_oss"  # GPT-OSS: sinks, eager only
    return {"attn_implementation": "eager"} if eager else {}


def build_random_model(args, dtype_name, out_dir):
    """Random-initialised model from a preset / config, saved in dtype_name; returns its folder."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if args.preset:
        cfg_dict = dict(PRESETS[args.preset])
    else:
        with open(args.config_json) as f:
            cfg_dict = json.load(f)
        if args.arch:
            cfg_dict["architectures"] = [args.arch]
    tok_dir = cfg_dict.pop("tokenizer_dir", None)
    cfg_dict["initializer_range"] = args.initializer_range
    model_type = cfg_dict.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg_dict)
    torch.manual_seed(args.seed)
    model = _with_dtype(AutoModelForCausalLM.from_config, config, torch.float32)
    # from_config's init is model-specific; make it the documented normal(0, initializer_range)
    # everywhere (norm weights stay at 1) so the logits are well spread.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() >= 2:
                param.normal_(0.0, args.initializer_range)
    model = model.to(getattr(torch, TORCH_DTYPES[dtype_name]))
    model.save_pretrained(out_dir, safe_serialization=True)
    tok_src = args.tokenizer or (os.path.join(REPO, tok_dir) if tok_dir else None)
    if tok_src and os.path.exists(os.path.join(tok_src, "tokenizer.json")):
        for fname in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.exists(os.path.join(tok_src, fname)):
                shutil.copy(os.path.join(tok_src, fname), out_dir)
    return out_dir


def make_prompts(args, model_dir, vocab_size):
    """Token-id prompts: sonnet lines through the model's tokenizer, else random ids."""
    tok_dir = args.tokenizer or model_dir
    if os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(tok_dir)
        with open(args.dataset, encoding="utf-8") as f:
            lines = [l.strip() for l in f if l.strip()]
        rng = random.Random(args.seed)
        picked = rng.sample(lines, min(args.num_prompts, len(lines)))
        return [tok(l, add_special_tokens=True).input_ids for l in picked], "sonnet"
    rng = random.Random(args.seed)
    hi = min(vocab_size, 32000) - 1
    return [[rng.randint(0, hi) for _ in range(args.prompt_len)] for _ in range(args.num_prompts)], "random-ids"


def reference_decode(model_dir, dtype_name, prompts, max_new_tokens, top_k, device):
    """Greedy decode of each prompt alone with transformers; returns [pl.Side]."""
    import torch
    from transformers import AutoModelForCausalLM

    # An fp32 reference must be fp32 arithmetic: no TF32 tensor-core matmuls (10-bit mantissas),
    # whatever torch's or transformers' defaults are.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dtype = getattr(torch, TORCH_DTYPES[dtype_name])
    model = _with_dtype(AutoModelForCausalLM.from_pretrained, model_dir, dtype,
                        **_attention_kwargs(model_dir)).to(device).eval()
    sides = []
    with torch.no_grad():
        for ids in prompts:
            inp = torch.tensor([ids], device=device)
            out = model(input_ids=inp, use_cache=True)
            past = out.past_key_values
            logits = out.logits[:, -1, :]
            tokens, lps, tops = [], [], []
            for _ in range(max_new_tokens):
                logp = torch.log_softmax(logits.float(), dim=-1)[0]
                vals, idx = torch.topk(logp, top_k)
                tok = int(idx[0])
                tokens.append(tok)
                lps.append(float(logp[tok]))
                tops.append([(int(i), float(v)) for i, v in zip(idx.tolist(), vals.tolist())])
                out = model(input_ids=torch.tensor([[tok]], device=device), past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[:, -1, :]
            sides.append(pl.Side(tokens, lps, tops))
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return sides


def vireo_decode(args, model_dir, prompts, batch, workdir):
    pf = os.path.join(workdir, f"prompts-b{batch}.jsonl")
    with open(pf, "w") as f:
        for i, ids in enumerate(prompts):
            f.write(json.dumps({"prompt_ids": ids}) + "\n")
    cmd = [args.vireo, "generate", "--model", model_dir, "--json", "--temperature", "0",
           "--logprobs", str(args.top_k), "--prompts-file", pf, "--max-num-seqs", str(batch)]
    if args.max_tokens_flag:
        cmd += [args.max_tokens_flag, str(args.max_new_tokens)]
    cmd += args.passthrough
    print("+ " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"vireo generate failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    sides = pl.parse_vireo_output(proc.stdout)
    if len(sides) != len(prompts):
        raise RuntimeError(f"vireo generate gave {len(sides)} outputs for {len(prompts)} prompts")
    return sides


def main(argv):
    args = parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    batches = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    workdir = tempfile.mkdtemp(prefix="vireo-parity-")
    rows = []
    try:
        for dtype_name in args.dtype:
            if args.model:
                model_dir, label = args.model, os.path.basename(os.path.normpath(args.model))
            else:
                model_dir = args.keep_model and os.path.join(args.keep_model, dtype_name) or \
                    os.path.join(workdir, f"model-{dtype_name}")
                os.makedirs(model_dir, exist_ok=True)
                build_random_model(args, dtype_name, model_dir)
                label = args.preset or os.path.basename(args.config_json)
            with open(os.path.join(model_dir, "config.json")) as f:
                vocab = json.load(f).get("vocab_size", 32000)
            prompts, prompt_kind = make_prompts(args, model_dir, vocab)
            ref = reference_decode(model_dir, dtype_name, prompts, args.max_new_tokens, args.top_k, device)
            for b in batches:
                got = vireo_decode(args, model_dir, prompts, b, workdir)
                results = [pl.classify(r, g, args.top_k, i) for i, (r, g) in enumerate(zip(ref, got))]
                summary = pl.summarize(results)
                rows.append({"model": label, "dtype": dtype_name, "batch": b, "prompts": prompt_kind,
                             "summary": summary, "results": results})
                print(f"{label} {dtype_name} batch {b}: EXACT {summary['exact']} TOP_K_MATCH "
                      f"{summary['top_k_match']} FAIL {summary['fail']}", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    md = pl.markdown_report(rows)
    print(md)
    if args.output_md:
        with open(args.output_md, "w") as f:
            f.write(md)
    if args.output_json:
        doc = {"device": device, "max_new_tokens": args.max_new_tokens, "top_k": args.top_k,
               "vireo_args": args.passthrough, "rows": [
                   {k: v for k, v in r.items() if k != "results"} |
                   {"prompts_detail": [vars(p) for p in r["results"]]} for r in rows]}
        with open(args.output_json, "w") as f:
            json.dump(doc, f, indent=2)
    return 1 if any(r["summary"]["fail"] for r in rows) else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (RuntimeError, OSError, ValueError) as e:
        print(f"parity: {e}", file=sys.stderr)
        sys.exit(2)
