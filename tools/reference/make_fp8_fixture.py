#!/usr/bin/env python3
"""An FP8 checkpoint written by transformers' own quantizer, with fp32 reference outputs of its dequantized weights.

Run on the device machine (torch + transformers + a GPU: FineGrainedFP8 quantizes on CUDA):
    PYTHONUNBUFFERED=1 python3 tools/reference/make_fp8_fixture.py --out $OUT/model_fixtures
Writes <out>/qwen3_fp8/{config.json, model.safetensors, generation_config.json, reference.json}: the qwen3
case of make_model_fixtures.py (same config and seed), quantized with FineGrainedFP8Config(weight_block_size
32 x 32, so the tiny matrices hold several blocks) and saved by save_pretrained, i.e. F8_E4M3 weights with
weight_scale_inv and quantization_config as transformers writes them. reference.json (same fields as
make_model_fixtures.py) comes from a fresh fp32 model holding the saved weights dequantized here
(fp8 * scale_inv per block): what vireo computes, as it dequantizes at load and keeps activations unquantized.
Also printed: the greedy tokens of transformers' FP8 model itself (activations quantized too), for information.
"""
import argparse
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, FineGrainedFP8Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model_fixtures as mf  # noqa: E402

BLOCK = (32, 32)


def dequantized_state(d):
    sd = load_file(os.path.join(d, "model.safetensors"))
    out = {}
    for name, t in sd.items():
        if name.endswith("_scale_inv"):
            continue
        if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            s = sd[name + "_scale_inv"].float()
            w = t.float()
            rows, cols = w.shape
            s = s.repeat_interleave(BLOCK[0], 0)[:rows].repeat_interleave(BLOCK[1], 1)[:, :cols]
            out[name] = w * s
        else:
            out[name] = t.float()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    print("torch", torch.__version__, "transformers", transformers.__version__)
    case = [c for c in mf.CASES if c[0] == "qwen3"][0]
    _, cls, kw, _, _ = case
    seed = 1234 + mf.CASES.index(case)
    tmp = os.path.join(args.out, "_qwen3_fp32")
    mf.build("_qwen3_fp32", cls, kw, torch.float32, None, args.out, seed)
    d = os.path.join(args.out, "qwen3_fp8")
    q = AutoModelForCausalLM.from_pretrained(tmp, quantization_config=FineGrainedFP8Config(weight_block_size=BLOCK),
                                             dtype=torch.bfloat16, device_map="cuda")
    q.save_pretrained(d)
    with open(os.path.join(d, "config.json")) as f:
        print("quantization_config:", json.load(f).get("quantization_config"))
    sd = load_file(os.path.join(d, "model.safetensors"))
    print("tensors:", {k: (str(v.dtype), list(v.shape)) for k, v in sd.items() if "layers.0.self_attn" in k})

    # The reference: fp32 model from the dequantized saved weights.
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("quantization_config", None)
    cfg_obj = transformers.AutoConfig.for_model(**cfg)
    model = AutoModelForCausalLM.from_config(cfg_obj, attn_implementation="eager").float().eval()
    missing, unexpected = model.load_state_dict(dequantized_state(d), strict=False)
    print("missing", missing, "unexpected", unexpected)
    if model.config.tie_word_embeddings:
        model.tie_weights()
    ref = mf.reference(model, torch.Generator().manual_seed(seed + 2000))
    rot = model.model.rotary_emb  # the fields make_model_fixtures.py records too (the parity test reads them)
    ref["inv_freq"] = mf.rounded(rot.inv_freq.float())
    ref["rotary_class"] = type(rot).__name__
    ref["attention_scaling"] = float(getattr(rot, "attention_scaling", 1.0))
    ref["architecture"] = model.config.architectures[0] if model.config.architectures else "Qwen3ForCausalLM"
    ref["transformers_version"] = transformers.__version__
    ref["note"] = "fp32 reference of the dequantized FP8 weights (block 32 x 32)"
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
    print("qwen3_fp8 greedy0", ref["greedy"][0][:8], "min_margin", ref["min_margin"])
    # For information: transformers' FP8 model (activations quantized per token group) on the same prompts.
    with torch.no_grad():
        for p in ref["prompts"][:1]:
            ids = torch.tensor([p], device="cuda")
            g = q.generate(ids, max_new_tokens=8, do_sample=False)[0, len(p):].tolist()
            print("transformers FP8 (quantized activations) greedy0", g)
    import shutil
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
