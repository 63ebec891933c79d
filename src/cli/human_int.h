// A CLI11 transform for --max-model-len written as vLLM takes it: core/human_int.h's counts (32k, 32K), and
// "auto" or -1 (-1 in EngineConfig): the model's own length, or the longest the KV cache holds when that is
// shorter (vLLM's auto-fit).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "core/error.h"
#include "core/human_int.h"

namespace vireo {

inline CLI::Validator human_int_transform() {
  return CLI::Validator(
      [](std::string& v) {
        if (v == "auto" || v == "-1") {
          v = "-1";
          return std::string();
        }
        try {
          v = std::to_string(parse_human_int(v));
        } catch (const Error& e) {
          throw CLI::ValidationError(e.what());
        }
        return std::string();
      },
      "INT (32k, 32K)");
}

}  // namespace vireo
