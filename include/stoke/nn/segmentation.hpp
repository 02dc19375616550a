// Training and evaluating a segmentation model (a ModelSpec with
// decoder_channels: the U-Net of docs/segmentation-model.md): per-pixel
// cross-entropy with class weights and an ignore label, plus an optional soft
// Dice term, through the backend's segmentation ops; the gradient goes back
// through Model::backward and the update through the existing optimizers.
#pragma once

#include <cstdint>
#include <vector>

#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"

namespace stoke::nn {

struct SegmentationLossOptions {
  // Cross-entropy's per-class weights (one per class) or empty (all 1).
  std::vector<float> class_weights;
  // loss = cross-entropy + dice_weight x soft Dice (0: cross-entropy only).
  float dice_weight = 0.0f;
  float dice_smooth = 0.0f;  // Dice's smoothing (segmentation_models_pytorch's smooth)
  // Pixels with this label count in no loss, gradient or accuracy; the
  // default (negative, no label has it) ignores nothing.
  std::int32_t ignore_label = -100;
};

struct SegmentationStats {
  float loss = 0.0f;           // cross_entropy + dice_weight x dice
  float cross_entropy = 0.0f;  // weighted mean over the pixels not ignored
  float dice = 0.0f;           // 0 unless dice_weight > 0
  // Fraction of the pixels not ignored whose arg-max class is their label.
  float pixel_accuracy = 0.0f;
};

// One model's loss buffers and steps. labels: int32 (N, H, W), each pixel a
// class in [0, classes) or the ignore label, on the model's backend.
// InvalidArgument, naming the shapes, when the model is not a segmentation
// model, the labels do not match the logits (N, H, W), or the class weights
// are not one per class.
class STOKE_API SegmentationStep {
 public:
  explicit SegmentationStep(Model& model, SegmentationLossOptions options = {});
  // Training forward, losses, backward (model.gradients()), optimizer update
  // with learning rate lr. Synchronizes to read the stats (of this batch,
  // before the update).
  SegmentationStats step(const Tensor& x, const Tensor& labels, Optimizer& optimizer, float lr);
  // The same without the update.
  SegmentationStats forward_backward(const Tensor& x, const Tensor& labels);
  // Eval-mode forward (batch norm's running statistics) and the losses; no gradients.
  SegmentationStats evaluate(const Tensor& x, const Tensor& labels);
  // Of the last call: the logits (N, classes, H, W) and the loss's gradient
  // with respect to them (after step or forward_backward).
  const Tensor& logits() const noexcept { return *logits_; }
  const Tensor& dlogits() const noexcept { return dlogits_; }

 private:
  SegmentationStats losses(const Tensor& logits, const Tensor& labels, bool gradient);
  Model& model_;
  SegmentationLossOptions options_;
  Tensor weights_, probs_, ce_, dlogits_, dice_probs_, sums_, dice_, ddice_;
  const Tensor* logits_ = nullptr;
};

// Fraction of the pixels of labels (int32 (N, H, W)) not equal to
// ignore_label where logits' (N, K, H, W) arg-max over K is the label (ties:
// the lowest class); 0 when every pixel is ignored. Reads both to the host.
STOKE_API float pixel_accuracy(const Tensor& logits, const Tensor& labels,
                               std::int32_t ignore_label = -100);

}  // namespace stoke::nn
