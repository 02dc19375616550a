// Internal: PatchCore's greedy k-center coreset on a seeded sparse random
// projection (anomalib's KCenterGreedy with SparseRandomProjection(eps=0.9)).
// Every step is deterministic per seed and independent of the thread count:
// rows are projected and their distances updated independently, and the
// farthest row is the largest distance with the lowest index on ties.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stoke/export.hpp"
#include "stoke/threads.hpp"

namespace stoke::anomaly_detail {

// The Johnson-Lindenstrauss dimension for `samples` at eps 0.9 (what
// sklearn's johnson_lindenstrauss_min_dim gives), at most `width`.
STOKE_INTERNAL std::int64_t projection_dim(std::int64_t samples, std::int64_t width) noexcept;

// rows x width -> rows x dim: Achlioptas/Li sparse projection, density
// 1 / sqrt(width), entries +-sqrt(1 / density) / sqrt(dim), drawn from `seed`.
STOKE_INTERNAL std::vector<float> sparse_project(std::span<const float> rows, std::int64_t count,
                                                 std::int64_t width, std::int64_t dim,
                                                 std::uint64_t seed,
                                                 Execution execution = Execution::kParallel);

// Indices of `select` rows chosen greedily (each the row farthest from those
// already chosen), the first drawn from `seed`. requires 1 <= select <= count.
//
// Each row remembers its nearest center so far; a new center c cannot come
// nearer to row r than its current nearest center a when |c - a| >= 2 |r - a|
// (the triangle inequality), so such rows are skipped instead of read. The
// test keeps a margin far above float rounding, so the skipped distances could
// not have lowered any minimum: the indices are those of the exhaustive
// search (`prune` false), bit for bit. `distances`, when given, counts the
// row-to-center distances computed.
struct KCenterOptions {
  Execution execution = Execution::kParallel;
  bool prune = true;
  std::uint64_t* distances = nullptr;
};
STOKE_INTERNAL std::vector<std::int64_t> k_center_greedy(std::span<const float> rows,
                                                         std::int64_t count, std::int64_t width,
                                                         std::int64_t select, std::uint64_t seed,
                                                         KCenterOptions options = {});

// The `keep` grid positions (of `positions`) that image `image` gives the bank
// under PatchCoreOptions::patches_per_image: a partial Fisher-Yates shuffle on
// a splitmix64 stream keyed by (seed, image), ascending. Depends on nothing
// else (not the batch, not the thread count). requires 1 <= keep <= positions.
STOKE_INTERNAL std::vector<std::int64_t> sampled_positions(std::int64_t positions,
                                                           std::int64_t keep, std::uint64_t seed,
                                                           std::uint64_t image);

// Appends to `out` the rows sampled_positions keeps of each of `images`
// consecutive images (each `positions` rows of `width` floats, the first being
// image number `first_image`), in image then position order.
STOKE_INTERNAL void append_sampled_rows(std::span<const float> rows, std::int64_t images,
                                        std::int64_t positions, std::int64_t width,
                                        std::int64_t keep, std::uint64_t first_image,
                                        std::uint64_t seed, std::vector<float>& out);

}  // namespace stoke::anomaly_detail
