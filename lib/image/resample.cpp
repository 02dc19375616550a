// Separable resize: a vertical pass (uint8 source rows -> one int16 row, the
// only pass that touches the full-size source) then a horizontal gather pass
// on the much shorter row, then a store that rounds to uint8 or normalizes and
// writes one CHW plane row. Coefficients are tabulated once per
// (size, size, filter) and kept; row scratch is kept, so steady state
// allocates nothing. 16-bit sources take a float path with the same
// coefficient tables (resample_row16): the vertical pass in the level's table
// (vertical_u16), the horizontal pass in plain C++.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "image/kernels.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"

namespace stoke {
namespace {

using image_detail::RowKernels;

// One axis's filter: output i reads source taps start[i] .. start[i]+taps-1.
struct AxisPlan {
  int src = 0;
  int dst = 0;
  bool area = false;
  int taps = 0;
  std::vector<std::int32_t> start;
  std::vector<float> weights;  // k-major: weights[k * dst + i]
  // The same for the passes that consume them: x: weights / 128 (the vertical
  // pass leaves pixel * 128); y: Q15 for the fixed-point vertical pass.
  std::vector<float> scaled;
  std::vector<std::int16_t> q15;
};

bool use_area(ResizeFilter filter, int src, int dst) {
  if (src <= dst) return false;  // upscale or same: bilinear (area would be a box)
  if (filter == ResizeFilter::kArea) return true;
  if (filter == ResizeFilter::kAuto) return src >= 2 * dst;
  return false;
}

// Returns whether the plan changed.
bool build_axis(AxisPlan& plan, int src, int dst, ResizeFilter filter) {
  const bool area = use_area(filter, src, dst);
  if (plan.src == src && plan.dst == dst && plan.area == area && plan.taps > 0) return false;
  plan.src = src;
  plan.dst = dst;
  plan.area = area;
  const double scale = static_cast<double>(src) / dst;
  if (src == dst) {
    plan.taps = 1;
  } else if (area) {
    plan.taps = std::min(src, static_cast<int>(std::ceil(scale)) + 1);
  } else {
    plan.taps = std::min(src, 2);
  }
  plan.start.assign(dst, 0);
  plan.weights.assign(static_cast<std::size_t>(plan.taps) * dst, 0.f);
  std::vector<double> w(plan.taps);
  for (int i = 0; i < dst; ++i) {
    std::fill(w.begin(), w.end(), 0.0);
    int start = i;
    if (src == dst) {
      w[0] = 1.0;
    } else if (area) {
      const double lo = i * scale;
      const double hi = (i + 1) * scale;
      const int first = static_cast<int>(std::floor(lo));
      const int last = std::min(src - 1, static_cast<int>(std::ceil(hi)) - 1);
      start = std::min(first, src - plan.taps);
      for (int j = first; j <= last; ++j) {
        const double overlap = std::min<double>(j + 1, hi) - std::max<double>(j, lo);
        if (overlap > 0) w[j - start] = overlap / scale;
      }
    } else {
      double center = (i + 0.5) * scale - 0.5;
      if (center < 0) center = 0;
      int x0 = static_cast<int>(std::floor(center));
      double frac = center - x0;
      if (x0 >= src - 1) {
        x0 = src - 1;
        frac = 0;
      }
      start = std::min(x0, src - plan.taps);
      w[x0 - start] += 1.0 - frac;
      if (frac > 0) w[x0 + 1 - start] += frac;
    }
    plan.start[i] = start;
    for (int k = 0; k < plan.taps; ++k) {
      plan.weights[static_cast<std::size_t>(k) * dst + i] = static_cast<float>(w[k]);
    }
  }
  plan.scaled.resize(plan.weights.size());
  plan.q15.resize(plan.weights.size());
  for (std::size_t j = 0; j < plan.weights.size(); ++j) {
    plan.scaled[j] = plan.weights[j] * (1.f / 128.f);  // exact: a power of two
    plan.q15[j] =
        static_cast<std::int16_t>(std::min(32767L, std::lround(plan.weights[j] * 32768.0)));
  }
  return true;
}

void check_view(ImageView src, const char* what) {
  if (!src.data || src.width <= 0 || src.height <= 0 || (src.channels != 1 && src.channels != 3) ||
      (src.bit_depth != 8 && src.bit_depth != 16) ||
      src.stride < static_cast<std::size_t>(src.width) * src.channels * src.sample_bytes()) {
    throw InvalidArgument(std::string("stoke::Resampler: bad ") + what + " view (" +
                          std::to_string(src.width) + "x" + std::to_string(src.height) + "x" +
                          std::to_string(src.channels) + ", " + std::to_string(src.bit_depth) +
                          " bit, stride " + std::to_string(src.stride) +
                          "); channels must be 1 or 3, 8 or 16 bit and stride >= width * channels "
                          "* bytes per sample");
  }
}

// 16-bit samples: round to nearest even, clamped to [0, 65535].
std::uint16_t round_u16(float v) {
  return static_cast<std::uint16_t>(std::nearbyint(std::clamp(v, 0.f, 65535.f)));
}

}  // namespace

struct Resampler::Impl {
  SimdLevel level;
  const RowKernels* kernels;
  AxisPlan x;
  AxisPlan y;
  int channels = 0;
  // Horizontal gather tables: planar (one output per x; channel by pointer
  // offset) and interleaved (one output per x*C + c).
  std::vector<std::int32_t> planar_index;
  std::vector<std::int32_t> interleaved_index;
  std::vector<float> interleaved_weights;
  bool interleaved_ready = false;
  std::vector<std::int16_t> acc;  // vertical pass output: pixel * 128
  std::vector<float> row;
  std::vector<float> planes;  // RGB to half/bfloat16: normalized-free planes before the store
  std::vector<const std::uint8_t*> rows;
  std::vector<std::int16_t> row_weights;
  std::vector<const std::uint16_t*> rows16;  // 16-bit sources: the vertical pass's rows,
  std::vector<float> float_weights;          // their weights
  std::vector<float> wide;                   // 16-bit sources: the vertical pass's float row

  void prepare(ImageView src, int width, int height, ResizeFilter filter) {
    const bool x_changed = build_axis(x, src.width, width, filter);
    build_axis(y, src.height, height, filter);
    const int c = src.channels;
    if (x_changed || channels != c) {
      channels = c;
      planar_index.resize(width);
      for (int i = 0; i < width; ++i) planar_index[i] = x.start[i] * c;
      interleaved_ready = false;
    }
    // Padding: horizontal_rgb reads one float past the row and writes one past.
    acc.resize(static_cast<std::size_t>(src.width) * c + 16, 0);
    row.resize(static_cast<std::size_t>(width) * c + 16);
    if (c == 3) planes.resize(static_cast<std::size_t>(width) * 3);
    rows.resize(y.taps);
    row_weights.resize(y.taps);
    if (src.bit_depth == 16) {
      wide.resize(static_cast<std::size_t>(src.width) * c);
      rows16.resize(y.taps);
      float_weights.resize(y.taps);
    }
  }

  // 16-bit sources, in float from the full-precision samples (the
  // same taps and weights as the 8-bit passes without fixed point): the
  // vertical pass for output row `out_y` into wide, then the horizontal pass
  // into row (interleaved, x.dst * channels values in 16-bit units).
  void resample_row16(ImageView src, int out_y) {
    const std::size_t n = static_cast<std::size_t>(src.width) * src.channels;
    for (int k = 0; k < y.taps; ++k) {
      rows16[k] = src.row16(y.start[out_y] + k);
      float_weights[k] = y.weights[static_cast<std::size_t>(k) * y.dst + out_y];
    }
    kernels->vertical_u16(rows16.data(), float_weights.data(), y.taps, n, wide.data());
    const int c = src.channels;
    for (int ox = 0; ox < x.dst; ++ox) {
      const float* tap = wide.data() + static_cast<std::size_t>(x.start[ox]) * c;
      for (int ch = 0; ch < c; ++ch) {
        float sum = x.weights[ox] * tap[ch];
        for (int k = 1; k < x.taps; ++k)
          sum += x.weights[static_cast<std::size_t>(k) * x.dst + ox] * tap[k * c + ch];
        row[static_cast<std::size_t>(ox) * c + ch] = sum;
      }
    }
  }

  // The fused pass from a 16-bit source: value / 257 (exact for v = u * 257,
  // so a widened 8-bit image gives the 8-bit path's input), then the same
  // affine stores as the 8-bit path.
  void normalize16(ImageView src, int width, int height, const float* scale, const float* bias,
                   OutputDtype dtype, void* dst) {
    const int c = src.channels;
    const std::size_t w = static_cast<std::size_t>(width);
    const std::size_t plane_size = w * height;
    const std::size_t n = w * c;
    const float ones[3] = {1.f, 1.f, 1.f}, zeros[3] = {0.f, 0.f, 0.f};
    for (int oy = 0; oy < height; ++oy) {
      resample_row16(src, oy);
      float* r = row.data();
      for (std::size_t i = 0; i < n; ++i) r[i] = r[i] / 257.f;  // contiguous: vectorized
      const std::size_t offset = oy * w;
      const float* source = r;  // channel ch's row at source + ch * w (one channel, or planes)
      if (c == 3) {             // as the 8-bit path: the table's split into planes
        if (dtype == OutputDtype::kFloat32) {
          float* out = static_cast<float*>(dst);
          kernels->store_planes_rgb(r, w, scale, bias, out + offset, out + plane_size + offset,
                                    out + 2 * plane_size + offset);
          continue;
        }
        float* p = planes.data();
        kernels->store_planes_rgb(r, w, ones, zeros, p, p + w, p + 2 * w);
        source = p;
      }
      for (int ch = 0; ch < c; ++ch) {
        const std::size_t at = ch * plane_size + offset;
        const float* in = source + ch * w;
        if (dtype == OutputDtype::kFloat32) {
          kernels->store_f32(in, w, scale[ch], bias[ch], static_cast<float*>(dst) + at);
        } else if (dtype == OutputDtype::kFloat16) {
          kernels->store_f16(in, w, scale[ch], bias[ch], static_cast<std::uint16_t*>(dst) + at);
        } else {
          kernels->store_bf16(in, w, scale[ch], bias[ch], static_cast<std::uint16_t*>(dst) + at);
        }
      }
    }
  }

  void prepare_interleaved() {
    if (interleaved_ready) return;
    const int c = channels;
    const std::size_t n = static_cast<std::size_t>(x.dst) * c;
    interleaved_index.resize(n);
    interleaved_weights.resize(n * x.taps);
    for (std::size_t j = 0; j < n; ++j) {
      const int i = static_cast<int>(j / c);
      interleaved_index[j] = x.start[i] * c + static_cast<int>(j % c);
      for (int k = 0; k < x.taps; ++k) {
        interleaved_weights[k * n + j] = x.scaled[static_cast<std::size_t>(k) * x.dst + i];
      }
    }
    interleaved_ready = true;
  }

  // The vertical pass for output row `out_y` into acc.
  void vertical(ImageView src, int out_y) {
    const int taps = y.taps;
    for (int k = 0; k < taps; ++k) {
      rows[k] = src.row(y.start[out_y] + k);
      row_weights[k] = y.q15[static_cast<std::size_t>(k) * y.dst + out_y];
    }
    kernels->vertical(rows.data(), row_weights.data(), taps,
                      static_cast<std::size_t>(src.width) * src.channels, acc.data());
  }
};

Resampler::Resampler(SimdLevel level) : impl_(std::make_unique<Impl>()) {
  impl_->level = level;
  impl_->kernels = &image_detail::row_kernels(level);
}
Resampler::~Resampler() = default;
Resampler::Resampler(Resampler&&) noexcept = default;
Resampler& Resampler::operator=(Resampler&&) noexcept = default;

SimdLevel Resampler::level() const noexcept {
  return impl_->level;
}

void Resampler::resize(ImageView src, MutableImageView dst, ResizeFilter filter) {
  check_view(src, "source");
  check_view(dst, "destination");
  if (src.channels != dst.channels) {
    throw InvalidArgument("stoke::Resampler::resize: source has " + std::to_string(src.channels) +
                          " channels, destination " + std::to_string(dst.channels) +
                          "; convert with convert_channels first");
  }
  if (src.bit_depth != dst.bit_depth) {
    throw InvalidArgument("stoke::Resampler::resize: source is " + std::to_string(src.bit_depth) +
                          " bit, destination " + std::to_string(dst.bit_depth) +
                          " bit; convert with convert_depth first");
  }
  auto& s = *impl_;
  s.prepare(src, dst.width, dst.height, filter);
  const std::size_t n = static_cast<std::size_t>(dst.width) * dst.channels;
  if (src.bit_depth == 16) {
    for (int oy = 0; oy < dst.height; ++oy) {
      s.resample_row16(src, oy);
      std::uint16_t* out = dst.row16(oy);
      for (std::size_t i = 0; i < n; ++i) out[i] = round_u16(s.row[i]);
    }
    return;
  }
  if (dst.channels == 3) {
    for (int oy = 0; oy < dst.height; ++oy) {
      s.vertical(src, oy);
      s.kernels->horizontal_rgb(s.acc.data(), s.planar_index.data(), s.x.scaled.data(), dst.width,
                                s.x.taps, dst.width, s.row.data());
      s.kernels->store_u8(s.row.data(), n, dst.row(oy));
    }
    return;
  }
  s.prepare_interleaved();
  for (int oy = 0; oy < dst.height; ++oy) {
    s.vertical(src, oy);
    s.kernels->horizontal(s.acc.data(), s.interleaved_index.data(), s.interleaved_weights.data(), n,
                          s.x.taps, dst.channels, n, s.row.data());
    s.kernels->store_u8(s.row.data(), n, dst.row(oy));
  }
}

void Resampler::resize_normalize_chw(ImageView src, int width, int height, ResizeFilter filter,
                                     const Normalization& norm, OutputDtype dtype, void* dst) {
  check_view(src, "source");
  if (width <= 0 || height <= 0 || !dst) {
    throw InvalidArgument("stoke::Resampler::resize_normalize_chw: bad target " +
                          std::to_string(width) + "x" + std::to_string(height));
  }
  if (dtype == OutputDtype::kUint8) {
    throw InvalidArgument(
        "stoke::Resampler::resize_normalize_chw: writes float32/float16/bfloat16 planes; for uint8 "
        "HWC "
        "use resize()");
  }
  auto& s = *impl_;
  s.prepare(src, width, height, filter);
  const int c = src.channels;
  float scale[3], bias[3];
  for (int ch = 0; ch < c; ++ch) norm.affine(ch, scale[ch], bias[ch]);
  if (src.bit_depth == 16) {
    s.normalize16(src, width, height, scale, bias, dtype, dst);
    return;
  }
  const std::size_t plane = static_cast<std::size_t>(width) * height;
  const std::size_t w = static_cast<std::size_t>(width);
  if (c == 3) {
    const float ones[3] = {1.f, 1.f, 1.f}, zeros[3] = {0.f, 0.f, 0.f};
    const bool f32 = dtype == OutputDtype::kFloat32;
    for (int oy = 0; oy < height; ++oy) {
      s.vertical(src, oy);
      s.kernels->horizontal_rgb(s.acc.data(), s.planar_index.data(), s.x.scaled.data(), w, s.x.taps,
                                w, s.row.data());
      const std::size_t offset = oy * w;
      if (f32) {
        float* out = static_cast<float*>(dst);
        s.kernels->store_planes_rgb(s.row.data(), w, scale, bias, out + offset,
                                    out + plane + offset, out + 2 * plane + offset);
        continue;
      }
      float* p = s.planes.data();
      s.kernels->store_planes_rgb(s.row.data(), w, ones, zeros, p, p + w, p + 2 * w);
      auto* out = static_cast<std::uint16_t*>(dst);
      for (int ch = 0; ch < 3; ++ch) {
        if (dtype == OutputDtype::kFloat16) {
          s.kernels->store_f16(p + ch * w, w, scale[ch], bias[ch], out + ch * plane + offset);
        } else {
          s.kernels->store_bf16(p + ch * w, w, scale[ch], bias[ch], out + ch * plane + offset);
        }
      }
    }
    return;
  }
  for (int oy = 0; oy < height; ++oy) {
    s.vertical(src, oy);
    for (int ch = 0; ch < c; ++ch) {
      const std::size_t offset = ch * plane + oy * w;
      if (dtype == OutputDtype::kFloat32) {
        s.kernels->horizontal_affine(s.acc.data() + ch, s.planar_index.data(), s.x.scaled.data(), w,
                                     s.x.taps, c, w, scale[ch], bias[ch],
                                     static_cast<float*>(dst) + offset);
        continue;
      }
      s.kernels->horizontal(s.acc.data() + ch, s.planar_index.data(), s.x.scaled.data(), w,
                            s.x.taps, c, w, s.row.data());
      switch (dtype) {
        case OutputDtype::kFloat32:
        case OutputDtype::kUint8:  // rejected above
          break;
        case OutputDtype::kFloat16:
          s.kernels->store_f16(s.row.data(), w, scale[ch], bias[ch],
                               static_cast<std::uint16_t*>(dst) + offset);
          break;
        case OutputDtype::kBFloat16:
          s.kernels->store_bf16(s.row.data(), w, scale[ch], bias[ch],
                                static_cast<std::uint16_t*>(dst) + offset);
          break;
      }
    }
  }
}

}  // namespace stoke
