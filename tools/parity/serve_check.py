#!/usr/bin/env python3
"""End-to-end checks of a running `vireo serve` over its OpenAI API (stdlib only: no node, no openai).

The Python stand-in for tests/server_e2e/*.js where node is missing (the device machine). It starts
nothing: point it at a server.

  vireo serve --device cuda --max-model-len 512 --max-num-seqs 64 --port 8000 &
  python3 tools/parity/serve_check.py --url http://127.0.0.1:8000 --checks basic

  # preemption: a server whose KV cache holds about one sequence, e.g. (default model; halve the bytes
  # in bf16, i.e. on CUDA):  --max-model-len 128 --block-size 16 --kv-cache-memory-bytes 700000
  #                          --no-enable-prefix-caching
  python3 tools/parity/serve_check.py --url http://127.0.0.1:8001 --checks preemption

Checks:
  basic       models list; completion stream == non-stream (greedy); 64 concurrent greedy streams
              (completions and chat, started together) identical to the same requests run one at a
              time, with the right usage; n>1 (completions seeded, chat greedy); logprobs /
              top_logprobs well-formed (completions, echo, chat); seed + temperature 1 reproduces
              (stream and non-stream); bad requests get OpenAI-style 4xx errors while a long good
              stream continues to the same text as alone; nothing left running afterwards.
  preemption  many concurrent long requests on a tiny KV cache: /metrics vllm:num_preemptions_total
              grows and every output equals its solo run.
Exit status 0 when every check passes, 1 otherwise (a summary is printed last).
"""
from __future__ import annotations

import argparse
import http.client
import json
import math
import sys
import threading
import time
import traceback
import urllib.parse


class CheckError(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise CheckError(msg)


def check_eq(a, b, msg):
    if a != b:
        raise CheckError(f"{msg}: {json.dumps(a)[:300]} != {json.dumps(b)[:300]}")


class Client:
    def __init__(self, url, timeout, api_key=None):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port or 80
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = "Bearer " + api_key

    retries = 0   # connection-level retries (see _open)
    _lock = threading.Lock()

    def _conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _open(self, method, path, data):
        """Connection + request + response head. A connection reset before any response byte means the
        server never accepted the connection (a burst of connects overflows a small listen backlog), so
        the request was not processed and is retried; the count is reported in the summary."""
        for attempt in range(6):
            c = self._conn()
            try:
                c.request(method, path, body=data, headers=self.headers)
                return c, c.getresponse()
            except (ConnectionResetError, ConnectionRefusedError, BrokenPipeError,
                    http.client.RemoteDisconnected):
                c.close()
                if attempt == 5:
                    raise
                with Client._lock:
                    Client.retries += 1
                time.sleep(0.05 * (attempt + 1))

    def request(self, method, path, body=None, raw=None):
        """Returns (status, parsed JSON or text)."""
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c, r = self._open(method, path, data)
        try:
            text = r.read().decode("utf-8")
            try:
                return r.status, json.loads(text)
            except json.JSONDecodeError:
                return r.status, text
        finally:
            c.close()

    def post(self, path, body):
        status, doc = self.request("POST", path, body)
        if status != 200:
            raise CheckError(f"POST {path} -> {status}: {str(doc)[:400]}")
        return doc

    def stream(self, path, body, on_chunk=None):
        """POST with stream=true; returns the list of parsed SSE chunks (without [DONE])."""
        c, r = self._open("POST", path, json.dumps(dict(body, stream=True)))
        try:
            if r.status != 200:
                raise CheckError(f"stream {path} -> {r.status}: {r.read().decode()[:400]}")
            check("text/event-stream" in (r.getheader("Content-Type") or ""), "stream content type")
            chunks, done = [], False
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.decode("utf-8").rstrip("\r\n")
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    raise CheckError(f"error in stream: {data[:400]}")
                chunks.append(chunk)
                if on_chunk:
                    on_chunk(chunk)
            check(done, "stream ended without data: [DONE]")
            return chunks
        finally:
            c.close()

    def metrics(self):
        status, text = self.request("GET", "/metrics")
        check(status == 200, f"/metrics status {status}")
        return text


def metric_value(text, name, label_part=""):
    for line in text.split("\n"):
        if (line.startswith(name + "{") or line.startswith(name + " ")) and label_part in line:
            return float(line.rsplit(" ", 1)[1])
    raise CheckError(f"metric not found: {name} {label_part}")


def completion_stream_text(cli, params, on_chunk=None):
    """(text, finish_reason, usage) of a streamed completion (choice 0)."""
    text, finish, usage = "", None, None
    for ch in cli.stream("/v1/completions", dict(params, stream_options={"include_usage": True}), on_chunk):
        if ch.get("usage"):
            usage = ch["usage"]
        for c in ch.get("choices", []):
            text += c.get("text") or ""
            finish = c.get("finish_reason") or finish
    return text, finish, usage


def chat_stream_text(cli, params):
    text, finish, usage, role = "", None, None, None
    for ch in cli.stream("/v1/chat/completions", dict(params, stream_options={"include_usage": True})):
        if ch.get("usage"):
            usage = ch["usage"]
        for c in ch.get("choices", []):
            d = c.get("delta") or {}
            role = role or d.get("role")
            text += d.get("content") or ""
            finish = c.get("finish_reason") or finish
    check_eq(role, "assistant", "first chat delta carries the role")
    return text, finish, usage


def run_parallel(fns):
    """Runs the callables in threads started together; returns results (exceptions re-raised)."""
    results = [None] * len(fns)
    errors = [None] * len(fns)
    barrier = threading.Barrier(len(fns))

    def work(i):
        try:
            barrier.wait()
            results[i] = fns[i]()
        except BaseException as e:  # noqa: BLE001
            errors[i] = e

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, e in enumerate(errors):
        if e is not None:
            raise CheckError(f"request {i}: {e}")
    return results


def wait_idle(cli, limit_s=30.0):
    m = ""
    end = time.time() + limit_s
    while time.time() < end:
        m = cli.metrics()
        if metric_value(m, "vllm:num_requests_running") == 0 and metric_value(m, "vllm:num_requests_waiting") == 0:
            return m
        time.sleep(0.1)
    raise CheckError("requests still running/waiting: " + " ".join(
        l for l in m.split("\n") if l.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting"))))


# ---------------------------------------------------------------------------------------------- basic

class Basic:
    def __init__(self, cli, args):
        self.cli, self.args = cli, args
        status, doc = cli.request("GET", "/v1/models")
        check(status == 200, f"/v1/models status {status}")
        self.model = doc["data"][0]["id"]
        self.max_model_len = doc["data"][0].get("max_model_len", 0)

    def models(self):
        status, doc = self.cli.request("GET", "/v1/models")
        check_eq(doc.get("object"), "list", "object")
        check_eq(len(doc["data"]), 1, "one model")
        check(self.max_model_len > 0, "max_model_len > 0")

    def stream_equals_nonstream(self):
        p = {"model": self.model, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0,
             "ignore_eos": True}
        r = self.cli.post("/v1/completions", p)
        check(r["id"].startswith("cmpl-"), "id prefix")
        check_eq(r["object"], "text_completion", "object")
        check_eq(r["choices"][0]["finish_reason"], "length", "finish_reason")
        check_eq(r["usage"]["completion_tokens"], 8, "completion_tokens")
        text, finish, usage = completion_stream_text(self.cli, p)
        check_eq(text, r["choices"][0]["text"], "stream text == non-stream text")
        check_eq(finish, "length", "stream finish_reason")
        check_eq(usage and usage["completion_tokens"], 8, "stream usage")

    def concurrent_equals_solo(self):
        n, mt = self.args.concurrency, self.args.max_tokens
        prompts = ["Once upon a time", "def fib(n):", "1, 2, 3,", "Hello"]
        chats = ["Hi!", "Name three colours.", "What is 2+2?", "Write a haiku."]

        def comp(p):
            return lambda: completion_stream_text(self.cli, {"model": self.model, "prompt": p, "max_tokens": mt,
                                                             "temperature": 0, "ignore_eos": True})

        def chat(m):
            return lambda: chat_stream_text(self.cli, {"model": self.model, "max_tokens": mt, "temperature": 0,
                                                       "ignore_eos": True,
                                                       "messages": [{"role": "user", "content": m}]})

        jobs = [comp(prompts[i // 2 % 4]) if i % 2 == 0 else chat(chats[i // 2 % 4]) for i in range(n)]
        solo = [jobs[i]() for i in range(8)]   # the 8 distinct requests, one at a time
        got = run_parallel(jobs)
        for i, (text, finish, usage) in enumerate(got):
            want = solo[i % 8]
            check_eq(text, want[0], f"stream {i} ({'completion' if i % 2 == 0 else 'chat'}) vs solo")
            check_eq(finish, "length", f"stream {i} finish_reason")
            check_eq(usage and usage["completion_tokens"], mt, f"stream {i} usage")
        return f"{n} concurrent streams == solo"

    def n_choices(self):
        p = {"model": self.model, "prompt": "The capital of France is", "max_tokens": 6, "n": 3, "seed": 7,
             "temperature": 1.0}
        r = self.cli.post("/v1/completions", p)
        check_eq(sorted(c["index"] for c in r["choices"]), [0, 1, 2], "completion n=3 indexes")
        if all(c["finish_reason"] == "length" for c in r["choices"]):
            check_eq(r["usage"]["completion_tokens"], 18, "usage counts all 3 choices")
        again = self.cli.post("/v1/completions", p)
        check_eq([c["text"] for c in sorted(again["choices"], key=lambda c: c["index"])],
                 [c["text"] for c in sorted(r["choices"], key=lambda c: c["index"])], "seeded n=3 reproduces")
        idx = set()
        for ch in self.cli.stream("/v1/completions", p):
            for c in ch["choices"]:
                idx.add(c["index"])
        check_eq(sorted(idx), [0, 1, 2], "streamed n=3 indexes")
        cp = {"model": self.model, "messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 6, "n": 2,
              "temperature": 0, "ignore_eos": True}
        r = self.cli.post("/v1/chat/completions", cp)
        check_eq(len(r["choices"]), 2, "chat n=2")
        check_eq(r["choices"][0]["message"]["content"], r["choices"][1]["message"]["content"], "greedy choices agree")

    def logprobs(self):
        mt = 4
        p = {"model": self.model, "prompt": "The capital of France is", "max_tokens": mt, "temperature": 0,
             "logprobs": 3, "ignore_eos": True}
        r = self.cli.post("/v1/completions", p)
        lp = r["choices"][0]["logprobs"]
        for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
            check_eq(len(lp[key]), mt, f"logprobs.{key} length")
        for i in range(mt):
            v = lp["token_logprobs"][i]
            check(isinstance(v, (int, float)) and math.isfinite(v) and v <= 0, f"token_logprobs[{i}] = {v}")
            top = lp["top_logprobs"][i]
            check(1 <= len(top) <= 4, f"top_logprobs[{i}] size {len(top)}")
            check(all(x <= 0 for x in top.values()), "top logprobs <= 0")
            check(abs(max(top.values()) - v) < 1e-4, f"greedy token is the top-1 at {i}")
            check(lp["tokens"][i] in top, f"chosen token in top_logprobs[{i}]")
        check_eq("".join(lp["tokens"]), r["choices"][0]["text"], "tokens join to the text")
        check(all(lp["text_offset"][i] <= lp["text_offset"][i + 1] for i in range(mt - 1)), "text_offset increasing")
        # streamed logprobs carry the same values
        toks, vals = [], []
        for ch in self.cli.stream("/v1/completions", p):
            for c in ch["choices"]:
                if c.get("logprobs"):
                    toks += c["logprobs"]["tokens"]
                    vals += c["logprobs"]["token_logprobs"]
        check_eq(toks, lp["tokens"], "streamed logprob tokens")
        check(all(abs(a - b) < 1e-4 for a, b in zip(vals, lp["token_logprobs"])), "streamed logprob values")
        e = self.cli.post("/v1/completions", dict(p, echo=True, logprobs=1, max_tokens=3))
        elp = e["choices"][0]["logprobs"]
        check(elp["token_logprobs"][0] is None, "first prompt token has no logprob")
        check_eq(len(elp["tokens"]), e["usage"]["prompt_tokens"] + 3, "echo: prompt + generated entries")
        check(all(v is not None and v <= 0 for v in elp["token_logprobs"][1:]), "echo: prompt logprobs present")
        cp = {"model": self.model, "messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 6,
              "temperature": 0, "ignore_eos": True, "logprobs": True, "top_logprobs": 2}
        r = self.cli.post("/v1/chat/completions", cp)
        content = r["choices"][0]["logprobs"]["content"]
        check_eq(len(content), 6, "chat: one logprobs entry per token")
        for i, ent in enumerate(content):
            check(isinstance(ent["token"], str) and ent["logprob"] <= 0, f"chat entry {i}")
            check(isinstance(ent.get("bytes"), list), f"chat entry {i} bytes")
            tops = ent["top_logprobs"]
            check_eq(len(tops), 2, f"chat top_logprobs[{i}] size")
            check(tops[0]["logprob"] >= tops[1]["logprob"], f"chat top_logprobs[{i}] sorted")
            check(abs(tops[0]["logprob"] - ent["logprob"]) < 1e-4, f"chat greedy token is top-1 at {i}")
        check_eq("".join(e["token"] for e in content), r["choices"][0]["message"]["content"],
                 "chat logprob tokens join to the content")

    def seed_reproduces(self):
        p = {"model": self.model, "prompt": "In the beginning", "max_tokens": 16, "temperature": 1.0, "seed": 1234,
             "ignore_eos": True}
        a = self.cli.post("/v1/completions", p)["choices"][0]["text"]
        b = self.cli.post("/v1/completions", p)["choices"][0]["text"]
        c, _, _ = completion_stream_text(self.cli, p)
        check_eq(b, a, "seeded non-stream reproduces")
        check_eq(c, a, "seeded stream == non-stream")
        cp = {"model": self.model, "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 16,
              "temperature": 1.0, "seed": 99, "ignore_eos": True}
        x = self.cli.post("/v1/chat/completions", cp)["choices"][0]["message"]["content"]
        y, _, _ = chat_stream_text(self.cli, cp)
        check_eq(y, x, "seeded chat stream == non-stream")
        # seeded requests reproduce under concurrency too
        got = run_parallel([lambda: self.cli.post("/v1/completions", p)["choices"][0]["text"]] * 8)
        check(all(t == a for t in got), "8 concurrent seeded requests reproduce")

    def errors_during_stream(self):
        mt = min(self.args.long_tokens, max(8, self.max_model_len - 16))
        p = {"model": self.model, "prompt": "Count: 1, 2, 3,", "max_tokens": mt, "temperature": 0, "ignore_eos": True}
        want, _, _ = completion_stream_text(self.cli, p)
        started = threading.Event()
        chunks = [0]

        def on_chunk(_):
            chunks[0] += 1
            started.set()

        box = {}

        def good():
            try:
                box["r"] = completion_stream_text(self.cli, p, on_chunk)
            except BaseException as e:  # noqa: BLE001
                box["e"] = e
            started.set()

        t = threading.Thread(target=good)
        t.start()
        started.wait(self.args.timeout)
        at_start = chunks[0]

        def expect_error(method, path, body, status, param=None, raw=None):
            st, doc = self.cli.request(method, path, body, raw=raw)
            check_eq(st, status, f"{path} {str(body or raw)[:80]} status")
            check(isinstance(doc, dict) and isinstance(doc.get("error"), dict), f"OpenAI error body: {str(doc)[:200]}")
            err = doc["error"]
            check(isinstance(err.get("message"), str) and err["message"], "error.message")
            check(isinstance(err.get("type"), str), "error.type")
            check("param" in err and "code" in err, "error.param / error.code present")
            if param:
                check_eq(err["param"], param, "error.param")
            return err

        expect_error("POST", "/v1/completions", {"model": "no-such-model", "prompt": "x"}, 404)
        expect_error("POST", "/v1/completions", {"model": self.model, "prompt": "x", "temperature": -1}, 400,
                     "temperature")
        err = expect_error("POST", "/v1/completions",
                           {"model": self.model, "prompt": "x", "max_tokens": self.max_model_len + 5}, 400)
        check(str(self.max_model_len) in err["message"] and str(self.max_model_len + 5) in err["message"],
              "max_tokens error names both numbers: " + err["message"])
        expect_error("POST", "/v1/completions", None, 400, raw="{not json")
        expect_error("POST", "/v1/chat/completions", {"model": self.model, "messages": [], "stream": True}, 400)
        expect_error("POST", "/v1/chat/completions", {"model": self.model, "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]}, 400)
        during = chunks[0]
        t.join(self.args.timeout)
        check(not t.is_alive(), "good stream did not finish")
        if "e" in box:
            raise CheckError(f"good stream failed: {box['e']}")
        check_eq(box["r"][0], want, "good stream text (with errors interleaved) == alone")
        check_eq(box["r"][2] and box["r"][2]["completion_tokens"], mt, "good stream usage")
        return f"stream of {mt} tokens: {at_start} chunks before the bad requests, {during} after them"

    def idle_after(self):
        m = wait_idle(self.cli)
        check_eq(metric_value(m, "vllm:kv_cache_usage_perc"), 0.0, "kv cache usage after")


# ----------------------------------------------------------------------------------------- preemption

def preemption(cli, args):
    status, doc = cli.request("GET", "/v1/models")
    model = doc["data"][0]["id"]
    mt = args.preempt_max_tokens
    prompts = ["The quick brown fox", "In the beginning", "import numpy as np", "Dear Sir or Madam,"]

    def req(i):
        p = {"model": model, "prompt": prompts[i % len(prompts)], "max_tokens": mt, "temperature": 0,
             "ignore_eos": True}
        if i % 2:
            return lambda: completion_stream_text(cli, p)[0]
        return lambda: cli.post("/v1/completions", p)["choices"][0]["text"]

    solo = [req(i)() for i in range(len(prompts))]
    before = metric_value(cli.metrics(), "vllm:num_preemptions_total")
    got = run_parallel([req(i) for i in range(args.preempt_requests)])
    for i, t in enumerate(got):
        check_eq(t, solo[i % len(prompts)], f"request {i} vs solo")
    m = wait_idle(cli)
    pre = metric_value(m, "vllm:num_preemptions_total") - before
    check(pre > 0, f"expected preemptions (server needs a tiny KV cache), got {pre}")
    return f"{args.preempt_requests} requests x {mt} tokens, {int(pre)} preemptions, outputs == solo"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--api-key")
    p.add_argument("--checks", default="basic", help="comma list: basic, preemption")
    p.add_argument("--timeout", type=float, default=300.0, help="per-request timeout (s)")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=12, help="tokens per concurrent stream")
    p.add_argument("--long-tokens", type=int, default=200, help="tokens of the stream kept open during errors")
    p.add_argument("--preempt-requests", type=int, default=16)
    p.add_argument("--preempt-max-tokens", type=int, default=48)
    p.add_argument("--wait-healthy", type=float, default=0, help="first wait this long for /health 200")
    args = p.parse_args(argv)
    cli = Client(args.url, args.timeout, args.api_key)
    if args.wait_healthy:
        end = time.time() + args.wait_healthy
        while True:
            try:
                if cli.request("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > end:
                print(f"serve_check: {args.url}/health not 200 after {args.wait_healthy}s")
                return 1
            time.sleep(0.5)

    checks = []
    wanted = [c.strip() for c in args.checks.split(",") if c.strip()]
    if "basic" in wanted:
        b = Basic(cli, args)
        checks += [("models list", b.models), ("completion stream == non-stream", b.stream_equals_nonstream),
                   (f"{args.concurrency} concurrent greedy streams == solo", b.concurrent_equals_solo),
                   ("n > 1", b.n_choices), ("logprobs / top_logprobs", b.logprobs),
                   ("seed + temperature 1 reproduces", b.seed_reproduces),
                   ("4xx OpenAI errors while a good stream continues", b.errors_during_stream),
                   ("nothing running afterwards", b.idle_after)]
    if "preemption" in wanted:
        checks.append(("tiny KV cache: preemption keeps outputs identical", lambda: preemption(cli, args)))
    unknown = set(wanted) - {"basic", "preemption"}
    if unknown:
        p.error(f"unknown checks: {sorted(unknown)}")
    failed = 0
    for name, fn in checks:
        t0 = time.time()
        try:
            note = fn()
            print(f"ok   {name} ({(time.time() - t0) * 1000:.0f} ms){': ' + note if note else ''}", flush=True)
        except Exception as e:  # noqa: BLE001
            failed += 1
            detail = str(e) if isinstance(e, CheckError) else traceback.format_exc()
            print(f"FAIL {name}: {detail}", flush=True)
    print(f"serve_check {args.url} [{args.checks}]: " +
          (f"{failed} of {len(checks)} failed" if failed else f"all {len(checks)} passed") +
          (f" ({Client.retries} connects reset before any response and retried)" if Client.retries else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
