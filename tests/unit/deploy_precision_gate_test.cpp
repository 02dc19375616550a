// The reduced-precision gate (stoke/deploy.hpp): each rule passes and fails
// where its limit says, the model file keys it writes, and ModelInfo's
// precision read back (an unknown value refused).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "stoke/deploy.hpp"
#include "stoke/error.hpp"

namespace stoke {
namespace {

PrecisionGateResult measured(std::uint64_t images, std::uint64_t disagreements) {
  PrecisionGateResult r;
  r.images = images;
  r.disagreements = disagreements;
  return r;
}

TEST(PrecisionGate, DisagreementLimit) {
  const auto ok = judge_precision(measured(1000, 5));  // 0.5 %: the limit itself
  EXPECT_TRUE(ok.passed) << ok.reasons;
  EXPECT_DOUBLE_EQ(ok.disagreement, 0.005);
  const auto bad = judge_precision(measured(1000, 6));
  EXPECT_FALSE(bad.passed);
  EXPECT_NE(bad.reasons.find("6 of 1000 decisions"), std::string::npos) << bad.reasons;
  PrecisionGateLimits strict;
  strict.max_disagreement = 0;
  EXPECT_FALSE(judge_precision(measured(1000, 1), strict).passed);
  EXPECT_THROW(judge_precision(measured(0, 0)), InvalidArgument);
}

TEST(PrecisionGate, EscapeRateMayNotRiseAndAurocMayFallALittle) {
  auto r = measured(100, 0);
  r.escape_fp32 = 0.10;
  r.escape_reduced = 0.10;
  EXPECT_TRUE(judge_precision(r).passed);
  r.escape_reduced = 0.11;
  const auto escaped = judge_precision(r);
  EXPECT_FALSE(escaped.passed);
  EXPECT_NE(escaped.reasons.find("escape rate rises"), std::string::npos) << escaped.reasons;
  r.escape_reduced = 0.05;  // fewer escapes: fine
  r.auroc_fp32 = 0.950;
  r.auroc_reduced = 0.9451;
  EXPECT_TRUE(judge_precision(r).passed);
  r.auroc_reduced = 0.9449;
  const auto fell = judge_precision(r);
  EXPECT_FALSE(fell.passed);
  EXPECT_NE(fell.reasons.find("AUROC falls"), std::string::npos) << fell.reasons;
  r.auroc_reduced = NAN;  // a NaN is no pass
  EXPECT_FALSE(judge_precision(r).passed);
}

TEST(PrecisionGate, MetadataAndModelInfoRoundTrip) {
  auto g = measured(200, 1);
  g.escape_fp32 = g.escape_reduced = 0.0;
  g = judge_precision(g);
  std::map<std::string, std::string> m;
  add_precision_metadata(m, g);
  EXPECT_EQ(m.at("model.precision"), "bf16");
  EXPECT_EQ(m.at("model.metrics.precision_gate.images"), "200");
  EXPECT_EQ(m.at("model.metrics.precision_gate.disagreements"), "1");
  EXPECT_EQ(m.at("model.metrics.precision_gate.passed"), "1");
  EXPECT_EQ(m.count("model.metrics.precision_gate.auroc_fp32"), 0u);  // not measured

  ModelInfo info;
  info.class_names = {"ok", "defect"};
  info.stoke_version = "test";
  std::map<std::string, std::string> meta;
  info.to_metadata(meta);
  EXPECT_EQ(meta.at("model.precision"), "fp32");
  meta["model.precision"] = "bf16";
  EXPECT_EQ(ModelInfo::from_metadata(meta, "m.stoke").precision, Precision::kBf16);
  meta.erase("model.precision");  // files written before the key: fp32
  EXPECT_EQ(ModelInfo::from_metadata(meta, "m.stoke").precision, Precision::kFp32);
  meta["model.precision"] = "int8";  // without a calibration
  EXPECT_THROW(ModelInfo::from_metadata(meta, "m.stoke"), CorruptFile);
  meta["model.int8.input_ranges"] = "-1.5:2,0:3.25";
  meta["model.int8.calibration.images"] = "7";
  const ModelInfo int8 = ModelInfo::from_metadata(meta, "m.stoke");
  EXPECT_EQ(int8.precision, Precision::kInt8);
  ASSERT_EQ(int8.int8_input_ranges.size(), 2u);
  EXPECT_EQ(int8.int8_input_ranges[0], (std::pair<float, float>{-1.5f, 2.0f}));
  EXPECT_EQ(int8.int8_calibration.at("images"), "7");
  std::map<std::string, std::string> again;
  int8.to_metadata(again);
  EXPECT_EQ(again.at("model.int8.input_ranges"), "-1.5:2,0:3.25");
  for (const char* bad : {"1:0", "1", "a:b", "0:inf"}) {
    meta["model.int8.input_ranges"] = bad;
    EXPECT_THROW(ModelInfo::from_metadata(meta, "m.stoke"), CorruptFile) << bad;
  }
}

}  // namespace
}  // namespace stoke
