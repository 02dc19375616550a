// TIFF files written with libtiff itself, for the TIFF decoder's tests and
// fuzz seeds: gray or RGB, 8 or 16 bits, any libtiff compression, strips or
// tiles, either byte order, classic or BigTIFF. Needs TIFF::TIFF linked (tests/image.cmake).
#pragma once

#include <tiffio.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace stoke::testing {

struct TiffSpec {
  int width = 0;
  int height = 0;
  int channels = 1;  // 1: min-is-black gray, 3: RGB
  int bits = 8;      // 8 or 16
  std::uint16_t compression = COMPRESSION_NONE;
  int tile = 0;            // tile side (a multiple of 16); 0: strips
  int rows_per_strip = 3;  // strips only
  bool big_endian = false;
  bool big_tiff = false;  // BigTIFF (64-bit offsets) instead of classic TIFF
  int claimed_width = 0;  // > 0: the header claims this size (no pixels written)
  int claimed_height = 0;
};

// Samples in [0, 2^bits), row-major interleaved, width * height * channels.
inline std::vector<std::uint16_t> tiff_samples(const TiffSpec& s, int phase = 0) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(s.width) * s.height * s.channels);
  const std::uint32_t mask = s.bits == 16 ? 0xFFFF : 0xFF;
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<std::uint16_t>((i * 40503u + phase * 977u + (i >> 3) * 131u) & mask);
  }
  return v;
}

inline std::vector<std::uint8_t> encode_tiff(const TiffSpec& s,
                                             const std::vector<std::uint16_t>& samples) {
  const auto path =
      std::filesystem::temp_directory_path() /
      ("stoke_tiff_" + std::to_string(::getpid()) + "_" + std::to_string(s.width) + ".tif");
  const std::string mode = std::string(s.big_endian ? "wb" : "wl") + (s.big_tiff ? "8" : "");
  TIFF* tif = TIFFOpen(path.c_str(), mode.c_str());
  if (!tif) throw std::runtime_error("encode_tiff: cannot create " + path.string());
  const bool claim = s.claimed_width > 0;
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH,
               static_cast<std::uint32_t>(claim ? s.claimed_width : s.width));
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH,
               static_cast<std::uint32_t>(claim ? s.claimed_height : s.height));
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, static_cast<std::uint16_t>(s.channels));
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, static_cast<std::uint16_t>(s.bits));
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC,
               s.channels == 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(tif, TIFFTAG_COMPRESSION, s.compression);
  const std::size_t row_samples = static_cast<std::size_t>(s.width) * s.channels;
  auto pack = [&](std::size_t first, std::size_t count, std::vector<std::uint8_t>& out) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint16_t v = samples[first + i];
      if (s.bits == 8) {
        out.push_back(static_cast<std::uint8_t>(v));
      } else {  // native order: libtiff swaps on write for "wb"
        const auto* b = reinterpret_cast<const std::uint8_t*>(&v);
        out.insert(out.end(), b, b + 2);
      }
    }
  };
  bool ok = true;
  if (claim) {
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, static_cast<std::uint32_t>(s.claimed_height));
    std::vector<std::uint8_t> bytes(64, 0);
    ok = TIFFWriteRawStrip(tif, 0, bytes.data(), static_cast<tmsize_t>(bytes.size())) >= 0;
  } else if (s.tile > 0) {
    TIFFSetField(tif, TIFFTAG_TILEWIDTH, static_cast<std::uint32_t>(s.tile));
    TIFFSetField(tif, TIFFTAG_TILELENGTH, static_cast<std::uint32_t>(s.tile));
    for (int ty = 0; ty < s.height; ty += s.tile) {
      for (int tx = 0; tx < s.width; tx += s.tile) {
        std::vector<std::uint8_t> tile;
        for (int r = 0; r < s.tile; ++r) {
          for (int c = 0; c < s.tile; ++c) {
            const bool inside = ty + r < s.height && tx + c < s.width;
            const std::size_t at =
                inside ? (ty + r) * row_samples + static_cast<std::size_t>(tx + c) * s.channels : 0;
            if (inside) {
              pack(at, s.channels, tile);
            } else {
              for (int k = 0; k < s.channels * (s.bits / 8); ++k) tile.push_back(0);
            }
          }
        }
        ok = ok && TIFFWriteTile(tif, tile.data(), tx, ty, 0, 0) >= 0;
      }
    }
  } else {
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, static_cast<std::uint32_t>(s.rows_per_strip));
    for (int y = 0; y < s.height; ++y) {
      std::vector<std::uint8_t> row;
      pack(y * row_samples, row_samples, row);
      ok = ok && TIFFWriteScanline(tif, row.data(), y, 0) >= 0;
    }
  }
  TIFFClose(tif);
  std::ifstream in(path, std::ios::binary);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  if (!ok) throw std::runtime_error("encode_tiff: libtiff could not write the pixels");
  return bytes;
}

}  // namespace stoke::testing
