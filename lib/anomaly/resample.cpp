// Resampling as PyTorch defines it (see resample.hpp).
#include "anomaly/resample.hpp"

#include <algorithm>
#include <cmath>

namespace stoke::anomaly_detail {

namespace {

// PyTorch's area_pixel_compute_source_index for align_corners false.
float bilinear_source(std::int64_t dst, float scale) {
  return std::max(0.0f, scale * (static_cast<float>(dst) + 0.5f) - 0.5f);
}

// Reflects i into [0, n) without repeating the edge sample (torch "reflect").
std::int64_t reflect(std::int64_t i, std::int64_t n) {
  if (n == 1) return 0;
  const std::int64_t period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

}  // namespace

std::vector<float> resize_bilinear(std::span<const float> in, std::int64_t planes,
                                   std::int64_t in_h, std::int64_t in_w, std::int64_t out_h,
                                   std::int64_t out_w) {
  std::vector<float> out(static_cast<std::size_t>(planes * out_h * out_w));
  const float sy = static_cast<float>(in_h) / static_cast<float>(out_h);
  const float sx = static_cast<float>(in_w) / static_cast<float>(out_w);
  for (std::int64_t y = 0; y < out_h; ++y) {
    const float fy = bilinear_source(y, sy);
    const auto y0 = static_cast<std::int64_t>(fy);
    const std::int64_t y1 = std::min(y0 + 1, in_h - 1);
    const float ly = fy - static_cast<float>(y0);
    for (std::int64_t x = 0; x < out_w; ++x) {
      const float fx = bilinear_source(x, sx);
      const auto x0 = static_cast<std::int64_t>(fx);
      const std::int64_t x1 = std::min(x0 + 1, in_w - 1);
      const float lx = fx - static_cast<float>(x0);
      for (std::int64_t p = 0; p < planes; ++p) {
        const float* src = in.data() + p * in_h * in_w;
        const float top = (1.0f - lx) * src[y0 * in_w + x0] + lx * src[y0 * in_w + x1];
        const float bottom = (1.0f - lx) * src[y1 * in_w + x0] + lx * src[y1 * in_w + x1];
        out[static_cast<std::size_t>((p * out_h + y) * out_w + x)] =
            (1.0f - ly) * top + ly * bottom;
      }
    }
  }
  return out;
}

std::vector<std::int64_t> nearest_sources(std::int64_t in_h, std::int64_t in_w, std::int64_t out_h,
                                          std::int64_t out_w) {
  std::vector<std::int64_t> from(static_cast<std::size_t>(out_h * out_w));
  const float sy = static_cast<float>(in_h) / static_cast<float>(out_h);
  const float sx = static_cast<float>(in_w) / static_cast<float>(out_w);
  for (std::int64_t y = 0; y < out_h; ++y) {
    const std::int64_t iy =
        std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(y) * sy)), in_h - 1);
    for (std::int64_t x = 0; x < out_w; ++x) {
      const std::int64_t ix =
          std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(x) * sx)), in_w - 1);
      from[static_cast<std::size_t>(y * out_w + x)] = iy * in_w + ix;
    }
  }
  return from;
}

std::vector<float> resize_nearest(std::span<const float> in, std::int64_t in_h, std::int64_t in_w,
                                  std::int64_t out_h, std::int64_t out_w) {
  const std::vector<std::int64_t> from = nearest_sources(in_h, in_w, out_h, out_w);
  std::vector<float> out(from.size());
  for (std::size_t i = 0; i < from.size(); ++i) out[i] = in[static_cast<std::size_t>(from[i])];
  return out;
}

int gaussian_kernel_size(float sigma) noexcept {
  return 2 * static_cast<int>(4.0f * sigma + 0.5f) + 1;
}

std::vector<float> gaussian_blur(std::span<const float> in, std::int64_t h, std::int64_t w,
                                 float sigma) {
  const int size = gaussian_kernel_size(sigma);
  const int half = size / 2;
  std::vector<double> exact(static_cast<std::size_t>(size));
  double sum = 0.0;
  for (int i = 0; i < size; ++i) {
    const double x = i - half;
    exact[static_cast<std::size_t>(i)] = std::exp(-x * x / (2.0 * sigma * sigma));
    sum += exact[static_cast<std::size_t>(i)];
  }
  // float taps and sums, as kornia's float32 convolution: 33 products per
  // pass round to ~1e-7 of the map. Both passes are row-wise a += tap * b
  // (vectorized): the horizontal one over a reflected copy of the row, the
  // vertical one over the reflected rows.
  std::vector<float> taps(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i)
    taps[static_cast<std::size_t>(i)] =
        static_cast<float>(exact[static_cast<std::size_t>(i)] / sum);
  std::vector<float> line(static_cast<std::size_t>(w + 2 * half));
  std::vector<float> rows(static_cast<std::size_t>(h * w), 0.0f);
  for (std::int64_t y = 0; y < h; ++y) {
    const float* src = in.data() + y * w;
    for (std::int64_t i = 0; i < w + 2 * half; ++i)
      line[static_cast<std::size_t>(i)] = src[reflect(i - half, w)];
    float* dst = rows.data() + y * w;
    for (int k = 0; k < size; ++k) {
      const float t = taps[static_cast<std::size_t>(k)];
      const float* from = line.data() + k;
      for (std::int64_t x = 0; x < w; ++x) dst[x] += t * from[x];
    }
  }
  std::vector<float> out(static_cast<std::size_t>(h * w), 0.0f);
  for (std::int64_t y = 0; y < h; ++y) {
    float* dst = out.data() + y * w;
    for (int k = 0; k < size; ++k) {
      const float t = taps[static_cast<std::size_t>(k)];
      const float* from = rows.data() + reflect(y + k - half, h) * w;
      for (std::int64_t x = 0; x < w; ++x) dst[x] += t * from[x];
    }
  }
  return out;
}

}  // namespace stoke::anomaly_detail
