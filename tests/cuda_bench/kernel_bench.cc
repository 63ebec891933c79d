// Kernel microbenchmarks of the CUDA backend (device only; skipped unless VIREO_KERNEL_BENCH=1, so
// ctest never times anything). Each line: kernel, shape, median time, bytes or FLOPs over time, and
// the share of the measured ceiling (HBM copy, cuBLASLt bf16 GEMM) taken in the same process.
// Run: VIREO_KERNEL_BENCH=1 build-cuda/tests/test_cuda_bench [--gtest_filter=*Attention*]
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "bench_fixture.h"
#include "core/fp8.h"

namespace vireo {
namespace {

struct Row {
  std::string name;
  double us, rate, ceiling;
  const char* unit;
};
std::vector<Row>& rows() {
  static std::vector<Row> r;
  return r;
}
double g_hbm_gbs = 4300, g_gemm_tflops = 790;

class KernelBench : public bench::CudaBenchFixture {
 protected:
  // Median per-call time in microseconds (bench::median_us) after 3 warm-up calls; f gets the call's index.
  double time_us(const std::function<void(int)>& f, int reps = 15, int inner = 10) {
    return bench::median_us(stream_, f, reps, inner, 3);
  }
  void report_bw(const std::string& name, double us, double bytes) {
    rows().push_back({name, us, bytes / us / 1e3, g_hbm_gbs, "GB/s"});
    std::printf("%-48s %10.1f us %9.1f GB/s  %5.1f%% of HBM\n", name.c_str(), us, bytes / us / 1e3,
                100 * bytes / us / 1e3 / g_hbm_gbs);
  }
  void report_flops(const std::string& name, double us, double flops) {
    rows().push_back({name, us, flops / us / 1e6, g_gemm_tflops, "TFLOP/s"});
    std::printf("%-48s %10.1f us %9.1f TFLOP/s %5.1f%% of GEMM peak\n", name.c_str(), us, flops / us / 1e6,
                100 * flops / us / 1e6 / g_gemm_tflops);
  }

  // fp8: the caches as E4M3 codes (1 byte an element in the bytes reported).
  void attention(const std::string& name, int num_seqs, int q_len, int kv_len, int h, int hkv, int d,
                 int prefill_m_tiles = 0, int prefill_wgmma = -1, bool fp8 = false) {
    const int t = num_seqs * q_len;
    AttentionParams p = paged_params(std::vector<std::pair<int, int>>(num_seqs, {q_len, kv_len}), h, hkv, d, fp8,
                                     /*list_prefill=*/false);
    cuda::DeviceInfo dev;
    cudaDeviceGetAttribute(&dev.num_sms, cudaDevAttrMultiProcessorCount, 0);
    cuda::AttentionTuning tuning;
    tuning.prefill_m_tiles = prefill_m_tiles == 0 ? 2 : prefill_m_tiles;
    tuning.prefill_wgmma = prefill_wgmma;
    const bool direct = prefill_m_tiles != 0 || prefill_wgmma != -1;  // else through the backend
    Tensor ws = be_->alloc({int64_t{1} << 30}, DType::kU8);  // ample: direct launches plan their own splits
    owned_.push_back(ws);
    auto call = [&](int) {
      if (!direct) be_->paged_attention(p);
      else cuda::launch_paged_attention(p, [&](size_t) { return ws.data; }, dev, stream_, tuning);
    };
    const double us = time_us(call, q_len == 1 ? 15 : 5, q_len == 1 ? 10 : 3);
    if (q_len == 1) {
      const double bytes = 2.0 * num_seqs * kv_len * hkv * d * (fp8 ? 1 : 2) + 2.0 * t * h * d * 2;
      report_bw(name, us, bytes);
    } else {
      // Causal: query j of a chunk attends to kv_len - q_len + j + 1 keys; QK^T and PV: 4 FLOP per (q, k, d).
      double pairs = 0;
      for (int j = 0; j < q_len; ++j) pairs += kv_len - q_len + j + 1;
      report_flops(name, us, 4.0 * num_seqs * pairs * h * d);
    }
  }

  // Through the backend, a step of mixed sequences (q_len, kv_len) as the scheduler makes them: decode rows
  // beside prompts. Reports the time, the causal FLOPs of the prefill rows and the K/V bytes of the decode
  // rows, each against its ceiling alone (the two run on separate SM resources where the backend overlaps
  // them, VIREO_ATTN_OVERLAP).
  void attention_mixed(const std::string& name, const std::vector<std::pair<int, int>>& seqs, int h, int hkv, int d,
                       bool fp8) {
    double flops = 0, bytes = 0;
    for (auto [q, kv] : seqs) {
      if (q * (h / hkv) > 16) {
        for (int j = 0; j < q; ++j) flops += 4.0 * (kv - q + j + 1) * h * d;
      } else {
        bytes += 2.0 * kv * hkv * d * (fp8 ? 1 : 2);
      }
    }
    AttentionParams p = paged_params(seqs, h, hkv, d, fp8, /*list_prefill=*/true);
    const double us = time_us([&](int) { be_->paged_attention(p); }, 5, 3);
    std::printf("%-58s %9.1f us  prefill %6.1f TFLOP/s  decode %6.0f GB/s\n", name.c_str(), us, flops / us / 1e6,
                bytes / us / 1e3);
  }
};

TEST_F(KernelBench, A_Ceilings) {
  const size_t n = size_t{1} << 30;  // 1 GiB each way
  Tensor a = be_->alloc({int64_t(n)}, DType::kU8), b = be_->alloc({int64_t(n)}, DType::kU8);
  owned_.push_back(a);
  owned_.push_back(b);
  cudaMemsetAsync(a.data, 0x5a, n, stream_);  // a copy's speed does not depend on the bytes
  const double us = time_us([&](int) { cudaMemcpyAsync(b.data, a.data, n, cudaMemcpyDeviceToDevice, stream_); });
  g_hbm_gbs = 2.0 * n / us / 1e3;
  std::printf("ceiling: device copy %.0f GB/s (read + write)\n", g_hbm_gbs);
  const int64_t s = 8192;
  Tensor x = rand_t({s, s}), w = rand_t({s, s}, -0.01f, 0.01f), o = rand_t({s, s});
  const double gus = time_us([&](int) { be_->linear({x, w, Tensor(), o}); }, 5, 4);
  g_gemm_tflops = 2.0 * s * s * s / gus / 1e6;
  std::printf("ceiling: cuBLASLt bf16 GEMM 8192^3 %.0f TFLOP/s\n", g_gemm_tflops);
}

TEST_F(KernelBench, B_DecodeAttention) {
  attention("decode attn 32 seqs x 4k, H32/8 D128", 32, 1, 4096, 32, 8, 128);
  attention("decode attn 128 seqs x 1k, H32/8 D128", 128, 1, 1024, 32, 8, 128);
  attention("decode attn 1 seq x 32k, H32/8 D128", 1, 1, 32768, 32, 8, 128);
  attention("decode attn 8 seqs x 16k, H32/8 D128", 8, 1, 16384, 32, 8, 128);
  attention("decode attn 32 seqs x 4k, H16/16 D64", 32, 1, 4096, 16, 16, 64);
}

// The decode steps of serving the Qwen3-0.6B shape to 256 clients (1024-token prompts): H16/8, D128.
TEST_F(KernelBench, B_DecodeAttentionServing) {
  attention("decode attn 256 seqs x 1k, H16/8 D128", 256, 1, 1088, 16, 8, 128);
  attention("decode attn 64 seqs x 1k, H16/8 D128", 64, 1, 1088, 16, 8, 128);
}

// The same shapes over FP8 caches (--kv-cache-dtype fp8: half the bytes; the mma.sync kernels widen each
// landed tile to f16), then prefill rows over them (the mma.sync 64-row shape), each beside its BF16 twin.
TEST_F(KernelBench, B_DecodeAttentionFp8) {
  for (bool fp8 : {false, true}) {
    const std::string tag = fp8 ? " fp8" : " bf16";
    attention("decode attn 256 seqs x 1k, H16/8 D128" + tag, 256, 1, 1088, 16, 8, 128, 0, -1, fp8);
    attention("decode attn 256 seqs x 1k, H32/8 D128" + tag, 256, 1, 1088, 32, 8, 128, 0, -1, fp8);
    attention("decode attn 32 seqs x 4k, H32/8 D128" + tag, 32, 1, 4096, 32, 8, 128, 0, -1, fp8);
    attention("decode attn 1 seq x 32k, H32/8 D128" + tag, 1, 1, 32768, 32, 8, 128, 0, -1, fp8);
    attention("decode attn 1 seq x 1k, H16/8 D128" + tag, 1, 1, 1024, 16, 8, 128, 0, -1, fp8);
    attention("decode attn 32 seqs x 4k, H16/16 D64" + tag, 32, 1, 4096, 16, 16, 64, 0, -1, fp8);
    attention("prefill attn 1 x 8k causal, H32/8 D128" + tag, 1, 8192, 8192, 32, 8, 128, 0, -1, fp8);
    attention("prefill attn 8 x 1k causal, H16/8 D128" + tag, 8, 1024, 1024, 16, 8, 128, 0, -1, fp8);
  }
}

// Head dims the tensor-core kernels do not take: the CUDA-core flash-decoding kernel
// (attention_decode_wide.cu). Qwen3.5-9B / Qwen3-Next shapes (D256, GQA 16/4, 16/2) and MLA (D192, no GQA).
TEST_F(KernelBench, B_DecodeAttentionWide) {
  attention("decode attn 1 seq x 1k, H16/4 D256", 1, 1, 1024, 16, 4, 256);
  attention("decode attn 1 seq x 1k, H16/2 D256", 1, 1, 1024, 16, 2, 256);
  attention("decode attn 1 seq x 4k, H16/4 D256", 1, 1, 4096, 16, 4, 256);
  attention("decode attn 1 seq x 32k, H16/4 D256", 1, 1, 32768, 16, 4, 256);
  attention("decode attn 8 seqs x 4k, H16/4 D256", 8, 1, 4096, 16, 4, 256);
  attention("decode attn 32 seqs x 4k, H16/4 D256", 32, 1, 4096, 16, 4, 256);
  attention("decode attn 1 seq x 1k, H16/16 D192", 1, 1, 1024, 16, 16, 192);
  attention("decode attn 32 seqs x 4k, H16/16 D192", 32, 1, 4096, 16, 16, 192);
  attention("chunk attn 512 rows on 4k ctx, H16/4 D256 wide", 1, 512, 4096, 16, 4, 256);
}

TEST_F(KernelBench, C_PrefillAttention) {
  // Through the backend (the default: the wgmma kernel on sm_90a), then the mma.sync shapes directly.
  attention("prefill attn 1 x 8k causal, H32/8 D128", 1, 8192, 8192, 32, 8, 128);
  attention("prefill attn 1 x 8k causal, mma.sync 64-row", 1, 8192, 8192, 32, 8, 128, 1, 0);
  attention("prefill attn 1 x 8k causal, mma.sync 128-row", 1, 8192, 8192, 32, 8, 128, 2, 0);
  attention("prefill attn 1 x 8k causal, H32/8 D64 mma.sync", 1, 8192, 8192, 32, 8, 64, 2, 0);
  attention("prefill attn 4 x 2k causal, H32/8 D128 mma.sync", 4, 2048, 2048, 32, 8, 128, 2, 0);
  attention("chunk attn 512 rows on 8k ctx, mma.sync", 1, 512, 8192, 32, 8, 128, 2, 0);
  // The wgmma prefill kernel on the same shapes, launched directly: the warp-specialised one
  // (attention_wgmma_ws.cuh; VIREO_ATTN_WS_BN / VIREO_ATTN_WS_FLAGS pick its variant) or, with
  // VIREO_ATTN_WS=0, attention_wgmma.cuh's. Compare variants in one device call, one process each.
  attention("prefill attn 1 x 8k causal, H32/8 D128 wgmma", 1, 8192, 8192, 32, 8, 128, 0, 1);
  attention("prefill attn 1 x 8k causal, H32/8 D64 wgmma", 1, 8192, 8192, 32, 8, 64, 0, 1);
  attention("prefill attn 4 x 2k causal, H32/8 D128 wgmma", 4, 2048, 2048, 32, 8, 128, 0, 1);
  attention("chunk attn 512 rows on 8k ctx, wgmma", 1, 512, 8192, 32, 8, 128, 0, 1);
}

// Short prompts as a serving step carries them (1k tokens), through the backend: the prefill kernel alone,
// then beside 240 decode rows over FP8 caches (the steady state of 256 clients at 1024 / 128 with an
// 8k-token step). VIREO_ATTN_WS_BN / VIREO_ATTN_WS_FLAGS / VIREO_ATTN_OVERLAP: one variant a process.
TEST_F(KernelBench, C_PrefillAttentionShort) {
  attention("prefill attn 8 x 1k causal, H32/8 D128", 8, 1024, 1024, 32, 8, 128);
  attention("prefill attn 2 x 1k causal, H32/8 D128", 2, 1024, 1024, 32, 8, 128);
  std::vector<std::pair<int, int>> mixed, decode_only;
  for (int i = 0; i < 240; ++i) mixed.push_back({1, 1024 + (i * 37) % 128});
  decode_only = mixed;
  for (int i = 0; i < 7; ++i) mixed.push_back({1024, 1024});
  attention_mixed("fp8 cache: 240 decode rows (1k-1.15k ctx)", decode_only, 32, 8, 128, true);
  attention_mixed("fp8 cache: 7 x 1k prompts", std::vector<std::pair<int, int>>(7, {1024, 1024}), 32, 8, 128, true);
  attention_mixed("fp8 cache: 240 decode rows + 7 x 1k prompts", mixed, 32, 8, 128, true);
  // A serving step at a 2,048-token budget: ~228 decode rows beside ~1,800 prompt tokens.
  std::vector<std::pair<int, int>> serving(decode_only.begin(), decode_only.begin() + 228);
  serving.push_back({1024, 1024});
  serving.push_back({796, 796});
  attention_mixed("fp8 cache: 228 decode rows", std::vector<std::pair<int, int>>(decode_only.begin(),
                                                                                 decode_only.begin() + 228),
                  32, 8, 128, true);
  attention_mixed("fp8 cache: 1k + 796 prompts", {{1024, 1024}, {796, 796}}, 32, 8, 128, true);
  attention_mixed("fp8 cache: 228 decode rows + 1k + 796 prompts", serving, 32, 8, 128, true);
  // The same step over a BF16 cache (split as the FP8 one; VIREO_ATTN_OVERLAP_BF16=0: in turn).
  attention_mixed("bf16 cache: 228 decode rows", std::vector<std::pair<int, int>>(serving.begin(), serving.end() - 2),
                  32, 8, 128, false);
  attention_mixed("bf16 cache: 228 decode rows + 1k + 796 prompts", serving, 32, 8, 128, false);
}

TEST_F(KernelBench, D_Gemm) {
  struct Shape {
    const char* name;
    int64_t n, k, m;
  };
  for (const Shape& sh : std::vector<Shape>{{"qkv 4096->6144", 1, 4096, 6144},
                                            {"o_proj 4096->4096", 1, 4096, 4096},
                                            {"gate_up 4096->24576", 1, 4096, 24576},
                                            {"down 12288->4096", 1, 12288, 4096},
                                            {"qkv 4096->6144", 16384, 4096, 6144},
                                            {"o_proj 4096->4096", 16384, 4096, 4096},
                                            {"gate_up 4096->24576", 16384, 4096, 24576},
                                            {"down 12288->4096", 16384, 12288, 4096}}) {
    // Several weight copies so N=1 GEMMs stream from HBM, not from the 50 MB L2.
    const int copies = sh.n == 1 ? 4 : 1;
    std::vector<Tensor> ws;
    for (int i = 0; i < copies; ++i) ws.push_back(rand_t({sh.m, sh.k}, -0.02f, 0.02f));
    Tensor x = rand_t({sh.n, sh.k}), o = rand_t({sh.n, sh.m});
    const double us = time_us([&](int i) { be_->linear({x, ws[i % copies], Tensor(), o}); }, sh.n == 1 ? 15 : 5, sh.n == 1 ? 20 : 3);
    const std::string name = std::string("linear N=") + std::to_string(sh.n) + " " + sh.name;
    if (sh.n == 1) {
      report_bw(name, us, 2.0 * sh.m * sh.k + 2.0 * (sh.k + sh.m));
      cuda::CublasLtGemm lib(size_t{32} << 20, /*use_gemv=*/false);  // the library alone, for comparison
      const double lus = time_us([&](int i) { lib.run({x, ws[i % copies], Tensor(), o}, stream_); }, 15, 20);
      report_bw(name + " (cuBLASLt)", lus, 2.0 * sh.m * sh.k + 2.0 * (sh.k + sh.m));
    } else
      report_flops(name, us, 2.0 * sh.n * sh.m * sh.k);
  }
}

TEST_F(KernelBench, E_Elementwise) {
  const int64_t n = 16384, c = 4096, inter = 12288;
  Tensor x = rand_t({n, c}), r = rand_t({n, c}), w = rand_t({c}, 0.5f, 1.5f), o = rand_t({n, c});
  double us = time_us([&](int) { be_->rms_norm({x, w, o, Tensor(), 1e-6f}); });
  report_bw("rms_norm 16384x4096", us, 2.0 * n * c * 2);
  us = time_us([&](int) { be_->rms_norm({x, w, o, r, 1e-6f}); });
  report_bw("add+rms_norm 16384x4096 (residual)", us, 4.0 * n * c * 2);
  Tensor gu = rand_t({n, 2 * inter}), a = rand_t({n, inter});
  us = time_us([&](int) { be_->silu_and_mul({gu, a}); });
  report_bw("silu_and_mul 16384x12288", us, 3.0 * n * inter * 2);
  us = time_us([&](int) { be_->add({x, r, o}); });
  report_bw("add 16384x4096", us, 3.0 * n * c * 2);
  // qkv_prepare, Qwen3-8B: per-head q/k norm + NeoX rope + cache write.
  const int t = 16384, h = 32, hk = 8, d = 128;
  QkvPrepareParams q;
  q.qkv = rand_t({t, (h + 2 * hk) * d});
  std::vector<int> pos(t), slots(t);
  for (int i = 0; i < t; ++i) pos[i] = i, slots[i] = i;
  q.positions = ints(pos);
  q.slot_mapping = ints(slots);
  q.rope_cos_sin = rand_t({t, d}, -1, 1, DType::kF32);
  q.rotary_dim = d;
  q.qk_norm = QkNorm::kPerHeadBeforeRope;
  q.q_norm = rand_t({d});
  q.k_norm = rand_t({d});
  q.q_out = rand_t({t, h, d});
  q.k_cache = rand_t({t / 16, 16, hk, d});
  q.v_cache = rand_t({t / 16, 16, hk, d});
  q.num_heads = h;
  q.num_kv_heads = hk;
  q.head_dim = d;
  us = time_us([&](int) { be_->qkv_prepare(q); });
  report_bw("qkv_prepare 16384 tok H32/8 D128", us, 2.0 * t * (h + 2 * hk) * d * 2 + 4.0 * t * d);
}

// Decode GEMVs (N = 1) in their fused forms, 100 back-to-back launches captured in one CUDA graph
// (host launch latency excluded), with and without PDL. Weight copies rotate so that >= 256 MB are
// streamed per pass (the L2 holds ~50 MB); the plain form beside each fused one.
TEST_F(KernelBench, F_FusedGemvInGraph) {
  enum Form { kPlain, kNorm, kResidual, kSiluResidual };
  struct Shape {
    const char* name;
    int64_t m, k;
    Form form;
  };
  const char* form_names[] = {"plain", "norm", "+residual", "silu,+residual"};
  constexpr int kLaunches = 100;
  for (const Shape& sh : std::vector<Shape>{{"8B qkv", 6144, 4096, kNorm},
                                            {"8B o_proj", 4096, 4096, kResidual},
                                            {"8B gate_up", 24576, 4096, kNorm},
                                            {"8B down", 4096, 12288, kSiluResidual},
                                            {"0.6B qkv", 4096, 1024, kNorm},
                                            {"0.6B o_proj", 1024, 2048, kResidual},
                                            {"0.6B gate_up", 6144, 1024, kNorm},
                                            {"0.6B down", 1024, 3072, kSiluResidual},
                                            {"0.6B lm_head", 151936, 1024, kNorm}}) {
    const int64_t wbytes = sh.m * sh.k * 2;
    const int copies = static_cast<int>(std::clamp<int64_t>(((int64_t{256} << 20) + wbytes - 1) / wbytes, 1, kLaunches));
    std::vector<Tensor> ws{rand_t({sh.m, sh.k}, -0.02f, 0.02f)};
    for (int i = 1; i < copies; ++i) {
      ws.push_back(be_->alloc({sh.m, sh.k}, DType::kBF16));
      owned_.push_back(ws.back());
      cudaMemcpyAsync(ws.back().data, ws[0].data, wbytes, cudaMemcpyDeviceToDevice, stream_);
    }
    Tensor x = rand_t({1, 2 * sh.k}), g = rand_t({sh.k}, 0.5f, 1.5f), out = rand_t({1, sh.m}, -0.1f, 0.1f);
    for (Form form : {kPlain, sh.form})
      for (bool pdl : {false, true}) {
        cuda::set_pdl_enabled(pdl);
        auto params = [&](int i) {
          LinearParams p{x.view({1, form == kSiluResidual ? 2 * sh.k : sh.k}), ws[i % copies], Tensor(), out};
          if (form == kNorm) p.input_norm = g;
          if (form == kSiluResidual) p.silu_mul_input = true;
          if (form == kResidual || form == kSiluResidual) p.residual = out;  // in place, as the model does
          return p;
        };
        be_->linear(params(0));  // warm-up (kernel attributes) before the capture
        be_->begin_capture();
        for (int i = 0; i < kLaunches; ++i) be_->linear(params(i));
        const int graph = be_->end_capture();
        const double us = time_us([&](int) { be_->replay_graph(graph); }, 10, 1) / kLaunches;
        be_->destroy_graph(graph);
        const double bytes = double(wbytes) + 2.0 * (form == kSiluResidual ? 2 * sh.k : sh.k) + 2.0 * sh.m * 2;
        report_bw(std::string("graph N=1 ") + sh.name + " " + std::to_string(sh.m) + "x" + std::to_string(sh.k) + " " +
                      form_names[form] + (pdl ? " PDL" : ""),
                  us, bytes);
      }
  }
  cuda::set_pdl_enabled(true);
}

// Batch-1 decode of one layer's attention path, as the decode graphs run it: qkv_prepare (per-head norm,
// NeoX RoPE, K/V written at the last position) + paged_attention planned from the graph hint
// (max_seq_len 8192, max_query_len 1), 28 layers (distinct caches, rotated so >= 256 MB are touched per
// pass when the context allows) captured in one CUDA graph with PDL. Per layer: each op alone, then both.
TEST_F(KernelBench, G_DecodeBatchOneLayerInGraph) {
  struct Shape {
    const char* name;
    int h, hkv;
  };
  constexpr int kLayers = 28, d = 128, bs = 16;
  for (const Shape& sh : std::vector<Shape>{{"0.6B H16/8", 16, 8}, {"8B H32/8", 32, 8}})
    for (int ctx : {1024, 4096, 32768}) {
      const int nb = (ctx + bs - 1) / bs;
      const int64_t kv_bytes = int64_t{2} * nb * bs * sh.hkv * d * 2;
      const int copies = static_cast<int>(std::clamp<int64_t>(((int64_t{256} << 20) + kv_bytes - 1) / kv_bytes, 1, kLayers));
      std::vector<int> table(nb);
      for (int i = 0; i < nb; ++i) table[i] = i;
      std::shuffle(table.begin(), table.end(), std::mt19937(11));
      Tensor qkv = rand_t({1, (sh.h + 2 * sh.hkv) * d}), q = rand_t({1, sh.h, d}), out = rand_t({1, sh.h, d});
      Tensor cs = rand_t({ctx + 1, d}, -1, 1, DType::kF32), qn = rand_t({d}, 0.5f, 1.5f), kn = rand_t({d}, 0.5f, 1.5f);
      Tensor pos = ints({ctx - 1}), slot = ints({table[(ctx - 1) / bs] * bs + (ctx - 1) % bs});
      Tensor qs = ints({0, 1}), lens = ints({ctx}), tab = ints(table);
      std::vector<Tensor> kc, vc;
      for (int i = 0; i < copies; ++i) {
        kc.push_back(rand_t({nb, bs, sh.hkv, d}));
        vc.push_back(rand_t({nb, bs, sh.hkv, d}));
      }
      auto prep_params = [&](int layer) {
        QkvPrepareParams p;
        p.qkv = qkv;
        p.positions = pos;
        p.slot_mapping = slot;
        p.rope_cos_sin = cs;
        p.rotary_dim = d;
        p.qk_norm = QkNorm::kPerHeadBeforeRope;
        p.q_norm = qn;
        p.k_norm = kn;
        p.q_out = q;
        p.k_cache = kc[layer % copies];
        p.v_cache = vc[layer % copies];
        p.num_heads = sh.h;
        p.num_kv_heads = sh.hkv;
        p.head_dim = d;
        p.block_size = bs;
        return p;
      };
      auto prep = [&](int layer) { be_->qkv_prepare(prep_params(layer)); };
      auto attn_params = [&](int layer) {
        AttentionParams p;
        p.q = q;
        p.k_cache = kc[layer % copies];
        p.v_cache = vc[layer % copies];
        p.out = out;
        p.query_start = qs;
        p.seq_lens = lens;
        p.block_tables = tab;
        p.num_seqs = 1;
        p.max_blocks_per_seq = nb;
        p.block_size = bs;
        p.num_heads = sh.h;
        p.num_kv_heads = sh.hkv;
        p.head_dim = d;
        p.scale = 1.f / std::sqrt(float(d));
        p.max_query_len = 1;
        p.max_seq_len = 8192;  // the decode graphs' hint: min(max_model_len, 8192)
        return p;
      };
      auto attn = [&](int layer) { be_->paged_attention(attn_params(layer)); };
      auto prep_attn = [&](int layer) { be_->prepare_attention(prep_params(layer), attn_params(layer)); };
      // Form 3: the backend's prepare_attention (the model's call: fused into the cluster decode kernel
      // unless VIREO_DECODE_CLUSTER=0).
      const char* what[] = {"qkv_prepare", "attention", "qkv_prepare+attention", "prepare_attention"};
      for (int form = 0; form < 4; ++form) {
        auto layer = [&](int i) {
          if (form == 3) {
            prep_attn(i);
            return;
          }
          if (form != 1) prep(i);
          if (form != 0) attn(i);
        };
        layer(0);  // warm-up: kernel attributes, attention workspace, split counters
        be_->synchronize();
        be_->begin_capture();
        for (int i = 0; i < kLayers; ++i) layer(i);
        const int graph = be_->end_capture();
        const double us = time_us([&](int) { be_->replay_graph(graph); }, 10, 2) / kLayers;
        be_->destroy_graph(graph);
        const double bytes = (form != 1 ? 2.0 * (sh.h + 2 * sh.hkv) * d * 2 : 0.0) +
                             (form != 0 ? 2.0 * ctx * sh.hkv * d * 2 + 2.0 * sh.h * d * 2 : 0.0);  // form 3: both
        report_bw(std::string("graph b1 ") + sh.name + " ctx " + std::to_string(ctx) + " " + what[form], us, bytes);
      }
    }
}

// The sample op over V = 151936 bf16 logits (Qwen3), M rows, 50 back-to-back calls captured in one
// CUDA graph (host launch latency excluded), the host copy of the rows given (as the engine does).
// GB/s: the M x V logits read once per call. Threshold/penalty rows take the mid path
// (sampling_mid.cuh); VIREO_SAMPLE_MID=0 in the environment gives the old single-block slow path.
// Penalty rows carry 2000 (id, count) entries and 2 mask ids each.
// A whole decoder layer at batch 1 as the decode graph runs it (pre-norm, fused linear forms, PDL):
// qkv GEMV (+input norm) -> q/k norm, RoPE, cache write, attention over ctx 1024 -> o_proj (+residual)
// -> gate_up (+post-attention norm) -> down (SiLU-mul, +residual); the model's layer count with distinct
// weights and caches per layer (8B: 6 weight copies rotated, 2.6 GB, far past the 50 MB L2), in one
// graph. Forms: SiLU-mul in gate_up's epilogue (the model's form) vs in down's prologue. Per layer us and
// the layer's bytes (weights + KV) over it. VIREO_GEMV_RESIDENT=0 / VIREO_GEMV_STREAM=0 /
// VIREO_FUSED_ATTENTION=1 (read once per process) select other kernels for a same-call comparison.
TEST_F(KernelBench, H_DecodeLayerChainInGraph) {
  struct Shape {
    const char* name;
    int layers, copies, hidden, h, hkv, inter;
  };
  constexpr int d = 128, bs = 16, ctx = 1024, nb = ctx / bs;
  for (const Shape& sh : std::vector<Shape>{{"0.6B", 28, 28, 1024, 16, 8, 3072}, {"8B", 36, 6, 4096, 32, 8, 12288}}) {
    const int64_t qkv_n = int64_t{sh.h + 2 * sh.hkv} * d;
    struct W {
      Tensor qkv, o, gu, down, n1, n2, kc, vc;
    };
    std::vector<W> ws;
    for (int i = 0; i < sh.copies; ++i)
      ws.push_back({rand_t({qkv_n, sh.hidden}, -0.02f, 0.02f), rand_t({sh.hidden, int64_t{sh.h} * d}, -0.02f, 0.02f),
                    rand_t({2 * int64_t{sh.inter}, sh.hidden}, -0.02f, 0.02f),
                    rand_t({sh.hidden, sh.inter}, -0.02f, 0.02f), rand_t({sh.hidden}, 0.5f, 1.5f),
                    rand_t({sh.hidden}, 0.5f, 1.5f), rand_t({nb, bs, sh.hkv, d}), rand_t({nb, bs, sh.hkv, d})});
    std::vector<int> table(nb);
    for (int i = 0; i < nb; ++i) table[i] = i;
    std::shuffle(table.begin(), table.end(), std::mt19937(5));
    Tensor res = rand_t({1, sh.hidden}), qkv = rand_t({1, qkv_n}), q = rand_t({1, sh.h, d}), att = rand_t({1, sh.h, d});
    Tensor gu = rand_t({1, 2 * int64_t{sh.inter}});
    Tensor cs = rand_t({ctx + 1, d}, -1, 1, DType::kF32), qn = rand_t({d}, 0.5f, 1.5f), kn = rand_t({d}, 0.5f, 1.5f);
    Tensor pos = ints({ctx - 1}), slot = ints({table[(ctx - 1) / bs] * bs + (ctx - 1) % bs});
    Tensor qs = ints({0, 1}), lens = ints({ctx}), tab = ints(table);
    // VIREO_LAYER_ANATOMY=1: also time the chain with one stage run twice (the second time on the next
    // layer's weights, so not from L2): the difference is that stage's cost inside the chain.
    // Stages: 0 qkv GEMV, 1 prepare + attention, 2 o_proj, 3 gate_up, 4 down.
    int reps[5] = {1, 1, 1, 1, 1};
    for (bool silu_epilogue : {true, false}) {
      auto layer = [&](int i) {
        const W& w = ws[i % sh.copies];
        const W& w2 = ws[(i + 1) % sh.copies];
        for (int r = 0; r < reps[0]; ++r) {
          LinearParams a{res, r ? w2.qkv : w.qkv, Tensor(), qkv};
          a.input_norm = w.n1;
          be_->linear(a);
        }
        QkvPrepareParams p;
        p.qkv = qkv;
        p.positions = pos;
        p.slot_mapping = slot;
        p.rope_cos_sin = cs;
        p.rotary_dim = d;
        p.qk_norm = QkNorm::kPerHeadBeforeRope;
        p.q_norm = qn;
        p.k_norm = kn;
        p.q_out = q;
        p.k_cache = w.kc;
        p.v_cache = w.vc;
        p.num_heads = sh.h;
        p.num_kv_heads = sh.hkv;
        p.head_dim = d;
        p.block_size = bs;
        AttentionParams ap;
        ap.q = q;
        ap.k_cache = w.kc;
        ap.v_cache = w.vc;
        ap.out = att;
        ap.query_start = qs;
        ap.seq_lens = lens;
        ap.block_tables = tab;
        ap.num_seqs = 1;
        ap.max_blocks_per_seq = nb;
        ap.block_size = bs;
        ap.num_heads = sh.h;
        ap.num_kv_heads = sh.hkv;
        ap.head_dim = d;
        ap.scale = 1.f / std::sqrt(float(d));
        ap.max_query_len = 1;
        // The planning hint of the model's short-context decode graphs (kGraphShortContext): the cluster
        // kernel's range. VIREO_BENCH_PLAN_KEYS=8192: the split kernel's (longer contexts).
        ap.max_seq_len = std::getenv("VIREO_BENCH_PLAN_KEYS") ? std::atoi(std::getenv("VIREO_BENCH_PLAN_KEYS")) : 4096;
        for (int r = 0; r < reps[1]; ++r) {
          p.k_cache = ap.k_cache = r ? w2.kc : w.kc;
          p.v_cache = ap.v_cache = r ? w2.vc : w.vc;
          be_->prepare_attention(p, ap);
        }
        for (int r = 0; r < reps[2]; ++r) {
          LinearParams o{att.view({1, int64_t{sh.h} * d}), r ? w2.o : w.o, Tensor(), res};
          o.residual = res;
          be_->linear(o);
        }
        const Tensor act = gu.view({1, 2 * int64_t{sh.inter}});
        for (int r = 0; r < reps[3]; ++r) {
          LinearParams up{res, r ? w2.gu : w.gu, Tensor(), silu_epilogue ? Tensor(gu.data, gu.dtype, {1, sh.inter}, gu.device) : act};
          up.input_norm = w.n2;
          up.silu_mul_output = silu_epilogue;  // the model's form: down then reads silu(gate) * up
          be_->linear(up);
        }
        for (int r = 0; r < reps[4]; ++r) {
          LinearParams dn{silu_epilogue ? Tensor(gu.data, gu.dtype, {1, sh.inter}, gu.device) : act, r ? w2.down : w.down,
                          Tensor(), res};
          dn.silu_mul_input = !silu_epilogue;
          dn.residual = res;
          be_->linear(dn);
        }
      };
      layer(0);  // warm-up: attributes, workspace, split counters
      be_->synchronize();
      auto chain_us = [&] {
        be_->begin_capture();
        for (int i = 0; i < sh.layers; ++i) layer(i);
        const int graph = be_->end_capture();
        const double us = time_us([&](int) { be_->replay_graph(graph); }, 10, 2) / sh.layers;
        be_->destroy_graph(graph);
        return us;
      };
      const double us = chain_us();
      const double bytes = 2.0 * sh.hidden * (qkv_n + int64_t{sh.h} * d + 3.0 * sh.inter) + 2.0 * ctx * sh.hkv * d * 2;
      report_bw(std::string("graph b1 layer ") + sh.name + " ctx 1024 " + (silu_epilogue ? "silu in gate_up epilogue" : "silu in down prologue") +
                    (std::getenv("VIREO_FUSED_ATTENTION") ? " fused attention" : "") +
                    (std::getenv("VIREO_GEMV_RESIDENT") ? " gemv-grid" : "") +
                    (std::getenv("VIREO_GEMV_COMPACT") ? std::string(" compact=") + std::getenv("VIREO_GEMV_COMPACT") : ""),
                us, bytes);
      if (silu_epilogue && std::getenv("VIREO_LAYER_ANATOMY")) {
        const char* stage[5] = {"qkv+norm", "prepare+attention", "o_proj+residual", "gate_up+norm+silu", "down+residual"};
        for (int st = 0; st < 5; ++st) {
          reps[st] = 2;
          const double twice = chain_us();
          reps[st] = 0;
          const double none = chain_us();
          reps[st] = 1;
          std::printf("anatomy %s layer: %-20s %6.2f us run twice, %6.2f us left out (layer %.2f -> %.2f / %.2f)\n",
                      sh.name, stage[st], twice - us, us - none, us, twice, none);
        }
      }
    }
  }
}

TEST_F(KernelBench, G_Sampling) {
  struct Mode {
    const char* name;
    float temperature, top_p;
    int top_k, n;
    float min_p = 0.0f;
    bool penalties = false;
  };
  const Mode modes[] = {{"greedy", 0.0f, 1.0f, 0, 0},
                        {"temperature", 1.0f, 1.0f, 0, 0},
                        {"temperature N=5", 1.0f, 1.0f, 0, 5},
                        {"top_p 0.9 top_k 50", 1.0f, 0.9f, 50, 0},
                        {"Qwen3 defaults T 0.6 top_k 20 top_p 0.95", 0.6f, 0.95f, 20, 0},
                        {"Llama-3 defaults T 0.6 top_p 0.9", 0.6f, 0.9f, 0, 0},
                        {"top_k 1024 top_p 0.9", 1.0f, 0.9f, 1024, 0},
                        {"min_p 0.05", 1.0f, 1.0f, 0, 0, 0.05f},
                        {"penalties + top_p 0.9", 0.6f, 0.9f, 0, 0, 0.0f, true},
                        {"penalties greedy", 0.0f, 1.0f, 0, 0, 0.0f, true},
                        {"penalties + temperature", 1.0f, 1.0f, 0, 0, 0.0f, true}};
  constexpr int kLaunches = 50;
  const int vocab = 151936;
  for (int m : {1, 8, 64, 256}) {
    Tensor logits = rand_t({m, vocab}, -6.0f, 6.0f);
    for (const Mode& md : modes) {
      std::vector<SamplingRow> rs(m);
      std::vector<int> pairs, masks;
      for (int r = 0; r < m; ++r) {
        rs[r].temperature = md.temperature;
        rs[r].top_p = md.top_p;
        rs[r].top_k = md.top_k;
        rs[r].min_p = md.min_p;
        rs[r].uniform = std::fmod(0.1f + 0.37f * r, 1.0f);
        if (md.penalties) {
          rs[r].repetition_penalty = 1.1f;
          rs[r].presence_penalty = 0.5f;
          rs[r].frequency_penalty = 0.2f;
          rs[r].penalty_begin = static_cast<int>(pairs.size() / 2);
          for (int e = 0; e < 2000; ++e) pairs.push_back((e * 75 + r) % vocab), pairs.push_back(e % 3);
          rs[r].penalty_end = static_cast<int>(pairs.size() / 2);
          rs[r].mask_begin = static_cast<int>(masks.size());
          masks.push_back(151643), masks.push_back(151645);
          rs[r].mask_end = static_cast<int>(masks.size());
        }
      }
      std::vector<int> words(size_t(m) * 14);
      std::memcpy(words.data(), rs.data(), rs.size() * sizeof(SamplingRow));
      Tensor tokens = be_->alloc({m}, DType::kI32), lps = be_->alloc({m, 1 + md.n}, DType::kF32);
      owned_.push_back(tokens);
      owned_.push_back(lps);
      Tensor ids;
      if (md.n) {
        ids = be_->alloc({m, md.n}, DType::kI32);
        owned_.push_back(ids);
      }
      Tensor pt, mt;
      if (!pairs.empty()) {
        pt = ints(pairs).view({int64_t(pairs.size() / 2), 2});
        mt = ints(masks);
      }
      SampleParams p{logits, ints(words), pt, mt, md.n, tokens, lps, ids};
      p.host_rows = rs.data();
      be_->sample(p);  // warm-up (kernel attributes) before the capture
      be_->begin_capture();
      for (int i = 0; i < kLaunches; ++i) be_->sample(p);
      const int graph = be_->end_capture();
      const double us = time_us([&](int) { be_->replay_graph(graph); }, 10, 1) / kLaunches;
      be_->destroy_graph(graph);
      report_bw(std::string("sample V=151936 bf16 M=") + std::to_string(m) + " " + md.name, us, 2.0 * m * vocab);
    }
  }
}

TEST_F(KernelBench, Z_Table) {
  std::printf("\n%-48s %10s %10s %8s\n", "kernel", "us", "rate", "%roof");
  for (auto& r : rows())
    std::printf("%-48s %10.1f %10.1f %7.1f%% %s\n", r.name.c_str(), r.us, r.rate, 100 * r.rate / r.ceiling, r.unit);
}

}  // namespace
}  // namespace vireo
