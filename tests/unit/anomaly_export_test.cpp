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

// A tiling model exports at one image size (the tiles cut in the graph): the
// size is required, refused below a tile and for a model without tiles; a
// tile other than the input size is refused by name. Its numbers against ONNX
// Runtime are Interchange.AnomalyOnnxRuntimeParity's (patchcore_tiled, padim_tiled).
TEST(AnomalyExport, TilingModelTakesTheImageSizeItIsGiven) {
  for (const AnomalyMethod method : {AnomalyMethod::kPatchCore, AnomalyMethod::kPadim}) {
    PatchCoreOptions o;
    o.method = method;
    o.tile = kAnomalySize;
    o.tile_stride = 64;
    const PatchCore core = fitted(o);
    const std::string none = message_of<InvalidArgument>(core);
    EXPECT_NE(none.find("tiles its images (tile 96)"), std::string::npos) << none;
    EXPECT_NE(none.find("--image-size WxH"), std::string::npos) << none;
    AnomalyOnnxOptions e;
    e.image_width = 80;
    e.image_height = 200;
    const std::string small = message_of<InvalidArgument>(core, e);
    EXPECT_NE(small.find("'--image-size 80x200' is 80x200, smaller than a 96x96 tile"),
              std::string::npos)
        << small;
    e.image_width = 176;
    e.image_height = 144;
    const std::string bytes = onnx_model_bytes(core, e);  // 3 x 2 tiles
    EXPECT_TRUE(has(bytes, "anomaly.image_size")) << method_name(method);
    EXPECT_TRUE(has(bytes, "176x144")) << method_name(method);
    EXPECT_TRUE(has(bytes, "anomaly.tile5")) << method_name(method);
    EXPECT_FALSE(has(bytes, "anomaly.tile6")) << method_name(method);
    EXPECT_TRUE(has(bytes, "anomaly.stitch5")) << method_name(method);
  }
  PatchCoreOptions o;
  o.tile = 64;  // not the 96-pixel input: stoke resizes such tiles, the graph does not
  AnomalyOnnxOptions e;
  e.image_width = e.image_height = 200;
  const std::string other = message_of<Unsupported>(fitted(o), e);
  EXPECT_NE(other.find("tile 64 is not the model's input size 96x96"), std::string::npos) << other;
  const std::string whole = message_of<InvalidArgument>(fitted({}), e);
  EXPECT_NE(whole.find("--image-size 200x200 is for a tiling model"), std::string::npos) << whole;
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
