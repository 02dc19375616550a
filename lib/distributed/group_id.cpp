#include "distributed/group_id.hpp"

#include <string>

namespace stoke::detail {

std::vector<std::uint8_t> share_group_id(Communicator& comm,
                                         const std::function<std::vector<std::uint8_t>()>& make,
                                         std::size_t bytes) {
  std::vector<std::uint8_t> id(bytes);
  if (comm.rank() == 0) {
    id = make();
    if (id.size() != bytes) {
      throw Error(ErrorCode::kInternal, "device group id: rank 0 made " +
                                            std::to_string(id.size()) + " bytes, expected " +
                                            std::to_string(bytes));
    }
  }
  comm.broadcast_bytes(id, 0);
  return id;
}

}  // namespace stoke::detail
