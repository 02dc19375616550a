// ModelInfo survives the metadata round trip field for field, and malformed
// or inconsistent metadata is a CorruptFile naming the file and the key.
#include <gtest/gtest.h>

#include "stoke/deploy.hpp"
#include "stoke/error.hpp"

namespace stoke {
namespace {

ModelInfo full_info() {
  ModelInfo i;
  i.class_names = {"good, really", "scratch", "spot"};
  i.preprocess.width = 24;
  i.preprocess.height = 20;
  i.preprocess.resize_width = 30;
  i.preprocess.resize_height = 26;
  i.preprocess.channels = 3;
  i.preprocess.filter = ResizeFilter::kArea;
  i.preprocess.dct_scaling = false;
  i.preprocess.normalization = Normalization::mean_std(std::vector<float>{0.1f, 0.2f, 0.3f},
                                                       std::vector<float>{0.4f, 0.5f, 0.6f});
  i.staged = true;
  i.stoke_version = "9.8.7";
  i.created = "2026-12-01T00:00:00Z";
  i.dataset_source = "/data/parts";
  i.dataset_fingerprint = 0xFEDCBA9876543210ull;
  i.class_counts = {5, 7, 1};
  i.validation_samples = 4;
  i.trainer_options = {{"epochs", "3"}, {"optimizer", "adam"}};
  i.configuration = {{"STOKE_CPU_THREADS", "2"}};
  i.metrics = {{"val_accuracy", "0.75"}};
  i.history = {"0,1.5,0.5,1.4,0.6", "1,1.2,0.6,,"};
  i.reference_backend = "cpu";
  i.reference_tolerance = 2e-3f;
  ReferenceSample r;
  r.source = "/data/parts/a.png";
  r.input.assign(3 * 24 * 20, 0.f);
  for (std::size_t k = 0; k < r.input.size(); ++k) r.input[k] = 0.001f * float(k) - 0.3f;
  r.logits = {1.5f, -2.25f, 1e-7f};
  i.references = {r, r};
  return i;
}

TEST(DeployModelInfo, EveryFieldSurvivesTheRoundTrip) {
  const ModelInfo a = full_info();
  std::map<std::string, std::string> m;
  a.to_metadata(m);
  const ModelInfo b = ModelInfo::from_metadata(m, "x.stoke");
  EXPECT_EQ(b.class_names, a.class_names);
  EXPECT_EQ(b.preprocess.width, 24);
  EXPECT_EQ(b.preprocess.height, 20);
  EXPECT_EQ(b.preprocess.resize_width, 30);
  EXPECT_EQ(b.preprocess.resize_height, 26);
  EXPECT_EQ(b.preprocess.filter, ResizeFilter::kArea);
  EXPECT_FALSE(b.preprocess.dct_scaling);
  EXPECT_EQ(b.preprocess.normalization.kind, Normalization::Kind::kMeanStd);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(b.preprocess.normalization.mean[c], a.preprocess.normalization.mean[c]);
    EXPECT_EQ(b.preprocess.normalization.std[c], a.preprocess.normalization.std[c]);
  }
  EXPECT_TRUE(b.staged);
  EXPECT_EQ(b.stoke_version, a.stoke_version);
  EXPECT_EQ(b.created, a.created);
  EXPECT_EQ(b.dataset_source, a.dataset_source);
  EXPECT_EQ(b.dataset_fingerprint, a.dataset_fingerprint);
  EXPECT_EQ(b.class_counts, a.class_counts);
  EXPECT_EQ(b.validation_samples, 4u);
  EXPECT_EQ(b.trainer_options, a.trainer_options);
  EXPECT_EQ(b.configuration, a.configuration);
  EXPECT_EQ(b.metrics, a.metrics);
  EXPECT_EQ(b.history, a.history);
  EXPECT_EQ(b.reference_backend, "cpu");
  EXPECT_EQ(b.reference_tolerance, 2e-3f);
  ASSERT_EQ(b.references.size(), 2u);
  EXPECT_EQ(b.references[1].source, a.references[1].source);
  EXPECT_EQ(b.references[1].input, a.references[1].input);  // exact: float32 bytes
  EXPECT_EQ(b.references[1].logits, a.references[1].logits);
}

void expect_corrupt(std::map<std::string, std::string> m, const std::string& needle) {
  try {
    ModelInfo::from_metadata(m, "bad.stoke");
    ADD_FAILURE() << needle << ": accepted";
  } catch (const CorruptFile& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.stoke"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(DeployModelInfo, MalformedOrInconsistentMetadataIsNamed) {
  std::map<std::string, std::string> m;
  full_info().to_metadata(m);
  auto with = [&](const std::string& key, const std::string& value) {
    auto copy = m;
    copy[key] = value;
    return copy;
  };
  auto without = [&](const std::string& key) {
    auto copy = m;
    copy.erase(key);
    return copy;
  };
  expect_corrupt(with("model.format", "2"), "format 2");
  expect_corrupt(with("model.preprocess.filter", "lanczos"), "lanczos");
  expect_corrupt(with("model.preprocess.normalization", "zscore"), "zscore");
  expect_corrupt(with("model.preprocess.width", "-4"), "model.preprocess.width");
  expect_corrupt(with("model.preprocess.resize_width", "10"), "inconsistent");
  expect_corrupt(with("model.reference.0.logits", "AAAA"), "whole number of float32");
  expect_corrupt(with("model.reference.0.logits", "AAAAAA=="),
                 "reference sample");  // one logit for three classes
  expect_corrupt(with("model.reference.1.input", "!!!!"), "base64");
  expect_corrupt(without("model.classes.2"), "model.classes.2");
  expect_corrupt(without("model.preprocess.crop"), "model.preprocess.crop");
}

}  // namespace
}  // namespace stoke
