#!/usr/bin/env bash
# ncu's per-instruction stall view of the warp-specialised prefill attention on short prompts (8 x 1k causal,
# H32/8, D128: 222 TFLOP/s on an H100 in session 49, ~28% of the BF16 peak; 8k prompts reach 444 on an H200).
# Session 49's summary profile put 38% of the stall samples on L1TEX loads but cannot say whose: the producer
# warpgroup's table loads and cp.async gathers, the consumers' item metadata, or their epilogue. This one
# keeps the SASS-level samples (scripts/ncu_sass_stalls.py) so the next change aims at the right loop.
# Run on the device (ncu from /usr/local/cuda/bin) with build/tests/test_cuda_bench; OUT: where the report,
# the CSV and the summary go (default /tmp/prefill_profile).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/prefill_profile}
mkdir -p "$OUT"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
VIREO_KERNEL_BENCH=1 timeout 120 "$NCU" --clock-control none -k regex:attention_prefill_ws -c 1 --set full \
  --import-source no -f -o "$OUT/ws" build/tests/test_cuda_bench --gtest_filter=KernelBench.C_PrefillAttentionShort \
  > "$OUT/ncu_run.txt" 2>&1
"$NCU" -i "$OUT/ws.ncu-rep" --page source --csv --print-source sass > "$OUT/ws_sass.csv" 2>&1
"$NCU" -i "$OUT/ws.ncu-rep" --page details > "$OUT/ws_details.txt" 2>&1
grep -E "Duration|Registers Per|Achieved Active Warps|Issued Warp|Warp Cycles Per Issued" "$OUT/ws_details.txt"
python3 scripts/ncu_sass_stalls.py "$OUT/ws_sass.csv" 60 | tee "$OUT/ws_stalls.txt"
