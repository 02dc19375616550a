// The header-size paths of every decoder: inputs are a limit byte then an
// image (JPEG, PNG or BMP); the corpus holds headers claiming huge sizes with
// valid checksums, which mutation from valid files rarely reaches. Besides
// the accepted-outcome rule, a decode that succeeds must respect the limit.
#include <cstdlib>

#include "fuzz_util.hpp"
#include "stoke/image.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static stoke::Decoder decoder;
  static stoke::Image image;
  stoke::fuzz::scratch_dir();  // quiets the log
  const std::span<const std::uint8_t> bytes(data + 1, size - 1);
  stoke::DecodeOptions options;
  // Limits from 1 pixel to 2^29 (3 bytes each: under the fuzzer's 2 GiB
  // allocation cap; never "none", which would let an honest decode exceed it).
  options.max_pixels = std::uint64_t{1} << (data[0] % 30);
  options.channels = data[0] & 0x20 ? 3 : 0;
  options.apply_orientation = (data[0] & 0x40) != 0;
  stoke::fuzz::accept_stoke_errors([&] { (void)decoder.output_info(bytes, "fuzz", options); });
  bool decoded = false;
  stoke::fuzz::accept_stoke_errors([&] {
    decoder.decode(bytes, "fuzz", options, image);
    decoded = true;
  });
  if (decoded && static_cast<std::uint64_t>(image.width()) * image.height() > options.max_pixels)
    std::abort();
  return 0;
}
