#include "stoke/train.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "train/async_logger.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using testing::TinyDataset;

// The models compute in float32: half-precision loader output is refused, and
// uint8 HWC (normalized on a GPU) is refused on the CPU backend, both naming
// the dtype, before anything trains.
TEST_F(TinyDataset, LoaderDtypesTheModelCannotTakeAreRefused) {
  auto m = model();
  Trainer trainer(*m, options_);
  for (OutputDtype dtype : {OutputDtype::kFloat16, OutputDtype::kBFloat16, OutputDtype::kUint8}) {
    LoaderOptions lo = loader_;
    lo.preprocess.dtype = dtype;
    try {
      trainer.fit(data_, nullptr, lo);
      ADD_FAILURE() << to_string(dtype) << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(to_string(dtype)), std::string::npos) << e.what();
    }
  }
}

// Each epoch's profile carries the backend's memory figures (what the
// advisor's memory rules read); on the CPU there is no pool cap or pinning.
TEST_F(TinyDataset, EpochProfilesCarryTheMemoryFigures) {
  auto backend = make_cpu_backend(0);
  auto m = nn::build_model(*backend, spec_, 7);
  Trainer trainer(*m, options_);
  const auto result = trainer.fit(data_, nullptr, loader_);
  const MemoryFigures& memory = result.log.epochs.back().profile.memory;
  EXPECT_GT(memory.pool_peak, memory.pool_in_use / 2);
  EXPECT_EQ(memory.pool_peak, backend->memory_stats().peak_bytes);
  EXPECT_GE(memory.pool_in_use, m->parameters().bytes());
  EXPECT_EQ(memory.pool_cap, 0u);
  EXPECT_FALSE(memory.pinned_fallback) << "the CPU backend copies nothing: nothing to pin";
  EXPECT_NE(format_profile(result.log.epochs.back().profile).find("memory: pool cap none"),
            std::string::npos);
}

// Validation (through a prefetch ring) reports exactly what evaluating the
// trained model batch by batch gives, including a short last batch.
TEST_F(TinyDataset, ValidationEqualsEvaluatingEveryBatch) {
  auto m = model();
  options_.batch_size = 20;  // 192 = 9 x 20 + 12
  Trainer trainer(*m, options_);
  const auto result = trainer.fit(data_, &data_, loader_);
  const EpochRecord& last = result.log.epochs.back();
  ASSERT_TRUE(last.validated);
  LoaderOptions lo = loader_;
  lo.batch_size = 20;
  lo.shuffle = false;
  lo.drop_last = false;
  Loader loader(data_, lo);
  std::vector<float> images(20 * loader.sample_bytes() / sizeof(float));
  std::vector<std::int32_t> labels(20);
  double loss = 0, correct = 0;
  std::size_t seen = 0;
  for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b) {
    const std::size_t n =
        loader.fill_batch(0, b, std::as_writable_bytes(std::span(images)), labels);
    const auto count = static_cast<std::int64_t>(n);
    Tensor x(m->backend(), m->input_shape(count)), y(m->backend(), {count}, DType::kInt32);
    x.copy_from_host(images.data());
    y.copy_from_host(labels.data());
    const nn::StepStats s = nn::evaluate(*m, x, y);
    loss += static_cast<double>(s.loss) * count;
    correct += static_cast<double>(s.accuracy) * count;
    seen += n;
  }
  EXPECT_EQ(seen, static_cast<std::size_t>(kCount));
  EXPECT_DOUBLE_EQ(last.val_loss, loss / static_cast<double>(seen));
  EXPECT_DOUBLE_EQ(last.val_accuracy, correct / static_cast<double>(seen));
}

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

// The best checkpoint is a deployable model (no optimizer state); the stop
// checkpoint keeps it. Resuming from the best model continues with a fresh
// optimizer: its step count covers only the resumed epochs.
TEST_F(TinyDataset, BestCheckpointHoldsNoOptimizerStateAndResumesWithAFreshOne) {
  options_.epochs = 3;
  options_.best_checkpoint = dir_ / "best.ckpt";
  options_.stop_checkpoint = dir_ / "stop.ckpt";
  {
    auto m = model();
    Callbacks cb;
    Trainer* self = nullptr;
    cb.on_epoch = [&](const EpochRecord& r) {
      if (r.epoch == 1) self->request_stop();
    };
    Trainer trainer(*m, options_, cb);
    self = &trainer;
    ASSERT_EQ(trainer.fit(data_, &data_, loader_).reason, StopReason::kRequested);
  }
  const auto best = nn::read_checkpoint_info(options_.best_checkpoint.string());
  const auto stop = nn::read_checkpoint_info(options_.stop_checkpoint.string());
  EXPECT_TRUE(best.optimizer_kind.empty()) << best.optimizer_kind;
  EXPECT_FALSE(stop.optimizer_kind.empty());
  EXPECT_LT(fs::file_size(options_.best_checkpoint), fs::file_size(options_.stop_checkpoint));

  TrainerOptions resumed = options_;
  resumed.resume = options_.best_checkpoint.string();
  resumed.stop_checkpoint.clear();
  auto m = model();
  Trainer trainer(*m, resumed);
  const auto result = trainer.fit(data_, &data_, loader_);
  ASSERT_EQ(result.reason, StopReason::kCompleted);
  ASSERT_FALSE(result.log.epochs.empty());
  std::int64_t resumed_steps = 0;
  for (const auto& e : result.log.epochs) resumed_steps += static_cast<std::int64_t>(e.steps);
  EXPECT_GT(stop.optimizer_steps, 0);
  EXPECT_EQ(trainer.optimizer().steps(), resumed_steps);  // fresh: not stop's count + these
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
