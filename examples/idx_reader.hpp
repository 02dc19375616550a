// Minimal reader for gzip-compressed IDX files (MNIST / Fashion-MNIST), for
// the example only; the data module's reader replaces it when merged.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "stoke/error.hpp"

namespace example {

struct IdxImages {
  int count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols
};

inline std::vector<std::uint8_t> gunzip_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw stoke::IoError("cannot open '" + path + "'");
  std::vector<std::uint8_t> out;
  std::uint8_t buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.insert(out.end(), buf, buf + n);
  const bool failed = n < 0;
  gzclose(f);
  if (failed) throw stoke::CorruptFile("'" + path + "': gzip stream is corrupt");
  return out;
}

inline std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

inline IdxImages read_idx_images(const std::string& path) {
  const auto b = gunzip_file(path);
  if (b.size() < 16 || be32(b, 0) != 0x00000803) throw stoke::CorruptFile("'" + path + "': not an IDX image file");
  IdxImages img;
  img.count = static_cast<int>(be32(b, 4));
  img.rows = static_cast<int>(be32(b, 8));
  img.cols = static_cast<int>(be32(b, 12));
  const std::size_t n = static_cast<std::size_t>(img.count) * img.rows * img.cols;
  if (b.size() != 16 + n) throw stoke::CorruptFile("'" + path + "': size does not match its header");
  img.pixels.assign(b.begin() + 16, b.end());
  return img;
}

inline std::vector<std::int32_t> read_idx_labels(const std::string& path) {
  const auto b = gunzip_file(path);
  if (b.size() < 8 || be32(b, 0) != 0x00000801) throw stoke::CorruptFile("'" + path + "': not an IDX label file");
  const std::size_t n = be32(b, 4);
  if (b.size() != 8 + n) throw stoke::CorruptFile("'" + path + "': size does not match its header");
  return {b.begin() + 8, b.end()};
}

}  // namespace example
