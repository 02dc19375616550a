// Internal: exact nearest-neighbour search against a memory bank as chunked
// GEMM on the backend: |q - b|^2 = |q|^2 + |b|^2 - 2 q.b, the product and the
// bank's norms through linear_forward (y = q (-2 B)^T + |b|^2), the smallest
// y per query kept on the host (|q|^2 is the same for all its rows).
// Distances are Euclidean (the square root of the clamped square), as
// anomalib's euclidean_dist; the k found per query are then measured again
// directly (in double, from a host copy of the bank), so the distances
// returned carry no cancellation error of the GEMM form, which at large
// feature norms (Wide-ResNet: distances ~100) reaches 1e-5 relative.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stoke/backend.hpp"

namespace stoke::anomaly_detail {

// |a - b| over `width` floats, accumulated in double.
STOKE_INTERNAL double euclidean_distance(const float* a, const float* b,
                                         std::int64_t width) noexcept;

struct Neighbours {
  std::int64_t k = 0;
  std::vector<float> distances;       // queries x k, nearest first
  std::vector<std::int64_t> indices;  // the bank rows; ties: the lower row
};

class STOKE_INTERNAL BankSearch {
 public:
  // bank: rows x width floats, copied to the backend. chunk_bytes bounds the
  // distance block each GEMM writes. InvalidArgument for an empty bank.
  BankSearch(Backend& backend, std::span<const float> bank, std::int64_t rows, std::int64_t width,
             std::size_t chunk_bytes = std::size_t{32} << 20);

  // The k nearest bank rows of each of `count` query rows (k <= rows).
  Neighbours nearest(std::span<const float> queries, std::int64_t count, std::int64_t k) const;

  std::int64_t rows() const noexcept { return rows_; }

 private:
  // The distances of `out` measured again directly, each query's k re-sorted.
  void refine(std::span<const float> queries, Neighbours& out) const;
  Backend* backend_;
  std::int64_t rows_, width_;
  std::vector<float> bank_;          // rows x width, for the exact distances
  Tensor minus2_bank_, bank_norms_;  // (rows, width), (rows)
  std::size_t chunk_bytes_;
};

// The plain reference: every distance computed directly, in double.
STOKE_INTERNAL Neighbours nearest_brute_force(std::span<const float> bank, std::int64_t rows,
                                              std::int64_t width, std::span<const float> queries,
                                              std::int64_t count, std::int64_t k);

}  // namespace stoke::anomaly_detail
