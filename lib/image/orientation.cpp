// EXIF orientation: a bounds-checked walk of the JPEG markers up to the first
// scan, then of the TIFF structure inside APP1 for tag 0x0112.
#include "image/orientation.hpp"

#include <cstring>

namespace stoke::detail {
namespace {

struct TiffReader {
  std::span<const std::uint8_t> data;
  bool little = true;
  bool ok(std::size_t offset, std::size_t n) const {
    return offset <= data.size() && n <= data.size() - offset;
  }
  std::uint32_t u16(std::size_t o) const {
    return little ? data[o] | (data[o + 1] << 8) : (data[o] << 8) | data[o + 1];
  }
  std::uint32_t u32(std::size_t o) const {
    return little ? (u16(o) | (u16(o + 2) << 16)) : ((u16(o) << 16) | u16(o + 2));
  }
};

int tiff_orientation(std::span<const std::uint8_t> tiff) {
  TiffReader r{tiff};
  if (!r.ok(0, 8)) return 1;
  if (tiff[0] == 'I' && tiff[1] == 'I')
    r.little = true;
  else if (tiff[0] == 'M' && tiff[1] == 'M')
    r.little = false;
  else
    return 1;
  if (r.u16(2) != 42) return 1;
  const std::size_t ifd = r.u32(4);
  if (!r.ok(ifd, 2)) return 1;
  const std::size_t count = r.u16(ifd);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t entry = ifd + 2 + 12 * i;
    if (!r.ok(entry, 12)) return 1;
    if (r.u16(entry) != 0x0112) continue;
    if (r.u16(entry + 2) != 3 || r.u32(entry + 4) != 1) return 1;  // one SHORT
    const int value = static_cast<int>(r.u16(entry + 8));
    return value >= 1 && value <= 8 ? value : 1;
  }
  return 1;
}

}  // namespace

int jpeg_exif_orientation(std::span<const std::uint8_t> jpeg) noexcept {
  std::size_t pos = 2;  // after SOI
  while (pos + 4 <= jpeg.size()) {
    if (jpeg[pos] != 0xFF) return 1;
    const std::uint8_t marker = jpeg[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;  // scan or end: no EXIF before pixels
    const std::size_t length = (static_cast<std::size_t>(jpeg[pos + 2]) << 8) | jpeg[pos + 3];
    if (length < 2 || pos + 2 + length > jpeg.size()) return 1;
    static constexpr std::uint8_t kExif[6] = {'E', 'x', 'i', 'f', 0, 0};
    if (marker == 0xE1 && length >= 8 && std::memcmp(jpeg.data() + pos + 4, kExif, 6) == 0) {
      return tiff_orientation(jpeg.subspan(pos + 10, length - 8));
    }
    pos += 2 + length;
  }
  return 1;
}

void apply_orientation(ImageView src, int orientation, Image& dst) {
  const int w = src.width, h = src.height, c = src.channels;
  const bool swap = orientation_swaps_axes(orientation);
  dst.reshape(swap ? h : w, swap ? w : h, c);
  const int dw = dst.width(), dh = dst.height();
  for (int y = 0; y < dh; ++y) {
    std::uint8_t* out = dst.data() + static_cast<std::size_t>(y) * dst.stride();
    for (int x = 0; x < dw; ++x) {
      int sx = x, sy = y;
      switch (orientation) {
        case 2:
          sx = w - 1 - x;
          break;
        case 3:
          sx = w - 1 - x, sy = h - 1 - y;
          break;
        case 4:
          sy = h - 1 - y;
          break;
        case 5:
          sx = y, sy = x;
          break;
        case 6:
          sx = y, sy = h - 1 - x;
          break;
        case 7:
          sx = w - 1 - y, sy = h - 1 - x;
          break;
        case 8:
          sx = w - 1 - y, sy = x;
          break;
        default:
          break;
      }
      std::memcpy(out + static_cast<std::size_t>(x) * c,
                  src.row(sy) + static_cast<std::size_t>(sx) * c, c);
    }
  }
}

}  // namespace stoke::detail
