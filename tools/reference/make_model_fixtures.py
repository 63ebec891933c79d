#!/usr/bin/env python3
"""Tiny random-initialised checkpoints + fp32 reference outputs for the model parity tests.

Run on the device machine (torch + transformers, no internet):
    PYTHONUNBUFFERED=1 python3 tools/reference/make_model_fixtures.py --out $OUT/model_fixtures
Writes <out>/<case>/{config.json, *.safetensors[, model.safetensors.index.json], generation_config.json,
reference.json}; commit them under tests/fixtures/model/.

reference.json:
  prompts:        3 lists of token ids (lengths 5, 17, 40)
  last_logits:    per prompt, fp32 logits of the last position [vocab]
  full_logits:    per-position logits of prompts[1] [17][vocab]
  greedy:         per prompt, 32 greedy tokens (argmax, full recompute each step)
  min_margin:     smallest top1 - top2 logit gap met along the greedy paths (near-ties flip easily)
  inv_freq, attention_scaling: the model's rotary embedding buffers (checks our RoPE tables)
"""
import argparse
import inspect
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

VOCAB = 512
BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
            initializer_range=0.1, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=0)
PROMPT_LENS = (5, 17, 40)
GREEDY = 32


def rope_kwargs(cls, theta, params):
    """transformers >= 5 takes rope_parameters (with rope_theta inside); older ones rope_scaling + rope_theta."""
    sig = inspect.signature(cls.__init__).parameters
    if "rope_parameters" in sig:
        p = {"rope_type": "default"} if params is None else dict(params)
        p["rope_theta"] = theta
        return {"rope_parameters": p}
    kw = {"rope_theta": theta}
    if params is not None:
        kw["rope_scaling"] = dict(params)
    return kw


# Multimodal wrappers: the text architecture goes into text_config, with a tiny vision tower.
NESTED_TEXT = {"Qwen3_5Config": ("Qwen3_5TextConfig", "Qwen3_5ForConditionalGeneration",
                                 dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64,
                                      out_hidden_size=64, patch_size=8, spatial_merge_size=2,
                                      temporal_patch_size=2, num_position_embeddings=16)),
               "Gemma3Config": ("Gemma3TextConfig", "Gemma3ForConditionalGeneration",
                                dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=2, image_size=28, patch_size=14)),
               "Qwen3VLConfig": ("Qwen3VLTextConfig", "Qwen3VLForConditionalGeneration",
                                 dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64,
                                      out_hidden_size=64, patch_size=8, spatial_merge_size=2,
                                      temporal_patch_size=2, num_position_embeddings=16,
                                      deepstack_visual_indexes=[0])),
               "Mistral3Config": ("MistralConfig", "Mistral3ForConditionalGeneration",
                                  dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=2, head_dim=16, image_size=32, patch_size=16)),
               "Qwen3VLMoeConfig": ("Qwen3VLMoeTextConfig", "Qwen3VLMoeForConditionalGeneration",
                                    dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64,
                                         out_hidden_size=64, patch_size=8, spatial_merge_size=2,
                                         temporal_patch_size=2, num_position_embeddings=16,
                                         deepstack_visual_indexes=[0])),
               "Qwen2_5_VLConfig": ("Qwen2_5_VLTextConfig", "Qwen2_5_VLForConditionalGeneration",
                                    dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64,
                                         out_hidden_size=64, patch_size=8, spatial_merge_size=2,
                                         temporal_patch_size=2, window_size=32, fullatt_block_indexes=[0]))}
# Wrapper config kwargs beyond text/vision (Gemma3Config: image tokens per image, a square).
NESTED_EXTRA = {"Gemma3Config": dict(mm_tokens_per_image=4)}

# Gemma 3: RoPE per layer type (transformers 5): linear-scaled global layers, local layers with base 10000.
GEMMA3_ROPE = {"full_attention": dict(rope_type="linear", factor=4.0, rope_theta=1000000.0),
               "sliding_attention": dict(rope_type="default", rope_theta=10000.0)}
GEMMA3 = dict(tie_word_embeddings=True, num_hidden_layers=4, head_dim=32, query_pre_attn_scalar=24,
              sliding_window=8, hidden_activation="gelu_pytorch_tanh",
              layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
              rope_parameters=GEMMA3_ROPE)


def make_config(cls_name, rope_theta=10000.0, rope=None, **extra):
    if cls_name in NESTED_TEXT:
        text_cls, _, vision = NESTED_TEXT[cls_name]
        tie = extra.pop("tie_word_embeddings", False)
        text = make_config(text_cls, rope_theta=rope_theta, rope=rope, **extra)
        return getattr(transformers, cls_name)(text_config=text.to_dict(), vision_config=vision,
                                               tie_word_embeddings=tie, **NESTED_EXTRA.get(cls_name, {}))
    cls = getattr(transformers, cls_name)
    kw = dict(BASE)
    if "norm_eps" in extra:  # LFM2 names it norm_eps; its strict config may refuse rms_norm_eps
        kw.pop("rms_norm_eps")
    kw.update(rope_kwargs(cls, rope_theta, rope))
    kw.update(extra)
    return cls(**kw)


CASES = [
    # name, config class, architecture kwargs, save dtype, max_shard_size
    ("llama3", "LlamaConfig", dict(tie_word_embeddings=False,
                                   rope=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                             high_freq_factor=4.0, original_max_position_embeddings=64)),
     torch.float32, None),
    ("llama_yarn_bias", "LlamaConfig", dict(tie_word_embeddings=False, attention_bias=True, mlp_bias=True,
                                            rope=dict(rope_type="yarn", factor=4.0,
                                                      original_max_position_embeddings=128)),
     torch.float32, None),
    ("qwen2", "Qwen2Config", dict(tie_word_embeddings=True), torch.float32, None),
    # Sliding-window attention on layer 1 only (use_sliding_window, max_window_layers 1), a window of 8 keys:
    # prompts of 17 and 40 tokens and the greedy continuations run past it.
    ("qwen2_sliding", "Qwen2Config", dict(tie_word_embeddings=False, use_sliding_window=True, sliding_window=8,
                                          max_window_layers=1), torch.float32, None),
    ("qwen3", "Qwen3Config", dict(tie_word_embeddings=True, head_dim=32, rope_theta=1000000.0), torch.float32, None),
    ("qwen3_bf16_sharded", "Qwen3Config", dict(tie_word_embeddings=True, head_dim=32), torch.bfloat16, "60KB"),
    ("olmo2", "Olmo2Config", dict(tie_word_embeddings=False), torch.float32, None),
    ("hunyuan_dense", "HunYuanDenseV1Config", dict(tie_word_embeddings=True, head_dim=16,
                                                   rope=dict(rope_type="dynamic", factor=1.0, alpha=1000.0)),
     torch.float32, None),
    # Sparse MoE MLPs: 8 experts, top-2 renormalised; then top-3 not renormalised with layer 0 dense.
    ("qwen3_moe", "Qwen3MoeConfig", dict(tie_word_embeddings=False, head_dim=32, num_experts=8,
                                         num_experts_per_tok=2, moe_intermediate_size=48, norm_topk_prob=True),
     torch.float32, None),
    ("qwen3_moe_mixed", "Qwen3MoeConfig", dict(tie_word_embeddings=True, head_dim=16, num_experts=6,
                                               num_experts_per_tok=3, moe_intermediate_size=40,
                                               norm_topk_prob=False, mlp_only_layers=[0]),
     torch.float32, None),
    # Qwen2-MoE: Qwen2 attention (q/k/v biases), layer 0 dense, then 8 experts top-2 not renormalised plus a
    # shared expert scaled by sigmoid(shared_expert_gate(x)).
    ("qwen2_moe", "Qwen2MoeConfig", dict(tie_word_embeddings=False, num_experts=8, num_experts_per_tok=2,
                                         moe_intermediate_size=32, shared_expert_intermediate_size=48,
                                         norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[0]),
     torch.float32, None),
    # Mixtral: Mistral attention with a sliding window of 16 keys, 4 experts top-2 in every layer (always
    # renormalised), experts as wide as intermediate_size.
    ("mixtral", "MixtralConfig", dict(tie_word_embeddings=False, head_dim=16, num_local_experts=4,
                                      num_experts_per_tok=2, intermediate_size=48, sliding_window=16),
     torch.float32, None),
    # Hybrid LFM2: short-conv and attention layers, conv biases, Lfm2MLP's width rule
    # (int(2 * 200 / 3) = 133, * 1.25 -> 166, rounded up to 32 -> 192).
    ("lfm2", "Lfm2Config", dict(tie_word_embeddings=True, rope_theta=1000000.0, norm_eps=1e-5,
                                layer_types=["conv", "full_attention", "conv", "full_attention"],
                                num_hidden_layers=4, intermediate_size=200, block_auto_adjust_ff_dim=True,
                                block_ffn_dim_multiplier=1.25, block_multiple_of=32, conv_L_cache=3,
                                conv_bias=True),
     torch.float32, None),
    # DeepSeek-V3: MLA (q_lora_rank set, kv_lora_rank 32, per head 32 nope + 16 rope dims, v 32), interleaved
    # RoPE, layer 0 dense, layers 1-2 sparse: 8 experts in 2 groups (1 kept), top-2, sigmoid router with a
    # random e_score_correction_bias, renormalised and scaled by 2.5, one shared expert. MLA has no GQA:
    # num_key_value_heads must equal num_attention_heads (HF repeats the per-head K/V by their ratio).
    ("deepseek_v3", "DeepseekV3Config", dict(tie_word_embeddings=False, num_hidden_layers=3, num_key_value_heads=4,
                                             intermediate_size=96, q_lora_rank=48, kv_lora_rank=32,
                                             qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
                                             n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
                                             moe_intermediate_size=32, n_group=2, topk_group=1,
                                             routed_scaling_factor=2.5, norm_topk_prob=True,
                                             first_k_dense_replace=1, rope_interleave=True),
     torch.float32, None),
    # The other MLA / router branches: q_proj (q_lora_rank null), rotate_half RoPE, yarn with mscale_all_dim
    # (softmax scale * mscale^2), v_head_dim 40 = the whole key width, no group limit, two shared experts,
    # weights neither renormalised nor scaled.
    ("deepseek_v3_qproj", "DeepseekV3Config", dict(tie_word_embeddings=True, num_hidden_layers=3, num_key_value_heads=4,
                                                   intermediate_size=96, q_lora_rank=None, kv_lora_rank=24,
                                                   qk_nope_head_dim=24, qk_rope_head_dim=16, v_head_dim=40,
                                                   n_routed_experts=6, num_experts_per_tok=3, n_shared_experts=2,
                                                   moe_intermediate_size=24, n_group=1, topk_group=1,
                                                   routed_scaling_factor=1.0, norm_topk_prob=False,
                                                   first_k_dense_replace=1, rope_interleave=False,
                                                   rope=dict(rope_type="yarn", factor=4.0, mscale=1.0, mscale_all_dim=1.0,
                                                             original_max_position_embeddings=128)),
     torch.float32, None),
    # DeepSeek-V2(-Lite): the same MLA (q_proj here), RoPE on complex pairs, the greedy softmax gate (weights
    # times routed_scaling_factor, never renormalised), one shared expert (transformers' V2 needs one), and
    # rms_norm_eps 1e-5 while q_a/kv_a layernorms keep their 1e-6 default.
    ("deepseek_v2_lite", "DeepseekV2Config", dict(tie_word_embeddings=False, num_hidden_layers=3, num_key_value_heads=4,
                                                  intermediate_size=96, q_lora_rank=None, kv_lora_rank=32,
                                                  qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
                                                  n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
                                                  moe_intermediate_size=32, routed_scaling_factor=2.0,
                                                  topk_method="greedy", first_k_dense_replace=1, rms_norm_eps=1e-5),
     torch.float32, None),
    # Qwen3.5 text (Qwen3_5ForCausalLM): hybrid of Gated DeltaNet layers (linear_attn: in_proj_qkv / z / b / a,
    # causal conv1d, gated delta rule with GQA 2 -> 4 value heads, gated RMSNorm, out_proj) and gated
    # attention layers (q_proj emits query and a sigmoid output gate per head; zero-centred q/k norms;
    # partial rotary 0.25 with interleaved mrope sections, which text positions reduce to plain RoPE).
    ("qwen3_5", "Qwen3_5TextConfig", dict(tie_word_embeddings=True, num_hidden_layers=4, head_dim=32,
                                          layer_types=["linear_attention", "full_attention",
                                                       "linear_attention", "full_attention"],
                                          linear_num_key_heads=2, linear_num_value_heads=4,
                                          linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
                                          rope=dict(rope_type="default", partial_rotary_factor=0.25,
                                                    mrope_section=[2, 1, 1], mrope_interleaved=True)),
     torch.float32, None),
    # Qwen3.5-MoE text: the same mixers, sparse MoE MLPs (softmax top-2 renormalised) plus a shared expert
    # scaled by sigmoid(shared_expert_gate(x)); the last layer ends on linear attention.
    ("qwen3_5_moe", "Qwen3_5MoeTextConfig", dict(tie_word_embeddings=False, num_hidden_layers=3, head_dim=32,
                                                 layer_types=["linear_attention", "full_attention",
                                                              "linear_attention"],
                                                 linear_num_key_heads=2, linear_num_value_heads=2,
                                                 linear_key_head_dim=16, linear_value_head_dim=24,
                                                 linear_conv_kernel_dim=4, num_experts=8, num_experts_per_tok=2,
                                                 moe_intermediate_size=32, shared_expert_intermediate_size=48,
                                                 rope=dict(rope_type="default", partial_rotary_factor=0.25,
                                                           mrope_section=[2, 1, 1], mrope_interleaved=True)),
     torch.float32, None),
    # Qwen3-Next: in_proj_qkvz / in_proj_ba with their per-key-head interleaved layout, MoE from layer 1
    # (layer 0 dense through mlp_only_layers), plain partial RoPE.
    ("qwen3_next", "Qwen3NextConfig", dict(tie_word_embeddings=False, num_hidden_layers=4, head_dim=32,
                                           layer_types=["linear_attention", "linear_attention",
                                                        "linear_attention", "full_attention"],
                                           linear_num_key_heads=2, linear_num_value_heads=4,
                                           linear_key_head_dim=16, linear_value_head_dim=16,
                                           linear_conv_kernel_dim=4, num_experts=8, num_experts_per_tok=2,
                                           moe_intermediate_size=32, shared_expert_intermediate_size=48,
                                           decoder_sparse_step=1, mlp_only_layers=[0], norm_topk_prob=True,
                                           rope=dict(rope_type="default", partial_rotary_factor=0.25)),
     torch.float32, None),
    # Qwen3.5 as released (Qwen3_5ForConditionalGeneration: text_config nested, weights under
    # model.language_model.*, a tiny vision tower that text-only serving ignores).
    ("qwen3_5_vl", "Qwen3_5Config", dict(tie_word_embeddings=False, num_hidden_layers=2, head_dim=32,
                                         layer_types=["linear_attention", "full_attention"],
                                         linear_num_key_heads=2, linear_num_value_heads=4,
                                         linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
                                         rope=dict(rope_type="default", partial_rotary_factor=0.25,
                                                   mrope_section=[2, 1, 1], mrope_interleaved=True)),
     torch.float32, None),
    # Gemma 3 text: four zero-centred norms a layer, scaled embeddings, GELU-tanh MLP, attention scale
    # 24^-0.5 (query_pre_attn_scalar, not head_dim), sliding layers (window 8) with their own RoPE base.
    ("gemma3", "Gemma3TextConfig", dict(GEMMA3), torch.float32, None),
    # Phi-3 / Phi-4-mini: q/k/v and gate/up fused in the checkpoint, partial rotary 0.75 (rotary dim 12 of
    # 16), LongRoPE (factor 512 / 128: cos / sin scaled by sqrt(1 + ln 4 / ln 128); the fixture's sequences stay
    # under original_max_position_embeddings, so the short factors rotate them), a sliding window of 24.
    ("phi3", "Phi3Config", dict(tie_word_embeddings=False, partial_rotary_factor=0.75, sliding_window=24,
                                original_max_position_embeddings=128,
                                rope=dict(rope_type="longrope", short_factor=[1.0, 1.3, 1.7, 2.2, 3.1, 4.0],
                                          long_factor=[1.5, 2.5, 4.0, 6.0, 9.0, 14.0],
                                          original_max_position_embeddings=128)), torch.float32, None),
    # GLM / GLM-4: q/k/v biases without an o_proj bias, GPT-J interleaved RoPE on half of each head, fused
    # gate_up; GLM-4's four norms a layer (post_self_attn, post_attention = the MLP's input, post_mlp).
    ("glm", "GlmConfig", dict(tie_word_embeddings=False, head_dim=16, partial_rotary_factor=0.5, attention_bias=True),
     torch.float32, None),
    ("glm4", "Glm4Config", dict(tie_word_embeddings=False, head_dim=16, partial_rotary_factor=0.5, attention_bias=True,
                                num_hidden_layers=3), torch.float32, None),
    # SmolLM3: Llama with NoPE layers (no_rope_layer_interval 2: layers 1 and 3 skip RoPE), tied embeddings.
    ("smollm3", "SmolLM3Config", dict(num_hidden_layers=4, no_rope_layer_interval=2), torch.float32, None),
    # Gemma (1): Llama's layer with zero-centred norms, sqrt(hidden)-scaled embeddings, GELU-tanh MLP.
    ("gemma", "GemmaConfig", dict(tie_word_embeddings=True, num_hidden_layers=3, head_dim=32,
                                  hidden_activation="gelu_pytorch_tanh"), torch.float32, None),
    # Gemma 2: Gemma 3's layer without q/k norms, one RoPE, tanh soft-capping of the attention scores and
    # the final logits (caps small enough to bend these random weights' values), window 8 on layers 0 and 2.
    ("gemma2", "Gemma2Config", dict(tie_word_embeddings=True, num_hidden_layers=4, head_dim=32, query_pre_attn_scalar=24,
                                    sliding_window=8, hidden_activation="gelu_pytorch_tanh",
                                    attn_logit_softcapping=1.5, final_logit_softcapping=2.0), torch.float32, None),
    # GPT-OSS: attention sinks, every other layer sliding (window 8), YaRN without truncation, 8 experts
    # top-2 with biases and the clamped SwiGLU (gate_up weights scaled up at build so the clamps bite).
    ("gpt_oss", "GptOssConfig", dict(tie_word_embeddings=False, num_hidden_layers=4, head_dim=16, intermediate_size=64,
                                     num_local_experts=8, num_experts_per_tok=2, sliding_window=8,
                                     rope=dict(rope_type="yarn", factor=4.0, beta_fast=32.0, beta_slow=1.0,
                                               truncate=False, original_max_position_embeddings=128)),
     torch.float32, None),
    # Granite 3.x dense: Llama with its four multipliers (embeddings x12, the softmax scale 1/16 given as
    # attention_multiplier, residual branches x0.22, logits / 8), tied embeddings.
    ("granite", "GraniteConfig", dict(tie_word_embeddings=True, embedding_multiplier=12.0, attention_multiplier=0.0625,
                                      residual_multiplier=0.22, logits_scaling=8.0), torch.float32, None),
    # GraniteMoe (3.x MoE): the same multipliers with Mixtral-style experts stacked as input_linear / output_linear.
    ("granitemoe", "GraniteMoeConfig", dict(tie_word_embeddings=True, embedding_multiplier=12.0,
                                            attention_multiplier=0.0625, residual_multiplier=0.22, logits_scaling=8.0,
                                            num_local_experts=4, num_experts_per_tok=2, intermediate_size=48),
     torch.float32, None),
    # Gemma 3 as released from 4B up (Gemma3ForConditionalGeneration: text_config nested, a tiny SigLIP).
    ("gemma3_vl", "Gemma3Config", dict(GEMMA3, num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"],
                                       tie_word_embeddings=True), torch.float32, None),
    # LFM2-MoE (LFM2-8B-A1B): the same mixers, layer 0 dense (intermediate_size as given), then 8 experts
    # top-3 with a sigmoid router, a random expert_bias for the choice, weights renormalised (+1e-6) and
    # scaled by 1.5; no conv biases.
    ("lfm2_moe", "Lfm2MoeConfig", dict(tie_word_embeddings=False, rope_theta=1000000.0, norm_eps=1e-5,
                                       layer_types=["conv", "full_attention", "conv", "full_attention"],
                                       num_hidden_layers=4, intermediate_size=96, moe_intermediate_size=32,
                                       num_experts=8, num_experts_per_tok=3, num_dense_layers=1,
                                       use_expert_bias=True, norm_topk_prob=True, routed_scaling_factor=1.5,
                                       conv_L_cache=3, conv_bias=False),
     torch.float32, None),
    # OLMo 3: OLMo-2's post-norm layers and full-width q/k norms, sliding windows (8 keys) on layers 0-2 by
    # Olmo3Config's default layer_types, RoPE per layer type: YaRN on the global layer, plain on the others
    # with a base of their own.
    ("olmo3", "Olmo3Config", dict(tie_word_embeddings=False, num_hidden_layers=4, sliding_window=8,
                                  rope_parameters={"full_attention": dict(rope_type="yarn", factor=4.0, rope_theta=10000.0,
                                                                          original_max_position_embeddings=128),
                                                   "sliding_attention": dict(rope_type="default", rope_theta=50000.0)}),
     torch.float32, None),
    # GLM-4.5 (Glm4MoeForCausalLM): q/k/v biases, per-head q/k norms, NeoX RoPE on half of each head; layer 0
    # dense, then DeepSeek-V3's router (sigmoid, random e_score_correction_bias, 2 groups with 1 kept, top-2
    # renormalised, x2.5) and one shared expert.
    ("glm4_moe", "Glm4MoeConfig", dict(tie_word_embeddings=False, num_hidden_layers=3, head_dim=16,
                                       partial_rotary_factor=0.5, attention_bias=True, use_qk_norm=True,
                                       intermediate_size=96, moe_intermediate_size=32, n_routed_experts=8,
                                       num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
                                       n_group=2, topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True),
     torch.float32, None),
    # Qwen3-VL as released (Qwen3VLForConditionalGeneration: Qwen3 text under model.language_model.*,
    # interleaved M-RoPE sections that text positions make plain RoPE, a tiny vision tower ignored).
    ("qwen3_vl", "Qwen3VLConfig", dict(tie_word_embeddings=True, head_dim=32, rope_theta=5000000.0,
                                       rope=dict(rope_type="default", mrope_section=[8, 4, 4], mrope_interleaved=True)),
     torch.float32, None),
    # Qwen3-VL-MoE: the Qwen3-MoE text model, 8 experts top-2 renormalised, stacked experts in the checkpoint.
    ("qwen3_vl_moe", "Qwen3VLMoeConfig", dict(tie_word_embeddings=False, head_dim=32, num_experts=8,
                                              num_experts_per_tok=2, moe_intermediate_size=48, norm_topk_prob=True,
                                              rope=dict(rope_type="default", mrope_section=[8, 4, 4],
                                                        mrope_interleaved=True)),
     torch.float32, None),
    # EXAONE 4.0: OLMo-2's post-norm layers, per-head q/k norms, three sliding layers (window 8) of four with
    # RoPE and a global NoPE layer (sliding_window_pattern 4), llama3-scaled RoPE.
    ("exaone4", "Exaone4Config", dict(tie_word_embeddings=False, num_hidden_layers=4, sliding_window=8,
                                      sliding_window_pattern=4,
                                      rope=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                high_freq_factor=4.0, original_max_position_embeddings=64)),
     torch.float32, None),
    # Seed-OSS: Llama with q/k/v biases (attention_bias) but none on o_proj (attention_out_bias false).
    ("seed_oss", "SeedOssConfig", dict(tie_word_embeddings=False, head_dim=16, attention_bias=True,
                                       attention_out_bias=False), torch.float32, None),
    # Mistral 3 (Mistral Small 3.1 / 3.2) as released: a Mistral text model in text_config, a tiny Pixtral.
    ("mistral3", "Mistral3Config", dict(tie_word_embeddings=False, head_dim=16, rope_theta=1000000000.0),
     torch.float32, None),
    # OLMoE: full-width q/k norms, 8 experts top-2 (not renormalised) intermediate_size wide in every layer.
    ("olmoe", "OlmoeConfig", dict(tie_word_embeddings=False, num_experts=8, num_experts_per_tok=2, intermediate_size=48,
                                  norm_topk_prob=False), torch.float32, None),
    # ERNIE 4.5 (0.3B-style): GLM's interleaved RoPE over the whole head, biases on every projection, tied;
    # head_dim 32, not hidden / heads (as the real models' 128 with 1024 / 16).
    ("ernie4_5", "Ernie4_5Config", dict(tie_word_embeddings=True, head_dim=32, use_bias=True), torch.float32, None),
    # HunYuan-MoE (Hunyuan-A13B): HunYuan dense attention (q/k norms after RoPE, NTK-alpha dynamic RoPE), 4 experts
    # top-2 (always renormalised) intermediate_size wide with an fp32 router (mlp.gate.wg), plus one shared MLP.
    ("hunyuan_moe", "HunYuanMoEV1Config", dict(tie_word_embeddings=True, head_dim=16, num_experts=4, moe_topk=2,
                                               intermediate_size=48,
                                               rope=dict(rope_type="dynamic", factor=1.0, alpha=1000.0)),
     torch.float32, None),
    # ERNIE 4.5 MoE (ERNIE-4.5-21B-A3B-style): ERNIE's attention, layer 0 dense (moe_layer_start_index 1), then 8
    # experts top-2 by softmax + the moe_statics choice bias (randomised), renormalised, plus one shared MLP.
    ("ernie4_5_moe", "Ernie4_5_MoeConfig", dict(tie_word_embeddings=True, head_dim=16, moe_num_experts=8, moe_k=2,
                                               moe_intermediate_size=32, moe_num_shared_experts=1,
                                               moe_layer_start_index=1), torch.float32, None),
    # Qwen2.5-VL: a Qwen2 text model (q/k/v biases) in text_config, M-RoPE sections of head_dim / 2 = 8; a tiny
    # vision tower beside it (not run: text only).
    ("qwen2_5_vl", "Qwen2_5_VLConfig", dict(tie_word_embeddings=True,
                                           rope=dict(rope_type="default", mrope_section=[2, 3, 3])),
     torch.float32, None),
]


# Cases whose committed fixture was made at another place in CASES (its seed is 1234 + that index).
SEED_INDEX = {"ernie4_5_moe": 41}


def randomise_norms_and_biases(model, gen):
    """HF init sets norms to 1 and biases to 0; random values make mis-wired weights visible."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias") or name.endswith("proj_bias"):  # GPT-OSS experts: gate_up_proj_bias
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("e_score_correction_bias"):  # ERNIE 4.5 MoE's moe_statics (a parameter)
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".sinks"):  # GPT-OSS: sinks comparable to the scores
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name.endswith("experts.gate_up_proj"):  # GPT-OSS: gate / up values past swiglu_limit (7)
                p.mul_(6.0)
        for name, b in model.named_buffers():  # DeepSeek-V3's router bias is a buffer, zero at init
            if name.endswith("e_score_correction_bias") or name.endswith("expert_bias"):  # LFM2-MoE's too
                b.copy_(0.1 * torch.randn(b.shape, generator=gen))


def rounded(t):
    return [float(f"{v:.7g}") for v in t.tolist()]


@torch.no_grad()
def reference(model, gen):
    prompts = [torch.randint(0, VOCAB, (n,), generator=gen).tolist() for n in PROMPT_LENS]
    out = {"prompts": prompts, "last_logits": [], "greedy": [], "min_margin": float("inf")}
    for i, pr in enumerate(prompts):
        logits = model(torch.tensor([pr]), use_cache=False).logits[0].float()
        out["last_logits"].append(rounded(logits[-1]))
        if i == 1:
            out["full_logits"] = [rounded(row) for row in logits]
        ids = list(pr)
        gen_ids = []
        for _ in range(GREEDY):
            last = model(torch.tensor([ids]), use_cache=False).logits[0, -1].float()
            top = torch.topk(last, 2).values
            out["min_margin"] = min(out["min_margin"], float(top[0] - top[1]))
            nxt = int(torch.argmax(last))
            gen_ids.append(nxt)
            ids.append(nxt)
        out["greedy"].append(gen_ids)
    return out


def build(name, cfg_cls, kw, save_dtype, shard, out_dir, seed):
    kw = dict(kw)
    rope = kw.pop("rope", None)
    theta = kw.pop("rope_theta", 10000.0)
    cfg = make_config(cfg_cls, rope_theta=theta, rope=rope, **kw)
    torch.manual_seed(seed)
    auto = AutoModelForCausalLM
    if cfg_cls in NESTED_TEXT:
        auto = getattr(transformers, NESTED_TEXT[cfg_cls][1])
    try:
        model = auto.from_config(cfg, attn_implementation="eager") if auto is AutoModelForCausalLM else auto(cfg)
    except TypeError:
        cfg._attn_implementation = "eager"
        model = AutoModelForCausalLM.from_config(cfg)
    model = model.float().eval()
    gen = torch.Generator().manual_seed(seed + 1000)
    randomise_norms_and_biases(model, gen)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    if save_dtype != torch.float32:
        model = model.to(save_dtype)
    save_kw = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(d, **save_kw)
    # Reference in fp32 from exactly the saved (possibly bf16) values, reloaded the way users load
    # checkpoints: a fresh fp32 model, so non-persistent buffers (rotary inv_freq) are fp32 too
    # (model.to(bfloat16).float() would leave inv_freq rounded to bf16).
    del model
    try:
        model = auto.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        model = auto.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager")
    model = model.float().eval()
    ref = reference(model, torch.Generator().manual_seed(seed + 2000))
    inner = getattr(model.model, "language_model", model.model)  # multimodal wrappers
    rot = getattr(inner, "rotary_emb", None) or getattr(inner, "pos_emb", None)  # LFM2: pos_emb in some versions
    if rot is None:  # per-layer rotary embeddings (some GPT-OSS versions)
        rot = inner.layers[0].self_attn.rotary_emb
    # Gemma 3 keeps one table per layer type (full_attention_inv_freq, sliding_attention_inv_freq).
    inv = getattr(rot, "inv_freq", None)
    ref["inv_freq"] = rounded((inv if inv is not None else rot.full_attention_inv_freq).float())
    if getattr(rot, "sliding_attention_inv_freq", None) is not None:
        ref["local_inv_freq"] = rounded(rot.sliding_attention_inv_freq.float())
    ref["rotary_class"] = type(rot).__name__
    ref["attention_scaling"] = float(getattr(rot, "attention_scaling",
                                             getattr(rot, "full_attention_attention_scaling", 1.0)))
    ref["architecture"] = model.config.architectures[0]
    ref["transformers_version"] = transformers.__version__
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
    files = sorted(os.listdir(d))
    size = sum(os.path.getsize(os.path.join(d, x)) for x in files)
    print(f"{name}: {ref['architecture']} files={files} bytes={size} min_margin={ref['min_margin']:.4g} "
          f"greedy0={ref['greedy'][0][:8]}")
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    print("  rope:", {k: c[k] for k in c if "rope" in k}, "attention_scaling", ref["attention_scaling"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    torch.set_num_threads(8)
    print("torch", torch.__version__, "transformers", transformers.__version__)
    failed = []
    for i, (name, cls, kw, dt, shard) in enumerate(CASES):
        if args.only and name not in args.only.split(","):
            continue
        try:
            build(name, cls, kw, dt, shard, args.out, seed=1234 + SEED_INDEX.get(name, i))
        except Exception:  # keep going: one odd config must not cost the whole device call
            import traceback
            traceback.print_exc()
            if "rope" in kw:  # retry with default RoPE so the architecture is still covered
                try:
                    print(f"{name}: retrying with default rope")
                    build(name, cls, {k: v for k, v in kw.items() if k != "rope"}, dt, shard, args.out,
                          seed=1234 + SEED_INDEX.get(name, i))
                    continue
                except Exception:
                    traceback.print_exc()
            failed.append(name)
    if failed:
        print("FAILED:", failed)
        sys.exit(1)


if __name__ == "__main__":
    main()
