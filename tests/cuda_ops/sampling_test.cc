// The sample op on the GPU vs the CPU reference (backend/cpu/cpu_sampling.h): fresh random logits
// (bf16 and f32, the same values on both sides), outputs poisoned first, every output checked.
// Greedy/forced tokens and top-N ids must match exactly, logprobs within 1e-4. A sampled token t is
// checked against the CPU's final distribution p of its row (penalties, temperature, min-p, top-k,
// top-p, renormalised): t must be in the support (p[t] > 0) and the draw must land on it,
//   sum_{i < t} p[i] - tol <= uniform < sum_{i <= t} p[i] + tol   (sums in double, tol 1e-5 for the
// GPU's float accumulation over up to 152k terms). Where that fails for the exact settings, the
// same check with top_p +- 1e-5, min_p * (1 +- 1e-4) or top_k + 1 is accepted (ties at a filter
// threshold within rounding). Exact agreement with the CPU's token is counted and printed.
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

#include "backend/cpu/cpu_range_stats.h"
#include "backend/cpu/cpu_sampling.h"
#include "cuda_test_util.h"
#include "model/sample_on_backend.h"

namespace vireo::testing {
namespace {

// kTopKFast: the fast path's top-k rows (top_k <= 20 with top-p/min-p, as Qwen3's defaults);
// kTopKGrid: the same settings, row r takes combination r of the grid; kTopKTies: kTopKFast rows over
// logits with ties at the top-k/top-p boundary (3 ids at 12, 30 at 10, the rest in [-6, 6]).
// Mid path (sampling_mid.cuh) modes: kTopKLarge: 20 < top_k <= 1024 with top-p/min-p; kPenaltiesAll:
// penalty/mask entries with every sampling setting (greedy, temperature, small/large top-k, top-p,
// min-p); kCoarse: logits on a 0.25 grid (many exact ties) with -inf entries, threshold settings;
// kFlat: rows of one to three distinct values (boundary bins past the candidate cap: slow fallback);
// kFlatTopP: the same rows with top-p alone (the boundary inside a tie group of ~1e5 ids).
enum class Mode {
  kGreedy, kTemperature, kTopK, kTopP, kMinP, kCombo, kPenalties, kForced, kTopKFast, kMixed, kTopKGrid, kTopKTies,
  kTopKLarge, kPenaltiesAll, kCoarse, kFlat, kFlatTopP
};
const char* mode_name(Mode m) {
  const char* names[] = {"greedy",    "temperature", "top_k",   "top_p",      "min_p",      "combo",
                         "penalties", "forced",      "top_k20", "mixed",      "top_k_grid", "top_k_ties",
                         "top_k_big", "pen_all",     "coarse",  "flat",       "flat_top_p"};
  return names[static_cast<int>(m)];
}

class SampleTest : public CudaOpsTest {
 protected:
  float unif(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
  template <typename T>
  T one_of(std::initializer_list<T> xs) { return xs.begin()[rand_int(0, static_cast<int>(xs.size()) - 1)]; }

  SamplingRow random_row(Mode mode, int vocab, int r) {
    if (mode == Mode::kMixed) mode = static_cast<Mode>(rand_int(0, 8));
    SamplingRow s;
    s.uniform = unif(0.0f, 1.0f);
    s.temperature = unif(0.3f, 1.5f);
    switch (mode) {
      case Mode::kGreedy: s.temperature = 0.0f; break;
      case Mode::kTemperature: break;
      case Mode::kTopK: s.top_k = one_of({1, 5, 50, 1000, vocab - 1}); break;
      case Mode::kTopP: s.top_p = one_of({0.1f, 0.5f, 0.9f, 0.99f}); break;
      case Mode::kMinP: s.min_p = one_of({0.01f, 0.1f, 0.5f}); break;
      case Mode::kCombo:
        s.top_k = one_of({5, 50, 1000});
        s.top_p = one_of({0.5f, 0.9f});
        s.min_p = one_of({0.0f, 0.05f});
        break;
      case Mode::kPenalties:
        if (rand_int(0, 2) == 0) s.temperature = 0.0f;
        if (rand_int(0, 1)) s.top_k = 50;
        s.repetition_penalty = one_of({1.0f, 1.3f, 0.8f});
        s.presence_penalty = one_of({0.0f, 0.5f});
        s.frequency_penalty = one_of({0.0f, 0.3f});
        break;
      case Mode::kForced: s.forced_token = rand_int(0, vocab - 1); break;
      case Mode::kTopKFast:
      case Mode::kTopKTies:
        s.top_k = one_of({1, 5, 20});
        s.top_p = one_of({1.0f, 0.95f, 0.5f});
        s.min_p = one_of({0.0f, 0.05f});
        s.temperature = one_of({0.6f, 1.0f, 1.5f});
        break;
      case Mode::kTopKLarge:
        s.top_k = one_of({21, 64, 256, 1024});
        s.top_p = one_of({1.0f, 0.9f, 0.5f});
        s.min_p = one_of({0.0f, 0.05f});
        s.temperature = one_of({0.6f, 1.0f, 1.5f});
        break;
      case Mode::kFlatTopP:
        s.top_p = one_of({0.5f, 0.9f, 0.99f});
        s.temperature = one_of({0.6f, unif(0.3f, 1.5f)});
        break;
      case Mode::kPenaltiesAll:
      case Mode::kCoarse:
      case Mode::kFlat: {
        const int g = rand_int(0, mode == Mode::kPenaltiesAll ? 8 : 6);
        if (g == 0) s.top_p = one_of({0.9f, 0.5f, 0.99f});
        if (g == 1) s.top_k = one_of({50, 1024}), s.top_p = one_of({1.0f, 0.9f});
        if (g == 2) s.min_p = one_of({0.05f, 0.3f});
        if (g == 3) s.top_k = one_of({5, 20}), s.top_p = 0.9f;
        if (g == 4) s.top_k = 64, s.top_p = 0.8f, s.min_p = 0.02f;
        if (g == 5) s.top_p = 0.9f, s.temperature = 0.6f;  // Llama-3 defaults
        if (g == 6) s.top_k = one_of({21, 300}), s.temperature = one_of({0.05f, 2.0f});
        if (g == 7) s.temperature = 0.0f;
        // g == 8: plain temperature
        if (mode == Mode::kPenaltiesAll) {
          s.repetition_penalty = one_of({1.0f, 1.3f, 0.8f});
          s.presence_penalty = one_of({0.0f, 0.5f});
          s.frequency_penalty = one_of({0.0f, 0.3f});
        }
        break;
      }
      case Mode::kTopKGrid: {
        const int ks[] = {1, 5, 20};
        const float ps[] = {1.0f, 0.95f, 0.5f}, mps[] = {0.0f, 0.05f}, ts[] = {0.6f, 1.0f, 1.5f};
        const int g = r % 54;
        s.top_k = ks[g % 3], s.top_p = ps[g / 3 % 3], s.min_p = mps[g / 9 % 2], s.temperature = ts[g / 18];
        break;
      }
      default: break;
    }
    return s;
  }

  // Whether `token` is a sound draw for row s (see the header comment); `why` says what failed.
  static bool valid_draw(std::span<const float> raw, const SamplingRow& s, std::span<const int32_t> rp,
                         std::span<const int32_t> rm, int token, std::string& why) {
    constexpr double kTol = 1e-5;
    const int vocab = static_cast<int>(raw.size());
    if (token < 0 || token >= vocab) {
      why = "token out of range";
      return false;
    }
    std::vector<float> use(raw.begin(), raw.end());
    if (!rp.empty() || !rm.empty()) cpu::apply_penalties(use, s, rp, rm);
    auto check = [&](const SamplingRow& t, const char* variant) {
      const std::vector<float> probs = cpu::sampling_probs(use, t);
      double before = 0.0;
      for (int i = 0; i < token; ++i) before += probs[i];
      const double after = before + probs[token];
      const bool ok = probs[token] > 0.0f && before - kTol <= double(s.uniform) && double(s.uniform) < after + kTol;
      if (!ok && why.empty()) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "%s: p[t] %.3g, cdf before %.9f, after %.9f", variant, double(probs[token]),
                      before, after);
        why = buf;
      }
      return ok;
    };
    if (check(s, "exact")) return true;
    std::vector<std::pair<SamplingRow, const char*>> variants;
    SamplingRow t = s;
    if (s.top_p < 1.0f) {
      t.top_p = s.top_p - 1e-5f, variants.push_back({t, "top_p - 1e-5"});
      t.top_p = std::min(0.999999f, s.top_p + 1e-5f), variants.push_back({t, "top_p + 1e-5"});
      t = s;
    }
    if (s.min_p > 0.0f) {
      t.min_p = s.min_p * (1 - 1e-4f), variants.push_back({t, "min_p * (1 - 1e-4)"});
      t.min_p = s.min_p * (1 + 1e-4f), variants.push_back({t, "min_p * (1 + 1e-4)"});
      t = s;
    }
    if (s.top_k > 0 && s.top_k < vocab) t.top_k = s.top_k + 1, variants.push_back({t, "top_k + 1"});
    for (auto& [v, name] : variants)
      if (check(v, name)) return true;
    return false;
  }

  // The logits' RangeStats over `ranges` ranges (cpu::range_stats), on the GPU as [M, C, 4] F32.
  Tensor gpu_range_stats(const std::vector<float>& logits, int vocab, int m, int ranges) {
    std::vector<RangeStats> st(size_t(m) * ranges);
    for (int r = 0; r < m; ++r) cpu::range_stats(&logits[size_t(r) * vocab], vocab, ranges, &st[size_t(r) * ranges]);
    std::vector<int> words(st.size() * 4);
    std::memcpy(words.data(), st.data(), words.size() * sizeof(int));
    const Tensor t = gpu_i32(words, {int64_t(words.size())});
    return Tensor(t.data, DType::kF32, {m, ranges, 4}, t.device);
  }

  // One batch: M rows of `mode` over V logits of dtype dt, N top logprobs. host_rows: hand the op the
  // host copy of the rows (the CUDA backend then skips kernels no row needs). stats_ranges > 0: drawn
  // rows get temperature 1 and the op gets the logits' RangeStats over that many ranges (host rows on).
  void run_case(int vocab, int m, DType dt, int n, Mode mode, bool host_rows = false, int stats_ranges = 0) {
    SCOPED_TRACE(std::string(mode_name(mode)) + " V " + std::to_string(vocab) + " M " + std::to_string(m) + " " +
                 std::string(dtype_name(dt)) + " N " + std::to_string(n) + (host_rows ? " host rows" : "") +
                 " seed " + std::to_string(seed_));
    std::vector<float> logits = rand_vec(size_t(m) * vocab, -6.0f, 6.0f, dt);
    std::vector<SamplingRow> rows(m);
    std::vector<int> pairs, masks;
    for (int r = 0; r < m; ++r) {
      float* row = &logits[size_t(r) * vocab];
      if (mode == Mode::kTopKTies) {
        // Distinct ids spread over the row: 3 at 12, then up to 30 at 10.
        std::vector<int> ids;
        while (int(ids.size()) < std::min(33, vocab)) {
          const int id = rand_int(0, vocab - 1);
          if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
        }
        for (size_t i = 0; i < ids.size(); ++i) row[ids[i]] = i < 3 ? 12.0f : 10.0f;
      } else if (mode == Mode::kFlat || mode == Mode::kFlatTopP) {
        // One to three distinct values over the whole row (a huge boundary bin), sometimes a winner.
        const int kinds = rand_int(1, 3);
        const float vals[3] = {round_to(dt, unif(-2.0f, 2.0f)), round_to(dt, unif(-2.0f, 2.0f)), 1.0f};
        for (int i = 0; i < vocab; ++i) row[i] = vals[rand_int(0, kinds - 1)];
        if (rand_int(0, 1)) row[rand_int(0, vocab - 1)] = 5.0f;
      } else if (rand_int(0, 1)) {  // a peaked row: a few clear winners, so top-p supports are small
        for (int i = 0; i < 4; ++i) row[rand_int(0, vocab - 1)] = round_to(dt, unif(8.0f, 14.0f));
      }
      if (mode == Mode::kCoarse || mode == Mode::kPenaltiesAll) {
        if (mode == Mode::kCoarse)
          for (int i = 0; i < vocab; ++i) row[i] = std::round(row[i] * 4.0f) / 4.0f;  // exact in bf16
        const int num_inf = rand_int(0, std::max(1, vocab / 50));
        for (int i = 0; i < num_inf; ++i) row[rand_int(0, vocab - 1)] = -std::numeric_limits<float>::infinity();
      }
      rows[r] = random_row(mode, vocab, r);
      if (mode == Mode::kPenalties || mode == Mode::kPenaltiesAll || (mode == Mode::kMixed && rand_int(0, 3) == 0)) {
        const int best = cpu::argmax(std::span<const float>(row, vocab));
        std::vector<int> ids{best};
        while (ids.size() < 40 && int(ids.size()) < vocab / 2) {
          const int id = rand_int(0, vocab - 1);
          if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
        }
        rows[r].penalty_begin = static_cast<int>(pairs.size() / 2);
        for (int id : ids) pairs.push_back(id), pairs.push_back(rand_int(0, 3));
        rows[r].penalty_end = static_cast<int>(pairs.size() / 2);
        rows[r].mask_begin = static_cast<int>(masks.size());
        if (rand_int(0, 1)) masks.push_back(ids[1 % ids.size()]), masks.push_back(rand_int(0, vocab - 1));
        rows[r].mask_end = static_cast<int>(masks.size());
      }
    }
    if (stats_ranges > 0) {
      host_rows = true;
      for (SamplingRow& s : rows)
        if (s.temperature >= 1e-5f) s.temperature = 1.0f;
    }
    std::vector<int> words(size_t(m) * 14);
    std::memcpy(words.data(), rows.data(), rows.size() * sizeof(SamplingRow));
    const int e = static_cast<int>(pairs.size() / 2);

    // GPU
    Tensor g_tokens = gpu_i32(std::vector<int>(m, -7), {m});
    Tensor g_ids = n ? gpu_i32(std::vector<int>(size_t(m) * n, -7), {m, n}) : Tensor();
    Tensor g_lps = gpu_poisoned({m, 1 + n}, DType::kF32);
    SampleParams gp{gpu_from(logits, {m, vocab}, dt), gpu_i32(words, {m * 14}), e ? gpu_i32(pairs, {e, 2}) : Tensor(),
                    masks.empty() ? Tensor() : gpu_i32(masks, {int64_t(masks.size())}), n, g_tokens, g_lps, g_ids};
    gp.out_ranks = gpu_i32(std::vector<int>(m, -7), {m});
    if (host_rows) gp.host_rows = rows.data();
    if (stats_ranges > 0) gp.row_stats = gpu_range_stats(logits, vocab, m, stats_ranges);
    gpu_->sample(gp);
    // CPU
    std::vector<int> c_tokens(m, -7), c_ids(size_t(m) * n, -7);
    Tensor c_lps = cpu_poisoned({m, 1 + n});
    SampleParams cp{cpu_f32(logits, {m, vocab}), cpu_i32(words, {m * 14}), e ? cpu_i32(pairs, {e, 2}) : Tensor(),
                    masks.empty() ? Tensor() : cpu_i32(masks, {int64_t(masks.size())}), n,
                    Tensor(c_tokens.data(), DType::kI32, {m}), c_lps,
                    n ? Tensor(c_ids.data(), DType::kI32, {m, n}) : Tensor()};
    std::vector<int> c_ranks(m, -7);
    cp.out_ranks = Tensor(c_ranks.data(), DType::kI32, {m});
    cpu_->sample(cp);

    std::vector<int> tokens(m), ids(size_t(m) * n);
    gpu_->copy_to_host(g_tokens, tokens.data());
    if (n) gpu_->copy_to_host(g_ids, ids.data());
    EXPECT_EQ(ids, c_ids) << "top-N ids";
    // Ranks (vLLM's count of ids at least as likely) of each side's own token, counted here.
    std::vector<int> ranks(m);
    gpu_->copy_to_host(gp.out_ranks, ranks.data());
    auto rank_of = [&](int r, int t) {
      const float* row = &logits[size_t(r) * vocab];
      return t < 0 || t >= vocab ? -1 : int(std::count_if(row, row + vocab, [&](float x) { return x >= row[t]; }));
    };
    for (int r = 0; r < m; ++r) {
      EXPECT_EQ(ranks[r], rank_of(r, tokens[r])) << "GPU rank, row " << r;
      EXPECT_EQ(c_ranks[r], rank_of(r, c_tokens[r])) << "CPU rank, row " << r;
    }
    int sampled = 0, agree = 0;
    std::vector<float> want_lps = to_host(c_lps), got_lps = to_host(g_lps);
    for (int r = 0; r < m; ++r) {
      const SamplingRow& s = rows[r];
      const bool drawn = s.forced_token < 0 && s.temperature >= 1e-5f;
      if (!drawn) {
        EXPECT_EQ(tokens[r], c_tokens[r]) << "row " << r;
        continue;
      }
      ++sampled;
      if (tokens[r] == c_tokens[r]) {
        ++agree;
        continue;
      }
      std::span<const float> raw(&logits[size_t(r) * vocab], vocab);
      std::span<const int32_t> rp(pairs.data() + 2 * s.penalty_begin, 2 * (s.penalty_end - s.penalty_begin));
      std::span<const int32_t> rm(masks.data() + s.mask_begin, s.mask_end - s.mask_begin);
      const int t = tokens[r];
      std::string why;
      if (mode == Mode::kTopKTies && t >= 0 && t < vocab) {
        // Ties at the boundary: the kept set is the lowest ids among the ties, no tolerance variants.
        EXPECT_GT(cpu::sampling_probs(raw, s)[t], 0.0f)
            << "row " << r << ": GPU token " << t << " (logit " << raw[t] << ") outside the exact support, top_k "
            << s.top_k << ", top_p " << s.top_p << ", min_p " << s.min_p << ", T " << s.temperature;
      }
      EXPECT_TRUE(valid_draw(raw, s, rp, rm, t, why))
          << "row " << r << ": GPU token " << t << ", CPU token " << c_tokens[r] << ", u " << s.uniform << ", T "
          << s.temperature << ", top_k " << s.top_k << ", top_p " << s.top_p << ", min_p " << s.min_p << ": " << why;
      // The GPU's token's raw logprob is its own.
      if (t >= 0 && t < vocab) want_lps[size_t(r) * (1 + n)] = raw[t] - cpu::log_sum_exp(raw);
    }
    if (sampled)
      std::printf("[sample] %-11s V %6d M %3d %-4s N %2d: GPU token == CPU token on %d of %d sampled rows\n",
                  mode_name(mode), vocab, m, std::string(dtype_name(dt)).c_str(), n, agree, sampled);
    expect_close(got_lps, want_lps, {1e-4f, 1e-5f}, "logprobs");
  }
};

TEST_F(SampleTest, AllModesAgainstCpu) {
  use_dtype(DType::kBF16);
  const Mode modes[] = {Mode::kGreedy, Mode::kTemperature, Mode::kTopK,      Mode::kTopP,  Mode::kMinP,
                        Mode::kCombo,  Mode::kPenalties,   Mode::kForced,    Mode::kMixed};
  const int ns[] = {0, 1, 5, 20};
  int k = 0;
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int vocab : {151936, 1000})
      for (int m : {1, 3, 64})
        for (Mode mode : modes) run_case(vocab, m, dt, ns[k++ % 4], mode);
}

// Large batches: rows run in parallel, scratch for penalised rows is M x V.
TEST_F(SampleTest, LargeBatches) {
  use_dtype(DType::kBF16);
  run_case(151936, 256, DType::kBF16, 5, Mode::kMixed);
  run_case(151936, 256, DType::kBF16, 0, Mode::kGreedy);
  run_case(1000, 256, DType::kF32, 20, Mode::kMixed);
  run_case(1000, 256, DType::kBF16, 1, Mode::kPenalties);
}

// Odd vocabulary sizes: rows not 16-byte aligned (scalar loads) and tails shorter than a segment.
TEST_F(SampleTest, UnalignedVocab) {
  use_dtype(DType::kBF16);
  for (int vocab : {1001, 37, 20}) {
    run_case(vocab, 5, DType::kBF16, 5, Mode::kMixed);
    run_case(vocab, 5, DType::kF32, 20, Mode::kMixed);
  }
}

// The multi-block fast path (greedy, plain temperature, forced rows): vocabularies that end in a
// partial chunk (down to one id: chunk top lists with sentinels), odd sizes (2-byte aligned rows),
// and batches past ~2048 chunk blocks (8192-id chunks), alone and mixed with slow-path rows.
TEST_F(SampleTest, FastPathChunks) {
  use_dtype(DType::kBF16);
  for (int vocab : {2048, 2049, 4097, 6148, 151937}) {
    run_case(vocab, 3, DType::kBF16, 20, Mode::kTemperature);
    run_case(vocab, 3, DType::kF32, 1, Mode::kGreedy);
    run_case(vocab, 40, DType::kBF16, 5, Mode::kTemperature);
    run_case(vocab, 40, DType::kF32, 20, Mode::kMixed);
    run_case(vocab, 40, DType::kBF16, 0, Mode::kForced);
  }
}

// The fast path's top-k rows (1 <= top_k <= 20 with any top-p/min-p/temperature): every combination
// of top_k {1, 5, 20} x top_p {1, 0.95, 0.5} x min_p {0, 0.05} x T {0.6, 1, 1.5} (grid), random ones,
// alone and mixed with slow-path rows, peaked and flat rows, N = 0 (1-lists for the other rows) to 20,
// small and 8192-id chunks, odd vocabularies.
TEST_F(SampleTest, TopKFastPath) {
  use_dtype(DType::kBF16);
  const int ns[] = {0, 5, 20, 1};
  int k = 0;
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int vocab : {151936, 1000, 2049})
      for (int m : {1, 3, 64}) {
        run_case(vocab, m, dt, ns[k++ % 4], Mode::kTopKFast);
        run_case(vocab, m, dt, ns[k++ % 4], Mode::kMixed);
      }
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int n : {0, 5, 20}) run_case(151936, 54, dt, n, Mode::kTopKGrid);
  run_case(151936, 256, DType::kBF16, 0, Mode::kTopKFast);
  run_case(151936, 256, DType::kBF16, 20, Mode::kTopKGrid);
  run_case(151936, 256, DType::kF32, 5, Mode::kMixed);
  run_case(151936, 256, DType::kBF16, 0, Mode::kMixed);
  for (int vocab : {21, 37, 1001}) {
    run_case(vocab, 5, DType::kBF16, 20, Mode::kTopKFast);
    run_case(vocab, 5, DType::kF32, 0, Mode::kMixed);
  }
}

// Ties at the k-th value and at the top-p boundary: the kept set is the lowest ids among the ties
// (the CPU's order "value desc, id asc"); the drawn token must be in the CPU's exact support.
TEST_F(SampleTest, TopKFastPathTies) {
  use_dtype(DType::kBF16);
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int m : {1, 3, 64, 256})
      for (int n : {0, 20}) run_case(m == 256 ? 151936 : (m == 64 ? 4097 : 151936), m, dt, n, Mode::kTopKTies);
  run_case(1000, 64, DType::kBF16, 5, Mode::kTopKTies);
}

// The mid path (sampling_mid.cuh: multi-block threshold searches, penalties as an overlay): top-p
// without top-k, top-k up to 1024, min-p alone, penalties/masks with every setting, exact ties and
// -inf entries, flat rows (candidate overflow -> slow fallback), with and without the host copy of
// the rows, small and 8192-id chunks, odd vocabularies.
TEST_F(SampleTest, MidPathAgainstCpu) {
  use_dtype(DType::kBF16);
  const Mode modes[] = {Mode::kTopP,    Mode::kTopKLarge, Mode::kPenaltiesAll, Mode::kCoarse,
                        Mode::kMinP,    Mode::kCombo,     Mode::kFlat,         Mode::kMixed};
  const int ns[] = {0, 5, 20, 1};
  int k = 0;
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int vocab : {151936, 1000, 4097})
      for (int m : {1, 3, 40})
        for (Mode mode : modes) {
          run_case(vocab, m, dt, ns[k % 4], mode, k % 2 == 1);
          ++k;
        }
  for (Mode mode : {Mode::kTopP, Mode::kTopKLarge, Mode::kPenaltiesAll, Mode::kCoarse}) {
    run_case(151936, 256, DType::kBF16, ns[k++ % 4], mode, true);
    run_case(151936, 256, DType::kF32, ns[k++ % 4], mode, false);
  }
  for (int vocab : {21, 37, 1001, 2049}) {
    run_case(vocab, 5, DType::kBF16, 5, Mode::kPenaltiesAll, true);
    run_case(vocab, 5, DType::kF32, 0, Mode::kTopKLarge, false);
    run_case(vocab, 5, DType::kF32, 20, Mode::kCoarse, true);
  }
}

// Flat rows (one to three distinct values, sometimes a winner) with top-p alone: the top-p boundary
// lies inside a tie group of up to ~150k ids, so its position rests on the masses being exact (the
// first device run drew 12 of 80 such rows up to ~60 ids off when the slow path summed masses in
// float). Fixed seeds; V 151936 (slow fallback: boundary bin past the candidate cap) and small
// vocabularies (mid path).
TEST_F(SampleTest, FlatRowsTopP) {
  use_dtype(DType::kBF16);
  unsigned seed = 532032494u;
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int vocab : {151936, 4097, 1000}) {
      seed_ = seed++;
      rng_.seed(seed_);
      run_case(vocab, vocab == 151936 ? 64 : 40, dt, vocab == 1000 ? 5 : 0, Mode::kFlatTopP, vocab == 4097);
    }
}

// Fast-path batches with the host copy of the rows (no mid kernels launched) and mixed batches where
// the copy says a mid row exists.
TEST_F(SampleTest, HostRowsHint) {
  use_dtype(DType::kBF16);
  for (Mode mode : {Mode::kGreedy, Mode::kTemperature, Mode::kTopKFast, Mode::kForced, Mode::kMixed, Mode::kPenalties})
    for (int m : {1, 64}) run_case(151936, m, DType::kBF16, 5, mode, true);
}

// Batches whose host copy shows only forced, greedy and plain temperature rows take the kPlain kernels
// (only the fast path's code): every list size and both logits dtypes the engine uses.
TEST_F(SampleTest, HostRowsPlainKernels) {
  use_dtype(DType::kBF16);
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int n : {0, 1, 20})
      for (Mode mode : {Mode::kGreedy, Mode::kTemperature, Mode::kForced})
        for (int m : {1, 64}) run_case(151936, m, dt, n, mode, true);
}

// Plain batches with N <= 1 merge in lean_sample_kernel: vocabularies ending mid-chunk, rows that are not
// 16-byte aligned (scalar loads: V 32003), and both chunk sizes (M = 64 at V 151936: 8192-id chunks).
TEST_F(SampleTest, HostRowsLeanMerge) {
  use_dtype(DType::kBF16);
  for (int vocab : {1000, 32003, 151936})
    for (DType dt : {DType::kF32, DType::kBF16})
      for (int n : {0, 1})
        for (Mode mode : {Mode::kGreedy, Mode::kTemperature, Mode::kForced})
          for (int m : {1, 3, 64}) run_case(vocab, m, dt, n, mode, true);
}

// Plain temperature-1 / greedy / forced batches with N <= 1 and the logits' RangeStats take
// stats_sample_kernel (no chunk pass): the lm_head's C (1,056 on an H200: ~144-id ranges), ranges of
// one id, of 1,024 ids (the longest one block scans) and of more (the chunk path instead), vocabularies
// that split unevenly, rows that are not 16-byte aligned, batches past one row.
TEST_F(SampleTest, RangeStatsMerge) {
  use_dtype(DType::kBF16);
  for (int vocab : {1000, 32003, 151936})
    for (DType dt : {DType::kF32, DType::kBF16})
      for (int n : {0, 1})
        for (Mode mode : {Mode::kGreedy, Mode::kTemperature, Mode::kForced})
          for (int m : {1, 3}) run_case(vocab, m, dt, n, mode, true, 1056);
  for (int ranges : {1000, 149, 150, 7})  // V 1,000: one id a range; V 151,936: 1,020, 1,013 ids, 21,705 (chunk path)
    run_case(ranges == 1000 ? 1000 : 151936, 2, DType::kBF16, 1, Mode::kTemperature, true, ranges);
}

// The statistics are read only where they apply: doctored statistics (a range claiming id 7 as its
// maximum at 100) decide a greedy row with N <= 1, and nothing else (N = 5, a temperature 0.7 row in the
// batch, no host rows).
TEST_F(SampleTest, RangeStatsOnlyWhenApplicable) {
  use_dtype(DType::kBF16);
  const int vocab = 1000, ranges = 10;
  std::vector<float> logits = rand_vec(2 * vocab, -6.0f, 6.0f, DType::kBF16);
  for (int r = 0; r < 2; ++r) logits[size_t(r) * vocab + 7] = -6.0f;  // id 7 is never the argmax
  std::vector<RangeStats> st(2 * ranges);
  for (int r = 0; r < 2; ++r) cpu::range_stats(&logits[size_t(r) * vocab], vocab, ranges, &st[size_t(r) * ranges]);
  for (int r = 0; r < 2; ++r) st[size_t(r) * ranges] = RangeStats{100.0f, 1.0f, 100.0f, 7};
  std::vector<int> words(st.size() * 4);
  std::memcpy(words.data(), st.data(), words.size() * sizeof(int));
  const Tensor st_i = gpu_i32(words, {int64_t(words.size())});
  const Tensor stats(st_i.data, DType::kF32, {2, ranges, 4}, st_i.device);
  const Tensor g_logits = gpu_from(logits, {2, vocab}, DType::kBF16);
  auto run = [&](SamplingRow second, int n, bool host) {
    std::vector<SamplingRow> rows(2);
    rows[0].temperature = 0.0f;
    rows[1] = second;
    std::vector<int> rw(2 * 14);
    std::memcpy(rw.data(), rows.data(), sizeof(SamplingRow) * 2);
    Tensor tokens = gpu_i32({-7, -7}, {2});
    SampleParams p{g_logits, gpu_i32(rw, {28}), Tensor(), Tensor(), n, tokens, gpu_poisoned({2, 1 + n}, DType::kF32),
                   n ? gpu_i32(std::vector<int>(2 * n, -7), {2, n}) : Tensor()};
    if (host) p.host_rows = rows.data();
    p.row_stats = stats;
    gpu_->sample(p);
    std::vector<int> got(2);
    gpu_->copy_to_host(tokens, got.data());
    return got[0];
  };
  SamplingRow greedy, warm;
  greedy.temperature = 0.0f;
  warm.temperature = 0.7f;
  warm.uniform = 0.5f;
  EXPECT_EQ(run(greedy, 1, true), 7) << "applicable: the statistics decide";
  EXPECT_EQ(run(greedy, 0, true), 7) << "applicable: the statistics decide";
  const int argmax = cpu::argmax(std::span<const float>(logits.data(), vocab));
  EXPECT_EQ(run(greedy, 5, true), argmax) << "N = 5: the chunk path";
  EXPECT_EQ(run(warm, 1, true), argmax) << "a temperature 0.7 row: the chunk path";
  EXPECT_EQ(run(greedy, 1, false), argmax) << "no host rows: the chunk path";
}

}  // namespace
}  // namespace vireo::testing

namespace vireo::testing {
namespace {

// add_logit_bias on the GPU vs the CPU op: every element of the logits afterwards (rows and ids
// at the edges, a few hundred entries, entries outside the logits skipped on the device).
class LogitBiasTest : public CudaOpsTest {};

TEST_F(LogitBiasTest, MatchesCpu) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    use_dtype(dt);  // creates gpu_
    const int64_t m = 5, vocab = 1003;
    auto logits = rand_vec(size_t(m * vocab), -8.f, 8.f, dt);
    std::vector<int32_t> entries;
    std::mt19937 rng(11);
    for (int64_t r = 0; r < m; ++r)
      for (int32_t t : {0, 1, 17, 500, 1002, int32_t(rng() % vocab)}) {
        if (t == 17 && r == 2) continue;
        float b = float(int(rng() % 401) - 200) / 2.f;  // [-100, 100]
        int32_t bits;
        std::memcpy(&bits, &b, 4);
        entries.insert(entries.end(), {int32_t(r), t, bits});
      }
    // Distinct (row, token): drop repeats of the random id.
    std::vector<int32_t> uniq;
    for (size_t i = 0; i < entries.size(); i += 3) {
      bool dup = false;
      for (size_t j = 0; j < uniq.size(); j += 3) dup |= uniq[j] == entries[i] && uniq[j + 1] == entries[i + 1];
      if (!dup) uniq.insert(uniq.end(), entries.begin() + i, entries.begin() + i + 3);
    }
    const int64_t e = int64_t(uniq.size() / 3);
    std::vector<float> want = logits;
    cpu_->add_logit_bias({Tensor(want.data(), DType::kF32, {m, vocab}), Tensor(uniq.data(), DType::kI32, {e, 3})});
    for (auto& x : want) x = round_to(dt, x);
    Tensor g = gpu_from(logits, {m, vocab}, dt);
    std::vector<int32_t> with_bad = uniq;
    with_bad.insert(with_bad.end(), {int32_t(m), 3, 0, 1, int32_t(vocab), 0, -1, 2, 0});  // skipped
    Tensor ge = gpu_own(gpu_->alloc({int64_t(with_bad.size() / 3), 3}, DType::kI32));
    gpu_->copy_from_host(with_bad.data(), ge);
    gpu_->add_logit_bias({g, ge});
    expect_close(to_host(g), want, tol_for(dt), "logit bias");
  }
}

}  // namespace
}  // namespace vireo::testing

namespace vireo::testing {
namespace {

// Structured outputs: apply_token_bitmask on the GPU vs the CPU op, every element (masked ones must be
// -inf on both sides, the others unchanged), over words that are full, empty and random, rows with and
// without a mask, a vocabulary that is and one that is not a multiple of 32. Then the whole
// sample_on_backend path with masks: greedy rows pick the CPU's token, sampled rows an allowed one.
class TokenBitmaskTest : public CudaOpsTest {
 protected:
  std::vector<uint32_t> random_mask(int64_t groups, int64_t words) {
    std::vector<uint32_t> bits(groups * words);
    for (auto& w : bits) {
      const int kind = rand_int(0, 3);
      w = kind == 0 ? 0u : kind == 1 ? ~0u : static_cast<uint32_t>(rng_());
    }
    return bits;
  }
};

TEST_F(TokenBitmaskTest, MatchesCpu) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t vocab : {int64_t(1003), int64_t(151936)}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " vocab " + std::to_string(vocab));
      use_dtype(dt);
      const int64_t m = 6, words = (vocab + 31) / 32;
      std::vector<int32_t> rows{0, 2, 5};
      const int64_t g = static_cast<int64_t>(rows.size());
      auto logits = rand_vec(size_t(m * vocab), -8.f, 8.f, dt);
      auto bits = random_mask(g, words);
      std::vector<float> want = logits;
      std::vector<int32_t> bits_i32(bits.begin(), bits.end());
      cpu_->apply_token_bitmask({Tensor(want.data(), DType::kF32, {m, vocab}), Tensor(rows.data(), DType::kI32, {g}),
                                 Tensor(bits_i32.data(), DType::kI32, {g, words})});
      Tensor gl = gpu_from(logits, {m, vocab}, dt);
      Tensor gr = gpu_own(gpu_->alloc({g}, DType::kI32));
      gpu_->copy_from_host(rows.data(), gr);
      Tensor gb = gpu_own(gpu_->alloc({g, words}, DType::kI32));
      gpu_->copy_from_host(bits_i32.data(), gb);
      gpu_->apply_token_bitmask({gl, gr, gb});
      const auto got = to_host(gl);
      int64_t bad = 0, masked = 0;
      for (int64_t i = 0; i < m * vocab; ++i) {
        masked += std::isinf(want[i]);
        const bool same = std::isinf(want[i]) ? (std::isinf(got[i]) && got[i] < 0) : got[i] == want[i];
        if (!same && bad++ < 5) ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << want[i];
      }
      EXPECT_EQ(bad, 0);
      EXPECT_GT(masked, 0);
    }
}

TEST_F(TokenBitmaskTest, SampleOnBackendPicksAllowedTokens) {
  use_dtype(DType::kBF16);
  const int64_t m = 8, vocab = 151936, words = (vocab + 31) / 32;
  auto logits = rand_vec(size_t(m * vocab), -8.f, 8.f, DType::kBF16);
  SamplingBatch b;
  b.rows.resize(m);
  for (int64_t r = 0; r < m; ++r) {
    b.rows[r].temperature = r % 2 ? 0.8f : 0.0f;
    b.rows[r].uniform = std::uniform_real_distribution<float>(0.f, 1.f)(rng_);
    if (r == 3) b.rows[r].top_k = 5;
  }
  b.num_top_logprobs = 2;
  b.bitmask_rows = {1, 2, 3, 6};
  b.token_bitmask.assign(b.bitmask_rows.size() * words, 0u);
  std::vector<std::vector<int32_t>> allowed(m);
  for (size_t gi = 0; gi < b.bitmask_rows.size(); ++gi) {
    const int n = gi == 0 ? 1 : gi == 1 ? 40 : 3000;  // one id, a few, many
    for (int i = 0; i < n; ++i) {
      const int32_t t = rand_int(0, int(vocab) - 1);
      allowed[b.bitmask_rows[gi]].push_back(t);
      b.token_bitmask[gi * words + t / 32] |= 1u << (t % 32);
    }
  }
  Tensor gl = gpu_from(logits, {m, vocab}, DType::kBF16);
  SampledRows got, want;
  SamplingWorkspace ws, cws;
  sample_on_backend(*gpu_, gl, b, got, ws);
  free_sampling_workspace(*gpu_, ws);
  std::vector<float> host = logits;
  sample_on_backend(*cpu_, Tensor(host.data(), DType::kF32, {m, vocab}), b, want, cws);
  for (int64_t r = 0; r < m; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    const int32_t t = got.tokens[r];
    if (!allowed[r].empty())
      EXPECT_NE(std::find(allowed[r].begin(), allowed[r].end(), t), allowed[r].end());
    if (b.rows[r].temperature == 0.0f) EXPECT_EQ(t, want.tokens[r]);
    EXPECT_TRUE(std::isfinite(got.logprobs[r * 3]));
  }
}

}  // namespace
}  // namespace vireo::testing
