// Trainer::fit on the CUDA backend: batches arrive through the prefetcher's
// device slots (uploaded on its copy stream, handed over on the compute
// stream) and, with STOKE_GPU_GRAPH on, full batches replay one CUDA graph per
// slot. Compared with the CPU trainer (the reference) and with eager GPU
// execution. Skips with the reason where no device runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpu/gpu_fixture.hpp"
#include "stoke/cuda.hpp"
#include "stoke/train.hpp"
#include "stoke/tune.hpp"
#include "unit/trainer_runs.hpp"

namespace stoke::testing {
namespace {

class TrainerOnGpu : public TrainerRuns {
 protected:
  void SetUp() override {
    TrainerRuns::SetUp();
    const std::string why = gpu_unavailable_reason(query_system());
    if (!why.empty()) GTEST_SKIP() << why;
    // Deterministic cuDNN algorithms: the graph-vs-eager comparisons below
    // allow 1e-5, which atomics reordering backward sums run to run exceed.
    CudaBackendOptions strict;
    strict.strict_fp32 = true;
    strict.deterministic = true;
    gpu_ = create_cuda_backend(0, Settings{}, strict);
  }

  std::unique_ptr<GpuBackend> gpu_;
};

// The GPU trainer follows the CPU trainer step for step (same data order,
// same initialization): losses and parameters after two epochs agree within
// what ~24 float32 steps of accumulated rounding allow.
TEST_F(TrainerOnGpu, EagerGpuTrainingMatchesTheCpuReference) {
  options_.epochs = 2;
  const Run cpu = fit(cpu_backend(), Toggle::kOff);
  const Run gpu = fit(*gpu_, Toggle::kOff);
  ASSERT_EQ(gpu.result.log.epochs.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_NEAR(gpu.result.log.epochs[e].train_loss, cpu.result.log.epochs[e].train_loss, 1e-3)
        << "epoch " << e + 1;
    EXPECT_EQ(gpu.result.log.epochs[e].images, cpu.result.log.epochs[e].images);
  }
  EXPECT_LT(max_difference(gpu.parameters, cpu.parameters), 1e-3);
  // Device busy comes from events on the GPU, from the compute stages on the CPU.
  const ProfileSummary& profile = gpu.result.log.epochs.back().profile;
  EXPECT_TRUE(profile.device_busy_measured);
  EXPECT_GT(profile.device_busy_seconds, 0.0);
  EXPECT_LE(profile.device_busy_seconds, profile.wall_seconds);
  EXPECT_FALSE(cpu.result.log.epochs.back().profile.device_busy_measured);
  // The pool's and staging's figures reach the profile (the advisor reads them).
  EXPECT_GT(profile.memory.device_total, profile.memory.pool_cap);
  EXPECT_GT(profile.memory.pool_cap, 0u);
  EXPECT_GE(profile.memory.pool_reserved, profile.memory.pool_peak);
  // The CUDA context and cuDNN/cuBLAS handles hold memory the cap does not bound.
  EXPECT_GT(profile.memory.device_outside_pool, 0u);
  EXPECT_GT(profile.memory.pinned_bytes, 0u) << "staging is pinned by default";
  EXPECT_FALSE(profile.memory.pinned_fallback);
  EXPECT_EQ(gpu.result.graph_steps, 0);
  EXPECT_EQ(gpu.result.graph_note, "STOKE_GPU_GRAPH is off");
}

// With graphs on, each slot warms up eagerly once, then captures and
// replays for the whole fit (the ring's slots and the step's buffers stay
// where they were across epochs); the result equals eager GPU execution.
TEST_F(TrainerOnGpu, GraphReplayedTrainingEqualsEagerTraining) {
  options_.epochs = 2;
  const Run eager = fit(*gpu_, Toggle::kOff);
  const Run graphed = fit(*gpu_, Toggle::kOn);
  EXPECT_EQ(graphed.result.graph_steps, 2 * kSteps - 2) << graphed.result.graph_note;
  EXPECT_EQ(graphed.result.graph_note, "");
  EXPECT_LT(max_difference(graphed.parameters, eager.parameters), 1e-5);
  for (std::size_t e = 0; e < 2; ++e)
    EXPECT_NEAR(graphed.result.log.epochs[e].train_loss, eager.result.log.epochs[e].train_loss,
                1e-5);
}

// Three validated epochs: the fit's ring serves every epoch and every
// validation, and the graphs captured in epoch 1 replay to the end, also when
// the last validation batch is short (100 = 6 x 16 + 4: evaluated padded to
// the training batch, so the captured activations stay where they are; a
// stale graph would write into freed device memory). Training equals eager
// GPU execution, validation the unpadded evaluation.
TEST_F(TrainerOnGpu, GraphsLiveAcrossValidatedEpochs) {
  options_.epochs = 3;
  val_ = &data_;
  const Run eager = fit(*gpu_, Toggle::kOff);
  const Run graphed = fit(*gpu_, Toggle::kOn);
  EXPECT_EQ(graphed.result.graph_steps, 3 * kSteps - 2) << graphed.result.graph_note;
  EXPECT_LT(max_difference(graphed.parameters, eager.parameters), 1e-5);
  options_.validation_subset = 100;
  const Run eager_short = fit(*gpu_, Toggle::kOff);
  const Run graphed_short = fit(*gpu_, Toggle::kOn);
  EXPECT_EQ(graphed_short.result.graph_steps, 3 * kSteps - 2) << graphed_short.result.graph_note;
  EXPECT_LT(max_difference(graphed_short.parameters, eager_short.parameters), 1e-5);
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(graphed_short.result.log.epochs[e].val_images, 100u);
    EXPECT_NEAR(graphed_short.result.log.epochs[e].val_loss,
                eager_short.result.log.epochs[e].val_loss, 1e-4);
  }
}

// Dropout's mask comes from a host-side seed per step, which a replay would
// freeze: a model with dropout trains eagerly and says why.
TEST_F(TrainerOnGpu, DropoutModelsRunEagerlyAndSayWhy) {
  spec_.dropout = 0.25f;
  const Run graphed = fit(*gpu_, Toggle::kOn);
  EXPECT_EQ(graphed.result.graph_steps, 0);
  EXPECT_NE(graphed.result.graph_note.find("dropout"), std::string::npos)
      << graphed.result.graph_note;
}

// Adam and a cosine schedule change the step values every step: the replays
// read them from device memory, so graphs still equal eager execution. A
// short last batch (192 = 9 x 20 + 12) runs eagerly and ends the epoch's graphs.
TEST_F(TrainerOnGpu, GraphsFollowAdamAndTheScheduleAndStopAtAShortBatch) {
  options_.epochs = 2;
  options_.batch_size = 20;
  options_.optimizer = OptimizerKind::kAdam;
  options_.schedule.kind = nn::ScheduleKind::kCosine;
  options_.schedule.base_lr = 0.01f;
  options_.schedule.total_steps = 20;
  loader_.drop_last = false;
  const Run eager = fit(*gpu_, Toggle::kOff);
  const Run graphed = fit(*gpu_, Toggle::kOn);
  EXPECT_EQ(graphed.result.graph_steps, 2 * (9 - 2)) << graphed.result.graph_note;
  EXPECT_EQ(graphed.result.log.epochs.back().steps, 10u);
  EXPECT_LT(max_difference(graphed.parameters, eager.parameters), 1e-5);
}

// uint8 HWC batches uploaded and normalized on the device train like float
// batches normalized on the host (the same affine map, rounded differently).
TEST_F(TrainerOnGpu, Uint8UploadTrainsLikeFloatBatches) {
  options_.epochs = 2;
  const Run as_float = fit(*gpu_, Toggle::kOff);
  loader_.preprocess.dtype = OutputDtype::kUint8;
  const Run as_u8 = fit(*gpu_, Toggle::kOff);
  for (std::size_t e = 0; e < 2; ++e)
    EXPECT_NEAR(as_u8.result.log.epochs[e].train_loss, as_float.result.log.epochs[e].train_loss,
                1e-4);
  EXPECT_LT(max_difference(as_u8.parameters, as_float.parameters), 1e-4);
  // A quarter of the bytes crossed the bus.
  EXPECT_EQ(as_u8.result.log.epochs.back().images, as_float.result.log.epochs.back().images);
}

// On a GPU the autotuner adds a CUDA-graph A/B trial and writes its choice.
TEST_F(TrainerOnGpu, AutotuneTriesGraphsAndWritesTheChoice) {
  auto m = nn::build_model(*gpu_, spec_, 7);
  TuneOptions tune;
  tune.steps_per_trial = 3;
  tune.max_batch = 16;
  tune.thread_candidates = {1};
  const TuneResult result = autotune(*m, data_, loader_, options_, tune);
  EXPECT_TRUE(result.gpu);
  const auto graph_trial =
      std::find_if(result.trials.begin(), result.trials.end(), [](const TrialResult& t) {
        return t.settings.label.find("cuda graphs") != std::string::npos;
      });
  ASSERT_NE(graph_trial, result.trials.end()) << result.table();
  EXPECT_FALSE(graph_trial->failed) << graph_trial->error;
  EXPECT_NE(result.config_text().find(std::string("STOKE_GPU_GRAPH = ") +
                                      (result.best.gpu_graph ? "on" : "off")),
            std::string::npos)
      << result.config_text();
  const auto upload_trial = std::find_if(
      result.trials.begin(), result.trials.end(),
      [](const TrialResult& t) { return t.settings.label.find("upload") != std::string::npos; });
  ASSERT_NE(upload_trial, result.trials.end()) << result.table();
  EXPECT_FALSE(upload_trial->failed) << upload_trial->error;
  EXPECT_EQ(result.not_tried.size(), 1u);
}

}  // namespace
}  // namespace stoke::testing
