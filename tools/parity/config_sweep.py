#!/usr/bin/env python3
"""Random-config sweep: many small random-initialised checkpoints of every supported architecture, each
decoded greedily by transformers (fp32 reference) and by `vireo generate` in several modes.

The committed fixtures (tests/fixtures/model) pin one config per family; this sweep draws the shape knobs a
real checkpoint may set (head counts and GQA ratio, head_dim apart from hidden / heads, RoPE scaling kinds,
biases, tied embeddings, sliding windows, expert counts and routing flags, hybrid layer orders, odd vocab and
MLP widths) from a seed, so a combination no fixture covers is still checked against transformers.

Run on the device machine (torch + transformers, no internet):
    python3 tools/parity/config_sweep.py --vireo build/vireo --seeds 3 --output-md $OUT/sweep.md

Per case and vireo mode it reports EXACT / TOP_K_MATCH / FAIL (vllm-metal's classes, tools/parity/parity_lib.py)
and the largest chosen-token logprob difference over the matched prefix. A divergence is only excused as a
near-tie when the reference's top-1 margin there is below --tie-margin (fp32 modes) or --bf16-tie-margin
(bf16 modes); anything else counts as MISMATCH, and the tool exits 1 when any fp32 mode has one.
Modes (--modes): cpu (fp32), cuda (fp32, graphs), cuda-chunked (fp32, batch 1, 40-token prefill chunks),
cuda-bf16 (bf16 weights and KV cache against the fp32 reference; only large-margin divergences count),
hf-bf16 (transformers in bf16 against its own fp32 run: how far bf16 alone moves these random models).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools", "reference"))
import parity_lib as pl  # noqa: E402

MODES = {
    "cpu": (["--device", "cpu", "--dtype", "float32"], 4, True),
    "cuda": (["--device", "cuda", "--dtype", "float32"], 4, True),
    "cuda-chunked": (["--device", "cuda", "--dtype", "float32", "--max-num-batched-tokens", "40"], 1, True),
    "cuda-bf16": (["--device", "cuda", "--dtype", "bfloat16"], 4, False),
    # Not vireo: transformers itself in bf16 against its fp32 run, the yardstick for cuda-bf16's divergences.
    "hf-bf16": (None, 0, False),
}
PROMPT_LENS = (1, 2, 15, 16, 17, 33, 64, 100, 150, 230)


def pick(rng, xs):
    return xs[rng.randrange(len(xs))]


def attn_shape(rng, head_dims=(32, 64, 128)):
    """num_attention_heads, num_key_value_heads (a divisor: GQA ratio 1..8), head_dim, hidden_size."""
    heads = pick(rng, [2, 4, 8])
    kv = pick(rng, [d for d in (1, 2, 4, 8) if heads % d == 0])
    head_dim = pick(rng, head_dims)
    hidden = pick(rng, [64, 96, 128, 160])
    return dict(num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim, hidden_size=hidden)


def rope_choice(rng):
    kind = pick(rng, ["default", "default", "linear", "dynamic", "llama3", "yarn"])
    if kind == "default":
        return None
    if kind == "linear":
        return dict(rope_type="linear", factor=2.0)
    if kind == "dynamic":
        return dict(rope_type="dynamic", factor=2.0)
    if kind == "llama3":
        return dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                    original_max_position_embeddings=64)
    return dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=128)


def common(rng):
    return dict(vocab_size=rng.randrange(300, 2000), intermediate_size=rng.randrange(40, 300),
                num_hidden_layers=rng.randrange(2, 4), max_position_embeddings=1024,
                tie_word_embeddings=rng.random() < 0.5, rope_theta=pick(rng, [10000.0, 500000.0, 1000000.0]))


def case_llama(rng):
    kw = common(rng) | attn_shape(rng)
    kw |= dict(attention_bias=rng.random() < 0.3, mlp_bias=rng.random() < 0.2, rope=rope_choice(rng))
    return "LlamaConfig", kw


def case_mistral(rng):
    kw = common(rng) | attn_shape(rng)
    kw |= dict(sliding_window=pick(rng, [None, 8, 16, 48, 4096]))
    return "MistralConfig", kw


def case_mixtral(rng):
    kw = common(rng) | attn_shape(rng)
    kw |= dict(num_local_experts=pick(rng, [4, 8]), num_experts_per_tok=pick(rng, [1, 2]),
               intermediate_size=8 * rng.randrange(4, 20), sliding_window=pick(rng, [None, 16, 4096]))
    return "MixtralConfig", kw


def case_qwen2_moe(rng):
    kw = case_qwen2(rng)[1]
    kw |= dict(num_experts=pick(rng, [4, 8]), num_experts_per_tok=pick(rng, [1, 2, 4]),
               moe_intermediate_size=8 * rng.randrange(2, 10), shared_expert_intermediate_size=8 * rng.randrange(1, 10),
               norm_topk_prob=rng.random() < 0.5, decoder_sparse_step=pick(rng, [1, 2]),
               mlp_only_layers=[0] if rng.random() < 0.3 else [])
    return "Qwen2MoeConfig", kw


def case_qwen2(rng):
    kw = common(rng) | attn_shape(rng)
    kw.pop("head_dim")  # Qwen2 derives it from hidden / heads
    kw["hidden_size"] = kw["num_attention_heads"] * pick(rng, [16, 32, 64])
    if rng.random() < 0.5:
        kw |= dict(use_sliding_window=True, sliding_window=pick(rng, [8, 32]), max_window_layers=1)
    return "Qwen2Config", kw


def case_qwen3(rng):
    kw = common(rng) | attn_shape(rng) | dict(rope=rope_choice(rng))
    return "Qwen3Config", kw


def case_olmo2(rng):
    kw = common(rng) | attn_shape(rng)
    kw.pop("head_dim")  # OLMo-2's full-width q/k norm: head_dim = hidden / heads
    kw["hidden_size"] = kw["num_attention_heads"] * pick(rng, [16, 32, 64])
    kw["attention_bias"] = rng.random() < 0.3
    return "Olmo2Config", kw


def case_hunyuan(rng):
    kw = common(rng) | attn_shape(rng)
    return "HunYuanDenseV1Config", kw


def case_hunyuan_moe(rng):
    kw = common(rng) | attn_shape(rng)
    kw |= dict(num_experts=pick(rng, [1, 4, 8]), moe_topk=pick(rng, [1, 2, 4]), intermediate_size=8 * rng.randrange(4, 16),
               rope=pick(rng, [None, dict(rope_type="dynamic", factor=1.0, alpha=1000.0)]))
    kw["moe_topk"] = min(kw["moe_topk"], kw["num_experts"])
    return "HunYuanMoEV1Config", kw


def case_ernie4_5(rng):
    kw = common(rng) | attn_shape(rng)
    kw["use_bias"] = rng.random() < 0.5
    return "Ernie4_5Config", kw


def case_ernie4_5_moe(rng):
    kw = common(rng) | attn_shape(rng)
    experts = pick(rng, [4, 8, 16])
    kw |= dict(moe_num_experts=experts, moe_k=min(pick(rng, [1, 2, 4]), experts),
               moe_intermediate_size=8 * rng.randrange(2, 10), moe_num_shared_experts=pick(rng, [0, 1, 2]),
               moe_layer_start_index=pick(rng, [0, 1]), moe_layer_interval=pick(rng, [1, 1, 2]))
    return "Ernie4_5_MoeConfig", kw


def case_qwen3_moe(rng):
    kw = common(rng) | attn_shape(rng)
    experts = pick(rng, [4, 8, 16])
    kw |= dict(num_experts=experts, num_experts_per_tok=pick(rng, [1, 2, 4]),
               moe_intermediate_size=8 * rng.randrange(2, 10), norm_topk_prob=rng.random() < 0.5,
               decoder_sparse_step=pick(rng, [1, 1, 2]),
               mlp_only_layers=[0] if rng.random() < 0.3 else [])
    return "Qwen3MoeConfig", kw


def lfm2_layers(rng):
    """LFM2's shared knobs: 3-5 layers of conv / full attention (at least one attention), head_dim = hidden / heads."""
    n = rng.randrange(3, 6)
    types = [pick(rng, ["conv", "full_attention"]) for _ in range(n)]
    if "full_attention" not in types:
        types[-1] = "full_attention"
    kw = common(rng) | attn_shape(rng)
    kw.pop("head_dim")
    kw["hidden_size"] = kw["num_attention_heads"] * pick(rng, [16, 32])
    return kw | dict(num_hidden_layers=n, layer_types=types, norm_eps=1e-5, conv_L_cache=3)


def case_lfm2(rng):
    kw = lfm2_layers(rng)
    kw |= dict(conv_bias=rng.random() < 0.5, block_auto_adjust_ff_dim=rng.random() < 0.5,
               block_ffn_dim_multiplier=1.0, block_multiple_of=32)
    return "Lfm2Config", kw


def hybrid_types(rng, n):
    types = [pick(rng, ["linear_attention", "full_attention"]) for _ in range(n)]
    if "linear_attention" not in types:
        types[0] = "linear_attention"
    if "full_attention" not in types:
        types[-1] = "full_attention"
    return types


def case_qwen3_5(rng, moe=False):
    n = rng.randrange(2, 5)
    kw = common(rng) | attn_shape(rng, head_dims=(32, 64, 128, 256))
    kw |= dict(num_hidden_layers=n, layer_types=hybrid_types(rng, n),
               linear_num_key_heads=pick(rng, [1, 2]), linear_key_head_dim=pick(rng, [16, 32]),
               linear_value_head_dim=pick(rng, [16, 24, 32]), linear_conv_kernel_dim=4,
               rope=dict(rope_type="default", partial_rotary_factor=0.25, mrope_section=[2, 1, 1],
                         mrope_interleaved=True))
    kw["linear_num_value_heads"] = kw["linear_num_key_heads"] * pick(rng, [1, 2])
    if moe:
        kw.pop("intermediate_size")
        kw |= dict(num_experts=pick(rng, [4, 8]), num_experts_per_tok=2, moe_intermediate_size=32,
                   shared_expert_intermediate_size=48)
        return "Qwen3_5MoeTextConfig", kw
    return "Qwen3_5TextConfig", kw


def case_qwen3_next(rng):
    n = rng.randrange(2, 5)
    kw = common(rng) | attn_shape(rng, head_dims=(32, 64, 128, 256))
    kw |= dict(num_hidden_layers=n, layer_types=hybrid_types(rng, n), linear_num_key_heads=pick(rng, [1, 2]),
               linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
               num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
               decoder_sparse_step=1, mlp_only_layers=[0] if rng.random() < 0.5 else [],
               norm_topk_prob=rng.random() < 0.5, rope=dict(rope_type="default", partial_rotary_factor=0.25))
    kw["linear_num_value_heads"] = kw["linear_num_key_heads"] * 2
    return "Qwen3NextConfig", kw


def case_deepseek(rng, v3=True):
    # v_head_dim stays within the key width (nope + rope), as in every released MLA checkpoint: vireo pads V to
    # that width and refuses wider V at load with a message.
    heads = pick(rng, [2, 4, 8])
    kw = common(rng)
    kw |= dict(hidden_size=pick(rng, [64, 128]), num_attention_heads=heads, num_key_value_heads=heads,
               num_hidden_layers=3, kv_lora_rank=pick(rng, [16, 32]), qk_nope_head_dim=pick(rng, [16, 32]),
               qk_rope_head_dim=pick(rng, [8, 16]),
               n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=pick(rng, [1, 2]),
               moe_intermediate_size=32, first_k_dense_replace=pick(rng, [0, 1]))
    kw["v_head_dim"] = pick(rng, [v for v in (16, 24, 32) if v <= kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]])
    if v3:
        kw |= dict(q_lora_rank=pick(rng, [None, 48]), n_group=pick(rng, [1, 2]), topk_group=1,
                   routed_scaling_factor=pick(rng, [1.0, 2.5]), norm_topk_prob=rng.random() < 0.5,
                   rope_interleave=rng.random() < 0.5)
        return "DeepseekV3Config", kw
    kw |= dict(q_lora_rank=None, routed_scaling_factor=2.0, topk_method="greedy", rms_norm_eps=1e-5)
    return "DeepseekV2Config", kw


def case_gemma3(rng):
    kw = common(rng) | attn_shape(rng, head_dims=(32, 64, 128, 256))
    full = dict(rope_type="default", rope_theta=kw.pop("rope_theta")) | (rope_choice(rng) or {})
    local = dict(rope_type="default", rope_theta=pick(rng, [10000.0, 50000.0]))
    kw |= dict(layer_types=[pick(rng, ["sliding_attention", "full_attention"]) for _ in range(kw["num_hidden_layers"])],
               sliding_window=pick(rng, [8, 32, 4096]), query_pre_attn_scalar=pick(rng, [kw["head_dim"], 24, 256]),
               hidden_activation="gelu_pytorch_tanh",
               rope_parameters={"full_attention": full, "sliding_attention": local})
    return "Gemma3TextConfig", kw


def case_phi3(rng):
    kw = common(rng) | attn_shape(rng)
    kw.pop("head_dim")  # Phi-3 derives it from hidden / heads
    kw["hidden_size"] = kw["num_attention_heads"] * pick(rng, [16, 32, 64])
    rot = int(kw["hidden_size"] // kw["num_attention_heads"] * kw.setdefault("partial_rotary_factor", pick(rng, [1.0, 0.75, 0.5]))) // 2
    if rng.random() < 0.5:  # sequences stay under original_max_position_embeddings: the short factors rotate them
        kw |= dict(original_max_position_embeddings=256,
                   rope=dict(rope_type="longrope", short_factor=[round(1 + 0.3 * rng.random() * i, 3) for i in range(rot)],
                             long_factor=[round(1 + 0.9 * i, 3) for i in range(rot)], original_max_position_embeddings=256))
    if rng.random() < 0.3:
        kw["sliding_window"] = pick(rng, [8, 32])
    return "Phi3Config", kw


def case_smollm3(rng):
    kw = common(rng) | attn_shape(rng) | dict(rope=rope_choice(rng))
    kw |= dict(no_rope_layer_interval=pick(rng, [2, 3, 4]), num_hidden_layers=rng.randrange(3, 6))
    if rng.random() < 0.3:
        kw |= dict(use_sliding_window=True, sliding_window=pick(rng, [8, 32]))
    return "SmolLM3Config", kw


def case_glm4(rng, v4=True):
    kw = common(rng) | attn_shape(rng, head_dims=(32, 64, 128))
    kw |= dict(partial_rotary_factor=pick(rng, [0.5, 1.0]), attention_bias=rng.random() < 0.7, rope=rope_choice(rng))
    return ("Glm4Config" if v4 else "GlmConfig"), kw


def case_gemma2(rng):
    kw = common(rng) | attn_shape(rng, head_dims=(32, 64, 128, 256))
    kw |= dict(layer_types=[pick(rng, ["sliding_attention", "full_attention"]) for _ in range(kw["num_hidden_layers"])],
               sliding_window=pick(rng, [8, 32, 4096]), query_pre_attn_scalar=pick(rng, [kw["head_dim"], 24, 256]),
               hidden_activation="gelu_pytorch_tanh", rope=rope_choice(rng),
               attn_logit_softcapping=pick(rng, [None, 50.0, 1.5]), final_logit_softcapping=pick(rng, [None, 30.0, 2.0]))
    return "Gemma2Config", kw


def case_gpt_oss(rng):
    kw = common(rng) | attn_shape(rng, head_dims=(32, 64))
    n = kw["num_hidden_layers"]
    kw |= dict(layer_types=[pick(rng, ["sliding_attention", "full_attention"]) for _ in range(n)],
               sliding_window=pick(rng, [8, 32]), num_local_experts=pick(rng, [4, 8]),
               num_experts_per_tok=pick(rng, [1, 2, 4]), intermediate_size=pick(rng, [32, 64]),
               rope=pick(rng, [None, dict(rope_type="yarn", factor=4.0, beta_fast=32.0, beta_slow=1.0, truncate=False,
                                          original_max_position_embeddings=64)]))
    kw["num_experts_per_tok"] = min(kw["num_experts_per_tok"], kw["num_local_experts"])
    return "GptOssConfig", kw


def case_granite(rng):
    kw = common(rng) | attn_shape(rng) | dict(rope=rope_choice(rng))
    kw |= dict(embedding_multiplier=pick(rng, [1.0, 12.0]), attention_multiplier=pick(rng, [0.0078125, 0.03125, 1.0 / kw["head_dim"]]),
               residual_multiplier=pick(rng, [0.22, 1.0]), logits_scaling=pick(rng, [1.0, 8.0, 16.0]),
               attention_bias=rng.random() < 0.3, mlp_bias=rng.random() < 0.2)
    return "GraniteConfig", kw


def case_granitemoe(rng):
    _, kw = case_granite(rng)
    kw.pop("mlp_bias")
    kw |= dict(num_local_experts=pick(rng, [4, 8]), num_experts_per_tok=pick(rng, [1, 2]), intermediate_size=pick(rng, [32, 48]))
    return "GraniteMoeConfig", kw


def case_gemma(rng):
    kw = common(rng) | attn_shape(rng, head_dims=(32, 64, 128, 256)) | dict(rope=rope_choice(rng))
    kw["hidden_activation"] = "gelu_pytorch_tanh"
    return "GemmaConfig", kw


def case_olmo3(rng):
    _, kw = case_olmo2(rng)
    n = rng.randrange(2, 6)
    kw["num_hidden_layers"] = n
    if rng.random() < 0.5:  # else Olmo3Config's default: every fourth layer global
        kw["layer_types"] = [pick(rng, ["sliding_attention", "full_attention"]) for _ in range(n)]
    kw["sliding_window"] = pick(rng, [8, 32, 4096])
    full = dict(rope_type="default", rope_theta=kw.pop("rope_theta")) | (rope_choice(rng) or {})
    kw["rope_parameters"] = {"full_attention": full,
                             "sliding_attention": dict(rope_type="default", rope_theta=pick(rng, [10000.0, 50000.0]))}
    return "Olmo3Config", kw


def case_olmoe(rng):
    _, kw = case_olmo2(rng)
    experts = pick(rng, [4, 8, 16])
    kw |= dict(num_experts=experts, num_experts_per_tok=min(pick(rng, [1, 2, 4]), experts),
               intermediate_size=8 * rng.randrange(2, 10), norm_topk_prob=rng.random() < 0.5, rope=rope_choice(rng))
    return "OlmoeConfig", kw


def case_exaone4(rng):
    kw = common(rng) | attn_shape(rng) | dict(rope=rope_choice(rng))
    kw["num_hidden_layers"] = rng.randrange(2, 6)
    if rng.random() < 0.7:  # else every layer global (no window)
        kw |= dict(sliding_window=pick(rng, [8, 32]), sliding_window_pattern=pick(rng, [2, 3, 4]))
    return "Exaone4Config", kw


def case_seed_oss(rng):
    kw = common(rng) | attn_shape(rng) | dict(rope=rope_choice(rng))
    kw |= dict(attention_bias=rng.random() < 0.7, attention_out_bias=rng.random() < 0.3, mlp_bias=rng.random() < 0.2)
    return "SeedOssConfig", kw


def case_glm4_moe(rng):
    kw = common(rng) | attn_shape(rng) | dict(rope=rope_choice(rng))
    experts = pick(rng, [4, 8, 16])
    groups = pick(rng, [1, 2])
    kw |= dict(partial_rotary_factor=pick(rng, [0.5, 1.0]), attention_bias=rng.random() < 0.7,
               use_qk_norm=rng.random() < 0.5, moe_intermediate_size=8 * rng.randrange(2, 10), n_routed_experts=experts,
               num_experts_per_tok=min(pick(rng, [1, 2, 4]), experts // groups), n_shared_experts=pick(rng, [1, 2]),
               first_k_dense_replace=pick(rng, [0, 1]), n_group=groups, topk_group=1,
               routed_scaling_factor=pick(rng, [1.0, 2.5]), norm_topk_prob=rng.random() < 0.5)
    return "Glm4MoeConfig", kw


def case_lfm2_moe(rng):
    kw = lfm2_layers(rng)
    experts = pick(rng, [4, 8])
    kw |= dict(conv_bias=rng.random() < 0.5,
               num_dense_layers=pick(rng, [0, 1, 2]), num_experts=experts,
               num_experts_per_tok=min(pick(rng, [1, 2, 3]), experts), moe_intermediate_size=8 * rng.randrange(2, 8),
               use_expert_bias=rng.random() < 0.5, norm_topk_prob=rng.random() < 0.5,
               routed_scaling_factor=pick(rng, [1.0, 1.5]))
    return "Lfm2MoeConfig", kw


FAMILIES = {
    "llama": case_llama, "mistral": case_mistral, "mixtral": case_mixtral, "qwen2": case_qwen2, "qwen2_moe": case_qwen2_moe, "qwen3": case_qwen3,
    "olmo2": case_olmo2, "hunyuan": case_hunyuan, "hunyuan_moe": case_hunyuan_moe, "ernie4_5": case_ernie4_5, "ernie4_5_moe": case_ernie4_5_moe, "qwen3_moe": case_qwen3_moe, "lfm2": case_lfm2,
    "qwen3_5": case_qwen3_5, "qwen3_5_moe": lambda r: case_qwen3_5(r, moe=True), "qwen3_next": case_qwen3_next,
    "deepseek_v3": case_deepseek, "deepseek_v2": lambda r: case_deepseek(r, v3=False), "gemma3": case_gemma3,
    "gemma2": case_gemma2, "phi3": case_phi3, "smollm3": case_smollm3,
    "glm4": case_glm4, "glm": lambda r: case_glm4(r, v4=False), "gpt_oss": case_gpt_oss,
    "granite": case_granite, "granitemoe": case_granitemoe,
    "gemma": case_gemma, "olmo3": case_olmo3, "olmoe": case_olmoe, "exaone4": case_exaone4, "seed_oss": case_seed_oss,
    "glm4_moe": case_glm4_moe, "lfm2_moe": case_lfm2_moe,
}


def build_checkpoint(cls_name, kw, seed, out_dir):
    """Random-initialised fp32 checkpoint (normal(0, 0.1) matrices, random norms and biases) in out_dir."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    import make_model_fixtures as mmf

    kw = dict(kw)
    rope = kw.pop("rope", None)
    theta = kw.pop("rope_theta", 10000.0)
    cfg = mmf.make_config(cls_name, rope_theta=theta, rope=rope, **kw)
    torch.manual_seed(seed)
    attn = {"attn_implementation": "eager"} if getattr(cfg, "attn_logit_softcapping", None) else {}
    model = AutoModelForCausalLM.from_config(cfg, **attn).float().eval()
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.1)
    mmf.randomise_norms_and_biases(model, torch.Generator().manual_seed(seed + 1))
    model.save_pretrained(out_dir, safe_serialization=True)
    del model
    return transformers.__version__


def reference(model_dir, prompts, new_tokens, top_k, device, dtype="float32"):
    import parity
    return parity.reference_decode(model_dir, dtype, prompts, new_tokens, top_k, device)


def run_vireo(vireo, model_dir, prompts, mode, new_tokens, top_k, workdir, tokenizer):
    """`vireo generate` of every prompt in one process (parity.vireo_decode) with the mode's flags."""
    import parity
    flags, batch, _ = MODES[mode]
    args = types.SimpleNamespace(vireo=vireo, top_k=top_k, max_tokens_flag="--max-tokens", max_new_tokens=new_tokens,
                                 passthrough=["--ignore-eos", "--tokenizer", tokenizer] + flags)
    return parity.vireo_decode(args, model_dir, prompts, batch, workdir)


def judge(ref, got, top_k, tie_margin):
    """Counts of EXACT / TOP_K_MATCH / FAIL, mismatches (divergence at a margin >= tie_margin), max diff."""
    results = [pl.classify(r, g, top_k, i) for i, (r, g) in enumerate(zip(ref, got))]
    s = pl.summarize(results)
    mismatches = []
    for r, res in zip(ref, results):
        if res.first_divergence is None:
            continue
        pos = res.first_divergence
        top = r.top[pos]
        margin = float(top[0][1]) - float(top[1][1]) if len(top) >= 2 else 0.0
        if margin >= tie_margin or res.verdict == pl.FAIL:
            mismatches.append(f"p{res.index}@{pos} margin {margin:.3g}: {res.detail}")
    return s, mismatches


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vireo", default=os.path.join(REPO, "build", "vireo"))
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--seeds", type=int, default=2, help="configs per family")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--modes", default="cpu,cuda,cuda-chunked,cuda-bf16,hf-bf16")
    ap.add_argument("--new-tokens", type=int, default=12)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--tie-margin", type=float, default=1e-3)
    ap.add_argument("--bf16-tie-margin", type=float, default=0.5)
    ap.add_argument("--device", default=None, help="reference device (default cuda when available)")
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "models", "qwen3"),
                    help="tokenizer folder for vireo (the random checkpoints have none; ids are what is compared)")
    ap.add_argument("--output-md")
    ap.add_argument("--output-json")
    args = ap.parse_args(argv)
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    modes = [m for m in args.modes.split(",") if m]
    rows, bad_fp32 = [], 0
    workroot = tempfile.mkdtemp(prefix="vireo-sweep-")
    try:
        for fam in args.families.split(","):
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                rng = random.Random(f"{fam}-{seed}")
                cls_name, kw = FAMILIES[fam](rng)
                name = f"{fam}-s{seed}"
                mdir = os.path.join(workroot, name)
                os.makedirs(mdir)
                row = {"case": name, "config_class": cls_name, "knobs": kw, "modes": {}}
                rows.append(row)
                try:
                    build_checkpoint(cls_name, kw, 1000 + seed, mdir)
                    vocab = json.load(open(os.path.join(mdir, "config.json"))).get(
                        "vocab_size") or kw["vocab_size"]
                    prng = random.Random(seed)
                    prompts = [[prng.randrange(vocab) for _ in range(n)] for n in PROMPT_LENS]
                    prompts.append(prompts[-1][:120] + prompts[6][:20])  # shares a 120-token prefix
                    ref = reference(mdir, prompts, args.new_tokens, args.top_k, device)
                except Exception as e:  # a config transformers refuses is reported, not fatal
                    row["error"] = f"reference: {type(e).__name__}: {e}"[:400]
                    print(f"{name}: {row['error']}", file=sys.stderr)
                    traceback.print_exc()
                    continue
                for mode in modes:
                    fp32 = MODES[mode][2]
                    try:
                        got = reference(mdir, prompts, args.new_tokens, args.top_k, device, "bfloat16") \
                            if mode == "hf-bf16" else run_vireo(args.vireo, mdir, prompts, mode, args.new_tokens, args.top_k, workroot,
                                        args.tokenizer)
                        s, mism = judge(ref, got, args.top_k, args.tie_margin if fp32 else args.bf16_tie_margin)
                        row["modes"][mode] = {"summary": s, "mismatches": mism}
                        if fp32 and mism:
                            bad_fp32 += 1
                        print(f"{name} {mode}: EXACT {s['exact']} TOP_K {s['top_k_match']} FAIL {s['fail']} "
                              f"maxdiff {s['logprob_abs_diff_max']} mismatches {len(mism)} {mism[:2]}",
                              file=sys.stderr)
                    except Exception as e:
                        row["modes"][mode] = {"error": str(e)[:600]}
                        if fp32:
                            bad_fp32 += 1
                        print(f"{name} {mode}: ERROR {e}", file=sys.stderr)
                shutil.rmtree(mdir, ignore_errors=True)
    finally:
        shutil.rmtree(workroot, ignore_errors=True)
    md = report(rows, modes)
    print(md)
    if args.output_md:
        open(args.output_md, "w").write(md)
    if args.output_json:
        json.dump(rows, open(args.output_json, "w"), indent=1, default=str)
    return 1 if bad_fp32 else 0


def report(rows, modes):
    lines = ["| case | knobs | " + " | ".join(modes) + " |", "|---|---|" + "---|" * len(modes)]
    for r in rows:
        k = r["knobs"]
        knobs = ", ".join(f"{a}={k[a]}" for a in ("num_attention_heads", "num_key_value_heads", "head_dim",
                                                   "hidden_size", "tie_word_embeddings") if a in k)
        extra = [f"rope={k['rope']['rope_type']}" for _ in [0] if k.get("rope")]
        for a in ("sliding_window", "num_experts", "num_local_experts", "num_experts_per_tok", "norm_topk_prob", "layer_types",
                  "q_lora_rank", "attention_bias", "mlp_bias"):
            if a in k:
                extra.append(f"{a}={k[a]}")
        cells = []
        for m in modes:
            if "error" in r:
                cells.append("ref error")
                continue
            d = r["modes"].get(m, {})
            if "error" in d:
                cells.append("ERROR")
            elif d:
                s = d["summary"]
                mx = s["logprob_abs_diff_max"]
                cells.append(f"{s['exact']}/{s['top_k_match']}/{s['fail']}"
                             f"{' MISMATCH ' + str(len(d['mismatches'])) if d['mismatches'] else ''}"
                             f" ({'-' if mx is None else format(mx, '.1e')})")
            else:
                cells.append("-")
        lines.append(f"| {r['case']} | {knobs}; {'; '.join(extra)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
