"""Unit tests of the baseline's summary (plain python): numbers and the field names it shares with
`vireo bench latency` (kept in sync with src/bench/offline_bench.cc)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_summary import latency_summary, percentile  # noqa: E402

VIREO_FIELDS = ["batch_size", "input_len", "output_len", "avg_latency", "latencies", "percentiles"] + [
    f"{stat}_{name}" for name in ("prefill_time_ms", "decode_step_ms", "decode_tokens_per_s")
    for stat in ("mean", "median", "p90", "p99")] + ["prefill_time_ms_list", "decode_step_ms_list", "decode_tokens_per_s_list"]


class SummaryTest(unittest.TestCase):
    def test_percentile_matches_numpy_linear(self):
        self.assertAlmostEqual(percentile([4, 1, 3, 2], 50), 2.5)
        self.assertAlmostEqual(percentile([1, 2, 3, 4], 99), 3.97)
        self.assertAlmostEqual(percentile([10, 20, 30], 90), 28.0)

    def test_fields_and_values(self):
        iters = [{"latency": 1.1, "prefill": 0.1, "decode": 1.0, "decode_steps": 10},
                 {"latency": 2.2, "prefill": 0.2, "decode": 2.0, "decode_steps": 10}]
        j = latency_summary(iters, batch_size=4, input_len=8, output_len=11)
        for k in VIREO_FIELDS:
            self.assertIn(k, j)
        self.assertAlmostEqual(j["avg_latency"], 1.65)
        self.assertAlmostEqual(j["mean_prefill_time_ms"], 150.0)
        self.assertAlmostEqual(j["mean_decode_step_ms"], 150.0)   # 100 ms and 200 ms per step
        self.assertAlmostEqual(j["mean_decode_tokens_per_s"], 30.0)  # 4*10/1 = 40 and 4*10/2 = 20
        self.assertEqual(sorted(j["percentiles"]), sorted(["10", "25", "50", "75", "90", "99"]))

    def test_cpp_field_names_in_sync(self):
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "bench", "offline_bench.cc")
        if not os.path.exists(src):
            self.skipTest("source tree not present")
        text = open(src).read()
        for name in ("prefill_time_ms", "decode_step_ms", "decode_tokens_per_s", "avg_latency", "latencies",
                     "percentiles"):
            self.assertIn(f'"{name}"', text)


if __name__ == "__main__":
    unittest.main()
