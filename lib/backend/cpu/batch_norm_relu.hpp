// Training batch norm with the following ReLU folded in (lib/nn's Sequential
// runs BatchNorm2d + Relu through these on the CPU backend): the forward
// writes max(BN(x), 0) in the normalization pass, the backward masks dy to
// y > 0 inside batch norm's own passes, so neither ReLU pass runs.
#pragma once

#include "stoke/backend.hpp"

namespace stoke::cpu {

// Whether the two functions below run on `backend` (a CPU backend).
STOKE_INTERNAL bool batch_norm_relu_available(const Backend& backend) noexcept;

// Returns false, having done nothing, when `backend` is not a CPU backend;
// the caller then runs batch_norm_forward_training and relu_forward.
// requires: x (N, C, H, W); y as x; gamma, beta and the four statistics (C).
STOKE_INTERNAL bool batch_norm_relu_forward_training(Backend& backend, const Tensor& x,
                                                     const Tensor& gamma, const Tensor& beta,
                                                     Tensor& y, Tensor& running_mean,
                                                     Tensor& running_var, Tensor& save_mean,
                                                     Tensor& save_invstd,
                                                     const BatchNormParams& params);

// dx, dgamma and dbeta of batch norm for dy, the gradient at the ReLU's
// output y (the forward's). False, nothing done, when not a CPU backend.
STOKE_INTERNAL bool batch_norm_relu_backward(Backend& backend, const Tensor& x, const Tensor& y,
                                             const Tensor& dy, const Tensor& gamma,
                                             const Tensor& save_mean, const Tensor& save_invstd,
                                             Tensor& dx, Tensor& dgamma, Tensor& dbeta);

}  // namespace stoke::cpu
