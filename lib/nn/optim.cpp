// Optimizers, schedules and the training step.
#include "stoke/nn/optim.hpp"

#include <cmath>
#include <numbers>
#include <string>

#include "stoke/error.hpp"

namespace stoke::nn {

Optimizer::~Optimizer() = default;

Optimizer::Optimizer(const Model& model, bool split_decay)
    : model_(&model), split_decay_(split_decay), groups_(model.parameter_groups(split_decay)) {
  build_views();
}

void Optimizer::build_views() {
  const auto n = static_cast<std::int64_t>(groups_.size());
  if (!scalars_.defined() || scalars_.numel() != n * kOptimizerStepValues) {
    scalars_ = Tensor(model_->backend(), {n * kOptimizerStepValues});
    model_->backend().fill(scalars_, 0.0f);
  }
  group_scalars_.clear();
  for (std::int64_t g = 0; g < n; ++g)
    group_scalars_.push_back(scalars_.view(g * kOptimizerStepValues, {kOptimizerStepValues}));
  group_params_ = ranges(model_->parameters());
  group_grads_ = ranges(model_->gradients());
}

std::vector<Tensor> Optimizer::ranges(const Tensor& t) const {
  std::vector<Tensor> out;
  for (const ParameterGroup& g : groups_) out.push_back(range(t, g));
  return out;
}

void Optimizer::write_scalars(std::vector<float> values) {
  auto groups = model_->parameter_groups(split_decay_);
  bool same = groups.size() == groups_.size();
  for (std::size_t g = 0; same && g < groups.size(); ++g) {
    same = groups[g].offset == groups_[g].offset && groups[g].count == groups_[g].count &&
           groups[g].decay == groups_[g].decay;
  }
  groups_ = std::move(groups);
  if (!same) {  // frozen or re-grouped after construction
    build_views();
    regroup();
  }
  const float lr = values[0];
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    values[0] = lr * groups_[g].lr_multiplier;
    scalars_.backend().write_values(group_scalars_[g], values);
  }
}

Sgd::Sgd(const Model& model, SgdOptions options)
    : Optimizer(model, options.exclude_norm_and_bias_from_decay), options_(options) {
  Backend& be = model.backend();
  velocity_ = Tensor(be, model.parameters().shape());
  be.fill(velocity_, 0.0f);
  regroup();
}

void Sgd::prepare(float lr) {
  ++steps_;
  write_scalars({lr});
}

void Sgd::apply(Model& model) {
  if (&model != model_)
    throw InvalidArgument("Sgd::apply: a different model than the optimizer was built for");
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    SgdParams p{0.0f, options_.momentum, groups_[g].decay ? options_.weight_decay : 0.0f,
                options_.nesterov};
    p.scalars = &group_scalars_[g];
    model.backend().sgd_update(group_params_[g], group_grads_[g], group_velocity_[g], p);
  }
}

std::vector<NamedTensor> Sgd::state() const {
  return {{"sgd.velocity", velocity_}};
}

Adam::Adam(const Model& model, AdamOptions options)
    : Optimizer(model, options.resolved_exclusion()), options_(options) {
  Backend& be = model.backend();
  const Shape s = model.parameters().shape();
  m_ = Tensor(be, s);
  v_ = Tensor(be, s);
  be.fill(m_, 0.0f);
  be.fill(v_, 0.0f);
  regroup();
}

void Adam::prepare(float lr) {
  ++steps_;
  // Bias corrections in double, as the backends compute them from a step count.
  const auto correction = [&](float beta) {
    return static_cast<float>(1.0 -
                              std::pow(static_cast<double>(beta), static_cast<double>(steps_)));
  };
  write_scalars({lr, correction(options_.beta1), correction(options_.beta2)});
}

void Adam::apply(Model& model) {
  AdamParams p;
  p.beta1 = options_.beta1;
  p.beta2 = options_.beta2;
  p.epsilon = options_.epsilon;
  const float decay = options_.resolved_weight_decay();
  p.decoupled_weight_decay = options_.decoupled_weight_decay;
  p.step = steps_;
  if (&model != model_)
    throw InvalidArgument("Adam::apply: a different model than the optimizer was built for");
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    p.scalars = &group_scalars_[g];
    p.weight_decay = groups_[g].decay ? decay : 0.0f;
    model.backend().adam_update(group_params_[g], group_grads_[g], group_m_[g], group_v_[g], p);
  }
}

std::vector<NamedTensor> Adam::state() const {
  return {{"adam.m", m_}, {"adam.v", v_}};
}

float LrSchedule::lr(std::int64_t step) const noexcept {
  if (warmup_steps > 0 && step < warmup_steps) {
    return base_lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  }
  const std::int64_t t = step - warmup_steps;
  switch (kind) {
    case ScheduleKind::kConstant:
      return base_lr;
    case ScheduleKind::kStep:
      return base_lr *
             std::pow(gamma, static_cast<float>(t / std::max<std::int64_t>(step_size, 1)));
    case ScheduleKind::kCosine: {
      const std::int64_t span = std::max<std::int64_t>(total_steps - warmup_steps, 1);
      const double frac = std::min(1.0, static_cast<double>(t) / static_cast<double>(span));
      return static_cast<float>(min_lr + 0.5 * (base_lr - min_lr) *
                                             (1.0 + std::cos(std::numbers::pi * frac)));
    }
  }
  return base_lr;
}

TrainStep::TrainStep(Model& model, Optimizer& optimizer) : model_(model), optimizer_(optimizer) {
  Backend& be = model.backend();
  loss_ = Tensor(be, {1});
  correct_ = Tensor(be, {1});
}

void TrainStep::run(const Tensor& x, const Tensor& labels, float lr) {
  prepare(lr);
  issue(x, labels);
}

void TrainStep::issue(const Tensor& x, const Tensor& labels) {
  forward(x, labels);
  backward();
  update();
}

void TrainStep::forward(const Tensor& x, const Tensor& labels) {
  const Tensor& logits = model_.forward(x, true);
  Backend& be = model_.backend();
  if (!probs_.defined() || probs_.shape() != logits.shape()) {
    probs_ = Tensor(be, logits.shape());
    dlogits_ = Tensor(be, logits.shape());
  }
  be.softmax_cross_entropy_forward(logits, labels, probs_, loss_, correct_);
  be.softmax_cross_entropy_backward(probs_, labels, dlogits_);
  batch_ = x.dim(0);
  if (weight_rows_.defined()) weigh_rows(labels);
}

// dlogits_i *= w[y_i]: the gradient of sum_i w[y_i] l_i / N. Composed of ops
// every backend has, all on the device (no host synchronization, capturable
// in a CUDA graph): the cross-entropy gradient of all-zero probabilities is
// -onehot(labels) / N; scaled by -N it is the one-hot matrix; times the
// (C, C) matrix whose every row is w it gives w[y_i] in each column of row i;
// the elementwise product (dropout's backward) weighs the rows.
void TrainStep::weigh_rows(const Tensor& labels) {
  Backend& be = model_.backend();
  if (!zeros_.defined() || zeros_.shape() != probs_.shape()) {
    zeros_ = Tensor(be, probs_.shape());
    be.fill(zeros_, 0.0f);
    onehot_ = Tensor(be, probs_.shape());
    row_weights_ = Tensor(be, probs_.shape());
    weighted_ = Tensor(be, probs_.shape());
  }
  be.softmax_cross_entropy_backward(zeros_, labels, onehot_);
  be.scale(onehot_, -static_cast<float>(batch_));
  be.linear_forward(onehot_, weight_rows_, Tensor(), row_weights_);
  be.dropout_backward(dlogits_, row_weights_, weighted_);
}

void TrainStep::set_class_weights(const std::vector<float>& weights) {
  if (weights.empty()) {
    weight_rows_ = Tensor();
    return;
  }
  const auto c = static_cast<std::int64_t>(weights.size());
  if (c != model_.spec().classes) {
    throw InvalidArgument("TrainStep::set_class_weights: " + std::to_string(c) +
                          " weights for a model with " + std::to_string(model_.spec().classes) +
                          " classes");
  }
  std::vector<float> rows;
  for (std::int64_t j = 0; j < c; ++j) rows.insert(rows.end(), weights.begin(), weights.end());
  weight_rows_ = Tensor(model_.backend(), {c, c});
  weight_rows_.copy_from_host(rows.data());
}

void TrainStep::backward(const Model::GradientsReady& ready) {
  model_.backward(weight_rows_.defined() ? weighted_ : dlogits_, ready);
}

void TrainStep::update() {
  optimizer_.apply(model_);
}

StepStats TrainStep::stats() const {
  model_.backend().synchronize();
  float loss = 0.0f, correct = 0.0f;
  loss_.copy_to_host(&loss);
  correct_.copy_to_host(&correct);
  return {loss, batch_ ? correct / static_cast<float>(batch_) : 0.0f};
}

StepStats evaluate(Model& model, const Tensor& x, const Tensor& labels, std::int64_t rows) {
  const std::int64_t n = x.dim(0);
  if (rows < 0 || rows > n) {
    throw InvalidArgument("nn::evaluate: rows " + std::to_string(rows) + " outside [0, " +
                          std::to_string(n) + "] (the batch)");
  }
  if (rows == 0) rows = n;
  Backend& be = model.backend();
  const Tensor& all = model.forward(x, false);
  const Tensor logits = rows == n ? all : all.view(0, {rows, all.dim(1)});
  const Tensor counted = rows == n ? labels : labels.view(0, {rows});
  Tensor probs(be, logits.shape()), loss(be, {1}), correct(be, {1});
  be.softmax_cross_entropy_forward(logits, counted, probs, loss, correct);
  float l = 0.0f, c = 0.0f;
  loss.copy_to_host(&l);
  correct.copy_to_host(&c);
  return {l, c / static_cast<float>(rows)};
}

}  // namespace stoke::nn
