// The mixed-precision training fixture (tests/unit/train_bf16_test.cpp on
// the CPU, tests/gpu/train_bf16_device_test.cpp on CUDA): four classes of
// 16x16 gray images under heavy noise, a small plain CNN, and a fit in a
// given precision on a given backend.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/train.hpp"

namespace stoke::testing {

namespace bf16_training_detail {

inline void write_idx(const std::filesystem::path& path, const std::vector<unsigned char>& data,
                      const std::vector<int>& dims) {
  std::ofstream out(path, std::ios::binary);
  const unsigned char magic[4] = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  out.write(reinterpret_cast<const char*>(magic), 4);
  for (int d : dims) {
    const unsigned char be[4] = {static_cast<unsigned char>(d >> 24),
                                 static_cast<unsigned char>(d >> 16),
                                 static_cast<unsigned char>(d >> 8), static_cast<unsigned char>(d)};
    out.write(reinterpret_cast<const char*>(be), 4);
  }
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

}  // namespace bf16_training_detail

// Four classes of 16x16 gray images: horizontal stripes, vertical stripes, a
// checkerboard (period 4, amplitude kAmp) and none, under pixel noise of
// standard deviation 40, so neither precision reaches 100 % (~88 %) and a
// difference between them would show.
class Bf16Training : public ::testing::Test {
 protected:
  static constexpr int kSide = 16;
  static constexpr float kAmp = 12.0f;  // fp32 reaches ~88 % in 4 epochs

  void SetUp() override {
    // One folder per test: ctest runs the fixture's tests as parallel processes.
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("stoke_train_bf16_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    train_ = write_set("train", 1200, 11);
    val_ = write_set("val", 600, 12);
    loader_.preprocess.width = loader_.preprocess.height = kSide;
    loader_.preprocess.channels = 1;
    loader_.preprocess.normalization =
        Normalization::mean_std(std::vector<float>{0.45f}, std::vector<float>{0.25f});
    loader_.cache = CacheSpec{};
    loader_.seed = 3;
    spec_.architecture = nn::Architecture::kPlainCnn;
    spec_.in_channels = 1;
    spec_.height = spec_.width = kSide;
    spec_.classes = 4;
    spec_.widths = {8, 16};
    options_.epochs = 4;
    options_.batch_size = 32;
    options_.log_every_steps = 0;
    options_.optimizer = OptimizerKind::kAdam;
    options_.schedule.base_lr = 0.003f;
    options_.seed = 5;
    Config config;
    config.set("STOKE_PREFETCH_DEPTH", "2");
    options_.settings = config.settings();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Dataset write_set(const std::string& name, int count, std::uint32_t seed) {
    std::vector<unsigned char> pixels(static_cast<std::size_t>(count) * kSide * kSide);
    std::vector<unsigned char> labels(static_cast<std::size_t>(count));
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 40.0f);
    for (int i = 0; i < count; ++i) {
      const int c = i % 4;
      labels[static_cast<std::size_t>(i)] = static_cast<unsigned char>(c);
      for (int y = 0; y < kSide; ++y) {
        for (int x = 0; x < kSide; ++x) {
          const bool on = c == 0   ? y % 4 < 2
                          : c == 1 ? x % 4 < 2
                          : c == 2 ? (x / 2 + y / 2) % 2
                                   : 0;
          const float v = 110.0f + (c == 3 ? 0.0f : on ? kAmp : -kAmp) + noise(rng);
          pixels[(static_cast<std::size_t>(i) * kSide + y) * kSide + x] =
              static_cast<unsigned char>(std::clamp(v, 0.0f, 255.0f));
        }
      }
    }
    bf16_training_detail::write_idx(dir_ / (name + "_images.idx"), pixels, {count, kSide, kSide});
    bf16_training_detail::write_idx(dir_ / (name + "_labels.idx"), labels, {count});
    return Dataset::from_idx(dir_ / (name + "_images.idx"), dir_ / (name + "_labels.idx"));
  }

  FitResult fit(Precision precision) { return fit(cpu_backend(), precision); }
  FitResult fit(Backend& backend, Precision precision) {
    auto model = nn::build_model(backend, spec_, 7);
    TrainerOptions o = options_;
    o.precision = precision;
    Trainer trainer(*model, o);
    FitResult r = trainer.fit(train_, &val_, loader_);
    EXPECT_EQ(backend.training_precision(), Precision::kFp32) << "fit left its precision on";
    return r;
  }

  // Trains in fp32 and in `low` (bf16 or fp16) on `backend` from the same
  // seed: the same validation accuracy within 1 point, the low-precision
  // run's losses other than fp32's but within 5 % of them every epoch. Returns
  // the low-precision fit.
  FitResult expect_matches_fp32(Backend& backend, Precision low = Precision::kBf16) {
    const FitResult fp32 = fit(backend, Precision::kFp32);
    FitResult r = fit(backend, low);
    EXPECT_EQ(fp32.precision, Precision::kFp32);
    EXPECT_EQ(r.precision, low);
    EXPECT_EQ(fp32.log.epochs.size(), r.log.epochs.size());
    if (fp32.log.epochs.size() != r.log.epochs.size() || r.log.epochs.empty()) return r;
    const double a32 = fp32.log.epochs.back().val_accuracy;
    const double a16 = r.log.epochs.back().val_accuracy;
    std::printf("%s: val accuracy fp32 %.4f %s %.4f; last train loss fp32 %.4f %s %.4f\n",
                backend.name().c_str(), a32, to_string(low), a16, fp32.log.epochs.back().train_loss,
                to_string(low), r.log.epochs.back().train_loss);
    // Learned, but not trivially: a difference of 1 pp is 6 of the 600 images.
    EXPECT_GT(a32, 0.6);
    EXPECT_LT(a32, 0.995);
    EXPECT_LE(std::fabs(a32 - a16), 0.01) << "fp32 " << a32 << ", " << to_string(low) << " " << a16;
    // The low precision did run: the same seed and data give other losses.
    EXPECT_NE(fp32.log.epochs.back().train_loss, r.log.epochs.back().train_loss);
    for (std::size_t e = 0; e < fp32.log.epochs.size(); ++e) {
      const double l32 = fp32.log.epochs[e].train_loss, l16 = r.log.epochs[e].train_loss;
      EXPECT_LE(std::fabs(l32 - l16), 0.05 * l32) << "epoch " << e << ": losses apart";
    }
    return r;
  }

  std::filesystem::path dir_;
  Dataset train_, val_;
  LoaderOptions loader_;
  nn::ModelSpec spec_;
  TrainerOptions options_;
};

}  // namespace stoke::testing
