// stoke::Predictor on anomaly model files (PatchCore and PaDiM): the same
// bits as PatchCore::load + score_file (what stoke eval scores each image
// with) for files, encoded bytes and camera buffers; classifier calls on an
// anomaly model, anomaly calls on a classifier and a truncated file are clear
// stoke errors naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "stoke/anomaly.hpp"
#include "stoke/backend.hpp"
#include "stoke/data.hpp"
#include "stoke/deploy.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "unit/anomaly_fixture.hpp"

namespace stoke::testing {
namespace {

namespace fs = std::filesystem;

class AnomalyPredictor : public SyntheticParts {
 protected:
  // A model of `method` fitted on four good parts, calibrated on two, saved;
  // tile > 0: tiled at the parts' native resolution (192 x 192).
  fs::path write_model(anomaly::AnomalyMethod method, int tile = 0) {
    anomaly::PatchCoreOptions o;
    o.method = method;
    o.coreset_ratio = 0.5;
    o.tile = tile;
    o.tile_stride = tile / 2 * 3 / 2;
    anomaly::PatchCore core(anomaly_backbone(4), anomaly_preprocess(), o);
    core.fit({good_[0], good_[1], good_[2], good_[3]});
    core.calibrate({good_[4], good_[5]}, {defect_[0]});
    const fs::path path =
        dir_ / (std::string(anomaly::method_name(method)) + "_" + std::to_string(tile) + ".stoke");
    core.save(path);
    return path;
  }

  static PredictorOptions on_cpu() {
    PredictorOptions o;
    o.backend = &cpu_backend();
    return o;
  }

  static void expect_same(const AnomalyResult& a, const AnomalyResult& b, const std::string& what) {
    EXPECT_EQ(a.score, b.score) << what;
    EXPECT_EQ(a.anomalous, b.anomalous) << what;
    EXPECT_EQ(a.normalized_score, b.normalized_score) << what;
    EXPECT_EQ(a.defect_pixels, b.defect_pixels) << what;
    EXPECT_EQ(a.height, b.height) << what;
    EXPECT_EQ(a.width, b.width) << what;
    EXPECT_EQ(a.map, b.map) << what;  // bit for bit (no NaN in a map)
  }

  // The Predictor and stoke eval's model (PatchCore::load, score_file) agree
  // bit for bit on files; bytes and camera buffers agree with the files.
  void check_against_eval(anomaly::AnomalyMethod method, int tile = 0) {
    const fs::path path = write_model(method, tile);
    anomaly::PatchCore eval = anomaly::PatchCore::load(path, cpu_backend());
    Predictor predictor(path, on_cpu());
    ASSERT_EQ(predictor.kind(), ModelKind::kAnomaly);
    const AnomalyModelInfo& info = predictor.anomaly_info();
    EXPECT_EQ(info.method, anomaly::method_name(method));
    EXPECT_EQ(info.threshold, eval.threshold());
    EXPECT_EQ(info.pixel_threshold, eval.pixel_threshold());
    EXPECT_TRUE(info.has_score_range());
    EXPECT_EQ(info.score_min, eval.score_min());
    EXPECT_EQ(info.score_max, eval.score_max());
    EXPECT_EQ(predictor.info().class_names, (std::vector<std::string>{"good", "anomalous"}));
    EXPECT_EQ(predictor.spec().architecture, nn::Architecture::kResNet18);
    EXPECT_EQ(predictor.sample_size(), std::size_t{3} * kAnomalySize * kAnomalySize);
    EXPECT_TRUE(predictor.self_check().ran);
    EXPECT_TRUE(predictor.self_check().passed);

    for (const fs::path& file : {good_[6], good_[7], defect_[1], defect_[2], defect_[3]}) {
      const AnomalyResult r = predictor.score_file(file);
      const int side = tile ? 192 : kAnomalySize;  // tiled: the map at the image's size
      ASSERT_EQ(r.map.size(), static_cast<std::size_t>(side * side));
      expect_same(r, eval.score_file(file), file.string() + " (file)");

      std::vector<std::uint8_t> bytes;
      read_file(file, bytes);
      expect_same(predictor.score_bytes(bytes, file.string()), r, file.string() + " (bytes)");

      Image decoded;
      DecodeOptions rgb;
      rgb.channels = 3;
      Decoder().decode(bytes, file.string(), rgb, decoded);
      const PixelBuffer frame{decoded.data(), decoded.width(), decoded.height(), PixelFormat::kRgb8,
                              decoded.stride()};
      const AnomalyResult from_pixels = predictor.score_pixels(frame);
      expect_same(from_pixels, eval.score_pixels(frame), file.string() + " (pixels, eval)");
      expect_same(from_pixels, r, file.string() + " (pixels, file)");
    }
    // The decision is the threshold's.
    for (const fs::path& file : {good_[6], defect_[1]}) {
      const AnomalyResult r = predictor.score_file(file);
      EXPECT_EQ(r.anomalous, r.score > info.threshold) << file;
    }
  }
};

TEST_F(AnomalyPredictor, PatchCoreScoresAsEvalBitForBit) {
  check_against_eval(anomaly::AnomalyMethod::kPatchCore);
}

TEST_F(AnomalyPredictor, PadimScoresAsEvalBitForBit) {
  check_against_eval(anomaly::AnomalyMethod::kPadim);
}

TEST_F(AnomalyPredictor, TiledModelScoresAsEvalBitForBit) {
  check_against_eval(anomaly::AnomalyMethod::kPatchCore, kAnomalySize);
}

// PredictorOptions::max_image_pixels applies to anomaly models as to
// classifiers, tiled or not: a larger image is a DecodeError naming the limit.
TEST_F(AnomalyPredictor, TheImagePixelLimitApplies) {
  for (const int tile : {0, kAnomalySize}) {
    const fs::path path = write_model(anomaly::AnomalyMethod::kPatchCore, tile);
    PredictorOptions o = on_cpu();
    o.max_image_pixels = 192 * 192 - 1;
    Predictor small(path, o);
    EXPECT_EQ(small.max_image_pixels(), 192u * 192u - 1u);
    try {
      small.score_file(good_[6]);
      ADD_FAILURE() << "an image over the limit was scored (tile " << tile << ")";
    } catch (const DecodeError& e) {
      EXPECT_NE(std::string(e.what()).find("STOKE_MAX_IMAGE_PIXELS"), std::string::npos)
          << e.what();
    }
    o.max_image_pixels = 192 * 192;
    Predictor enough(path, o);
    EXPECT_GT(enough.score_file(good_[6]).map.size(), 0u) << "tile " << tile;
  }
}

// Threads sharing the Predictor take turns: each gets the serial result.
TEST_F(AnomalyPredictor, ThreadsSharingItGetTheSerialResults) {
  const fs::path path = write_model(anomaly::AnomalyMethod::kPatchCore);
  Predictor predictor(path, on_cpu());
  const std::vector<fs::path> files = {good_[6], defect_[1], good_[7], defect_[2]};
  std::vector<AnomalyResult> serial;
  for (const auto& f : files) serial.push_back(predictor.score_file(f));
  std::vector<AnomalyResult> a(files.size()), b(files.size());
  std::thread t1([&] {
    for (std::size_t i = 0; i < files.size(); ++i) a[i] = predictor.score_file(files[i]);
  });
  std::thread t2([&] {
    for (std::size_t i = files.size(); i-- > 0;) b[i] = predictor.score_file(files[i]);
  });
  t1.join();
  t2.join();
  for (std::size_t i = 0; i < files.size(); ++i) {
    expect_same(a[i], serial[i], files[i].string() + " (thread 1)");
    expect_same(b[i], serial[i], files[i].string() + " (thread 2)");
  }
}

// What a classifier answers is refused on an anomaly model, by name.
TEST_F(AnomalyPredictor, ClassifierCallsOnAnAnomalyModelAreClearErrors) {
  const fs::path path = write_model(anomaly::AnomalyMethod::kPatchCore);
  Predictor predictor(path, on_cpu());
  const auto expect_refused = [&](const char* call, auto&& f) {
    try {
      f();
      ADD_FAILURE() << call << " returned on an anomaly model";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(call), std::string::npos) << what;
      EXPECT_NE(what.find("anomaly model"), std::string::npos) << what;
      EXPECT_NE(what.find(path.string()), std::string::npos) << what;
      EXPECT_NE(what.find("score_file"), std::string::npos) << what;
    }
  };
  std::vector<std::uint8_t> bytes;
  read_file(good_[6], bytes);
  const std::vector<float> input(predictor.sample_size(), 0.0f);
  expect_refused("predict_file", [&] { predictor.predict_file(good_[6]); });
  expect_refused("predict_bytes", [&] { predictor.predict_bytes(bytes); });
  expect_refused("predict_files", [&] { predictor.predict_files(std::span(&good_[6], 1)); });
  expect_refused("forward", [&] { predictor.forward(input, 1); });
  expect_refused("logits", [&] { predictor.logits(input, 1); });
  Predictor::Session session = predictor.session();
  expect_refused("Session::predict_file", [&] { session.predict_file(good_[6]); });
  // Refused before anything ran: scoring still works.
  EXPECT_GT(predictor.score_file(good_[6]).map.size(), 0u);
}

// Anomaly calls on a classifier are refused by name too.
TEST_F(AnomalyPredictor, AnomalyCallsOnAClassifierAreClearErrors) {
  const fs::path checkpoint = dir_ / "classifier.ckpt";
  auto model = anomaly_backbone(5);
  nn::save_checkpoint(checkpoint.string(), *model, nullptr, {});
  nn::Preprocessing norm;
  Predictor predictor(checkpoint, norm, on_cpu());
  EXPECT_EQ(predictor.kind(), ModelKind::kClassifier);
  EXPECT_EQ(predictor.predict_file(good_[0]).probabilities.size(), 2u);
  for (int call = 0; call < 2; ++call) {
    try {
      if (call == 0) predictor.score_file(good_[0]);
      if (call == 1) predictor.anomaly_info();
      ADD_FAILURE() << "an anomaly call returned on a classifier";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("is a classifier"), std::string::npos) << what;
      EXPECT_NE(what.find(checkpoint.string()), std::string::npos) << what;
    }
  }
}

// A truncated anomaly model file is a CorruptFile naming it.
TEST_F(AnomalyPredictor, TruncatedModelFileIsACorruptFileNamingIt) {
  const fs::path path = write_model(anomaly::AnomalyMethod::kPadim);
  for (const double share : {0.5, 0.98}) {
    const fs::path cut = dir_ / ("cut_" + std::to_string(static_cast<int>(share * 100)) + ".stoke");
    fs::copy_file(path, cut);
    fs::resize_file(cut,
                    static_cast<std::uintmax_t>(static_cast<double>(fs::file_size(path)) * share));
    try {
      Predictor predictor(cut, on_cpu());
      ADD_FAILURE() << "a truncated file opened";
    } catch (const CorruptFile& e) {
      EXPECT_NE(std::string(e.what()).find(cut.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace stoke::testing
