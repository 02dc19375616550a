// Dataset::from_manifest on a fuzzed CSV, with skip_corrupt off and on. The
// scratch folder holds two small valid images (a.jpg, b.png) and a corrupt
// one (bad.jpg) so that relative paths in the corpus resolve.
#include "fuzz_fixtures.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fz = stoke::fuzz;
  static const bool ready = (fz::write_manifest_images(fz::scratch_dir()), true);
  (void)ready;
  const auto csv = fz::scratch_dir() / "manifest.csv";
  fz::write_bytes(csv, data, size);
  for (bool skip : {false, true}) {
    stoke::DatasetOptions options;
    options.skip_corrupt = skip;
    fz::accept_stoke_errors([&] {
      const stoke::Dataset d = stoke::Dataset::from_manifest(csv, options);
      (void)d.report().to_string();
      if (!d.empty()) (void)stoke::manifest_split(d);
    });
  }
  return 0;
}
