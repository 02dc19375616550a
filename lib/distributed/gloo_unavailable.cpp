// Built instead of gloo_communicator.cpp when Gloo is not found.
#include "distributed/gloo_communicator.hpp"

namespace stoke::detail {

std::unique_ptr<Communicator> make_gloo_communicator(const DistributedOptions& options) {
  throw Unsupported(
      "data-parallel training over " + std::to_string(options.world_size) +
      " ranks needs Gloo, and this build of stoke has none: install Debian's libgloo-dev and "
      "rebuild (see docs/distributed.md)");
}

bool gloo_available() noexcept {
  return false;
}

}  // namespace stoke::detail
