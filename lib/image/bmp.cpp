#include "image/bmp.hpp"

#include <string>

#include "stoke/error.hpp"

namespace stoke::detail {
namespace {

[[noreturn]] void bmp_fail(std::string_view name, const std::string& reason) {
  throw DecodeError("cannot decode image '" + std::string(name) + "': BMP: " + reason);
}

std::uint32_t le16(std::span<const std::uint8_t> b, std::size_t o) {
  return b[o] | (b[o + 1] << 8);
}
std::uint32_t le32(std::span<const std::uint8_t> b, std::size_t o) {
  return le16(b, o) | (static_cast<std::uint32_t>(le16(b, o + 2)) << 16);
}

void read_palette(std::span<const std::uint8_t> bytes, std::size_t at, std::uint32_t colors,
                  std::string_view name, BmpHeader& h) {
  if (colors == 0) colors = 256;
  if (colors > 256)
    bmp_fail(name, "palette of " + std::to_string(colors) + " colors (at most 256)");
  if (at + 4 * std::size_t{colors} > bytes.size()) bmp_fail(name, "palette is truncated");
  h.gray = true;
  for (std::uint32_t i = 0; i < colors; ++i) {
    const std::uint8_t b = bytes[at + 4 * i], g = bytes[at + 4 * i + 1], r = bytes[at + 4 * i + 2];
    h.palette[3 * i] = r, h.palette[3 * i + 1] = g, h.palette[3 * i + 2] = b;
    h.gray = h.gray && r == g && g == b;
  }
  // Indices past the palette read black; an all-gray palette stays gray.
}

}  // namespace

BmpHeader parse_bmp_header(std::span<const std::uint8_t> bytes, std::string_view name) {
  if (bytes.size() < 54)
    bmp_fail(name, "file is truncated (" + std::to_string(bytes.size()) + " bytes)");
  const std::uint32_t dib = le32(bytes, 14);
  if (dib != 40 && dib != 52 && dib != 56 && dib != 108 && dib != 124) {
    bmp_fail(name,
             "unsupported header size " + std::to_string(dib) + " (BITMAPINFOHEADER or later)");
  }
  BmpHeader h;
  const auto width = static_cast<std::int32_t>(le32(bytes, 18));
  const auto height = static_cast<std::int32_t>(le32(bytes, 22));
  if (width <= 0 || height == 0 || height == INT32_MIN) {
    bmp_fail(name,
             "header claims a size of " + std::to_string(width) + "x" + std::to_string(height));
  }
  h.width = width;
  h.top_down = height < 0;
  h.height = height < 0 ? -height : height;
  h.bits = static_cast<int>(le16(bytes, 28));
  const std::uint32_t compression = le32(bytes, 30);
  if (le16(bytes, 26) != 1) bmp_fail(name, "planes must be 1");
  if (h.bits != 8 && h.bits != 24 && h.bits != 32) {
    bmp_fail(name, "unsupported bit depth " + std::to_string(h.bits) + " (8, 24 or 32)");
  }
  const bool standard_masks = compression == 3 && h.bits == 32 && 14 + 40 + 12 <= bytes.size() &&
                              le32(bytes, 54) == 0x00FF0000u && le32(bytes, 58) == 0x0000FF00u &&
                              le32(bytes, 62) == 0x000000FFu;
  if (compression != 0 && !standard_masks) {
    bmp_fail(name,
             "unsupported compression " + std::to_string(compression) + " (uncompressed only)");
  }
  h.pixel_offset = le32(bytes, 10);
  h.stride = ((static_cast<std::size_t>(h.width) * h.bits + 31) / 32) * 4;
  if (h.bits == 8) {
    const std::size_t palette_at = 14 + dib + (compression == 3 ? 12 : 0);
    read_palette(bytes, palette_at, le32(bytes, 46), name, h);
  }
  return h;
}

void decode_bmp(std::span<const std::uint8_t> bytes, std::string_view name, const BmpHeader& h,
                int channels, Image& out) {
  const std::size_t needed =
      h.stride * static_cast<std::size_t>(h.height);  // < 2^31 * 2^31 * 4: no overflow
  if (h.pixel_offset > bytes.size() || needed > bytes.size() - h.pixel_offset) {
    bmp_fail(name, "pixel data is truncated (" + std::to_string(h.width) + "x" +
                       std::to_string(h.height) + " at " + std::to_string(h.bits) + " bits needs " +
                       std::to_string(needed) + " bytes from offset " +
                       std::to_string(h.pixel_offset) + "; the file has " +
                       std::to_string(bytes.size()) + ")");
  }
  out.reshape(h.width, h.height, channels);
  const int step = h.bits / 8;
  for (int y = 0; y < h.height; ++y) {
    const int stored_row = h.top_down ? y : h.height - 1 - y;
    const std::uint8_t* src =
        bytes.data() + h.pixel_offset + static_cast<std::size_t>(stored_row) * h.stride;
    std::uint8_t* dst = out.data() + static_cast<std::size_t>(y) * out.stride();
    for (int x = 0; x < h.width; ++x) {
      std::uint8_t r, g, b;
      if (h.bits == 8) {
        const std::uint8_t* p = &h.palette[3 * src[x]];
        r = p[0], g = p[1], b = p[2];
      } else {
        b = src[step * x], g = src[step * x + 1], r = src[step * x + 2];
      }
      if (channels == 3) {
        dst[3 * x] = r, dst[3 * x + 1] = g, dst[3 * x + 2] = b;
      } else {
        // Gray stays exact; color uses convert_channels' BT.601 luma.
        dst[x] = r == g && g == b
                     ? r
                     : static_cast<std::uint8_t>((77 * r + 150 * g + 29 * b + 128) >> 8);
      }
    }
  }
}

}  // namespace stoke::detail
