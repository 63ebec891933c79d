// A CLI11 transform for token-count options written as vLLM writes them (core/human_int.h: 32k, 32K, auto).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "core/error.h"
#include "core/human_int.h"

namespace vireo {

inline CLI::Validator human_int_transform() {
  return CLI::Validator(
      [](std::string& v) {
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
