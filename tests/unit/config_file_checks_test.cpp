// STOKE_CONFIG must name a regular file of sane size; a key set twice is an
// error naming both lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "stoke/config.hpp"
#include "stoke/error.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using Env = std::vector<std::pair<std::string, std::string>>;

std::string load_error(const Env& env) {
  ConfigLoadOptions options;
  options.environment = env;
  try {
    Config::load(options);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigFileChecks, DevicesDirectoriesAndHugeFilesAreRefusedWithoutReading) {
  // /dev/zero would never end a line: it must be refused, not read.
  std::string m = load_error({{"STOKE_CONFIG", "/dev/zero"}});
  EXPECT_NE(m.find("/dev/zero"), std::string::npos) << m;
  EXPECT_NE(m.find("not a regular file"), std::string::npos) << m;
  EXPECT_NE(m.find("STOKE_CONFIG"), std::string::npos) << m;

  const fs::path dir = fs::temp_directory_path() / "stoke_config_checks_dir";
  fs::create_directories(dir);
  m = load_error({{"STOKE_CONFIG", dir.string()}});
  EXPECT_NE(m.find("is a directory"), std::string::npos) << m;
  fs::remove_all(dir);

  const fs::path huge = fs::temp_directory_path() / "stoke_config_checks_huge.conf";
  {
    std::ofstream out(huge);
    const std::string comment = "# " + std::string(1000, 'x') + "\n";
    for (int i = 0; i < 1100; ++i) out << comment;
  }
  m = load_error({{"STOKE_CONFIG", huge.string()}});
  EXPECT_NE(m.find("at most 1 MiB"), std::string::npos) << m;
  fs::remove(huge);

  m = load_error({{"STOKE_CONFIG", "/nonexistent/stoke.conf"}});
  EXPECT_NE(m.find("not found"), std::string::npos) << m;
}

TEST(ConfigFileChecks, DuplicateKeyNamesBothLines) {
  const fs::path file = fs::temp_directory_path() / "stoke_config_checks_dup.conf";
  std::ofstream(file) << "STOKE_CPU_THREADS = 2\n# comment\nprefetch_depth = 3\ncpu_threads = 4\n";
  const std::string m = load_error({{"STOKE_CONFIG", file.string()}});
  EXPECT_NE(m.find("STOKE_CPU_THREADS is set twice"), std::string::npos) << m;
  EXPECT_NE(m.find(file.string() + ":1"), std::string::npos) << m;
  EXPECT_NE(m.find(file.string() + ":4"), std::string::npos) << m;
  fs::remove(file);
}

}  // namespace
}  // namespace stoke
