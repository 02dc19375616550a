// The id of a device group (NCCL's ncclUniqueId) travels over the host
// communicator: rank 0 makes it, broadcast_bytes hands it to every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "stoke/distributed.hpp"
#include "stoke/export.hpp"

namespace stoke::detail {

// Every rank calls it at the same point; `make` runs on rank 0 only and must
// return `bytes` bytes (InternalError otherwise, before anything is sent).
// Returns rank 0's id on every rank.
STOKE_INTERNAL std::vector<std::uint8_t> share_group_id(
    Communicator& comm, const std::function<std::vector<std::uint8_t>()>& make, std::size_t bytes);

}  // namespace stoke::detail
