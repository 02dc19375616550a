// Step runners: how one device batch from the prefetch ring becomes an
// optimizer step, built on nn::TrainStep (forward -> backward -> update).
//
//   StepRunner              eager: one batch, one update
//   AccumulatingStepRunner  gradient accumulation: `multiplier` batches, their
//                           mean gradient, one update
//   GraphedStepRunner       a GPU backend's CUDA graph per ring slot, replayed
//                           for full-size device batches (eager otherwise),
//                           kept from epoch to epoch while what it captured
//                           stays where it was
//
// Between backward and the update every runner calls the gradient hook
// (Callbacks::on_gradients) with the gradients the update will apply: the
// place for a data-parallel allreduce.
//
// With a loss scaler (stoke/loss_scale.hpp) the eager runners multiply the
// loss gradient by its scale before each backward; at the update, after the
// hook (so data-parallel ranks check the same averaged gradients and decide
// alike), Backend::all_finite checks the gradients, the host reads the flag,
// and the step is either skipped (the optimizer untouched) or the gradients
// are multiplied by 1/scale before it. Graphs are not used then: the skip is
// a host decision.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stoke/cuda.hpp"
#include "stoke/loss_scale.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/prefetch.hpp"
#include "stoke/profile.hpp"
#include "train/batch_io.hpp"

namespace stoke::detail {

// Called in stream order on the model's backend, after backward and before
// the update; may change the gradients in place. In a graphed step it is
// captured with the step: it must issue the same ops on the same tensors
// every call.
using GradientHook = std::function<void(Tensor& gradients)>;

// Steps that ran as a replayed graph, and why steps ran eagerly on a GPU.
struct GraphStats {
  std::int64_t steps = 0;
  std::string note;
};

// What the runners share with the trainer (all outlive the runner).
struct StepEnv {
  nn::Model& model;
  nn::Optimizer& optimizer;
  Profiler& profiler;
  Tensor& loss_sum;     // (1): the epoch's per-sample loss sum
  Tensor& correct_sum;  // (1): the epoch's correct count
  GraphStats& graphs;
  GradientHook on_gradients;         // may be empty
  std::vector<float> class_weights;  // per-class loss weights; empty = none
  // Follows backward's progress (the data-parallel buckets); may be empty.
  // Eager single-batch steps only: accumulation and graphs leave it out.
  nn::Model::GradientsReady on_backward_progress;
  // Loss scaling; null or disabled = none. Outlives the runner.
  LossScaler* scaler = nullptr;
};

class StepRunner {
 public:
  explicit StepRunner(StepEnv env);
  virtual ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // Before an epoch's first batch: the ring's full batch size and a sample's
  // (C, H, W).
  virtual void begin_epoch(std::size_t full_batch, std::array<std::int64_t, 3> sample);
  // One device batch (its slot is released once copied in); true when it
  // completed an optimizer step with learning rate lr. busy ends right after
  // the step's last op is issued.
  virtual bool run(Batch& batch, DeviceBusySpan& busy, float lr);
  // Device batches accumulated toward the next update; discard_pending()
  // drops them (an epoch that ends between updates).
  virtual int pending() const noexcept { return 0; }
  // Whether the runner keeps graphs that captured the model's activations
  // (validation then keeps the training batch shape: detail::validate's pad_to).
  virtual bool keeps_graphs() const noexcept { return false; }
  virtual void discard_pending() noexcept {}

  // The last batch's loss (batch mean) and correct count, on the device.
  const Tensor& loss() const noexcept { return step_.loss(); }
  const Tensor& correct() const noexcept { return step_.correct(); }
  std::int64_t batch() const noexcept { return n_; }  // the last batch's samples
  // Whether the last optimizer step run() reported was skipped by the loss
  // scaler (non-finite gradients: the optimizer did not step).
  bool skipped() const noexcept { return skipped_; }

 protected:
  // Sizes the input tensors for a batch of n samples (new tensors, counted in
  // input_allocations_, when n changes).
  void reshape(std::int64_t n);
  // Forward, loss, and the epoch sums.
  void forward();
  void call_hook();
  // The batch in (its slot released), forward and backward, each profiled.
  void compute(Batch& batch);
  // The gradient hook and the optimizer's update, profiled as the update;
  // with a loss scaler, the check, then the unscale and update or the skip.
  void update(float lr);
  bool scaling() const noexcept { return env_.scaler && env_.scaler->enabled(); }

  StepEnv env_;
  Backend& be_;
  nn::TrainStep step_;
  std::array<std::int64_t, 3> sample_{};
  Tensor x_, labels_, scaled_loss_;
  Tensor finite_;  // (1): Backend::all_finite of the gradients
  bool skipped_ = false;
  std::int64_t n_ = 0;
  std::uint64_t input_allocations_ = 0;
};

class AccumulatingStepRunner final : public StepRunner {
 public:
  AccumulatingStepRunner(StepEnv env, int multiplier);
  bool run(Batch& batch, DeviceBusySpan& busy, float lr) override;
  int pending() const noexcept override { return micro_; }
  void discard_pending() noexcept override { micro_ = 0; }

 private:
  void accumulate(bool last);
  int multiplier_;
  int micro_ = 0;
  Tensor grad_acc_;
};

// A captured step reads and writes by address: the ring slot's device
// buffers, the input tensors, the model's parameters, gradients and
// activations, the optimizer's state. The slots are the fit's (kept across
// epochs, lib/prefetch/ring.hpp) and key the graphs by address; the rest
// stays where it was as long as nothing reallocates it, which
// buffers_generation() tells. So a graph replays for as long as the fit
// runs, and is captured anew only when the batch shape changes or a buffer
// moved (a short batch, validation of a short last batch, a user's eager
// forward of another shape between steps).
class GraphedStepRunner final : public StepRunner {
 public:
  GraphedStepRunner(StepEnv env, Toggle mode);
  void begin_epoch(std::size_t full_batch, std::array<std::int64_t, 3> sample) override;
  bool run(Batch& batch, DeviceBusySpan& busy, float lr) override;
  bool keeps_graphs() const noexcept override { return true; }

 private:
  using SlotKey = std::pair<const void*, const void*>;  // a slot's device images, labels
  // Changes whenever an input tensor or a layer's activation is reallocated.
  std::uint64_t buffers_generation() const noexcept;
  void replay_or_capture(Batch& batch, std::unique_ptr<GraphedStep>& graph);

  Toggle mode_;
  std::map<SlotKey, std::unique_ptr<GraphedStep>> graphs_;  // one per ring slot
  bool ended_ = false;  // a batch of another size ended graphs for this epoch
  std::int64_t full_batch_ = 0;
  std::uint64_t generation_ = 0;  // buffers_generation() after this runner's last graphed step
};

// The runner for this model, backend and settings; on a GPU where steps
// cannot replay as graphs, env.graphs.note says why.
std::unique_ptr<StepRunner> make_step_runner(StepEnv env, int multiplier, Toggle gpu_graph,
                                             bool gpu_streams = true);

}  // namespace stoke::detail
