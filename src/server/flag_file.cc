#include "server/flag_file.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "core/error.h"

namespace vireo::server {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// A scalar without its quotes; an unquoted one loses a trailing " # comment".
std::string scalar(std::string v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'')) {
    const size_t close = v.find(v.front(), 1);
    if (close != std::string::npos) return v.substr(1, close - 1);
  }
  if (const size_t hash = v.find(" #"); hash != std::string::npos) v = trim(v.substr(0, hash));
  return v;
}

// The flag name a command-line argument sets ("--port=1" and "--port" give "port"), or "".
std::string flag_of(const std::string& arg) {
  if (arg.rfind("--", 0) != 0 || arg.size() <= 2) return "";
  const size_t eq = arg.find('=');
  std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  if (name.rfind("no-", 0) == 0) name = name.substr(3);  // --no-enable-prefix-caching sets the same flag
  return name;
}

}  // namespace

std::vector<std::string> flag_file_args(const std::string& yaml_text, const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(yaml_text);
  std::string raw;
  int line_no = 0;
  auto bad = [&](const std::string& why) {
    throw Error("--config " + path + ", line " + std::to_string(line_no) + ": " + why);
  };
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line == "---") continue;
    if (!raw.empty() && std::isspace(static_cast<unsigned char>(raw[0])))
      bad("nested YAML is not supported: one 'flag-name: value' a line");
    if (line[0] == '-') bad("a YAML block list is not supported: write lists as [a, b]");
    const size_t colon = line.find(':');
    if (colon == std::string::npos) bad("expected 'flag-name: value'");
    std::string key = trim(line.substr(0, colon));
    std::replace(key.begin(), key.end(), '_', '-');
    if (key.empty() || !std::all_of(key.begin(), key.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
        }))
      bad("bad flag name '" + key + "'");
    const std::string value = trim(line.substr(colon + 1));
    if (value.empty()) bad("'" + key + "' has no value (nested YAML is not supported)");
    if (value.front() == '[') {
      const size_t close = value.rfind(']');
      if (close == std::string::npos) bad("unclosed list for '" + key + "'");
      out.push_back("--" + key);
      std::istringstream items(value.substr(1, close - 1));
      std::string item;
      while (std::getline(items, item, ','))
        if (const std::string v = scalar(trim(item)); !v.empty()) out.push_back(v);
      continue;
    }
    out.push_back("--" + key + "=" + scalar(value));
  }
  return out;
}

std::vector<std::string> expand_flag_files(const std::vector<std::string>& args,
                                           std::string (*read_file)(const std::string& path)) {
  std::set<std::string> given;
  // `serve MODEL ...`: the positional model (vLLM's form, right after the subcommand) wins over the file's.
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "serve" && !args[i + 1].empty() && args[i + 1][0] != '-') given.insert("model");
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      ++i;  // its value
      continue;
    }
    if (const std::string f = flag_of(args[i]); !f.empty() && f != "config") given.insert(f);
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) throw Error("--config: expected a file");
      path = args[++i];
    } else if (args[i].rfind("--config=", 0) == 0) {
      path = args[i].substr(9);
    } else {
      out.push_back(args[i]);
      continue;
    }
    const std::vector<std::string> file = flag_file_args(read_file(path), path);
    bool skipping = false;  // the items of a list whose flag the command line gives
    for (const std::string& a : file) {
      if (a.rfind("--", 0) == 0) skipping = given.count(flag_of(a)) > 0;
      if (!skipping) out.push_back(a);
    }
  }
  return out;
}

}  // namespace vireo::server
