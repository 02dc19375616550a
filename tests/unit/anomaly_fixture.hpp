// The anomaly models' end-to-end fixture (PatchCore and PaDiM tests): a
// random ResNet-18 at half width on 96 x 96 inputs with ImageNet
// normalization, and a synthetic set of 32 parts (half with defects) in a
// folder of the test's own.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "stoke/anomaly.hpp"
#include "stoke/backend.hpp"
#include "stoke/data.hpp"
#include "stoke/nn/model.hpp"

namespace stoke::testing {

inline constexpr int kAnomalySize = 96;

inline std::unique_ptr<nn::Model> anomaly_backbone(std::uint64_t seed) {
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kResNet18;
  spec.width_multiplier = 0.5f;
  spec.in_channels = 3;
  spec.height = spec.width = kAnomalySize;
  spec.classes = 2;
  return nn::build_model(cpu_backend(), spec, seed);
}

inline PreprocessOptions anomaly_preprocess() {
  PreprocessOptions p;
  p.width = p.height = kAnomalySize;
  p.channels = 3;
  p.normalization = Normalization::mean_std(std::vector<float>{0.485f, 0.456f, 0.406f},
                                            std::vector<float>{0.229f, 0.224f, 0.225f});
  return p;
}

// A dark 12 x 12 spot (-2 in every channel) at (y0, x0) of a preprocessed
// (3, kAnomalySize, kAnomalySize) input: a defect random features see.
inline void paint_spot(std::vector<float>& x, int y0, int x0) {
  for (int c = 0; c < 3; ++c)
    for (int y = y0; y < y0 + 12; ++y)
      for (int xx = x0; xx < x0 + 12; ++xx)
        x[static_cast<std::size_t>((c * kAnomalySize + y) * kAnomalySize + xx)] = -2.0f;
}

class SyntheticParts : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const std::string suite =
        ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    dir_ = std::filesystem::temp_directory_path() / ("stoke_" + suite + "_" + name);
    std::filesystem::remove_all(dir_);
    SyntheticOptions o;
    o.width = o.height = 192;
    o.defect_fraction = 0.5;
    o.format = SyntheticOptions::Format::kPng;
    o.seed = 3;
    const std::filesystem::path root = write_synthetic_dataset(dir_ / "data", 32, o);
    for (const auto& e : std::filesystem::directory_iterator(root / "ok"))
      good_.push_back(e.path());
    for (const auto& e : std::filesystem::directory_iterator(root / "defect"))
      defect_.push_back(e.path());
    std::sort(good_.begin(), good_.end());
    std::sort(defect_.begin(), defect_.end());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::vector<std::filesystem::path> good_, defect_;
};

}  // namespace stoke::testing
