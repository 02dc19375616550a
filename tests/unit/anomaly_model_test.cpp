// PatchCore end to end on the CPU backend: synthetic good parts train a bank
// that scores a painted defect higher and finds it in the map; the memory cap and broken model
// files are clear errors; a saved model scores as the trained one.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "anomaly/coreset.hpp"
#include "op_test_util.hpp"
#include "stoke/anomaly.hpp"
#include "stoke/backend.hpp"
#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "unit/anomaly_fixture.hpp"

namespace stoke::testing {
namespace {

namespace fs = std::filesystem;

class AnomalyModel : public SyntheticParts {};

// Random backbone features (no pretrained weights here) do not separate the
// generator's thin scratches from its good parts (image AUROC about 0.54 at
// 128 px, the same for PyTorch's random ResNet-18: docs/anomaly.md), so the
// defect is one random features do see: a dark 12 x 12 spot painted into
// held-out good parts. Each spotted part must score above itself unspotted,
// and its map must peak on the spot.
TEST_F(AnomalyModel, SpottedPartsScoreAboveThemselvesAndTheMapFindsTheSpot) {
  ASSERT_GE(good_.size(), 8u);
  anomaly::PatchCoreOptions o;
  o.coreset_ratio = 0.25;
  anomaly::PatchCore core(anomaly_backbone(1), anomaly_preprocess(), o);
  const std::vector<fs::path> train(good_.begin(), good_.end() - 4);
  core.fit(train);
  for (auto it = good_.end() - 4; it != good_.end(); ++it) {
    std::vector<float> x = core.preprocess_file(*it);
    const anomaly::AnomalyResult clean = core.score_input(x);
    const int y0 = 20 + static_cast<int>(it - good_.begin()) % 3 * 20, x0 = 60;
    paint_spot(x, y0, x0);
    const anomaly::AnomalyResult spotted = core.score_input(x);
    EXPECT_GT(spotted.score, clean.score * 1.2f) << it->string();
    ASSERT_EQ(spotted.map.size(), static_cast<std::size_t>(kAnomalySize * kAnomalySize));
    const auto peak =
        std::max_element(spotted.map.begin(), spotted.map.end()) - spotted.map.begin();
    const int py = static_cast<int>(peak / kAnomalySize),
              px = static_cast<int>(peak % kAnomalySize);
    EXPECT_NEAR(py, y0 + 6, 12) << it->string();
    EXPECT_NEAR(px, x0 + 6, 12) << it->string();
  }
}

// The feature extraction in bf16 (STOKE_PRECISION): the reference image's
// score moves by bf16's rounding only, and back in fp32 it is the stored one.
TEST_F(AnomalyModel, Bf16FeaturesScoreCloseToFp32) {
  anomaly::PatchCoreOptions o;
  o.coreset_ratio = 0.5;
  anomaly::PatchCore core(anomaly_backbone(1), anomaly_preprocess(), o);
  core.fit({good_[0], good_[1], good_[2]});
  const auto fp32 = core.score_file(defect_[0]);
  if (cpu_backend().inference_precision(Precision::kBf16) == PrecisionSupport::kNone) {
    EXPECT_THROW(core.set_precision(Precision::kBf16), Unsupported);
    GTEST_SKIP() << "no bf16 convolutions on this CPU (the refusal is checked)";
  }
  const double change = core.set_precision(Precision::kBf16);
  EXPECT_EQ(core.precision(), Precision::kBf16);
  EXPECT_GT(change, 0.0) << "bf16 gave fp32's exact score";
  EXPECT_LT(change, 0.1);
  const auto bf16 = core.score_file(defect_[0]);
  EXPECT_NEAR(bf16.score, fp32.score, 0.1 * std::max(1.0f, fp32.score));
  EXPECT_EQ(core.set_precision(Precision::kFp32), 0.0);
  EXPECT_EQ(core.score_file(defect_[0]).score, fp32.score);
}

TEST_F(AnomalyModel, BankOverTheMemoryCapNamesTheOption) {
  anomaly::PatchCoreOptions o;
  o.max_bank_bytes = 1024;
  anomaly::PatchCore core(anomaly_backbone(1), anomaly_preprocess(), o);
  try {
    core.fit({good_.front(), good_.back()});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("max_bank_bytes"), std::string::npos) << e.what();
  }
}

// patches_per_image: each image gives the bank the rows of its seeded positions
// (sampled_positions, its own key in the order fitted), the memory figure and
// the cap count only those, and PaDiM refuses the option by name.
TEST_F(AnomalyModel, PatchesPerImageKeepsEachImagesSampledRowsUnderTheCap) {
  const std::vector<fs::path> train{good_[0], good_[1], good_[2]};
  anomaly::PatchCoreOptions o;
  o.coreset_ratio = 1.0;
  o.patches_per_image = 20;
  o.seed = 5;
  anomaly::PatchCore core(anomaly_backbone(1), anomaly_preprocess(), o);
  std::vector<float> expected;
  std::int64_t width = 0, positions = 0;
  for (std::size_t i = 0; i < train.size(); ++i) {
    const anomaly::Embeddings e = core.embed(core.preprocess_file(train[i]), 1);
    width = e.width;
    positions = e.grid_h * e.grid_w;
    ASSERT_GT(positions, 20);
    for (std::int64_t p : anomaly_detail::sampled_positions(positions, 20, 5, i)) {
      const auto row = e.rows.begin() + p * e.width;
      expected.insert(expected.end(), row, row + e.width);
    }
  }
  // Under a cap the full bank (3 x positions rows) exceeds and the sampled one does not.
  o.max_bank_bytes = anomaly::bank_bytes(3 * 20, static_cast<std::uint64_t>(width));
  ASSERT_LT(o.max_bank_bytes, anomaly::bank_bytes(3 * static_cast<std::uint64_t>(positions),
                                                  static_cast<std::uint64_t>(width)));
  anomaly::PatchCore sampled(anomaly_backbone(1), anomaly_preprocess(), o);
  sampled.fit(train);
  EXPECT_EQ(sampled.bank_rows(), 60);
  EXPECT_EQ(sampled.bank(), expected);
  o.coreset_ratio = 0.5;  // the coreset then keeps its share of the sampled rows
  anomaly::PatchCore halved(anomaly_backbone(1), anomaly_preprocess(), o);
  halved.fit(train);
  EXPECT_EQ(halved.bank_rows(), 30);
  o.patches_per_image = 0;  // every patch: over the same cap
  anomaly::PatchCore full(anomaly_backbone(1), anomaly_preprocess(), o);
  EXPECT_THROW(full.fit(train), InvalidArgument);
  o.patches_per_image = 20;
  o.method = anomaly::AnomalyMethod::kPadim;
  try {
    anomaly::PatchCore padim(anomaly_backbone(1), anomaly_preprocess(), o);
    FAIL() << "PaDiM took patches_per_image";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("patches_per_image"), std::string::npos) << e.what();
  }
}

TEST_F(AnomalyModel, SavedModelScoresAsTrainedAndBrokenFilesAreRefused) {
  anomaly::PatchCoreOptions o;
  o.coreset_ratio = 0.5;
  anomaly::PatchCore core(anomaly_backbone(2), anomaly_preprocess(), o);
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
  // calibrate()'s pixel threshold and score range travel with the file.
  EXPECT_EQ(back.pixel_threshold(), core.pixel_threshold());
  EXPECT_EQ(back.score_min(), core.score_min());
  EXPECT_EQ(back.score_max(), core.score_max());
  EXPECT_EQ(a.normalized_score, b.normalized_score);
  EXPECT_EQ(a.defect_pixels, b.defect_pixels);
  EXPECT_EQ(a.anomalous, a.normalized_score > 0.5f || (a.anomalous && a.normalized_score == 0.5f));
  EXPECT_GT(a.defect_pixels + 1, 0);
  // A range written upside down is refused by name.
  {
    nn::CheckpointInfo swapped;
    auto m = nn::load_model(path.string(), cpu_backend(), &swapped);
    std::swap(swapped.metadata["anomaly.score_min"], swapped.metadata["anomaly.score_max"]);
    if (core.score_min() < core.score_max()) {
      const fs::path bad = dir_ / "swapped_range.stoke";
      nn::save_checkpoint(bad.string(), *m, nullptr, swapped.metadata);
      try {
        anomaly::PatchCore::load(bad, cpu_backend());
        FAIL() << "an inverted score range loaded";
      } catch (const CorruptFile& e) {
        EXPECT_NE(std::string(e.what()).find("anomaly.score_max"), std::string::npos) << e.what();
      }
    }
  }
  // A file written before the range and the pixel threshold loads, the image
  // threshold standing in for the pixel one.
  {
    nn::CheckpointInfo older;
    auto m = nn::load_model(path.string(), cpu_backend(), &older);
    for (const char* key : {"anomaly.pixel_threshold", "anomaly.score_min", "anomaly.score_max",
                            "anomaly.target_escape"})
      older.metadata.erase(key);
    const fs::path old_file = dir_ / "older.stoke";
    nn::save_checkpoint(old_file.string(), *m, nullptr, older.metadata);
    anomaly::PatchCore old = anomaly::PatchCore::load(old_file, cpu_backend());
    EXPECT_EQ(old.pixel_threshold(), old.threshold());
    const auto c = old.score_file(defect_[0]);
    EXPECT_EQ(c.score, a.score);
    EXPECT_EQ(c.anomalous, a.anomalous);
  }

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
