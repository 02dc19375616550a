// Data that goes bad: a dataset report that accounts for every entry, header
// checks at load, and samples whose pixels turn out corrupt during training
// (skipped deterministically with skip_corrupt, reported in LoaderStats, the
// FitResult and the train log; a budget stops a rotten dataset with a
// checkpoint; without skip_corrupt the error names the file).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "stoke/backend.hpp"
#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/train.hpp"
#include "unit/image_test_files.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using testing::gradient_image;

constexpr int kSide = 16;

// Noisy gray images (so the JPEG scan is long), class a bright left, b right.
Image sample_image(int label, int index) {
  Image image(kSide, kSide, 1);
  std::mt19937 rng(static_cast<std::uint32_t>(index * 7 + label));
  for (int y = 0; y < kSide; ++y) {
    for (int x = 0; x < kSide; ++x) {
      const bool bright = (x < kSide / 2) == (label == 0);
      image.data()[y * kSide + x] = static_cast<std::uint8_t>((bright ? 170 : 60) + rng() % 40);
    }
  }
  return image;
}

// The JPEG cut halfway through its entropy-coded scan: header intact, tail gone.
std::vector<std::uint8_t> truncated_jpeg(const Image& image) {
  const auto jpeg = encode_jpeg(image.view(), 95);
  std::size_t sos = 0;
  for (std::size_t i = 2; i + 1 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xDA) sos = i;
  }
  return {jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>((sos + jpeg.size()) / 2)};
}

class DataCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("stoke_data_corrupt_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    for (const char* c : {"a", "b"}) fs::create_directories(root_ / c);
  }
  void TearDown() override { fs::remove_all(root_); }

  // 8 good images per class (PNG and JPEG), one truncated-tail JPEG in a and
  // one truncated PNG in b.
  void write_training_folder() {
    for (int label = 0; label < 2; ++label) {
      const fs::path dir = root_ / (label ? "b" : "a");
      for (int i = 0; i < 8; ++i) {
        const Image image = sample_image(label, i);
        if (i % 2)
          write_file(dir / ("img" + std::to_string(i) + ".png"), encode_png(image.view()));
        else
          write_file(dir / ("img" + std::to_string(i) + ".jpg"), encode_jpeg(image.view(), 95));
      }
    }
    write_file(root_ / "a" / "bad_tail.jpg", truncated_jpeg(sample_image(0, 99)));
    write_file(root_ / "b" / "bad.png",
               testing::truncated(encode_png(sample_image(1, 99).view()), 0.6));
  }

  static LoaderOptions loader_options() {
    LoaderOptions o;
    o.preprocess.width = kSide;
    o.preprocess.height = kSide;
    o.preprocess.channels = 1;
    o.batch_size = 4;
    o.seed = 3;
    o.cache = CacheSpec{};
    o.simd = SimdLevel::kScalar;
    return o;
  }

  // Every batch of epoch 0; returns the images and labels.
  static std::pair<std::vector<float>, std::vector<std::int32_t>> epoch(Loader& loader) {
    std::vector<float> images(loader.batches_per_epoch() * loader.batch_size() * kSide * kSide);
    std::vector<std::int32_t> labels(loader.batches_per_epoch() * loader.batch_size(), -1);
    for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b) {
      const std::size_t n = loader.batch_size();
      const std::size_t wrote = loader.fill_batch(0, b,
                                                  std::as_writable_bytes(std::span(images).subspan(
                                                      b * n * kSide * kSide, n * kSide * kSide)),
                                                  std::span(labels).subspan(b * n, n));
      EXPECT_EQ(wrote, std::min(n, loader.dataset().size() - b * n));
    }
    return {images, labels};
  }

  fs::path root_;
};

TEST_F(DataCorrupt, ReportAccountsForEveryEntryWithReasons) {
  write_file(root_ / "a" / "good.png", encode_png(gradient_image(8, 8, 1).view()));
  write_file(root_ / "b" / "good.png", encode_png(gradient_image(8, 8, 3).view()));
  fs::create_directories(root_ / "a" / "folder.png");  // a subfolder: its images belong to a
  write_file(root_ / "a" / "folder.png" / "inner.png", encode_png(gradient_image(8, 8, 1).view()));
  fs::create_directories(root_ / "b" / "sub" / "deeper");
  write_file(root_ / "b" / "sub" / "deeper" / "nested.png",
             encode_png(gradient_image(8, 8, 3).view()));
  write_file(root_ / "b" / "sub" / "readme.md", std::vector<std::uint8_t>{'h', 'i'});
  fs::create_symlink(root_ / "missing.jpg", root_ / "a" / "dangling.jpg");
  ASSERT_EQ(::mkfifo((root_ / "a" / "pipe.png").c_str(), 0600), 0);
  write_file(root_ / "a" / "notes.txt", std::vector<std::uint8_t>{'h', 'i'});
  write_file(root_ / "stray.png", encode_png(gradient_image(8, 8, 1).view()));
  const std::vector<std::uint8_t> no_frame = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J',
                                              'F',  'I',  'F',  0x00, 0x01, 0x01, 0x00,
                                              0x00, 0x01, 0x00, 0x01, 0xFF, 0xD9};
  write_file(root_ / "b" / "tiny.jpg", no_frame);
  write_file(root_ / "b" / "bomb.png", testing::bomb_png(60000, 60000));
  write_file(root_ / "b" / "text.png", std::vector<std::uint8_t>{'n', 'o', 't'});

  DatasetOptions options;
  options.skip_corrupt = true;
  const Dataset d = Dataset::from_folder(root_, options);
  const auto& r = d.report();
  EXPECT_EQ(r.used, 4u);
  EXPECT_EQ(r.candidates, r.used + r.skipped.size()) << r.to_string();
  for (std::size_t i = 0; i < d.size(); ++i) {
    const fs::path p = d.path(i);
    if (p.filename() == "inner.png") {
      EXPECT_EQ(d.class_names()[d.label(i)], "a");
    }
    if (p.filename() == "nested.png") {
      EXPECT_EQ(d.class_names()[d.label(i)], "b");
    }
  }
  auto reason_of = [&](const std::string& name) {
    for (const auto& s : r.skipped) {
      if (fs::path(s.path).filename() == name) return s.reason;
    }
    return std::string("<not reported>");
  };
  EXPECT_NE(reason_of("readme.md").find("extension"), std::string::npos);
  EXPECT_EQ(reason_of("dangling.jpg"), "dangling symbolic link");
  EXPECT_NE(reason_of("pipe.png").find("not a regular file"), std::string::npos);
  EXPECT_NE(reason_of("notes.txt").find("extension"), std::string::npos);
  EXPECT_NE(reason_of("stray.png").find("not in a class folder"), std::string::npos);
  EXPECT_NE(reason_of("tiny.jpg").find("tiny.jpg"), std::string::npos) << reason_of("tiny.jpg");
  EXPECT_NE(reason_of("bomb.png").find("STOKE_MAX_IMAGE_PIXELS"), std::string::npos)
      << reason_of("bomb.png");
  EXPECT_NE(reason_of("text.png").find("unsupported format"), std::string::npos);

  try {
    Dataset::from_folder(root_);
    FAIL() << "bad entries passed without skip_corrupt";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dangling.jpg"), std::string::npos) << e.what();
  }
  // The limit comes from the options (or STOKE_MAX_IMAGE_PIXELS): lifted, the bomb passes the
  // header check.
  options.max_image_pixels = 0;
  EXPECT_EQ(Dataset::from_folder(root_, options).report().used, 5u);
}

TEST_F(DataCorrupt, ManifestThatIsADirectoryOrDeviceIsAnIoError) {
  EXPECT_THROW(Dataset::from_manifest(root_), IoError);
  EXPECT_THROW(Dataset::from_manifest("/dev/zero"), IoError);
}

TEST_F(DataCorrupt, LoaderSkipsCorruptSamplesDeterministicallyAndReportsThem) {
  write_training_folder();
  const Dataset d = Dataset::from_folder(root_);  // headers are fine: both load
  ASSERT_EQ(d.size(), 18u);
  LoaderOptions o = loader_options();
  o.skip_corrupt = true;
  Loader parallel(d, o);
  const auto [images, labels] = epoch(parallel);
  EXPECT_TRUE(
      std::none_of(labels.begin(), labels.begin() + 18, [](std::int32_t l) { return l < 0; }));
  const auto stats = parallel.stats();
  ASSERT_EQ(stats.corrupt.size(), 2u);
  EXPECT_EQ(fs::path(stats.corrupt[0].path).filename(), "bad_tail.jpg");
  EXPECT_NE(stats.corrupt[0].reason.find("bad_tail.jpg"), std::string::npos)
      << stats.corrupt[0].reason;
  EXPECT_EQ(fs::path(stats.corrupt[1].path).filename(), "bad.png");
  EXPECT_FALSE(stats.corrupt_budget_exceeded);

  o.max_in_flight = 1;  // one image at a time: the same batches
  Loader serial(d, o);
  const auto [images1, labels1] = epoch(serial);
  EXPECT_EQ(labels1, labels);
  EXPECT_EQ(images1, images);

  o.skip_corrupt = false;
  Loader strict(d, o);
  try {
    epoch(strict);
    FAIL() << "a corrupt sample passed without skip_corrupt";
  } catch (const DecodeError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(m.find("bad_tail.jpg") != std::string::npos ||
                m.find("bad.png") != std::string::npos)
        << m;
  }

  o.skip_corrupt = true;
  o.max_corrupt_samples = 1;
  o.max_corrupt_fraction = 0;
  Loader budget(d, o);
  try {
    epoch(budget);
    FAIL() << "the corruption budget was not enforced";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("too many corrupt samples"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(budget.stats().corrupt_budget_exceeded);
}

class DataCorruptTraining : public DataCorrupt {
 protected:
  FitResult fit(LoaderOptions loader, const fs::path& checkpoint) {
    nn::ModelSpec spec;
    spec.architecture = nn::Architecture::kPlainCnn;
    spec.in_channels = 1;
    spec.height = kSide;
    spec.width = kSide;
    spec.classes = 2;
    spec.widths = {4};
    auto model = nn::build_model(cpu_backend(), spec, 7);
    TrainerOptions options;
    options.epochs = 2;
    options.batch_size = 4;
    options.log_every_steps = 0;
    options.stop_checkpoint = checkpoint;
    Config config;
    options.settings = config.settings();
    Trainer trainer(*model, options);
    return trainer.fit(Dataset::from_folder(root_), nullptr, loader);
  }
};

TEST_F(DataCorruptTraining, FitCompletesAndReportsBothCorruptFiles) {
  write_training_folder();
  LoaderOptions o = loader_options();
  o.skip_corrupt = true;
  const FitResult r = fit(o, root_ / "stop.ckpt");
  EXPECT_EQ(r.reason, StopReason::kCompleted);
  ASSERT_EQ(r.log.epochs.size(), 2u);
  EXPECT_EQ(r.log.epochs[0].images, 18u);
  ASSERT_EQ(r.corrupt_samples.size(), 2u);
  const std::string json = r.log.to_json();
  EXPECT_NE(json.find("bad_tail.jpg"), std::string::npos);
  EXPECT_NE(json.find("bad.png"), std::string::npos);
  EXPECT_FALSE(fs::exists(root_ / "stop.ckpt"));
}

TEST_F(DataCorruptTraining, BudgetStopsWithACheckpointAndStrictModeNamesTheFile) {
  write_training_folder();
  LoaderOptions o = loader_options();
  o.skip_corrupt = true;
  o.max_corrupt_samples = 1;
  o.max_corrupt_fraction = 0;
  const FitResult r = fit(o, root_ / "budget.ckpt");
  EXPECT_EQ(r.reason, StopReason::kCorruptData);
  EXPECT_NE(r.message.find("too many corrupt samples"), std::string::npos) << r.message;
  EXPECT_TRUE(fs::exists(root_ / "budget.ckpt"));

  o.skip_corrupt = false;
  try {
    fit(o, root_ / "strict.ckpt");
    FAIL() << "fit() trained through a corrupt sample without skip_corrupt";
  } catch (const DecodeError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(m.find("bad_tail.jpg") != std::string::npos ||
                m.find("bad.png") != std::string::npos)
        << m;
  }
  EXPECT_TRUE(fs::exists(root_ / "strict.ckpt"));
}

}  // namespace
}  // namespace stoke

namespace stoke::testing {
namespace {

// One policy: a dataset loaded with skip_corrupt hands it to a Loader that
// was not told otherwise (before, the loader aborted on the first truncated
// tail unless LoaderOptions::skip_corrupt was set as well); an explicit
// LoaderOptions value still wins.
TEST_F(DataCorrupt, TheLoaderInheritsTheDatasetsSkipCorruptPolicy) {
  write_training_folder();
  DatasetOptions skip;
  skip.skip_corrupt = true;
  const Dataset d = Dataset::from_folder(root_, skip);
  EXPECT_TRUE(d.skip_corrupt());
  EXPECT_FALSE(Dataset::from_folder(root_).skip_corrupt());
  const std::size_t all[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  EXPECT_TRUE(d.subset(all).skip_corrupt()) << "a subset keeps the policy";
  LoaderOptions o = loader_options();
  Loader inherited(d, o);
  epoch(inherited);
  EXPECT_EQ(inherited.stats().corrupt.size(), 2u);
  o.skip_corrupt = false;
  Loader strict(d, o);
  EXPECT_THROW(epoch(strict), DecodeError);
}

}  // namespace
}  // namespace stoke::testing
