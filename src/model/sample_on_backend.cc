#include "model/sample_on_backend.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"

namespace vireo {
namespace {

constexpr int64_t kRowWords = sizeof(SamplingRow) / sizeof(int32_t);

void ensure_in(Backend& be, SamplingWorkspace& ws, int64_t want) {
  if (want <= ws.in_cap) return;
  if (!ws.in.empty()) be.free(ws.in);
  ws.in_cap = std::max(want, ws.in_cap * 2);
  ws.in = be.alloc({ws.in_cap}, DType::kI32);
  ws.in_fence = 0;  // new memory: its last reader is unknown
}

// Waits for the downloads still reading output buffer `b` (-1: either). Tickets complete in order,
// so waiting for the newest such one completes the older ones too.
void wait_downloads(Backend& be, const SamplingWorkspace& ws, int b) {
  for (auto it = ws.pending.rbegin(); it != ws.pending.rend(); ++it)
    if (it->rows > 0 && (b < 0 || it->out == b)) {
      be.wait_copy(it->ticket);
      return;
    }
}

// Output buffer b, of at least `want` words, free of downloads still reading it.
Tensor take_out(Backend& be, SamplingWorkspace& ws, int b, int64_t want) {
  if (want > ws.out_cap) {
    wait_downloads(be, ws, -1);  // they read the old buffers
    for (Tensor& t : ws.out)
      if (!t.empty()) be.free(t);
    ws.out_cap = std::max(want, ws.out_cap * 2);
    for (Tensor& t : ws.out) t = be.alloc({ws.out_cap}, DType::kI32);
  }
  wait_downloads(be, ws, b);
  return ws.out[b];
}

Tensor i32_view(const Tensor& buf, int64_t off, std::vector<int64_t> shape) {
  return Tensor(static_cast<int32_t*>(buf.data) + off, DType::kI32, std::move(shape), buf.device);
}

Tensor f32_view(const Tensor& buf, int64_t off, std::vector<int64_t> shape) {
  return Tensor(static_cast<int32_t*>(buf.data) + off, DType::kF32, std::move(shape), buf.device);
}

}  // namespace

void sample_on_backend(Backend& be, const Tensor& logits, const SamplingBatch& batch, SampledRows& out,
                       SamplingWorkspace& ws, const Tensor& stats) {
  sample_on_backend_finish(be, sample_on_backend_launch(be, logits, batch, ws, stats), out, ws);
}

int sample_on_backend_launch(Backend& be, const Tensor& logits, const SamplingBatch& batch, SamplingWorkspace& ws,
                             const Tensor& stats) {
  const int64_t M = static_cast<int64_t>(batch.rows.size());
  const int64_t N = batch.num_top_logprobs;
  if (N < 0 || N > 20) throw Error("sampling: num_top_logprobs must be in [0, 20]");
  if (batch.penalty_tokens.size() % 2 != 0) throw Error("sampling: penalty_tokens holds (id, count) pairs");
  if (M == 0) {
    ws.pending.push_back({0, 0, N, 0, nullptr, {}});
    return 0;
  }
  if (logits.dim(0) < M) throw Error("sampling: fewer logits rows than sampling rows");

  if (batch.bias_entries.size() % 3 != 0) throw Error("sampling: bias_entries holds (row, id, bias) triples");
  const int64_t V = logits.dim(1);
  const int64_t G = static_cast<int64_t>(batch.bitmask_rows.size()), W = (V + 31) / 32;
  if (!batch.fill_token_bitmask && static_cast<int64_t>(batch.token_bitmask.size()) != G * W)
    throw Error("sampling: token_bitmask must hold ceil(vocab / 32) words for each of bitmask_rows");
  for (size_t g = 0; g < batch.bitmask_rows.size(); ++g) {
    const int32_t r = batch.bitmask_rows[g];
    if (r < 0 || r >= M || (g > 0 && r <= batch.bitmask_rows[g - 1]))
      throw Error("sampling: bitmask_rows must be ascending sampling rows");
  }
  // Inputs: [rows M*14][penalties E*2][masks E2][logit bias E3*3][bitmask rows G][bitmask G*W].
  const int64_t E = static_cast<int64_t>(batch.penalty_tokens.size());
  const int64_t E2 = static_cast<int64_t>(batch.mask_tokens.size());
  const int64_t E3 = static_cast<int64_t>(batch.bias_entries.size());
  const int64_t bias_off = M * kRowWords + E + E2, bitmask_off = bias_off + E3;
  const int64_t n_in = bitmask_off + G + G * W;
  ws.host_in.resize(n_in);
  std::memcpy(ws.host_in.data(), batch.rows.data(), M * sizeof(SamplingRow));
  std::copy(batch.penalty_tokens.begin(), batch.penalty_tokens.end(), ws.host_in.begin() + M * kRowWords);
  std::copy(batch.mask_tokens.begin(), batch.mask_tokens.end(), ws.host_in.begin() + M * kRowWords + E);
  std::copy(batch.bias_entries.begin(), batch.bias_entries.end(), ws.host_in.begin() + bias_off);
  std::copy(batch.bitmask_rows.begin(), batch.bitmask_rows.end(), ws.host_in.begin() + bitmask_off);
  if (G > 0) {
    uint32_t* words = reinterpret_cast<uint32_t*>(ws.host_in.data() + bitmask_off + G);
    if (batch.fill_token_bitmask) batch.fill_token_bitmask(words);  // the forward is already issued
    else std::memcpy(words, batch.token_bitmask.data(), G * W * sizeof(uint32_t));
  }
  ensure_in(be, ws, n_in);
  Tensor up = ws.in.view({n_in});
  be.copy_from_host_after(ws.host_in.data(), up, ws.in_fence);  // beside the forward, on CUDA

  // Outputs: [tokens M][logprobs M*(1+N)][top ids M*N], then [ranks M] when a row is forced: prompt
  // logprobs report the prompt token's rank, however far down the row it is.
  const bool ranks = std::any_of(batch.rows.begin(), batch.rows.end(), [](const SamplingRow& r) { return r.forced_token >= 0; });
  const int64_t n_out = sample_out_words(M, N) + (ranks ? M : 0);
  const int b = 1 - ws.last_out;
  const Tensor out = take_out(be, ws, b, n_out);

  const Tensor rows_logits = logits.view({M, V});
  if (G > 0) be.apply_token_bitmask({rows_logits, i32_view(ws.in, bitmask_off, {G}), i32_view(ws.in, bitmask_off + G, {G, W})});
  if (E3 > 0) be.add_logit_bias({rows_logits, i32_view(ws.in, bias_off, {E3 / 3, 3})});

  SampleParams p;
  p.logits = logits.view({M, logits.dim(1)});
  p.rows = i32_view(ws.in, 0, {M * kRowWords});
  if (E > 0) p.penalty_tokens = i32_view(ws.in, M * kRowWords, {E / 2, 2});
  if (E2 > 0) p.mask_tokens = i32_view(ws.in, M * kRowWords + E, {E2});
  set_sample_outputs(p, out, M, N);
  if (ranks) p.out_ranks = i32_view(out, sample_out_words(M, N), {M});
  p.host_rows = batch.rows.data();  // lets the CUDA backend skip kernels no row needs
  // The statistics describe the logits as the linear left them: not after a bitmask or bias.
  if (!stats.empty() && G == 0 && E3 == 0 && stats.ndim() == 3 && stats.dim(0) == M) p.row_stats = stats;
  const bool mirrored = !ws.mirror.empty() && ws.mirror.numel() >= M;
  if (mirrored) p.out_tokens_mirror = ws.mirror.view({M});
  be.sample(p);
  ws.in_fence = be.fence();
  ws.last_out = b;
  return sample_on_backend_collect(be, ws, out, b, M, N, mirrored ? ws.mirror.data : nullptr, ranks);
}

int sample_on_backend_collect(Backend& be, SamplingWorkspace& ws, const Tensor& out, int out_id, int64_t M, int64_t N,
                              const void* mirror, bool ranks) {
  const int64_t n_out = sample_out_words(M, N) + (ranks ? M : 0);
  ws.last_tokens = i32_view(out, 0, {M});
  SamplingWorkspace::Pending& pend = ws.pending.emplace_back();  // deque: stays put while others come and go
  pend.rows = M;
  pend.num_top = N;
  pend.out = out_id;
  pend.mirror = mirror;
  pend.ranks = ranks;
  if (!ws.spare_host.empty()) {
    pend.host = std::move(ws.spare_host.back());
    ws.spare_host.pop_back();
  }
  pend.host.resize(n_out);
  try {
    pend.ticket = be.copy_to_host_async(out.view({n_out}), pend.host.data());
  } catch (...) {
    ws.pending.pop_back();
    throw;
  }
  return pend.ticket;
}

void set_sample_outputs(SampleParams& p, const Tensor& out, int64_t M, int64_t N) {
  p.num_top_logprobs = static_cast<int>(N);
  p.out_tokens = i32_view(out, 0, {M});
  p.out_logprobs = f32_view(out, M, {M, 1 + N});
  p.out_top_ids = N > 0 ? i32_view(out, M + M * (1 + N), {M, N}) : Tensor();
}

void wait_sample_downloads(Backend& be, const SamplingWorkspace& ws, int b) { wait_downloads(be, ws, b); }

bool sampleable_in_graph(const SamplingBatch& batch) {
  if (batch.rows.size() != 1 || batch.num_top_logprobs < 0 || batch.num_top_logprobs > 1) return false;
  if (!batch.penalty_tokens.empty() || !batch.mask_tokens.empty() || !batch.bias_entries.empty() ||
      !batch.bitmask_rows.empty() || batch.fill_token_bitmask)
    return false;
  const SamplingRow& r = batch.rows[0];
  if (r.forced_token >= 0) return false;  // prompt logprobs: their ranks are not in a graph's buffer
  if (r.temperature < 1e-5f) return true;  // greedy: no draw
  return r.temperature == 1.0f && r.top_k <= 0 && r.top_p >= 1.0f && r.min_p <= 0.0f;
}

void sample_on_backend_finish(Backend& be, int ticket, SampledRows& out, SamplingWorkspace& ws) {
  if (ws.pending.empty() || ws.pending.front().ticket != ticket)
    throw Error("sampling: results collected out of launch order");
  SamplingWorkspace::Pending pend = std::move(ws.pending.front());
  ws.pending.pop_front();
  const int64_t M = pend.rows, N = pend.num_top;
  out.num_top_logprobs = static_cast<int>(N);
  out.tokens.resize(M);
  out.logprobs.resize(M * (1 + N));
  out.top_ids.resize(M * N);
  out.ranks.resize(pend.ranks ? M : 0);
  if (M == 0) return;
  be.wait_copy(ticket);
  const std::vector<int32_t>& h = pend.host;
  std::copy(h.begin(), h.begin() + M, out.tokens.begin());
  std::memcpy(out.logprobs.data(), h.data() + M, M * (1 + N) * sizeof(float));
  std::copy(h.begin() + M + M * (1 + N), h.begin() + sample_out_words(M, N), out.top_ids.begin());
  if (pend.ranks) std::copy(h.begin() + sample_out_words(M, N), h.begin() + sample_out_words(M, N) + M, out.ranks.begin());
  if (ws.spare_host.size() < 4) ws.spare_host.push_back(std::move(pend.host));
}

void free_sampling_workspace(Backend& be, SamplingWorkspace& ws) {
  wait_downloads(be, ws, -1);
  if (!ws.in.empty()) be.free(ws.in);
  for (Tensor& t : ws.out) {
    if (!t.empty()) be.free(t);
    t = Tensor();
  }
  ws.in = Tensor();
  ws.last_tokens = Tensor();
  ws.in_cap = ws.out_cap = 0;
  ws.in_fence = 0;
}

}  // namespace vireo
