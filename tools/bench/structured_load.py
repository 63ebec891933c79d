#!/usr/bin/env python3
"""Structured outputs under load: concurrent chat requests with response_format json_schema (and the
same requests unconstrained, for the cost of the masks), against any OpenAI-compatible server.

Every constrained reply that finished with "stop" must parse and validate against its schema; replies
cut by max_tokens ("length") are counted apart. Stdlib only, so it runs on the device machine too.

  python3 tools/bench/structured_load.py --port 8000 --model builtin:qwen3-0.6b --num-requests 64 --concurrency 32
"""
import argparse
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

# Schemas whose every instance is short (enums, bounded strings, booleans, small arrays), so random
# weights still finish them well inside max_tokens.
SCHEMAS = [
    {"type": "object",
     "properties": {"name": {"type": "string", "maxLength": 12},
                    "age": {"type": "integer", "minimum": 0, "maximum": 120},
                    "member": {"type": "boolean"}},
     "required": ["name", "age", "member"], "additionalProperties": False},
    {"type": "object",
     "properties": {"color": {"enum": ["red", "green", "blue"]},
                    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3}},
     "required": ["color", "tags"]},
    {"type": "object",
     "properties": {"point": {"$ref": "#/$defs/pt"}, "ok": {"type": ["boolean", "null"]}},
     "required": ["point"], "$defs": {"pt": {"type": "object", "properties": {
         "x": {"type": "integer", "minimum": -9, "maximum": 9}, "y": {"type": "integer", "minimum": -9, "maximum": 9}},
         "required": ["x", "y"]}}},
]


def resolve(schema, root):
    while "$ref" in schema:
        ref = schema["$ref"].split("/")[1:]
        node = root
        for part in ref:
            node = node[part]
        schema = node
    return schema


def validate(v, schema, root):
    """The subset SCHEMAS use: type (and type lists), enum, properties/required/additionalProperties,
    items/maxItems, maxLength, minimum/maximum. Returns an error string or None."""
    schema = resolve(schema, root)
    if "enum" in schema and v not in schema["enum"]:
        return f"{v!r} not in enum"
    types = schema.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        ok = {"object": isinstance(v, dict), "array": isinstance(v, list), "string": isinstance(v, str),
              "boolean": isinstance(v, bool), "null": v is None,
              "integer": isinstance(v, int) and not isinstance(v, bool),
              "number": isinstance(v, (int, float)) and not isinstance(v, bool)}
        if not any(ok[t] for t in types):
            return f"{v!r} is not {types}"
    if isinstance(v, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in v:
                return f"missing {k}"
        for k, x in v.items():
            if k in props:
                err = validate(x, props[k], root)
                if err:
                    return f"{k}: {err}"
            elif schema.get("additionalProperties", True) is False:
                return f"unexpected {k}"
    if isinstance(v, list):
        if len(v) > schema.get("maxItems", len(v)):
            return "too many items"
        for x in v:
            err = validate(x, schema.get("items", {}), root)
            if err:
                return err
    if isinstance(v, str) and len(v) > schema.get("maxLength", len(v)):
        return "string too long"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if v < schema.get("minimum", v) or v > schema.get("maximum", v):
            return f"{v} out of range"
    return None


def post(url, body, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def run(args, constrained):
    url = f"http://{args.host}:{args.port}/v1/chat/completions"

    def one(i):
        schema = SCHEMAS[i % len(SCHEMAS)]
        body = {"model": args.model, "max_tokens": args.max_tokens, "temperature": args.temperature, "seed": i,
                "messages": [{"role": "user", "content": f"Reply in JSON, request {i}."}]}
        if constrained:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": f"s{i % len(SCHEMAS)}", "schema": schema}}
        t = time.perf_counter()
        r = post(url, body, args.timeout)
        ch = r["choices"][0]
        return i, schema, ch["message"].get("content") or "", ch["finish_reason"], r["usage"]["completion_tokens"], \
            time.perf_counter() - t

    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        results = list(pool.map(one, range(args.num_requests)))
    wall = time.perf_counter() - t0
    tokens = sum(r[4] for r in results)
    # Replies differ in length between the two runs (schemas end early), so compare time per token too.
    per_tok = sorted(r[5] / max(r[4], 1) * 1000 for r in results)
    lat = sorted(r[5] * 1000 for r in results)
    stats = {"requests": len(results), "output_tokens": tokens, "wall_s": round(wall, 3),
             "output_tok_per_s": round(tokens / wall, 1),
             "median_ms_per_token": round(per_tok[len(per_tok) // 2], 3),
             "median_latency_ms": round(lat[len(lat) // 2], 1),
             "stop": 0, "length": 0, "other": 0, "invalid": 0}
    for i, schema, text, finish, _, _ in results:
        stats[finish if finish in ("stop", "length") else "other"] += 1
        if constrained and finish == "stop":
            try:
                err = validate(json.loads(text), schema, schema)
            except ValueError as e:
                err = f"not JSON: {e}"
            if err:
                stats["invalid"] += 1
                if stats["invalid"] <= 3:
                    print(f"  request {i}: {err}: {text[:200]!r}", file=sys.stderr)
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--model", required=True)
    ap.add_argument("--num-requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--no-baseline", action="store_true", help="skip the unconstrained run")
    ap.add_argument("--warmup", action="store_true",
                    help="run the constrained load once first (grammar caches warm), then measure")
    args = ap.parse_args()
    if args.warmup:
        run(args, True)
    out = {"json_schema": run(args, True)}
    if not args.no_baseline:
        out["unconstrained"] = run(args, False)
    print(json.dumps(out))
    return 1 if out["json_schema"]["invalid"] else 0


if __name__ == "__main__":
    sys.exit(main())
