#include "structured/structured_output.h"

#include "core/error.h"
#include "structured/grammar_builder.h"
#include "structured/json_schema_compiler.h"

namespace vireo::structured {

std::shared_ptr<const Grammar> compile_structured_output(const StructuredOutputSpec& spec) {
  switch (spec.kind) {
    case StructuredOutputSpec::Kind::kJsonObject:
      return std::make_shared<const Grammar>(json_object_grammar());
    case StructuredOutputSpec::Kind::kJsonSchema:
      return std::make_shared<const Grammar>(compile_json_schema(spec.schema));
    case StructuredOutputSpec::Kind::kChoice: {
      if (spec.choices.empty()) throw Error("structured output: the choice list is empty");
      GrammarBuilder b;
      const int32_t root = b.literal_set_rule("choice", spec.choices);
      return std::make_shared<const Grammar>(b.build(root));
    }
  }
  throw Error("structured output: unknown kind");
}

}  // namespace vireo::structured
