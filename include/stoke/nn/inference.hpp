// Inference for inspection applications: load a checkpoint, classify raw
// 8-bit images with the normalization saved in it, already at the model's
// input size. stoke::Predictor (stoke/deploy.hpp) runs a model file's whole
// preprocessing (decode, resize, crop, normalization) on any image instead.
//
// Thread safety: a Classifier may be shared by threads; calls are serialized
// by an internal mutex (one forward at a time, each using the backend's
// parallelism). For parallel callers, create one Classifier per thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stoke/nn/checkpoint.hpp"

namespace stoke::nn {

// value = (pixel * scale - mean[c]) / std[c]; stored in checkpoint metadata
// under "preprocess.scale", "preprocess.mean", "preprocess.std".
struct STOKE_API Preprocessing {
  float scale = 1.0f / 255.0f;
  std::vector<float> mean = {0.0f};  // one per channel (or one for all)
  std::vector<float> std = {1.0f};

  void to_metadata(std::map<std::string, std::string>& metadata) const;
  // A model file's normalization (model.preprocess.*, see stoke/deploy.hpp)
  // when present, else these keys (defaults for the absent ones among them);
  // InvalidArgument when neither is there, or for malformed values.
  static Preprocessing from_metadata(const std::map<std::string, std::string>& metadata);
};

struct Prediction {
  int label = -1;
  float confidence = 0.0f;           // probability of label
  std::vector<float> probabilities;  // one per class
};

class FusedInference;  // lib/nn/fused_inference.hpp

class STOKE_API Classifier {
 public:
  // Loads the checkpoint onto backend (default: the registry's default backend).
  // Batch norm is folded into the convolutions once, here (eval mode).
  explicit Classifier(const std::string& checkpoint_path, Backend* backend = nullptr);
  ~Classifier();

  const ModelSpec& spec() const noexcept { return model_->spec(); }
  const Preprocessing& preprocessing() const noexcept { return preprocessing_; }

  // pixels: height x width x channels, interleaved (HWC), uint8; the size must
  // be the model's input size (InvalidArgument otherwise; resize upstream).
  Prediction classify(const std::uint8_t* pixels, int height, int width, int channels);
  // count images of that size back to back.
  std::vector<Prediction> classify_batch(const std::uint8_t* pixels, int count, int height,
                                         int width, int channels);

 private:
  std::mutex mutex_;
  std::unique_ptr<Model> model_;
  Preprocessing preprocessing_;
  std::unique_ptr<FusedInference> fused_;
  Tensor input_;  // reused while the batch size stays the same
};

}  // namespace stoke::nn
