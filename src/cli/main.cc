// vireo: one binary, subcommands registered by the files of src/cli/.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "cli/command_registry.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Vireo: an LLM inference engine and OpenAI-compatible server"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vireo 0.1.0");

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
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
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
