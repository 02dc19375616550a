// Config::load on fuzzed environment values. Input: lines; a line starting
// with "STOKE_" is NAME=value as written, any other line's first byte picks a
// known knob (modulo their count) and the rest is its value. An empty config
// file is passed so STOKE_CONFIG never names a file to read.
#include <string_view>

#include "fuzz_util.hpp"
#include "stoke/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fz = stoke::fuzz;
  static const std::vector<std::string> names = stoke::Config::known_names();
  static const std::filesystem::path empty = [] {
    const auto p = fz::scratch_dir() / "empty.conf";
    fz::write_bytes(p, nullptr, 0);
    return p;
  }();
  stoke::ConfigLoadOptions options;
  options.file = empty;
  options.physical_cores = 2;
  auto& env = options.environment.emplace();
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const std::size_t end = std::min(rest.find('\n'), rest.size());
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 1, rest.size()));
    if (line.empty()) continue;
    if (line.starts_with("STOKE_")) {
      const std::size_t eq = std::min(line.find('='), line.size());
      env.emplace_back(std::string(line.substr(0, eq)),
                       std::string(line.substr(std::min(eq + 1, line.size()))));
    } else {
      env.emplace_back(names[static_cast<unsigned char>(line[0]) % names.size()],
                       std::string(line.substr(1)));
    }
  }
  fz::accept_stoke_errors([&] {
    stoke::Config config = stoke::Config::load(options);
    (void)config.report();
    (void)config.to_json();
  });
  return 0;
}
