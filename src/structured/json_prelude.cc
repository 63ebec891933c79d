#include "structured/json_prelude.h"

#include <string>

namespace vireo::structured {
namespace {

ByteSet set_of(std::initializer_list<std::pair<int, int>> ranges) {
  ByteSet s{};
  for (auto [lo, hi] : ranges)
    for (int b = lo; b <= hi; ++b) s[b >> 6] |= uint64_t{1} << (b & 63);
  return s;
}

using Seq = std::vector<Symbol>;

}  // namespace

JsonPrelude add_json_prelude(GrammarBuilder& b) {
  JsonPrelude p;
  auto R = GrammarBuilder::ref;
  // ws_k: k whitespace bytes used so far; each step is a tail call, so the stack stays flat.
  const Symbol space = b.bytes(set_of({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}));
  std::vector<int32_t> ws(kMaxJsonWhitespace + 1);
  for (int k = 0; k <= kMaxJsonWhitespace; ++k) ws[k] = b.new_rule("ws" + std::to_string(k));
  for (int k = 0; k <= kMaxJsonWhitespace; ++k) {
    b.add_alt(ws[k], {});
    if (k < kMaxJsonWhitespace) b.add_alt(ws[k], {space, R(ws[k + 1])});
  }
  p.ws = ws[0];

  // Strings: printable ASCII but '"' and '\', escapes, and well-formed UTF-8 sequences.
  const Symbol cont = b.range(0x80, 0xBF);
  const int32_t esc = b.new_rule("escape");
  b.add_alt(esc, {b.bytes(set_of({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'},
                                  {'r', 'r'}, {'t', 't'}}))});
  const Symbol hex = b.bytes(set_of({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}));
  b.add_alt(esc, {b.byte('u'), hex, hex, hex, hex});
  p.chr = b.new_rule("char");
  b.add_alt(p.chr, {b.bytes(set_of({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7F}}))});
  b.add_alt(p.chr, {b.byte('\\'), R(esc)});
  b.add_alt(p.chr, {b.range(0xC2, 0xDF), cont});
  b.add_alt(p.chr, {b.byte(0xE0), b.range(0xA0, 0xBF), cont});
  b.add_alt(p.chr, {b.bytes(set_of({{0xE1, 0xEC}, {0xEE, 0xEF}})), cont, cont});
  b.add_alt(p.chr, {b.byte(0xED), b.range(0x80, 0x9F), cont});
  b.add_alt(p.chr, {b.byte(0xF0), b.range(0x90, 0xBF), cont, cont});
  b.add_alt(p.chr, {b.range(0xF1, 0xF3), cont, cont, cont});
  b.add_alt(p.chr, {b.byte(0xF4), b.range(0x80, 0x8F), cont, cont});
  p.chars = b.new_rule("chars");
  b.add_alt(p.chars, {});
  b.add_alt(p.chars, {R(p.chr), R(p.chars)});
  p.string = b.new_rule("string");
  b.add_alt(p.string, {b.byte('"'), R(p.chars), b.byte('"')});

  // Numbers.
  const Symbol digit = b.range('0', '9');
  const int32_t digits0 = b.new_rule("digits0");  // [0-9]*
  b.add_alt(digits0, {});
  b.add_alt(digits0, {digit, R(digits0)});
  p.positive_integer = b.new_rule("positive_integer");
  b.add_alt(p.positive_integer, {b.range('1', '9'), R(digits0)});
  p.unsigned_integer = b.new_rule("unsigned_integer");
  b.add_alt(p.unsigned_integer, {b.byte('0')});
  b.add_alt(p.unsigned_integer, {R(p.positive_integer)});
  p.integer = b.new_rule("integer");
  b.add_alt(p.integer, {R(p.unsigned_integer)});
  b.add_alt(p.integer, {b.byte('-'), R(p.unsigned_integer)});
  const int32_t exponent = b.new_rule("exponent");
  const Symbol e = b.bytes(set_of({{'e', 'e'}, {'E', 'E'}}));
  b.add_alt(exponent, {e, digit, R(digits0)});
  b.add_alt(exponent, {e, b.bytes(set_of({{'+', '+'}, {'-', '-'}})), digit, R(digits0)});
  const int32_t exponent_opt = b.new_rule("exponent_opt");
  b.add_alt(exponent_opt, {});
  b.add_alt(exponent_opt, {R(exponent)});
  const int32_t fraction_opt = b.new_rule("fraction_opt");  // (\.[0-9]+)?([eE][+-]?[0-9]+)?
  b.add_alt(fraction_opt, {R(exponent_opt)});
  b.add_alt(fraction_opt, {b.byte('.'), digit, R(digits0), R(exponent_opt)});
  p.unsigned_number = b.new_rule("unsigned_number");
  b.add_alt(p.unsigned_number, {R(p.unsigned_integer), R(fraction_opt)});
  p.number = b.new_rule("number");
  b.add_alt(p.number, {R(p.unsigned_number)});
  b.add_alt(p.number, {b.byte('-'), R(p.unsigned_number)});

  p.boolean = b.literal_set_rule("boolean", {"true", "false"});
  p.null = b.new_rule("null");
  {
    Seq s;
    b.append_literal(s, "null");
    b.add_alt(p.null, s);
  }

  // Any value, object, array.
  p.value = b.new_rule("value");
  p.object = b.new_rule("object");
  p.array = b.new_rule("array");
  const int32_t pair = b.new_rule("pair");
  b.add_alt(pair, {R(p.string), R(p.ws), b.byte(':'), R(p.ws), R(p.value)});
  const int32_t obj_more = b.new_rule("object_more");
  b.add_alt(obj_more, {b.byte('}')});
  b.add_alt(obj_more, {b.byte(','), R(p.ws), R(pair), R(p.ws), R(obj_more)});
  const int32_t obj_body = b.new_rule("object_body");
  b.add_alt(obj_body, {b.byte('}')});
  b.add_alt(obj_body, {R(pair), R(p.ws), R(obj_more)});
  b.add_alt(p.object, {b.byte('{'), R(p.ws), R(obj_body)});
  const int32_t arr_more = b.new_rule("array_more");
  b.add_alt(arr_more, {b.byte(']')});
  b.add_alt(arr_more, {b.byte(','), R(p.ws), R(p.value), R(p.ws), R(arr_more)});
  const int32_t arr_body = b.new_rule("array_body");
  b.add_alt(arr_body, {b.byte(']')});
  b.add_alt(arr_body, {R(p.value), R(p.ws), R(arr_more)});
  b.add_alt(p.array, {b.byte('['), R(p.ws), R(arr_body)});
  for (int32_t r : {p.object, p.array, p.string, p.number, p.boolean, p.null}) b.add_alt(p.value, {R(r)});

  b.set_string_rules(p.chr, p.chars, p.string);
  b.end_prelude("json-v1-ws" + std::to_string(kMaxJsonWhitespace));
  return p;
}

}  // namespace vireo::structured
