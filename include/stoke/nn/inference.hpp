// Inference for inspection applications on images already at the model's
// input size: nn::Classifier, a thin wrapper over stoke::Predictor
// (stoke/deploy.hpp) for a checkpoint that records only its normalization
// (nn::Preprocessing). The Predictor is the one inference API: it runs a
// model file's whole preprocessing (decode, resize, crop, normalization) on
// any image, through the same inference plan.
//
// Thread safety: as the Predictor's: a Classifier may be shared by threads,
// and concurrent calls run in parallel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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

}  // namespace stoke::nn

namespace stoke {
class Predictor;  // stoke/deploy.hpp
}

namespace stoke::nn {

class STOKE_API Classifier {
 public:
  // Loads the checkpoint onto backend (default: the registry's default
  // backend) as a Predictor with the checkpoint's normalization
  // (Preprocessing::from_metadata; CorruptFile naming the file when it
  // records none or a malformed one).
  explicit Classifier(const std::string& checkpoint_path, Backend* backend = nullptr);
  ~Classifier();

  const ModelSpec& spec() const noexcept;
  const Preprocessing& preprocessing() const noexcept { return preprocessing_; }

  // pixels: height x width x channels, interleaved (HWC), uint8, channels 1
  // or 3 (RGB); the size must be the model's input size (InvalidArgument
  // otherwise; resize upstream, or give the Predictor any size).
  Prediction classify(const std::uint8_t* pixels, int height, int width, int channels);
  // count images of that size back to back.
  std::vector<Prediction> classify_batch(const std::uint8_t* pixels, int count, int height,
                                         int width, int channels);

 private:
  Preprocessing preprocessing_;
  std::unique_ptr<Predictor> predictor_;
};

}  // namespace stoke::nn
