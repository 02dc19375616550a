// The trainer's GPU path without a GPU: on FakeGpuBackend the batches come
// through the prefetcher's device slots (uploads that really lag, handed over
// on the compute stream), full batches replay one recorded "graph" per slot
// (host values frozen at capture, memory read at replay), the optimizer's
// values reach the replays through memory. The CPU trainer is the reference.
#include <gtest/gtest.h>

#include <bit>

#include "stoke/cuda.hpp"
#include "stoke/train.hpp"
#include "unit/fake_gpu_backend.hpp"
#include "unit/trainer_runs.hpp"

namespace stoke::testing {
namespace {

using FakeGpuTrainer = TrainerRuns;

// Same kernels, same data order: the GPU path (device slots, D2D copies,
// device-side step values) gives exactly the CPU trainer's result.
TEST_F(FakeGpuTrainer, EagerGpuPathEqualsTheCpuTrainer) {
  options_.epochs = 2;
  val_ = &data_;
  const Run cpu = fit(cpu_backend(), Toggle::kOff);
  FakeGpuBackend gpu;
  const Run fake = fit(gpu, Toggle::kOff);
  EXPECT_EQ(fake.parameters, cpu.parameters);
  ASSERT_EQ(fake.result.log.epochs.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(fake.result.log.epochs[e].train_loss, cpu.result.log.epochs[e].train_loss)
        << "epoch " << e + 1;
    // Validation goes through the device slots too.
    EXPECT_TRUE(fake.result.log.epochs[e].validated);
    EXPECT_EQ(fake.result.log.epochs[e].val_loss, cpu.result.log.epochs[e].val_loss)
        << "epoch " << e + 1;
    EXPECT_EQ(fake.result.log.epochs[e].val_accuracy, cpu.result.log.epochs[e].val_accuracy);
    EXPECT_EQ(fake.result.log.epochs[e].images, static_cast<std::uint64_t>(kCount));
  }
  EXPECT_EQ(fake.result.graph_steps, 0);
  EXPECT_EQ(fake.result.graph_note, "STOKE_GPU_GRAPH is off");
  EXPECT_EQ(gpu.captures(), 0);
  // Device busy from the backend's spans; pool and staging figures from the GPU surface.
  const ProfileSummary& profile = fake.result.log.epochs.back().profile;
  EXPECT_TRUE(profile.device_busy_measured);
  EXPECT_GT(profile.device_busy_seconds, 0.0);
  EXPECT_LE(profile.device_busy_seconds, profile.wall_seconds);
  EXPECT_EQ(profile.memory.pool_cap, 1ull << 30);
  EXPECT_EQ(profile.memory.device_total, 2ull << 30);
  EXPECT_GT(profile.memory.pinned_bytes, 0u);
  EXPECT_FALSE(profile.memory.pinned_fallback);
}

// Each slot warms up eagerly once, is captured once and replays for the rest
// of the fit; the replays give exactly the eager result. Validation between
// the epochs runs batches of the training shape through the same ring slots
// and moves no buffer, so the second epoch replays the first epoch's graphs
// (train_fit_ring_test.cpp: when validation does move buffers).
TEST_F(FakeGpuTrainer, GraphReplayEqualsEagerTraining) {
  options_.epochs = 2;
  val_ = &data_;
  FakeGpuBackend eager_gpu, graph_gpu;
  const Run eager = fit(eager_gpu, Toggle::kOff);
  const Run graphed = fit(graph_gpu, Toggle::kOn);
  EXPECT_EQ(graphed.result.graph_steps, 2 * kSteps - 2) << graphed.result.graph_note;
  EXPECT_EQ(graphed.result.graph_note, "");
  EXPECT_EQ(graph_gpu.captures(), 2) << "one per slot for the fit";
  EXPECT_EQ(graph_gpu.replays(), 2 * kSteps - 2);
  EXPECT_EQ(graphed.parameters, eager.parameters);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(graphed.result.log.epochs[e].train_loss, eager.result.log.epochs[e].train_loss);
    EXPECT_EQ(graphed.result.log.epochs[e].val_accuracy, eager.result.log.epochs[e].val_accuracy);
  }
}

// The recording freezes host values as a CUDA graph does: a value passed to
// an op directly stays the captured one until a new key re-captures. This is
// what makes the next test meaningful.
TEST_F(FakeGpuTrainer, RecordedGraphsFreezeHostValuesLikeCudaGraphs) {
  FakeGpuBackend gpu;
  Tensor x(gpu, {8});
  GraphedStep graphed(gpu, Toggle::kOn);
  float value = 1.0f;
  graphed.run([&] { gpu.fill(x, value); });  // warm-up, eager
  graphed.run([&] { gpu.fill(x, value); });  // captured with 1
  value = 2.0f;
  graphed.run([&] { gpu.fill(x, value); });  // replayed: still 1
  EXPECT_EQ(x.to_vector()[0], 1.0f);
  graphed.run([&] { gpu.fill(x, value); },
              std::bit_cast<std::uint32_t>(value));  // new key: re-captured
  EXPECT_EQ(x.to_vector()[0], 2.0f);
  EXPECT_EQ(graphed.captures(), 2);
}

// Adam with a warm-up and cosine schedule changes the rate and the bias
// corrections every step; the replays read them from memory written by
// Optimizer::prepare, so graphs still give exactly the eager result.
TEST_F(FakeGpuTrainer, ReplaysFollowTheScheduleAndAdamsStep) {
  options_.epochs = 2;
  options_.optimizer = OptimizerKind::kAdam;
  options_.schedule.kind = nn::ScheduleKind::kCosine;
  options_.schedule.base_lr = 0.01f;
  options_.schedule.warmup_steps = 3;
  options_.schedule.total_steps = 2 * kSteps;
  FakeGpuBackend eager_gpu, graph_gpu;
  const Run eager = fit(eager_gpu, Toggle::kOff);
  const Run graphed = fit(graph_gpu, Toggle::kOn);
  EXPECT_EQ(graphed.result.graph_steps, 2 * kSteps - 2) << graphed.result.graph_note;
  EXPECT_EQ(graph_gpu.captures(), 2) << "no re-capture for a new rate, step or epoch";
  EXPECT_EQ(graphed.parameters, eager.parameters);
}

// A short last batch (192 = 9 x 20 + 12) reallocates the input: it runs
// eagerly and ends the epoch's graphs (the next epoch captures anew, its
// buffers having moved); the result still equals eager.
TEST_F(FakeGpuTrainer, AShortLastBatchRunsEagerly) {
  options_.epochs = 2;
  options_.batch_size = 20;
  loader_.drop_last = false;
  FakeGpuBackend eager_gpu, graph_gpu;
  const Run eager = fit(eager_gpu, Toggle::kOff);
  const Run graphed = fit(graph_gpu, Toggle::kOn);
  EXPECT_EQ(graphed.result.graph_steps, 2 * (9 - 2));
  EXPECT_EQ(graphed.result.log.epochs.back().steps, 10u);
  EXPECT_EQ(graphed.parameters, eager.parameters);
}

TEST_F(FakeGpuTrainer, DropoutAndGradientAccumulationRunEagerlyAndSayWhy) {
  {
    spec_.dropout = 0.25f;
    FakeGpuBackend gpu;
    const Run run = fit(gpu, Toggle::kOn);
    EXPECT_EQ(run.result.graph_steps, 0);
    EXPECT_NE(run.result.graph_note.find("dropout"), std::string::npos) << run.result.graph_note;
    EXPECT_EQ(gpu.captures(), 0);
    spec_.dropout = 0.0f;
  }
  {
    options_.batch_multiplier = 2;
    FakeGpuBackend gpu;
    const Run run = fit(gpu, Toggle::kOn);
    const Run cpu = fit(cpu_backend(), Toggle::kOff);
    EXPECT_EQ(run.result.graph_steps, 0);
    EXPECT_NE(run.result.graph_note.find("batch multiplier"), std::string::npos)
        << run.result.graph_note;
    EXPECT_EQ(run.parameters, cpu.parameters)
        << "accumulation on the GPU path equals the CPU trainer";
  }
}

// uint8 batches normalized by the prefetcher's device normalize train like
// float batches normalized by the loader (one rounding apart per input).
TEST_F(FakeGpuTrainer, Uint8UploadTrainsLikeFloatBatches) {
  options_.epochs = 2;
  FakeGpuBackend float_gpu, u8_gpu;
  const Run as_float = fit(float_gpu, Toggle::kOn);
  loader_.preprocess.dtype = OutputDtype::kUint8;
  const Run as_u8 = fit(u8_gpu, Toggle::kOn);
  EXPECT_EQ(as_u8.result.graph_steps, as_float.result.graph_steps);
  for (std::size_t e = 0; e < 2; ++e)
    EXPECT_NEAR(as_u8.result.log.epochs[e].train_loss, as_float.result.log.epochs[e].train_loss,
                1e-4);
  EXPECT_LT(max_difference(as_u8.parameters, as_float.parameters), 1e-4);
  // A quarter of the image bytes went through the prefetcher.
  EXPECT_EQ(as_u8.result.log.epochs.back().images, static_cast<std::uint64_t>(kCount));
  EXPECT_GT(u8_gpu.fake_device().jit_normalizes(), 0) << "STOKE_GPU_JIT is auto";
  EXPECT_EQ(u8_gpu.fake_device().precompiled_normalizes(), 0);
}

// STOKE_GPU_JIT reaches the prefetcher's normalize kernel as it reaches the
// backend's kernels: off asks the device for the precompiled kernel.
TEST_F(FakeGpuTrainer, Uint8UploadNormalizesWithThePrecompiledKernelWhenJitIsOff) {
  loader_.preprocess.dtype = OutputDtype::kUint8;
  Config config;
  config.set("STOKE_PREFETCH_DEPTH", "2");
  config.set("STOKE_GPU_GRAPH", "off");
  config.set("STOKE_GPU_JIT", "off");
  options_.settings = config.settings();
  FakeGpuBackend gpu;
  auto m = nn::build_model(gpu, spec_, 7);
  Trainer(*m, options_).fit(data_, nullptr, loader_);
  EXPECT_GT(gpu.fake_device().precompiled_normalizes(), 0);
  EXPECT_EQ(gpu.fake_device().jit_normalizes(), 0) << "STOKE_GPU_JIT=off asked for the JIT kernel";
}

}  // namespace
}  // namespace stoke::testing
