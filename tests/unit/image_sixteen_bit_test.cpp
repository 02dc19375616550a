// 16-bit samples kept through decode, resize and normalization: 16-bit PNG and
// TIFF round trips are exact; two images that differ only in the low byte of
// their samples (and reduce to the same 8-bit image) give different tensors;
// an 8-bit image and its widening v = u * 257 give identical tensors where no
// resampling happens and agree within the 8-bit path's fixed-point error where
// it does; the 16-bit resize equals a double-precision reference within float
// rounding on every SIMD level; flips, crops and jitter work on 16-bit views.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "stoke/error.hpp"
#include "stoke/image.hpp"
#include "unit/image_reference.hpp"
#include "unit/image_tiff_files.hpp"

namespace stoke {
namespace {

using testing::encode_tiff;
using testing::reference_resize;
using testing::TiffSpec;

Image random16(int width, int height, int channels, std::uint32_t seed) {
  return testing::random_image(width, height, channels, seed, 16);
}

Image random8(int width, int height, int channels, std::uint32_t seed) {
  return testing::random_image(width, height, channels, seed);
}

std::vector<std::uint16_t> samples_of(const Image& image) {
  const std::size_t n = static_cast<std::size_t>(image.width()) * image.height() * image.channels();
  return {image.data16(), image.data16() + n};
}

bool same(const Image& a, const Image& b) {
  return a.width() == b.width() && a.height() == b.height() && a.channels() == b.channels() &&
         a.bit_depth() == b.bit_depth() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

using testing::levels_to_test;

int taps_of(int src, int dst, ResizeFilter filter) {
  if (src == dst) return 1;
  if (testing::area_axis(filter, src, dst))
    return std::min(src, static_cast<int>(std::ceil(static_cast<double>(src) / dst)) + 1);
  return std::min(src, 2);
}

TEST(ImageSixteenBit, PngAndTiffRoundTripsAreExact) {
  Decoder decoder;
  Image out, reduced, expected8;
  for (int channels : {1, 3}) {
    const Image original = random16(23, 11, channels, 5u + channels);
    const auto png = encode_png(original.view());
    ASSERT_EQ(decoder.info(png, "x.png").bit_depth, 16);
    decoder.decode(png, "x.png", {.keep_16_bit = true}, out);
    EXPECT_TRUE(same(out, original)) << "PNG, " << channels << " channels";
    // Without keep_16_bit: the 8-bit reduction, as before.
    decoder.decode(png, "x.png", {}, reduced);
    convert_depth(original.view(), 8, expected8);
    EXPECT_TRUE(same(reduced, expected8));
    int cases = 0;
    for (std::uint16_t compression :
         {COMPRESSION_NONE, COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE}) {
      for (int tile : {0, 16}) {
        TiffSpec s{.width = 23,
                   .height = 11,
                   .channels = channels,
                   .bits = 16,
                   .compression = compression,
                   .tile = tile,
                   .big_endian = (cases++ % 2) == 1};
        decoder.decode(encode_tiff(s, samples_of(original)), "x.tif", {.keep_16_bit = true}, out);
        EXPECT_TRUE(same(out, original))
            << "TIFF " << channels << " channels, compression " << compression << ", tile " << tile;
      }
    }
  }
}

TEST(ImageSixteenBit, ChannelConversionOnDecodeMatchesConvertChannels) {
  Decoder decoder;
  Image out, expected;
  const Image gray = random16(13, 7, 1, 9);
  const Image rgb = random16(13, 7, 3, 10);
  decoder.decode(encode_png(gray.view()), "g.png", {.channels = 3, .keep_16_bit = true}, out);
  convert_channels(gray.view(), 3, expected);
  EXPECT_TRUE(same(out, expected));
  TiffSpec g{.width = 13, .height = 7, .channels = 1, .bits = 16};
  decoder.decode(encode_tiff(g, samples_of(gray)), "g.tif", {.channels = 3, .keep_16_bit = true},
                 out);
  EXPECT_TRUE(same(out, expected));
  TiffSpec c{.width = 13, .height = 7, .channels = 3, .bits = 16, .tile = 16};
  decoder.decode(encode_tiff(c, samples_of(rgb)), "c.tif", {.channels = 1, .keep_16_bit = true},
                 out);
  convert_channels(rgb.view(), 1, expected);
  EXPECT_TRUE(same(out, expected));
  // 8-bit files stay 8-bit with keep_16_bit.
  decoder.decode(encode_png(random8(5, 4, 3, 1).view()), "8.png", {.keep_16_bit = true}, out);
  EXPECT_EQ(out.bit_depth(), 8);
}

// v and v + 100 with v = 257 k (k <= 155): the same high byte, the same 8-bit
// reduction, different low bytes.
TEST(ImageSixteenBit, LowByteDifferencesReachTheTensor) {
  const int w = 8, h = 6;
  Image a(w, h, 1, 16), b(w, h, 1, 16);
  for (int i = 0; i < w * h; ++i) {
    a.data16()[i] = static_cast<std::uint16_t>(257 * (3 * i));
    b.data16()[i] = static_cast<std::uint16_t>(a.data16()[i] + 100);
  }
  Decoder decoder;
  const Normalization norm = Normalization::min_max(0.f, 1.f);
  float scale, bias;
  norm.affine(0, scale, bias);
  Resampler resampler(default_simd_level());
  for (const bool tiff : {false, true}) {
    TiffSpec s{.width = w, .height = h, .channels = 1, .bits = 16, .compression = COMPRESSION_LZW};
    const auto bytes_a = tiff ? encode_tiff(s, samples_of(a)) : encode_png(a.view());
    const auto bytes_b = tiff ? encode_tiff(s, samples_of(b)) : encode_png(b.view());
    Image a8, b8, a16, b16;
    decoder.decode(bytes_a, "a", {}, a8);
    decoder.decode(bytes_b, "b", {}, b8);
    ASSERT_TRUE(same(a8, b8)) << "the 8-bit reduction must not tell them apart";
    decoder.decode(bytes_a, "a", {.keep_16_bit = true}, a16);
    decoder.decode(bytes_b, "b", {.keep_16_bit = true}, b16);
    std::vector<float> ta(w * h), tb(w * h), t8(w * h);
    resampler.resize_normalize_chw(a16.view(), w, h, ResizeFilter::kAuto, norm,
                                   OutputDtype::kFloat32, ta.data());
    resampler.resize_normalize_chw(b16.view(), w, h, ResizeFilter::kAuto, norm,
                                   OutputDtype::kFloat32, tb.data());
    resampler.resize_normalize_chw(a8.view(), w, h, ResizeFilter::kAuto, norm,
                                   OutputDtype::kFloat32, t8.data());
    for (int i = 0; i < w * h; ++i) {
      EXPECT_EQ(ta[i], (static_cast<float>(a.data16()[i]) / 257.f) * scale + bias);
      EXPECT_EQ(tb[i], (static_cast<float>(b.data16()[i]) / 257.f) * scale + bias);
      EXPECT_NEAR(tb[i] - ta[i], 100.0 / 65535.0, 1e-6) << (tiff ? "TIFF " : "PNG ") << i;
      EXPECT_EQ(ta[i], t8[i]);  // a = u * 257: its 8-bit reduction's tensor exactly
    }
    // Resized (area 8x6 -> 3x2): still apart by 100 / 65535.
    std::vector<float> ra(6), rb(6);
    resampler.resize_normalize_chw(a16.view(), 3, 2, ResizeFilter::kArea, norm,
                                   OutputDtype::kFloat32, ra.data());
    resampler.resize_normalize_chw(b16.view(), 3, 2, ResizeFilter::kArea, norm,
                                   OutputDtype::kFloat32, rb.data());
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(rb[i] - ra[i], 100.0 / 65535.0, 1e-6);
  }
}

TEST(ImageSixteenBit, EightBitImageAndItsWideningGiveIdenticalTensors) {
  const Normalization norms[] = {Normalization::min_max(-1.f, 1.f),
                                 Normalization::mean_std(std::vector<float>{0.4f, 0.5f, 0.6f},
                                                         std::vector<float>{0.2f, 0.25f, 0.3f})};
  for (SimdLevel level : levels_to_test()) {
    Resampler resampler(level);
    for (int channels : {1, 3}) {
      const Image u = random8(37, 23, channels, 40u + channels);
      Image v;
      convert_depth(u.view(), 16, v);
      for (const auto& norm : norms) {
        for (OutputDtype dtype :
             {OutputDtype::kFloat32, OutputDtype::kFloat16, OutputDtype::kBFloat16}) {
          const std::size_t n = dtype_size(dtype) * channels * 37 * 23;
          std::vector<std::uint8_t> a(n), b(n);
          // No resampling (identity, and a crop of it): bit for bit.
          resampler.resize_normalize_chw(u.view(), 37, 23, ResizeFilter::kAuto, norm, dtype,
                                         a.data());
          resampler.resize_normalize_chw(v.view(), 37, 23, ResizeFilter::kAuto, norm, dtype,
                                         b.data());
          EXPECT_EQ(a, b) << to_string(level) << " " << channels << "ch " << to_string(dtype);
          resampler.resize_normalize_chw(center_crop(u.view(), 31, 19), 31, 19, ResizeFilter::kAuto,
                                         norm, dtype, a.data());
          resampler.resize_normalize_chw(center_crop(v.view(), 31, 19), 31, 19, ResizeFilter::kAuto,
                                         norm, dtype, b.data());
          EXPECT_EQ(a, b) << "crop, " << to_string(level) << " " << to_string(dtype);
        }
        // Resampled: the 16-bit path is float, the 8-bit path fixed point
        // (up to (taps + 1) / 128 of an 8-bit step, kernels.hpp).
        for (ResizeFilter filter : {ResizeFilter::kBilinear, ResizeFilter::kArea}) {
          std::vector<float> a(channels * 19 * 11), b(a.size());
          resampler.resize_normalize_chw(u.view(), 19, 11, filter, norm, OutputDtype::kFloat32,
                                         a.data());
          resampler.resize_normalize_chw(v.view(), 19, 11, filter, norm, OutputDtype::kFloat32,
                                         b.data());
          const int taps = std::max(taps_of(37, 19, filter), taps_of(23, 11, filter));
          for (std::size_t i = 0; i < a.size(); ++i) {
            float scale, bias;
            norm.affine(static_cast<int>(i / (19 * 11)), scale, bias);
            EXPECT_NEAR(a[i], b[i], (taps + 1) / 128.0 * std::abs(scale) + 1e-5)
                << to_string(filter) << " " << i;
          }
        }
      }
    }
  }
}

struct Shape {
  int sw, sh, dw, dh, c;
};
constexpr Shape kShapes[] = {{37, 23, 19, 11, 3},  {13, 9, 31, 17, 1}, {101, 67, 10, 7, 3},
                             {45, 33, 45, 33, 1},  {7, 5, 1, 1, 3},    {1, 9, 5, 3, 1},
                             {300, 200, 37, 29, 1}};

TEST(ImageSixteenBit, ResizeMatchesTheDoubleReferenceWithinFloatRoundingOnEveryLevel) {
  constexpr float kGuard = -12345.f;
  constexpr std::uint16_t kGuard16 = 0xA5A5;
  const Normalization norm = Normalization::min_max(0.f, 1.f);
  for (const Shape& s : kShapes) {
    const Image src = random16(s.sw, s.sh, s.c, static_cast<std::uint32_t>(s.sw * 31 + s.dh));
    for (ResizeFilter filter :
         {ResizeFilter::kBilinear, ResizeFilter::kArea, ResizeFilter::kAuto}) {
      const auto ref = reference_resize(src.view(), s.dw, s.dh, filter);
      // Float sums of up to taps_x * taps_y products of values below 2^16:
      // a few ulp of 2^16 per tap (2^-24 relative), far below one 16-bit step.
      const int taps = taps_of(s.sw, s.dw, filter) + taps_of(s.sh, s.dh, filter);
      const double tol16 = 65536.0 * (taps + 2) * 0x1p-24;
      const std::size_t n = static_cast<std::size_t>(s.dw) * s.dh * s.c;
      std::vector<float> scalar_out;
      for (SimdLevel level : levels_to_test()) {
        Resampler resampler(level);
        std::vector<float> out(n + 16, kGuard);
        resampler.resize_normalize_chw(src.view(), s.dw, s.dh, filter, norm, OutputDtype::kFloat32,
                                       out.data() + 8);
        Image resized(s.dw, s.dh, s.c, 16);
        std::vector<std::uint16_t> guarded(n + 16, kGuard16);
        resampler.resize(src.view(),
                         {reinterpret_cast<std::uint8_t*>(guarded.data() + 8), s.dw, s.dh, s.c,
                          static_cast<std::size_t>(s.dw) * s.c * 2, 16},
                         filter);
        for (int g = 0; g < 8; ++g) {
          EXPECT_EQ(out[g], kGuard);
          EXPECT_EQ(out[n + 8 + g], kGuard);
          EXPECT_EQ(guarded[g], kGuard16);
          EXPECT_EQ(guarded[n + 8 + g], kGuard16);
        }
        for (int y = 0; y < s.dh; ++y) {
          for (int x = 0; x < s.dw; ++x) {
            for (int ch = 0; ch < s.c; ++ch) {
              const double r = ref[(static_cast<std::size_t>(y) * s.dw + x) * s.c + ch];
              const float got = out[8 + (static_cast<std::size_t>(ch) * s.dh + y) * s.dw + x];
              ASSERT_NEAR(got, r / 65535.0, tol16 / 65535.0 + 1e-7)
                  << s.sw << "x" << s.sh << "->" << s.dw << "x" << s.dh << " " << to_string(filter)
                  << " " << to_string(level);
              const std::uint16_t stored =
                  guarded[8 + (static_cast<std::size_t>(y) * s.dw + x) * s.c + ch];
              ASSERT_NEAR(stored, r, 0.5 + tol16);
            }
          }
        }
        // The 16-bit path does the same float operations on every level.
        if (scalar_out.empty()) {
          scalar_out = out;
        } else {
          EXPECT_EQ(out, scalar_out) << to_string(level);
        }
      }
    }
  }
}

TEST(ImageSixteenBit, FlipsCropsAndJitterWorkOnSixteenBitViews) {
  const Image original = random16(9, 5, 3, 77);
  Image img = random16(9, 5, 3, 77);
  flip_horizontal(img.mutable_view());
  for (int y = 0; y < 5; ++y) {
    for (int x = 0; x < 9; ++x) {
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(img.view().row16(y)[x * 3 + c], original.view().row16(y)[(8 - x) * 3 + c]);
    }
  }
  flip_horizontal(img.mutable_view());
  flip_vertical(img.mutable_view());
  for (int y = 0; y < 5; ++y) {
    ASSERT_EQ(std::memcmp(img.view().row(y), original.view().row(4 - y), original.stride()), 0);
  }
  const ImageView window = crop(original.view(), 3, 2, 4, 3);
  EXPECT_EQ(window.bit_depth, 16);
  EXPECT_EQ(window.row16(0), original.view().row16(2) + 3 * 3);
  // Brightness/contrast at full scale 65535 about mid-gray 128 * 257.
  Image jitter = random16(7, 3, 1, 78);
  const Image before = random16(7, 3, 1, 78);
  adjust_brightness_contrast(jitter.mutable_view(), 0.1f, 1.3f, default_simd_level());
  for (int i = 0; i < 21; ++i) {
    const double expect = std::clamp(
        std::nearbyint(1.3 * before.data16()[i] + 0.1 * 65535 + (1 - 1.3) * 32896), 0.0, 65535.0);
    EXPECT_NEAR(jitter.data16()[i], expect, 1.0) << i;
  }
  // Depth conversion: widening is exact and reduces back to the same image.
  const Image u = random8(11, 4, 3, 79);
  Image wide, back;
  convert_depth(u.view(), 16, wide);
  EXPECT_EQ(wide.data16()[5], u.data()[5] * 257);
  convert_depth(wide.view(), 8, back);
  EXPECT_TRUE(same(back, u));
  // A 16-bit view needs a 16-bit destination.
  Resampler resampler(SimdLevel::kScalar);
  Image dst8(3, 2, 3);
  EXPECT_THROW(resampler.resize(original.view(), dst8.mutable_view(), ResizeFilter::kAuto),
               InvalidArgument);
}

}  // namespace
}  // namespace stoke
