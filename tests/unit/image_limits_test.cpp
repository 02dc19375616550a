// Limits and refusals of the decoders: header bombs (a size claimed in the
// header) refused before any allocation with resident memory bounded, JPEG
// headers that decoding would refuse, directories and special files, the
// STOKE_MAX_IMAGE_PIXELS knob, and EXIF orientation.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "stoke/config.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"
#include "unit/image_test_files.hpp"
#include "unit/image_tiff_files.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using testing::bomb_jpeg;
using testing::bomb_png;
using testing::gradient_image;

// VmPeak (virtual peak: catches a reservation even if never touched) and
// VmHWM (resident peak) in KiB.
long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field) + 1));
  }
  return -1;
}

using testing::decode_error;

TEST(ImageLimits, HeaderBombsAreRefusedBeforeAllocatingWithMemoryBounded) {
  struct Case {
    std::vector<std::uint8_t> bytes;
    const char* name;
    const char* claim;
  };
  const Case cases[] = {
      {bomb_png(60000, 60000), "bomb60k.png", "60000x60000"},
      {bomb_png(100000, 100000), "bomb100k.png", "100000x100000"},
      {bomb_jpeg(60000, 60000), "bomb60k.jpg", "60000x60000"},
      {bomb_jpeg(65000, 65000), "bomb65k.jpg", "65000x65000"},  // JPEG sides are 16-bit
      {testing::encode_bmp(gradient_image(4, 4, 3).view(), 24, false, 60000, 60000), "bomb60k.bmp",
       "60000x60000"},
      {testing::encode_bmp(gradient_image(4, 4, 1).view(), 8, true, 100000, 100000), "bomb100k.bmp",
       "100000x100000"},
      {testing::encode_tiff(
           {.width = 4, .height = 4, .bits = 16, .claimed_width = 100000, .claimed_height = 100000},
           {}),
       "bomb100k.tif", "100000x100000"},
  };
  const long peak_before = status_kib("VmPeak:");
  const long resident_before = status_kib("VmHWM:");
  for (const auto& c : cases) {
    Image out;
    const std::string message = decode_error(c.bytes, c.name, out);
    EXPECT_NE(message.find(c.name), std::string::npos) << message;
    EXPECT_NE(message.find(c.claim), std::string::npos) << message;
    EXPECT_NE(message.find("STOKE_MAX_IMAGE_PIXELS"), std::string::npos) << message;
    EXPECT_EQ(out.capacity(), 0u) << c.name << ": a buffer was reserved";
    Decoder decoder;
    EXPECT_THROW(decoder.output_info(c.bytes, c.name, {}), DecodeError) << c.name;
  }
  // The smallest bomb would need 3.6 GB of pixels; allow 256 MiB of noise.
  EXPECT_LT(status_kib("VmPeak:") - peak_before, 256 * 1024);
  EXPECT_LT(status_kib("VmHWM:") - resident_before, 64 * 1024);
}

TEST(ImageLimits, LimitIsConfigurableAndNoneLiftsIt) {
  const Image small = gradient_image(40, 30, 3);
  const auto png = encode_png(small.view());
  Image out;
  DecodeOptions tight;
  tight.max_pixels = 40 * 30 - 1;
  const std::string message = decode_error(png, "tight.png", out, tight);
  EXPECT_NE(message.find("40x30 = 1200 pixels"), std::string::npos) << message;
  tight.max_pixels = 40 * 30;
  EXPECT_EQ(decode_error(png, "exact.png", out, tight), "");

  ConfigLoadOptions load;
  load.environment =
      std::vector<std::pair<std::string, std::string>>{{"STOKE_MAX_IMAGE_PIXELS", "none"}};
  EXPECT_FALSE(Config::load(load).settings().max_image_pixels.has_value());
  load.environment =
      std::vector<std::pair<std::string, std::string>>{{"STOKE_MAX_IMAGE_PIXELS", "1000000"}};
  EXPECT_EQ(Config::load(load).settings().max_image_pixels, std::uint64_t{1000000});
  EXPECT_EQ(Config().settings().max_image_pixels, kDefaultMaxImagePixels);
  for (const char* bad : {"0", "-5", "lots"}) {
    load.environment =
        std::vector<std::pair<std::string, std::string>>{{"STOKE_MAX_IMAGE_PIXELS", bad}};
    EXPECT_THROW(Config::load(load), ConfigError) << bad;
  }
}

TEST(ImageLimits, JpegHeadersThatDecodingWouldRefuseAreRefusedByInfo) {
  // SOI + a bare APP0 + EOI: 20 bytes and no frame header.
  const std::vector<std::uint8_t> no_frame = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J',
                                              'F',  'I',  'F',  0x00, 0x01, 0x01, 0x00,
                                              0x00, 0x01, 0x00, 0x01, 0xFF, 0xD9};
  Decoder decoder;
  try {
    decoder.info(no_frame, "noframe.jpg");
    FAIL() << "a JPEG without a frame header passed";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("noframe.jpg"), std::string::npos) << e.what();
  }
  auto zero_height = bomb_jpeg(16, 0);
  EXPECT_THROW(decoder.info(zero_height, "zero.jpg"), DecodeError);
  // Luma sampled 3x1 (chroma 1x1): a sampling libjpeg-turbo cannot name.
  auto odd_sampling = encode_jpeg(gradient_image(16, 16, 3).view(), 90);
  const std::size_t sof = testing::jpeg_sof(odd_sampling);
  ASSERT_EQ(odd_sampling[sof + 9], 3);  // three components
  odd_sampling[sof + 11] = 0x31;        // component 1: H=3, V=1
  EXPECT_THROW(decoder.info(odd_sampling, "odd.jpg"), DecodeError);
}

TEST(ImageLimits, DirectoriesAndSpecialFilesAreIoErrorsNamingThem) {
  const fs::path dir = fs::temp_directory_path() / "stoke_image_limits_dir.png";
  fs::create_directories(dir);
  std::vector<std::uint8_t> bytes;
  Decoder decoder;
  Image out;
  for (const fs::path& p : {dir, fs::path("/dev/zero"), fs::path("/dev/null")}) {
    try {
      read_file(p, bytes);
      FAIL() << p << " was read";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
    EXPECT_THROW(decoder.decode_file(p, {}, out), IoError) << p;
  }
  const fs::path fifo = fs::temp_directory_path() / "stoke_image_limits.fifo";
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(read_file(fifo, bytes), IoError);  // refused, not blocked on a writer
  fs::remove(fifo);
  fs::remove_all(dir);
}

TEST(ImageLimits, ExifOrientationTurnsTheImageUprightUnlessKept) {
  const Image stored = gradient_image(48, 32, 3);
  for (int orientation = 1; orientation <= 8; ++orientation) {
    const auto jpeg = testing::with_exif_orientation(encode_jpeg(stored.view(), 95), orientation);
    Decoder decoder;
    EXPECT_EQ(decoder.info(jpeg, "o.jpg").orientation, orientation);
    Image kept, upright;
    DecodeOptions keep;
    keep.apply_orientation = false;
    decoder.decode(jpeg, "o.jpg", keep, kept);
    decoder.decode(jpeg, "o.jpg", {}, upright);
    ASSERT_EQ(kept.width(), 48);
    const bool swap = orientation >= 5;
    ASSERT_EQ(upright.width(), swap ? 32 : 48) << orientation;
    ASSERT_EQ(upright.height(), swap ? 48 : 32) << orientation;
    const auto info = decoder.output_info(jpeg, "o.jpg", {});
    EXPECT_EQ(info.width, upright.width());
    EXPECT_EQ(info.height, upright.height());
    // Where each stored corner lands: stored (x, y) -> upright pixel, per EXIF.
    const int w = 48, h = 32;
    auto upright_of = [&](int x, int y) -> std::pair<int, int> {
      switch (orientation) {
        case 2:
          return {w - 1 - x, y};
        case 3:
          return {w - 1 - x, h - 1 - y};
        case 4:
          return {x, h - 1 - y};
        case 5:
          return {y, x};
        case 6:
          return {h - 1 - y, x};
        case 7:
          return {h - 1 - y, w - 1 - x};
        case 8:
          return {y, w - 1 - x};
        default:
          return {x, y};
      }
    };
    for (auto [x, y] : {std::pair{0, 0}, std::pair{47, 0}, std::pair{0, 31}, std::pair{47, 31},
                        std::pair{20, 9}}) {
      const auto [ux, uy] = upright_of(x, y);
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(upright.data()[(static_cast<std::size_t>(uy) * upright.width() + ux) * 3 + c],
                  kept.data()[(static_cast<std::size_t>(y) * 48 + x) * 3 + c])
            << "orientation " << orientation << " stored (" << x << "," << y << ")";
      }
    }
  }
}

}  // namespace
}  // namespace stoke
