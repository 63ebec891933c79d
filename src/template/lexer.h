// Jinja lexer: splits a template into data and tag tokens, applying whitespace control the way
// jinja2 does with trim_blocks=True and lstrip_blocks=True (transformers' settings).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vireo::tmpl {

enum class Tok { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // data, name, decoded string literal, or operator
  int line = 1;
  int64_t ival = 0;
  double fval = 0;
};

// Throws vireo::Error("chat template: line N: ...") on a lexical error.
std::vector<Token> tokenize(const std::string& source);

const char* tok_describe(Tok t);

}  // namespace vireo::tmpl
