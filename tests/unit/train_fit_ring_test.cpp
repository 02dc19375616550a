// The prefetch ring and the CUDA graphs live for the whole fit (FakeGpuBackend,
// no GPU): built at the first epoch, reused by every later epoch and every
// validation pass, rebuilt only when the batch shrinks after an out-of-memory
// error or when what a graph captured moved, released when fit() ends. The
// fake device counts what the ring creates: one pinned staging buffer per
// slot, and with the slots' device buffers three events per slot and one
// copy stream.
#include <gtest/gtest.h>

#include <vector>

#include "stoke/cuda.hpp"
#include "stoke/train.hpp"
#include "unit/fake_gpu_backend.hpp"
#include "unit/trainer_runs.hpp"

namespace stoke::testing {
namespace {

// What one fit made the fake device create (the backend's own compute
// stream, made before, is not counted).
struct Created {
  int pinned = 0, streams = 0, events = 0;
};

class FitRing : public TrainerRuns {
 protected:
  // fit() on `gpu`, what it created there, and after each step how many
  // replays `gpu` had run so far (replays_).
  Run fit_counted(FakeGpuBackend& gpu, Toggle graphs, Created& made) {
    const AsyncFakeCudaDevice& d = gpu.fake_device();
    const Created before{d.pinned_allocs, d.streams_created, d.events_created};
    replays_.clear();
    callbacks_.on_step = [&](const StepInfo&) { replays_.push_back(gpu.replays()); };
    Run run = fit(gpu, graphs);
    callbacks_.on_step = nullptr;
    made = {d.pinned_allocs - before.pinned, d.streams_created - before.streams,
            d.events_created - before.events};
    return run;
  }
  // Whether step `step` (0-based over the fit) was a replay.
  bool replayed(std::size_t step) const {
    return step == 0 ? replays_.at(0) > 0 : replays_.at(step) > replays_.at(step - 1);
  }
  std::vector<int> replays_;
};

// Three epochs, each validated, at depth 2: one ring (training and
// validation share it: same batch and sample), two graphs (one per slot,
// captured in epoch 1 and replayed to the end), and the weights of eager
// training. Before the ring lived for the fit this was 6 rings and 6 captures.
TEST_F(FitRing, ThreeValidatedEpochsBuildTheRingAndTheGraphsOnce) {
  options_.epochs = 3;
  val_ = &data_;
  FakeGpuBackend eager_gpu, graph_gpu;
  const Run eager = fit(eager_gpu, Toggle::kOff);
  Created made;
  const Run graphed = fit_counted(graph_gpu, Toggle::kOn, made);
  EXPECT_EQ(made.pinned, 2) << "one staging buffer per slot for 3 epochs and 3 validations";
  EXPECT_EQ(made.streams, 1) << "one copy stream";
  EXPECT_EQ(made.events, 3 * 2) << "start, uploaded, consumed per slot";
  EXPECT_EQ(graph_gpu.captures(), 2) << "one graph per slot for the whole fit";
  ASSERT_EQ(replays_.size(), static_cast<std::size_t>(3 * kSteps));
  EXPECT_TRUE(replayed(kSteps)) << "epoch 2 starts with a replay of epoch 1's graph";
  EXPECT_TRUE(replayed(2 * kSteps));
  EXPECT_EQ(graphed.result.graph_steps, 3 * kSteps - 2) << "only the two warm-up steps eager";
  EXPECT_EQ(graphed.result.graph_note, "");
  EXPECT_EQ(graphed.parameters, eager.parameters);
  ASSERT_EQ(graphed.result.log.epochs.size(), 3u);
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(graphed.result.log.epochs[e].train_loss, eager.result.log.epochs[e].train_loss);
    EXPECT_TRUE(graphed.result.log.epochs[e].validated);
    EXPECT_EQ(graphed.result.log.epochs[e].val_loss, eager.result.log.epochs[e].val_loss);
  }
  EXPECT_EQ(graph_gpu.fake_device().pinned_live, 0) << "fit() released the ring at its end";
  // The eager GPU path is the CPU trainer's result (EagerGpuPathEqualsTheCpuTrainer).
  EXPECT_EQ(eager.parameters, fit(cpu_backend(), Toggle::kOff).parameters);
}

// Eager work between epochs that moves the activations (here a callback's
// forward of 3 samples through the network's layers; the model's own eval
// forward runs the inference plan, which leaves them alone) makes the graphs stale: each epoch
// after it captures anew, and not one step replays a stale graph.
TEST_F(FitRing, BuffersMovedBetweenEpochsAreCapturedAnew) {
  options_.epochs = 3;
  callbacks_.on_epoch = [this](const EpochRecord&) {
    Tensor three(fitting_->backend(), fitting_->input_shape(3));
    fitting_->backend().fill(three, 0.5f);
    fitting_->network().forward(three, false);
  };
  FakeGpuBackend eager_gpu, graph_gpu;
  const Run eager = fit(eager_gpu, Toggle::kOff);
  Created made;
  const Run graphed = fit_counted(graph_gpu, Toggle::kOn, made);
  EXPECT_EQ(made.pinned, 2) << "the ring stays all the same";
  EXPECT_EQ(graph_gpu.captures(), 3 * 2) << "two per epoch: the buffers moved each time";
  ASSERT_EQ(replays_.size(), static_cast<std::size_t>(3 * kSteps));
  for (const std::size_t first : {std::size_t{kSteps}, std::size_t{2 * kSteps}}) {
    // A replay here would write into the activations the forward replaced
    // (freed memory on a GPU; the fake's recording keeps them alive).
    EXPECT_FALSE(replayed(first)) << "step " << first << " replayed a stale graph";
    EXPECT_FALSE(replayed(first + 1)) << "the other slot warms up anew too";
  }
  EXPECT_EQ(graphed.result.graph_steps, 3 * (kSteps - 2));
  EXPECT_EQ(graphed.parameters, eager.parameters);
}

// While graphs replay, a short last validation batch (100 = 6 x 16 + 4) is
// evaluated in the first rows of a training-size batch: the activations keep
// their shape, the graphs replay across the validations, and the validation
// figures are those of the unpadded evaluation.
TEST_F(FitRing, AShortValidationBatchIsPaddedAndTheGraphsStay) {
  options_.epochs = 3;
  options_.validation_subset = 100;
  val_ = &data_;
  FakeGpuBackend eager_gpu, graph_gpu;
  const Run eager = fit(eager_gpu, Toggle::kOff);
  Created made;
  const Run graphed = fit_counted(graph_gpu, Toggle::kOn, made);
  EXPECT_EQ(graph_gpu.captures(), 2);
  EXPECT_EQ(graphed.result.graph_steps, 3 * kSteps - 2);
  EXPECT_EQ(graphed.parameters, eager.parameters);
  for (std::size_t e = 0; e < 3; ++e) {
    const EpochRecord &g = graphed.result.log.epochs[e], &r = eager.result.log.epochs[e];
    EXPECT_EQ(g.val_images, 100u);
    EXPECT_NEAR(g.val_loss, r.val_loss, 1e-6) << "epoch " << e + 1;
    EXPECT_EQ(g.val_accuracy, r.val_accuracy) << "epoch " << e + 1;
  }
}

// An out-of-memory error at the planned batch (32) halves it once; the ring
// built for 32 goes and one ring for 16 serves the rest of the fit.
TEST_F(FitRing, AnOutOfMemoryShrinkRebuildsTheRingOnce) {
  options_.epochs = 3;
  val_ = &data_;
  std::uint64_t peak16 = 0;
  {
    FakeGpuBackend probe;
    const TrainerOptions three_epochs = options_;
    options_.epochs = 1;
    fit(probe, Toggle::kOff);
    options_ = three_epochs;
    peak16 = probe.memory_stats().peak_bytes;
  }
  const auto planned = nn::build_model(cpu_backend(), spec_, 7);
  options_.batch_size = 0;  // auto: the plan picks 32, the cap allows 16
  options_.max_memory = planned->memory_plan(32, 1).total();
  ASSERT_GT(planned->memory_plan(64, 1).total(), options_.max_memory);
  FakeGpuBackend gpu(1, peak16 + peak16 / 10);
  Created made;
  const Run run = fit_counted(gpu, Toggle::kOn, made);
  ASSERT_EQ(run.result.reason, StopReason::kCompleted) << run.result.message;
  EXPECT_EQ(run.result.out_of_memory_retries, 1);
  EXPECT_EQ(run.result.batch_size, 16);
  EXPECT_EQ(made.pinned, 2 * 2) << "the ring at 32, then one ring at 16 for all 3 epochs";
  EXPECT_EQ(made.streams, 2);
  EXPECT_EQ(made.events, 2 * 3 * 2);
  EXPECT_EQ(gpu.fake_device().pinned_live, 0);
  ASSERT_EQ(run.result.log.epochs.size(), 3u);
  EXPECT_EQ(run.result.log.epochs.back().images, static_cast<std::uint64_t>(kCount));
}

}  // namespace
}  // namespace stoke::testing
