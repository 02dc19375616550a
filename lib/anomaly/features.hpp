// Internal: a torchvision backbone's layer2 and layer3 outputs through the
// inference plan, pooled and concatenated into PatchCore's patch embeddings.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "nn/fused_inference.hpp"
#include "stoke/anomaly.hpp"

namespace stoke::anomaly_detail {

class STOKE_INTERNAL FeatureExtractor {
 public:
  // InvalidArgument unless the model is a torchvision ResNet (layer2, layer3
  // among its top-level layers). The model must outlive the extractor.
  // precision: resolved (stoke::resolve_precision), one the backend runs.
  explicit FeatureExtractor(nn::Model& model, Precision precision = Precision::kFp32);
  ~FeatureExtractor();

  // inputs (count, C, H, W) -> embeddings: AvgPool2d(3, 1, 1) (padding
  // counted) of layer2 and layer3, layer3 bilinearly resized to layer2's grid
  // (align_corners false), concatenated on channels.
  anomaly::Embeddings embed(std::span<const float> inputs, std::int64_t count);

 private:
  nn::Model* model_;
  // stem .. layer2, then layer3: two programs of the same plan.
  std::unique_ptr<nn::FusedInference> to_layer2_, layer3_;
};

}  // namespace stoke::anomaly_detail
