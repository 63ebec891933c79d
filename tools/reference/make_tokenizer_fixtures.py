#!/usr/bin/env python3
"""Reference tokenizer fixtures from transformers (run on the device machine).

For each tokenizer in models/<name>/ and each string of tests/fixtures/tokenizer/corpus.jsonl
(made by tokenizer_corpus.py), records with transformers.AutoTokenizer.from_pretrained(dir):
  a: encode(text, add_special_tokens=False)
  b: encode(text, add_special_tokens=True)        (omitted when equal to a)
  d: decode(b, skip_special_tokens=False)
  s: decode(b, skip_special_tokens=True)          (omitted when equal to d)
plus seeded random id sequences ("r") with their decodes, to cover byte-fallback pieces, broken
UTF-8 and special tokens in the middle of text.

  python3 tools/reference/make_tokenizer_fixtures.py --models models --out OUTDIR
writes OUTDIR/<name>.jsonl (line 1 is a header) and OUTDIR/tokenizer_meta.json (the pipeline
transformers actually built, library versions, and how often raw `tokenizers` disagrees).
"""
import argparse
import json
import os
import random
import sys
import time

NAMES = ["qwen3", "llama3", "deepseek_v3", "gemma3", "gptoss", "llama2"]
SEED = 1234
NUM_RANDOM = 300


def pipeline_of(tok):
    """The backend tokenizer's pipeline without the (huge) vocab/merges."""
    d = json.loads(tok.backend_tokenizer.to_str())
    model = {k: v for k, v in d.get("model", {}).items() if k not in ("vocab", "merges")}
    return {
        "normalizer": d.get("normalizer"),
        "pre_tokenizer": d.get("pre_tokenizer"),
        "post_processor": d.get("post_processor"),
        "decoder": d.get("decoder"),
        "model": model,
        "num_added_tokens": len(d.get("added_tokens", [])),
    }


def mentions_byte_level(component):
    return component is not None and '"ByteLevel"' in json.dumps(component)


def load_reference(d):
    """AutoTokenizer, except where transformers 5 is known to rebuild a ByteLevel tokenizer.json as a
    SentencePiece one (LlamaTokenizer installs Metaspace over DeepSeek-V3's ByteLevel pipeline, so
    "Hello world" round-trips to "Helloworld": transformers#45488, #48206). There the reference is
    PreTrainedTokenizerFast, which keeps tokenizer.json's pipeline (as transformers 4 did)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    tok = AutoTokenizer.from_pretrained(d)
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        file_pre = json.load(f).get("pre_tokenizer")
    built_pre = json.loads(tok.backend_tokenizer.to_str()).get("pre_tokenizer")
    if mentions_byte_level(file_pre) and not mentions_byte_level(built_pre):
        return PreTrainedTokenizerFast.from_pretrained(d), "PreTrainedTokenizerFast (transformers#45488)"
    return tok, "AutoTokenizer"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="models")
    ap.add_argument("--corpus", default="tests/fixtures/tokenizer/corpus.jsonl")
    ap.add_argument("--out", required=True)
    ap.add_argument("--names", default=",".join(NAMES))
    args = ap.parse_args()

    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    with open(args.corpus, encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f if line.strip()]
    os.makedirs(args.out, exist_ok=True)
    meta = {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "num_strings": len(corpus), "tokenizers_meta": {}}

    for name in args.names.split(","):
        t0 = time.time()
        d = os.path.join(args.models, name)
        tok, reference = load_reference(d)
        raw = tokenizers.Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        rng = random.Random(SEED)
        n_raw_diff_a = n_raw_diff_b = 0
        raw_diff_examples = []
        path = os.path.join(args.out, f"{name}.jsonl")
        with open(path, "w", encoding="utf-8") as out:
            header = {"name": name, "class": type(tok).__name__, "reference": reference,
                      "num_strings": len(corpus)}
            out.write(json.dumps(header) + "\n")
            for i, text in enumerate(corpus):
                a = tok.encode(text, add_special_tokens=False)
                b = tok.encode(text, add_special_tokens=True)
                ra = raw.encode(text, add_special_tokens=False).ids
                rb = raw.encode(text, add_special_tokens=True).ids
                if ra != a:
                    n_raw_diff_a += 1
                    if len(raw_diff_examples) < 5:
                        raw_diff_examples.append({"text": text, "hf": a, "raw": ra})
                n_raw_diff_b += rb != b
                dec = tok.decode(b, skip_special_tokens=False)
                decs = tok.decode(b, skip_special_tokens=True)
                rec = {"t": i, "a": a}
                if b != a:
                    rec["b"] = b
                rec["d"] = dec
                if decs != dec:
                    rec["s"] = decs
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            vocab_n = len(tok)
            pool = []  # ids seen in the corpus: likely pieces, byte-fallback tokens, specials
            for text in corpus[:400]:
                pool.extend(tok.encode(text, add_special_tokens=True))
            for _ in range(NUM_RANDOM):
                n = rng.randint(1, 16)
                ids = [rng.randrange(vocab_n) if rng.random() < 0.4 else rng.choice(pool) for _ in range(n)]
                dec = tok.decode(ids, skip_special_tokens=False)
                decs = tok.decode(ids, skip_special_tokens=True)
                rec = {"r": ids, "d": dec}
                if decs != dec:
                    rec["s"] = decs
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        meta["tokenizers_meta"][name] = {
            "class": type(tok).__name__,
            "reference": reference,
            "len": len(tok),
            "bos_token": tok.bos_token, "eos_token": tok.eos_token,
            "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
            "add_bos_token": getattr(tok, "add_bos_token", None),
            "add_eos_token": getattr(tok, "add_eos_token", None),
            "clean_up_tokenization_spaces": getattr(tok, "clean_up_tokenization_spaces", None),
            "all_special_ids": tok.all_special_ids,
            "raw_tokenizers_diff_no_special": n_raw_diff_a,
            "raw_tokenizers_diff_special": n_raw_diff_b,
            "raw_diff_examples": raw_diff_examples,
            "pipeline": pipeline_of(tok),
            "seconds": round(time.time() - t0, 2),
        }
        print(f"{name}: {type(tok).__name__} {time.time() - t0:.1f}s raw-diff {n_raw_diff_a}/{n_raw_diff_b}",
              flush=True)
    with open(os.path.join(args.out, "tokenizer_meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    sys.exit(main())
