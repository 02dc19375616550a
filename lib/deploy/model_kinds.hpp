// Internal: the seam between the Predictor (deploy) and the model kinds
// above it. An anomaly model (lib/anomaly, which depends on deploy) is
// opened by the module that knows it, and handed to the Predictor as an
// AnomalyScorer: deploy calls it only through this interface (virtual
// calls, no symbol of the anomaly module), so the module graph keeps its
// direction. The public Predictor(path, options) constructor is defined in
// lib/anomaly/predictor_open.cpp: it reads the file's kind, opens an anomaly
// model there, and delegates to the private constructor in
// lib/deploy/predictor.cpp, which loads a classifier itself. No registry and
// no static initializer: whatever links the constructor links the opener.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string_view>

#include "stoke/deploy.hpp"

namespace stoke::deploy_detail {

// An opened anomaly model. Called one at a time (the Predictor serializes).
class AnomalyScorer {
 public:
  virtual ~AnomalyScorer() = default;
  virtual AnomalyResult score_file(const std::filesystem::path& path) = 0;
  virtual AnomalyResult score_bytes(std::span<const std::uint8_t> bytes, std::string_view name) = 0;
  virtual AnomalyResult score_pixels(const PixelBuffer& pixels) = 0;
  virtual const nn::ModelSpec& spec() const noexcept = 0;  // the backbone's
};

// What the public constructor hands the private one: an anomaly model with
// what the Predictor reports about it, or nothing (a classifier's file).
struct OpenedModel {
  std::unique_ptr<AnomalyScorer> anomaly;  // null: load the file as a classifier
  // The file is a segmentation model (stoke/segment.hpp), which deploy
  // loads itself (lib/deploy/segmentation_file.cpp).
  bool segmentation = false;
  ModelInfo info;
  AnomalyModelInfo details;
  SelfCheckResult check;
};

// The pixel limit of a Predictor's decoding (PredictorOptions::max_image_pixels).
inline std::uint64_t max_image_pixels(const PredictorOptions& options) {
  return options.max_image_pixels ? *options.max_image_pixels
                                  : options.context.settings().max_image_pixels.value_or(0);
}

}  // namespace stoke::deploy_detail
