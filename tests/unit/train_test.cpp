#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/train.hpp"
#include "train/async_logger.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;

// A separable two-class problem written as plain IDX files: class 0 is bright
// on the left half, class 1 on the right half, with seeded noise.
class TinyDataset : public ::testing::Test {
 protected:
  static constexpr int kSide = 12;
  static constexpr int kCount = 192;

  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stoke_train_test_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::vector<unsigned char> pixels(static_cast<std::size_t>(kCount) * kSide * kSide);
    std::vector<unsigned char> labels(kCount);
    std::uint32_t rng = 12345;
    for (int i = 0; i < kCount; ++i) {
      labels[i] = static_cast<unsigned char>(i % 2);
      for (int y = 0; y < kSide; ++y) {
        for (int x = 0; x < kSide; ++x) {
          rng = rng * 1664525u + 1013904223u;
          const bool bright = (x < kSide / 2) == (labels[i] == 0);
          const int v = (bright ? 170 : 60) + static_cast<int>(rng >> 26);
          pixels[(static_cast<std::size_t>(i) * kSide + y) * kSide + x] = static_cast<unsigned char>(v);
        }
      }
    }
    write_idx(dir_ / "images.idx", pixels, {kCount, kSide, kSide});
    write_idx(dir_ / "labels.idx", labels, {kCount});
    data_ = Dataset::from_idx(dir_ / "images.idx", dir_ / "labels.idx");
    loader_.preprocess.width = kSide;
    loader_.preprocess.height = kSide;
    loader_.preprocess.channels = 1;
    loader_.preprocess.normalization = Normalization::mean_std(std::vector<float>{0.45f},
                                                               std::vector<float>{0.25f});
    loader_.cache = CacheSpec{};
    spec_.architecture = nn::Architecture::kPlainCnn;
    spec_.in_channels = 1;
    spec_.height = kSide;
    spec_.width = kSide;
    spec_.classes = 2;
    spec_.widths = {8};
    options_.batch_size = 16;
    options_.log_every_steps = 0;
    options_.schedule.base_lr = 0.05f;
    Config config;
    config.set("STOKE_PREFETCH_DEPTH", "2");
    options_.settings = config.settings();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write_idx(const fs::path& path, const std::vector<unsigned char>& data,
                        const std::vector<int>& dims) {
    std::ofstream out(path, std::ios::binary);
    const unsigned char magic[4] = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
    out.write(reinterpret_cast<const char*>(magic), 4);
    for (int d : dims) {
      const unsigned char be[4] = {static_cast<unsigned char>(d >> 24), static_cast<unsigned char>(d >> 16),
                                   static_cast<unsigned char>(d >> 8), static_cast<unsigned char>(d)};
      out.write(reinterpret_cast<const char*>(be), 4);
    }
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }

  std::unique_ptr<nn::Model> model() { return nn::build_model(cpu_backend(), spec_, 7); }

  fs::path dir_;
  Dataset data_;
  LoaderOptions loader_;
  nn::ModelSpec spec_;
  TrainerOptions options_;
};

TEST_F(TinyDataset, LossFallsAndTheLogRecordsEveryEpoch) {
  auto m = model();
  options_.epochs = 3;
  Trainer trainer(*m, options_);
  const auto result = trainer.fit(data_, &data_, loader_);
  ASSERT_EQ(result.log.epochs.size(), 3u);
  EXPECT_EQ(result.reason, StopReason::kCompleted);
  const auto& first = result.log.epochs.front();
  const auto& last = result.log.epochs.back();
  EXPECT_EQ(first.steps, static_cast<std::uint64_t>(kCount / 16));
  EXPECT_EQ(first.images, static_cast<std::uint64_t>(kCount));
  EXPECT_LT(last.train_loss, first.train_loss);
  EXPECT_TRUE(last.validated);
  EXPECT_GT(last.val_accuracy, 0.9);
  // Every step was profiled.
  EXPECT_EQ(last.profile.stage(Stage::kForward).count, last.steps);
  EXPECT_EQ(last.profile.stage(Stage::kBackward).count, last.steps);
  EXPECT_EQ(last.profile.stage(Stage::kDataWait).count, last.steps + 1);  // + the end of the epoch
  EXPECT_EQ(last.profile.stage(Stage::kValidation).count, 1u);
  // The loader's stages reach the trainer's profile (in-memory IDX: no decode).
  EXPECT_EQ(last.profile.stage(Stage::kPreprocess).count, static_cast<std::uint64_t>(kCount));
  EXPECT_EQ(last.profile.stage(Stage::kDecode).count, 0u);
  EXPECT_GT(last.images_per_second, 0);
}

TEST_F(TinyDataset, BatchMultiplierAccumulatesBeforeEachUpdate) {
  auto m = model();
  options_.batch_size = 8;
  options_.batch_multiplier = 3;
  std::uint64_t callbacks = 0;
  Callbacks cb;
  cb.on_step = [&](const StepInfo&) { ++callbacks; };
  Trainer trainer(*m, options_, cb);
  const auto result = trainer.fit(data_, nullptr, loader_);
  const auto& e = result.log.epochs.front();
  EXPECT_EQ(result.batch_multiplier, 3);
  EXPECT_EQ(e.steps, static_cast<std::uint64_t>(kCount / 8 / 3));  // 24 device batches -> 8 updates
  EXPECT_EQ(callbacks, e.steps);
  EXPECT_EQ(trainer.optimizer().steps(), static_cast<std::int64_t>(e.steps));
  EXPECT_EQ(e.images, static_cast<std::uint64_t>(kCount));
}

TEST_F(TinyDataset, StopRequestFinishesTheCurrentStepAndReturns) {
  auto m = model();
  options_.epochs = 5;
  Callbacks cb;
  Trainer* self = nullptr;
  cb.on_step = [&](const StepInfo& info) {
    if (info.step == 3) self->request_stop();
  };
  Trainer trainer(*m, options_, cb);
  self = &trainer;
  const auto result = trainer.fit(data_, &data_, loader_);
  EXPECT_EQ(result.reason, StopReason::kRequested);
  ASSERT_EQ(result.log.epochs.size(), 1u);
  EXPECT_EQ(result.log.epochs[0].steps, 3u);
  EXPECT_EQ(trainer.optimizer().steps(), 3);
}

TEST_F(TinyDataset, EarlyStoppingAndBestCheckpoint) {
  auto m = model();
  options_.epochs = 6;
  options_.schedule.base_lr = 0.0f;  // nothing improves after the first validation
  options_.early_stopping_patience = 2;
  options_.best_checkpoint = dir_ / "best.ckpt";
  Trainer trainer(*m, options_);
  const auto result = trainer.fit(data_, &data_, loader_);
  EXPECT_EQ(result.reason, StopReason::kEarlyStopping);
  EXPECT_EQ(result.log.epochs.size(), 3u);
  ASSERT_TRUE(fs::exists(options_.best_checkpoint));
  auto restored = model();
  EXPECT_NO_THROW(nn::load_checkpoint(options_.best_checkpoint.string(), *restored));
}

TEST_F(TinyDataset, TrainLogExportsJsonAndCsv) {
  auto m = model();
  options_.epochs = 2;
  Trainer trainer(*m, options_);
  const auto result = trainer.fit(data_, &data_, loader_);
  result.log.save(dir_ / "log.json");
  result.log.save(dir_ / "log.csv");
  std::stringstream json, csv;
  json << std::ifstream(dir_ / "log.json").rdbuf();
  csv << std::ifstream(dir_ / "log.csv").rdbuf();
  EXPECT_EQ(json.str().rfind("{\"epochs\":[{\"epoch\":0,", 0), 0u) << json.str().substr(0, 80);
  EXPECT_NE(json.str().find("\"val_accuracy\":"), std::string::npos);
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 3);  // header + 2 epochs
  EXPECT_THROW(result.log.save(dir_ / "log.txt"), InvalidArgument);
}

TEST_F(TinyDataset, AutoBatchIsTheLargestPowerOfTwoUnderTheCap) {
  auto m = model();
  const auto plan16 = m->memory_plan(16, 1).total();
  const auto plan32 = m->memory_plan(32, 1).total();
  ASSERT_LT(plan16, plan32);
  EXPECT_EQ(auto_batch_size(*m, 1, plan16), 16);
  EXPECT_EQ(auto_batch_size(*m, 1, plan32 - 1), 16);
  EXPECT_EQ(auto_batch_size(*m, 1, 1), 1);
  options_.batch_size = 0;
  options_.max_memory = plan32;
  options_.max_steps_per_epoch = 2;
  Trainer trainer(*m, options_);
  EXPECT_EQ(trainer.fit(data_, nullptr, loader_).batch_size, 32);
}

TEST_F(TinyDataset, StepLogsGoThroughTheAsyncLogger) {
  auto m = model();
  options_.log_every_steps = 4;
  std::ostringstream sink;
  options_.log_stream = &sink;
  Trainer trainer(*m, options_);
  trainer.fit(data_, nullptr, loader_);
  const auto text = sink.str();
  EXPECT_NE(text.find("epoch 0 step 4: loss"), std::string::npos) << text;
  EXPECT_NE(text.find("epoch 0 step 12: loss"), std::string::npos) << text;
  EXPECT_NE(text.find("epoch 0: loss"), std::string::npos) << text;
}

TEST(AsyncLogger, WritesEveryLineInOrder) {
  std::ostringstream sink;
  {
    detail::AsyncLogger logger(&sink);
    for (int i = 0; i < 1000; ++i) logger.push("line " + std::to_string(i));
  }
  std::istringstream in(sink.str());
  int expected = 0;
  for (std::string line; std::getline(in, line); ++expected) {
    ASSERT_EQ(line, "line " + std::to_string(expected));
  }
  EXPECT_EQ(expected, 1000);
}

TEST(TrainerOptions, BadValuesAreRejected) {
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kPlainCnn;
  spec.widths = {4};
  auto m = nn::build_model(cpu_backend(), spec, 1);
  TrainerOptions o;
  o.batch_multiplier = 0;
  EXPECT_THROW(Trainer t(*m, o), InvalidArgument);
  o = {};
  o.epochs = 0;
  EXPECT_THROW(Trainer t(*m, o), InvalidArgument);
}

}  // namespace
}  // namespace stoke
