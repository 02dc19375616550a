// Internal: a torchvision backbone's layer outputs through the inference
// plan, combined into patch embeddings: PatchCore's (layer2 and layer3
// pooled) or PaDiM's (layer1, layer2 and layer3 as they are).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nn/fused_inference.hpp"
#include "stoke/anomaly.hpp"

namespace stoke::anomaly_detail {

class STOKE_INTERNAL FeatureExtractor {
 public:
  // InvalidArgument unless the model is a torchvision ResNet (layer1..layer3
  // among its top-level layers). The model must outlive the extractor.
  // precision: resolved (stoke::resolve_precision), one the backend runs.
  explicit FeatureExtractor(nn::Model& model, Precision precision = Precision::kFp32,
                            anomaly::AnomalyMethod method = anomaly::AnomalyMethod::kPatchCore);
  ~FeatureExtractor();

  // inputs (count, C, H, W) -> embeddings. PatchCore: AvgPool2d(3, 1, 1)
  // (padding counted) of layer2 and layer3, layer3 bilinearly resized to
  // layer2's grid (align_corners false), concatenated on channels. PaDiM:
  // layer1, then layer2 and layer3 resized to layer1's grid by nearest
  // neighbour, concatenated on channels: the whole width, or only
  // `channels` of it (ascending; InvalidArgument otherwise), gathered
  // directly. PatchCore ignores `channels`.
  anomaly::Embeddings embed(std::span<const float> inputs, std::int64_t count,
                            std::span<const std::int64_t> channels = {});

 private:
  anomaly::Embeddings embed_padim(const Tensor& x, std::int64_t count,
                                  std::span<const std::int64_t> channels);
  nn::Model* model_;
  anomaly::AnomalyMethod method_;
  // Programs of the same plan over spans of the top-level layers: PatchCore
  // stem..layer2 then layer3; PaDiM stem..layer1, layer2, layer3.
  std::vector<std::unique_ptr<nn::FusedInference>> stages_;
};

}  // namespace stoke::anomaly_detail
