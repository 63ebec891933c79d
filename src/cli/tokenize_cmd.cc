// vireo tokenize: encode text with a model's tokenizer (one prompt, or JSON strings on stdin).
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <string>

#include "cli/command_registry.h"
#include "core/error.h"
#include "tokenizer/default_dir.h"
#include "tokenizer/tokenizer.h"

namespace vireo {
namespace {

struct TokenizeOptions {
  std::string model, tokenizer, prompt;
  bool jsonl = false, add_special = false;
};

int run_tokenize(const TokenizeOptions& o) {
  std::string dir = !o.tokenizer.empty() ? o.tokenizer : !o.model.empty() ? o.model : default_tokenizer_dir();
  auto tok = Tokenizer::from_dir(dir);
  if (o.jsonl) {
    std::string line;
    size_t lineno = 0;
    while (std::getline(std::cin, line)) {
      ++lineno;
      if (line.empty()) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw Error("stdin line " + std::to_string(lineno) + ": not JSON: " + e.what());
      }
      if (!j.is_string()) throw Error("stdin line " + std::to_string(lineno) + ": expected a JSON string");
      std::string out = nlohmann::json(tok->encode(j.get<std::string>(), o.add_special)).dump();
      std::fwrite(out.data(), 1, out.size(), stdout);
      std::fputc('\n', stdout);
    }
    return 0;
  }
  std::string text = o.prompt;
  if (text.empty() && !isatty(0)) {  // no --prompt: the whole of stdin
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::printf("%s\n", nlohmann::json(tok->encode(text, o.add_special)).dump().c_str());
  return 0;
}

CommandRunner setup_tokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  app.add_option("--model", o->model, "Model directory (its tokenizer.json and tokenizer_config.json) or .gguf file");
  app.add_option("--tokenizer", o->tokenizer, "Tokenizer directory or .gguf file (overrides --model)");
  app.add_flag("--jsonl", o->jsonl, "Read one JSON string per stdin line; print one JSON array of ids per line");
  app.add_flag("--add-special-tokens", o->add_special, "Apply the post-processor (e.g. BOS)");
  app.add_option("--prompt", o->prompt, "Text to tokenize (default: stdin)");
  return [o] { return run_tokenize(*o); };
}

const bool kRegistered = register_command("tokenize", "Tokenize text with a model's tokenizer", setup_tokenize);

}  // namespace
}  // namespace vireo
