// MoE with MXFP4 experts kept packed (MoeParams gate_up_scales / down_scales; moe_decode_mxfp4.cu and
// the grouped kernels' MXFP4 B tiles) vs the CPU backend on the same experts dequantized here (an
// independent E2M1 table, not src/model/mxfp4.cc), in F32. Random packed bytes (every nibble, -0
// included) and scales around the weights' size, a few blocks with scales past 2^1 (the kernels' second
// multiply) and near 2^-127 (subnormal products). Both expert paths, the per-slot kernels' one- and
// two-n-tile forms (T <= 8, T > 8), hidden / inter with partial chunks (hidden / 32 not a multiple of 4),
// the GPT-OSS extras, gpt-oss-20b's real widths; bitwise run to run and from a CUDA graph.
#include <cmath>

#include "backend/cuda/moe.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

using cuda::MoePath;

struct Mx {
  int T, hidden, inter, E, k;
};

class MoeMxfp4Test : public CudaOpsTest {
 protected:
  void SetUp() override {
    CudaOpsTest::SetUp();
    if (IsSkipped()) return;  // no GPU
    saved_ = cuda::moe_path();
    use_dtype(DType::kBF16);
  }
  void TearDown() override {
    cuda::set_moe_path(saved_);
    CudaOpsTest::TearDown();
  }

  // Packed [rows, cols / 2] bytes and [rows, cols / 32] scales with values ~ +-amp.
  struct Packed {
    std::vector<uint8_t> q, s;
  };
  Packed make_packed(int64_t rows, int64_t cols, float amp) {
    Packed p{std::vector<uint8_t>(rows * cols / 2), std::vector<uint8_t>(rows * cols / 32)};
    for (auto& b : p.q) b = static_cast<uint8_t>(rand_int(0, 255));
    const int s0 = 127 + static_cast<int>(std::floor(std::log2(amp / 3.f)));  // E2M1 values average ~3
    for (auto& s : p.s) {
      const int r = rand_int(0, 199);
      s = static_cast<uint8_t>(r == 0 ? 129 + rand_int(0, 2) : r == 1 ? rand_int(0, 2) : s0 + rand_int(-1, 1));
    }
    return p;
  }
  // The reference dequantization: E2M1 nibble (low first) times 2^(s - 127).
  static std::vector<float> dequant(const Packed& p, int64_t rows, int64_t cols) {
    static const float kE2m1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
    std::vector<float> out(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t byte = p.q[(r * cols + c) / 2];
        const int n = c % 2 ? byte >> 4 : byte & 15;
        const float v = (n & 8 ? -1.f : 1.f) * kE2m1[n & 7];
        out[r * cols + c] = std::ldexp(v, int(p.s[r * (cols / 32) + c / 32]) - 127);
      }
    return out;
  }
  Tensor gpu_u8(const std::vector<uint8_t>& v, std::vector<int64_t> shape) {
    Tensor t = gpu_own(gpu_->alloc(std::move(shape), DType::kU8));
    gpu_->copy_from_host(v.data(), t);
    return t;
  }
  std::vector<uint8_t> raw(const Tensor& t) {
    std::vector<uint8_t> b(t.nbytes());
    gpu_->copy_to_host(t, b.data());
    return b;
  }

  struct Case {
    Mx m;
    std::vector<float> x, router, gu_b, down_b, router_b;
    Packed gu, down;
    float limit = 0.f;
  };
  Case make_case(const Mx& m, bool gpt_oss) {
    Case c{m};
    const float wx = 3.f / std::sqrt(float(m.hidden)), wi = 3.f / std::sqrt(float(m.inter));
    c.x = rand_vec(size_t(m.T) * m.hidden, -1, 1, DType::kBF16);
    c.router = rand_vec(size_t(m.E) * m.hidden, -wx, wx, DType::kBF16);
    c.gu = make_packed(int64_t(m.E) * 2 * m.inter, m.hidden, wx);
    c.down = make_packed(int64_t(m.E) * m.hidden, m.inter, wi);
    if (gpt_oss) {
      c.router_b = rand_vec(m.E, -1, 1, DType::kBF16);
      c.gu_b = rand_vec(size_t(m.E) * 2 * m.inter, -1, 1, DType::kBF16);
      c.down_b = rand_vec(size_t(m.E) * m.hidden, -1, 1, DType::kBF16);
      c.limit = 7.f;
    }
    return c;
  }
  void add_extras(MoeParams& p, const Case& c, bool cpu) {
    if (c.router_b.empty()) return;
    auto put = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
      return cpu ? cpu_f32(v, std::move(shape)) : gpu_from(v, std::move(shape), DType::kBF16);
    };
    p.router_b = put(c.router_b, {c.m.E});
    p.gate_up_b = put(c.gu_b, {c.m.E, 2 * c.m.inter});
    p.down_b = put(c.down_b, {c.m.E, c.m.hidden});
    p.swiglu_limit = c.limit;
  }
  MoeParams gpu_params(const Case& c, Tensor out) {
    const Mx& m = c.m;
    MoeParams p{gpu_from(c.x, {m.T, m.hidden}, DType::kBF16), gpu_from(c.router, {m.E, m.hidden}, DType::kBF16),
                gpu_u8(c.gu.q, {m.E, 2 * m.inter, m.hidden / 2}), gpu_u8(c.down.q, {m.E, m.hidden, m.inter / 2}), out,
                m.k, true};
    p.gate_up_scales = gpu_u8(c.gu.s, {m.E, 2 * m.inter, m.hidden / 32});
    p.down_scales = gpu_u8(c.down.s, {m.E, m.hidden, m.inter / 32});
    add_extras(p, c, false);
    return p;
  }
  std::vector<float> cpu_ref(const Case& c) {
    const Mx& m = c.m;
    Tensor ref = cpu_poisoned({m.T, m.hidden});
    MoeParams p{cpu_f32(c.x, {m.T, m.hidden}), cpu_f32(c.router, {m.E, m.hidden}),
                cpu_f32(dequant(c.gu, int64_t(m.E) * 2 * m.inter, m.hidden), {m.E, 2 * m.inter, m.hidden}),
                cpu_f32(dequant(c.down, int64_t(m.E) * m.hidden, m.inter), {m.E, m.hidden, m.inter}), ref, m.k, true};
    add_extras(p, c, true);
    cpu_->moe(p);
    return to_host(ref);
  }
  // Tokens whose routing cannot flip on the GPU's bf16 rounding of the router logits (moe_test.cc).
  std::vector<bool> clear_tokens(const Case& c) {
    const Mx& m = c.m;
    std::vector<bool> keep(m.T);
    std::vector<float> l(m.E);
    for (int t = 0; t < m.T; ++t) {
      for (int e = 0; e < m.E; ++e) {
        double s = c.router_b.empty() ? 0.0 : c.router_b[e];
        for (int h = 0; h < m.hidden; ++h) s += double(c.x[size_t(t) * m.hidden + h]) * c.router[size_t(e) * m.hidden + h];
        l[e] = float(s);
      }
      std::sort(l.begin(), l.end(), std::greater<float>());
      const float eps = 1e-4f * (1.f + std::fabs(l[m.k - 1]));
      keep[t] = m.k == m.E || round_to(DType::kBF16, l[m.k - 1] - eps) > round_to(DType::kBF16, l[m.k] + eps);
    }
    return keep;
  }
  // Kept tokens within 3% of the output's max |value| (moe_test.cc's bf16 tolerance); every element written.
  // p: c's params on the GPU (gpu_params, or the dense form); its out is replaced by a poisoned one.
  void check(const Case& c, MoePath path, int& compared) { check(c, path, gpu_params(c, Tensor{}), compared); }
  void check(const Case& c, MoePath path, MoeParams p, int& compared) {
    const Mx& m = c.m;
    const std::vector<float> want = cpu_ref(c);
    const std::vector<bool> keep = clear_tokens(c);
    cuda::set_moe_path(path);
    p.out = gpu_poisoned({m.T, m.hidden}, DType::kBF16);
    gpu_->moe(p);
    const std::vector<float> got = to_host(p.out);
    for (float v : got) ASSERT_FALSE(std::isnan(v)) << "moe left an output element unwritten";
    float scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(v));
    std::vector<float> g, w;
    for (int t = 0; t < m.T; ++t)
      if (keep[t]) {
        ++compared;
        g.insert(g.end(), got.begin() + size_t(t) * m.hidden, got.begin() + size_t(t + 1) * m.hidden);
        w.insert(w.end(), want.begin() + size_t(t) * m.hidden, want.begin() + size_t(t + 1) * m.hidden);
      }
    expect_close(g, w, Tolerance{3e-2f * scale, 3e-2f}, "moe mxfp4");
  }

  MoePath saved_ = MoePath::kAuto;
};

std::string name(const Mx& m, MoePath path) {
  return "T " + std::to_string(m.T) + " hidden " + std::to_string(m.hidden) + " I " + std::to_string(m.inter) + " E " +
         std::to_string(m.E) + " k " + std::to_string(m.k) + (path == MoePath::kGrouped ? " grouped" : " per-slot");
}

// Small widths (hidden / 32 = 3, 5, 9: chunks a lane short), T across the per-slot kernels' forms and
// the grouped path's tiles (one to several a expert), plain and GPT-OSS forms.
TEST_F(MoeMxfp4Test, BothPathsMatchCpu) {
  const Mx shapes[] = {{1, 96, 160, 8, 2},  {3, 160, 96, 32, 4},   {8, 288, 64, 8, 2},  {9, 96, 288, 16, 4},
                       {16, 160, 160, 8, 8}, {17, 288, 96, 32, 4}, {40, 96, 64, 8, 2},  {300, 160, 96, 32, 4}};
  int compared = 0;
  for (const Mx& m : shapes)
    for (bool gpt_oss : {false, true}) {
      const Case c = make_case(m, gpt_oss);
      for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
        SCOPED_TRACE(name(m, path) + (gpt_oss ? " gpt-oss" : ""));
        check(c, path, compared);
      }
    }
  EXPECT_GT(compared, 400);
}

// gpt-oss-20b's widths (hidden = I = 2880: 90 blocks a row, 22.5 chunks), top-4 (of 8 experts, not
// 32: the CPU reference dominates the time), at decode batches and one prefill chunk.
TEST_F(MoeMxfp4Test, GptOss20bWidths) {
  int compared = 0;
  for (int T : {1, 12, 64}) {
    const Mx m{T, 2880, 2880, 8, 4};
    const Case c = make_case(m, true);
    for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
      SCOPED_TRACE(name(m, path));
      check(c, path, compared);
    }
  }
  EXPECT_GT(compared, 50);
}

// The same bits run to run, and from a CUDA graph replayed after x changed in place.
TEST_F(MoeMxfp4Test, DeterministicAndGraphCapturable) {
  for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
    const Mx m{12, 288, 160, 16, 4};
    SCOPED_TRACE(name(m, path));
    const Case c = make_case(m, true);
    cuda::set_moe_path(path);
    MoeParams p = gpu_params(c, gpu_poisoned({m.T, m.hidden}, DType::kBF16));
    gpu_->moe(p);
    const std::vector<uint8_t> first = raw(p.out);
    MoeParams q = p;
    q.out = gpu_poisoned({m.T, m.hidden}, DType::kBF16);
    gpu_->moe(q);
    ASSERT_TRUE(raw(q.out) == first) << "moe differs between runs";
    if (!gpu_->supports_graphs()) continue;
    MoeParams g = p;
    g.out = gpu_poisoned({m.T, m.hidden}, DType::kBF16);
    gpu_->begin_capture();
    try {
      gpu_->moe(g);
    } catch (...) {
      gpu_->abort_capture();
      throw;
    }
    const int graph = gpu_->end_capture();
    const std::vector<float> x2 = rand_vec(size_t(m.T) * m.hidden, -1, 1, DType::kBF16);
    gpu_->copy(gpu_from(x2, {m.T, m.hidden}, DType::kBF16), g.x);
    gpu_->replay_graph(graph);
    MoeParams e = g;
    e.out = gpu_poisoned({m.T, m.hidden}, DType::kBF16);
    gpu_->moe(e);
    EXPECT_TRUE(raw(g.out) == raw(e.out)) << "graph replay differs from the eager op";
    gpu_->destroy_graph(graph);
  }
}

// Dense and packed experts in one process, in both orders, on both paths: each kernel sets its own launch
// attributes (the grouped kernels' 110 KB dense / 86 KB packed shared memory). Session 31's binary
// prepared only whichever of a pair ran first, so the dense grouped MoE failed to launch after a packed
// one. The dense runs take the experts dequantized to bf16 (exact: E2M1 times a power of two).
TEST_F(MoeMxfp4Test, DenseAndPackedInOneProcess) {
  const Mx m{40, 96, 64, 8, 2};
  const Case c = make_case(m, true);
  MoeParams dense = gpu_params(c, Tensor{});
  dense.gate_up_w = gpu_from(dequant(c.gu, int64_t(m.E) * 2 * m.inter, m.hidden), {m.E, 2 * m.inter, m.hidden},
                             DType::kBF16);
  dense.down_w = gpu_from(dequant(c.down, int64_t(m.E) * m.hidden, m.inter), {m.E, m.hidden, m.inter}, DType::kBF16);
  dense.gate_up_scales = dense.down_scales = Tensor{};
  int compared = 0;
  for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped})
    for (bool packed_first : {true, false})
      for (int run = 0; run < 2; ++run) {
        const bool packed = (run == 0) == packed_first;
        SCOPED_TRACE(name(m, path) + (packed ? " packed" : " dense"));
        check(c, path, packed ? gpu_params(c, Tensor{}) : dense, compared);
      }
  EXPECT_GT(compared, 40);
}

// Refused: misshapen scales, packed weights not U8.
TEST_F(MoeMxfp4Test, RejectsBadShapes) {
  const Mx m{4, 96, 64, 8, 2};
  const Case c = make_case(m, false);
  const MoeParams good = gpu_params(c, gpu_poisoned({m.T, m.hidden}, DType::kBF16));
  for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
    cuda::set_moe_path(path);
    EXPECT_NO_THROW(gpu_->moe(good));
    MoeParams p = good;
    p.down_scales = gpu_u8(c.down.s, {m.E, m.hidden, m.inter / 32 - 1});  // wrong size
    EXPECT_THROW(gpu_->moe(p), Error);
    p = good;
    p.gate_up_w = gpu_from(std::vector<float>(c.gu.q.size(), 0.f), {m.E, 2 * m.inter, m.hidden / 2}, DType::kBF16);
    EXPECT_THROW(gpu_->moe(p), Error);  // packed weights must be U8
  }
}

}  // namespace
}  // namespace vireo::testing
