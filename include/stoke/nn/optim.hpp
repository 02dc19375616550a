// Optimizers (one flat sweep over the model's parameter block per step),
// learning-rate schedules, and the training step that ties model, loss and
// optimizer together without host synchronization.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stoke/nn/model.hpp"

namespace stoke::nn {

class STOKE_API Optimizer {
 public:
  virtual ~Optimizer();
  virtual std::string kind() const = 0;  // "sgd", "adam", "adamw"
  // Applies model.gradients() to model.parameters() with learning rate lr:
  // prepare(lr), then apply(model).
  void step(Model& model, float lr) {
    prepare(lr);
    apply(model);
  }
  // Counts the step and writes its per-step values (the learning rate; Adam's
  // bias corrections) to a small tensor on the model's backend, in stream
  // order, without waiting for the device.
  virtual void prepare(float lr) = 0;
  // Issues the update, which reads those values when it executes. A CUDA
  // graph that captured apply() therefore follows the schedule when prepare()
  // runs before each replay (see GraphedStep).
  virtual void apply(Model& model) = 0;
  // State tensors (same element count as the parameter block), for checkpoints.
  virtual std::vector<NamedTensor> state() const = 0;
  std::int64_t steps() const noexcept { return steps_; }
  void set_steps(std::int64_t steps) noexcept { steps_ = steps; }
  // Tensors of state per parameter (0, 1 or 2), for the memory plan.
  virtual int slots() const noexcept = 0;

 protected:
  // The model's parameter groups (Model::parameter_groups) as of the last
  // prepare(), one block of per-step values per group, and views of each
  // group's range. The views are members: a captured update keeps pointing at them.
  // split_decay: the model's 1-D parameters in groups of their own that get
  // no weight decay (Model::parameter_groups).
  explicit Optimizer(const Model& model, bool split_decay = false);
  // Writes `values` with values[0] (the rate) scaled by each group's
  // multiplier; first regroups when the model's groups changed.
  void write_scalars(std::vector<float> values);
  // Subclasses rebuild their state views from groups_ (called on regrouping).
  virtual void regroup() = 0;
  // The group's range of a tensor shaped like the parameter block.
  static Tensor range(const Tensor& t, const ParameterGroup& g) {
    return g.offset == 0 && g.count == t.numel() ? t : t.view(g.offset, {g.count});
  }
  std::vector<Tensor> ranges(const Tensor& t) const;

  const Model* model_;
  bool split_decay_ = false;
  std::vector<ParameterGroup> groups_;
  Tensor scalars_;
  std::vector<Tensor> group_scalars_, group_params_, group_grads_;
  std::int64_t steps_ = 0;

 private:
  void build_views();
};

struct SgdOptions {
  float momentum = 0.9f;
  float weight_decay = 5e-4f;
  bool nesterov = false;
  // Decay conv and linear weights only, not biases and batch-norm scales and
  // shifts (the 1-D parameters). Off by default for SGD: its runs stay as they were.
  bool exclude_norm_and_bias_from_decay = false;
};

class STOKE_API Sgd final : public Optimizer {
 public:
  Sgd(const Model& model, SgdOptions options = {});
  std::string kind() const override { return "sgd"; }
  void prepare(float lr) override;
  void apply(Model& model) override;
  std::vector<NamedTensor> state() const override;
  // The velocity is kept even at momentum 0 (the update is the same), so the
  // state layout does not depend on the options.
  int slots() const noexcept override { return 1; }

 private:
  void regroup() override { group_velocity_ = ranges(velocity_); }
  SgdOptions options_;
  Tensor velocity_;  // per group scalars: {lr, unused...} (kOptimizerStepValues)
  std::vector<Tensor> group_velocity_;
};

struct AdamOptions {
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
  // Unset: PyTorch's defaults, 0 for Adam and 0.01 for AdamW (stoke's AdamW
  // decayed nothing by default before, i.e. it was plain Adam).
  std::optional<float> weight_decay;
  bool decoupled_weight_decay = false;  // AdamW
  // Decay conv and linear weights only, not biases and batch-norm scales and
  // shifts (the 1-D parameters), as timm and most recipes do. Unset: on for
  // AdamW, off for Adam.
  std::optional<bool> exclude_norm_and_bias_from_decay;

  float resolved_weight_decay() const noexcept {
    return weight_decay.value_or(decoupled_weight_decay ? 0.01f : 0.0f);
  }
  bool resolved_exclusion() const noexcept {
    return exclude_norm_and_bias_from_decay.value_or(decoupled_weight_decay);
  }
};

class STOKE_API Adam final : public Optimizer {
 public:
  Adam(const Model& model, AdamOptions options = {});
  std::string kind() const override { return options_.decoupled_weight_decay ? "adamw" : "adam"; }
  void prepare(float lr) override;
  void apply(Model& model) override;
  std::vector<NamedTensor> state() const override;
  int slots() const noexcept override { return 2; }

 private:
  void regroup() override {
    group_m_ = ranges(m_);
    group_v_ = ranges(v_);
  }
  AdamOptions options_;
  Tensor m_, v_;  // per group scalars: {lr, 1 - beta1^t, 1 - beta2^t, unused}
  std::vector<Tensor> group_m_, group_v_;
};

// Learning rate as a function of the step (0-based). A linear warm-up from
// lr/warmup_steps to lr over the first warmup_steps, then the schedule.
enum class ScheduleKind : std::uint8_t { kConstant, kStep, kCosine };

struct STOKE_API LrSchedule {
  ScheduleKind kind = ScheduleKind::kConstant;
  float base_lr = 0.1f;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;  // cosine: decays to min_lr at total_steps
  float min_lr = 0.0f;
  std::int64_t step_size = 1000;  // step: lr *= gamma every step_size steps
  float gamma = 0.1f;

  float lr(std::int64_t step) const noexcept;
};

struct StepStats {
  float loss = 0.0f;      // mean cross-entropy of the batch
  float accuracy = 0.0f;  // fraction of the batch classified right
};

// Forward, softmax cross-entropy, backward and the optimizer update of one
// batch, all issued on the model's backend without a host synchronization.
// Its loss buffers are counted in Model::memory_plan.
//
// The step in parts, for callers that do something between them (the
// trainer's gradient accumulation, a gradient allreduce before the update):
// forward(x, labels) -> backward() -> [model.gradients() hold this batch's
// gradients] -> update(). issue() is the three in order.
class STOKE_API TrainStep {
 public:
  TrainStep(Model& model, Optimizer& optimizer);
  // x (N, C, H, W) float32, labels (N) int32, both on the model's backend.
  // run() = prepare(lr) + issue(x, labels).
  void run(const Tensor& x, const Tensor& labels, float lr);
  // The two halves, for CUDA-graph replay: call prepare() every step outside
  // the captured region, issue() inside it; the replayed update then uses
  // each step's learning rate (and Adam's step count) without re-capture.
  void prepare(float lr) { optimizer_.prepare(lr); }
  void issue(const Tensor& x, const Tensor& labels);
  // Training forward, the batch-mean loss, the correct count and the
  // gradient of the loss with respect to the logits.
  void forward(const Tensor& x, const Tensor& labels);
  // The model's gradients of the last forward (written to model.gradients());
  // `ready` follows their progress (Model::backward).
  void backward(const Model::GradientsReady& ready = {});
  // The optimizer's update from model.gradients() (after prepare()).
  void update();
  // Per-class loss weights (one per class, as many as the model's classes;
  // empty = unweighted): backward() then takes the gradient of the weighted
  // cross-entropy sum_i w[y_i] l_i / N (Keras' class_weight), i.e. each
  // row's dlogits times w[y_i]. loss() stays the unweighted mean, comparable
  // across weightings.
  void set_class_weights(const std::vector<float>& weights);
  // The gradient with respect to the logits that backward() uses (N, C).
  const Tensor& dlogits() const noexcept { return weight_rows_.defined() ? weighted_ : dlogits_; }
  // Synchronizes and reads the last batch's loss and accuracy.
  StepStats stats() const;
  // Device tensors of the last step (1 element each), for readers that sync themselves.
  const Tensor& loss() const noexcept { return loss_; }
  const Tensor& correct() const noexcept { return correct_; }

 private:
  Model& model_;
  Optimizer& optimizer_;
  void weigh_rows(const Tensor& labels);

  Tensor probs_, dlogits_, loss_, correct_;
  // Class weights: (C, C), every row the weights; undefined = unweighted.
  Tensor weight_rows_;
  Tensor zeros_, onehot_, row_weights_, weighted_;  // (N, C) each
  std::int64_t batch_ = 0;
};

// Loss and accuracy of the model on (x, labels) in inference mode. rows in
// [1, N]: only the first rows of x (N, C, H, W) count, the others run through
// the network (per sample in inference: they change nothing) and are ignored,
// for a short batch padded to a fixed shape; 0: all N.
STOKE_API StepStats evaluate(Model& model, const Tensor& x, const Tensor& labels,
                             std::int64_t rows = 0);

}  // namespace stoke::nn
