#!/usr/bin/env bash
# One device call: graph-vs-eager logits tests, then decode-step timings (VIREO_GRAPH_BENCH=1).
# Here first: build the libraries, link test_cuda_graph (docs/cuda_kernels.md, "CUDA graphs"),
# `bash scripts/device_bundle.sh <binary>`, then run with carry [".dev/lib", "<binary>"].
# $1: the test binary (default build-graph/manual/test_cuda_graph).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}
BIN=${1:-build-graph/manual/test_cuda_graph}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for t in 'GraphSizes.*:RecordedGraphs.*' 'DecodeGraphs.SameLogitsAsEager' 'DecodeGraphs.ContextLongerThanAttentionHint'; do
  log="$OUT/test_$(echo "${t#*.}" | tr -cd 'A-Za-z').log"
  timeout 60 "$BIN" --gtest_filter="$t" >"$log" 2>&1
  echo "== $t rc=$?"
  grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|not captured|Expected|Which is|error|step" "$log" | cut -c1-300 | head -16
done
VIREO_GRAPH_BENCH=1 timeout 110 "$BIN" --gtest_filter='DecodeGraphs.Bench' >"$OUT/bench.log" 2>&1
echo "== bench rc=$?"
grep -E "decode qwen|graph_bench|Failure|not captured|OK|FAILED" "$OUT/bench.log"
