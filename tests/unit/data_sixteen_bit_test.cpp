// 16-bit samples through the Loader: 16-bit PNG and TIFF files whose samples
// differ only in the low byte give different batches (direct and staged
// paths); 8-bit files and their 16-bit versions (u * 257) give identical
// batches where nothing is resampled; Mono16 buffers equal 16-bit files batch
// for batch in a mixed 8/16-bit dataset with cache and augmentation; a uint8
// output still reduces 16-bit samples to 8 bits.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "stoke/data.hpp"
#include "stoke/image.hpp"
#include "unit/image_test_files.hpp"
#include "unit/image_tiff_files.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using testing::encode_tiff;
using testing::gradient_image;
using testing::TiffSpec;

fs::path fresh_dir(const std::string& name) {
  const fs::path root = fs::temp_directory_path() / ("stoke_data16_" + name);
  fs::remove_all(root);
  fs::create_directories(root / "x");
  return root;
}

std::vector<std::uint16_t> samples_of(const Image& image) {
  const std::size_t n = static_cast<std::size_t>(image.width()) * image.height() * image.channels();
  return {image.data16(), image.data16() + n};
}

void write_tiff16(const fs::path& path, const Image& image) {
  TiffSpec s{.width = image.width(),
             .height = image.height(),
             .channels = image.channels(),
             .bits = 16,
             .compression = COMPRESSION_ADOBE_DEFLATE};
  write_file(path, encode_tiff(s, samples_of(image)));
}

// Every batch of every epoch, concatenated.
std::vector<std::byte> all_batches(const Dataset& dataset, const LoaderOptions& o, int epochs) {
  Loader loader(dataset, o);
  std::vector<std::byte> out;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b) {
      std::vector<std::byte> x(o.batch_size * loader.sample_bytes());
      std::vector<std::int32_t> y(o.batch_size);
      const std::size_t n = loader.fill_batch(epoch, b, x, y);
      out.insert(out.end(), x.begin(), x.begin() + n * loader.sample_bytes());
    }
  }
  return out;
}

LoaderOptions options(int width, int height, int channels, int resize, bool cached) {
  LoaderOptions o;
  o.preprocess.width = width;
  o.preprocess.height = height;
  o.preprocess.resize_width = resize ? resize : width;
  o.preprocess.resize_height = resize ? resize * height / width : height;
  o.preprocess.channels = channels;
  o.batch_size = 4;
  o.shuffle = false;
  o.cache = cached ? CacheSpec{CacheSpec::Kind::kRam, 0, ""} : CacheSpec{};
  return o;
}

TEST(DataSixteenBit, LowByteDifferencesReachTheBatchFromPngAndTiff) {
  const fs::path root = fresh_dir("low_byte");
  const int w = 12, h = 8;
  Image a(w, h, 1, 16), b(w, h, 1, 16);
  for (int i = 0; i < w * h; ++i) {
    a.data16()[i] = static_cast<std::uint16_t>(257 * (i % 150));  // b: same 8-bit reduction
    b.data16()[i] = static_cast<std::uint16_t>(a.data16()[i] + 77);
  }
  write_file(root / "x" / "0a.png", encode_png(a.view()));
  write_file(root / "x" / "1b.png", encode_png(b.view()));
  write_tiff16(root / "x" / "2a.tif", a);
  write_tiff16(root / "x" / "3b.tif", b);
  const Dataset dataset = Dataset::from_folder(root);
  ASSERT_EQ(dataset.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(dataset.bit_depth(i), 16) << dataset.path(i);
  // Direct (no cache, no resize target), staged (cache), staged with a resize.
  struct Path {
    bool cached;
    int out_w, out_h, resize;
  };
  for (const Path& p : {Path{false, w, h, 0}, Path{true, w, h, 0}, Path{true, 6, 4, 9}}) {
    const bool cached = p.cached;
    const LoaderOptions o = options(p.out_w, p.out_h, 1, p.resize, cached);
    const auto batches = all_batches(dataset, o, 1);
    const std::size_t n = batches.size() / 4 / sizeof(float);
    const auto* x = reinterpret_cast<const float*>(batches.data());
    // Resampled, the stage rounds a and b to whole 16-bit steps each (one step apart at most).
    const double tol = (p.resize ? 1 / 65535.0 : 0) + 1e-6;
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(x[n + i] - x[i], 77 / 65535.0, tol) << "PNG, cached " << cached << " " << i;
      EXPECT_NEAR(x[3 * n + i] - x[2 * n + i], 77 / 65535.0, tol) << "TIFF " << i;
      EXPECT_EQ(x[i], x[2 * n + i]);  // PNG and TIFF of the same samples
    }
  }
  fs::remove_all(root);
}

TEST(DataSixteenBit, EightBitFilesAndTheirSixteenBitVersionsGiveIdenticalBatches) {
  const fs::path narrow = fresh_dir("narrow"), wide = fresh_dir("wide");
  for (int i = 0; i < 6; ++i) {
    const int channels = i % 2 ? 3 : 1;
    const Image u = gradient_image(20, 14, channels, 13 * i);
    const std::string name = std::to_string(i) + ".png";
    write_file(narrow / "x" / name, encode_png(u.view()));
    write_file(wide / "x" / name, encode_png(u.view(), 16));  // v = u * 257
  }
  const Dataset a = Dataset::from_folder(narrow), b = Dataset::from_folder(wide);
  EXPECT_EQ(a.bit_depth(0), 8);
  EXPECT_EQ(b.bit_depth(0), 16);
  // Gray files only for a gray output: RGB -> gray luma rounds differently at 16 bits.
  const std::vector<std::size_t> gray_files = {0, 2, 4};
  for (const int channels : {1, 3}) {
    const Dataset sa = channels == 1 ? a.subset(gray_files) : a;
    const Dataset sb = channels == 1 ? b.subset(gray_files) : b;
    // The direct path at the stored size: bit for bit.
    EXPECT_TRUE(all_batches(sa, options(20, 14, channels, 0, false), 1) ==
                all_batches(sb, options(20, 14, channels, 0, false), 1))
        << channels << " channels, direct";
    for (const bool cached : {false, true}) {
      // Staged at the stored size, random crops and flips: bit for bit.
      LoaderOptions o = options(16, 10, channels, 20, cached);
      o.preprocess.resize_height = 14;
      o.augment.random_crop = true;
      o.augment.hflip_probability = 0.5f;
      o.augment.vflip_probability = 0.5f;
      EXPECT_TRUE(all_batches(sa, o, 2) == all_batches(sb, o, 2))
          << channels << " channels, cached " << cached;
    }
  }
  fs::remove_all(narrow);
  fs::remove_all(wide);
}

TEST(DataSixteenBit, Mono16BuffersEqualSixteenBitFilesBatchForBatch) {
  const fs::path root = fresh_dir("buffers");
  std::vector<std::vector<std::uint8_t>> storage;
  std::vector<ImageBuffer> buffers;
  std::vector<std::int32_t> labels;
  for (int i = 0; i < 9; ++i) {
    const int w = 15 + i, h = 11 + (i * 3) % 5;
    const bool sixteen = i % 3 != 2;  // a mixed dataset: two of three Mono16
    Image image(w, h, 1, sixteen ? 16 : 8);
    std::uint32_t rng = 1234u + i;
    for (std::size_t k = 0; k < static_cast<std::size_t>(w) * h; ++k) {
      rng = rng * 1664525u + 1013904223u;
      if (sixteen) {
        image.data16()[k] = static_cast<std::uint16_t>(rng >> 16);
      } else {
        image.data()[k] = static_cast<std::uint8_t>(rng >> 24);
      }
    }
    char name[16];
    std::snprintf(name, sizeof name, "%02d.%s", i, i % 3 == 1 ? "tif" : "png");
    if (i % 3 == 1) {
      write_tiff16(root / "x" / name, image);
    } else {
      write_file(root / "x" / name, encode_png(image.view()));
    }
    const std::size_t row = image.stride(), stride = row + 3 * (i % 2);  // odd padding too
    std::vector<std::uint8_t> bytes(stride * h, 0xEE);
    for (int y = 0; y < h; ++y) std::memcpy(&bytes[y * stride], image.view().row(y), row);
    storage.push_back(std::move(bytes));
    buffers.push_back({storage.back().data(), w, h,
                       sixteen ? PixelFormat::kMono16 : PixelFormat::kMono8, stride});
    labels.push_back(0);
  }
  const Dataset files = Dataset::from_folder(root);
  const Dataset memory = Dataset::from_buffers(buffers, labels, {"x"});
  ASSERT_EQ(files.size(), memory.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(files.bit_depth(i), memory.bit_depth(i)) << i;
    EXPECT_EQ(memory.pixels(i).bit_depth, memory.bit_depth(i));
  }
  for (const bool cached : {false, true}) {
    for (const int channels : {1, 3}) {
      LoaderOptions o = options(12, 8, channels, 14, cached);
      o.shuffle = true;
      o.seed = 9;
      o.augment.random_crop = true;
      o.augment.hflip_probability = 0.5f;
      o.augment.brightness = 0.1f;
      o.augment.contrast = 0.2f;
      o.preprocess.normalization =
          Normalization::mean_std(std::vector<float>{0.45f}, std::vector<float>{0.22f});
      const auto x = all_batches(files, o, 2);
      EXPECT_TRUE(x == all_batches(memory, o, 2)) << "cached " << cached << ", " << channels;
      // The staged path (cache) equals itself uncached: the cache holds 16-bit entries.
      o.cache = CacheSpec{};
      EXPECT_TRUE(x == all_batches(files, o, 2)) << "cache off, " << channels;
    }
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace stoke
