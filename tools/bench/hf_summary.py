"""Plain-python summary of latency iterations, with exactly the JSON fields of `vireo bench latency`
(src/bench/offline_bench.cc latency_summary_json), so ours and the baseline's line up."""
from __future__ import annotations


def percentile(xs, p):
    """numpy.percentile with linear interpolation."""
    if not xs:
        return 0.0
    s = sorted(xs)
    rank = p / 100.0 * (len(s) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (rank - lo)


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def latency_summary(iters, batch_size, input_len, output_len):
    """iters: [{"latency": s, "prefill": s, "decode": s, "decode_steps": n}, ...]"""
    lat = [it["latency"] for it in iters]
    pre = [it["prefill"] for it in iters]
    step, tps = [], []
    for it in iters:
        if it["decode_steps"] > 0 and it["decode"] > 0:
            step.append(it["decode"] / it["decode_steps"])
            tps.append(batch_size * it["decode_steps"] / it["decode"])
    j = {"batch_size": batch_size, "input_len": input_len, "output_len": output_len,
         "avg_latency": mean(lat), "latencies": lat,
         "percentiles": {str(p): percentile(lat, p) for p in (10, 25, 50, 75, 90, 99)}}

    def add(name, xs, scale):
        v = [x * scale for x in xs]
        j["mean_" + name] = mean(v)
        j["median_" + name] = percentile(v, 50)
        j["p90_" + name] = percentile(v, 90)
        j["p99_" + name] = percentile(v, 99)
        j[name + "_list"] = v

    add("prefill_time_ms", pre, 1000.0)
    add("decode_step_ms", step, 1000.0)
    add("decode_tokens_per_s", tps, 1.0)
    return j
