// Datasets from application buffers (Mono8, RGB8, BGR8, with row strides)
// give the same batches as the same images written as files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "unit/image_test_files.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using testing::gradient_image;

TEST(DataBuffers, EqualFileDatasetsBatchForBatch) {
  const fs::path root = fs::temp_directory_path() / "stoke_data_buffers_test";
  fs::remove_all(root);
  fs::create_directories(root / "a");
  fs::create_directories(root / "b");
  // Images of different sizes and layouts; storage buffers with padded strides.
  std::vector<std::vector<std::uint8_t>> storage;
  std::vector<ImageBuffer> buffers;
  std::vector<std::int32_t> labels;
  for (int i = 0; i < 10; ++i) {
    const int label = i % 2;
    const PixelFormat format =
        i % 3 == 0 ? PixelFormat::kMono8 : (i % 3 == 1 ? PixelFormat::kRgb8 : PixelFormat::kBgr8);
    const int channels = format == PixelFormat::kMono8 ? 1 : 3;
    const Image image = gradient_image(16 + i, 12 + 2 * i, channels, 9 * i);
    write_file(root / (label ? "b" : "a") / ("img" + std::to_string(i) + ".png"),
               encode_png(image.view()));
    const std::size_t row = image.stride(), stride = row + 5 * (i % 2);
    std::vector<std::uint8_t> bytes(stride * image.height(), 0xEE);
    for (int y = 0; y < image.height(); ++y) {
      for (std::size_t x = 0; x < row; ++x) {
        const std::size_t source =
            format == PixelFormat::kBgr8 ? x - x % 3 + (2 - x % 3) : x;  // RGB -> BGR
        bytes[y * stride + x] = image.data()[y * row + source];
      }
    }
    storage.push_back(std::move(bytes));
    buffers.push_back({storage.back().data(), image.width(), image.height(), format, stride});
    labels.push_back(label);
  }
  const Dataset files = Dataset::from_folder(root);
  // from_folder lists a/ (even i) then b/ (odd i), each by name.
  std::vector<ImageBuffer> ordered;
  std::vector<std::int32_t> ordered_labels;
  for (int label = 0; label < 2; ++label) {
    for (int i = label; i < 10; i += 2)
      ordered.push_back(buffers[i]), ordered_labels.push_back(label);
  }
  const Dataset memory = Dataset::from_buffers(ordered, ordered_labels, {"a", "b"});
  ASSERT_EQ(memory.size(), files.size());
  EXPECT_TRUE(memory.in_memory());
  EXPECT_EQ(memory.class_names(), files.class_names());

  LoaderOptions o;
  o.preprocess.width = 12;
  o.preprocess.height = 10;
  o.preprocess.resize_width = 14;
  o.preprocess.resize_height = 12;
  o.preprocess.channels = 3;
  o.batch_size = 4;
  o.seed = 5;
  o.cache = CacheSpec{};
  o.simd = SimdLevel::kScalar;
  o.augment.hflip_probability = 0.5f;
  Loader from_files(files, o), from_memory(memory, o);
  const std::size_t n = o.batch_size * from_files.sample_bytes();
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    for (std::size_t b = 0; b < from_files.batches_per_epoch(); ++b) {
      std::vector<std::byte> x1(n), x2(n);
      std::vector<std::int32_t> y1(4, -1), y2(4, -1);
      EXPECT_EQ(from_files.fill_batch(epoch, b, x1, y1), from_memory.fill_batch(epoch, b, x2, y2));
      EXPECT_EQ(y1, y2) << "epoch " << epoch << " batch " << b;
      EXPECT_TRUE(x1 == x2) << "epoch " << epoch << " batch " << b;
    }
  }
  fs::remove_all(root);
}

TEST(DataBuffers, BadBuffersAreRejectedNamingTheImage) {
  std::vector<std::uint8_t> pixels(64, 1);
  const std::int32_t label = 0;
  auto error_of = [&](ImageBuffer b, std::int32_t l = 0) {
    try {
      Dataset::from_buffers(std::span(&b, 1), std::span(&l, 1), {"only"});
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of({nullptr, 4, 4, PixelFormat::kMono8, 0}).find("image 0: null"),
            std::string::npos);
  EXPECT_NE(error_of({pixels.data(), 0, 4, PixelFormat::kMono8, 0}).find("size"),
            std::string::npos);
  EXPECT_NE(error_of({pixels.data(), 4, 4, PixelFormat::kRgb8, 8}).find("stride"),
            std::string::npos);
  EXPECT_NE(error_of({pixels.data(), 4, 4, PixelFormat::kMono8, 0}, 3).find("label 3"),
            std::string::npos);
  DatasetOptions tight;
  tight.max_image_pixels = 15;
  ImageBuffer b{pixels.data(), 4, 4, PixelFormat::kMono8, 0};
  EXPECT_THROW(Dataset::from_buffers(std::span(&b, 1), std::span(&label, 1), {"only"}, tight),
               InvalidArgument);
}

// A 12- or 16-bit camera frame (Mono16) keeps its full precision (row stride
// honoured): each sample normalizes as v / 65535. A uint8 output (normalized
// on the device) carries its 8-bit reduction round(v * 255 / 65535).
TEST(DataBuffers, Mono16FramesKeepFullPrecisionAndReduceOnlyForUint8Output) {
  const int w = 9, h = 7;
  const std::size_t stride16 = 2 * w + 6;
  std::vector<std::uint8_t> raw(stride16 * h, 0xAB), reduced(static_cast<std::size_t>(w) * h);
  std::vector<std::uint16_t> values;
  std::uint32_t rng = 77;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      rng = rng * 1664525u + 1013904223u;
      const auto v = static_cast<std::uint16_t>(rng >> 16);
      std::memcpy(&raw[y * stride16 + 2 * x], &v, 2);
      values.push_back(v);
      reduced[static_cast<std::size_t>(y) * w + x] =
          static_cast<std::uint8_t>((v * 255u + 32767u) / 65535u);
    }
  }
  const std::int32_t label = 0;
  const ImageBuffer wide{raw.data(), w, h, PixelFormat::kMono16, stride16};
  const ImageBuffer narrow{reduced.data(), w, h, PixelFormat::kMono8, 0};
  const Dataset a = Dataset::from_buffers(std::span(&wide, 1), std::span(&label, 1), {"only"});
  const Dataset b = Dataset::from_buffers(std::span(&narrow, 1), std::span(&label, 1), {"only"});
  EXPECT_EQ(a.bit_depth(0), 16);
  LoaderOptions o;
  o.preprocess.width = w;
  o.preprocess.height = h;
  o.preprocess.channels = 1;
  o.batch_size = 1;
  o.cache = CacheSpec{};
  float scale, bias;
  o.preprocess.normalization.affine(0, scale, bias);
  std::vector<std::int32_t> ya(1), yb(1);
  {
    Loader la(a, o);
    std::vector<float> xa(la.sample_bytes() / sizeof(float));
    la.fill_batch(0, 0, std::as_writable_bytes(std::span<float>(xa)), ya);
    for (std::size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(xa[i], (static_cast<float>(values[i]) / 257.f) * scale + bias) << i;
  }
  o.preprocess.dtype = OutputDtype::kUint8;
  Loader la(a, o), lb(b, o);
  std::vector<std::byte> xa(la.sample_bytes()), xb(lb.sample_bytes());
  la.fill_batch(0, 0, xa, ya);
  lb.fill_batch(0, 0, xb, yb);
  EXPECT_TRUE(xa == xb);
  EXPECT_STREQ(to_string(PixelFormat::kMono16), "Mono16");
}

}  // namespace
}  // namespace stoke
