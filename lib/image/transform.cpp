// The Image buffer, normalization parameters, and the cheap geometric and
// photometric kernels: crop (a view), flips (data movement, no per-ISA
// variants: compilers vectorize the byte copies), brightness/contrast (SIMD
// table).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "image/kernels.hpp"
#include "stoke/config.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"

namespace stoke {

void Image::reshape(int width, int height, int channels, int bit_depth) {
  if (width <= 0 || height <= 0 || (channels != 1 && channels != 3) ||
      (bit_depth != 8 && bit_depth != 16)) {
    throw InvalidArgument("stoke::Image::reshape: bad shape " + std::to_string(width) + "x" +
                          std::to_string(height) + "x" + std::to_string(channels) + ", " +
                          std::to_string(bit_depth) +
                          " bit (positive sizes, 1 or 3 channels, 8 or 16 bit)");
  }
  const std::size_t bytes =
      static_cast<std::size_t>(width) * height * channels * (bit_depth == 16 ? 2 : 1);
  if (bytes > capacity_) {
    // Uninitialized: the decoder writes every byte. Rounded up to whole uint16s.
    buffer_.reset(new std::uint16_t[(bytes + 1) / 2]);
    capacity_ = (bytes + 1) / 2 * 2;
  }
  width_ = width;
  height_ = height;
  channels_ = channels;
  bit_depth_ = bit_depth;
}

const char* to_string(ImageFormat format) noexcept {
  switch (format) {
    case ImageFormat::kJpeg:
      return "jpeg";
    case ImageFormat::kPng:
      return "png";
    case ImageFormat::kBmp:
      return "bmp";
    case ImageFormat::kTiff:
      return "tiff";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

const char* to_string(ResizeFilter filter) noexcept {
  switch (filter) {
    case ResizeFilter::kBilinear:
      return "bilinear";
    case ResizeFilter::kArea:
      return "area";
    case ResizeFilter::kAuto:
      return "auto";
  }
  return "?";
}

const char* to_string(OutputDtype dtype) noexcept {
  switch (dtype) {
    case OutputDtype::kFloat32:
      return "float32";
    case OutputDtype::kFloat16:
      return "float16";
    case OutputDtype::kBFloat16:
      return "bfloat16";
    case OutputDtype::kUint8:
      return "uint8 (HWC)";
  }
  return "?";
}

std::size_t dtype_size(OutputDtype dtype) noexcept {
  switch (dtype) {
    case OutputDtype::kFloat32:
      return 4;
    case OutputDtype::kFloat16:
    case OutputDtype::kBFloat16:
      return 2;
    case OutputDtype::kUint8:
      return 1;
  }
  return 4;
}

Normalization Normalization::mean_std(std::span<const float> mean, std::span<const float> std) {
  if (mean.empty() || mean.size() > 3 || mean.size() != std.size()) {
    throw InvalidArgument(
        "stoke::Normalization::mean_std: need 1 or 3 means and as many stds, got " +
        std::to_string(mean.size()) + " and " + std::to_string(std.size()));
  }
  Normalization n;
  n.kind = Kind::kMeanStd;
  for (int c = 0; c < 3; ++c) {
    const std::size_t i = std::min<std::size_t>(c, mean.size() - 1);
    n.mean[c] = mean[i];
    n.std[c] = std[i];
  }
  return n;
}

Normalization Normalization::min_max(float lo, float hi) {
  Normalization n;
  n.kind = Kind::kMinMax;
  n.lo = lo;
  n.hi = hi;
  return n;
}

void Normalization::affine(int channel, float& scale, float& bias) const {
  if (kind == Kind::kMeanStd) {
    const float s = std[channel];
    if (s == 0.f) {
      throw InvalidArgument("stoke::Normalization: std of channel " + std::to_string(channel) +
                            " is 0");
    }
    scale = 1.f / (255.f * s);
    bias = -mean[channel] / s;
  } else {
    if (hi == lo) throw InvalidArgument("stoke::Normalization: min-max range is empty (lo == hi)");
    scale = (hi - lo) / 255.f;
    bias = lo;
  }
}

ImageView crop(ImageView src, int x, int y, int width, int height) {
  if (x < 0 || y < 0 || width <= 0 || height <= 0 || x + width > src.width ||
      y + height > src.height) {
    throw InvalidArgument("stoke::crop: window " + std::to_string(width) + "x" +
                          std::to_string(height) + " at (" + std::to_string(x) + ", " +
                          std::to_string(y) + ") does not fit a " + std::to_string(src.width) +
                          "x" + std::to_string(src.height) + " image");
  }
  return {src.row(y) + static_cast<std::size_t>(x) * src.channels * src.sample_bytes(),
          width,
          height,
          src.channels,
          src.stride,
          src.bit_depth};
}

ImageView center_crop(ImageView src, int width, int height) {
  return crop(src, (src.width - width) / 2, (src.height - height) / 2, width, height);
}

namespace {
// splitmix64: a full-period mix so nearby seeds give unrelated windows.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

ImageView random_crop(ImageView src, int width, int height, std::uint64_t seed) {
  if (width > src.width || height > src.height || width <= 0 || height <= 0)
    return crop(src, 0, 0, width, height);
  const std::uint64_t a = mix(seed);
  const std::uint64_t b = mix(a);
  const int x = static_cast<int>(a % static_cast<std::uint64_t>(src.width - width + 1));
  const int y = static_cast<int>(b % static_cast<std::uint64_t>(src.height - height + 1));
  return crop(src, x, y, width, height);
}

namespace {
template <class T>  // uint8_t or uint16_t samples
void flip_rows(MutableImageView image) noexcept {
  const int c = image.channels;
  for (int y = 0; y < image.height; ++y) {
    T* left = reinterpret_cast<T*>(image.row(y));
    T* right = left + static_cast<std::size_t>(image.width - 1) * c;
    for (; left < right; left += c, right -= c) {
      for (int k = 0; k < c; ++k) std::swap(left[k], right[k]);
    }
  }
}
}  // namespace

void flip_horizontal(MutableImageView image) noexcept {
  if (image.bit_depth == 16) {
    flip_rows<std::uint16_t>(image);
  } else {
    flip_rows<std::uint8_t>(image);
  }
}

void flip_vertical(MutableImageView image) noexcept {
  const std::size_t bytes =
      static_cast<std::size_t>(image.width) * image.channels * image.sample_bytes();
  for (int top = 0, bottom = image.height - 1; top < bottom; ++top, --bottom) {
    std::swap_ranges(image.row(top), image.row(top) + bytes, image.row(bottom));
  }
}

void adjust_brightness_contrast(MutableImageView image, float brightness, float contrast,
                                SimdLevel level) {
  if (image.bit_depth == 16) {  // plain C++: the same form at full scale 65535, mid-gray 128 * 257
    const float beta16 = brightness * 65535.f + (1.f - contrast) * 32896.f;
    const std::size_t n = static_cast<std::size_t>(image.width) * image.channels;
    for (int y = 0; y < image.height; ++y) {
      std::uint16_t* p = image.row16(y);
      for (std::size_t i = 0; i < n; ++i) {
        const float v = std::clamp(static_cast<float>(p[i]) * contrast + beta16, 0.f, 65535.f);
        p[i] = static_cast<std::uint16_t>(std::nearbyint(v));
      }
    }
    return;
  }
  const auto& kernels = image_detail::row_kernels(level);
  const float beta = brightness * 255.f + (1.f - contrast) * 128.f;
  const std::size_t bytes = static_cast<std::size_t>(image.width) * image.channels;
  if (image.stride == bytes) {
    kernels.affine_u8(image.data, bytes * image.height, contrast, beta);
    return;
  }
  for (int y = 0; y < image.height; ++y) kernels.affine_u8(image.row(y), bytes, contrast, beta);
}

SimdLevel default_simd_level() {
  return resolve_simd(Settings{}, query_cpu());
}

}  // namespace stoke
