// BMP (Windows bitmap) reading: 8-bit palette (gray when the palette is), 24-
// and 32-bit BI_RGB (and 32-bit BI_BITFIELDS with the standard BGRA masks),
// bottom-up or top-down. Everything is checked before any pixel buffer is
// sized: the header, the size limit (by the caller), then that the pixel
// array lies inside the file.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "stoke/image.hpp"

namespace stoke::detail {

struct BmpHeader {
  int width = 0;
  int height = 0;  // positive
  bool top_down = false;
  int bits = 0;  // 8, 24 or 32
  std::size_t pixel_offset = 0;
  std::size_t stride = 0;                       // bytes per stored row (4-byte aligned)
  std::array<std::uint8_t, 256 * 3> palette{};  // RGB, for 8-bit
  bool gray = false;                            // 8-bit with an all-gray palette
};

// DecodeError naming `name` for anything malformed or unsupported.
BmpHeader parse_bmp_header(std::span<const std::uint8_t> bytes, std::string_view name);

// Decodes into `out` with `channels` (1 or 3) channels; DecodeError naming
// `name` when the pixel array does not lie inside the file (checked before
// `out` is sized). Does not check a size limit: the caller does that from the
// header first.
void decode_bmp(std::span<const std::uint8_t> bytes, std::string_view name, const BmpHeader& header,
                int channels, Image& out);

}  // namespace stoke::detail
