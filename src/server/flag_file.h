// vLLM's `vllm serve --config FILE`: a YAML file of flags, turned into command-line arguments.
#pragma once
#include <string>
#include <vector>

namespace vireo::server {

// The YAML subset vLLM's config files use: one "flag-name: value" a line (underscores read as dashes),
// '#' comments, quoted or bare scalars, flow lists "[a, b]". A scalar becomes "--flag=value" (so booleans
// work for flags too: --flag=true / --flag=false), a list "--flag" followed by its items. Throws
// vireo::Error naming the file and line for anything else (nested mappings, block lists, a bad key).
std::vector<std::string> flag_file_args(const std::string& yaml_text, const std::string& path);

// args (argv without the program name) with every "--config FILE" / "--config=FILE" replaced by the
// file's flags, minus the flags args already give (the command line wins, as in vLLM; `serve MODEL` gives
// model). read_file(path)
// returns the file's text (throws if it cannot).
std::vector<std::string> expand_flag_files(const std::vector<std::string>& args,
                                           std::string (*read_file)(const std::string& path));

}  // namespace vireo::server
