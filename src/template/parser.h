// Jinja parser: tokens -> syntax tree, following jinja2's grammar and operator precedence.
#pragma once
#include <string>

#include "template/ast.h"

namespace vireo::tmpl {

// Throws vireo::Error("chat template: line N: ...") on a syntax error.
Body parse_template(const std::string& source);

// Known filter/test names (parse-time check, as jinja2 does at compile time).
bool has_filter(const std::string& name);
bool has_test(const std::string& name);

}  // namespace vireo::tmpl
