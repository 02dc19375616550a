// The fused convolution of eval-mode inference (lib/nn/fused_inference.cpp):
// y = relu?(conv(x, w) + bias + residual?) in the convolution's output pass.
#pragma once

#include "stoke/backend.hpp"

namespace stoke::cpu {

// Returns false, having done nothing, when `backend` is not a CPU backend or
// stoke was built without oneDNN; the caller then composes the plain ops.
// InvalidArgument for mismatched shapes. residual: null or y's shape, not y itself.
STOKE_INTERNAL bool conv2d_fused(Backend& backend, const Tensor& x, const Tensor& w,
                                 const Tensor& bias, const Tensor* residual, Tensor& y,
                                 const Conv2dParams& params, bool relu);

}  // namespace stoke::cpu
