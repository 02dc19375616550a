// Internal: PaDiM's parts (anomalib's PadimModel and MultiVariateGaussian):
// the seeded channel subset, the per-position Gaussians fitted from training
// embeddings, and the Mahalanobis distance of an image's patches to them.
// Each grid position is computed on its own, serially, so the results are the
// same bits for any thread count and for the serial path.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stoke/anomaly.hpp"
#include "stoke/threads.hpp"

namespace stoke::anomaly_detail {

struct Gaussians {
  std::int64_t grid_h = 0, grid_w = 0, features = 0;
  std::vector<float> mean;  // positions x features
  // Each position's inverse covariance, symmetric, by its upper triangle:
  // row a's entries a..features-1, row after row (packed() floats), half the
  // matrix and read by mahalanobis() in one stream.
  std::vector<float> inv_upper;
  std::int64_t positions() const noexcept { return grid_h * grid_w; }
  std::int64_t packed() const noexcept { return features * (features + 1) / 2; }
};

// g's inverse covariances whole (positions x features x features, both
// halves), as the model file and the ONNX graph carry them.
STOKE_INTERNAL std::vector<float> full_inverse(const Gaussians& g);

// The upper triangles of `full` (positions x features x features) into
// g.inv_upper; -1, or the first position whose matrix is not symmetric
// (bit for bit), g.inv_upper then unchanged. requires full's size.
STOKE_INTERNAL std::int64_t pack_inverse(std::span<const float> full, Gaussians& g);

// `kept` distinct channels of `full_width`, drawn from `seed` (a partial
// Fisher-Yates shuffle on splitmix64), ascending. requires 1 <= kept <= full_width.
STOKE_INTERNAL std::vector<std::int64_t> padim_channels(std::int64_t full_width, std::int64_t kept,
                                                        std::uint64_t seed);

// e's rows reduced to `channels` (ascending, each < e.width; InvalidArgument otherwise).
STOKE_INTERNAL void select_channels(anomaly::Embeddings& e, std::span<const std::int64_t> channels);

// anomalib 2.7's diagonal floor: MultiVariateGaussian adds 0.01 I to each
// covariance, then 1e-5 I more ("stabilized_covariance") before inverting.
inline constexpr double kPadimCovarianceFloor = 0.01 + 1e-5;

// Per grid position over the e.count images: the mean and the inverse of
// cov = (X - mean)^T (X - mean) / (count - 1) + (0.01 + 1e-5) I, computed in double
// (the inverse through the Cholesky factor) and stored as float, its upper
// triangle.
// InvalidArgument for fewer than 2 images or a non-finite embedding.
STOKE_INTERNAL Gaussians fit_gaussians(const anomaly::Embeddings& e,
                                       Execution execution = Execution::kParallel);

// One image's distances: rows (positions x features, embed()'s order) ->
// per position sqrt(max(0, (x - mean)^T inv (x - mean))): x - mean in float
// (as anomalib), each row of the upper triangle's products summed in float
// over 8 lanes, the rows' terms in double.
STOKE_INTERNAL std::vector<float> mahalanobis(const Gaussians& g, std::span<const float> rows,
                                              Execution execution = Execution::kParallel);

}  // namespace stoke::anomaly_detail
