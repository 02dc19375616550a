// BMP decode through stoke::Decoder (corpus: 8-bit gray palette, 24- and
// 32-bit, bottom-up and top-down, and BMP header bombs).
#include "fuzz_image_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  stoke::fuzz::decode_image(data, size);
  return 0;
}
