// Runs the backend's sample op over a step's logits rows: one packed upload of the sampling
// rows, penalties, masks, logit-bias entries and structured-output token bitmasks, the bitmask and
// bias ops (in place on the logits) when any row has one, the sample op, one packed download of
// tokens and logprobs.
#pragma once
#include <deque>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"

namespace vireo {

// Device buffers of the sampling op, grown on demand and kept between steps.
struct SamplingWorkspace {
  Tensor in;
  // Outputs, two buffers used in turn: a step's download may still read one while the next step's
  // sampling writes the other (Backend::copy_to_host_async). I32; each starts with its step's M tokens.
  Tensor out[2];
  int last_out = 0;  // the buffer of the last launched step
  Tensor last_tokens;  // [M] I32: where the last launched step's tokens are (out[last_out] or a graph's)
  int64_t in_cap = 0, out_cap = 0;
  int in_fence = 0;  // Backend::fence after the last sample op, the last reader of `in` (0: unknown)
  // Where the tokens are also written when it holds them all (SampleParams::out_tokens_mirror): the
  // decode graphs' ids buffer, set by the model; empty: nowhere.
  Tensor mirror;
  std::vector<int32_t> host_in;
  struct Pending {  // a launched step whose results are still on their way to the host
    int ticket = 0;
    int64_t rows = 0, num_top = 0;
    int out = 0;                // its output buffer: 0, 1 = out[0], out[1]; 2, 3 = a decode graph's (kGraphOut)
    const void* mirror = nullptr;  // where its tokens were also written (SamplingWorkspace::mirror), or null
    bool ranks = false;         // the buffer ends with [ranks M] (forced rows: prompt logprobs)
    std::vector<int32_t> host;  // [tokens M][logprobs M*(1+N)][top ids M*N] ([ranks M])
  };
  std::deque<Pending> pending;  // in launch order
  std::vector<std::vector<int32_t>> spare_host;  // result buffers of collected steps, reused
};

// logits: [M, V] on `be` (M = batch.rows.size()). Fills out (tokens, logprobs, top ids). stats: the
// logits' RangeStats [M, C, 4] from the linear that wrote them (LinearParams::row_stats), or empty; used
// only when no bitmask or logit bias changes the logits first (SampleParams::row_stats).
void sample_on_backend(Backend& be, const Tensor& logits, const SamplingBatch& batch, SampledRows& out,
                       SamplingWorkspace& ws, const Tensor& stats = Tensor());
// The same in two halves: launch issues the sampling and the download and returns without waiting;
// finish (in launch order) waits for that step's results.
int sample_on_backend_launch(Backend& be, const Tensor& logits, const SamplingBatch& batch, SamplingWorkspace& ws,
                             const Tensor& stats = Tensor());
void sample_on_backend_finish(Backend& be, int ticket, SampledRows& out, SamplingWorkspace& ws);

// Sampling inside a decode graph. A batch qualifies when one fixed op sequence samples it whatever its
// row holds: one row, greedy or temperature exactly 1 with no top-k / top-p / min-p, at most the
// top-1 logprob, no penalties, masks, logit bias or bitmask (the rows the lm_head's RangeStats serve).
// The graph reads the row from device memory and writes its results into one of two buffers of its own
// (Pending::out kGraphOut + b), so the sample op is captured with the forward (DecoderModel).
constexpr int kGraphOut = 2;
bool sampleable_in_graph(const SamplingBatch& batch);
// Words of a packed result buffer: [tokens M][logprobs M*(1+N)][top ids M*N]; a batch with forced rows
// (prompt logprobs) adds [ranks M] after them (SampleParams::out_ranks).
inline int64_t sample_out_words(int64_t M, int64_t N) { return M * (2 + 2 * N); }
// The sample op's outputs as views of one packed buffer `out` (tokens first).
void set_sample_outputs(SampleParams& p, const Tensor& out, int64_t M, int64_t N);
// Blocks until no download still reads output buffer `b` (Pending::out).
void wait_sample_downloads(Backend& be, const SamplingWorkspace& ws, int b);
// Records a sample op already issued on the device (its results packed in `out`, buffer id out_id, its
// tokens also at `mirror` or null; `ranks`: the buffer ends with them) and starts their download; the
// ticket goes to sample_on_backend_finish.
int sample_on_backend_collect(Backend& be, SamplingWorkspace& ws, const Tensor& out, int out_id, int64_t M, int64_t N,
                              const void* mirror, bool ranks = false);
void free_sampling_workspace(Backend& be, SamplingWorkspace& ws);

}  // namespace vireo
