// The CPU linear with GGUF block-quantized weights (cpu_linear_blocks*.cc) against a double-precision dot of
// the weights gguf/gguf_dequant.cc gives (what a GGUF load dequantizes to), for every block type, decode
// row counts (AVX2 and portable kernels) and larger ones (dequantized bands through SGEMM), row lengths of
// one and several blocks; random quant bytes with random fp16 scales, outputs NaN-poisoned first. Decode
// rows give each row the same bits whatever the row count. Also through the backend with the decode
// fusions (input norm, residual, silu_mul_output), against the same op on the dequantized matrix, and the
// embedding gather from a packed table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "core/quant_blocks.h"
#include "gguf/gguf_dequant.h"
#include "gguf/gguf_types.h"

namespace vireo {
namespace {

constexpr DType kTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                            DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

uint32_t ggml_id(DType t) {
  for (uint32_t id = 0; id < 40; ++id)
    if (ggml_block_dtype(id) == t) return id;
  return 0;
}

struct BlockMatrix {
  DType type;
  int64_t m, k;
  std::vector<uint8_t> bytes;  // [m, k / values] blocks
  std::vector<float> dense;    // [m, k] as gguf dequantize() gives
  Tensor view() { return Tensor(bytes.data(), type, {m, k}); }
};

// Random bytes, then every fp16 field of each block (scales, mins) set to a random value in +-[0.5, 2) *
// 2^-6, so values stay finite and of either sign.
BlockMatrix random_matrix(std::mt19937& rng, DType t, int64_t m, int64_t k) {
  const qblocks::Format f = qblocks::format(t);
  BlockMatrix w{t, m, k};
  w.bytes.resize(static_cast<size_t>(m * k / f.values * f.bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(0.5f, 2.0f);
  for (auto& b : w.bytes) b = static_cast<uint8_t>(byte(rng));
  std::vector<int> halves;  // offsets of the fp16 fields in a block
  switch (t) {
    case DType::kQ4_1: case DType::kQ5_1: case DType::kQ4_K: case DType::kQ5_K: halves = {0, 2}; break;
    case DType::kQ2_K: halves = {80, 82}; break;
    case DType::kQ3_K: halves = {108}; break;
    case DType::kQ6_K: halves = {208}; break;
    default: halves = {0}; break;
  }
  for (size_t b = 0; b < w.bytes.size(); b += f.bytes)
    for (int at : halves) {
      const float v = mag(rng) * (byte(rng) & 1 ? -1.0f : 1.0f) / 64.0f;
      const uint16_t h = f32_to_f16(v);
      std::memcpy(&w.bytes[b + at], &h, 2);
    }
  w.dense.resize(static_cast<size_t>(m * k));
  dequantize(ggml_id(t), w.bytes.data(), w.dense.data(), m * k);
  return w;
}

std::vector<float> random_x(std::mt19937& rng, int64_t n, int64_t k) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (auto& v : x) v = nd(rng);
  return x;
}

std::vector<float> run(ThreadPool& pool, const std::vector<float>& x, int64_t n, BlockMatrix& w, bool portable) {
  std::vector<float> out(static_cast<size_t>(n * w.m), std::numeric_limits<float>::quiet_NaN());
  cpu::linear_blocks(pool, x.data(), n, w.k, w.view(), w.m, out.data(), portable);
  return out;
}

// Every output within 1e-5 of sum |x w| of the double-precision dot of the dequantized weights.
void expect_matches_dense(const std::vector<float>& got, const std::vector<float>& x, int64_t n, const BlockMatrix& w,
                          const char* what) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < w.m; ++j) {
      double want = 0, mag = 0;
      for (int64_t i = 0; i < w.k; ++i) {
        want += static_cast<double>(x[r * w.k + i]) * w.dense[j * w.k + i];
        mag += std::fabs(static_cast<double>(x[r * w.k + i]) * w.dense[j * w.k + i]);
      }
      const float g = got[r * w.m + j];
      ASSERT_TRUE(std::isfinite(g)) << dtype_name(w.type) << " " << what << " n=" << n << " row " << r << " col " << j;
      ASSERT_NEAR(g, want, 1e-5 * mag + 1e-6)
          << dtype_name(w.type) << " " << what << " n=" << n << " k=" << w.k << " row " << r << " col " << j;
    }
}

// gguf/gguf_dequant.cc decodes through the same qblocks::decode; this pins the block-at-a-time entry point
// to the whole-tensor one (and checked the two implementations equal when they were separate).
TEST(CpuLinearBlocks, DecodeBlocksAreTheDequantizedValues) {
  std::mt19937 rng(11);
  for (DType t : kTypes) {
    BlockMatrix w = random_matrix(rng, t, 3, 512);
    const qblocks::Format f = qblocks::format(t);
    std::vector<float> y(static_cast<size_t>(w.m * w.k));
    for (int64_t b = 0; b < w.m * w.k / f.values; ++b) qblocks::decode(t, w.bytes.data() + b * f.bytes, &y[b * f.values]);
    EXPECT_EQ(0, std::memcmp(y.data(), w.dense.data(), y.size() * 4)) << dtype_name(t);
  }
}

TEST(CpuLinearBlocks, MatchesDequantizedWeights) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  for (DType t : kTypes) {
    const int64_t values = qblocks::format(t).values;
    for (int64_t k : {values, 4 * values}) {
      BlockMatrix w = random_matrix(rng, t, 37, k);
      for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 20}) {
        const std::vector<float> x = random_x(rng, n, k);
        expect_matches_dense(run(pool, x, n, w, false), x, n, w, "auto");
        if (n <= cpu::kGemvMaxRows) expect_matches_dense(run(pool, x, n, w, true), x, n, w, "portable");
      }
    }
  }
}

// A row's bits do not depend on the other rows of a decode-sized call (1 to kGemvMaxRows rows).
TEST(CpuLinearBlocks, DecodeRowsAreBatchInvariant) {
  ThreadPool pool(2);
  std::mt19937 rng(3);
  for (DType t : kTypes) {
    BlockMatrix w = random_matrix(rng, t, 19, 2 * qblocks::format(t).values);
    const std::vector<float> x = random_x(rng, cpu::kGemvMaxRows, w.k);
    for (bool portable : {false, true}) {
      const std::vector<float> all = run(pool, x, cpu::kGemvMaxRows, w, portable);
      for (int64_t r = 0; r < cpu::kGemvMaxRows; ++r) {
        const std::vector<float> one(x.begin() + r * w.k, x.begin() + (r + 1) * w.k);
        const std::vector<float> solo = run(pool, one, 1, w, portable);
        EXPECT_EQ(0, std::memcmp(solo.data(), &all[r * w.m], w.m * 4)) << dtype_name(t) << " row " << r;
      }
    }
  }
}

// Backend::linear with the decode fusions: the packed matrix against the same op on its dequantized form.
TEST(CpuLinearBlocks, BackendLinearWithFusions) {
  auto be = create_backend("cpu");
  std::mt19937 rng(5);
  for (DType t : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kQ4_0}) {
    ASSERT_TRUE(be->supports_packed_linear(t));
    const int64_t k = 256, m = 64, n = 3;
    BlockMatrix w = random_matrix(rng, t, m, k);
    Tensor dense(w.dense.data(), DType::kF32, {m, k});
    std::vector<float> x = random_x(rng, n, k), norm = random_x(rng, 1, k), res = random_x(rng, n, m);
    for (int form = 0; form < 3; ++form) {  // input_norm + bias, residual, silu_mul_output
      auto call = [&](const Tensor& wt) {
        std::vector<float> out(static_cast<size_t>(n * (form == 2 ? m / 2 : m)), std::numeric_limits<float>::quiet_NaN());
        std::vector<float> r = res, bias(static_cast<size_t>(m), 0.25f);
        LinearParams p;
        p.x = Tensor(x.data(), DType::kF32, {n, k});
        p.w = wt;
        p.out = Tensor(out.data(), DType::kF32, {n, form == 2 ? m / 2 : m});
        if (form == 0) p.input_norm = Tensor(norm.data(), DType::kF32, {k}), p.bias = Tensor(bias.data(), DType::kF32, {m});
        if (form == 1) p.residual = Tensor(r.data(), DType::kF32, {n, m});
        p.silu_mul_output = form == 2;
        be->linear(p);
        return out;
      };
      const std::vector<float> got = call(w.view()), want = call(dense);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << dtype_name(t) << " form " << form << " " << i;
    }
  }
}

// A packed embedding table (GGUF token_embd on the CPU): each gathered row is the dequantized row, times
// the scale, bitwise.
TEST(CpuLinearBlocks, EmbeddingGathersDecodedRows) {
  auto be = create_backend("cpu");
  std::mt19937 rng(9);
  for (DType t : kTypes) {
    BlockMatrix w = random_matrix(rng, t, 11, 2 * qblocks::format(t).values);
    std::vector<int32_t> ids = {3, 0, 10, 3};
    std::vector<float> out(ids.size() * w.k, std::numeric_limits<float>::quiet_NaN());
    be->embedding({w.view(), Tensor(ids.data(), DType::kI32, {4}), Tensor(out.data(), DType::kF32, {4, w.k}), 0.5f});
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t c = 0; c < w.k; ++c)
        ASSERT_EQ(out[i * w.k + c], w.dense[ids[i] * w.k + c] * 0.5f) << dtype_name(t) << " token " << i << " col " << c;
  }
}

// out_stride: the rows of out lie out_stride apart (q / k / v parts writing their columns of one qkv row);
// the values equal the contiguous call's and the other columns are untouched. Refused with the fusions
// that write elsewhere.
TEST(CpuLinearBlocks, OutStrideWritesItsColumns) {
  auto be = create_backend("cpu");
  std::mt19937 rng(13);
  const int64_t k = 256, m = 32, n = 3, stride = 80, col = 16;
  BlockMatrix w = random_matrix(rng, DType::kQ4_K, m, k);
  std::vector<float> x = random_x(rng, n, k), norm = random_x(rng, 1, k);
  for (int64_t rows : {n, int64_t{12}}) {  // decode and prefill paths
    std::vector<float> xs = random_x(rng, rows, k);
    LinearParams p;
    p.x = Tensor(xs.data(), DType::kF32, {rows, k});
    p.w = w.view();
    p.input_norm = Tensor(norm.data(), DType::kF32, {k});
    std::vector<float> dense(static_cast<size_t>(rows * m)), wide(static_cast<size_t>(rows * stride), -7.0f);
    p.out = Tensor(dense.data(), DType::kF32, {rows, m});
    be->linear(p);
    p.out = Tensor(wide.data() + col, DType::kF32, {rows, m});
    p.out_stride = stride;
    be->linear(p);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < stride; ++c) {
        const float g = wide[r * stride + c];
        if (c >= col && c < col + m) ASSERT_EQ(g, dense[r * m + c - col]) << rows << " " << r << " " << c;
        else ASSERT_EQ(g, -7.0f) << "column " << c << " outside the slice was written";
      }
    std::vector<float> res(static_cast<size_t>(rows * m));
    p.residual = Tensor(res.data(), DType::kF32, {rows, m});
    EXPECT_THROW(be->linear(p), Error);
  }
}

TEST(CpuLinearBlocks, RowsMustBeWholeBlocks) {
  ThreadPool pool(1);
  std::vector<uint8_t> bytes(1024);
  std::vector<float> x(48), out(2);
  EXPECT_THROW(cpu::linear_blocks(pool, x.data(), 1, 48, Tensor(bytes.data(), DType::kQ8_0, {2, 48}), 2, out.data()),
               Error);
}

}  // namespace
}  // namespace vireo
