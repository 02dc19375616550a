// Pixel kernels: every SIMD level this CPU runs against the scalar path (same
// arithmetic order, so bit-exact) and against a double-precision reference
// written from the formula, on odd sizes, with guard values around outputs.
// The 300x200 -> 37x29 shape sums ten taps per axis in the area filter.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "image/kernels.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"
#include "unit/image_reference.hpp"

namespace stoke {
namespace {

using image_detail::bfloat16_to_float;
using image_detail::half_to_float;

// Tolerances vs the double reference, in output units, one row per dtype:
// float32 accumulates ~taps^2 roundings of 2^-24 relative on values up to 255
// times the normalization scale; half and bfloat16 add their own rounding
// (2^-11 and 2^-8 relative).
struct Tolerance {
  double abs;
  double rel;
};
constexpr Tolerance kTolerance[] = {
    {1e-4, 1e-5},  // float32
    {1e-4, 1e-3},  // float16: 2^-11 relative rounding, rounded up
    {1e-4, 8e-3},  // bfloat16: 2^-8 relative rounding, rounded up
};
// The vertical pass is fixed point (pixel * 128, Q15 weights): on top of the
// dtype's tolerance, up to (taps + 1) / 128 of a pixel step (kernels.hpp).
double fixed_point_pixels(int src, int dst, ResizeFilter filter) {
  int taps = 1;
  if (src != dst) {
    const bool area = src > dst && (filter == ResizeFilter::kArea ||
                                    (filter == ResizeFilter::kAuto && src >= 2 * dst));
    taps = area ? std::min(src, static_cast<int>(std::ceil(static_cast<double>(src) / dst)) + 1)
                : std::min(src, 2);
  }
  return (taps + 1) / 128.0;
}

constexpr std::uint8_t kGuardByte = 0xA5;
constexpr std::size_t kGuard = 64;

using testing::levels_to_test;
using testing::random_image;
using testing::reference_resize;

struct Shape {
  int sw, sh, dw, dh, c;
};
// Odd sizes, up/down, large downscale (area), identity, one-pixel edges.
constexpr Shape kShapes[] = {{37, 23, 19, 11, 3}, {13, 9, 31, 17, 3},  {101, 67, 10, 7, 3},
                             {45, 33, 45, 33, 3}, {53, 41, 17, 29, 1}, {7, 5, 1, 1, 3},
                             {1, 9, 5, 3, 1},     {64, 48, 21, 16, 3}, {300, 200, 37, 29, 3}};
constexpr ResizeFilter kFilters[] = {ResizeFilter::kBilinear, ResizeFilter::kArea,
                                     ResizeFilter::kAuto};

TEST(ImageKernels, ResizeUint8EveryLevelMatchesScalarExactlyAndReferenceWithin1Lsb) {
  for (const Shape& s : kShapes) {
    const Image src = random_image(s.sw, s.sh, s.c, s.sw * 31 + s.dh);
    for (ResizeFilter filter : kFilters) {
      const auto ref = reference_resize(src.view(), s.dw, s.dh, filter);
      std::vector<std::uint8_t> scalar;
      for (SimdLevel level : levels_to_test()) {
        const std::size_t n = static_cast<std::size_t>(s.dw) * s.dh * s.c;
        std::vector<std::uint8_t> buffer(n + 2 * kGuard, kGuardByte);
        Resampler resampler(level);
        resampler.resize(
            src.view(),
            {buffer.data() + kGuard, s.dw, s.dh, s.c, static_cast<std::size_t>(s.dw) * s.c},
            filter);
        for (std::size_t g = 0; g < kGuard; ++g) {
          ASSERT_EQ(buffer[g], kGuardByte);
          ASSERT_EQ(buffer[kGuard + n + g], kGuardByte);
        }
        std::vector<std::uint8_t> out(buffer.begin() + kGuard, buffer.begin() + kGuard + n);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_LE(std::abs(out[i] - std::clamp(ref[i], 0.0, 255.0)), 1.0)
              << to_string(level) << " " << to_string(filter) << " " << s.sw << "x" << s.sh << "->"
              << s.dw << "x" << s.dh << " at " << i;
        }
        if (level == SimdLevel::kScalar) scalar = out;
        EXPECT_EQ(out, scalar) << to_string(level) << " " << to_string(filter);
      }
    }
  }
}

template <class Decode>
void check_fused(OutputDtype dtype, const Tolerance& tol, Decode decode) {
  const float mean[3] = {0.485f, 0.456f, 0.406f};
  const float stdev[3] = {0.229f, 0.224f, 0.225f};
  const Normalization norms[] = {Normalization::mean_std(mean, stdev),
                                 Normalization::min_max(-1.f, 1.f)};
  for (const Shape& s : kShapes) {
    const Image src = random_image(s.sw, s.sh, s.c, s.sw + 7 * s.dw);
    for (ResizeFilter filter : kFilters) {
      const auto ref = reference_resize(src.view(), s.dw, s.dh, filter);
      for (const Normalization& norm : norms) {
        std::vector<std::uint8_t> scalar;
        for (SimdLevel level : levels_to_test()) {
          const std::size_t count = static_cast<std::size_t>(s.dw) * s.dh * s.c;
          const std::size_t bytes = count * dtype_size(dtype);
          std::vector<std::uint8_t> buffer(bytes + 2 * kGuard, kGuardByte);
          Resampler resampler(level);
          resampler.resize_normalize_chw(src.view(), s.dw, s.dh, filter, norm, dtype,
                                         buffer.data() + kGuard);
          for (std::size_t g = 0; g < kGuard; ++g) {
            ASSERT_EQ(buffer[g], kGuardByte);
            ASSERT_EQ(buffer[kGuard + bytes + g], kGuardByte);
          }
          std::vector<std::uint8_t> out(buffer.begin() + kGuard, buffer.begin() + kGuard + bytes);
          for (int ch = 0; ch < s.c; ++ch) {
            float scale, bias;
            norm.affine(ch, scale, bias);
            for (int y = 0; y < s.dh; ++y) {
              for (int x = 0; x < s.dw; ++x) {
                const std::size_t plane_index =
                    (static_cast<std::size_t>(ch) * s.dh + y) * s.dw + x;
                const double expected =
                    ref[(static_cast<std::size_t>(y) * s.dw + x) * s.c + ch] * scale + bias;
                const double got = decode(out.data(), plane_index);
                const double fixed = fixed_point_pixels(s.sh, s.dh, filter) * std::abs(scale);
                ASSERT_NEAR(got, expected,
                            fixed + tol.abs + tol.rel * (std::abs(expected) + std::abs(bias)))
                    << to_string(level) << " " << to_string(filter) << " " << s.sw << "x" << s.sh
                    << "->" << s.dw << "x" << s.dh << " c" << ch << " (" << x << "," << y << ")";
              }
            }
          }
          if (level == SimdLevel::kScalar) scalar = out;
          EXPECT_EQ(out, scalar) << to_string(level) << " " << to_string(filter);
        }
      }
    }
  }
}

TEST(ImageKernels, FusedResizeNormalizeChwFloat32EveryLevelMatchesScalarAndReference) {
  check_fused(OutputDtype::kFloat32, kTolerance[0], [](const std::uint8_t* p, std::size_t i) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return static_cast<double>(v);
  });
}

TEST(ImageKernels, FusedResizeNormalizeChwFloat16EveryLevelMatchesScalarAndReference) {
  check_fused(OutputDtype::kFloat16, kTolerance[1], [](const std::uint8_t* p, std::size_t i) {
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return static_cast<double>(half_to_float(v));
  });
}

TEST(ImageKernels, FusedResizeNormalizeChwBFloat16EveryLevelMatchesScalarAndReference) {
  check_fused(OutputDtype::kBFloat16, kTolerance[2], [](const std::uint8_t* p, std::size_t i) {
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return static_cast<double>(bfloat16_to_float(v));
  });
}

TEST(ImageKernels, HalfAndBFloat16ConversionsRoundToNearestEven) {
  using image_detail::float_to_bfloat16;
  using image_detail::float_to_half;
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(65504.f), 0x7BFF);
  EXPECT_EQ(float_to_half(70000.f), 0x7C00);
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3C00);      // tie -> even
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3C02);      // tie -> even (up)
  EXPECT_EQ(float_to_half(5.9604644775390625e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3F818000u)), 0x3F82);
  for (std::uint32_t h = 0; h < 0x7C00; h += 17) {
    EXPECT_EQ(float_to_half(half_to_float(static_cast<std::uint16_t>(h))), h);
  }
}

TEST(ImageKernels, BrightnessContrastEveryLevelMatchesFormula) {
  const Image original = random_image(37, 13, 3, 11);
  for (SimdLevel level : levels_to_test()) {
    for (auto [b, c] : {std::pair{0.1f, 1.3f}, {-0.2f, 0.7f}, {0.f, 1.f}, {0.5f, 2.5f}}) {
      std::vector<std::uint8_t> buffer(original.size_bytes() + 2 * kGuard, kGuardByte);
      std::memcpy(buffer.data() + kGuard, original.data(), original.size_bytes());
      MutableImageView view{buffer.data() + kGuard, 37, 13, 3, 37 * 3};
      adjust_brightness_contrast(view, b, c, level);
      for (std::size_t g = 0; g < kGuard; ++g) {
        ASSERT_EQ(buffer[g], kGuardByte);
        ASSERT_EQ(buffer[kGuard + original.size_bytes() + g], kGuardByte);
      }
      for (std::size_t i = 0; i < original.size_bytes(); ++i) {
        const double expected =
            std::clamp(c * double(original.data()[i]) + b * 255.0 + (1.0 - c) * 128.0, 0.0, 255.0);
        ASSERT_LE(std::abs(buffer[kGuard + i] - expected), 0.5 + 1e-3)
            << to_string(level) << " at " << i;
      }
    }
  }
}

TEST(ImageKernels, FlipsReverseRowsAndColumnsAndAreInvolutions) {
  for (int channels : {1, 3}) {
    const Image original = random_image(9, 5, channels, 12);
    Image image(9, 5, channels);
    std::memcpy(image.data(), original.data(), original.size_bytes());
    flip_horizontal(image.mutable_view());
    for (int y = 0; y < 5; ++y) {
      for (int x = 0; x < 9; ++x) {
        for (int c = 0; c < channels; ++c) {
          ASSERT_EQ(image.view().row(y)[x * channels + c],
                    original.view().row(y)[(8 - x) * channels + c]);
        }
      }
    }
    flip_vertical(image.mutable_view());
    for (int y = 0; y < 5; ++y) {
      ASSERT_EQ(image.view().row(y)[0], original.view().row(4 - y)[8 * channels]);
    }
    flip_vertical(image.mutable_view());
    flip_horizontal(image.mutable_view());
    EXPECT_EQ(0, std::memcmp(image.data(), original.data(), original.size_bytes()));
  }
}

TEST(ImageKernels, StridedCropViewResizesLikeAPackedCopy) {
  const Image image = random_image(57, 41, 3, 21);
  const ImageView window = crop(image.view(), 5, 7, 33, 29);
  Image packed(33, 29, 3);
  for (int y = 0; y < 29; ++y)
    std::memcpy(packed.data() + y * packed.stride(), window.row(y), packed.stride());
  for (SimdLevel level : levels_to_test()) {
    Resampler resampler(level);
    std::vector<float> from_view(3 * 13 * 11), from_copy(3 * 13 * 11);
    resampler.resize_normalize_chw(window, 13, 11, ResizeFilter::kArea,
                                   Normalization::min_max(0.f, 1.f), OutputDtype::kFloat32,
                                   from_view.data());
    resampler.resize_normalize_chw(packed.view(), 13, 11, ResizeFilter::kArea,
                                   Normalization::min_max(0.f, 1.f), OutputDtype::kFloat32,
                                   from_copy.data());
    EXPECT_EQ(from_view, from_copy) << to_string(level);
  }
}

TEST(ImageKernels, FusedPassRefusesUint8AndSizesAreRight) {
  const Image image = random_image(16, 12, 3, 5);
  std::vector<std::uint8_t> out(3 * 8 * 6);
  EXPECT_THROW(
      Resampler(SimdLevel::kScalar)
          .resize_normalize_chw(image.view(), 8, 6, ResizeFilter::kAuto,
                                Normalization::min_max(0.f, 1.f), OutputDtype::kUint8, out.data()),
      InvalidArgument);
  EXPECT_EQ(dtype_size(OutputDtype::kUint8), 1u);
  EXPECT_EQ(dtype_size(OutputDtype::kFloat16), 2u);
  EXPECT_EQ(dtype_size(OutputDtype::kFloat32), 4u);
  EXPECT_STREQ(to_string(OutputDtype::kUint8), "uint8 (HWC)");
}

TEST(ImageKernels, CropsAreViewsAndRandomCropIsSeeded) {
  const Image image = random_image(20, 10, 3, 13);
  const ImageView center = center_crop(image.view(), 8, 4);
  EXPECT_EQ(center.data, image.data() + (3 * 20 + 6) * 3);
  EXPECT_EQ(center.stride, image.stride());
  const ImageView a = random_crop(image.view(), 8, 4, 42);
  const ImageView b = random_crop(image.view(), 8, 4, 42);
  EXPECT_EQ(a.data, b.data);
  bool differs = false;
  for (std::uint64_t seed = 0; seed < 16; ++seed)
    differs |= random_crop(image.view(), 8, 4, seed).data != a.data;
  EXPECT_TRUE(differs);
  EXPECT_THROW(crop(image.view(), 15, 0, 8, 4), InvalidArgument);
}

}  // namespace
}  // namespace stoke
