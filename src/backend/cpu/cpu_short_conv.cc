// short_conv on the CPU (the oracle of the CUDA kernel): LFM2's B*x -> causal depthwise conv -> C*
// over each sequence's paged bx state (see ShortConvParams). F32 activations, so no rounding between
// the steps; the state may be F32, F16 or BF16.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {
namespace {

[[noreturn]] void fail(const std::string& why) { throw Error("cpu short_conv: " + why); }

}  // namespace

void short_conv(ThreadPool& pool, const ShortConvParams& p) {
  require_f32(p.bcx, "short_conv bcx");
  require_f32(p.out, "short_conv out");
  require_float(p.weight, "short_conv weight");
  require_float(p.state, "short_conv state");
  require_i32(p.slot_mapping, "short_conv slot_mapping");
  require_i32(p.query_start, "short_conv query_start");
  require_i32(p.seq_lens, "short_conv seq_lens");
  require_i32(p.block_tables, "short_conv block_tables");
  if (p.state.ndim() != 3) fail("state must be [num_blocks, block_size, C], got " + p.state.shape_str());
  const int64_t C = p.state.dim(2), num_blocks = p.state.dim(0);
  const int bs = p.block_size, S = p.num_seqs, mb = p.max_blocks_per_seq;
  if (bs <= 0 || p.state.dim(1) != bs) fail("state block size does not match block_size");
  if (C <= 0 || p.weight.numel() % C != 0 || p.weight.numel() == 0) fail("weight must be [C, L]");
  const int L = static_cast<int>(p.weight.numel() / C);
  if (!p.bias.empty()) {
    require_float(p.bias, "short_conv bias");
    if (p.bias.numel() != C) fail("bias must be [C]");
  }
  const int32_t* qs = p.query_start.ptr<int32_t>();
  const int32_t* lens = p.seq_lens.ptr<int32_t>();
  const int32_t* tables = p.block_tables.ptr<int32_t>();
  const int32_t* slots = p.slot_mapping.ptr<int32_t>();
  if (S < 0 || p.query_start.numel() < S + 1 || p.seq_lens.numel() < S || p.block_tables.numel() < int64_t{S} * mb)
    fail("query_start, seq_lens or block_tables is shorter than num_seqs needs");
  const int64_t T = S > 0 ? qs[S] : 0;
  if (p.bcx.numel() < T * 3 * C || p.out.numel() < T * C || p.slot_mapping.numel() < T)
    fail("bcx must be [T, 3C], out [T, C] and slot_mapping [T] for T = query_start[S] = " + std::to_string(T));
  const int64_t num_slots = num_blocks * bs;

  // Row t -> (sequence, position); check every state page a row reads and every slot it writes.
  std::vector<int32_t> row_seq(T), row_pos(T);
  for (int s = 0; s < S; ++s) {
    const int q_len = qs[s + 1] - qs[s], first = lens[s] - q_len;
    if (q_len < 0 || first < 0)
      fail("sequence " + std::to_string(s) + " has seq_len " + std::to_string(lens[s]) + " < query length " +
           std::to_string(q_len));
    if (q_len > 0 && first > 0) {
      const int lo = std::max(0, first - (L - 1));
      if ((first - 1) / bs >= mb) fail("sequence " + std::to_string(s) + " reads past its block table");
      for (int b = lo / bs; b <= (first - 1) / bs; ++b) {
        const int32_t id = tables[static_cast<int64_t>(s) * mb + b];
        if (id < 0 || id >= num_blocks)
          fail("block id " + std::to_string(id) + " outside the state of " + std::to_string(num_blocks) + " blocks");
      }
    }
    for (int j = 0; j < q_len; ++j) {
      row_seq[qs[s] + j] = s;
      row_pos[qs[s] + j] = first + j;
    }
  }
  for (int64_t t = 0; t < T; ++t)
    if (slots[t] >= num_slots) fail("slot " + std::to_string(slots[t]) + " outside the state of " + std::to_string(num_slots));

  std::vector<float> w(static_cast<size_t>(C) * L), bias(C, 0.0f);
  convert_to_f32(p.weight.data, p.weight.dtype, w.data(), w.size());
  if (!p.bias.empty()) convert_to_f32(p.bias.data, p.bias.dtype, bias.data(), C);
  // bx [T, C] of this step's rows.
  std::vector<float> bx(static_cast<size_t>(T * C));
  const float* bcx = p.bcx.ptr<float>();
  pool.parallel_for(T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      for (int64_t c = 0; c < C; ++c) bx[t * C + c] = bcx[t * 3 * C + c] * bcx[t * 3 * C + 2 * C + c];
  });
  const DType sdt = p.state.dtype;
  pool.parallel_for(T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int s = row_seq[t], pos = row_pos[t];
      const int first = lens[s] - (qs[s + 1] - qs[s]);
      const int32_t* table = tables + static_cast<int64_t>(s) * mb;
      for (int64_t c = 0; c < C; ++c) {
        float acc = 0.0f;
        for (int k = 0; k < L; ++k) {
          const int q = pos - (L - 1) + k;
          if (q < 0) continue;
          const float v = q >= first ? bx[(qs[s] + q - first) * C + c]
                                     : load_elem(p.state.data, sdt, (static_cast<int64_t>(table[q / bs]) * bs + q % bs) * C + c);
          acc += w[c * L + k] * v;
        }
        p.out.ptr<float>()[t * C + c] = bcx[t * 3 * C + C + c] * (acc + bias[c]);
      }
    }
  });
  // Writes last: the reads above only touch positions before each sequence's first row, but a caller
  // mapping two rows to one slot must not change what this step computed.
  for (int64_t t = 0; t < T; ++t) {
    if (slots[t] < 0) continue;
    for (int64_t c = 0; c < C; ++c) store_elem(p.state.data, sdt, static_cast<int64_t>(slots[t]) * C + c, bx[t * C + c]);
  }
}

}  // namespace vireo::cpu
