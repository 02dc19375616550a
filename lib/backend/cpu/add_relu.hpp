// A residual block's add and ReLU in one pass (nn::Residual's forward on the
// CPU backend): y = max(a + b, 0), the same bits as add then relu_forward.
#pragma once

#include "stoke/backend.hpp"

namespace stoke::cpu {

// Returns false, having done nothing, when `backend` is not a CPU backend;
// the caller then runs add and relu_forward. InvalidArgument unless a, b and
// y are float32 of one shape; y may be a or b (exact aliasing, as add).
STOKE_INTERNAL bool add_relu(Backend& backend, const Tensor& a, const Tensor& b, Tensor& y);

}  // namespace stoke::cpu
