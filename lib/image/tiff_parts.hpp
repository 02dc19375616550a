// What the TIFF decoder's parts share (tiff.cpp: libtiff over a buffer, the
// header, the pixels; tiff_striles.cpp: the strip and tile checks).
#pragma once

#include <tiffio.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stoke::detail::tiff {

// The bytes in memory, or (fd >= 0, header checks only) a file read with pread.
struct TiffSource {
  std::span<const std::uint8_t> bytes;
  std::uint64_t offset = 0;
  std::string messages;  // libtiff's errors and warnings, in order
  int fd = -1;
  std::uint64_t file_size = 0;
  std::uint64_t size() const noexcept { return fd >= 0 ? file_size : bytes.size(); }
};

struct Layout {
  int width = 0;
  int height = 0;
  int channels = 0;  // color channels: 1 or 3
  int samples = 0;   // samples per pixel as stored (extra samples after the color ones)
  int bits = 0;      // 8 or 16
  bool min_is_white = false;
};

// DecodeError naming the file, the reason and libtiff's messages so far.
[[noreturn]] void tiff_fail(std::string_view name, const std::string& reason,
                            const TiffSource& src);

// Every strip or tile must lie inside the file before anything is sized for it,
// and uncompressed ones must hold all their pixels (libtiff would refuse them
// only after the image is allocated).
void check_striles(TIFF* tif, std::string_view name, const TiffSource& src, const Layout& l);

}  // namespace stoke::detail::tiff
