// Segmentation models deployed (stoke/segment.hpp): connected regions of a
// hand-made label map, the metrics, the model file's round trip and
// refusals, the Predictor's label maps against the training loader's input
// and the model's own forward (bit for bit), and wrong-kind calls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "stoke/backend.hpp"
#include "stoke/deploy.hpp"
#include "stoke/error.hpp"
#include "stoke/interchange.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/segment.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception of the expected type)";
}

TEST(SegmentRegions, EightConnectedRegionsOfAHandMadeMap) {
  // clang-format off
  const std::vector<std::uint8_t> map = {
      0,   1,   1, 0, 0, 2,
      0,   1,   0, 0, 0, 2,
      0,   0,   0, 1, 0, 0,
      2,   0,   0, 0, 1, 0,
      255, 255, 0, 0, 0, 1};
  // clang-format on
  const std::vector<std::string> names = {"background", "scratch", "spot"};
  const auto r = connected_regions(map, 6, 5, names);
  ASSERT_EQ(r.size(), 4u);
  // Raster order of the first pixel; (3, 2), (4, 3) and (5, 4) touch diagonally.
  const int want[4][6] = {
      {1, 3, 1, 0, 2, 2}, {2, 2, 5, 0, 1, 2}, {1, 3, 3, 2, 3, 3}, {2, 1, 0, 3, 1, 1}};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r[i].label, want[i][0]) << i;
    EXPECT_EQ(r[i].class_name, names[static_cast<std::size_t>(want[i][0])]) << i;
    EXPECT_EQ(r[i].area, want[i][1]) << i;
    EXPECT_EQ((std::vector<int>{r[i].x, r[i].y, r[i].w, r[i].h}),
              (std::vector<int>{want[i][2], want[i][3], want[i][4], want[i][5]}))
        << i;
  }
  // Ignore label counted when it is not the ignore label: it has no class name.
  EXPECT_NE(error_of<InvalidArgument>([&] {
              connected_regions(map, 6, 5, names, -1);
            }).find("label 255 at (0, 4)"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { connected_regions(map, 5, 5, names); }).find("5x5"),
            std::string::npos);
}

TEST(SegmentMetrics, ConfusionSkipsIgnoredPixelsAndIouPerClass) {
  const std::vector<std::int32_t> truth = {0, 0, 1, 1, 255, 2};
  const std::vector<std::uint8_t> predicted = {0, 1, 1, 1, 2, 0};
  std::vector<std::uint64_t> c;
  add_confusion(truth, predicted, 3, 255, c);
  EXPECT_EQ(c, (std::vector<std::uint64_t>{1, 1, 0, 0, 2, 0, 1, 0, 0}));
  const auto iou = class_iou(c, 3);
  EXPECT_DOUBLE_EQ(iou[0], 1.0 / 3.0);  // TP 1, FN 1, FP 1
  EXPECT_DOUBLE_EQ(iou[1], 2.0 / 3.0);  // TP 2, FP 1
  EXPECT_DOUBLE_EQ(iou[2], 0.0);        // TP 0, FN 1
  EXPECT_DOUBLE_EQ(mean_iou(iou), 1.0 / 3.0);
  // A class neither true nor predicted has no IoU and is left out of the mean.
  std::vector<std::uint64_t> two = {3, 0, 0, 0};
  EXPECT_TRUE(std::isnan(class_iou(two, 2)[1]));
  EXPECT_DOUBLE_EQ(mean_iou(class_iou(two, 2)), 1.0);
  const std::vector<std::int32_t> bad = {7};
  const std::vector<std::uint8_t> one = {0};
  EXPECT_THROW(add_confusion(bad, one, 3, 255, c), InvalidArgument);
}

class SegmentDeploy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stoke_segment_deploy_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    SyntheticOptions o;
    o.width = 44;
    o.height = 36;
    o.defect_fraction = 0.75;
    o.seed = 5;
    o.format = SyntheticOptions::Format::kPng;
    write_synthetic_segmentation_dataset(dir_ / "data", 4, o);
    dataset_ = SegmentationDataset::from_folder(dir_ / "data");
    nn::ModelSpec spec;
    spec.architecture = nn::Architecture::kResNet18;
    spec.in_channels = 3;
    spec.height = spec.width = 32;
    spec.classes = 3;
    spec.width_multiplier = 0.125f;
    spec.decoder_channels = {16, 8, 8, 4, 4};
    model_ = nn::build_model(cpu_backend(), spec, 3);
    info_.class_names = dataset_.class_names();
    info_.preprocess.width = info_.preprocess.height = 32;
    info_.preprocess.channels = 3;
    info_.preprocess.normalization = Normalization::mean_std(std::vector<float>{0.4f, 0.5f, 0.6f},
                                                             std::vector<float>{0.2f, 0.25f, 0.3f});
    info_.stoke_version = "test";
    info_.reference_backend = cpu_backend().name();
    loader_options_.preprocess = info_.preprocess;
    loader_options_.batch_size = 1;
    loader_options_.shuffle = false;
    model_file_ = dir_ / "model.stoke";
    save_segmentation_model(model_file_, *model_, info_, input(0));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Sample i as the training loader's validation batches give it.
  std::vector<float> input(std::size_t i, std::vector<std::int32_t>* labels = nullptr) {
    SegmentationLoader loader(dataset_, loader_options_);
    std::vector<float> x(3 * 32 * 32);
    std::vector<std::int32_t> y(32 * 32);
    loader.fill_batch(0, i, x, y);
    if (labels) *labels = y;
    return x;
  }

  fs::path dir_, model_file_;
  SegmentationDataset dataset_;
  std::unique_ptr<nn::Model> model_;
  ModelInfo info_;
  SegmentationLoaderOptions loader_options_;
};

TEST_F(SegmentDeploy, PredictorLabelMapIsTheModelsOnTheLoadersInputBitForBit) {
  Predictor p(model_file_);
  ASSERT_EQ(p.kind(), ModelKind::kSegmentation);
  EXPECT_TRUE(p.self_check().ran);
  EXPECT_TRUE(p.self_check().passed) << p.self_check().message;
  EXPECT_EQ(p.info().class_names, dataset_.class_names());
  auto session = p.session();
  for (std::size_t i = 0; i < dataset_.size(); ++i) {
    const fs::path image = dataset_.sample(i).image;
    const std::vector<float> x = input(i);
    std::vector<float> mine(p.sample_size());
    session.preprocess_file(image, mine);
    ASSERT_EQ(std::memcmp(mine.data(), x.data(), x.size() * sizeof(float)), 0) << image;
    // The model's own eval forward, arg-max, nearest back to 44 x 36.
    Tensor t(cpu_backend(), model_->input_shape(1));
    t.copy_from_host(x.data());
    const Tensor& y = model_->forward(t, false);
    std::vector<float> logits(static_cast<std::size_t>(y.numel()));
    y.copy_to_host(logits.data());
    std::vector<std::uint8_t> small(32 * 32);
    argmax_labels(logits, 1, 3, 32, 32, small);
    std::vector<std::int32_t> full(44 * 36);
    resize_labels_nearest(ImageView{small.data(), 32, 32, 1, 32}, 44, 36, full);
    const SegmentationResult r = p.segment_file(image);
    ASSERT_EQ(r.width, 44);
    ASSERT_EQ(r.height, 36);
    std::vector<std::int64_t> areas(3, 0);
    for (std::size_t k = 0; k < full.size(); ++k) {
      ASSERT_EQ(r.labels[k], full[k]) << image << " pixel " << k;
      ++areas[static_cast<std::size_t>(full[k])];
    }
    EXPECT_EQ(r.areas, areas);
    const auto regions = connected_regions(r.labels, 44, 36, dataset_.class_names());
    ASSERT_EQ(r.regions.size(), regions.size());
    for (std::size_t k = 0; k < regions.size(); ++k) {
      EXPECT_EQ(r.regions[k].area, regions[k].area);
      EXPECT_EQ(r.regions[k].x, regions[k].x);
      EXPECT_EQ(r.regions[k].h, regions[k].h);
    }
    // The same image as bytes and as pixels.
    std::vector<std::uint8_t> bytes;
    read_file(image, bytes);
    EXPECT_EQ(p.segment_bytes(bytes, image.string()).labels, r.labels);
    Decoder decoder;
    Image decoded;
    decoder.decode(bytes, image.string(), DecodeOptions{3, 0, 0}, decoded);
    const ImageView v = decoded.view();
    EXPECT_EQ(p.segment_pixels(PixelBuffer{v.data, v.width, v.height, PixelFormat::kRgb8, v.stride})
                  .labels,
              r.labels);
  }
}

// Tiled at native resolution (PredictorOptions::segment_tile_stride): the
// 44 x 36 images cut into 32 x 32 tiles 12 apart (origins 0 and 12 across, 0
// and 4 down: the last tile ends at the edge), each tile's logits, overlaps
// averaged, the arg-max per pixel, against the same computed here from the
// decoded pixels. Strides outside [1, tile] and images below a tile are refused.
TEST_F(SegmentDeploy, TiledLabelMapsAverageTheTilesLogitsAtNativeResolution) {
  PredictorOptions o;
  o.segment_tile_stride = 12;
  Predictor p(model_file_, o);
  const std::vector<float> mean{0.4f, 0.5f, 0.6f}, stdev{0.2f, 0.25f, 0.3f};
  for (std::size_t i = 0; i < dataset_.size(); ++i) {
    const fs::path image = dataset_.sample(i).image;
    std::vector<std::uint8_t> bytes;
    read_file(image, bytes);
    Decoder decoder;
    Image decoded;
    decoder.decode(bytes, image.string(), DecodeOptions{3, 0, 0}, decoded);
    const ImageView v = decoded.view();
    ASSERT_EQ(v.width, 44);
    ASSERT_EQ(v.height, 36);
    std::vector<double> sum(3 * 36 * 44, 0.0);
    for (int oy : {0, 4}) {
      for (int ox : {0, 12}) {
        std::vector<float> x(3 * 32 * 32);
        for (int c = 0; c < 3; ++c)
          for (int y = 0; y < 32; ++y)
            for (int xx = 0; xx < 32; ++xx)
              x[static_cast<std::size_t>((c * 32 + y) * 32 + xx)] =
                  (v.data[static_cast<std::size_t>(oy + y) * v.stride +
                          static_cast<std::size_t>(ox + xx) * 3 + static_cast<std::size_t>(c)] /
                       255.0f -
                   mean[static_cast<std::size_t>(c)]) /
                  stdev[static_cast<std::size_t>(c)];
        Tensor t(cpu_backend(), model_->input_shape(1));
        t.copy_from_host(x.data());
        const std::vector<float> logits = model_->forward(t, false).to_vector();
        for (int c = 0; c < 3; ++c)
          for (int y = 0; y < 32; ++y)
            for (int xx = 0; xx < 32; ++xx)
              sum[static_cast<std::size_t>((c * 36 + oy + y) * 44 + ox + xx)] +=
                  logits[static_cast<std::size_t>((c * 32 + y) * 32 + xx)];
      }
    }
    const SegmentationResult r = p.segment_file(image);
    ASSERT_EQ(r.width, 44);
    ASSERT_EQ(r.height, 36);
    std::size_t same = 0;
    std::vector<std::int64_t> areas(3, 0);
    for (std::size_t k = 0; k < 36 * 44; ++k) {
      int best = 0;
      for (int c = 1; c < 3; ++c)
        if (sum[static_cast<std::size_t>(c) * 36 * 44 + k] >
            sum[static_cast<std::size_t>(best) * 36 * 44 + k])
          best = c;
      same += r.labels[k] == best;
      ++areas[r.labels[k]];
    }
    // Rounding of the normalization may flip a near tie; a misplaced tile
    // changes most of the map.
    EXPECT_GE(same, 36 * 44 * 995 / 1000) << image;
    EXPECT_EQ(r.areas, areas);
    EXPECT_EQ(p.segment_bytes(bytes, image.string()).labels, r.labels);
    EXPECT_EQ(p.segment_pixels(PixelBuffer{v.data, v.width, v.height, PixelFormat::kRgb8, v.stride})
                  .labels,
              r.labels);
  }
  std::vector<std::uint8_t> small(20 * 20 * 3, 100);
  try {
    p.segment_pixels(PixelBuffer{small.data(), 20, 20, PixelFormat::kRgb8, 60});
    FAIL() << "an image below a tile was segmented";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("<pixels>"), std::string::npos) << e.what();
  }
  for (int bad : {-1, 33}) {
    o.segment_tile_stride = bad;
    try {
      Predictor refused(model_file_, o);
      FAIL() << "stride " << bad << " was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("segment_tile_stride"), std::string::npos) << e.what();
    }
  }
}

// A JPEG at least twice the input size decodes at a DCT scale (as in the
// loader): the label map is still at the file's own size, and the input the
// loader's.
TEST_F(SegmentDeploy, DctScaledJpegsGiveLabelMapsAtTheirStoredSize) {
  SyntheticOptions o;
  o.width = 100;
  o.height = 90;
  o.seed = 6;
  o.format = SyntheticOptions::Format::kJpeg;
  write_synthetic_segmentation_dataset(dir_ / "jpeg", 2, o);
  dataset_ = SegmentationDataset::from_folder(dir_ / "jpeg");
  Predictor p(model_file_);
  auto session = p.session();
  for (std::size_t i = 0; i < dataset_.size(); ++i) {
    const fs::path image = dataset_.sample(i).image;
    const std::vector<float> x = input(i);
    std::vector<float> mine(p.sample_size());
    session.preprocess_file(image, mine);
    EXPECT_EQ(std::memcmp(mine.data(), x.data(), x.size() * sizeof(float)), 0) << image;
    const SegmentationResult r = p.segment_file(image);
    EXPECT_EQ(r.width, 100);
    EXPECT_EQ(r.height, 90);
    EXPECT_EQ(r.labels.size(), 100u * 90u);
  }
  const SegmentationEvaluation e = evaluate_segmentation(p, dataset_);
  EXPECT_EQ(e.pixels, 2u * 100 * 90);
}

TEST_F(SegmentDeploy, EvaluationCountsEveryPixelOfEveryImageAtItsSize) {
  Predictor p(model_file_);
  const SegmentationEvaluation e = evaluate_segmentation(p, dataset_);
  EXPECT_EQ(e.images, 4u);
  EXPECT_EQ(e.pixels, 4u * 44 * 36);  // the synthetic masks hold no ignored pixel
  std::uint64_t diagonal = 0, predicted_fg = 0;
  for (int t = 0; t < 3; ++t)
    for (int q = 0; q < 3; ++q) {
      if (t == q) diagonal += e.confusion[static_cast<std::size_t>(t * 3 + q)];
      if (q != 0) predicted_fg += e.confusion[static_cast<std::size_t>(t * 3 + q)];
    }
  EXPECT_DOUBLE_EQ(e.pixel_accuracy, double(diagonal) / double(e.pixels));
  double predicted_share = 0;
  for (const auto& r : e.per_image) predicted_share += r.predicted_area * 44 * 36;
  EXPECT_NEAR(predicted_share, double(predicted_fg), 1e-6);
  const std::string json = e.to_json();
  for (const char* key :
       {"\"per_class_iou\": {\"background\"", "\"mean_iou\"", "\"pixel_accuracy\"",
        "\"confusion_matrix\"", "\"area_error\": {\"mean\""})
    EXPECT_NE(json.find(key), std::string::npos) << key;
}

TEST_F(SegmentDeploy, ModelFileRoundTripAndRefusals) {
  // Round trip: the spec, classes, preprocessing and weights (the logits) come back.
  {
    Predictor p(model_file_);
    EXPECT_EQ(p.spec().decoder_channels, model_->spec().decoder_channels);
    EXPECT_EQ(p.info().preprocess.width, 32);
    EXPECT_TRUE(p.info().staged);
    EXPECT_LE(p.self_check().max_error, 0.0);  // the same machine: the same logits
  }
  // Truncated: refused, naming the file.
  std::vector<std::uint8_t> bytes;
  read_file(model_file_, bytes);
  const fs::path cut = dir_ / "cut.stoke";
  write_file(cut, std::span(bytes).first(bytes.size() / 2));
  EXPECT_NE(error_of<Error>([&] { Predictor p(cut); }).find(cut.string()), std::string::npos);
  // Crafted: a reference shorter than its stated size, and a future version.
  auto meta = nn::read_checkpoint_info(model_file_.string()).metadata;
  auto crafted = meta;
  crafted["segment.reference.logits"].resize(12);
  const fs::path bad = dir_ / "bad.stoke";
  nn::save_checkpoint(bad.string(), *model_, nullptr, crafted);
  const std::string e1 = error_of<CorruptFile>([&] { Predictor p(bad); });
  EXPECT_NE(e1.find("segment.reference.logits"), std::string::npos) << e1;
  EXPECT_NE(e1.find(bad.string()), std::string::npos) << e1;
  crafted = meta;
  crafted["segment.version"] = "99";
  nn::save_checkpoint(bad.string(), *model_, nullptr, crafted);
  EXPECT_NE(error_of<CorruptFile>([&] { Predictor p(bad); }).find("segment.version"),
            std::string::npos);
  crafted = meta;
  crafted["model.classes.count"] = "2";
  nn::save_checkpoint(bad.string(), *model_, nullptr, crafted);
  EXPECT_THROW(Predictor p(bad), CorruptFile);
  // Weights changed after the reference was stored: the self-check fails.
  crafted = meta;
  std::string& logits = crafted["segment.reference.logits"];
  float first = 0;
  std::memcpy(&first, logits.data(), sizeof first);
  first += 100.0f;
  std::memcpy(logits.data(), &first, sizeof first);
  nn::save_checkpoint(bad.string(), *model_, nullptr, crafted);
  EXPECT_NE(error_of<Unsupported>([&] { Predictor p(bad); }).find("self-check FAILED"),
            std::string::npos);
  PredictorOptions lenient;
  lenient.require_self_check = false;
  Predictor loaded(bad, lenient);
  EXPECT_FALSE(loaded.self_check().passed);
  // Saving refuses what a file could not hold.
  ModelInfo two = info_;
  two.class_names = {"a", "b"};
  EXPECT_THROW(save_segmentation_model(bad, *model_, two, input(0)), InvalidArgument);
  EXPECT_THROW(save_segmentation_model(bad, *model_, info_, std::vector<float>(5)),
               InvalidArgument);
}

TEST_F(SegmentDeploy, WrongKindCallsNameTheCall) {
  Predictor p(model_file_);
  const fs::path image = dataset_.sample(0).image;
  for (const auto& [call, f] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"predict_file", [&] { p.predict_file(image); }},
           {"logits", [&] { p.logits(std::vector<float>(p.sample_size()), 1); }},
           {"score_file", [&] { p.score_file(image); }},
           {"anomaly_info", [&] { p.anomaly_info(); }}}) {
    const std::string e = error_of<InvalidArgument>(f);
    EXPECT_NE(e.find("Predictor::" + call), std::string::npos) << e;
    EXPECT_NE(e.find("segmentation model"), std::string::npos) << e;
  }
  // A classifier's file: segment_* refused, naming the call.
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kPlainCnn;
  spec.in_channels = 3;
  spec.height = spec.width = 16;
  spec.classes = 2;
  auto classifier = nn::build_model(cpu_backend(), spec, 1);
  PreprocessOptions pre;
  pre.width = pre.height = 16;
  pre.channels = 3;
  const fs::path cls = dir_ / "classifier.stoke";
  save_model(cls, *classifier, describe_import({"ok", "defect"}, pre, "test", 1));
  Predictor c(cls);
  ASSERT_EQ(c.kind(), ModelKind::kClassifier);
  for (const auto& [call, f] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"segment_file", [&] { c.segment_file(image); }},
           {"segment_bytes",
            [&] {
              c.segment_bytes(std::vector<std::uint8_t>{1, 2});
            }},
           {"segment_pixels", [&] { c.segment_pixels(PixelBuffer{}); }}}) {
    const std::string e = error_of<InvalidArgument>(f);
    EXPECT_NE(e.find("Predictor::" + call), std::string::npos) << e;
    EXPECT_NE(e.find("is a classifier"), std::string::npos) << e;
  }
  // evaluate_segmentation refuses another kind and another class list.
  EXPECT_THROW(evaluate_segmentation(c, dataset_), InvalidArgument);
}

// stoke train --task segment --init: a torchvision backbone's file (here
// stoke's own classifier of the same encoder, saved under torchvision's names)
// fills the U-Net's encoder; the decoder and head keep their values.
TEST(SegmentEncoderInit, TorchvisionNamesLoadIntoTheEncoderOnly) {
  Backend& be = cpu_backend();
  nn::ModelSpec cls;
  cls.architecture = nn::Architecture::kResNet18;
  cls.in_channels = 3;
  cls.height = cls.width = 32;
  cls.classes = 1000;
  cls.width_multiplier = 0.125f;
  auto backbone = nn::build_model(be, cls, 11);
  const fs::path dir = fs::temp_directory_path() / "stoke_segment_encoder_init";
  fs::create_directories(dir);
  const std::string file = (dir / "resnet18.safetensors").string();
  interchange::save_safetensors(*backbone, file);
  nn::ModelSpec spec = cls;
  spec.classes = 3;
  spec.decoder_channels = {16, 8, 8, 4, 4};
  auto unet = nn::build_model(be, spec, 12);
  const auto host = [](const Tensor& t) {
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    t.copy_to_host(v.data());
    return v;
  };
  const auto find = [](const nn::Model& m, const std::string& name) {
    auto all = m.named_parameters();
    for (auto& b : m.named_buffers()) all.push_back(b);
    for (auto& t : all)
      if (t.name == name) return t.tensor;
    ADD_FAILURE() << "no tensor " << name;
    return Tensor();
  };
  const std::vector<float> decoder_before = host(find(*unet, "decoder.blocks.0.conv1.0.weight"));
  const std::vector<float> head_before = host(find(*unet, "segmentation_head.0.weight"));
  const auto r = interchange::load_encoder_safetensors(*unet, file);
  EXPECT_GT(r.loaded.size(), 60u);
  for (const auto& n : r.loaded) EXPECT_EQ(n.rfind("encoder.", 0), 0u) << n;
  for (const char* n : {"conv1.weight", "layer4.1.bn2.running_var", "layer2.0.downsample.0.weight"})
    EXPECT_EQ(host(find(*unet, std::string("encoder.") + n)), host(find(*backbone, n))) << n;
  EXPECT_EQ(host(find(*unet, "decoder.blocks.0.conv1.0.weight")), decoder_before);
  EXPECT_EQ(host(find(*unet, "segmentation_head.0.weight")), head_before);
  // Another width: every differing shape named, nothing written.
  nn::ModelSpec wide = spec;
  wide.width_multiplier = 0.25f;
  auto other = nn::build_model(be, wide, 13);
  const std::vector<float> stem = host(find(*other, "encoder.conv1.weight"));
  const std::string e =
      error_of<InvalidArgument>([&] { interchange::load_encoder_safetensors(*other, file); });
  EXPECT_NE(e.find("shape of encoder.conv1.weight"), std::string::npos) << e;
  EXPECT_EQ(host(find(*other, "encoder.conv1.weight")), stem);
  // A classifier is not a U-Net.
  EXPECT_THROW(interchange::load_encoder_safetensors(*backbone, file), InvalidArgument);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoke
