// The anomaly model's ONNX export (stoke/anomaly_export.hpp): what it refuses
// and what the file states. Its numbers against ONNX Runtime are the ctest
// Interchange.AnomalyOnnxRuntimeParity's (tests/interchange/anomaly_export_check.py).
#include "stoke/anomaly_export.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "stoke/anomaly.hpp"
#include "stoke/error.hpp"
#include "stoke/interchange.hpp"
#include "unit/anomaly_fixture.hpp"

namespace {

using namespace stoke;
using namespace stoke::anomaly;
using stoke::testing::anomaly_backbone;
using stoke::testing::anomaly_preprocess;
using stoke::testing::kAnomalySize;

template <typename E>
std::string message_of(const PatchCore& core, const AnomalyOnnxOptions& o = {}) {
  try {
    (void)onnx_model_bytes(core, o);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("another error: ") + e.what();
  }
  return "no error";
}

// Two random inputs' embeddings fitted (PaDiM needs two images).
PatchCore fitted(PatchCoreOptions o) {
  PatchCore core(anomaly_backbone(3), anomaly_preprocess(), o);
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(2 * 3 * kAnomalySize * kAnomalySize));
  for (float& v : x) v = n(rng);
  core.fit_embeddings(core.embed(x, 2));
  return core;
}

bool has(const std::string& bytes, const std::string& name) {
  return bytes.find(name) != std::string::npos;
}

TEST(AnomalyExport, RefusesATilingModelNamingTheTile) {
  PatchCoreOptions o;
  o.tile = 64;
  const PatchCore core(anomaly_backbone(3), anomaly_preprocess(), o);
  const std::string m = message_of<Unsupported>(core);
  EXPECT_NE(m.find("patchcore model tiles its images (tile 64)"), std::string::npos) << m;
  o.method = AnomalyMethod::kPadim;
  const PatchCore padim(anomaly_backbone(3), anomaly_preprocess(), o);
  const std::string p = message_of<Unsupported>(padim);
  EXPECT_NE(p.find("padim model tiles its images (tile 64)"), std::string::npos) << p;
}

TEST(AnomalyExport, RefusesAnUnfittedModelAndAnotherOpset) {
  const PatchCore core(anomaly_backbone(3), anomaly_preprocess(), {});
  const std::string m = message_of<InvalidArgument>(core);
  EXPECT_NE(m.find("fitted nothing"), std::string::npos) << m;
  PatchCoreOptions o;
  o.coreset_ratio = 1.0;
  const PatchCore fit = fitted(o);
  AnomalyOnnxOptions eo;
  eo.opset = 17;
  const std::string op = message_of<InvalidArgument>(fit, eo);
  EXPECT_NE(op.find("opset 17"), std::string::npos) << op;
}

TEST(AnomalyExport, RefusesABlurWiderThanTheInput) {
  PatchCoreOptions o;
  o.coreset_ratio = 1.0;
  o.sigma = 30.0f;  // a 241-tap kernel: reflect padding of 120 on a 96-pixel side
  const PatchCore core = fitted(o);
  const std::string m = message_of<Unsupported>(core);
  EXPECT_NE(m.find("smaller than the blur's half width 120"), std::string::npos) << m;
}

TEST(AnomalyExport, WritesBothMethodsWithTheirConstantsAndMetadata) {
  PatchCoreOptions o;
  o.coreset_ratio = 0.5;
  const PatchCore core = fitted(o);
  const std::string bytes = onnx_model_bytes(core);
  EXPECT_TRUE(has(bytes, "anomaly_map") && has(bytes, "anomaly.bank"));
  EXPECT_TRUE(has(bytes, "anomaly.support")) << "num_neighbors 9: the support table";
  // The bank itself goes in: its size (rows x width floats) bounds the file from below.
  EXPECT_GT(bytes.size(), core.bank().size() * sizeof(float));
  o.num_neighbors = 1;
  const std::string plain = onnx_model_bytes(fitted(o));
  EXPECT_FALSE(has(plain, "anomaly.support")) << "num_neighbors 1: the plain maximum";

  o.method = AnomalyMethod::kPadim;
  const PatchCore padim = fitted(o);
  const auto path = std::filesystem::temp_directory_path() / "stoke_anomaly_export_padim.onnx";
  AnomalyOnnxOptions eo;
  eo.metadata.emplace_back("model.preprocess.width", "96");
  export_onnx(padim, path.string(), eo);
  const auto meta = interchange::onnx_metadata(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(meta.at("anomaly.method"), "padim");
  EXPECT_EQ(meta.at("model.preprocess.width"), "96");
  EXPECT_EQ(meta.at("stoke.architecture"), "resnet18");
  EXPECT_EQ(meta.count("anomaly.threshold"), 1u);
}

}  // namespace
