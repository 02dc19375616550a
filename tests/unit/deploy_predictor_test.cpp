// The Predictor feeds the network exactly what the trainer's validation
// loader fed it (bit for bit, every validation image), and predicts what the
// trainer's model predicts: min-max and mean/std, gray and RGB, JPEG and PNG,
// the loader's direct and staged paths. Pixel buffers (Mono8, Mono16, RGB8,
// BGR8, padded rows) equal the lossless file of the same pixels (Mono16: the
// 16-bit PNG).
#include <cstring>
#include <thread>

#include "deploy_fixture.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/nn/inference.hpp"
#include "stoke/version.hpp"

namespace stoke::testing {
namespace {

struct PathCase {
  int channels;
  bool mean_std;
  int resize;   // resize target before the 16 x 16 centre crop
  bool cached;  // sample cache on: the loader's staged path
};

class DeployPredictorTest : public DeployFixture, public ::testing::WithParamInterface<PathCase> {};

// The validation loader Trainer::fit builds, over every validation image.
std::vector<float> validation_tensors(const Dataset& val, LoaderOptions l) {
  l.shuffle = false;
  l.drop_last = false;
  l.augment = {};
  l.batch_size = val.size();
  Loader loader(val, l);
  std::vector<float> out(loader.sample_bytes() / sizeof(float) * val.size());
  std::vector<std::int32_t> labels(val.size());
  loader.fill_batch(0, 0, std::as_writable_bytes(std::span<float>(out)), labels);
  return out;
}

TEST_P(DeployPredictorTest, TensorsEqualTheValidationLoaderAndPredictionsTheTrainers) {
  const PathCase c = GetParam();
  LoaderOptions l = loader_options(c.channels, c.mean_std, c.resize, c.cached);
  l.augment.hflip_probability =
      0.5f;  // training augmentation never reaches validation or the predictor
  FitResult fit;
  auto model = train(l, &fit);
  Predictor predictor(model_path());
  EXPECT_EQ(predictor.info().staged, c.cached || c.resize != 16);
  const std::size_t n = predictor.sample_size();
  ASSERT_EQ(n, static_cast<std::size_t>(c.channels) * 16 * 16);
  const std::vector<float> expected = validation_tensors(val_, l);
  auto session = predictor.session();
  std::vector<float> mine(n);
  for (std::size_t i = 0; i < val_.size(); ++i) {
    session.preprocess_file(val_.path(i), mine);
    EXPECT_EQ(std::memcmp(mine.data(), expected.data() + i * n, n * sizeof(float)), 0)
        << val_.path(i);
  }
  // Same inputs, same weights: the loaded network's logits equal the trained one's.
  Tensor x(cpu_backend(), model->input_shape(static_cast<std::int64_t>(val_.size())));
  x.copy_from_host(expected.data());
  std::vector<float> trained(val_.size() * 2);
  model->forward(x, false).copy_to_host(trained.data());
  EXPECT_EQ(predictor.logits(expected, val_.size()), trained);
  // Per file: the same class as the trainer's model, and the trainer's accuracy.
  std::size_t correct = 0;
  for (std::size_t i = 0; i < val_.size(); ++i) {
    const Prediction p = predictor.predict_file(val_.path(i));
    const int want = trained[2 * i + 1] > trained[2 * i] ? 1 : 0;
    EXPECT_EQ(p.label, want) << val_.path(i);
    EXPECT_EQ(p.class_name, val_.class_names()[static_cast<std::size_t>(p.label)]);
    correct += p.label == val_.label(i) ? 1 : 0;
  }
  ASSERT_FALSE(fit.log.epochs.empty());
  EXPECT_NEAR(double(correct) / double(val_.size()), fit.log.epochs.back().val_accuracy, 1e-6);
  EXPECT_TRUE(predictor.self_check().ran);
  EXPECT_TRUE(predictor.self_check().passed) << predictor.self_check().message;
}

INSTANTIATE_TEST_SUITE_P(Paths, DeployPredictorTest,
                         ::testing::Values(PathCase{1, false, 16, false},
                                           PathCase{3, true, 16, false},
                                           PathCase{3, false, 20, false},
                                           PathCase{1, true, 16, true}, PathCase{3, true, 20, true},
                                           PathCase{1, false, 22, false}));

TEST_F(DeployFixture, PixelBuffersEqualTheLosslessFileOfTheSamePixels) {
  for (const int channels : {1, 3}) {
    for (const int resize : {16, 20}) {
      train(loader_options(channels, true, resize, false));
      Predictor predictor(model_path());
      auto session = predictor.session();
      const std::size_t n = predictor.sample_size();
      std::vector<float> from_file(n), from_pixels(n);
      for (std::size_t i = 0; i < val_.size(); ++i) {
        if (val_.path(i).find(".png") == std::string::npos) continue;
        Decoder decoder;
        Image img;
        decoder.decode_file(val_.path(i), DecodeOptions{channels, 0, 0}, img);
        const auto png = encode_png(img.view());
        session.preprocess_bytes(png, "mem.png", from_file);
        const int w = img.width(), h = img.height();
        const std::size_t pad = 5;
        if (channels == 1) {
          std::vector<std::uint8_t> mono8((w + pad) * h, 0xEE);
          std::vector<std::uint16_t> mono16(w * h);
          for (int y = 0; y < h; ++y) {
            for (int x = 0; x < w; ++x) {
              mono8[y * (w + pad) + x] = img.data()[y * w + x];
              mono16[y * w + x] = static_cast<std::uint16_t>(img.data()[y * w + x] * 257);
            }
          }
          session.preprocess_pixels({mono8.data(), w, h, PixelFormat::kMono8, w + pad},
                                    from_pixels);
          EXPECT_EQ(from_pixels, from_file) << "Mono8 " << val_.path(i);
          // Mono16 keeps 16 bits: it equals the 16-bit PNG of the same samples.
          std::vector<float> from_png16(n);
          session.preprocess_bytes(encode_png(img.view(), 16), "mem16.png", from_png16);
          session.preprocess_pixels({mono16.data(), w, h, PixelFormat::kMono16, 0}, from_pixels);
          EXPECT_EQ(from_pixels, from_png16) << "Mono16 " << val_.path(i);
        } else {
          const std::size_t stride = w * 3 + pad;
          std::vector<std::uint8_t> rgb(stride * h, 0xEE), bgr(stride * h, 0xEE);
          for (int y = 0; y < h; ++y) {
            for (int x = 0; x < w; ++x) {
              for (int k = 0; k < 3; ++k) {
                rgb[y * stride + 3 * x + k] = img.data()[(y * w + x) * 3 + k];
                bgr[y * stride + 3 * x + 2 - k] = img.data()[(y * w + x) * 3 + k];
              }
            }
          }
          session.preprocess_pixels({rgb.data(), w, h, PixelFormat::kRgb8, stride}, from_pixels);
          EXPECT_EQ(from_pixels, from_file) << "RGB8 " << val_.path(i);
          session.preprocess_pixels({bgr.data(), w, h, PixelFormat::kBgr8, stride}, from_pixels);
          EXPECT_EQ(from_pixels, from_file) << "BGR8 " << val_.path(i);
          const Prediction a =
              predictor.predict_pixels({bgr.data(), w, h, PixelFormat::kBgr8, stride});
          const Prediction b = predictor.predict_bytes(png, "mem.png");
          EXPECT_EQ(a.probabilities, b.probabilities);
        }
      }
    }
  }
}

TEST_F(DeployFixture, BatchesAndThreadsGiveTheSinglePredictions) {
  train(loader_options(3, false, 16, false));
  Predictor predictor(model_path());
  std::vector<fs::path> files;
  for (std::size_t i = 0; i < val_.size(); ++i) files.emplace_back(val_.path(i));
  std::vector<Prediction> single;
  for (const auto& f : files) single.push_back(predictor.predict_file(f));
  const auto batch = predictor.predict_files(files);
  ASSERT_EQ(batch.size(), single.size());
  for (std::size_t i = 0; i < single.size(); ++i) {
    EXPECT_EQ(batch[i].label, single[i].label);
    for (std::size_t k = 0; k < 2; ++k)
      EXPECT_NEAR(batch[i].probabilities[k], single[i].probabilities[k], 1e-5);
  }
  std::vector<std::vector<Prediction>> per_thread(3);
  std::vector<std::thread> threads;
  for (auto& out : per_thread) {
    threads.emplace_back([&] {
      auto session = predictor.session();
      for (const auto& f : files) out.push_back(session.predict_file(f));
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& out : per_thread) {
    ASSERT_EQ(out.size(), single.size());
    for (std::size_t i = 0; i < single.size(); ++i)
      EXPECT_EQ(out[i].probabilities, single[i].probabilities);
  }
}

TEST_F(DeployFixture, ModelFilesCarryTheirDescription) {
  auto model = train(loader_options(3, true, 20, false));
  const ModelInfo info = read_model_info(model_path());
  EXPECT_EQ(info.class_names, (std::vector<std::string>{"defect", "ok"}));
  EXPECT_EQ(info.preprocess.resize_width, 20);
  EXPECT_EQ(info.preprocess.width, 16);
  EXPECT_EQ(info.preprocess.channels, 3);
  EXPECT_EQ(info.preprocess.normalization.kind, Normalization::Kind::kMeanStd);
  EXPECT_FLOAT_EQ(info.preprocess.normalization.std[2], 0.3f);
  EXPECT_EQ(info.stoke_version, std::string(version()));
  EXPECT_EQ(info.dataset_fingerprint, train_.fingerprint());
  EXPECT_EQ(info.class_counts, (std::vector<std::uint64_t>{8, 8}));
  EXPECT_EQ(info.validation_samples, 12u);
  EXPECT_EQ(info.trainer_options.at("batch_size"), "4");
  EXPECT_FALSE(info.configuration.empty());
  EXPECT_EQ(info.history.size(), 1u);
  EXPECT_TRUE(info.metrics.count("val_accuracy"));
  EXPECT_EQ(info.references.size(), 4u);
  EXPECT_EQ(info.reference_backend, cpu_backend().name());
}

TEST_F(DeployFixture, ACheckpointWithoutModelInformationIsRefusedNamingWhatIsMissing) {
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kPlainCnn;
  spec.in_channels = 1;
  spec.height = spec.width = 16;
  spec.classes = 2;
  spec.widths = {4};
  auto model = nn::build_model(cpu_backend(), spec, 1);
  nn::save_checkpoint(model_path().string(), *model, nullptr, {{"preprocess.mean", "0.5"}});
  try {
    Predictor p(model_path());
    FAIL() << "an old checkpoint loaded";
  } catch (const CorruptFile& e) {
    const std::string what = e.what();
    const std::string path = model_path().string();
    for (const std::string& key : {std::string("model.format"), std::string("model.classes.count"),
                                   std::string("model.preprocess.normalization"),
                                   std::string("model.provenance.stoke_version"), path}) {
      EXPECT_NE(what.find(key), std::string::npos) << key << " not named in: " << what;
    }
  }
}

TEST_F(DeployFixture, TheSelfCheckSaysWhenTheOutputsAreNotReproduced) {
  auto model = train(loader_options(1, false, 16, false));
  {
    Predictor ok(model_path());
    EXPECT_TRUE(ok.self_check().passed);
    EXPECT_EQ(ok.self_check().max_error, 0.0);  // same backend, same build
    EXPECT_NE(ok.self_check().message.find("passed"), std::string::npos);
    EXPECT_EQ(ok.self_check().decoded_references, 4u);  // the files travel in the model file
    EXPECT_EQ(ok.self_check().max_input_levels,
              0.0);  // this build decodes them to the stored inputs
  }
  {
    // A reference whose file decodes to another image: the decode check fails.
    const nn::CheckpointInfo header = nn::read_checkpoint_info(model_path().string());
    ModelInfo info = ModelInfo::from_metadata(header.metadata, model_path().string());
    info.references[0].encoded = info.references[2].encoded;
    std::map<std::string, std::string> metadata;
    info.to_metadata(metadata);
    nn::save_checkpoint((dir_ / "swapped.stoke").string(), *model, nullptr, metadata);
    PredictorOptions lenient;
    lenient.require_self_check = false;
    Predictor swapped(dir_ / "swapped.stoke", lenient);
    EXPECT_FALSE(swapped.self_check().passed);
    EXPECT_GT(swapped.self_check().max_input_levels, 1.0);
    EXPECT_LE(swapped.self_check().max_error,
              swapped.self_check().tolerance);  // the network itself agrees
    EXPECT_THROW(Predictor(dir_ / "swapped.stoke"), Unsupported);
  }
  const nn::CheckpointInfo header = nn::read_checkpoint_info(model_path().string());
  ModelInfo info = ModelInfo::from_metadata(header.metadata, model_path().string());
  info.references[1].logits[0] += 0.5f;  // as if another build computed differently
  std::map<std::string, std::string> metadata;
  info.to_metadata(metadata);
  nn::save_checkpoint(model_path().string(), *model, nullptr, metadata);
  try {
    Predictor bad(model_path());
    FAIL() << "self-check passed on altered logits";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("self-check FAILED"), std::string::npos) << e.what();
  }
  PredictorOptions lenient;
  lenient.require_self_check = false;
  Predictor loaded(model_path(), lenient);
  EXPECT_TRUE(loaded.self_check().ran);
  EXPECT_FALSE(loaded.self_check().passed);
  EXPECT_GT(loaded.self_check().max_error, loaded.self_check().tolerance);
}

TEST_F(DeployFixture, BadPixelBuffersAreNamed) {
  train(loader_options(3, false, 16, false));
  Predictor predictor(model_path());
  std::vector<std::uint8_t> px(10 * 10 * 3);
  EXPECT_THROW(predictor.predict_pixels({px.data(), 10, 10, PixelFormat::kRgb8, 20}),
               InvalidArgument);
  EXPECT_THROW(predictor.predict_pixels({nullptr, 10, 10, PixelFormat::kRgb8, 0}), InvalidArgument);
  const std::vector<std::uint8_t> junk = {1, 2, 3, 4};
  EXPECT_THROW(predictor.predict_bytes(junk, "junk.bin"), DecodeError);
}

}  // namespace
}  // namespace stoke::testing

namespace stoke::testing {
namespace {

// nn::Classifier reads a model file's normalization (it used to fall back to
// pixel / 255 without mean/std), and refuses a checkpoint that records none.
TEST_F(DeployFixture, TheClassifierUsesTheModelFilesNormalization) {
  for (const bool mean_std : {false, true}) {
    train(loader_options(1, mean_std, 16, false));
    Predictor predictor(model_path());
    nn::Classifier classifier(model_path().string(), &cpu_backend());
    std::vector<std::uint8_t> pixels(16 * 16);
    for (std::size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
    const nn::Prediction a = classifier.classify(pixels.data(), 16, 16, 1);
    const Prediction b = predictor.predict_pixels({pixels.data(), 16, 16, PixelFormat::kMono8, 0});
    EXPECT_EQ(a.label, b.label);
    for (std::size_t k = 0; k < 2; ++k)
      EXPECT_NEAR(a.probabilities[k], b.probabilities[k], 1e-5) << mean_std;
  }
  nn::ModelSpec spec = nn::read_checkpoint_info(model_path().string()).spec;
  auto model = nn::build_model(cpu_backend(), spec, 1);
  nn::save_checkpoint(model_path().string(), *model, nullptr, {});
  EXPECT_THROW(nn::Classifier(model_path().string(), &cpu_backend()), CorruptFile);
}

}  // namespace
}  // namespace stoke::testing
