// `vireo generate`: offline generation through the engine (vLLM's LLM.generate), streaming text
// to stdout, or JSON (one object per prompt) for tools such as the parity checker.
//
// Sampling defaults follow vLLM: temperature 1.0 (random!) unless --temperature is given or the
// model's generation_config.json sets one; pass --temperature 0 for greedy output.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/command_registry.h"
#include "cli/human_int.h"
#include "core/error.h"
#include "cli/bench_engine_flags.h"
#include "engine/speculative_config.h"
#include "engine/async_engine.h"
#include "engine/llm.h"
#include "model/model_config.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vireo {
namespace {

struct GenerateOptions {
  EngineConfig engine;
  std::string prompt;
  std::string prompt_ids;
  std::string prompts_file;
  bool chat = false;
  int max_tokens = 16;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;
  std::optional<int> logprobs;
  int min_tokens = 0;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool json = false;
  bool no_prefix_caching = false;
  std::optional<size_t> kv_cache_memory_bytes;
};

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw Error("--prompt-ids: '" + item + "' is not an integer");
    }
  }
  if (ids.empty()) throw Error("--prompt-ids: no ids given");
  return ids;
}

std::vector<int32_t> encode_prompt(const AsyncEngine& eng, const std::string& text, bool chat) {
  if (!chat) return eng.tokenizer().encode(text, /*add_special_tokens=*/true);
  const ChatTemplate* tmpl = eng.chat_template();
  if (!tmpl) throw Error("--chat: the tokenizer has no chat_template");
  nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", text}}});
  // The template already places BOS where the model wants it (vLLM: add_special_tokens=False).
  return eng.tokenizer().encode(tmpl->apply(messages, ChatTemplateOptions{}), /*add_special_tokens=*/false);
}

SamplingParams make_params(const GenerateOptions& o, const GenerationConfig& gen) {
  SamplingParams sp;
  sp.max_tokens = o.max_tokens;
  sp.temperature = o.temperature.value_or(gen.temperature.value_or(1.0f));
  sp.top_p = o.top_p.value_or(gen.top_p.value_or(1.0f));
  sp.top_k = o.top_k.value_or(gen.top_k.value_or(0));
  sp.min_p = o.min_p.value_or(gen.min_p.value_or(0.0f));
  sp.repetition_penalty = o.repetition_penalty.value_or(gen.repetition_penalty.value_or(1.0f));
  sp.presence_penalty = o.presence_penalty;
  sp.frequency_penalty = o.frequency_penalty;
  sp.seed = o.seed;
  sp.logprobs = o.logprobs;
  sp.min_tokens = o.min_tokens;
  sp.stop = o.stop;
  sp.ignore_eos = o.ignore_eos;
  return sp;
}

nlohmann::json to_json(const GenerateResult& r, bool with_logprobs) {
  nlohmann::json j;
  j["prompt_token_ids"] = r.prompt_token_ids;
  j["token_ids"] = r.output.token_ids;
  j["text"] = r.output.text;
  j["finish_reason"] = r.output.finish_reason;
  if (!r.output.error.empty()) j["error"] = r.output.error;
  if (with_logprobs) {
    nlohmann::json lps = nlohmann::json::array();
    for (const auto& lp : r.output.logprobs) {
      nlohmann::json top = nlohmann::json::object();
      for (const auto& [id, v] : lp.top) top[std::to_string(id)] = v;
      lps.push_back({{"token_id", lp.token_id}, {"logprob", lp.logprob}, {"top_logprobs", top}});
    }
    j["logprobs"] = lps;
  }
  return j;
}

// Reads --prompts-file: one {"prompt": "..."} or {"prompt_ids": [...]} per line.
std::vector<std::vector<int32_t>> read_prompts_file(const AsyncEngine& eng, const std::string& path, bool chat) {
  std::ifstream in(path);
  if (!in) throw Error("--prompts-file: cannot open " + path);
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw Error(fmt::format("{}:{}: invalid JSON ({})", path, lineno, e.what()));
    }
    if (j.contains("prompt_ids") && j["prompt_ids"].is_array()) {
      prompts.push_back(j["prompt_ids"].get<std::vector<int32_t>>());
    } else if (j.contains("prompt") && j["prompt"].is_string()) {
      prompts.push_back(encode_prompt(eng, j["prompt"].get<std::string>(), chat));
    } else {
      throw Error(fmt::format("{}:{}: expected {{\"prompt\": string}} or {{\"prompt_ids\": [int]}}", path, lineno));
    }
  }
  if (prompts.empty()) throw Error("--prompts-file: " + path + " has no prompts");
  return prompts;
}

int run_generate(GenerateOptions o) {
  int sources = !o.prompt.empty() + !o.prompt_ids.empty() + !o.prompts_file.empty();
  if (sources != 1) throw Error("give exactly one of --prompt, --prompt-ids, --prompts-file");
  o.engine.enable_prefix_caching = !o.no_prefix_caching;
  o.engine.kv_cache_memory_bytes = o.kv_cache_memory_bytes;
  LLM llm(o.engine);
  AsyncEngine& eng = llm.engine();
  const SamplingParams sp = make_params(o, eng.generation_config());

  std::vector<std::vector<int32_t>> prompts;
  if (!o.prompts_file.empty()) prompts = read_prompts_file(eng, o.prompts_file, o.chat);
  else if (!o.prompt_ids.empty()) prompts.push_back(parse_ids(o.prompt_ids));
  else prompts.push_back(encode_prompt(eng, o.prompt, o.chat));

  const bool stream_text = !o.json && prompts.size() == 1;
  LLM::DeltaCallback on_delta;
  if (stream_text) {
    on_delta = [](size_t, const RequestOutput& d) {
      if (!d.text.empty()) {
        std::fwrite(d.text.data(), 1, d.text.size(), stdout);
        std::fflush(stdout);
      }
    };
  }
  auto results = llm.generate(prompts, sp, on_delta);
  int rc = 0;
  for (const auto& r : results) {
    if (r.output.finish_reason == "error") {
      std::fprintf(stderr, "error: %s\n", r.output.error.c_str());
      rc = 1;
    }
    if (stream_text) {
      std::printf("\n");
    } else {
      std::printf("%s\n", to_json(r, o.logprobs.has_value()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
  }
  std::fflush(stdout);
  if (const std::string spec = spec_decode_summary(eng.stats()); !spec.empty()) std::fprintf(stderr, "%s\n", spec.c_str());
  eng.shutdown(std::chrono::milliseconds(0));
  return rc;
}

CommandRunner setup_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  EngineConfig& e = o->engine;
  e.runner = "generate";  // generation only here (a base model's checkpoint is refused: no lm_head)
  app.add_option("--model", e.model, "Model directory (HF layout) or .gguf file; empty or 'default' = the built-in model");
  app.add_option("--tokenizer", e.tokenizer, "Tokenizer directory or .gguf file (default: the model's)");
  app.add_option("--prompt", o->prompt, "Prompt text");
  app.add_option("--prompt-ids", o->prompt_ids, "Prompt token ids, comma separated");
  app.add_option("--prompts-file", o->prompts_file,
                 "JSONL file, one {\"prompt\": ...} or {\"prompt_ids\": [...]} per line; prints one JSON line each");
  app.add_flag("--chat", o->chat, "Apply the chat template to the prompt as one user message");
  app.add_option("--chat-template", e.chat_template, "Jinja chat template: a file or the template text (default: the tokenizer's)");
  app.add_option("--max-tokens", o->max_tokens, "Maximum number of generated tokens (default 16)");
  app.add_option("--temperature", o->temperature, "Sampling temperature; 0 = greedy (default 1.0, as vLLM)");
  app.add_option("--top-k", o->top_k, "Top-k (0 or -1 = off)");
  app.add_option("--top-p", o->top_p, "Top-p (nucleus)");
  app.add_option("--min-p", o->min_p, "Min-p");
  app.add_option("--repetition-penalty", o->repetition_penalty, "Repetition penalty (1 = off)");
  app.add_option("--presence-penalty", o->presence_penalty, "Presence penalty");
  app.add_option("--frequency-penalty", o->frequency_penalty, "Frequency penalty");
  app.add_option("--seed", o->seed, "Per-request sampling seed");
  app.add_option("--logprobs", o->logprobs, "Top-N logprobs per generated token (JSON output)");
  app.add_option("--min-tokens", o->min_tokens, "Minimum generated tokens before EOS/stop tokens");
  app.add_option("--stop", o->stop, "Stop string (repeatable)");
  app.add_flag("--ignore-eos", o->ignore_eos, "Keep generating past EOS");
  app.add_flag("--json", o->json, "Print one JSON object per prompt");
  app.add_option("--load-format", e.load_format, "auto | safetensors | gguf | dummy");
  app.add_option("--dtype", e.dtype, "auto | bfloat16 | float16 | float32");
  app.add_option("--quantization,-q", e.quantization,
                 "fp8: the layers' projections in FP8 E4M3 (per-row scales, quantized at load); mxfp4 / gguf / "
                 "compressed-tensors as `vireo serve --help` says");
  app.add_option("--kv-cache-dtype", e.kv_cache_dtype, "auto | fp8 (K and V as FP8 E4M3, scale 1)");
  app.add_option("--device", e.device, "auto | cpu | cuda");
  app.add_option("--max-model-len", e.max_model_len, "Context length (default: the model's; 32k, 32K as vLLM)")
      ->transform(human_int_transform());
  app.add_option("--max-num-seqs", e.max_num_seqs, "Maximum sequences per step (default 0 = auto, as serve)");
  app.add_option("--max-num-batched-tokens", e.max_num_batched_tokens,
                 "Token budget per step (default 0 = auto: 8192 on a GPU with >= 70 GiB, else 2048, as vLLM serve)");
  app.add_option("--block-size", e.block_size, "KV cache block size (tokens)");
  app.add_option("--gpu-memory-utilization", e.gpu_memory_utilization, "Fraction of device memory for the engine");
  app.add_option("--kv-cache-memory-bytes", o->kv_cache_memory_bytes, "KV cache size in bytes (overrides the fraction)");
  app.add_flag("--no-enable-prefix-caching", o->no_prefix_caching, "Disable prefix caching");
  app.add_option("--generation-config", e.generation_config, "auto | vllm | a folder");
  app.add_option("--hf-overrides", e.hf_overrides, "JSON object merged into the model's config.json (vLLM's flag)");
  app.add_option("--engine-seed", e.seed, "Engine seed (dummy weights, unseeded sampling)");
  app.add_flag("--enforce-eager", e.enforce_eager, "No CUDA graphs");
  add_cuda_graph_sizes_flag(app, e);
  add_override_generation_config_flag(app, e);
  add_async_scheduling_flags(app, e.async_scheduling);
  add_speculative_flag(app, e.speculative_config);
  app.add_flag("--batch-invariant", e.batch_invariant,
               "Batch-invariant kernels: a prompt's output does not depend on what it is batched with "
               "(also VIREO_BATCH_INVARIANT=1; CUDA only, slower)");
  return [o] { return run_generate(*o); };
}

const bool kRegistered = register_command("generate", "Generate text from a prompt (offline)", setup_generate);

}  // namespace
}  // namespace vireo
