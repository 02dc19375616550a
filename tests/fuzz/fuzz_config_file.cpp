// Config::load on a fuzzed config file (`NAME = value` lines), with an empty
// environment so only the file is read.
#include "fuzz_util.hpp"
#include "stoke/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fz = stoke::fuzz;
  const auto file = fz::scratch_dir() / "stoke.conf";
  fz::write_bytes(file, data, size);
  stoke::ConfigLoadOptions options;
  options.file = file;
  options.environment.emplace();
  options.physical_cores = 2;
  fz::accept_stoke_errors([&] {
    const stoke::Config config = stoke::Config::load(options);
    (void)config.report();
    (void)config.to_json();
  });
  return 0;
}
