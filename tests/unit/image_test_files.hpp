// Hand-built image files for the limit, corruption and dataset tests: header
// bombs with valid checksums, EXIF-tagged JPEGs, truncated files.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "stoke/error.hpp"
#include "stoke/image.hpp"

namespace stoke::testing {

// The DecodeError message of decoding `bytes`, empty when it decodes.
inline std::string decode_error(std::span<const std::uint8_t> bytes, const std::string& name,
                                Image& out, DecodeOptions options = {}) {
  Decoder decoder;
  try {
    decoder.decode(bytes, name, options, out);
  } catch (const DecodeError& e) {
    return e.what();
  }
  return "";
}

inline Image gradient_image(int width, int height, int channels, int phase = 0) {
  Image image(width, height, channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        image.data()[(static_cast<std::size_t>(y) * width + x) * channels + c] =
            static_cast<std::uint8_t>((x * 5 + y * 3 + c * 70 + phase) % 256);
      }
    }
  }
  return image;
}

inline void put_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
}

// CRC-32 (PNG, zlib polynomial), bitwise: test files are small.
inline std::uint32_t crc32_of(const std::uint8_t* data, std::size_t size) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// A zlib stream holding `raw` in one stored (uncompressed) deflate block.
inline std::vector<std::uint8_t> zlib_stored(const std::vector<std::uint8_t>& raw) {
  std::vector<std::uint8_t> out = {0x78, 0x01, 0x01};
  const auto n = static_cast<std::uint16_t>(raw.size());
  out.insert(out.end(), {static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n >> 8),
                         static_cast<std::uint8_t>(~n), static_cast<std::uint8_t>(~n >> 8)});
  out.insert(out.end(), raw.begin(), raw.end());
  std::uint32_t a = 1, b = 0;
  for (auto v : raw) a = (a + v) % 65521, b = (b + a) % 65521;
  put_be32(out, (b << 16) | a);
  return out;
}

inline void png_chunk(std::vector<std::uint8_t>& out, const char* type,
                      const std::vector<std::uint8_t>& data) {
  put_be32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put_be32(out, crc32_of(out.data() + start, out.size() - start));
}

// A PNG whose IHDR (valid CRC) claims width x height RGB 8-bit, followed by a
// small valid zlib stream (a few zero rows' worth) and IEND.
inline std::vector<std::uint8_t> bomb_png(std::uint32_t width, std::uint32_t height) {
  std::vector<std::uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<std::uint8_t> ihdr;
  put_be32(ihdr, width);
  put_be32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  png_chunk(out, "IHDR", ihdr);
  png_chunk(out, "IDAT", zlib_stored(std::vector<std::uint8_t>(4096, 0)));
  png_chunk(out, "IEND", {});
  return out;
}

// Offset of the first SOF0/SOF2 marker of a JPEG.
inline std::size_t jpeg_sof(const std::vector<std::uint8_t>& jpeg) {
  for (std::size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && (jpeg[i + 1] == 0xC0 || jpeg[i + 1] == 0xC2)) return i;
  }
  throw std::runtime_error("no SOF marker");
}

// A small real JPEG whose frame header claims width x height (JPEG has no
// checksum; the scan data is that of a 16x16 image).
inline std::vector<std::uint8_t> bomb_jpeg(int width, int height) {
  const Image small = gradient_image(16, 16, 3);
  auto jpeg = encode_jpeg(small.view(), 90);
  const std::size_t sof = jpeg_sof(jpeg);
  jpeg[sof + 5] = static_cast<std::uint8_t>(height >> 8);
  jpeg[sof + 6] = static_cast<std::uint8_t>(height);
  jpeg[sof + 7] = static_cast<std::uint8_t>(width >> 8);
  jpeg[sof + 8] = static_cast<std::uint8_t>(width);
  return jpeg;
}

// The JPEG with an APP1 Exif segment (big-endian TIFF, IFD0 with one
// Orientation SHORT) inserted after SOI.
inline std::vector<std::uint8_t> with_exif_orientation(std::vector<std::uint8_t> jpeg,
                                                       int orientation) {
  std::vector<std::uint8_t> app1 = {0xFF, 0xE1,
                                    0,    0,
                                    'E',  'x',
                                    'i',  'f',
                                    0,    0,
                                    'M',  'M',
                                    0,    42,
                                    0,    0,
                                    0,    8,  // TIFF header, IFD0 at 8
                                    0,    1,  // one entry
                                    0x01, 0x12,
                                    0,    3,
                                    0,    0,
                                    0,    1,  // Orientation, SHORT, count 1
                                    0,    static_cast<std::uint8_t>(orientation),
                                    0,    0,
                                    0,    0,
                                    0,    0};  // no next IFD
  const std::size_t length = app1.size() - 2;
  app1[2] = static_cast<std::uint8_t>(length >> 8);
  app1[3] = static_cast<std::uint8_t>(length);
  jpeg.insert(jpeg.begin() + 2, app1.begin(), app1.end());
  return jpeg;
}

// The first `keep` of the bytes (a truncated tail: the header stays intact).
inline std::vector<std::uint8_t> truncated(const std::vector<std::uint8_t>& bytes, double keep) {
  return {bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() * keep)};
}

inline void put_le(std::vector<std::uint8_t>& out, std::uint32_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
}

// A BMP of `image`: bits 8 (gray image, gray palette), 24 or 32 (RGB image);
// bottom-up unless top_down. `claim_width`/`claim_height` > 0 overwrite the
// header's size without adding pixels (a header bomb).
inline std::vector<std::uint8_t> encode_bmp(ImageView image, int bits, bool top_down = false,
                                            std::int32_t claim_width = 0,
                                            std::int32_t claim_height = 0) {
  const std::size_t stride = ((static_cast<std::size_t>(image.width) * bits + 31) / 32) * 4;
  const std::uint32_t palette = bits == 8 ? 256 * 4 : 0;
  const std::uint32_t offset = 14 + 40 + palette;
  std::vector<std::uint8_t> out = {'B', 'M'};
  put_le(out, static_cast<std::uint32_t>(offset + stride * image.height), 4);
  put_le(out, 0, 4);
  put_le(out, offset, 4);
  put_le(out, 40, 4);
  put_le(out, static_cast<std::uint32_t>(claim_width ? claim_width : image.width), 4);
  const std::int32_t h = claim_height ? claim_height : image.height;
  put_le(out, static_cast<std::uint32_t>(top_down ? -h : h), 4);
  put_le(out, 1, 2);
  put_le(out, static_cast<std::uint32_t>(bits), 2);
  put_le(out, 0, 4);  // BI_RGB
  put_le(out, static_cast<std::uint32_t>(stride * image.height), 4);
  put_le(out, 2835, 4);
  put_le(out, 2835, 4);
  put_le(out, bits == 8 ? 256 : 0, 4);
  put_le(out, 0, 4);
  for (std::uint32_t i = 0; i < palette / 4; ++i)
    out.insert(out.end(), {std::uint8_t(i), std::uint8_t(i), std::uint8_t(i), 0});
  for (int row = 0; row < image.height; ++row) {
    const int y = top_down ? row : image.height - 1 - row;
    std::vector<std::uint8_t> line(stride, 0);
    for (int x = 0; x < image.width; ++x) {
      const std::uint8_t* p = image.row(y) + static_cast<std::size_t>(x) * image.channels;
      if (bits == 8) {
        line[x] = p[0];
      } else {
        const int step = bits / 8;
        line[step * x] = p[2], line[step * x + 1] = p[1], line[step * x + 2] = p[0];
        if (bits == 32) line[step * x + 3] = 255;
      }
    }
    out.insert(out.end(), line.begin(), line.end());
  }
  return out;
}

}  // namespace stoke::testing
