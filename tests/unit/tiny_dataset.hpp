// A tiny separable image-classification fixture shared by the trainer and
// autotuner tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "stoke/backend.hpp"
#include "stoke/train.hpp"

namespace stoke::testing {

namespace fs = std::filesystem;

// A separable two-class problem written as plain IDX files: class 0 is bright
// on the left half, class 1 on the right half, with seeded noise.
class TinyDataset : public ::testing::Test {
 protected:
  static constexpr int kSide = 12;
  static constexpr int kCount = 192;

  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stoke_train_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::vector<unsigned char> pixels(static_cast<std::size_t>(kCount) * kSide * kSide);
    std::vector<unsigned char> labels(kCount);
    std::uint32_t rng = 12345;
    for (int i = 0; i < kCount; ++i) {
      labels[i] = static_cast<unsigned char>(i % 2);
      for (int y = 0; y < kSide; ++y) {
        for (int x = 0; x < kSide; ++x) {
          rng = rng * 1664525u + 1013904223u;
          const bool bright = (x < kSide / 2) == (labels[i] == 0);
          const int v = (bright ? 170 : 60) + static_cast<int>(rng >> 26);
          pixels[(static_cast<std::size_t>(i) * kSide + y) * kSide + x] =
              static_cast<unsigned char>(v);
        }
      }
    }
    write_idx(dir_ / "images.idx", pixels, {kCount, kSide, kSide});
    write_idx(dir_ / "labels.idx", labels, {kCount});
    data_ = Dataset::from_idx(dir_ / "images.idx", dir_ / "labels.idx");
    loader_.preprocess.width = kSide;
    loader_.preprocess.height = kSide;
    loader_.preprocess.channels = 1;
    loader_.preprocess.normalization =
        Normalization::mean_std(std::vector<float>{0.45f}, std::vector<float>{0.25f});
    loader_.cache = CacheSpec{};
    spec_.architecture = nn::Architecture::kPlainCnn;
    spec_.in_channels = 1;
    spec_.height = kSide;
    spec_.width = kSide;
    spec_.classes = 2;
    spec_.widths = {8};
    options_.batch_size = 16;
    options_.log_every_steps = 0;
    options_.schedule.base_lr = 0.05f;
    Config config;
    config.set("STOKE_PREFETCH_DEPTH", "2");
    options_.settings = config.settings();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write_idx(const fs::path& path, const std::vector<unsigned char>& data,
                        const std::vector<int>& dims) {
    std::ofstream out(path, std::ios::binary);
    const unsigned char magic[4] = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
    out.write(reinterpret_cast<const char*>(magic), 4);
    for (int d : dims) {
      const unsigned char be[4] = {
          static_cast<unsigned char>(d >> 24), static_cast<unsigned char>(d >> 16),
          static_cast<unsigned char>(d >> 8), static_cast<unsigned char>(d)};
      out.write(reinterpret_cast<const char*>(be), 4);
    }
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size()));
  }

  std::unique_ptr<nn::Model> model() { return nn::build_model(cpu_backend(), spec_, 7); }

  fs::path dir_;
  Dataset data_;
  LoaderOptions loader_;
  nn::ModelSpec spec_;
  TrainerOptions options_;
};

}  // namespace stoke::testing
