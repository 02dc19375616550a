// JPEG and PNG decode through stoke::Decoder: header, output size, and a full
// decode with options chosen from the input length (as stored, gray, RGB,
// DCT-scaled, 16-bit kept or reduced), reusing one Decoder and Image as the loader does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.hpp"
#include "stoke/image.hpp"

namespace stoke::fuzz {

inline void decode_image(const std::uint8_t* data, std::size_t size) {
  static Decoder decoder;
  static Image image;
  scratch_dir();  // quiets the log
  const std::span<const std::uint8_t> bytes(data, size);
  DecodeOptions options;
  options.channels = static_cast<int>(size % 3 == 2 ? 3 : size % 3);
  options.min_width = options.min_height = static_cast<int>((size / 3) % 4) * 8;
  options.keep_16_bit = (size / 12) % 2 == 1;  // 16-bit PNG/TIFF: the 16-bit output too
  accept_stoke_errors([&] { (void)decoder.info(bytes, "fuzz"); });
  accept_stoke_errors([&] { (void)decoder.output_info(bytes, "fuzz", options); });
  accept_stoke_errors([&] { decoder.decode(bytes, "fuzz", options, image); });
}

}  // namespace stoke::fuzz
