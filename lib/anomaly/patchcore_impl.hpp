// Internal: an anomaly model's state (the public class's Impl), shared by the
// fitting and scoring (patchcore.cpp) and the model file (model_file.cpp).
#pragma once

#include <limits>
#include <memory>
#include <optional>

#include "anomaly/features.hpp"
#include "anomaly/knn.hpp"
#include "anomaly/scorer.hpp"
#include "data/tiles.hpp"
#include "deploy/preprocess.hpp"
#include "stoke/anomaly.hpp"

namespace stoke::anomaly_detail {

// The image score from its patch distances (anomalib's compute_anomaly_score):
// s* the largest nearest distance, m* the bank row nearest to that patch;
// with k = min(num_neighbors, bank rows) > 1 the support set is m*'s k
// nearest bank rows, and the score is (1 - softmax(distances from the patch
// to the support set))[0] x s*.
STOKE_INTERNAL float image_score(const Neighbours& nearest, std::span<const float> patches,
                                 std::span<const float> bank, std::int64_t width,
                                 const BankSearch& search, int num_neighbors);

}  // namespace stoke::anomaly_detail

namespace stoke::anomaly {

// Hidden: as a member of an exported class it would otherwise be exported.
struct __attribute__((visibility("hidden"))) PatchCore::Impl {
  std::unique_ptr<nn::Model> model;
  PreprocessOptions preprocess;
  PatchCoreOptions options;
  // What was fitted (null before fit): one of the two below, which own it.
  anomaly_detail::PatchScorer* scorer = nullptr;
  std::unique_ptr<anomaly_detail::BankScorer> bank;           // PatchCore
  std::unique_ptr<anomaly_detail::GaussianScorer> gaussians;  // PaDiM
  std::vector<std::int64_t> channels;  // PaDiM's subset; empty until the first embedding
  float threshold = std::numeric_limits<float>::infinity();
  // calibrate()'s: the map value a defect pixel exceeds, and the validation
  // scores' range (NaN: not stored, files written before them).
  float pixel_threshold = std::numeric_limits<float>::quiet_NaN();
  float score_min = std::numeric_limits<float>::quiet_NaN();
  float score_max = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> reference_input;  // (C, H, W); empty: no self-check
  float reference_score = 0.0f;
  std::unique_ptr<anomaly_detail::FeatureExtractor> extractor;
  std::unique_ptr<deploy_detail::SamplePreprocessor> reader;
  std::unique_ptr<data_detail::TileReader> tiles;  // with options.tile
  Precision precision = Precision::kFp32;          // the feature extraction's

  Impl(std::unique_ptr<nn::Model> m, PreprocessOptions p, PatchCoreOptions o);
  // The backbone inputs of `file` into `out`: its image, or its tiles; returns their count.
  std::int64_t inputs_of(const std::filesystem::path& file, std::vector<float>& out,
                         data_detail::TileGrid* grid = nullptr);
  // A tiled image's result from its tiles' inputs (grid.origins.size() samples).
  AnomalyResult score_tiles(PatchCore& core, const data_detail::TileGrid& grid,
                            std::span<const float> inputs);
  anomaly_detail::FeatureExtractor& features();
  // The decision and what comes with it: anomalous, the normalized score,
  // the defect pixels.
  void decide(AnomalyResult& r) const;
  void set_bank(std::vector<float> rows, std::int64_t count, std::int64_t width);
  void set_gaussians(anomaly_detail::Gaussians g);
};

}  // namespace stoke::anomaly
