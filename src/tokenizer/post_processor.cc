#include "tokenizer/post_processor.h"

#include "core/error.h"

namespace vireo {

PostProcessor::PostProcessor(const nlohmann::json& j, const std::string& what) {
  template_ = {-1};
  if (!j.is_null()) append_template(j, what);
}

void PostProcessor::append_template(const nlohmann::json& j, const std::string& what) {
  std::string type = j.at("type").get<std::string>();
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (auto& p : j.at("processors")) append_template(p, what);
    return;
  }
  std::vector<int32_t> single;
  if (type == "TemplateProcessing") {
    const auto& specials = j.at("special_tokens");
    for (const auto& item : j.at("single")) {
      if (item.contains("Sequence")) {
        single.push_back(-1);
      } else if (item.contains("SpecialToken")) {
        std::string name = item.at("SpecialToken").at("id").get<std::string>();
        if (!specials.contains(name)) throw Error(what + ": template special token '" + name + "' not defined");
        for (auto& id : specials.at(name).at("ids")) single.push_back(id.get<int32_t>());
      } else {
        throw Error(what + ": bad TemplateProcessing item " + item.dump());
      }
    }
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    single = {j.at("cls").at(1).get<int32_t>(), -1, j.at("sep").at(1).get<int32_t>()};
  } else {
    throw Error(what + ": unsupported post_processor type '" + type + "'");
  }
  // Compose: the new template wraps the current one (a Sequence applies processors in order).
  std::vector<int32_t> composed;
  for (int32_t x : single) {
    if (x == -1) {
      composed.insert(composed.end(), template_.begin(), template_.end());
    } else {
      composed.push_back(x);
    }
  }
  template_ = std::move(composed);
}

std::vector<int32_t> PostProcessor::apply(std::vector<int32_t> ids) const {
  if (template_.size() == 1) return ids;
  std::vector<int32_t> out;
  out.reserve(ids.size() + template_.size());
  for (int32_t x : template_) {
    if (x == -1) {
      out.insert(out.end(), ids.begin(), ids.end());
    } else {
      out.push_back(x);
    }
  }
  return out;
}

}  // namespace vireo
