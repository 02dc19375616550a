// Decoding: JPEG with DCT scaling, PNG 8/16-bit gray/RGB, channel conversion,
// and corrupt input that must throw DecodeError naming the file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "stoke/error.hpp"
#include "stoke/image.hpp"

namespace stoke {
namespace {

Image smooth_image(int width, int height, int channels, std::uint32_t seed) {
  Image image(width, height, channels);
  std::mt19937 rng(seed);
  const int phase = static_cast<int>(rng() % 64);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        image.data()[(static_cast<std::size_t>(y) * width + x) * channels + c] =
            static_cast<std::uint8_t>((x * 3 + y * 2 + c * 40 + phase) % 256 / 2 + 60);
      }
    }
  }
  return image;
}

double mean_abs_diff(const Image& a, const Image& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size_bytes(); ++i)
    sum += std::abs(int(a.data()[i]) - int(b.data()[i]));
  return sum / static_cast<double>(a.size_bytes());
}

TEST(ImageDecode, JpegScaleChoosesSmallestEighthStillCoveringTarget) {
  EXPECT_EQ(jpeg_scale_eighths(2448, 2048, 512, 512), 2);  // 1/4 -> 612x512
  EXPECT_EQ(jpeg_scale_eighths(2448, 2048, 0, 0), 8);      // no target: full size
  EXPECT_EQ(jpeg_scale_eighths(2448, 2048, 2448, 2048), 8);
  EXPECT_EQ(jpeg_scale_eighths(2448, 2048, 613, 100), 3);  // 1/4 gives 612 < 613
  EXPECT_EQ(jpeg_scale_eighths(100, 100, 5000, 5000), 8);  // never upscales
}

TEST(ImageDecode, JpegRoundTripAtFullAndQuarterScale) {
  const Image original = smooth_image(160, 96, 3, 1);
  const auto bytes = encode_jpeg(original.view(), 95);
  ASSERT_EQ(sniff_format(bytes), ImageFormat::kJpeg);
  Decoder decoder;
  Image full;
  decoder.decode(bytes, "mem.jpg", {}, full);
  ASSERT_EQ(full.width(), 160);
  ASSERT_EQ(full.height(), 96);
  ASSERT_EQ(full.channels(), 3);
  // 4:2:0 chroma subsampling on a pattern with hard wrap edges: a few levels.
  EXPECT_LT(mean_abs_diff(full, original), 6.0);

  Image quarter;
  decoder.decode(bytes, "mem.jpg", {.channels = 0, .min_width = 40, .min_height = 24}, quarter);
  EXPECT_EQ(quarter.width(), 40);
  EXPECT_EQ(quarter.height(), 24);
  const auto info =
      decoder.output_info(bytes, "mem.jpg", {.channels = 1, .min_width = 40, .min_height = 24});
  EXPECT_EQ(info.width, 40);
  EXPECT_EQ(info.channels, 1);
}

TEST(ImageDecode, JpegGrayToRgbAndRgbToGray) {
  const Image gray = smooth_image(33, 17, 1, 2);
  const auto bytes = encode_jpeg(gray.view(), 95);
  Decoder decoder;
  Image rgb;
  decoder.decode(bytes, "g.jpg", {.channels = 3}, rgb);
  ASSERT_EQ(rgb.channels(), 3);
  for (int i = 0; i < 33 * 17; ++i) {
    EXPECT_EQ(rgb.data()[3 * i], rgb.data()[3 * i + 1]);
    EXPECT_EQ(rgb.data()[3 * i], rgb.data()[3 * i + 2]);
  }
  Image back;
  decoder.decode(encode_jpeg(rgb.view(), 95), "c.jpg", {.channels = 1}, back);
  EXPECT_EQ(back.channels(), 1);
  EXPECT_LT(mean_abs_diff(back, gray), 3.0);
}

TEST(ImageDecode, PngRoundTripIsExactFor8And16BitGrayAndRgb) {
  Decoder decoder;
  for (int channels : {1, 3}) {
    for (int depth : {8, 16}) {
      const Image original = smooth_image(29, 13, channels, 3);
      const auto bytes = encode_png(original.view(), depth);
      ASSERT_EQ(sniff_format(bytes), ImageFormat::kPng);
      EXPECT_EQ(decoder.info(bytes, "x.png").bit_depth, depth);
      Image decoded;
      decoder.decode(bytes, "x.png", {}, decoded);
      ASSERT_EQ(decoded.channels(), channels);
      ASSERT_EQ(decoded.size_bytes(), original.size_bytes());
      EXPECT_EQ(0, std::memcmp(decoded.data(), original.data(), original.size_bytes()))
          << channels << " channels, " << depth << " bit";
    }
  }
}

TEST(ImageDecode, PngChannelConversionMatchesConvertChannels) {
  const Image rgb = smooth_image(21, 11, 3, 4);
  Decoder decoder;
  Image gray;
  decoder.decode(encode_png(rgb.view()), "c.png", {.channels = 1}, gray);
  Image expected;
  convert_channels(rgb.view(), 1, expected);
  // libpng's default luma weights differ from BT.601's integer form by rounding.
  for (std::size_t i = 0; i < gray.size_bytes(); ++i) {
    EXPECT_LE(std::abs(int(gray.data()[i]) - int(expected.data()[i])), 1);
  }
  Image rgb_again;
  decoder.decode(encode_png(expected.view()), "g.png", {.channels = 3}, rgb_again);
  Image expected_rgb;
  convert_channels(expected.view(), 3, expected_rgb);
  EXPECT_EQ(0, std::memcmp(rgb_again.data(), expected_rgb.data(), expected_rgb.size_bytes()));
}

TEST(ImageDecode, DecodeReusesTheImageBuffer) {
  const Image big = smooth_image(64, 64, 3, 5);
  const auto bytes = encode_png(big.view());
  Decoder decoder;
  Image out;
  decoder.decode(bytes, "a.png", {}, out);
  const std::uint8_t* buffer = out.data();
  const auto small = encode_png(smooth_image(30, 20, 3, 6).view());
  decoder.decode(small, "b.png", {}, out);
  decoder.decode(bytes, "a.png", {}, out);
  EXPECT_EQ(out.data(), buffer);
}

void expect_decode_error(std::span<const std::uint8_t> bytes, const char* name) {
  Decoder decoder;
  Image out;
  try {
    decoder.decode(bytes, name, {}, out);
    ADD_FAILURE() << "no error for " << name;
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(ImageDecode, CorruptTruncatedAndUnknownDataThrowDecodeErrorNamingTheFile) {
  const Image image = smooth_image(64, 48, 3, 7);
  auto jpeg = encode_jpeg(image.view(), 90);
  auto png = encode_png(image.view());
  expect_decode_error(std::span(jpeg).first(jpeg.size() / 2), "truncated.jpg");
  expect_decode_error(std::span(png).first(png.size() / 2), "truncated.png");
  expect_decode_error(std::span(png).first(20), "header_only.png");
  auto garbled = png;
  for (std::size_t i = 60; i < garbled.size(); i += 7) garbled[i] ^= 0x5A;
  expect_decode_error(garbled, "garbled.png");
  const std::vector<std::uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  expect_decode_error(text, "notes.txt");
  expect_decode_error({}, "empty.jpg");
}

TEST(ImageDecode, MissingFileIsIoErrorNamingThePath) {
  Decoder decoder;
  Image out;
  try {
    decoder.decode_file("/nonexistent/dir/cat.jpg", {}, out);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/cat.jpg"), std::string::npos);
  }
}

}  // namespace
}  // namespace stoke
