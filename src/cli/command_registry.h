// Subcommands register themselves here (one file per command), so main.cc never changes.
//   static const bool kRegistered = vireo::register_command("generate", "Generate text", setup_generate);
// `setup` adds the subcommand's options to `app` and returns the function main() runs when the
// subcommand was chosen; it returns the process exit code. A name may be nested: "bench serve".
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace vireo {

using CommandRunner = std::function<int()>;
using CommandSetup = std::function<CommandRunner(CLI::App& app)>;

struct CommandSpec {
  std::string name;
  std::string help;
  CommandSetup setup;
};

bool register_command(std::string name, std::string help, CommandSetup setup);
std::vector<CommandSpec>& registered_commands();

}  // namespace vireo
