// --chat-template's argument as vLLM reads it: a file holding the Jinja text, or the text itself.
#pragma once
#include <string>

namespace vireo {

// The file's contents when `file_or_text` names a readable file; otherwise the argument itself when it
// looks like a template ('{', '}' or a newline in it); otherwise a vireo::Error saying the file cannot
// be opened. A .json file (a tokenizer_config.json) gives its "chat_template" string.
std::string load_chat_template(const std::string& file_or_text);

}  // namespace vireo
