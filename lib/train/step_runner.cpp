#include "train/step_runner.hpp"

#include <map>
#include <utility>

namespace stoke::detail {

StepRunner::StepRunner(StepEnv env)
    : env_(std::move(env)), be_(env_.model.backend()), step_(env_.model, env_.optimizer) {
  step_.set_class_weights(env_.class_weights);
}

StepRunner::~StepRunner() = default;

void StepRunner::begin_epoch(std::size_t, std::array<std::int64_t, 3> sample) {
  sample_ = sample;
}

void StepRunner::reshape(std::int64_t n) {
  if (n_ == n) return;
  x_ = Tensor(be_, {n, sample_[0], sample_[1], sample_[2]});
  labels_ = Tensor(be_, {n}, DType::kInt32);
  n_ = n;
  input_allocations_ += 2;
}

void StepRunner::forward() {
  step_.forward(x_, labels_);
  be_.accumulate(env_.correct_sum, step_.correct());
  // The loss is a batch mean: the epoch sums it per sample.
  if (!scaled_loss_.defined()) scaled_loss_ = Tensor(be_, {1});
  be_.copy(scaled_loss_.raw(), step_.loss().raw(), sizeof(float), CopyKind::kDeviceToDevice);
  be_.scale(scaled_loss_, static_cast<float>(n_));
  be_.accumulate(env_.loss_sum, scaled_loss_);
}

void StepRunner::call_hook() {
  if (env_.on_gradients) env_.on_gradients(env_.model.gradients());
}

void StepRunner::compute(Batch& batch) {
  Profiler& prof = env_.profiler;
  reshape(static_cast<std::int64_t>(batch.count()));
  {
    auto span = prof.span(Stage::kHostToDevice);
    copy_batch_in(be_, batch, x_, labels_);
  }
  batch.release();
  {
    auto span = prof.span(Stage::kForward);
    forward();
  }
  auto span = prof.span(Stage::kBackward);
  if (scaling()) {
    Tensor dlogits = step_.dlogits();  // a view of the step's own buffer
    be_.scale(dlogits, env_.scaler->scale());
  }
  step_.backward(env_.on_backward_progress);
}

void StepRunner::update(float lr) {
  auto span = env_.profiler.span(Stage::kUpdate);
  call_hook();
  skipped_ = false;
  if (scaling()) {
    Tensor& grads = env_.model.gradients();
    if (!finite_.defined()) finite_ = Tensor(be_, {1});
    be_.all_finite(grads, finite_);
    const float inverse = env_.scaler->inverse_scale();  // the scale this backward used
    if (!env_.scaler->update(read_scalar(finite_) == 1.0f)) {
      skipped_ = true;
      return;  // no prepare(): the optimizer's step count and state stay
    }
    be_.scale(grads, inverse);
  }
  step_.prepare(lr);
  step_.update();
}

bool StepRunner::run(Batch& batch, DeviceBusySpan& busy, float lr) {
  compute(batch);
  env_.profiler.step_done(static_cast<std::uint64_t>(n_));
  update(lr);
  busy.end();
  return true;
}

// A micro batch's gradients are not the ones the update applies: nothing
// follows backward.
AccumulatingStepRunner::AccumulatingStepRunner(StepEnv env, int multiplier)
    : StepRunner(std::move(env)), multiplier_(multiplier) {
  env_.on_backward_progress = {};
}

// The mean gradient of the micro batches, into the model's gradients on the last.
void AccumulatingStepRunner::accumulate(bool last) {
  Tensor& grads = env_.model.gradients();
  if (!grad_acc_.defined()) grad_acc_ = Tensor(be_, grads.shape());
  if (micro_ == 1) {
    be_.copy(grad_acc_.raw(), grads.raw(), grads.bytes(), CopyKind::kDeviceToDevice);
  } else {
    be_.accumulate(grad_acc_, grads);
  }
  if (last) {
    be_.copy(grads.raw(), grad_acc_.raw(), grads.bytes(), CopyKind::kDeviceToDevice);
    be_.scale(grads, 1.0f / static_cast<float>(multiplier_));
  }
}

bool AccumulatingStepRunner::run(Batch& batch, DeviceBusySpan& busy, float lr) {
  compute(batch);
  const bool last = ++micro_ == multiplier_;
  {
    auto span = env_.profiler.span(Stage::kUpdate);
    accumulate(last);
  }
  env_.profiler.step_done(static_cast<std::uint64_t>(n_));
  if (!last) {
    busy.end();
    return false;
  }
  micro_ = 0;
  update(lr);
  busy.end();
  return true;
}

GraphedStepRunner::GraphedStepRunner(StepEnv env, Toggle mode)
    : StepRunner(std::move(env)), mode_(mode) {
  env_.on_backward_progress = {};  // host callbacks have no place in a graph
}

// The graphs outlive the epoch: the ring's slots are the fit's, and an
// epoch boundary moves none of the other buffers. Another batch or sample
// shape means new input tensors and activations: then they go.
void GraphedStepRunner::begin_epoch(std::size_t full_batch, std::array<std::int64_t, 3> sample) {
  if (static_cast<std::int64_t>(full_batch) != full_batch_ || sample != sample_) graphs_.clear();
  StepRunner::begin_epoch(full_batch, sample);
  ended_ = false;
  full_batch_ = static_cast<std::int64_t>(full_batch);
}

std::uint64_t GraphedStepRunner::buffers_generation() const noexcept {
  return env_.model.activation_allocations() + input_allocations_;
}

// A batch of another size reallocates the input and activations, so it drops
// the graphs for the rest of the epoch.
bool GraphedStepRunner::run(Batch& batch, DeviceBusySpan& busy, float lr) {
  const auto n = static_cast<std::int64_t>(batch.count());
  if (!ended_ && n != full_batch_) {
    graphs_.clear();
    ended_ = true;
  }
  if (ended_ || !batch.device_images()) return StepRunner::run(batch, busy, lr);
  // Work since this runner's last step (validation's short last batch, a
  // callback's forward of another shape) reallocated what the graphs point
  // into: they would replay into freed memory, so they go.
  if (buffers_generation() != generation_) graphs_.clear();
  reshape(n);
  // prepare() writes this step's rate outside the graph; the replay reads
  // it. The whole step replays at once: it is reported as forward.
  step_.prepare(lr);
  const SlotKey key{batch.device_images(), batch.device_labels()};
  auto& graph = graphs_[key];
  replay_or_capture(batch, graph);
  // This step's own warm-up allocated (the first step, or the first after a
  // change): graphs of the other slots captured the old buffers.
  const std::uint64_t after = buffers_generation();
  if (after != generation_) std::erase_if(graphs_, [&](const auto& g) { return g.first != key; });
  generation_ = after;
  busy.end();
  batch.release();
  env_.profiler.step_done(static_cast<std::uint64_t>(n));
  return true;
}

void GraphedStepRunner::replay_or_capture(Batch& batch, std::unique_ptr<GraphedStep>& graph) {
  if (!graph) graph = std::make_unique<GraphedStep>(be_, mode_);
  try {
    auto span = env_.profiler.span(Stage::kForward);
    graph->run([&] {
      copy_batch_in(be_, batch, x_, labels_);
      forward();
      step_.backward();
      call_hook();
      step_.update();
    });
  } catch (...) {
    env_.optimizer.set_steps(env_.optimizer.steps() - 1);  // the step did not happen
    throw;
  }
  // A replay updates the weights and statistics without Model::forward: the
  // model's inference plan must refold before the next validation.
  env_.model.parameters_changed();
  if (graph->replaying()) {
    ++env_.graphs.steps;
  } else if (!graph->eager_reason().empty()) {
    env_.graphs.note = graph->eager_reason();
  }
}

// CUDA graphs: one per slot, for full-size batches of one optimizer step
// each. Dropout draws each step's mask from a host-side seed, which a replay
// would freeze: such models run eagerly. Graphs also need the prefetcher's
// own copy stream: with STOKE_GPU_STREAMS=off its uploads of the next batch
// go on the compute stream, and a capture there would bake them into the
// graph (or break on their events).
std::unique_ptr<StepRunner> make_step_runner(StepEnv env, int multiplier, Toggle gpu_graph,
                                             bool gpu_streams) {
  const bool gpu = env.model.backend().gpu() != nullptr;
  const bool dropout = env.model.spec().dropout > 0.0f;
  const bool scaling = env.scaler && env.scaler->enabled();
  if (gpu && gpu_graph != Toggle::kOff && gpu_streams && multiplier == 1 && !dropout && !scaling) {
    return std::make_unique<GraphedStepRunner>(std::move(env), gpu_graph);
  }
  if (gpu) {
    env.graphs.note =
        gpu_graph == Toggle::kOff ? "STOKE_GPU_GRAPH is off"
        : !gpu_streams ? "STOKE_GPU_STREAMS is off (CUDA graphs need the separate copy stream: "
                         "uploads on the compute stream would be captured into the graph)"
        : dropout      ? "the model has dropout (a new mask each step; a replay would repeat one)"
        : scaling      ? "loss scaling is on (whether a step is skipped is decided on the host)"
                       : "batch multiplier > 1 (gradient accumulation runs eagerly)";
  }
  if (multiplier > 1) return std::make_unique<AccumulatingStepRunner>(std::move(env), multiplier);
  return std::make_unique<StepRunner>(std::move(env));
}

}  // namespace stoke::detail
