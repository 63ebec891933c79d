#!/usr/bin/env bash
# Serving cost of LoRA adapters on the CPU backend: the built-in default model (Qwen3 shape, dummy weights)
# with two rank-8 adapters (q_proj and down_proj of every layer, random), `vireo bench serve` with
# requests naming an adapter at random (--lora-modules a b) against requests of the base model, on the same
# server. Usage: bash benchmarks/cpu_lora_serve.sh [num_prompts]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-40}
PORT=${PORT:-8191}
DIR=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DIR"' EXIT
python3 - "$DIR" <<'PY'
import json, random, struct, sys, os
random.seed(0)
for name in ("a", "b"):
    d = os.path.join(sys.argv[1], name); os.makedirs(d)
    t, data, r = {}, b"", 8
    for l in range(4):  # builtin:default: hidden 256, 4 layers, 4 heads of 64, intermediate 768
        for mod, out, inp in (("self_attn.q_proj", 256, 256), ("mlp.down_proj", 256, 768)):
            for part, shape in (("lora_A", [r, inp]), ("lora_B", [out, r])):
                n = shape[0] * shape[1]
                b = struct.pack("<%df" % n, *[random.gauss(0, 0.05) for _ in range(n)])
                t[f"base_model.model.model.layers.{l}.{mod}.{part}.weight"] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
                data += b
    h = json.dumps(t).encode()
    open(os.path.join(d, "adapter_model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + data)
    json.dump({"r": r, "lora_alpha": 16, "peft_type": "LORA"}, open(os.path.join(d, "adapter_config.json"), "w"))
PY
./build/vireo serve --port "$PORT" --enable-lora --max-loras 2 --lora-modules a="$DIR/a" b="$DIR/b" > "$DIR/serve.log" 2>&1 &
SERVER=$!
for i in $(seq 60); do curl -sf "localhost:$PORT/health" > /dev/null && break; sleep 1; done
run() {
  ./build/vireo bench serve --port "$PORT" --dataset-name random --random-input-len 64 --random-output-len 16 \
    --num-prompts "$N" --seed 1 "$@" | grep -E "Output token throughput|Median TTFT|Median TPOT"
}
for round in 1 2; do
  echo "== round $round: base model"; run
  echo "== round $round: adapters a, b"; run --lora-modules a b
done
