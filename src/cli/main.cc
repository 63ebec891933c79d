// vireo: one binary, subcommands registered by the files of src/cli/.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/command_registry.h"
#include "core/error.h"
#include "server/flag_file.h"

namespace {
// vLLM's two-letter short options, which CLI11 cannot name: rewritten to their long forms.
std::vector<std::string> expand_vllm_short_options(int argc, char** argv) {
  static const std::map<std::string, std::string> kLong = {
      {"-tp", "--tensor-parallel-size"}, {"-pp", "--pipeline-parallel-size"}, {"-dp", "--data-parallel-size"},
      {"-ep", "--enable-expert-parallel"}, {"-asc", "--api-server-count"}, {"-dpn", "--data-parallel-rank"},
      {"-dpr", "--data-parallel-start-rank"}, {"-dpl", "--data-parallel-size-local"},
      {"-dpa", "--data-parallel-address"}, {"-dpp", "--data-parallel-rpc-port"}, {"-dpb", "--data-parallel-backend"},
      {"-dph", "--data-parallel-hybrid-lb"}, {"-dpe", "--data-parallel-external-lb"},
      {"-dcp", "--decode-context-parallel-size"}, {"-pcp", "--prefill-context-parallel-size"},
      {"-cc", "--compilation-config"}, {"-ac", "--attention-config"}};
  std::vector<std::string> args(argv, argv + argc);
  for (auto& a : args) {
    const std::string head = a.substr(0, a.find('='));
    if (auto it = kLong.find(head); it != kLong.end()) a = it->second + a.substr(head.size());
  }
  return args;
}

// vLLM's FlexibleArgumentParser takes --max_model_len for --max-model-len: underscores in a long flag's
// name (after "--", before any '.' of a dotted sub-key or '=') become dashes. Sub-keys and values keep theirs.
void dash_long_flag_names(std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;  // what follows is positional
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) continue;
    const size_t end = std::min(a.find('.'), a.find('='));
    std::replace(a.begin() + 2, end == std::string::npos ? a.end() : a.begin() + static_cast<std::ptrdiff_t>(end), '_', '-');
  }
}

// vLLM's boolean flags are argparse BooleanOptionalActions: each --X has a --no-X. A --no-X that no command
// defines, where --X is a flag, becomes --X=false (CLI11 flags take an explicit value).
void negate_boolean_flags(std::vector<std::string>& args, const CLI::App& app) {
  std::vector<const CLI::App*> apps = {&app};
  for (size_t i = 0; i < apps.size(); ++i)
    for (const CLI::App* sub : apps[i]->get_subcommands([](const CLI::App*) { return true; })) apps.push_back(sub);
  auto find = [&](const std::string& name, bool flag_only) {
    for (const CLI::App* a : apps)
      if (const CLI::Option* o = a->get_option_no_throw(name); o && (!flag_only || o->get_expected_max() == 0))
        return true;
    return false;
  };
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.rfind("--no-", 0) != 0 || a.find('=') != std::string::npos || find(a, false)) continue;
    if (const std::string positive = "--" + a.substr(5); find(positive, true)) a = positive + "=false";
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw vireo::Error("--config " + path + ": cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Vireo: an LLM inference engine and OpenAI-compatible server"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vireo 0.1.0");
  // A flag given twice takes its last value, as vLLM's argparse does (wrapper scripts append overrides);
  // CLI11 refuses it by default. Subcommands inherit this; list options still keep all their values.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  auto& specs = vireo::registered_commands();
  std::sort(specs.begin(), specs.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<std::string, CLI::App*> parents;
  std::vector<std::pair<CLI::App*, vireo::CommandRunner>> runners;
  for (auto& spec : specs) {
    CLI::App* parent = &app;
    std::string leaf = spec.name;
    if (auto sp = spec.name.find(' '); sp != std::string::npos) {
      std::string group = spec.name.substr(0, sp);
      leaf = spec.name.substr(sp + 1);
      auto it = parents.find(group);
      if (it == parents.end()) {
        CLI::App* g = app.add_subcommand(group, group + " subcommands");
        g->require_subcommand(1);
        it = parents.emplace(group, g).first;
      }
      parent = it->second;
    }
    CLI::App* sub = parent->add_subcommand(leaf, spec.help);
    runners.emplace_back(sub, spec.setup(*sub));
  }

  try {
    // vLLM's --config FILE: the YAML file's flags in its place, minus those the command line gives.
    // Names dashed first, so a --config file's flags (dashed too) yield to the same flag however spelt.
    std::vector<std::string> args = expand_vllm_short_options(argc, argv);
    dash_long_flag_names(args);
    negate_boolean_flags(args, app);
    args = vireo::server::expand_flag_files(args, read_text_file);
    std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse, program name last
    args.pop_back();
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const vireo::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  try {
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const vireo::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
