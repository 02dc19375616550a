// A small folder dataset for the deploy tests: two classes, JPEG and PNG,
// gray and RGB files of assorted sizes; and a trainer run that writes a model
// file from it.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <string>

#include "stoke/backend.hpp"
#include "stoke/deploy.hpp"
#include "stoke/train.hpp"

namespace stoke::testing {

namespace fs = std::filesystem;

// Writes root/{defect,ok}/NNN.{jpg,png}: `per_class` images each; image i is
// JPEG when i is even, stored gray when (i / 2) is odd, and of a size that
// varies with i (all larger than 24 x 20).
inline void write_mixed_dataset(const fs::path& root, int per_class, std::uint64_t seed) {
  const char* classes[] = {"defect", "ok"};
  for (int c = 0; c < 2; ++c) {
    fs::create_directories(root / classes[c]);
    for (int i = 0; i < per_class; ++i) {
      Image rgb, stored;
      const int w = 30 + (i * 7) % 23, h = 24 + (i * 5) % 17;
      synthetic_inspection_image(w, h, seed * 1000 + static_cast<std::uint64_t>(c * 100 + i),
                                 c == 0, rgb);
      const bool gray = (i / 2) % 2 == 1;
      if (gray) convert_channels(rgb.view(), 1, stored);
      const ImageView view = gray ? stored.view() : rgb.view();
      char name[32];
      std::snprintf(name, sizeof name, "%03d.%s", i, i % 2 == 0 ? "jpg" : "png");
      write_file(root / classes[c] / name, i % 2 == 0 ? encode_jpeg(view, 90) : encode_png(view));
    }
  }
}

class DeployFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    dir_ = fs::temp_directory_path() / ("stoke_deploy_" + name);
    fs::remove_all(dir_);
    write_mixed_dataset(dir_ / "train", 8, 1);
    write_mixed_dataset(dir_ / "val", 6, 2);
    train_ = Dataset::from_folder(dir_ / "train");
    val_ = Dataset::from_folder(dir_ / "val");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Loader options for `channels`, normalization and path.
  static LoaderOptions loader_options(int channels, bool mean_std, int resize, bool cached) {
    LoaderOptions l;
    l.preprocess.width = l.preprocess.height = 16;
    l.preprocess.resize_width = l.preprocess.resize_height = resize;
    l.preprocess.channels = channels;
    l.preprocess.normalization =
        mean_std ? Normalization::mean_std(std::vector<float>{0.4f, 0.5f, 0.6f},
                                           std::vector<float>{0.2f, 0.25f, 0.3f})
                 : Normalization::min_max(-1.f, 1.f);
    l.cache = cached ? CacheSpec{CacheSpec::Kind::kRam, 0, ""} : CacheSpec{};
    l.seed = 3;
    return l;
  }

  // Trains one epoch (so the best checkpoint is the final model) and writes
  // the best model file; returns the trained model.
  std::unique_ptr<nn::Model> train(const LoaderOptions& loader, FitResult* result = nullptr) {
    nn::ModelSpec spec;
    spec.architecture = nn::Architecture::kPlainCnn;
    spec.in_channels = loader.preprocess.channels;
    spec.height = spec.width = 16;
    spec.classes = 2;
    spec.widths = {4};
    auto model = nn::build_model(cpu_backend(), spec, 11);
    TrainerOptions o;
    o.epochs = 1;
    o.batch_size = 4;
    o.log_every_steps = 0;
    o.schedule.base_lr = 0.05f;
    o.best_checkpoint = model_path();
    Config config;
    config.set("STOKE_PREFETCH_DEPTH", "2");
    o.settings = config.settings();
    Trainer trainer(*model, o);
    FitResult r = trainer.fit(train_, &val_, loader);
    if (result) *result = r;
    return model;
  }

  fs::path model_path() const { return dir_ / "best.stoke"; }

  fs::path dir_;
  Dataset train_, val_;
};

}  // namespace stoke::testing
