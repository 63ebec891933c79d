// Python text formatting the interpreter must reproduce byte for byte: float repr, str repr,
// JSON string escapes, and UTF-8 <-> code point conversion (Python strings index by code point).
#pragma once
#include <string>
#include <string_view>

namespace vireo::tmpl {

std::string float_repr(double d);                 // repr(float): 1.0, 1e-05, 1e+16, inf, nan
std::string str_repr(std::string_view s);         // repr(str): 'a', "it's", '\n'
std::string json_quote(std::string_view s, bool ensure_ascii);  // json.dumps(str)

std::u32string utf8_decode(std::string_view s);   // invalid bytes become U+FFFD
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
size_t utf8_length(std::string_view s);           // number of code points

bool py_isspace(char32_t c);                      // str.isspace / str.strip() whitespace
// Python str.splitlines() (no keepends).
std::u32string_view::size_type py_line_break_len(std::u32string_view s, size_t i);

}  // namespace vireo::tmpl
