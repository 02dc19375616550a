// TIFF decode through stoke::Decoder (corpus: gray and RGB, 8 and 16 bit,
// none/LZW/Deflate, strips and tiles, both byte orders, and a TIFF header bomb).
#include "fuzz_image_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  stoke::fuzz::decode_image(data, size);
  return 0;
}
