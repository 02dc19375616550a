// Out of memory survived: on a CPU backend with a host memory cap, a step that
// needs more raises OutOfMemory; the trainer halves the batch in auto mode
// and stops cleanly after a checkpoint in fixed mode; nothing leaks.
#include <gtest/gtest.h>

#include <cmath>

#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke {
namespace {

using testing::TinyDataset;
namespace fs = std::filesystem;

class TrainOutOfMemory : public TinyDataset {
 protected:
  // Peak bytes of a one-epoch fit at `batch` on an uncapped private backend.
  std::uint64_t peak_at(int batch) {
    auto backend = make_cpu_backend(0);
    auto m = nn::build_model(*backend, spec_, 7);
    TrainerOptions o = options_;
    o.batch_size = batch;
    o.max_steps_per_epoch = 2;
    Trainer(*m, o).fit(data_, nullptr, loader_);
    return backend->memory_stats().peak_bytes;
  }
};

TEST_F(TrainOutOfMemory, CappedBackendThrowsOutOfMemoryNamingTheCap) {
  auto backend = make_cpu_backend(1 << 20);
  try {
    Tensor big(*backend, {1 << 19});  // 2 MiB of floats
    FAIL() << "no error";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.cap(), 1u << 20);
    EXPECT_EQ(e.requested(), 2u << 20);
    EXPECT_NE(std::string(e.what()).find("cap"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("batch size"), std::string::npos);
  }
  EXPECT_EQ(backend->memory_stats().in_use_bytes, 0u);
  Tensor small(*backend, {1024});  // still usable
  EXPECT_EQ(backend->memory_stats().in_use_bytes, 4096u);
}

TEST_F(TrainOutOfMemory, AutoBatchHalvesKeepsTheEffectiveBatchAndLeaksNothing) {
  const std::uint64_t cap = peak_at(8) + peak_at(8) / 10;
  ASSERT_GT(peak_at(64), cap) << "batch 64 must not fit for this test";

  auto backend = make_cpu_backend(cap);
  auto m = nn::build_model(*backend, spec_, 7);
  TrainerOptions o = options_;
  o.batch_size = 0;           // auto
  o.max_memory = 1ull << 40;  // the plan says "anything fits": the cap decides
  o.epochs = 2;
  Trainer trainer(*m, o);
  const auto result = trainer.fit(data_, nullptr, loader_);
  EXPECT_EQ(result.reason, StopReason::kCompleted);
  EXPECT_GT(result.out_of_memory_retries, 0);
  EXPECT_LE(result.batch_size, 8);
  const int initial = result.batch_size << result.out_of_memory_retries;
  EXPECT_EQ(result.batch_size * result.batch_multiplier, initial);
  ASSERT_EQ(result.log.epochs.size(), 2u);
  EXPECT_TRUE(std::isfinite(result.log.epochs.back().train_loss));
  EXPECT_EQ(result.log.epochs.back().images, static_cast<std::uint64_t>(kCount));

  // In use afterwards equals a run that started at the final batch: the
  // failed steps left nothing behind.
  auto reference_backend = make_cpu_backend(0);
  auto reference = nn::build_model(*reference_backend, spec_, 7);
  TrainerOptions r = options_;
  r.batch_size = result.batch_size;
  r.batch_multiplier = result.batch_multiplier;
  r.epochs = 1;
  Trainer reference_trainer(*reference, r);
  reference_trainer.fit(data_, nullptr, loader_);
  EXPECT_EQ(backend->memory_stats().in_use_bytes, reference_backend->memory_stats().in_use_bytes);
}

TEST_F(TrainOutOfMemory, FixedBatchStopsCleanlyAfterACheckpoint) {
  const std::uint64_t cap = peak_at(8) + peak_at(8) / 10;
  auto backend = make_cpu_backend(cap);
  auto m = nn::build_model(*backend, spec_, 7);
  const auto in_use_before = backend->memory_stats().in_use_bytes;
  TrainerOptions o = options_;
  o.batch_size = 64;
  o.epochs = 3;
  o.stop_checkpoint = dir_ / "stopped.ckpt";
  Trainer trainer(*m, o);
  const auto result = trainer.fit(data_, nullptr, loader_);
  EXPECT_EQ(result.reason, StopReason::kOutOfMemory);
  EXPECT_NE(result.message.find("cap"), std::string::npos) << result.message;
  EXPECT_TRUE(result.log.epochs.empty());
  ASSERT_TRUE(fs::exists(o.stop_checkpoint));
  auto restored = nn::build_model(cpu_backend(), spec_, 99);
  const auto info = nn::load_checkpoint(o.stop_checkpoint.string(), *restored);
  EXPECT_EQ(info.optimizer_kind, "sgd");
  // The trainer released its step tensors and the layers' activations of the
  // failed step: what remains beyond the model is the optimizer's state
  // (velocity and its step values) and the epoch's two loss sums.
  const std::uint64_t expected = in_use_before + m->parameters().bytes() +
                                 nn::kOptimizerStepValues * sizeof(float) + 2 * sizeof(float);
  EXPECT_EQ(backend->memory_stats().in_use_bytes, expected);
}

TEST_F(TinyDataset, StopRequestWritesTheStopCheckpoint) {
  auto m = model();
  options_.epochs = 3;
  options_.stop_checkpoint = dir_ / "stop.ckpt";
  Callbacks cb;
  Trainer* self = nullptr;
  cb.on_step = [&](const StepInfo& info) {
    if (info.step == 2) self->request_stop();
  };
  Trainer trainer(*m, options_, cb);
  self = &trainer;
  EXPECT_EQ(trainer.fit(data_, nullptr, loader_).reason, StopReason::kRequested);
  EXPECT_TRUE(fs::exists(options_.stop_checkpoint));
}

}  // namespace
}  // namespace stoke
