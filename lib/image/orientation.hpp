// EXIF orientation of JPEG files: reading the tag from the APP1 segment and
// turning a decoded image upright.
#pragma once

#include <cstdint>
#include <span>

#include "stoke/image.hpp"

namespace stoke::detail {

// The EXIF orientation (1..8; 1 = stored upright) of a JPEG's first APP1
// "Exif" segment; 1 when there is none or it is malformed (never throws,
// never reads outside `jpeg`).
int jpeg_exif_orientation(std::span<const std::uint8_t> jpeg) noexcept;

// Orientations 5..8 swap width and height.
inline bool orientation_swaps_axes(int orientation) noexcept {
  return orientation >= 5 && orientation <= 8;
}

// dst = src turned upright for `orientation` (2: mirrored, 3: 180 degrees,
// 4: flipped, 5: transposed, 6: rotate 90 clockwise, 7: transversed,
// 8: rotate 90 counter-clockwise). dst is reshaped.
void apply_orientation(ImageView src, int orientation, Image& dst);

}  // namespace stoke::detail
