#include "cli/command_registry.h"

namespace vireo {

std::vector<CommandSpec>& registered_commands() {
  static std::vector<CommandSpec> commands;  // function-local: safe during static init
  return commands;
}

bool register_command(std::string name, std::string help, CommandSetup setup) {
  registered_commands().push_back({std::move(name), std::move(help), std::move(setup)});
  return true;
}

}  // namespace vireo
