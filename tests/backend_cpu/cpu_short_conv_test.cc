// The CPU short_conv op (the oracle of the CUDA one) vs a direct, non-paged computation written here
// from HF's Lfm2ShortConv.slow_forward: Bx = B * x, Conv1d(groups = C, padding = L - 1)[..., :T] + bias,
// y = C * conv. Sequences run through the op in steps of mixed lengths (prefill chunks, decode rows,
// several sequences per step) over scattered blocks of 4 slots; every output row and the state
// written for every token are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"

namespace vireo {
namespace {

constexpr int kBlock = 4;

std::vector<float> randu(std::mt19937& rng, size_t n, float a) {
  std::uniform_real_distribution<float> d(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// One sequence's whole input [n, 3C] and its directly computed output [n, C].
struct Seq {
  std::vector<float> bcx, want;
  std::vector<int32_t> table;  // physical blocks
  int done = 0;                // tokens already through the op
};

std::vector<float> direct(const std::vector<float>& bcx, int n, int C, int L, const std::vector<float>& w,
                          const std::vector<float>& bias) {
  std::vector<double> bx(size_t(n) * C);
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < C; ++c) bx[size_t(t) * C + c] = double(bcx[size_t(t) * 3 * C + c]) * bcx[size_t(t) * 3 * C + 2 * C + c];
  std::vector<float> out(size_t(n) * C);
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < C; ++c) {
      double conv = bias.empty() ? 0.0 : bias[c];
      for (int k = 0; k < L; ++k) {
        const int q = t - (L - 1) + k;  // Conv1d with L - 1 zeros of left padding, first n outputs
        if (q >= 0) conv += double(w[size_t(c) * L + k]) * bx[size_t(q) * C + c];
      }
      out[size_t(t) * C + c] = float(bcx[size_t(t) * 3 * C + C + c] * conv);
    }
  return out;
}

class ShortConvTest : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    be_ = create_backend("cpu");
    L_ = std::get<0>(GetParam());
    w_ = randu(rng_, size_t(C_) * L_, 1.0f);
    if (std::get<1>(GetParam())) bias_ = randu(rng_, C_, 0.5f);
    state_.assign(size_t(kNumBlocks) * kBlock * C_, std::nanf(""));  // never-written slots are NaN
  }

  Seq make_seq(int n, std::vector<int32_t> table) {
    Seq s;
    s.bcx = randu(rng_, size_t(n) * 3 * C_, 1.5f);
    s.want = direct(s.bcx, n, C_, L_, w_, bias_);
    s.table = std::move(table);
    return s;
  }

  // One step: seqs[i] runs its next counts[i] tokens; every row is checked against the direct output.
  void step(std::vector<Seq*> seqs, std::vector<int> counts) {
    const int S = int(seqs.size()), mb = 8;
    std::vector<float> bcx;
    std::vector<int32_t> slots, qs{0}, lens, tables(size_t(S) * mb, 0);
    for (int i = 0; i < S; ++i) {
      Seq& s = *seqs[i];
      for (int j = 0; j < counts[i]; ++j) {
        const int pos = s.done + j;
        bcx.insert(bcx.end(), s.bcx.begin() + size_t(pos) * 3 * C_, s.bcx.begin() + size_t(pos + 1) * 3 * C_);
        slots.push_back(s.table[pos / kBlock] * kBlock + pos % kBlock);
      }
      qs.push_back(qs.back() + counts[i]);
      lens.push_back(s.done + counts[i]);
      std::copy(s.table.begin(), s.table.end(), tables.begin() + size_t(i) * mb);
    }
    const int T = qs.back();
    std::vector<float> out(size_t(T) * C_, std::nanf(""));
    ShortConvParams p;
    p.bcx = Tensor(bcx.data(), DType::kF32, {T, 3 * C_});
    p.weight = Tensor(w_.data(), DType::kF32, {C_, L_});
    if (!bias_.empty()) p.bias = Tensor(bias_.data(), DType::kF32, {C_});
    p.state = Tensor(state_.data(), DType::kF32, {kNumBlocks, kBlock, C_});
    p.out = Tensor(out.data(), DType::kF32, {T, C_});
    p.slot_mapping = Tensor(slots.data(), DType::kI32, {T});
    p.query_start = Tensor(qs.data(), DType::kI32, {S + 1});
    p.seq_lens = Tensor(lens.data(), DType::kI32, {S});
    p.block_tables = Tensor(tables.data(), DType::kI32, {S, mb});
    p.num_seqs = S;
    p.max_blocks_per_seq = mb;
    p.block_size = kBlock;
    be_->short_conv(p);
    for (int i = 0; i < S; ++i) {
      Seq& s = *seqs[i];
      for (int j = 0; j < counts[i]; ++j) {
        const int pos = s.done + j, row = qs[i] + j;
        for (int c = 0; c < C_; ++c) {
          const float want = s.want[size_t(pos) * C_ + c];
          ASSERT_NEAR(out[size_t(row) * C_ + c], want, 1e-5f * (1 + std::fabs(want)))
              << "seq " << i << " position " << pos << " channel " << c;
          const float bx = s.bcx[size_t(pos) * 3 * C_ + c] * s.bcx[size_t(pos) * 3 * C_ + 2 * C_ + c];
          ASSERT_EQ(state_[size_t(slots[row]) * C_ + c], bx) << "state of seq " << i << " position " << pos;
        }
      }
      s.done += counts[i];
    }
  }

  static constexpr int kNumBlocks = 24;
  const int C_ = 40;
  int L_ = 3;
  std::mt19937 rng_{1234};
  std::unique_ptr<Backend> be_;
  std::vector<float> w_, bias_, state_;
};

// Chunks that straddle block boundaries, decode rows, two and three sequences per step, a sequence
// whose step starts exactly at a block boundary, and one of a single token.
TEST_P(ShortConvTest, PagedStepsMatchDirectConvolution) {
  Seq a = make_seq(23, {17, 3, 9, 0, 21, 12}), b = make_seq(17, {5, 11, 2, 19, 1}), c = make_seq(9, {7, 23, 14});
  step({&a}, {5});
  step({&a, &b}, {1, 4});          // a decodes at position 5, b prefills to a block boundary
  step({&b, &a, &c}, {7, 1, 1});   // b from position 4 (block start), c's first token alone
  step({&c, &a}, {2, 10});         // c at positions 1-2 (fewer than L - 1 before it), a's longer chunk
  for (int i = 0; i < 6; ++i) step({&a, &b, &c}, {1, 1, 1});  // decode rows only
}

INSTANTIATE_TEST_SUITE_P(KernelLengths, ShortConvTest,
                         ::testing::Values(std::tuple{3, true}, std::tuple{3, false}, std::tuple{4, true},
                                           std::tuple{1, false}));

// Rows with slot -1 (CUDA-graph padding: position 0, seq_len 1) compute but write nothing.
TEST(ShortConv, SkippedSlotsWriteNothing) {
  auto be = create_backend("cpu");
  const int C = 8, L = 3;
  std::vector<float> bcx(3 * C, 0.5f), w(C * L, 1.0f), state(4 * 4 * C, -7.0f), out(C, std::nanf(""));
  std::vector<int32_t> slots{-1}, qs{0, 1}, lens{1}, tables{0};
  ShortConvParams p;
  p.bcx = Tensor(bcx.data(), DType::kF32, {1, 3 * C});
  p.weight = Tensor(w.data(), DType::kF32, {C, L});
  p.state = Tensor(state.data(), DType::kF32, {4, 4, C});
  p.out = Tensor(out.data(), DType::kF32, {1, C});
  p.slot_mapping = Tensor(slots.data(), DType::kI32, {1});
  p.query_start = Tensor(qs.data(), DType::kI32, {2});
  p.seq_lens = Tensor(lens.data(), DType::kI32, {1});
  p.block_tables = Tensor(tables.data(), DType::kI32, {1, 1});
  p.num_seqs = 1;
  p.max_blocks_per_seq = 1;
  p.block_size = 4;
  be->short_conv(p);
  for (float v : out) EXPECT_FLOAT_EQ(v, 0.5f * 0.25f);  // C * (w[L-1] * B * x): nothing before position 0
  for (float v : state) EXPECT_EQ(v, -7.0f);
}

TEST(ShortConv, BadBlockIdIsAnError) {
  auto be = create_backend("cpu");
  const int C = 4, L = 3;
  std::vector<float> bcx(3 * C, 1.0f), w(C * L, 1.0f), state(2 * 4 * C, 0.0f), out(C);
  std::vector<int32_t> slots{5}, qs{0, 1}, lens{6}, tables{9, 1};  // position 5 reads block 0 of the table: id 9
  ShortConvParams p;
  p.bcx = Tensor(bcx.data(), DType::kF32, {1, 3 * C});
  p.weight = Tensor(w.data(), DType::kF32, {C, L});
  p.state = Tensor(state.data(), DType::kF32, {2, 4, C});
  p.out = Tensor(out.data(), DType::kF32, {1, C});
  p.slot_mapping = Tensor(slots.data(), DType::kI32, {1});
  p.query_start = Tensor(qs.data(), DType::kI32, {2});
  p.seq_lens = Tensor(lens.data(), DType::kI32, {1});
  p.block_tables = Tensor(tables.data(), DType::kI32, {1, 2});
  p.num_seqs = 1;
  p.max_blocks_per_seq = 2;
  p.block_size = 4;
  EXPECT_THROW(be->short_conv(p), Error);
}

}  // namespace
}  // namespace vireo
