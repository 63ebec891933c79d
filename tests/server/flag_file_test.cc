// vLLM's `serve --config FILE` (server/flag_file.h): the YAML subset its config files use, and the command
// line winning over the file.
#include "server/flag_file.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace vireo::server {
namespace {

using Args = std::vector<std::string>;

TEST(FlagFile, ScalarsListsCommentsAndUnderscores) {
  const std::string yaml =
      "# a vLLM serve config\n"
      "model: /models/qwen3\n"
      "host: \"127.0.0.1\"\n"
      "port: 8001   # comment after a value\n"
      "max_num_seqs: 64\n"
      "served-model-name: [alpha, 'beta']\n"
      "enable-prefix-caching: false\n"
      "api-key: 'a#b'\n"
      "\n";
  EXPECT_EQ(flag_file_args(yaml, "c.yaml"),
            (Args{"--model=/models/qwen3", "--host=127.0.0.1", "--port=8001", "--max-num-seqs=64", "--served-model-name",
                  "alpha", "beta", "--enable-prefix-caching=false", "--api-key=a#b"}));
}

TEST(FlagFile, RefusesWhatItCannotRead) {
  for (const char* yaml : {"model:\n  path: x\n", "served-model-name:\n  - a\n", "just words\n", "bad key!: 1\n",
                           "port: [1, 2\n"}) {
    try {
      flag_file_args(yaml, "c.yaml");
      ADD_FAILURE() << yaml << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--config c.yaml, line"), std::string::npos) << e.what();
    }
  }
}

std::string fake_file(const std::string& path) {
  if (path == "c.yaml") return "port: 9000\nmax-num-seqs: 8\nserved-model-name: [a, b]\nenable-prefix-caching: true\n";
  throw Error("--config " + path + ": cannot read the file");
}

TEST(FlagFile, CommandLineWins) {
  // The file's flags replace --config; flags the command line gives (in any form) are left out of the file's.
  EXPECT_EQ(expand_flag_files({"vireo", "serve", "--config", "c.yaml", "--port", "7000"}, fake_file),
            (Args{"vireo", "serve", "--max-num-seqs=8", "--served-model-name", "a", "b", "--enable-prefix-caching=true",
                  "--port", "7000"}));
  EXPECT_EQ(expand_flag_files({"vireo", "serve", "--served-model-name=x", "--no-enable-prefix-caching", "--config=c.yaml"},
                              fake_file),
            (Args{"vireo", "serve", "--served-model-name=x", "--no-enable-prefix-caching", "--port=9000",
                  "--max-num-seqs=8"}));
  EXPECT_EQ(expand_flag_files({"vireo", "serve", "--port", "1"}, fake_file), (Args{"vireo", "serve", "--port", "1"}));
  auto with_model = [](const std::string& path) {
    if (path != "m.yaml") throw Error("no");
    return std::string("model: /from/file\nport: 1\n");
  };
  EXPECT_EQ(expand_flag_files({"vireo", "serve", "/from/cli", "--config", "m.yaml"}, with_model),
            (Args{"vireo", "serve", "/from/cli", "--port=1"}));
  EXPECT_EQ(expand_flag_files({"vireo", "serve", "--config", "m.yaml"}, with_model),
            (Args{"vireo", "serve", "--model=/from/file", "--port=1"}));
  EXPECT_THROW(expand_flag_files({"vireo", "serve", "--config", "missing.yaml"}, fake_file), Error);
  EXPECT_THROW(expand_flag_files({"vireo", "serve", "--config"}, fake_file), Error);
}

}  // namespace
}  // namespace vireo::server
