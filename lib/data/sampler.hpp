// The class-balanced sampler: an epoch's sample order in which every class
// present is drawn equally often (rare classes repeat, common ones are
// subsampled), the same length as the dataset. Deterministic in (seed, epoch)
// and computed serially, so it does not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stoke/data.hpp"

namespace stoke::data_detail {

std::vector<std::size_t> balanced_order(const Dataset& dataset, std::uint64_t seed,
                                        std::uint64_t epoch);

}  // namespace stoke::data_detail
