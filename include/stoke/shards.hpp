// How an epoch's samples are split between the ranks of a data-parallel run:
// index arithmetic the Loader runs (stoke/data.hpp) and the trainer's
// data-parallel setup (stoke/distributed.hpp) reports.
#pragma once

#include <cstddef>
#include <vector>

#include "stoke/export.hpp"

namespace stoke {

// The sharding policy. An epoch's order (already shuffled by the seed, the
// same on every rank) is cut into global steps of world_size * batch
// samples; rank r takes the r-th batch of every global step. Every rank
// therefore runs the same number of steps, and the run equals one process
// accumulating world_size batches per step in rank order. The samples past
// the last whole global step (fewer than world_size * batch) are left out of
// that epoch; the shuffle changes them from epoch to epoch.
struct ShardPlan {
  std::size_t steps = 0;    // batches (= optimizer steps) per rank
  std::size_t dropped = 0;  // samples of the epoch no rank sees
};
STOKE_API ShardPlan plan_shards(std::size_t samples, std::size_t batch, int world_size);
// Positions into the epoch's order that rank `rank` visits, in order.
STOKE_API std::vector<std::size_t> shard_positions(std::size_t samples, std::size_t batch, int rank,
                                                   int world_size);
// Validation's policy, which sees every sample once: rank r takes batches r,
// r + world_size, r + 2 world_size, ... of the order cut into batches (the
// short last one included), so ranks may differ by a batch; their metrics
// are summed, not averaged.
STOKE_API std::vector<std::size_t> cover_positions(std::size_t samples, std::size_t batch, int rank,
                                                   int world_size);

}  // namespace stoke
