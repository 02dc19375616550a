// Dataset::from_idx on a fuzzed images file. Input: u16 split point (little
// endian), then the images file bytes up to the split and the labels file
// bytes after it; both are written to scratch files (plain or gzip: zlib reads
// either) and read through the public entry point.
#include <algorithm>

#include "fuzz_util.hpp"
#include "stoke/data.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fz = stoke::fuzz;
  if (size < 2) return 0;
  const std::size_t split = std::min<std::size_t>(size - 2, data[0] | (std::size_t{data[1]} << 8));
  const auto images = fz::scratch_dir() / "images.idx";
  const auto labels = fz::scratch_dir() / "labels.idx";
  fz::write_bytes(images, data + 2, split);
  fz::write_bytes(labels, data + 2 + split, size - 2 - split);
  fz::accept_stoke_errors([&] {
    const stoke::Dataset d = stoke::Dataset::from_idx(images, labels);
    if (!d.empty()) {
      (void)d.pixels(d.size() - 1);
      (void)d.fingerprint();
    }
  });
  return 0;
}
