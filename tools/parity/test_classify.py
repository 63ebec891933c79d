"""Unit tests of the parity tool's plain-python logic (run by test_bench through ctest)."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_lib as pl  # noqa: E402


def side(tokens, tops=None, lps=None):
    tops = tops or [[(t, -0.1), (t + 1000, -2.0)] for t in tokens]
    lps = lps if lps is not None else [-0.1] * len(tokens)
    return pl.Side(list(tokens), list(lps), tops)


class ClassifyTest(unittest.TestCase):
    def test_exact(self):
        r = pl.classify(side([1, 2, 3]), side([1, 2, 3], lps=[-0.1, -0.15, -0.3]))
        self.assertEqual(r.verdict, pl.EXACT)
        self.assertIsNone(r.first_divergence)
        self.assertEqual(r.compared, 3)
        self.assertAlmostEqual(max(r.logprob_abs_diffs), 0.2)
        self.assertAlmostEqual(r.ref_margins[0], 1.9)

    def test_top_k_match_when_each_token_in_others_top(self):
        ref = side([1, 2, 3], tops=[[(1, -0.1)], [(2, -0.69), (7, -0.70)], [(3, -0.1)]])
        got = side([1, 7, 9], tops=[[(1, -0.1)], [(7, -0.69), (2, -0.70)], [(9, -0.1)]])
        r = pl.classify(ref, got, k=5)
        self.assertEqual(r.verdict, pl.TOP_K_MATCH)
        self.assertEqual(r.first_divergence, 1)
        self.assertEqual(len(r.logprob_abs_diffs), 1)  # only the matched prefix

    def test_fail_when_one_side_missing_from_other_top(self):
        ref = side([1, 2], tops=[[(1, -0.1)], [(2, -0.1), (8, -3.0)]])
        got = side([1, 7], tops=[[(1, -0.1)], [(7, -0.1), (2, -0.2)]])
        r = pl.classify(ref, got)
        self.assertEqual(r.verdict, pl.FAIL)  # 7 is not in ref's top
        self.assertEqual(r.first_divergence, 1)

    def test_fail_when_top_k_cut(self):
        # 7 is ref's 6th best: not within top-5.
        ref_top = [(i, -float(i)) for i in (2, 10, 11, 12, 13, 7)]
        ref = side([2], tops=[ref_top])
        got = side([7], tops=[[(7, -0.1), (2, -0.2)]])
        self.assertEqual(pl.classify(ref, got, k=5).verdict, pl.FAIL)
        self.assertEqual(pl.classify(ref, got, k=6).verdict, pl.TOP_K_MATCH)

    def test_fail_without_vireo_top(self):
        ref = side([1, 2])
        got = pl.Side([1, 5], [-0.1, -0.1], [])
        self.assertEqual(pl.classify(ref, got).verdict, pl.FAIL)

    def test_shorter_side_compared_over_common_length(self):
        r = pl.classify(side([1, 2, 3, 4]), side([1, 2]))
        self.assertEqual(r.verdict, pl.EXACT)
        self.assertEqual(r.compared, 2)
        self.assertIn("lengths differ", r.detail)
        self.assertEqual(pl.classify(side([1]), side([])).verdict, pl.FAIL)

    def test_summary_and_markdown(self):
        results = [
            pl.classify(side([1, 2]), side([1, 2]), index=0),
            pl.classify(side([1, 2], tops=[[(1, 0)], [(2, -0.5), (3, -0.6)]]),
                        side([1, 3], tops=[[(1, 0)], [(3, -0.5), (2, -0.6)]]), index=1),
            pl.classify(side([5]), side([6]), index=2),
        ]
        s = pl.summarize(results)
        self.assertEqual((s["exact"], s["top_k_match"], s["fail"]), (1, 1, 1))
        self.assertEqual(s["first_divergence_positions"], [1, 0])
        md = pl.markdown_report([{"model": "m", "dtype": "bfloat16", "batch": 2, "summary": s, "results": results}])
        self.assertIn("| model | dtype | batch | EXACT | TOP_K_MATCH | FAIL |", md)
        self.assertIn("| m | bfloat16 | 2 | 1 | 1 | 1 |", md)
        self.assertIn("prompt 2: FAIL", md)


class ParseTest(unittest.TestCase):
    def test_jsonl_with_pair_tops(self):
        text = "\n".join(json.dumps(r) for r in [
            {"index": 1, "token_ids": [4], "logprobs": [{"token_id": 4, "logprob": -0.5, "top": [[4, -0.5], [9, -1.0]]}]},
            {"index": 0, "token_ids": [3, 5], "logprobs": [
                {"token_id": 3, "logprob": -0.1, "top": [{"token_id": 3, "logprob": -0.1}]},
                {"token_id": 5, "logprob": -0.2, "top": {"5": -0.2, "6": -0.9}}]},
        ])
        sides = pl.parse_vireo_output("some log line\n" + text)
        self.assertEqual([s.tokens for s in sides], [[3, 5], [4]])  # sorted by index
        self.assertEqual(sides[0].top[1], [(5, -0.2), (6, -0.9)])
        self.assertEqual(sides[1].top[0][1], (9, -1.0))

    def test_vireo_generate_json_lines(self):
        # The format `vireo generate --json --logprobs N` prints: one object per prompt, in order.
        line = {"finish_reason": "length", "prompt_token_ids": [1, 2], "text": "ab", "token_ids": [7, 8],
                "logprobs": [{"logprob": -0.2, "token_id": 7, "top_logprobs": {"9": -1.5, "7": -0.2}},
                             {"logprob": -0.3, "token_id": 8, "top_logprobs": {"8": -0.3}}]}
        sides = pl.parse_vireo_output(json.dumps(line) + "\n" + json.dumps(dict(line, token_ids=[5, 6])) + "\n")
        self.assertEqual([s.tokens for s in sides], [[7, 8], [5, 6]])
        self.assertEqual(sides[0].top[0], [(7, -0.2), (9, -1.5)])  # sorted best first
        self.assertEqual(sides[0].logprobs, [-0.2, -0.3])

    def test_array_document(self):
        sides = pl.parse_vireo_output(json.dumps({"outputs": [{"output": {"token_ids": [1], "logprobs": []}}]}))
        self.assertEqual(sides[0].tokens, [1])
        with self.assertRaises(ValueError):
            pl.parse_vireo_output(json.dumps([{"text": "x"}]))


if __name__ == "__main__":
    unittest.main()
