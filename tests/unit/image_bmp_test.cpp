// BMP decoding: 8-bit gray palette, 24- and 32-bit, bottom-up and top-down,
// exact round trips, channel conversion, and malformed headers.
#include <gtest/gtest.h>

#include <algorithm>

#include "stoke/error.hpp"
#include "stoke/image.hpp"
#include "unit/image_test_files.hpp"

namespace stoke {
namespace {

using testing::encode_bmp;
using testing::gradient_image;

bool same_pixels(const Image& a, const Image& b) {
  return a.width() == b.width() && a.height() == b.height() && a.channels() == b.channels() &&
         std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

TEST(ImageBmp, RoundTripsAreExactForEveryLayout) {
  const Image gray = gradient_image(13, 7, 1);  // odd width: padded rows
  const Image rgb = gradient_image(13, 7, 3, 11);
  Decoder decoder;
  for (bool top_down : {false, true}) {
    Image out;
    const auto g8 = encode_bmp(gray.view(), 8, top_down);
    ASSERT_EQ(sniff_format(g8), ImageFormat::kBmp);
    EXPECT_EQ(decoder.info(g8, "g.bmp").channels, 1);
    decoder.decode(g8, "g.bmp", {}, out);
    EXPECT_TRUE(same_pixels(out, gray)) << "8-bit, top_down " << top_down;
    for (int bits : {24, 32}) {
      const auto c = encode_bmp(rgb.view(), bits, top_down);
      EXPECT_EQ(decoder.info(c, "c.bmp").channels, 3);
      decoder.decode(c, "c.bmp", {}, out);
      EXPECT_TRUE(same_pixels(out, rgb)) << bits << "-bit, top_down " << top_down;
    }
  }
}

TEST(ImageBmp, ChannelConversionMatchesConvertChannels) {
  const Image rgb = gradient_image(9, 5, 3, 3);
  const Image gray = gradient_image(9, 5, 1);
  Decoder decoder;
  Image out, expected;
  decoder.decode(encode_bmp(rgb.view(), 24), "c.bmp", {.channels = 1}, out);
  convert_channels(rgb.view(), 1, expected);
  EXPECT_TRUE(same_pixels(out, expected));
  decoder.decode(encode_bmp(gray.view(), 8), "g.bmp", {.channels = 3}, out);
  convert_channels(gray.view(), 3, expected);
  EXPECT_TRUE(same_pixels(out, expected));
}

TEST(ImageBmp, MalformedFilesAreDecodeErrorsNamingTheFile) {
  const Image rgb = gradient_image(8, 8, 3);
  const auto good = encode_bmp(rgb.view(), 24);
  auto expect_error = [](std::vector<std::uint8_t> bytes, const char* what) {
    Decoder decoder;
    Image out;
    try {
      decoder.decode(bytes, "bad.bmp", {}, out);
      ADD_FAILURE() << what << " decoded";
    } catch (const DecodeError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.bmp"), std::string::npos) << e.what();
    }
  };
  expect_error(testing::truncated(good, 0.8), "truncated pixels");
  expect_error({good.begin(), good.begin() + 30}, "truncated header");
  auto bits = good;
  bits[28] = 16;
  expect_error(bits, "16-bit");
  auto rle = good;
  rle[30] = 1;
  expect_error(rle, "RLE compression");
  auto zero = good;
  std::fill(zero.begin() + 18, zero.begin() + 22, std::uint8_t{0});  // the width field
  expect_error(zero, "zero width");
  auto offset = good;
  offset[10] = 0xFF, offset[11] = 0xFF, offset[12] = 0xFF, offset[13] = 0x7F;
  expect_error(offset, "pixel offset past the end");
}

}  // namespace
}  // namespace stoke
