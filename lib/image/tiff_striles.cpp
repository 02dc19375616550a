// The TIFF decoder's strip and tile checks (tiff_parts.hpp): what the file
// lists against what its header claims, before anything is sized from it.
#include <algorithm>
#include <cstring>
#include <string>

#include "image/tiff_parts.hpp"

namespace stoke::detail::tiff {
namespace {

// How many values the first directory's offset and byte count tags list.
// libtiff pads a shorter array with zeros (and may replace zero byte counts by
// estimates), so after opening the directory only the file itself tells.
struct ListedStriles {
  std::uint64_t offsets = 0;
  std::uint64_t byte_counts = 0;
  bool has_byte_counts = false;
};

std::uint64_t read_uint(const std::uint8_t* p, int n, bool big_endian) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[big_endian ? i : n - 1 - i];
  return v;
}

// As libtiff reads the directory: a repeated tag's first entry counts; Strip-
// and TileOffsets (and the byte counts) share one field, the later entry wins.
ListedStriles listed_striles(TIFF* tif, std::span<const std::uint8_t> bytes) {
  const bool big = TIFFIsBigTIFF(tif) != 0, be = TIFFIsBigEndian(tif) != 0;
  const std::size_t count_bytes = big ? 8 : 2, entry_bytes = big ? 20 : 12;
  const std::uint64_t at = TIFFCurrentDirOffset(tif);
  ListedStriles listed;
  if (at > bytes.size() || bytes.size() - at < count_bytes) return listed;  // libtiff read it
  const std::uint64_t entries =
      std::min<std::uint64_t>(read_uint(bytes.data() + at, static_cast<int>(count_bytes), be),
                              (bytes.size() - at - count_bytes) / entry_bytes);
  bool seen[4] = {};  // StripOffsets, StripByteCounts, TileOffsets, TileByteCounts
  for (std::uint64_t i = 0; i < entries; ++i) {
    const std::uint8_t* entry = bytes.data() + at + count_bytes + i * entry_bytes;
    const auto tag = read_uint(entry, 2, be);
    const std::uint64_t count = read_uint(entry + 4, big ? 8 : 4, be);
    const int k = tag == TIFFTAG_STRIPOFFSETS      ? 0
                  : tag == TIFFTAG_STRIPBYTECOUNTS ? 1
                  : tag == TIFFTAG_TILEOFFSETS     ? 2
                  : tag == TIFFTAG_TILEBYTECOUNTS  ? 3
                                                   : -1;
    if (k < 0 || seen[k]) continue;
    seen[k] = true;
    if (k % 2 == 0) {
      listed.offsets = count;
    } else {
      listed.byte_counts = count, listed.has_byte_counts = true;
    }
  }
  return listed;
}

// libtiff presents one large uncompressed strip as many (ChopUpSingleUncompressedStrip,
// TryChopUpUncompressedBigTiff): then each strip starts where the one before ends.
bool chopped_by_libtiff(TIFF* tif, std::uint32_t count) {
  std::uint16_t compression = 0, planar = 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  if (TIFFIsTiled(tif) || compression != COMPRESSION_NONE || planar != PLANARCONFIG_CONTIG)
    return false;
  for (std::uint32_t i = 1; i < count; ++i) {
    const std::uint64_t end = TIFFGetStrileOffset(tif, i - 1) + TIFFGetStrileByteCount(tif, i - 1);
    if (TIFFGetStrileOffset(tif, i) != end) return false;
  }
  return true;
}

// A header claiming more strips or tiles than the file lists (a few bytes can
// claim a 100 MB image) is refused before anything is sized for it.
void check_listed(TIFF* tif, std::string_view name, const TiffSource& src, std::uint32_t count,
                  const std::string& what) {
  const ListedStriles listed = listed_striles(tif, src.bytes);
  const bool short_offsets = listed.offsets < count;
  const bool short_counts = listed.has_byte_counts && listed.byte_counts < count;
  if ((!short_offsets && !short_counts) || chopped_by_libtiff(tif, count)) return;
  tiff_fail(name,
            "the header claims " + std::to_string(count) + " " + what + "s but the file lists " +
                (short_offsets ? "offsets" : "byte counts") + " for " +
                std::to_string(short_offsets ? listed.offsets : listed.byte_counts) +
                ": the file is truncated or damaged",
            src);
}

// Bytes strip or tile `i` decodes to (the last strip may have fewer rows).
std::uint64_t strile_decoded_bytes(TIFF* tif, std::uint32_t i, std::uint32_t rows_per_strip,
                                   std::uint32_t height) {
  if (TIFFIsTiled(tif)) return TIFFTileSize64(tif);
  const std::uint64_t first_row = static_cast<std::uint64_t>(i) * rows_per_strip;
  const std::uint64_t rows = std::min<std::uint64_t>(rows_per_strip, height - first_row);
  return TIFFVStripSize64(tif, static_cast<std::uint32_t>(rows));
}

}  // namespace

// Every strip or tile must lie inside the file before anything is sized for it,
// and uncompressed ones must hold all their pixels (libtiff would refuse them
// only after the image is allocated).
void check_striles(TIFF* tif, std::string_view name, const TiffSource& src, const Layout& l) {
  const std::uint32_t count = TIFFIsTiled(tif) ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
  const std::string what = TIFFIsTiled(tif) ? "tile" : "strip";
  if (count == 0) tiff_fail(name, "no strips or tiles", src);
  check_listed(tif, name, src, count, what);
  std::uint16_t compression = 0;
  std::uint32_t rows_per_strip = 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rows_per_strip);
  const auto height = static_cast<std::uint32_t>(l.height);
  rows_per_strip = std::clamp<std::uint32_t>(rows_per_strip, 1, height);
  auto which = [&](std::uint32_t i) {
    return what + " " + std::to_string(i) + " of " + std::to_string(count);
  };
  for (std::uint32_t i = 0; i < count; ++i) {
    int error = 0;
    const std::uint64_t offset = TIFFGetStrileOffsetWithErr(tif, i, &error);
    const std::uint64_t length = error ? 0 : TIFFGetStrileByteCountWithErr(tif, i, &error);
    if (error || length == 0 || offset > src.bytes.size() || length > src.bytes.size() - offset) {
      tiff_fail(name,
                which(i) + " lies outside the file (offset " + std::to_string(offset) + ", " +
                    std::to_string(length) + " bytes; the file has " +
                    std::to_string(src.bytes.size()) + ") : the file is truncated or damaged",
                src);
    }
    if (compression != COMPRESSION_NONE) continue;
    const std::uint64_t needed = strile_decoded_bytes(tif, i, rows_per_strip, height);
    if (length < needed) {
      tiff_fail(name,
                which(i) + " holds " + std::to_string(length) + " bytes but its pixels take " +
                    std::to_string(needed) + " uncompressed: the file is truncated or damaged",
                src);
    }
  }
}

}  // namespace stoke::detail::tiff
