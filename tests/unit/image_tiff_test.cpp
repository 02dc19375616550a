// TIFF decoding (libtiff from memory): gray/RGB x 8/16 bit x none/LZW/Deflate
// x strips/tiles x both byte orders decode exactly; channel conversion; a
// header bomb is refused before allocating; truncated and unsupported files are
// DecodeErrors naming the file, with libtiff's messages and nothing printed.
#include <gtest/gtest.h>
#include <png.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"
#include "unit/image_test_files.hpp"
#include "unit/image_tiff_files.hpp"

namespace stoke {
namespace {

using testing::encode_tiff;
using testing::tiff_samples;
using testing::TiffSpec;

// The expected 8-bit image: 16-bit samples reduced as 16-bit PNG is.
Image expected_image(const TiffSpec& s, const std::vector<std::uint16_t>& samples) {
  Image image(s.width, s.height, s.channels);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    image.data()[i] = s.bits == 8
                          ? static_cast<std::uint8_t>(samples[i])
                          : static_cast<std::uint8_t>((samples[i] * 255u + 32767u) / 65535u);
  }
  return image;
}

std::string describe(const TiffSpec& s) {
  return std::to_string(s.channels) + "ch " + std::to_string(s.bits) + "bit compression " +
         std::to_string(s.compression) + (s.tile ? " tiled" : " strips") +
         (s.big_endian ? " MM" : " II");
}

using testing::decode_error;

// Divides the first value of tag `tag`'s SHORT or LONG array (count > 1) in the
// first IFD of a little-endian TIFF by `divisor`; false when not found.
bool shrink_first(std::vector<std::uint8_t>& bytes, int tag, std::uint32_t divisor) {
  auto le = [&](std::size_t at, int n) {
    std::uint32_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | bytes[at + i];
    return v;
  };
  const std::uint32_t ifd = le(4, 4);
  for (std::uint32_t e = 0, entries = le(ifd, 2); e < entries; ++e) {
    const std::size_t at = ifd + 2 + 12 * e;
    const std::uint32_t type = le(at + 2, 2), count = le(at + 4, 4);
    if (le(at, 2) != static_cast<std::uint32_t>(tag) || count < 2 ||
        (type != TIFF_SHORT && type != TIFF_LONG)) {
      continue;
    }
    const int size = type == TIFF_SHORT ? 2 : 4;
    const std::size_t first = count * size <= 4 ? at + 8 : le(at + 8, 4);
    const std::uint32_t value = le(first, size) / divisor;
    for (int i = 0; i < size; ++i) bytes[first + i] = static_cast<std::uint8_t>(value >> (8 * i));
    return true;
  }
  return false;
}

TEST(ImageTiff, EveryLayoutDecodesExactly) {
  Decoder decoder;
  Image out;
  int cases = 0;
  for (int channels : {1, 3}) {
    for (int bits : {8, 16}) {
      for (std::uint16_t compression :
           {COMPRESSION_NONE, COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE}) {
        for (int tile : {0, 16}) {
          // 37x21: partial last strip (rows_per_strip 3 -> 7 strips) and partial edge tiles.
          TiffSpec s{.width = 37,
                     .height = 21,
                     .channels = channels,
                     .bits = bits,
                     .compression = compression,
                     .tile = tile,
                     .big_endian = (cases % 3) == 1};
          const auto samples = tiff_samples(s, cases);
          const auto bytes = encode_tiff(s, samples);
          ASSERT_EQ(sniff_format(bytes), ImageFormat::kTiff) << describe(s);
          const ImageInfo info = decoder.info(bytes, "t.tif");
          EXPECT_EQ(info.format, ImageFormat::kTiff);
          EXPECT_EQ(info.width, 37);
          EXPECT_EQ(info.height, 21);
          EXPECT_EQ(info.channels, channels);
          EXPECT_EQ(info.bit_depth, bits);
          decoder.decode(bytes, "t.tif", {}, out);
          const Image expected = expected_image(s, samples);
          ASSERT_EQ(out.width(), 37);
          ASSERT_EQ(out.height(), 21);
          ASSERT_EQ(out.channels(), channels);
          EXPECT_EQ(std::memcmp(out.data(), expected.data(), expected.size_bytes()), 0)
              << describe(s);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 24);
}

// A 16-bit gray PNG holding `samples` exactly (libpng's simplified writer).
std::vector<std::uint8_t> png16(int width, int height, const std::vector<std::uint16_t>& samples) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_LINEAR_Y;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&image, nullptr, &size, 0, samples.data(), 0, nullptr));
  std::vector<std::uint8_t> bytes(size);
  EXPECT_TRUE(
      png_image_write_to_memory(&image, bytes.data(), &size, 0, samples.data(), 0, nullptr));
  return bytes;
}

TEST(ImageTiff, SixteenBitReductionMatchesSixteenBitPng) {
  // The same arbitrary 16-bit samples (every residue mod 257 occurs) as TIFF and as PNG.
  TiffSpec s{.width = 257, .height = 3, .channels = 1, .bits = 16};
  std::vector<std::uint16_t> samples(257 * 3);
  for (std::size_t i = 0; i < samples.size(); ++i)
    samples[i] = static_cast<std::uint16_t>(i * 85 + (i % 257));
  Decoder decoder;
  Image from_tiff, from_png;
  decoder.decode(encode_tiff(s, samples), "g16.tif", {}, from_tiff);
  const auto png = png16(s.width, s.height, samples);
  ASSERT_EQ(decoder.info(png, "g16.png").bit_depth, 16);
  decoder.decode(png, "g16.png", {}, from_png);
  ASSERT_EQ(from_tiff.size_bytes(), from_png.size_bytes());
  EXPECT_EQ(std::memcmp(from_tiff.data(), from_png.data(), from_png.size_bytes()), 0);
}

TEST(ImageTiff, ChannelConversionMatchesConvertChannels) {
  Decoder decoder;
  Image out, expected;
  TiffSpec rgb{.width = 11, .height = 6, .channels = 3, .bits = 8, .compression = COMPRESSION_LZW};
  const auto rgb_samples = tiff_samples(rgb);
  decoder.decode(encode_tiff(rgb, rgb_samples), "c.tif", {.channels = 1}, out);
  convert_channels(expected_image(rgb, rgb_samples).view(), 1, expected);
  ASSERT_EQ(out.size_bytes(), expected.size_bytes());
  EXPECT_EQ(std::memcmp(out.data(), expected.data(), expected.size_bytes()), 0);
  TiffSpec gray{.width = 11, .height = 6, .channels = 1, .bits = 16, .tile = 16};
  const auto gray_samples = tiff_samples(gray);
  decoder.decode(encode_tiff(gray, gray_samples), "g.tif", {.channels = 3}, out);
  convert_channels(expected_image(gray, gray_samples).view(), 3, expected);
  ASSERT_EQ(out.size_bytes(), expected.size_bytes());
  EXPECT_EQ(std::memcmp(out.data(), expected.data(), expected.size_bytes()), 0);
}

TEST(ImageTiff, HeaderBombIsRefusedBeforeAllocating) {
  TiffSpec s{.width = 4, .height = 4, .claimed_width = 100000, .claimed_height = 100000};
  const auto bytes = encode_tiff(s, {});
  Image out;
  const std::string message = decode_error(bytes, "bomb100k.tif", out);
  EXPECT_NE(message.find("bomb100k.tif"), std::string::npos) << message;
  EXPECT_NE(message.find("100000x100000"), std::string::npos) << message;
  EXPECT_NE(message.find("STOKE_MAX_IMAGE_PIXELS"), std::string::npos) << message;
  EXPECT_EQ(out.capacity(), 0u) << "a buffer was reserved";
  Decoder decoder;
  EXPECT_THROW(decoder.output_info(bytes, "bomb100k.tif", {}), DecodeError);
  // Without the limit, the one short strip is found outside the file before anything is sized.
  const std::string unlimited = decode_error(bytes, "bomb100k.tif", out, {.max_pixels = 0});
  EXPECT_NE(unlimited.find("bomb100k.tif"), std::string::npos) << unlimited;
  EXPECT_EQ(out.capacity(), 0u) << unlimited;
}

TEST(ImageTiff, DamagedFilesAreDecodeErrorsNamingTheFileWithNothingPrinted) {
  TiffSpec s{.width = 40, .height = 30, .channels = 3, .bits = 16};
  const auto samples = tiff_samples(s);
  ::testing::internal::CaptureStderr();
  for (std::uint16_t compression : {COMPRESSION_NONE, COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE}) {
    s.compression = compression;
    for (int tile : {0, 16}) {
      s.tile = tile;
      const auto good = encode_tiff(s, samples);
      for (double keep : {0.9, 0.5, 0.05}) {
        Image out;
        const std::string message = decode_error(testing::truncated(good, keep), "cut.tif", out);
        EXPECT_NE(message.find("cannot decode image 'cut.tif'"), std::string::npos)
            << describe(s) << " keep " << keep << ": " << message;
      }
      Image out;
      std::vector<std::uint8_t> header(good.begin(), good.begin() + 8);
      header[4] = 0xFF, header[5] = 0xFF, header[6] = 0xFF,
      header[7] = 0x0F;  // IFD offset past the end
      EXPECT_NE(decode_error(header, "ifd.tif", out).find("ifd.tif"), std::string::npos);
    }
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(ImageTiff, ShortenedCompressedStripsAreDecodeErrorsWithLibtiffsReason) {
  for (std::uint16_t compression : {COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE}) {
    TiffSpec s{.width = 64,
               .height = 32,
               .channels = 1,
               .bits = 16,
               .compression = compression,
               .rows_per_strip = 16};
    auto bytes = encode_tiff(s, tiff_samples(s));
    // The first strip's data ends early, inside the file: damaged data, not a bomb.
    ASSERT_TRUE(shrink_first(bytes, TIFFTAG_STRIPBYTECOUNTS, 4));
    Image out;
    ::testing::internal::CaptureStderr();
    const std::string message = decode_error(bytes, "short_strip.tif", out);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    EXPECT_NE(message.find("cannot decode image 'short_strip.tif'"), std::string::npos) << message;
    EXPECT_NE(message.find("libtiff: "), std::string::npos) << message;
  }
}

TEST(ImageTiff, FolderDatasetsTakeTiffAndCheckTheirHeaders) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(STOKE_TEST_BINARY_DIR) / "test_tmp" / "tiff_folder";
  fs::remove_all(root);
  fs::create_directories(root / "a");
  TiffSpec s{.width = 8, .height = 8, .channels = 3, .bits = 16, .compression = COMPRESSION_LZW};
  write_file(root / "a" / "one.tif", encode_tiff(s, tiff_samples(s)));
  write_file(root / "a" / "two.tiff", encode_tiff(s, tiff_samples(s, 1)));
  write_file(root / "a" / "bomb.tif",
             encode_tiff(
                 {.width = 4, .height = 4, .claimed_width = 100000, .claimed_height = 100000}, {}));
  const auto good = encode_tiff(s, tiff_samples(s));
  write_file(root / "a" / "cut.tif", testing::truncated(good, 0.5));
  // Over 64 KiB with the directory at the end: the header check reads the directory from the file.
  TiffSpec big{.width = 160, .height = 120, .channels = 3, .bits = 16};
  const auto big_bytes = encode_tiff(big, tiff_samples(big));
  ASSERT_GT(big_bytes.size(), 64u * 1024);
  write_file(root / "a" / "big.tif", big_bytes);
  write_file(root / "a" / "big_cut.tif", testing::truncated(big_bytes, 0.8));
  DatasetOptions options;
  options.skip_corrupt = true;
  const Dataset d = Dataset::from_folder(root, options);
  EXPECT_EQ(d.size(), 3u);
  const std::string report = d.report().to_string();
  EXPECT_NE(report.find("bomb.tif"), std::string::npos) << report;
  EXPECT_NE(report.find("STOKE_MAX_IMAGE_PIXELS"), std::string::npos) << report;
  EXPECT_NE(report.find("cut.tif"), std::string::npos) << report;
  EXPECT_NE(report.find("big_cut.tif"), std::string::npos) << report;
  EXPECT_EQ(report.find("big.tif"), std::string::npos) << report;
  options.max_image_pixels = 100 * 100;  // big.tif (160x120) is now refused from its header
  const std::string limited = Dataset::from_folder(root, options).report().to_string();
  EXPECT_NE(limited.find("big.tif"), std::string::npos) << limited;
  EXPECT_NE(limited.find("160x120"), std::string::npos) << limited;
}

TEST(ImageTiff, UnsupportedLayoutsAreDecodeErrorsNamingTheFile) {
  // 4 bits per sample: written by libtiff, refused by stoke.
  const std::vector<std::uint8_t> ii_only = {'I', 'I', 42, 0};
  Image out;
  EXPECT_NE(decode_error(ii_only, "short.tif", out).find("short.tif"), std::string::npos);
  TiffSpec s{.width = 8, .height = 4, .channels = 1, .bits = 8};
  auto bytes = encode_tiff(s, tiff_samples(s));
  // Rewrite BitsPerSample (tag 258, SHORT, count 1) to 4 in the IFD.
  const std::uint32_t ifd =
      bytes[4] | bytes[5] << 8 | bytes[6] << 16 | static_cast<std::uint32_t>(bytes[7]) << 24;
  const int entries = bytes[ifd] | bytes[ifd + 1] << 8;
  bool patched = false;
  for (int e = 0; e < entries; ++e) {
    const std::size_t at = ifd + 2 + 12 * e;
    if ((bytes[at] | bytes[at + 1] << 8) == 258) bytes[at + 8] = 4, patched = true;
  }
  ASSERT_TRUE(patched);
  const std::string message = decode_error(bytes, "four.tif", out);
  EXPECT_NE(message.find("four.tif"), std::string::npos) << message;
  EXPECT_NE(message.find("bits per sample 4"), std::string::npos) << message;
}

}  // namespace
}  // namespace stoke
