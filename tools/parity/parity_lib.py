"""Plain-python core of the parity tool (no torch): classification, summaries, vireo output parsing.

Classification follows vllm-metal's parity check, per prompt:
  EXACT        the greedy token sequences agree over the compared length;
  TOP_K_MATCH  at the first divergent position, each side's chosen token is in the other side's top-k
               (a near-tie resolved differently by numerics, not a bug);
  FAIL         anything else.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

EXACT, TOP_K_MATCH, FAIL = "EXACT", "TOP_K_MATCH", "FAIL"


@dataclass
class Side:
    """One side's greedy decode of one prompt.

    tokens:   chosen ids, one per generated position
    logprobs: chosen-token logprob per position (None if unknown)
    top:      per position, a list of (id, logprob) best first (may be empty if unknown)
    """
    tokens: list
    logprobs: list = field(default_factory=list)
    top: list = field(default_factory=list)


@dataclass
class PromptResult:
    index: int
    verdict: str
    first_divergence: int | None      # None when EXACT
    compared: int                     # positions compared
    logprob_abs_diffs: list           # chosen-token |ref - vireo| over the matched prefix
    ref_margins: list                 # reference top1 - top2 logprob per position
    detail: str = ""


def top_ids(side: Side, pos: int, k: int) -> list:
    if pos >= len(side.top) or not side.top[pos]:
        return []
    return [int(t[0]) for t in side.top[pos][:k]]


def classify(ref: Side, got: Side, k: int = 5, index: int = 0) -> PromptResult:
    n = min(len(ref.tokens), len(got.tokens))
    margins = []
    for pos in range(len(ref.top)):
        t = ref.top[pos]
        if t and len(t) >= 2:
            margins.append(float(t[0][1]) - float(t[1][1]))
    first = None
    for pos in range(n):
        if int(ref.tokens[pos]) != int(got.tokens[pos]):
            first = pos
            break
    matched = n if first is None else first
    diffs = []
    for pos in range(matched):
        a = ref.logprobs[pos] if pos < len(ref.logprobs) else None
        b = got.logprobs[pos] if pos < len(got.logprobs) else None
        if a is not None and b is not None and math.isfinite(a) and math.isfinite(b):
            diffs.append(abs(float(a) - float(b)))
    if n == 0:
        return PromptResult(index, FAIL, 0, 0, diffs, margins, "no generated tokens to compare")
    if first is None:
        detail = ""
        if len(ref.tokens) != len(got.tokens):
            detail = f"lengths differ (ref {len(ref.tokens)}, vireo {len(got.tokens)}); compared {n}"
        return PromptResult(index, EXACT, None, n, diffs, margins, detail)
    ref_tok, got_tok = int(ref.tokens[first]), int(got.tokens[first])
    ref_top, got_top = top_ids(ref, first, k), top_ids(got, first, k)
    if not got_top:
        return PromptResult(index, FAIL, first, n, diffs, margins,
                            f"diverged at {first} (ref {ref_tok}, vireo {got_tok}); vireo gave no top-{k}")
    ok = got_tok in ref_top and ref_tok in got_top
    detail = (f"diverged at {first}: ref {ref_tok} (vireo top-{k} {'has' if ref_tok in got_top else 'lacks'} it), "
              f"vireo {got_tok} (ref top-{k} {'has' if got_tok in ref_top else 'lacks'} it)")
    return PromptResult(index, TOP_K_MATCH if ok else FAIL, first, n, diffs, margins, detail)


def summarize(results: list) -> dict:
    counts = {EXACT: 0, TOP_K_MATCH: 0, FAIL: 0}
    for r in results:
        counts[r.verdict] += 1
    diffs = [d for r in results for d in r.logprob_abs_diffs]
    margins = [m for r in results for m in r.ref_margins]
    return {
        "num_prompts": len(results),
        "exact": counts[EXACT],
        "top_k_match": counts[TOP_K_MATCH],
        "fail": counts[FAIL],
        "first_divergence_positions": [r.first_divergence for r in results if r.first_divergence is not None],
        "logprob_abs_diff_mean": (sum(diffs) / len(diffs)) if diffs else None,
        "logprob_abs_diff_max": max(diffs) if diffs else None,
        "ref_top1_margin_mean": (sum(margins) / len(margins)) if margins else None,
        "ref_top1_margin_min": min(margins) if margins else None,
    }


def _pairs(top) -> list:
    """Accepts [[id, lp], ...], [{"token_id"|"id": .., "logprob": ..}, ...] or {id: lp}."""
    if top is None:
        return []
    if isinstance(top, dict):
        items = [(int(k), float(v)) for k, v in top.items()]
        return sorted(items, key=lambda x: -x[1])
    out = []
    for t in top:
        if isinstance(t, dict):
            tid = t.get("token_id", t.get("id"))
            out.append((int(tid), float(t["logprob"])))
        else:
            out.append((int(t[0]), float(t[1])))
    return out


def parse_vireo_record(rec: dict) -> Side:
    """One prompt's record of `vireo generate --json` (RequestOutput's fields, aggregated)."""
    out = rec.get("output", rec)
    tokens = out.get("token_ids", out.get("output_token_ids"))
    if tokens is None:
        raise ValueError("vireo output record has no token_ids: " + json.dumps(rec)[:200])
    logprobs, top = [], []
    for lp in out.get("logprobs") or []:
        if isinstance(lp, dict):
            logprobs.append(float(lp["logprob"]) if lp.get("logprob") is not None else None)
            top.append(_pairs(lp.get("top", lp.get("top_logprobs"))))
        else:  # bare number
            logprobs.append(float(lp))
            top.append([])
    return Side([int(t) for t in tokens], logprobs, top)


def parse_vireo_output(text: str) -> list:
    """JSON lines (one record per prompt), or one JSON array / {"outputs": [...]} document."""
    text = text.strip()
    if not text:
        return []
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            doc = doc.get("outputs", doc.get("results", [doc]))
        records = doc
    except json.JSONDecodeError:
        records = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    if records and all(isinstance(r, dict) and "index" in r for r in records):
        records = sorted(records, key=lambda r: r["index"])
    return [parse_vireo_record(r) for r in records]


def _fmt(x, spec=".4f"):
    return "-" if x is None else format(x, spec)


def markdown_report(rows: list) -> str:
    """rows: [{"model", "dtype", "batch", "summary": summarize(...), "results": [...]}, ...]"""
    lines = ["| model | dtype | batch | EXACT | TOP_K_MATCH | FAIL |", "|---|---|---|---|---|---|"]
    for r in rows:
        s = r["summary"]
        lines.append(f"| {r['model']} | {r['dtype']} | {r['batch']} | {s['exact']} | {s['top_k_match']} | {s['fail']} |")
    lines.append("")
    lines.append("| model | dtype | batch | first divergences | chosen logprob abs diff (mean / max) | ref top-1 margin (mean / min) |")
    lines.append("|---|---|---|---|---|---|")
    for r in rows:
        s = r["summary"]
        div = ", ".join(str(p) for p in s["first_divergence_positions"]) or "none"
        lines.append(f"| {r['model']} | {r['dtype']} | {r['batch']} | {div} | "
                     f"{_fmt(s['logprob_abs_diff_mean'])} / {_fmt(s['logprob_abs_diff_max'])} | "
                     f"{_fmt(s['ref_top1_margin_mean'])} / {_fmt(s['ref_top1_margin_min'])} |")
    fails = [(r, p) for r in rows for p in r["results"] if p.verdict != EXACT]
    if fails:
        lines.append("")
        lines.append("Non-exact prompts:")
        lines.append("")
        for r, p in fails:
            lines.append(f"- {r['model']} {r['dtype']} batch {r['batch']} prompt {p.index}: {p.verdict}: {p.detail}")
    return "\n".join(lines) + "\n"
