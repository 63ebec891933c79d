#include "template/chat_template_file.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace vireo {

std::string load_chat_template(const std::string& file_or_text) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(file_or_text, ec)) {
    std::ifstream f(file_or_text, std::ios::binary);
    if (!f) throw Error("--chat-template: cannot read " + file_or_text);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    if (std::filesystem::path(file_or_text).extension() != ".json") return text;
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    auto it = j.is_object() ? j.find("chat_template") : j.end();
    if (it == j.end() || !it->is_string())
      throw Error("--chat-template: " + file_or_text + " has no \"chat_template\" string");
    return it->get<std::string>();
  }
  if (file_or_text.find_first_of("{}\n") != std::string::npos) return file_or_text;
  throw Error("--chat-template: '" + file_or_text + "' is neither a readable file nor a template");
}

}  // namespace vireo
