// PatchCore end to end on the CPU backend: synthetic good parts train a bank
// that scores the synthetic defects higher; the memory cap and broken model
// files are clear errors; a saved model scores as the trained one.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "op_test_util.hpp"
#include "stoke/anomaly.hpp"
#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"

namespace stoke::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kSize = 96;

std::unique_ptr<nn::Model> backbone(std::uint64_t seed) {
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kResNet18;
  spec.width_multiplier = 0.5f;
  spec.in_channels = 3;
  spec.height = spec.width = kSize;
  spec.classes = 2;
  return nn::build_model(cpu_backend(), spec, seed);
}

PreprocessOptions preprocess() {
  PreprocessOptions p;
  p.width = p.height = kSize;
  p.channels = 3;
  p.normalization = Normalization::mean_std(std::vector<float>{0.485f, 0.456f, 0.406f},
                                            std::vector<float>{0.229f, 0.224f, 0.225f});
  return p;
}

class AnomalyModel : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("stoke_anomaly_" + name);
    fs::remove_all(dir_);
    SyntheticOptions o;
    o.width = o.height = 192;
    o.defect_fraction = 0.5;
    o.format = SyntheticOptions::Format::kPng;
    o.seed = 3;
    const fs::path root = write_synthetic_dataset(dir_ / "data", 32, o);
    for (const auto& e : fs::directory_iterator(root / "ok")) good_.push_back(e.path());
    for (const auto& e : fs::directory_iterator(root / "defect")) defect_.push_back(e.path());
    std::sort(good_.begin(), good_.end());
    std::sort(defect_.begin(), defect_.end());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::vector<fs::path> good_, defect_;
};

TEST_F(AnomalyModel, SyntheticDefectsScoreAboveHeldOutGoodParts) {
  ASSERT_GE(good_.size(), 8u);
  ASSERT_GE(defect_.size(), 8u);
  anomaly::PatchCoreOptions o;
  o.coreset_ratio = 0.25;
  anomaly::PatchCore core(backbone(1), preprocess(), o);
  const std::vector<fs::path> train(good_.begin(), good_.end() - 4);
  core.fit(train);
  std::vector<float> good, defect;
  for (auto it = good_.end() - 4; it != good_.end(); ++it)
    good.push_back(core.score_file(*it).score);
  for (const auto& f : defect_) defect.push_back(core.score_file(f).score);
  const double auroc = anomaly::image_auroc(good, defect);
  std::printf("synthetic image AUROC (random ResNet-18/2 features, %zu good, %zu defect): %.3f\n",
              good.size(), defect.size(), auroc);
  EXPECT_GE(auroc, 0.8);
  const anomaly::AnomalyResult r = core.score_file(defect_.front());
  EXPECT_EQ(r.height, kSize);
  EXPECT_EQ(r.map.size(), static_cast<std::size_t>(kSize * kSize));
  EXPECT_GT(*std::max_element(r.map.begin(), r.map.end()), 0.0f);
}

TEST_F(AnomalyModel, BankOverTheMemoryCapNamesTheOption) {
  anomaly::PatchCoreOptions o;
  o.max_bank_bytes = 1024;
  anomaly::PatchCore core(backbone(1), preprocess(), o);
  try {
    core.fit({good_.front(), good_.back()});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("max_bank_bytes"), std::string::npos) << e.what();
  }
}

TEST_F(AnomalyModel, SavedModelScoresAsTrainedAndBrokenFilesAreRefused) {
  anomaly::PatchCoreOptions o;
  o.coreset_ratio = 0.5;
  anomaly::PatchCore core(backbone(2), preprocess(), o);
  core.fit({good_[0], good_[1], good_[2]});
  core.calibrate({good_[3], good_[4]});
  const fs::path path = dir_ / "model.stoke";
  core.save(path);
  anomaly::PatchCore back = anomaly::PatchCore::load(path, cpu_backend());
  EXPECT_EQ(back.bank(), core.bank());
  EXPECT_EQ(back.threshold(), core.threshold());
  const auto a = core.score_file(defect_[0]), b = back.score_file(defect_[0]);
  EXPECT_EQ(a.score, b.score);
  EXPECT_EQ(a.map, b.map);

  // A bank shorter than rows x width: written through the checkpoint (valid CRC).
  nn::CheckpointInfo info;
  auto model = nn::load_model(path.string(), cpu_backend(), &info);
  info.metadata["anomaly.bank"].resize(info.metadata["anomaly.bank"].size() - 4);
  const fs::path cut = dir_ / "cut_bank.stoke";
  nn::save_checkpoint(cut.string(), *model, nullptr, info.metadata);
  try {
    anomaly::PatchCore::load(cut, cpu_backend());
    FAIL() << "no error";
  } catch (const CorruptFile& e) {
    EXPECT_NE(std::string(e.what()).find("anomaly.bank"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(cut.string()), std::string::npos) << e.what();
  }
  // The file itself cut short.
  const auto size = fs::file_size(path);
  fs::copy_file(path, dir_ / "short.stoke");
  fs::resize_file(dir_ / "short.stoke", size / 2);
  EXPECT_THROW(anomaly::PatchCore::load(dir_ / "short.stoke", cpu_backend()), CorruptFile);
}

}  // namespace
}  // namespace stoke::testing
