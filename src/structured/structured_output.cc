#include "structured/structured_output.h"

#include "core/error.h"
#include "structured/grammar_builder.h"
#include "structured/grammar_matcher.h"
#include "structured/grammar_stack.h"
#include "structured/json_schema_compiler.h"
#include "structured/regex_compiler.h"

namespace vireo::structured {

namespace {

std::shared_ptr<const Grammar> compile_grammar(const StructuredOutputSpec& spec) {
  switch (spec.kind) {
    case StructuredOutputSpec::Kind::kJsonObject:
      return std::make_shared<const Grammar>(json_object_grammar());
    case StructuredOutputSpec::Kind::kJsonSchema:
      return std::make_shared<const Grammar>(compile_json_schema(spec.schema));
    case StructuredOutputSpec::Kind::kRegex: {
      GrammarBuilder b;
      const int32_t root = add_regex_rule(b, spec.regex);
      return std::make_shared<const Grammar>(b.build(root));
    }
    case StructuredOutputSpec::Kind::kChoice: {
      if (spec.choices.empty()) throw Error("structured output: the choice list is empty");
      GrammarBuilder b;
      const int32_t root = b.literal_set_rule("choice", spec.choices);
      return std::make_shared<const Grammar>(b.build(root));
    }
  }
  throw Error("structured output: unknown kind");
}

}  // namespace

std::shared_ptr<const Grammar> compile_structured_output(const StructuredOutputSpec& spec) {
  std::shared_ptr<const Grammar> g = compile_grammar(spec);
  // Every matcher starts by expanding the root: a grammar whose start is too deep or too ambiguous for
  // the matcher (GrammarStack's limits) fails here, where the server answers 400, not at the request's
  // first step (a 500). Cheap: one expansion, the nodes dropped with the stack.
  GrammarStack stack(*g);
  std::vector<StackTop> tops;
  ExpandFlags flags;
  stack.expand_rule(g->root_rule, kRootParent, tops, flags);
  return g;
}

void warm_up_json_masks(const std::shared_ptr<const VocabIndex>& vocab) {
  auto g = std::make_shared<const Grammar>(compile_json_schema(nlohmann::ordered_json::parse(
      R"({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "maxLength": 2}}})")));
  std::vector<uint32_t> mask((vocab->vocab_size() + 31) / 32);
  GrammarMatcher m(g, vocab, {});
  for (const char* text : {"{\"a\": \"", "x\", \"b\": \""}) {
    if (!m.accept_bytes(text)) throw Error("structured output: warm-up grammar rejected its own text");
    m.fill_next_token_bitmask(mask);
  }
}

}  // namespace vireo::structured
