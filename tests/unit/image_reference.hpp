// Shared by the pixel-kernel tests: the SIMD levels to test, seeded random
// images, and the double-precision resize reference written from the filter
// definitions (not the Resampler's tabulated plan), for 8- and 16-bit sources.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "stoke/image.hpp"

namespace stoke::testing {

// Every SIMD level this CPU runs, scalar first.
inline std::vector<SimdLevel> levels_to_test() {
  std::vector<SimdLevel> levels;
  for (int l = 0; l <= static_cast<int>(query_cpu().simd); ++l)
    levels.push_back(static_cast<SimdLevel>(l));
  return levels;
}

// Random samples from a fixed seed, 8- or 16-bit.
inline Image random_image(int width, int height, int channels, std::uint32_t seed,
                          int bit_depth = 8) {
  Image image(width, height, channels, bit_depth);
  std::mt19937 rng(seed);
  const std::size_t n = static_cast<std::size_t>(width) * height * channels;
  for (std::size_t i = 0; i < n; ++i) {
    if (bit_depth == 16) {
      image.data16()[i] = static_cast<std::uint16_t>(rng());
    } else {
      image.data()[i] = static_cast<std::uint8_t>(rng());
    }
  }
  return image;
}

inline double sample(ImageView src, int y, int i) {
  return src.bit_depth == 16 ? src.row16(y)[i] : src.row(y)[i];
}

// Per-axis weights straight from the definitions (not the tabulated plan).
inline std::vector<double> axis_weights(int src, int dst, int i, bool area) {
  std::vector<double> w(src, 0.0);
  const double scale = static_cast<double>(src) / dst;
  if (src == dst) {
    w[i] = 1.0;
  } else if (area && src > dst) {
    const double lo = i * scale, hi = (i + 1) * scale;
    for (int j = 0; j < src; ++j) {
      const double overlap = std::min<double>(j + 1, hi) - std::max<double>(j, lo);
      if (overlap > 0) w[j] = overlap / scale;
    }
  } else {
    double center = std::max(0.0, (i + 0.5) * scale - 0.5);
    int x0 = static_cast<int>(std::floor(center));
    double frac = center - x0;
    if (x0 >= src - 1) x0 = src - 1, frac = 0;
    w[x0] += 1 - frac;
    if (frac > 0) w[x0 + 1] += frac;
  }
  return w;
}

inline bool area_axis(ResizeFilter filter, int src, int dst) {
  if (src <= dst) return false;
  return filter == ResizeFilter::kArea || (filter == ResizeFilter::kAuto && src >= 2 * dst);
}

// out[(y * w + x) * C + c] in pixel units of the source's depth (before
// normalization).
inline std::vector<double> reference_resize(ImageView src, int width, int height,
                                            ResizeFilter filter) {
  const int c = src.channels;
  std::vector<double> out(static_cast<std::size_t>(width) * height * c, 0.0);
  for (int y = 0; y < height; ++y) {
    const auto wy = axis_weights(src.height, height, y, area_axis(filter, src.height, height));
    for (int x = 0; x < width; ++x) {
      const auto wx = axis_weights(src.width, width, x, area_axis(filter, src.width, width));
      for (int sy = 0; sy < src.height; ++sy) {
        if (wy[sy] == 0) continue;
        for (int sx = 0; sx < src.width; ++sx) {
          if (wx[sx] == 0) continue;
          for (int ch = 0; ch < c; ++ch) {
            out[(static_cast<std::size_t>(y) * width + x) * c + ch] +=
                wy[sy] * wx[sx] * sample(src, sy, sx * c + ch);
          }
        }
      }
    }
  }
  return out;
}

}  // namespace stoke::testing
