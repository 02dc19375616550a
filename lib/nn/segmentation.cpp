// SegmentationStep: the per-pixel losses of a segmentation model through the
// backend's ops (pixel_cross_entropy_*, dice_loss_*), Model::backward and an
// Optimizer.
#include "stoke/nn/segmentation.hpp"

#include <cstdint>
#include <vector>

#include "stoke/error.hpp"

namespace stoke::nn {

namespace {

void check_labels(const char* where, const Tensor& logits, const Tensor& labels) {
  const Shape& s = logits.shape();
  if (labels.rank() != 3 || labels.dtype() != DType::kInt32 || s.size() != 4 ||
      labels.dim(0) != s[0] || labels.dim(1) != s[2] || labels.dim(2) != s[3]) {
    throw InvalidArgument(std::string(where) + ": the mask (labels) " +
                          shape_to_string(labels.shape()) + " " + to_string(labels.dtype()) +
                          " does not match the output " + shape_to_string(s) +
                          ": it must be int32 (N, H, W) of the output's N, H and W");
  }
}

}  // namespace

SegmentationStep::SegmentationStep(Model& model, SegmentationLossOptions options)
    : model_(model), options_(std::move(options)) {
  const ModelSpec& spec = model_.spec();
  if (!spec.is_segmentation()) {
    throw InvalidArgument(std::string("SegmentationStep: the model (") +
                          architecture_name(spec.architecture) +
                          ") is a classifier; a segmentation model has decoder_channels");
  }
  if (!options_.class_weights.empty()) {
    if (static_cast<int>(options_.class_weights.size()) != spec.classes) {
      throw InvalidArgument("SegmentationStep: " + std::to_string(options_.class_weights.size()) +
                            " class weights for " + std::to_string(spec.classes) + " classes");
    }
    weights_ = Tensor(model_.backend(), {spec.classes});
    weights_.copy_from_host(options_.class_weights.data());
  }
}

SegmentationStats SegmentationStep::losses(const Tensor& logits, const Tensor& labels,
                                           bool gradient) {
  check_labels("SegmentationStep", logits, labels);
  Backend& be = model_.backend();
  const Shape& s = logits.shape();
  const PixelLossParams p{options_.ignore_label, options_.dice_smooth};
  if (probs_.shape() != s) probs_ = Tensor(be, s);
  if (!ce_.defined()) ce_ = Tensor(be, {2});
  be.pixel_cross_entropy_forward(logits, labels, weights_, probs_, ce_, p);
  if (gradient) {
    if (dlogits_.shape() != s) dlogits_ = Tensor(be, s);
    be.pixel_cross_entropy_backward(probs_, labels, weights_, ce_, dlogits_, p);
  }
  SegmentationStats stats;
  stats.cross_entropy = ce_.to_vector()[0];
  if (options_.dice_weight != 0.0f) {
    if (dice_probs_.shape() != s) dice_probs_ = Tensor(be, s);
    if (!sums_.defined() || sums_.dim(0) != s[1]) sums_ = Tensor(be, {s[1], 3});
    if (!dice_.defined()) dice_ = Tensor(be, {1});
    be.dice_loss_forward(logits, labels, dice_probs_, sums_, dice_, p);
    if (gradient) {
      if (ddice_.shape() != s) ddice_ = Tensor(be, s);
      be.dice_loss_backward(dice_probs_, labels, sums_, ddice_, p);
      be.scale(ddice_, options_.dice_weight);
      be.add(dlogits_, ddice_, dlogits_);
    }
    stats.dice = dice_.to_vector()[0];
  }
  stats.loss = stats.cross_entropy + options_.dice_weight * stats.dice;
  stats.pixel_accuracy = pixel_accuracy(logits, labels, options_.ignore_label);
  return stats;
}

SegmentationStats SegmentationStep::forward_backward(const Tensor& x, const Tensor& labels) {
  logits_ = &model_.forward(x, true);
  const SegmentationStats stats = losses(*logits_, labels, true);
  model_.backward(dlogits_);
  return stats;
}

SegmentationStats SegmentationStep::step(const Tensor& x, const Tensor& labels,
                                         Optimizer& optimizer, float lr) {
  const SegmentationStats stats = forward_backward(x, labels);
  optimizer.step(model_, lr);
  return stats;
}

SegmentationStats SegmentationStep::evaluate(const Tensor& x, const Tensor& labels) {
  logits_ = &model_.forward(x, false);
  return losses(*logits_, labels, false);
}

float pixel_accuracy(const Tensor& logits, const Tensor& labels, std::int32_t ignore_label) {
  check_labels("pixel_accuracy", logits, labels);
  const std::vector<float> l = logits.to_vector();
  std::vector<std::int32_t> y(static_cast<std::size_t>(labels.numel()));
  labels.copy_to_host(y.data());
  const std::int64_t n = logits.dim(0), k = logits.dim(1), hw = logits.dim(2) * logits.dim(3);
  std::int64_t counted = 0, right = 0;
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t i = 0; i < hw; ++i) {
      const std::int32_t label = y[static_cast<std::size_t>(b * hw + i)];
      if (label == ignore_label) continue;
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < k; ++c) {
        if (l[static_cast<std::size_t>((b * k + c) * hw + i)] >
            l[static_cast<std::size_t>((b * k + best) * hw + i)])
          best = c;
      }
      ++counted;
      right += best == label ? 1 : 0;
    }
  }
  return counted == 0 ? 0.0f : static_cast<float>(right) / static_cast<float>(counted);
}

}  // namespace stoke::nn
