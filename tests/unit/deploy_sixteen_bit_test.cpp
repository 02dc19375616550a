// The predictor's preprocessing treats 16-bit samples exactly as the trainer's
// validation loader does (bit for bit): 16-bit PNG and TIFF files, gray and
// RGB, 8-bit files beside them, direct and staged paths; and a Mono16 buffer
// equals its 16-bit file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "deploy/preprocess.hpp"
#include "modelfile/model_file.hpp"
#include "stoke/data.hpp"
#include "unit/image_tiff_files.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;

Image random_image(int width, int height, int channels, int bit_depth, std::uint32_t seed) {
  Image image(width, height, channels, bit_depth);
  std::uint32_t rng = seed;
  const std::size_t n = static_cast<std::size_t>(width) * height * channels;
  for (std::size_t i = 0; i < n; ++i) {
    rng = rng * 1664525u + 1013904223u;
    if (bit_depth == 16) {
      image.data16()[i] = static_cast<std::uint16_t>(rng >> 16);
    } else {
      image.data()[i] = static_cast<std::uint8_t>(rng >> 24);
    }
  }
  return image;
}

TEST(DeploySixteenBit, PreprocessorEqualsTheValidationLoaderOnSixteenBitFiles) {
  const fs::path root = fs::temp_directory_path() / "stoke_deploy_sixteen_bit";
  fs::remove_all(root);
  fs::create_directories(root / "x");
  std::vector<Image> gray16;
  for (int i = 0; i < 6; ++i) {
    const int channels = i % 3 == 2 ? 3 : 1;
    const int depth = i == 5 ? 8 : 16;
    Image image = random_image(30 + 3 * i, 22 + i, channels, depth, 100u + i);
    char name[16];
    std::snprintf(name, sizeof name, "%d.%s", i, i % 2 ? "tif" : "png");
    if (i % 2 && depth == 16) {
      testing::TiffSpec s{.width = image.width(),
                          .height = image.height(),
                          .channels = channels,
                          .bits = 16,
                          .compression = COMPRESSION_LZW};
      const std::size_t n = static_cast<std::size_t>(image.width()) * image.height() * channels;
      write_file(root / "x" / name, testing::encode_tiff(s, {image.data16(), image.data16() + n}));
    } else {
      write_file(root / "x" / name, encode_png(image.view()));
    }
    if (channels == 1 && depth == 16) gray16.push_back(std::move(image));
  }
  const Dataset dataset = Dataset::from_folder(root);
  ASSERT_EQ(dataset.size(), 6u);
  for (const int channels : {1, 3}) {
    for (const int resize : {16, 20}) {
      for (const bool cached : {false, true}) {
        LoaderOptions l;
        l.preprocess.width = l.preprocess.height = 16;
        l.preprocess.resize_width = l.preprocess.resize_height = resize;
        l.preprocess.channels = channels;
        l.preprocess.normalization = Normalization::mean_std(std::vector<float>{0.4f, 0.5f, 0.6f},
                                                             std::vector<float>{0.2f, 0.25f, 0.3f});
        l.cache = cached ? CacheSpec{CacheSpec::Kind::kRam, 0, ""} : CacheSpec{};
        ModelInfo info;
        info.preprocess = l.preprocess;
        info.staged = modelfile_detail::loader_is_staged(l);
        Loader loader(dataset, modelfile_detail::loader_options_for(info, dataset.size()));
        std::vector<float> expected(loader.sample_bytes() / sizeof(float) * dataset.size());
        std::vector<std::int32_t> labels(dataset.size());
        loader.fill_batch(0, 0, std::as_writable_bytes(std::span<float>(expected)), labels);
        deploy_detail::SamplePreprocessor pre(info, loader.simd());
        const std::size_t n = pre.sample_size();
        std::vector<float> mine(n);
        for (std::size_t i = 0; i < dataset.size(); ++i) {
          pre.from_file(dataset.path(i), mine);
          EXPECT_EQ(std::memcmp(mine.data(), expected.data() + i * n, n * sizeof(float)), 0)
              << dataset.path(i) << ", " << channels << " channels, resize " << resize
              << ", cached " << cached;
        }
        for (const Image& image : gray16) {  // Mono16 buffers equal their 16-bit PNG
          std::vector<float> from_file(n);
          pre.from_bytes(encode_png(image.view()), "mem.png", from_file);
          pre.from_pixels({image.data(), image.width(), image.height(), PixelFormat::kMono16, 0},
                          mine);
          EXPECT_EQ(mine, from_file);
        }
      }
    }
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace stoke
