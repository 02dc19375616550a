// PNG decode through stoke::Decoder (corpus: synthetic images as 8/16-bit,
// gray and RGB PNG).
#include "fuzz_image_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  stoke::fuzz::decode_image(data, size);
  return 0;
}
