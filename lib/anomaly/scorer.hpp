// Internal: what an anomaly method fitted and how it scores one image's patch
// grid. PatchCore's memory bank with its nearest-neighbour search and PaDiM's
// per-position Gaussians sit behind this one interface; the feature
// extraction, tiling, thresholds and the model file around them are shared.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "anomaly/knn.hpp"
#include "anomaly/padim.hpp"
#include "stoke/anomaly.hpp"

namespace stoke::anomaly_detail {

class STOKE_INTERNAL PatchScorer {
 public:
  virtual ~PatchScorer() = default;
  // The embedding width it scores (embed()'s width).
  virtual std::int64_t width() const noexcept = 0;
  // One image's embeddings (count 1) -> its score and its map at
  // height x width, smoothed by the Gaussian blur of `sigma`. `anomalous` is
  // left to the caller (the threshold).
  virtual anomaly::AnomalyResult score(const anomaly::Embeddings& e, int height, int width,
                                       float sigma) const = 0;
};

// PatchCore: the (coreset) bank, exact nearest distances; the image score is
// anomalib's re-weighted maximum, the map the distances resized by nearest
// neighbour, then blurred.
class STOKE_INTERNAL BankScorer final : public PatchScorer {
 public:
  BankScorer(Backend& backend, std::vector<float> bank, std::int64_t rows, std::int64_t width,
             int num_neighbors);
  std::int64_t width() const noexcept override { return width_; }
  anomaly::AnomalyResult score(const anomaly::Embeddings& e, int height, int width,
                               float sigma) const override;
  const std::vector<float>& bank() const noexcept { return bank_; }
  std::int64_t rows() const noexcept { return rows_; }

 private:
  std::vector<float> bank_;
  std::int64_t rows_, width_;
  int num_neighbors_;
  BankSearch search_;
};

// PaDiM: the Mahalanobis distance at each grid position, the map resized
// bilinearly (align_corners false), then blurred; the image score is the
// map's maximum (anomalib's PadimModel).
class STOKE_INTERNAL GaussianScorer final : public PatchScorer {
 public:
  explicit GaussianScorer(Gaussians gaussians);
  std::int64_t width() const noexcept override { return gaussians_.features; }
  anomaly::AnomalyResult score(const anomaly::Embeddings& e, int height, int width,
                               float sigma) const override;
  const Gaussians& gaussians() const noexcept { return gaussians_; }

 private:
  Gaussians gaussians_;
};

}  // namespace stoke::anomaly_detail
