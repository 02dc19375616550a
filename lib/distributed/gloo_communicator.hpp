// The Gloo implementation of stoke::Communicator (lib/distributed/gloo_communicator.cpp),
// built when Debian's libgloo-dev is found; otherwise the stub beside it
// answers Unsupported.
#pragma once

#include <memory>

#include "stoke/distributed.hpp"

namespace stoke::detail {

std::unique_ptr<Communicator> make_gloo_communicator(const DistributedOptions& options);
bool gloo_available() noexcept;

}  // namespace stoke::detail
