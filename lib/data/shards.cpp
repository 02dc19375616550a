// The sharding policy (stoke/shards.hpp).
#include "stoke/shards.hpp"

#include <algorithm>
#include <string>

#include "stoke/error.hpp"

namespace stoke {

ShardPlan plan_shards(std::size_t samples, std::size_t batch, int world_size) {
  if (batch == 0 || world_size < 1) {
    throw InvalidArgument("plan_shards: batch " + std::to_string(batch) + " and world size " +
                          std::to_string(world_size) + " must be positive");
  }
  const std::size_t global = batch * static_cast<std::size_t>(world_size);
  ShardPlan plan;
  plan.steps = samples / global;
  plan.dropped = samples - plan.steps * global;
  return plan;
}

std::vector<std::size_t> shard_positions(std::size_t samples, std::size_t batch, int rank,
                                         int world_size) {
  const ShardPlan plan = plan_shards(samples, batch, world_size);
  if (rank < 0 || rank >= world_size) {
    throw InvalidArgument("shard_positions: rank " + std::to_string(rank) + " outside a world of " +
                          std::to_string(world_size));
  }
  std::vector<std::size_t> positions;
  positions.reserve(plan.steps * batch);
  const std::size_t global = batch * static_cast<std::size_t>(world_size);
  for (std::size_t step = 0; step < plan.steps; ++step) {
    const std::size_t first = step * global + static_cast<std::size_t>(rank) * batch;
    for (std::size_t i = 0; i < batch; ++i) positions.push_back(first + i);
  }
  return positions;
}

std::vector<std::size_t> cover_positions(std::size_t samples, std::size_t batch, int rank,
                                         int world_size) {
  plan_shards(samples, batch, world_size);  // validates batch and world
  if (rank < 0 || rank >= world_size) {
    throw InvalidArgument("cover_positions: rank " + std::to_string(rank) + " outside a world of " +
                          std::to_string(world_size));
  }
  std::vector<std::size_t> positions;
  const std::size_t stride = batch * static_cast<std::size_t>(world_size);
  for (std::size_t first = static_cast<std::size_t>(rank) * batch; first < samples;
       first += stride) {
    for (std::size_t p = first; p < std::min(samples, first + batch); ++p) positions.push_back(p);
  }
  return positions;
}

}  // namespace stoke
