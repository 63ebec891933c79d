// paged_attention vs the CPU backend: decode at lengths 1..32k (split-K), GQA 1..16, head dims 64 and
// 128 (tensor-core path) and 96 / F32 (simple path), prefill, chunked prefill over a cached prefix,
// mixed batches, scattered block tables, lengths off the 16-token grid, missing host hints; head dims
// 96 / 192 / 256 through the CUDA-core flash-decoding kernel (attention_decode_wide.cu, the Wide* tests);
// sliding windows (the wide kernel, and the simple kernel under VIREO_WINDOW_WIDE=0); attention sinks
// (GPT-OSS: the wide kernel, the simple kernel, batch-invariant mode); FP8 E4M3 caches (--kv-cache-dtype
// fp8: the mma.sync kernels' decode and prefill shapes, the plain kernel elsewhere), the CPU reading the
// same codes.
#include <cstdlib>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

struct Seq {
  int q_len, kv_len;
};

struct AttnCase {
  std::vector<Seq> seqs;
  int h, hkv, d;
  bool scatter = true;
  bool hints = true;
  int block_size = 16;
  int prefill_m_tiles = 0;  // 0: through the backend; 1 or 2: that prefill kernel shape, launched directly
  int hint_kv = 0;          // > 0: max_seq_len hint (may be smaller or larger than the real contexts)
  int graph = 0;  // 1: eager warm-up, then capture + 3 replays on the backend stream (in-kernel split merge);
                  // 2: capture first on a fresh stream (no split counters yet: the merge kernel is captured)
  int decode_cluster = -1;  // AttentionTuning::decode_cluster: 0 keeps small decode batches on the split kernel
  bool wide = false;        // launch_paged_attention_decode_wide directly (any head dim it takes, 64/128 too)
  int min_wide_splits = 0;  // > 0: the wide kernel's plan must have at least this many key splits (merge runs)
  bool list_prefill = false;  // give AttentionParams::prefill_seqs (the sequences with q_len > 1)
  int window = 0;             // AttentionParams::window (sliding-window layers)
  float softcap = 0.f;        // AttentionParams::softcap (Gemma 2)
  bool sinks = false;         // AttentionParams::sinks (GPT-OSS): random [H], a few above every score
  bool fp8_cache = false;     // F8_E4M3 caches (the CPU reference gets the codes' values)
};

class AttentionTest : public CudaOpsTest {
 protected:
  // The backend in batch-invariant mode (its paged_attention routes on its own).
  void use_invariant(DType act) {
    use_dtype(act);  // frees what the previous backend owned
    const char* name = act == DType::kBF16 ? "bfloat16" : act == DType::kF16 ? "float16" : "float32";
    gpu_ = create_backend("cuda", name, /*batch_invariant=*/true);
    ASSERT_TRUE(gpu_->batch_invariant());
  }

  // Graph capture of launch_paged_attention with the hint in p (as the decode graphs do), replayed 3
  // times with the output poisoned before each replay: the split counters must be left at zero.
  void attend_graph(const AttentionParams& p, int mode, const cuda::AttentionTuning& tuning) {
    cuda::DeviceInfo dev;
    cudaDeviceGetAttribute(&dev.num_sms, cudaDevAttrMultiProcessorCount, 0);
    cudaStream_t st = static_cast<cuda::CudaBackend*>(gpu_.get())->stream();
    cudaStream_t own = nullptr;
    if (mode == 2) {
      ASSERT_EQ(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), cudaSuccess);
      st = own;
    }
    const size_t ws_cap = size_t{64} << 20;  // allocated before the capture, never during it
    void* ws_ptr = gpu_own(gpu_->alloc({int64_t(ws_cap)}, DType::kU8)).data;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto ws = [&](size_t bytes) -> void* {
      EXPECT_LE(bytes, ws_cap) << "test workspace too small";
      return ws_ptr;
    };
    if (mode == 1) cuda::launch_paged_attention(p, ws, dev, st, tuning);  // warm-up: attributes, split counters
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed), cudaSuccess);
    cuda::launch_paged_attention(p, ws, dev, st, tuning);
    ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 3; ++rep) {
      // Mode 2: an eager launch between replays gives this stream its counters (in-kernel merge) while
      // the graph keeps its captured merge kernel; the compared output is the last replay's.
      if (mode == 2 && rep == 2) cuda::launch_paged_attention(p, ws, dev, st, tuning);
      ASSERT_EQ(cudaMemsetAsync(p.out.data, 0xff, p.out.nbytes(), st), cudaSuccess);  // NaN in bf16/f16
      ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    if (own) cudaStreamDestroy(own);
  }

  void attend(const AttentionParams& p, int prefill_m_tiles, int graph = 0, int decode_cluster = -1,
              bool wide = false) {
    if (wide) {
      cuda::DeviceInfo dev;
      cudaDeviceGetAttribute(&dev.num_sms, cudaDevAttrMultiProcessorCount, 0);
      auto ws = [&](size_t bytes) { return gpu_own(gpu_->alloc({int64_t(bytes)}, DType::kU8)).data; };
      cuda::launch_paged_attention_decode_wide(p, ws, dev, static_cast<cuda::CudaBackend*>(gpu_.get())->stream());
      return;
    }
    cuda::AttentionTuning tuning;
    tuning.decode_cluster = decode_cluster;
    if (graph != 0) {
      attend_graph(p, graph, tuning);
      return;
    }
    if (prefill_m_tiles == 0 && decode_cluster < 0) {
      gpu_->paged_attention(p);
      return;
    }
    cuda::DeviceInfo dev;
    cudaDeviceGetAttribute(&dev.num_sms, cudaDevAttrMultiProcessorCount, 0);
    if (prefill_m_tiles != 0) {
      tuning.prefill_m_tiles = prefill_m_tiles;
      tuning.prefill_wgmma = 0;  // the mma.sync shape asked for (the backend's default is the wgmma kernel)
    }
    auto ws = [&](size_t bytes) { return gpu_own(gpu_->alloc({int64_t(bytes)}, DType::kU8)).data; };
    cuda::launch_paged_attention(p, ws, dev, static_cast<cuda::CudaBackend*>(gpu_.get())->stream(), tuning);
  }

  void run(const AttnCase& c, DType act) {
    std::string desc = std::string(dtype_name(act)) + " H " + std::to_string(c.h) + " Hkv " + std::to_string(c.hkv) +
                       " D " + std::to_string(c.d) + " bs " + std::to_string(c.block_size) + " hint " +
                       std::to_string(c.hint_kv) + " graph " + std::to_string(c.graph) + " cluster " +
                       std::to_string(c.decode_cluster) + " wide " + std::to_string(c.wide) + " window " +
                       std::to_string(c.window) + " softcap " + std::to_string(c.softcap) + " sinks " +
                       std::to_string(c.sinks) + " fp8 " + std::to_string(c.fp8_cache) + " invariant " +
                       std::to_string(gpu_->batch_invariant()) + " seqs";
    for (auto& s : c.seqs) desc += " " + std::to_string(s.q_len) + "/" + std::to_string(s.kv_len);
    SCOPED_TRACE(desc);
    const int S = int(c.seqs.size()), bs = c.block_size;
    int total_blocks = 0, max_blocks = 1, T = 0, max_q = 0, max_kv = 0;
    std::vector<int> qs(S + 1, 0), lens(S);
    for (int s = 0; s < S; ++s) {
      const int nb = (c.seqs[s].kv_len + bs - 1) / bs;
      total_blocks += nb;
      max_blocks = std::max(max_blocks, nb + 1);  // one spare column: tables wider than needed
      qs[s + 1] = qs[s] + c.seqs[s].q_len;
      lens[s] = c.seqs[s].kv_len;
      max_q = std::max(max_q, c.seqs[s].q_len);
      max_kv = std::max(max_kv, c.seqs[s].kv_len);
    }
    T = qs[S];
    const int num_blocks = total_blocks + 3;
    std::vector<int> ids(num_blocks);
    for (int i = 0; i < num_blocks; ++i) ids[i] = i;
    if (c.scatter) std::shuffle(ids.begin(), ids.end(), rng_);
    std::vector<int> tables(size_t(S) * max_blocks, -1);  // unused entries: -1, never read
    int next = 0;
    for (int s = 0; s < S; ++s)
      for (int b = 0; b < (c.seqs[s].kv_len + bs - 1) / bs; ++b) tables[size_t(s) * max_blocks + b] = ids[next++];
    const int64_t cache_n = int64_t(num_blocks) * bs * c.hkv * c.d;
    auto kc = rand_vec(cache_n, -1.5f, 1.5f, act), vc = rand_vec(cache_n, -1, 1, act);
    auto q = rand_vec(size_t(T) * c.h * c.d, -1.5f, 1.5f, act);
    std::vector<int64_t> cache_shape{num_blocks, bs, c.hkv, c.d};

    AttentionParams g;
    g.q = gpu_from(q, {T, c.h, c.d}, act);
    g.k_cache = c.fp8_cache ? gpu_fp8(kc, cache_shape) : gpu_from(kc, cache_shape, act);
    g.v_cache = c.fp8_cache ? gpu_fp8(vc, cache_shape) : gpu_from(vc, cache_shape, act);
    g.out = gpu_poisoned({T, c.h, c.d}, act);
    g.query_start = gpu_i32(qs, {S + 1});
    g.seq_lens = gpu_i32(lens, {S});
    g.block_tables = gpu_i32(tables, {S, max_blocks});
    g.num_seqs = S;
    g.max_blocks_per_seq = max_blocks;
    g.block_size = bs;
    g.num_heads = c.h;
    g.num_kv_heads = c.hkv;
    g.head_dim = c.d;
    g.scale = 1.f / std::sqrt(float(c.d));
    g.window = c.window;
    g.softcap = c.softcap;
    // Sinks in the scores' range (scaled scores here are ~N(0, 0.75)), and every fifth head's well above
    // any score (the sink takes most of the weight: rows sum to far less than 1).
    std::vector<float> sinks;
    if (c.sinks) {
      sinks = rand_vec(c.h, -1.f, 3.f, DType::kF32);
      for (int h = 2; h < c.h; h += 5) sinks[h] = rand_vec(1, 5.f, 9.f, DType::kF32)[0];
      g.sinks = gpu_from(sinks, {c.h}, DType::kF32);
    }
    g.max_query_len = c.hints ? max_q : 0;
    if (c.hints) {  // as the engine gives it: the fewest query tokens of a sequence with more than one
      g.min_multi_query_len = 0;
      for (const Seq& sq : c.seqs)
        if (sq.q_len > 1 && (g.min_multi_query_len == 0 || sq.q_len < g.min_multi_query_len))
          g.min_multi_query_len = sq.q_len;
    }
    g.max_seq_len = c.hint_kv > 0 ? c.hint_kv : c.hints ? max_kv : 0;
    if (c.list_prefill) {
      std::vector<int> listed;
      for (int s = 0; s < S; ++s)
        if (c.seqs[s].q_len > 1) listed.push_back(s);
      g.num_prefill_seqs = static_cast<int>(listed.size());
      if (!listed.empty()) g.prefill_seqs = gpu_i32(listed, {g.num_prefill_seqs});
    }
    if (c.min_wide_splits > 0) {
      cuda::DeviceInfo dev;
      cudaDeviceGetAttribute(&dev.num_sms, cudaDevAttrMultiProcessorCount, 0);
      ASSERT_TRUE(cuda::decode_wide_supported(g));
      EXPECT_GE(cuda::decode_wide_splits(g, dev), c.min_wide_splits) << "the merge is not exercised";
    }
    attend(g, c.prefill_m_tiles, c.graph, c.decode_cluster, c.wide);

    AttentionParams r = g;
    r.q = cpu_f32(q, {T, c.h, c.d});
    r.k_cache = cpu_f32(kc, cache_shape);
    r.v_cache = cpu_f32(vc, cache_shape);
    r.out = cpu_poisoned({T, c.h, c.d});
    r.query_start = cpu_i32(qs, {S + 1});
    r.seq_lens = cpu_i32(lens, {S});
    r.block_tables = cpu_i32(tables, {S, max_blocks});
    r.sinks = c.sinks ? cpu_f32(sinks, {c.h}) : Tensor();
    cpu_->paged_attention(r);
    expect_close(to_host(g.out), to_host(r.out), tol_for(act), "attention out");
    // A second run on the same inputs must agree bit for bit (no races, no stale workspace).
    std::vector<float> first = to_host(g.out);
    g.out = gpu_poisoned({T, c.h, c.d}, act);
    attend(g, c.prefill_m_tiles, c.graph, c.decode_cluster, c.wide);
    EXPECT_EQ(first, to_host(g.out)) << "second run differs";
  }
};

TEST_F(AttentionTest, DecodeLengths) {
  use_dtype(DType::kBF16);
  std::vector<Seq> seqs;
  for (int len : {1, 2, 15, 16, 17, 31, 33, 64, 65, 100, 1000, 4097}) seqs.push_back({1, len});
  run({seqs, 32, 8, 128}, DType::kBF16);
  run({seqs, 32, 8, 64}, DType::kBF16);
}

TEST_F(AttentionTest, DecodeLongSplitK) {
  use_dtype(DType::kBF16);
  run({{{1, 32768}}, 32, 8, 128}, DType::kBF16);           // one sequence fills the chip via splits
  run({{{1, 20000}, {1, 5}, {1, 777}}, 16, 2, 64}, DType::kBF16);
  run({{{1, 9000}}, 8, 8, 128, true, false}, DType::kBF16);  // no host hints: plan from table width
}

// Batch-1 decode (and 2..4-token verify steps) at short and long contexts: few (seq, kv head) pairs, so
// the planner goes down to 64-key splits and the last split block of each pair merges in the kernel.
// Both decode kernels: the cluster kernel (the default for few pairs: cluster = -1) and the split kernel (0).
TEST_F(AttentionTest, DecodeBatchOneSplits) {
  for (int cl : {-1, 0}) {
    auto run_c = [&](AttnCase c, DType act) {
      c.decode_cluster = cl;
      run(c, act);
    };
    use_dtype(DType::kBF16);
    for (auto [h, hkv] : std::vector<std::pair<int, int>>{{8, 8}, {16, 4}, {32, 4}, {16, 8}, {32, 8}})
      for (int d : {64, 128}) {
        for (int len : {1, 15, 16, 17, 64, 65, 1100, 4096}) run_c({{{1, len}}, h, hkv, d}, DType::kBF16);
        for (int q : {2, 3, 4})
          if (q * (h / hkv) <= 16) run_c({{{q, 1100}}, h, hkv, d}, DType::kBF16);  // decode shape, several tokens
      }
    run_c({{{1, 32768}}, 16, 8, 128}, DType::kBF16);
    run_c({{{1, 32768}}, 32, 4, 64}, DType::kBF16);
    run_c({{{1, 1100}, {1, 17}}, 16, 8, 128}, DType::kBF16);  // two sequences, unequal lengths
    run_c({{{1, 1100}, {1, 1}, {1, 4096}, {1, 64}}, 32, 8, 128}, DType::kBF16);
    use_dtype(DType::kF16);
    run_c({{{1, 1100}}, 16, 8, 128}, DType::kF16);
  }
}

// The cluster kernel at every cluster size it can be given, 1 (no DSMEM merge) to 16.
TEST_F(AttentionTest, DecodeClusterSizes) {
  use_dtype(DType::kBF16);
  for (int cl : {1, 2, 3, 8, 16})
    for (int len : {1, 17, 100, 1100, 5000}) {
      AttnCase c{{{1, len}, {2, 300}}, 32, 8, 128};
      c.decode_cluster = cl;
      run(c, DType::kBF16);
    }
}

// Graph capture with a fixed hint (the decode graphs plan from min(max_model_len, 8192)): contexts
// shorter and longer than the hint; the kernel spreads each context over the captured splits.
TEST_F(AttentionTest, GraphHintSmallerOrLargerThanContext) {
  use_dtype(DType::kBF16);
  for (int mode : {1, 2}) {
    for (auto [h, hkv, d] : std::vector<std::tuple<int, int, int>>{{16, 8, 128}, {32, 8, 128}, {32, 4, 64}, {8, 8, 64}}) {
      for (int len : {1, 17, 1100, 4096, 32768}) {
        for (int hint : {1024, 8192}) {
          for (int cl : {-1, 0}) {
            AttnCase c{{{1, len}}, h, hkv, d};
            c.hint_kv = hint;
            c.graph = mode;
            c.decode_cluster = cl;
            run(c, DType::kBF16);
          }
        }
      }
    }
    AttnCase c{{{1, 1100}, {1, 300}, {1, 20000}, {2, 5000}}, 32, 8, 128};  // batch of 4, 2-token row too
    c.hint_kv = 8192;
    c.graph = mode;
    run(c, DType::kBF16);
    c.hint_kv = 512;
    run(c, DType::kBF16);
  }
}

TEST_F(AttentionTest, DecodeGqaRatios) {
  use_dtype(DType::kBF16);
  for (auto [h, hkv] : std::vector<std::pair<int, int>>{{8, 8}, {8, 4}, {16, 4}, {32, 4}, {16, 1}})
    for (int d : {64, 128}) run({{{1, 300}, {1, 47}, {1, 2049}}, h, hkv, d}, DType::kBF16);
}

TEST_F(AttentionTest, Prefill) {
  use_dtype(DType::kBF16);
  for (auto [h, hkv] : std::vector<std::pair<int, int>>{{8, 8}, {16, 4}, {32, 4}})
    for (int d : {64, 128}) run({{{300, 300}}, h, hkv, d}, DType::kBF16);
  run({{{1000, 1000}, {17, 17}}, 32, 8, 128}, DType::kBF16);
}

TEST_F(AttentionTest, ChunkedPrefillOverCachedPrefix) {
  use_dtype(DType::kBF16);
  run({{{100, 700}}, 32, 8, 128}, DType::kBF16);
  run({{{64, 4160}, {3, 50}}, 16, 2, 64}, DType::kBF16);
  run({{{40, 12000}}, 8, 1, 128}, DType::kBF16);  // long context, few rows: key splits
}

// One prefill step of a long and a short prompt (the shape of DecodeGraphs.EagerTwinsAgreeOnLongPrefill at
// Qwen3-0.6B heads): 8600 rows plan prefill key splits (at most 7: the 512 MiB workspace cap binds),
// so the 8300-token rows go through the split merge; the 300-token rows are written directly.
TEST_F(AttentionTest, LongPrefillBesideShort) {
  use_dtype(DType::kBF16);
  run({{{8300, 8300}, {300, 300}}, 16, 8, 128}, DType::kBF16);
}

TEST_F(AttentionTest, MixedBatch) {
  use_dtype(DType::kBF16);
  const std::vector<Seq> mix{{1, 513}, {77, 77}, {40, 1000}, {1, 1}, {2, 300}, {3, 18}, {1, 2048}, {129, 2000}};
  run({mix, 32, 8, 128}, DType::kBF16);
  run({mix, 32, 4, 64}, DType::kBF16);
  run({mix, 8, 8, 128, false}, DType::kBF16);  // contiguous block tables
  run({mix, 16, 2, 128, true, true, 32}, DType::kBF16);  // 32-token pages
}

// The host's list of prefill sequences (AttentionParams::prefill_seqs): the warp-specialised prefill
// kernel's grid runs over those alone. Serving-step shapes: many decode rows beside a chunk or two,
// and the degenerate lists (none, every sequence).
TEST_F(AttentionTest, MixedBatchListedPrefills) {
  use_dtype(DType::kBF16);
  const std::vector<Seq> mix{{1, 513}, {77, 77}, {40, 1000}, {1, 1}, {2, 300}, {3, 18}, {1, 2048}, {129, 2000}};
  for (auto [h, hkv, d] : {std::tuple{32, 8, 128}, std::tuple{16, 8, 128}, std::tuple{32, 4, 64}}) {
    AttnCase c{mix, h, hkv, d};
    c.list_prefill = true;
    run(c, DType::kBF16);
  }
  std::vector<Seq> serving;
  for (int i = 0; i < 150; ++i) serving.push_back({1, 900 + (i * 37) % 300});
  serving.insert(serving.begin() + 60, Seq{700, 1500});  // a chunk over a cached prefix, mid-batch
  serving.push_back({40, 40});                           // a short prompt last
  for (bool listed : {true, false}) {
    AttnCase c{serving, 16, 8, 128};
    c.list_prefill = listed;
    run(c, DType::kBF16);
  }
  std::vector<Seq> decodes(40, Seq{1, 700});
  AttnCase c{decodes, 32, 8, 128};
  c.list_prefill = true;  // an empty list
  run(c, DType::kBF16);
  c = {{{300, 300}, {129, 2000}, {17, 17}}, 32, 8, 128};
  c.list_prefill = true;  // every sequence listed
  run(c, DType::kBF16);
  // A short chunk's few prefill tiles get key splits (and the merge kernel) beside split decode rows.
  std::vector<Seq> short_chunk(100, Seq{1, 1000});
  short_chunk.push_back({20, 3000});
  c = {short_chunk, 32, 8, 128};
  c.list_prefill = true;
  run(c, DType::kBF16);
}

// Many decode sequences planned for the decode graphs' 4096-key hint while their contexts are ~1k
// (the split plan of a 256-sequence serving step), eager and captured.
TEST_F(AttentionTest, LargeDecodeBatchUnderGraphHint) {
  use_dtype(DType::kBF16);
  std::vector<Seq> seqs;
  for (int i = 0; i < 256; ++i) seqs.push_back({1, 1000 + (i * 13) % 90});
  AttnCase c{seqs, 16, 8, 128};
  c.hint_kv = 4096;
  run(c, DType::kBF16);
  c.graph = 1;
  run(c, DType::kBF16);
}

TEST_F(AttentionTest, BothPrefillShapes) {
  use_dtype(DType::kBF16);
  for (int mt : {1, 2}) {
    SCOPED_TRACE("prefill m-tiles " + std::to_string(mt));
    AttnCase c{{{300, 300}}, 16, 4, 128};
    c.prefill_m_tiles = mt;
    run(c, DType::kBF16);
    c = {{{129, 129}, {1, 70}, {40, 1000}, {3, 18}, {200, 4500}}, 32, 8, 64};
    c.prefill_m_tiles = mt;
    run(c, DType::kBF16);
    c = {{{40, 12000}}, 8, 1, 128};  // key splits in the prefill shape
    c.prefill_m_tiles = mt;
    run(c, DType::kBF16);
    c = {{{250, 250}}, 8, 8, 128};  // MHA: 250 rows, a partial last tile
    c.prefill_m_tiles = mt;
    run(c, DType::kBF16);
  }
}

TEST_F(AttentionTest, Float16) {
  use_dtype(DType::kF16);
  run({{{1, 3000}, {50, 50}, {20, 900}}, 32, 8, 128}, DType::kF16);
}

TEST_F(AttentionTest, SimplePathF32AndOddHeadDim) {
  use_dtype(DType::kF32);
  run({{{1, 100}, {33, 33}, {10, 400}}, 8, 2, 128}, DType::kF32);
  use_dtype(DType::kBF16);
  run({{{1, 100}, {33, 33}, {10, 400}}, 8, 2, 96}, DType::kBF16);
}

// Sliding windows (Mistral, Qwen2's sliding layers) on the plain kernel (VIREO_WINDOW_WIDE=0; f32 always takes
// it): windows of 1 key, inside a page, across pages and longer than every context, over decode rows,
// prompts and a chunk over a cached prefix, through the backend (bf16, f32 and head dim 256) and inside a graph.
TEST_F(AttentionTest, SlidingWindow) {
  struct EnvOff {
    EnvOff() { setenv("VIREO_WINDOW_WIDE", "0", 1); }
    ~EnvOff() { unsetenv("VIREO_WINDOW_WIDE"); }
  } off;
  const std::vector<Seq> mix{{1, 513}, {77, 77}, {40, 1000}, {1, 1}, {1, 37}, {129, 300}};
  for (int window : {1, 7, 16, 100, 4096}) {
    AttnCase c{mix, 16, 4, 128};
    c.window = window;
    use_dtype(DType::kBF16);
    run(c, DType::kBF16);
    use_dtype(DType::kF32);
    run(c, DType::kF32);
  }
  use_dtype(DType::kBF16);
  AttnCase wide{{{1, 700}, {20, 300}}, 8, 2, 256};
  wide.window = 50;
  run(wide, DType::kBF16);
  AttnCase graph{{{1, 1500}, {1, 40}}, 16, 8, 128};
  graph.window = 64;
  graph.graph = 1;
  run(graph, DType::kBF16);
}

// The same windows through the CUDA-core flash-decoding kernel (the default for bf16/f16, head dims 64-256):
// decode and prefill rows, a chunk over a cached prefix, GQA 4 and 8, a captured graph.
TEST_F(AttentionTest, SlidingWindowWideKernel) {
  const std::vector<Seq> mix{{1, 513}, {77, 77}, {40, 1000}, {1, 1}, {1, 37}, {129, 300}};
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (int window : {1, 7, 16, 100, 512, 4096}) {
      AttnCase c{mix, 16, 4, 128};
      c.window = window;
      run(c, act);
      AttnCase wide{{{1, 700}, {20, 300}, {1, 2000}}, 4, 1, 256};  // Gemma 3 1B's heads
      wide.window = window;
      run(wide, act);
    }
  }
  use_dtype(DType::kBF16);
  AttnCase graph{{{1, 1500}, {1, 40}}, 16, 8, 128};
  graph.window = 64;
  graph.graph = 1;
  run(graph, DType::kBF16);
  AttnCase small{{{1, 600}, {3, 90}}, 8, 8, 64};
  small.window = 33;
  run(small, DType::kBF16);
}

// Logit soft-capping (Gemma 2: softcap 50 at head dim 256, here also small caps that bend every score):
// the wide kernel (bf16/f16) and the plain one (f32, VIREO_WINDOW_WIDE=0), decode and prefill rows, with
// and without a sliding window, a captured graph.
TEST_F(AttentionTest, SoftCap) {
  const std::vector<Seq> mix{{1, 513}, {77, 77}, {40, 1000}, {1, 1}, {129, 300}};
  for (DType act : {DType::kBF16, DType::kF16, DType::kF32}) {
    use_dtype(act);
    for (float cap : {50.f, 0.5f}) {
      for (int window : {0, 100}) {
        AttnCase c{mix, 8, 4, 256};
        c.softcap = cap;
        c.window = window;
        run(c, act);
        AttnCase small{{{1, 700}, {20, 300}}, 16, 8, 128};
        small.softcap = cap;
        small.window = window;
        run(small, act);
      }
    }
  }
  use_dtype(DType::kBF16);
  AttnCase graph{{{1, 1500}, {1, 40}}, 8, 4, 256};
  graph.softcap = 0.5f;
  graph.graph = 1;
  run(graph, DType::kBF16);
  setenv("VIREO_WINDOW_WIDE", "0", 1);
  AttnCase plain{{{1, 700}, {20, 300}}, 8, 4, 256};
  plain.softcap = 0.5f;
  run(plain, DType::kBF16);
  unsetenv("VIREO_WINDOW_WIDE");
}

// Attention sinks (GPT-OSS: 64 query heads on 8 KV heads at head dim 64, every other layer a 128-token
// window; also 16 / 2 at head dim 128). The wide kernel (bf16 / f16): decode rows beside a 3000-key
// context plan key splits, so the sink joins the split merge; prompts and chunks over cached prefixes
// run one split, the sink in the block's own combine. The plain kernel: f32, bf16 under
// VIREO_WINDOW_WIDE=0, and batch-invariant mode (every dtype). With and without a window; captured graphs.
TEST_F(AttentionTest, Sinks) {
  const std::vector<Seq> decode{{1, 3000}, {1, 1000}, {1, 17}, {1, 1}, {2, 333}};
  const std::vector<Seq> mix{{1, 3000}, {77, 77}, {40, 1000}, {1, 1}, {129, 300}, {3, 18}, {150, 3000}};
  const std::vector<std::tuple<int, int, int>> shapes{{64, 8, 64}, {16, 2, 128}};
  for (DType act : {DType::kBF16, DType::kF32}) {
    use_dtype(act);
    for (int window : {0, 128})
      for (auto [h, hkv, d] : shapes) {
        AttnCase c{decode, h, hkv, d};
        c.sinks = true;
        c.window = window;
        if (act != DType::kF32) c.min_wide_splits = 2;  // (f32 takes the plain kernel)
        run(c, act);
        c.seqs = mix;
        c.min_wide_splits = 0;
        run(c, act);
      }
  }
  use_dtype(DType::kF16);
  for (int window : {0, 128}) {
    AttnCase c{decode, 64, 8, 64};
    c.sinks = true;
    c.window = window;
    c.min_wide_splits = 2;
    run(c, DType::kF16);
  }
  use_dtype(DType::kBF16);
  for (int mode : {1, 2}) {
    AttnCase graph{{{1, 3000}, {1, 40}}, 64, 8, 64};
    graph.sinks = true;
    graph.graph = mode;
    graph.min_wide_splits = 2;
    run(graph, DType::kBF16);
    graph.window = 128;
    run(graph, DType::kBF16);
  }
  {
    struct EnvOff {
      EnvOff() { setenv("VIREO_WINDOW_WIDE", "0", 1); }
      ~EnvOff() { unsetenv("VIREO_WINDOW_WIDE"); }
    } off;
    for (int window : {0, 128}) {
      AttnCase c{mix, 64, 8, 64};
      c.sinks = true;
      c.window = window;
      run(c, DType::kBF16);
    }
  }
  for (DType act : {DType::kBF16, DType::kF16, DType::kF32}) {
    use_invariant(act);
    for (int window : {0, 128})
      for (auto [h, hkv, d] : shapes) {
        AttnCase c{mix, h, hkv, d};
        c.sinks = true;
        c.window = window;
        run(c, act);
      }
  }
}

// Head dim 96 (Phi-3-mini / Phi-3.5-mini: 3072 / 32) on the CUDA-core flash-decoding kernel, 3 elements a
// lane in 2-byte loads: decode lengths around pages and splits, prefill and chunks, MHA and GQA 4, bf16 and
// f16, with a window and a soft-cap, a captured graph.
TEST_F(AttentionTest, HeadDim96) {
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    std::vector<Seq> seqs;
    for (int len : {1, 2, 15, 16, 17, 63, 64, 65, 1000, 4097}) seqs.push_back({1, len});
    run({seqs, 32, 32, 96}, act);
    run({{{1, 1025}, {77, 77}, {40, 1000}, {129, 300}}, 16, 4, 96}, act);
    AttnCase w{{{1, 700}, {20, 300}}, 8, 8, 96};
    w.window = 100;
    w.softcap = 30.f;
    run(w, act);
  }
  use_dtype(DType::kBF16);
  AttnCase graph{{{1, 1500}, {1, 40}}, 32, 32, 96};
  graph.graph = 1;
  run(graph, DType::kBF16);
}

// Host-side plan (no GPU needed): a sliding layer's rows read at most the window, so its key splits
// are planned over the window, not the context.
TEST(WideDecodePlan, SplitsFollowTheWindow) {
  AttentionParams p;
  p.q = Tensor(nullptr, DType::kBF16, {1, 4, 256});  // Gemma 3 1B: one decode row, 4 heads on 1 KV head
  p.num_heads = 4;
  p.num_kv_heads = 1;
  p.head_dim = 256;
  p.num_seqs = 1;
  p.max_seq_len = 1152;
  cuda::DeviceInfo dev;
  dev.num_sms = 132;
  EXPECT_EQ(cuda::decode_wide_splits(p, dev), 18);  // 1,152 keys in splits of >= 64
  p.window = 512;
  EXPECT_EQ(cuda::decode_wide_splits(p, dev), 8);
  p.window = 4096;  // a window longer than the context changes nothing
  EXPECT_EQ(cuda::decode_wide_splits(p, dev), 18);
}

// CUDA-core flash decoding (attention_decode_wide.cu): head dim 256 (Qwen3.5 / Qwen3-Next, GQA 16/4 and
// 16/2, and 4/4) and 192 (DeepSeek MLA after mla_pack, no GQA), bf16 and f16, through the backend.
// Batch-1 decode at lengths around the 16-token pages and the 4096 mark, and 8 sequences at once.
const std::vector<std::tuple<int, int, int>> kWideShapes{{16, 4, 256}, {16, 2, 256}, {4, 4, 256}, {8, 8, 192}};

TEST_F(AttentionTest, WideDecodeLengths) {
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (auto [h, hkv, d] : kWideShapes) {
      for (int len : {1, 2, 15, 16, 17, 33, 63, 64, 65, 100, 129, 1000, 1024, 1025, 4095, 4096, 4097, 4100})
        run({{{1, len}}, h, hkv, d}, act);
      run({{{1, 1}, {1, 17}, {1, 64}, {1, 300}, {1, 1025}, {1, 2049}, {1, 4100}, {1, 4097}}, h, hkv, d}, act);
      run({{{1, 4100}, {1, 3}, {1, 16}, {1, 999}, {1, 4096}, {1, 65}, {1, 2}, {1, 1}}, h, hkv, d, false}, act);
    }
  }
}

// One long sequence (16k): many key splits, so the partials and the merge kernel run; several
// sequences of unequal length where most splits of the short ones are empty; no host hints.
TEST_F(AttentionTest, WideDecodeLongSplits) {
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (auto [h, hkv, d] : kWideShapes) {
      AttnCase c{{{1, 16384}}, h, hkv, d};
      c.min_wide_splits = 8;
      run(c, act);
      c.seqs = {{1, 16001}};
      run(c, act);
      c.seqs = {{1, 20000}, {1, 5}, {1, 777}};
      c.min_wide_splits = 2;
      run(c, act);
      AttnCase nh{{{1, 9000}}, h, hkv, d, true, false};  // no hints: plan from the table width
      nh.min_wide_splits = 8;
      run(nh, act);
    }
  }
}

// Prefill rows through the same kernel: a mixed batch (decode rows, prompts, chunks over a cached
// prefix, 2-3 token rows), a chunk over a long prefix with few rows (key splits for prefill rows),
// contiguous tables, 32-token pages.
TEST_F(AttentionTest, WidePrefillAndMixed) {
  const std::vector<Seq> mix{{1, 513}, {77, 77}, {40, 1000}, {1, 1}, {2, 300}, {3, 18}, {1, 2048}, {129, 2000}};
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (auto [h, hkv, d] : kWideShapes) run({mix, h, hkv, d}, act);
    run({{{100, 700}}, 16, 4, 256}, act);  // chunked prefill over a cached prefix
    run({{{300, 300}}, 8, 8, 192}, act);   // a whole prompt
  }
  use_dtype(DType::kBF16);
  run({mix, 16, 4, 256, false}, DType::kBF16);             // contiguous block tables
  run({mix, 16, 2, 256, true, true, 32}, DType::kBF16);    // 32-token pages
  run({{{64, 4160}, {3, 50}}, 16, 2, 256}, DType::kBF16);  // chunk beside a short sequence
  AttnCase few{{{8, 12000}}, 8, 8, 192};  // few rows over a long prefix: prefill rows split over keys
  few.min_wide_splits = 2;
  run(few, DType::kBF16);
}

// Group sizes that the kernel cuts into chunks of query heads (3: 1+1+1, 6: 2+2+2, 12: 4+4+4, 16: 8+8),
// and head dims 64 / 128 launched on the wide kernel directly (the backend sends those to the
// tensor-core kernels).
TEST_F(AttentionTest, WideDecodeGroupsAndDims) {
  use_dtype(DType::kBF16);
  for (auto [h, hkv, d] : std::vector<std::tuple<int, int, int>>{
           {12, 4, 256}, {12, 2, 192}, {24, 2, 256}, {32, 2, 256}, {16, 1, 256}, {6, 1, 192}, {2, 1, 256}})
    run({{{1, 300}, {1, 47}, {1, 2049}, {3, 700}}, h, hkv, d}, DType::kBF16);
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (int d : {64, 128, 192, 256})
      for (auto [h, hkv] : std::vector<std::pair<int, int>>{{8, 8}, {16, 4}, {32, 4}, {16, 2}}) {
        AttnCase c{{{1, 300}, {1, 47}, {1, 2049}, {20, 700}}, h, hkv, d};
        c.wide = true;
        run(c, act);
        c.seqs = {{1, 8000}};
        run(c, act);
      }
  }
}

// Graph capture (the decode graphs plan from a fixed max_seq_len hint): contexts shorter and longer
// than the hint; the kernel cuts each row's keys into the captured number of splits, the workspace
// comes from the WorkspaceFn before the capture.
TEST_F(AttentionTest, WideGraphHintSmallerOrLargerThanContext) {
  use_dtype(DType::kBF16);
  for (int mode : {1, 2}) {
    for (auto [h, hkv, d] : kWideShapes)
      for (int len : {1, 17, 1100, 4100, 16384})
        for (int hint : {1024, 8192}) {
          AttnCase c{{{1, len}}, h, hkv, d};
          c.hint_kv = hint;
          c.graph = mode;
          run(c, DType::kBF16);
        }
    AttnCase c{{{1, 1100}, {1, 300}, {1, 20000}, {2, 5000}}, 16, 4, 256};  // batch of 4, 2-token row too
    c.hint_kv = 8192;
    c.graph = mode;
    run(c, DType::kBF16);
    c.hint_kv = 512;
    run(c, DType::kBF16);
  }
}

}  // namespace
}  // namespace vireo::testing

namespace vireo::testing {
namespace {

// --kv-cache-dtype fp8: the tensor-core kernels widen each landed tile of codes to f16 (q rounded to f16
// once), the plain kernel converts per element; against the CPU over the codes' values at the bf16 / f16
// tolerance. Decode at 1..4k keys (splits, graph hints), GQA 1/4/8, prefill and chunked prefill over a
// cached prefix, mixed steps, head dims 64 / 128, and the plain kernel's shapes (sliding window, D 96).
TEST_F(AttentionTest, Fp8Cache) {
  auto fp8 = [](std::vector<Seq> seqs, int h, int hkv, int d) {
    AttnCase c{std::move(seqs), h, hkv, d};
    c.fp8_cache = true;
    return c;
  };
  for (DType act : {DType::kBF16, DType::kF16}) {
    use_dtype(act);
    for (int d : {64, 128}) {
      for (int len : {1, 15, 16, 17, 100, 1000, 4097}) run(fp8({{1, len}}, 16, 8, d), act);
      run(fp8({{1, 700}, {1, 33}, {1, 2048}}, 32, 4, d), act);             // GQA 8
      run(fp8({{1, 300}, {1, 5}}, 8, 8, d), act);                          // MHA
      // Several new tokens a sequence (speculative decoding): 12, 8, 16 and 4 rows of G 4, causal inside
      // the step; both forms of the decode kernel (one and two n-tiles of 8 rows).
      run(fp8({{3, 500}, {2, 40}, {4, 300}, {1, 77}}, 32, 8, d), act);
      run(fp8({{8, 100}, {5, 64}}, 8, 8, d), act);                         // MHA, 8 and 5 rows
      run(fp8({{77, 77}}, 16, 8, d), act);                                 // prefill
      run(fp8({{200, 1200}, {33, 40}}, 16, 4, d), act);                    // chunked over a prefix
      run(fp8({{1, 500}, {64, 64}, {1, 31}, {130, 900}}, 16, 8, d), act);  // mixed
      // Mixed, the prefill sequences listed as the engine lists them: their attention runs on the backend's
      // side stream beside the decode rows' (VIREO_ATTN_OVERLAP); run() also repeats it bit for bit.
      AttnCase listed = fp8({{1, 500}, {64, 64}, {1, 31}, {130, 900}, {1, 1200}, {300, 300}}, 32, 8, d);
      listed.list_prefill = true;
      run(listed, act);
      // Pages other than 16 keys: 8 and 12 (the lean form's per-row gather), 32 (a chunk a page).
      for (int bs : {8, 12, 32}) {
        AttnCase b = fp8({{1, 700}, {3, 200}, {1, 33}, {40, 90}}, 32, 8, d);
        b.block_size = bs;
        run(b, act);
      }
      run(fp8({{1, 500}, {1, 40}, {1, 1100}}, 32, 2, d), act);        // GQA 16: the 9-16-row kernel alone
      AttnCase nohint = fp8({{3, 500}, {1, 77}, {2, 40}}, 32, 8, d);  // no hints: both row-group kernels
      nohint.hints = false;
      run(nohint, act);
      AttnCase g = fp8({{1, 3000}}, 16, 8, d);                             // captured, hint below the context
      g.hint_kv = 1024;
      g.graph = 1;
      run(g, act);
    }
    run(fp8({{1, 300}, {20, 40}}, 8, 2, 96), act);  // D 96: the plain kernel
    AttnCase w = fp8({{1, 300}, {20, 40}}, 8, 2, 128);
    w.window = 64;  // sliding window: the plain kernel
    run(w, act);
  }
  use_invariant(DType::kBF16);  // batch-invariant mode: the plain kernel
  run(fp8({{1, 300}, {20, 40}}, 8, 2, 128), DType::kBF16);
}

}  // namespace
}  // namespace vireo::testing
