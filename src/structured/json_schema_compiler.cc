#include "structured/json_schema_compiler.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "structured/grammar_builder.h"
#include "structured/json_prelude.h"
#include "structured/regex_compiler.h"

namespace vireo::structured {
namespace {

// Unrolling caps: a bounded array or string becomes one rule per position.
constexpr int64_t kMaxUnrolledItems = 1024;
constexpr int64_t kMaxUnrolledLength = 4096;
constexpr int64_t kMaxEnumeratedIntegers = 10000;
constexpr size_t kMaxGrammarSymbols = 4'000'000;

using Seq = std::vector<Symbol>;

class Compiler {
 public:
  explicit Compiler(const SchemaJson& root) : root_(root), pre_(add_json_prelude(b_)) {}

  Grammar run() {
    const int32_t top = compile(root_, "");
    try {
      return b_.build(top);
    } catch (const SchemaError&) {
      throw;
    } catch (const Error& e) {  // e.g. a $ref cycle that consumes nothing
      throw SchemaError(std::string("the schema cannot be generated: ") + e.what(), "");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& msg, const std::string& path) const { throw SchemaError(msg, path); }

  void check_size(const std::string& path) const {
    if (b_.num_symbols() > kMaxGrammarSymbols) fail("the schema is too large to compile", path);
  }

  int32_t literal_rule(const std::string& text) {
    const int32_t r = b_.new_rule("literal");
    Seq s;
    b_.append_literal(s, text);
    b_.add_alt(r, std::move(s));
    return r;
  }

  static std::optional<int64_t> int_keyword(const SchemaJson& s, const char* key, const std::string& path) {
    auto it = s.find(key);
    if (it == s.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_integer() && !it->is_number_unsigned() &&
        !(it->is_number_float() && std::floor(it->get<double>()) == it->get<double>()))
      throw SchemaError(std::string("'") + key + "' must be an integer", path);
    const double v = it->get<double>();
    if (v < 0 || v > 1e15) throw SchemaError(std::string("'") + key + "' is out of range", path);
    return static_cast<int64_t>(v);
  }

  static std::optional<double> number_keyword(const SchemaJson& s, const char* key, const std::string& path) {
    auto it = s.find(key);
    if (it == s.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) throw SchemaError(std::string("'") + key + "' must be a number", path);
    return it->get<double>();
  }

  void reject_unsupported(const SchemaJson& s, const std::string& path) const {
    static const char* kRefused[] = {"patternProperties", "not", "if", "then", "else",
                                     "dependentRequired", "dependentSchemas", "dependencies", "contains",
                                     "minContains", "maxContains", "propertyNames", "unevaluatedProperties",
                                     "unevaluatedItems", "multipleOf", "$dynamicRef", "$recursiveRef"};
    for (const char* k : kRefused)
      if (s.contains(k)) fail(std::string("JSON schema keyword '") + k + "' is not supported", path);
    if (auto it = s.find("uniqueItems"); it != s.end() && *it == true)
      fail("JSON schema keyword 'uniqueItems' is not supported", path);
  }

  const SchemaJson& resolve_ref(const std::string& ref, const std::string& path) const {
    if (ref.empty() || ref[0] != '#') fail("only local $ref ('#/$defs/...', '#/definitions/...') is supported", path);
    try {
      return root_.at(SchemaJson::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      fail("$ref '" + ref + "' does not name a part of the schema", path);
    }
  }

  int32_t compile(const SchemaJson& s, const std::string& path) {
    check_size(path);
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("schema 'false' matches nothing", path);
      return pre_.value;
    }
    if (!s.is_object()) fail("a schema must be an object or a boolean", path);
    reject_unsupported(s, path);
    if (auto it = s.find("$ref"); it != s.end()) {
      if (!it->is_string()) fail("'$ref' must be a string", path);
      const std::string ref = it->get<std::string>();
      if (auto r = ref_rules_.find(ref); r != ref_rules_.end()) return r->second;
      // Declared before compiling the target, so recursive schemas refer back to it.
      const int32_t rule = b_.new_rule("ref " + ref);
      ref_rules_[ref] = rule;
      b_.add_alt(rule, {GrammarBuilder::ref(compile(resolve_ref(ref, path), ref.substr(1)))});
      return rule;
    }
    if (auto it = s.find("const"); it != s.end()) return literal_rule(it->dump());
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) fail("'enum' must be a non-empty array", path + "/enum");
      std::vector<std::string> words;
      for (const auto& v : *it) words.push_back(v.dump());
      return b_.literal_set_rule("enum", std::move(words));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_array() || it->empty()) fail(std::string("'") + key + "' must be a non-empty array", path);
      const int32_t rule = b_.new_rule(key);
      for (size_t i = 0; i < it->size(); ++i)
        b_.add_alt(rule, {GrammarBuilder::ref(compile(merged((*it)[i], s, key), path + "/" + key + "/" + std::to_string(i)))});
      return rule;
    }
    if (auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1) fail("'allOf' is supported with exactly one schema", path);
      return compile(merged((*it)[0], s, "allOf"), path + "/allOf/0");
    }
    auto type = s.find("type");
    if (type == s.end()) return compile_type(inferred_type(s), s, path);
    if (type->is_string()) return compile_type(type->get<std::string>(), s, path);
    if (!type->is_array() || type->empty()) fail("'type' must be a string or a non-empty array of strings", path);
    const int32_t rule = b_.new_rule("types");
    for (const auto& t : *type) {
      if (!t.is_string()) fail("'type' must be a string or a non-empty array of strings", path);
      b_.add_alt(rule, {GrammarBuilder::ref(compile_type(t.get<std::string>(), s, path))});
    }
    return rule;
  }

  // A branch of anyOf/oneOf/allOf inherits its parent's other keywords it does not set itself
  // (`{"type": "object", "anyOf": [{"properties": ...}]}`, as vLLM's tool_choice schema writes).
  static SchemaJson merged(const SchemaJson& branch, const SchemaJson& parent, const char* combinator) {
    if (!branch.is_object()) return branch;
    SchemaJson out = branch;
    for (const auto& [k, v] : parent.items()) {
      if (k == combinator || k == "$defs" || k == "definitions" || k == "anyOf" || k == "oneOf" || k == "allOf") continue;
      if (!out.contains(k)) out[k] = v;
    }
    return out;
  }

  static std::string inferred_type(const SchemaJson& s) {
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) return "object";
    if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) return "array";
    if (s.contains("minLength") || s.contains("maxLength")) return "string";
    return "";
  }

  int32_t compile_type(const std::string& type, const SchemaJson& s, const std::string& path) {
    if (type.empty()) return pre_.value;
    if (type == "string") return compile_string(s, path);
    if (type == "integer") return compile_integer(s, path);
    if (type == "number") return compile_number(s, path);
    if (type == "boolean") return pre_.boolean;
    if (type == "null") return pre_.null;
    if (type == "object") return compile_object(s, path);
    if (type == "array") return compile_array(s, path);
    fail("unknown JSON schema type '" + type + "'", path + "/type");
  }

  int32_t compile_string(const SchemaJson& s, const std::string& path) {
    if (auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) fail("'pattern' must be a string", path);
      if (s.contains("minLength") || s.contains("maxLength")) fail("'pattern' with minLength / maxLength is not supported", path);
      int32_t body = 0;
      try {
        body = add_regex_rule(b_, it->get<std::string>(), /*json_string=*/true);
      } catch (const RegexError& e) {
        fail(e.what(), path + "/pattern");
      }
      const int32_t r = b_.new_rule("string_pattern");
      b_.add_alt(r, {b_.byte('"'), GrammarBuilder::ref(body), b_.byte('"')});
      return r;
    }
    const int64_t lo = int_keyword(s, "minLength", path).value_or(0);
    const std::optional<int64_t> hi = int_keyword(s, "maxLength", path);
    if (lo == 0 && !hi) return pre_.string;
    if (hi && *hi < lo) fail("maxLength is below minLength", path);
    if (std::max(lo, hi.value_or(0)) > kMaxUnrolledLength)
      fail("minLength / maxLength above " + std::to_string(kMaxUnrolledLength) + " are not supported", path);
    // c[k]: k characters written so far.
    const int64_t n = hi ? *hi : lo;
    std::vector<int32_t> c(n + 1);
    for (int64_t k = 0; k <= n; ++k) {
      c[k] = b_.new_rule("string_len");
      const int32_t max_more = hi ? static_cast<int32_t>(*hi - k) : INT32_MAX;
      b_.set_string_budget(c[k], {static_cast<int32_t>(std::max<int64_t>(lo - k, 0)), max_more});
    }
    for (int64_t k = 0; k <= n; ++k) {
      if (k == n && !hi) {
        b_.add_alt(c[k], {GrammarBuilder::ref(pre_.chars)});
        continue;
      }
      if (k >= lo) b_.add_alt(c[k], {});
      if (k < n) b_.add_alt(c[k], {GrammarBuilder::ref(pre_.chr), GrammarBuilder::ref(c[k + 1])});
    }
    const int32_t r = b_.new_rule("string_bounded");
    b_.add_alt(r, {b_.byte('"'), GrammarBuilder::ref(c[0]), b_.byte('"')});
    return r;
  }

  // Bounds as [lo, hi] over the integers (exclusive bounds moved inwards).
  std::pair<std::optional<double>, std::optional<double>> bounds(const SchemaJson& s, const std::string& path, bool integral) {
    std::optional<double> lo = number_keyword(s, "minimum", path), hi = number_keyword(s, "maximum", path);
    if (auto x = number_keyword(s, "exclusiveMinimum", path)) lo = integral ? std::floor(*x) + 1 : std::nextafter(*x, INFINITY);
    if (auto x = number_keyword(s, "exclusiveMaximum", path)) hi = integral ? std::ceil(*x) - 1 : std::nextafter(*x, -INFINITY);
    if (integral) {
      if (lo) lo = std::ceil(*lo);
      if (hi) hi = std::floor(*hi);
    }
    if (lo && hi && *lo > *hi) fail("the minimum is above the maximum", path);
    return {lo, hi};
  }

  int32_t compile_integer(const SchemaJson& s, const std::string& path) {
    auto [lo, hi] = bounds(s, path, true);
    if (lo && hi && *hi - *lo < kMaxEnumeratedIntegers) {
      std::vector<std::string> words;
      for (int64_t v = static_cast<int64_t>(*lo); v <= static_cast<int64_t>(*hi); ++v) words.push_back(std::to_string(v));
      return b_.literal_set_rule("integer_range", std::move(words));
    }
    // Wide ranges: only the sign is enforced.
    if (lo && *lo >= 0) return *lo >= 1 ? pre_.positive_integer : pre_.unsigned_integer;
    if (hi && *hi < 0) {
      const int32_t r = b_.new_rule("negative_integer");
      b_.add_alt(r, {b_.byte('-'), GrammarBuilder::ref(pre_.positive_integer)});
      return r;
    }
    return pre_.integer;
  }

  int32_t compile_number(const SchemaJson& s, const std::string& path) {
    auto [lo, hi] = bounds(s, path, false);
    if (lo && *lo >= 0) return pre_.unsigned_number;  // only the sign is enforced
    return pre_.number;
  }

  int32_t compile_object(const SchemaJson& s, const std::string& path) {
    std::vector<std::pair<std::string, const SchemaJson*>> props;
    const bool has_properties = s.contains("properties");
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) fail("'properties' must be an object", path + "/properties");
      for (const auto& [name, sub] : it->items()) props.emplace_back(name, &sub);
    }
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) fail("'required' must be an array of strings", path + "/required");
      for (const auto& r : *it) {
        if (!r.is_string()) fail("'required' must be an array of strings", path + "/required");
        required.insert(r.get<std::string>());
      }
    }
    // additionalProperties: absent next to properties (even empty ones) -> none (xgrammar); absent alone -> any.
    static const SchemaJson kAny = true;
    const SchemaJson* extra = has_properties ? nullptr : &kAny;
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      if (it->is_boolean()) extra = it->get<bool>() ? &kAny : nullptr;
      else if (it->is_object()) extra = &*it;
      else fail("'additionalProperties' must be a boolean or a schema", path + "/additionalProperties");
    }
    for (const auto& name : required) {
      bool listed = std::any_of(props.begin(), props.end(), [&](const auto& p) { return p.first == name; });
      if (!listed) {
        if (!extra) fail("required property '" + name + "' is not in 'properties'", path + "/required");
        props.emplace_back(name, extra);
      }
    }
    const int64_t num_required = static_cast<int64_t>(required.size());
    if (auto v = int_keyword(s, "minProperties", path); v && *v > num_required)
      fail("'minProperties' above the number of required properties is not supported", path);
    if (auto v = int_keyword(s, "maxProperties", path); v && (extra || *v < static_cast<int64_t>(props.size())))
      fail("'maxProperties' is supported only when it allows every listed property and no others", path);

    auto R = GrammarBuilder::ref;
    const int32_t ws = pre_.ws;
    const size_t n = props.size();
    // first[i]: properties i.. to come, none written yet; next[i]: some written (a ',' comes first).
    std::vector<int32_t> first(n + 1), next(n + 1);
    for (size_t i = 0; i <= n; ++i) {
      first[i] = b_.new_rule("object_first");
      next[i] = b_.new_rule("object_next");
    }
    b_.add_alt(first[n], {b_.byte('}')});
    b_.add_alt(next[n], {b_.byte('}')});
    if (extra) {
      const int32_t pair = b_.new_rule("object_extra_pair");
      b_.add_alt(pair, {R(pre_.string), R(ws), b_.byte(':'), R(ws), R(compile(*extra, path + "/additionalProperties"))});
      b_.add_alt(first[n], {R(pair), R(ws), R(next[n])});
      b_.add_alt(next[n], {b_.byte(','), R(ws), R(pair), R(ws), R(next[n])});
    }
    for (size_t i = n; i-- > 0;) {
      const auto& [name, sub] = props[i];
      const int32_t value = compile(*sub, path + "/properties/" + name);
      Seq key;
      b_.append_literal(key, SchemaJson(name).dump());
      Seq member = key;
      member.insert(member.end(), {R(ws), b_.byte(':'), R(ws), R(value), R(ws), R(next[i + 1])});
      b_.add_alt(first[i], member);
      Seq after_comma = {b_.byte(','), R(ws)};
      after_comma.insert(after_comma.end(), member.begin(), member.end());
      b_.add_alt(next[i], after_comma);
      if (!required.count(name)) {
        b_.add_alt(first[i], {R(first[i + 1])});
        b_.add_alt(next[i], {R(next[i + 1])});
      }
    }
    const int32_t r = b_.new_rule("object_schema");
    b_.add_alt(r, {b_.byte('{'), R(ws), R(first[0])});
    return r;
  }

  int32_t compile_array(const SchemaJson& s, const std::string& path) {
    std::vector<int32_t> prefix;
    if (auto it = s.find("prefixItems"); it != s.end()) {
      if (!it->is_array()) fail("'prefixItems' must be an array of schemas", path + "/prefixItems");
      for (size_t i = 0; i < it->size(); ++i) prefix.push_back(compile((*it)[i], path + "/prefixItems/" + std::to_string(i)));
    }
    std::optional<int32_t> rest = pre_.value;  // nullopt: no items after the prefix
    if (auto it = s.find("items"); it != s.end()) {
      if (it->is_boolean() && !it->get<bool>()) rest.reset();
      else rest = compile(*it, path + "/items");
    }
    const int64_t lo = int_keyword(s, "minItems", path).value_or(0);
    std::optional<int64_t> hi = int_keyword(s, "maxItems", path);
    const int64_t np = static_cast<int64_t>(prefix.size());
    if (!rest) hi = std::min(hi.value_or(np), np);
    if (hi && *hi < lo) fail("the array's item bounds (minItems, maxItems, prefixItems) admit no length", path);
    // after[k]: k items written. Positions past the prefix and minItems share one looping rule
    // unless maxItems bounds them.
    // Unbounded: at least one unrolled position, since the loop's items follow a comma.
    const int64_t unrolled = hi ? *hi : std::max({lo, np, int64_t{1}});
    if (unrolled > kMaxUnrolledItems) fail("array bounds above " + std::to_string(kMaxUnrolledItems) + " items are not supported", path);
    auto R = GrammarBuilder::ref;
    const int32_t ws = pre_.ws;
    std::vector<int32_t> after(unrolled + 1);
    for (int64_t k = 0; k <= unrolled; ++k) after[k] = b_.new_rule("array_items");
    for (int64_t k = 0; k <= unrolled; ++k) {
      if (k >= lo) b_.add_alt(after[k], {b_.byte(']')});
      const bool loop = k == unrolled && !hi;
      if (k == unrolled && !loop) continue;
      const int32_t item = k < np ? prefix[k] : *rest;
      const int32_t target = loop ? after[k] : after[k + 1];
      if (k == 0) b_.add_alt(after[k], {R(item), R(ws), R(target)});
      else b_.add_alt(after[k], {b_.byte(','), R(ws), R(item), R(ws), R(target)});
    }
    const int32_t r = b_.new_rule("array_schema");
    b_.add_alt(r, {b_.byte('['), R(ws), R(after[0])});
    return r;
  }

  const SchemaJson& root_;
  GrammarBuilder b_;
  JsonPrelude pre_;
  std::map<std::string, int32_t> ref_rules_;
};

}  // namespace

Grammar compile_json_schema(const SchemaJson& schema) { return Compiler(schema).run(); }

Grammar json_object_grammar() {
  GrammarBuilder b;
  const JsonPrelude pre = add_json_prelude(b);
  return b.build(pre.object);
}

}  // namespace vireo::structured
