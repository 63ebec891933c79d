// short_conv (LFM2's gated short convolution over the paged bx state) vs the CPU backend: decode rows
// (T = 1 per sequence) and multi-token prefill rows over cached prefixes, contexts that cross block
// boundaries (the L - 1 earlier tokens in another block), a padding row (slot -1), kernel lengths
// 1-4, with and without bias, bf16 / f16 / fp32; out and the whole state are compared, and a CUDA
// graph of the op replayed on fresh inputs gives the same answer.
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

struct ConvSeq {
  int cached, q_len;
  bool padding = false;  // a CUDA-graph padding row: position 0, seq_len 1, slot -1
};

class ShortConvCudaTest : public CudaOpsTest {
 protected:
  static constexpr int kBlock = 16;

  void run(DType act, const std::vector<ConvSeq>& seqs, int C, int L, bool bias, bool graph = false) {
    SCOPED_TRACE(std::string(dtype_name(act)) + " C " + std::to_string(C) + " L " + std::to_string(L) +
                 (bias ? " bias" : "") + (graph ? " graph" : ""));
    use_dtype(act);
    const int S = static_cast<int>(seqs.size());
    int max_blocks = 1;
    for (const auto& s : seqs) max_blocks = std::max(max_blocks, (s.cached + s.q_len + kBlock - 1) / kBlock);
    const int num_blocks = S * max_blocks + 3;
    std::vector<int> perm(num_blocks);
    for (int i = 0; i < num_blocks; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng_);  // scattered, distinct blocks per sequence
    std::vector<int> qs{0}, lens, tables(size_t(S) * max_blocks, 0), slots;
    for (int s = 0; s < S; ++s) {
      const auto& q = seqs[s];
      for (int b = 0; b < max_blocks; ++b) tables[size_t(s) * max_blocks + b] = perm[s * max_blocks + b];
      for (int j = 0; j < q.q_len; ++j) {
        const int pos = q.cached + j;
        slots.push_back(q.padding ? -1 : tables[size_t(s) * max_blocks + pos / kBlock] * kBlock + pos % kBlock);
      }
      qs.push_back(qs.back() + q.q_len);
      lens.push_back(q.cached + q.q_len);
    }
    const int T = qs.back();
    auto bcx = rand_vec(size_t(T) * 3 * C, -1, 1, act);
    auto w = rand_vec(size_t(C) * L, -1, 1, act);
    auto b = bias ? rand_vec(C, -0.5f, 0.5f, act) : std::vector<float>{};
    auto state0 = rand_vec(size_t(num_blocks) * kBlock * C, -1, 1, act);  // cached prefixes and garbage
    const std::vector<int64_t> sshape{num_blocks, kBlock, C};

    ShortConvParams g;
    g.bcx = gpu_from(bcx, {T, 3 * C}, act);
    g.weight = gpu_from(w, {C, L}, act);
    if (bias) g.bias = gpu_from(b, {C}, act);
    g.state = gpu_from(state0, sshape, act);
    g.out = gpu_poisoned({T, C}, act);
    g.slot_mapping = gpu_i32(slots, {T});
    g.query_start = gpu_i32(qs, {S + 1});
    g.seq_lens = gpu_i32(lens, {S});
    g.block_tables = gpu_i32(tables, {S, max_blocks});
    g.num_seqs = S;
    g.max_blocks_per_seq = max_blocks;
    g.block_size = kBlock;

    auto oracle = [&](const std::vector<float>& x, std::vector<float>& out, std::vector<float>& state) {
      ShortConvParams r = g;
      r.bcx = cpu_f32(x, {T, 3 * C});
      r.weight = cpu_f32(w, {C, L});
      r.bias = bias ? cpu_f32(b, {C}) : Tensor();
      r.state = cpu_f32(state0, sshape);
      r.out = cpu_poisoned({T, C});
      r.slot_mapping = cpu_i32(slots, {T});
      r.query_start = cpu_i32(qs, {S + 1});
      r.seq_lens = cpu_i32(lens, {S});
      r.block_tables = cpu_i32(tables, {S, max_blocks});
      cpu_->short_conv(r);
      out = to_host(r.out);
      state = to_host(r.state);
    };
    std::vector<float> want_out, want_state;
    oracle(bcx, want_out, want_state);
    gpu_->short_conv(g);
    expect_close(to_host(g.out), want_out, tol_for(act), "out");
    expect_close(to_host(g.state), want_state, tol_for(act), "state");
    if (!graph) return;

    // Captured once, replayed after bcx and the state changed in place: sizes and pointers only in
    // the graph, everything else read at replay.
    Tensor fresh_state = gpu_from(state0, sshape, act);
    gpu_->copy(fresh_state, g.state);
    gpu_->synchronize();
    gpu_->begin_capture();
    try {
      gpu_->short_conv(g);
    } catch (...) {
      gpu_->abort_capture();
      throw;
    }
    const int id = gpu_->end_capture();
    for (int rep = 0; rep < 2; ++rep) {
      auto x = rand_vec(size_t(T) * 3 * C, -1, 1, act);
      Tensor fresh_x = gpu_from(x, {T, 3 * C}, act);
      gpu_->copy(fresh_x, g.bcx);
      gpu_->copy(fresh_state, g.state);
      Tensor poison = gpu_poisoned({T, C}, act);
      gpu_->copy(poison, g.out);
      gpu_->replay_graph(id);
      oracle(x, want_out, want_state);
      expect_close(to_host(g.out), want_out, tol_for(act), "replay " + std::to_string(rep) + " out");
      expect_close(to_host(g.state), want_state, tol_for(act), "replay " + std::to_string(rep) + " state");
    }
    gpu_->destroy_graph(id);
  }
};

// Decode rows: contexts of 0, 1 and 2 earlier tokens (fewer than L - 1), at block starts (16, 32:
// both earlier tokens in the previous block), one past a block start (17: one in each), long ones.
const std::vector<ConvSeq> kDecode{{0, 1}, {1, 1}, {2, 1}, {16, 1}, {17, 1}, {32, 1}, {45, 1}, {200, 1}};
// Prefill chunks over cached prefixes, one starting at a block boundary, one at 0, crossing blocks;
// mixed with decode rows and a padding row.
const std::vector<ConvSeq> kPrefill{{0, 37}, {16, 20}, {5, 12}, {31, 2}, {62, 1}, {0, 1, true}, {3, 70}};

TEST_F(ShortConvCudaTest, DecodeRowsMatchCpu) {
  for (DType act : {DType::kBF16, DType::kF32}) run(act, kDecode, 64, 3, true);
}

TEST_F(ShortConvCudaTest, PrefillRowsWithCachedPrefixMatchCpu) {
  for (DType act : {DType::kBF16, DType::kF16, DType::kF32}) run(act, kPrefill, 96, 3, true);
}

TEST_F(ShortConvCudaTest, KernelLengthsWidthsAndNoBias) {
  run(DType::kBF16, kPrefill, 40, 1, false);
  run(DType::kBF16, kPrefill, 40, 2, true);
  run(DType::kF32, kPrefill, 130, 4, false);
  run(DType::kBF16, {{0, 300}, {1000, 1}}, 2048, 3, false);  // LFM2-1.2B's width, many threads per row
}

TEST_F(ShortConvCudaTest, GraphReplayWithFreshInputs) {
  run(DType::kBF16, kDecode, 64, 3, true, /*graph=*/true);
  run(DType::kBF16, kPrefill, 64, 3, false, /*graph=*/true);
}

}  // namespace
}  // namespace vireo::testing
