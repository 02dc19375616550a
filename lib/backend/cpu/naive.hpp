// Naive loop references for every op: obviously right, slow, single
// threaded, accumulating in double. The op suite (tests/unit/op_suite_*)
// compares every backend against these. Same contracts as the Backend
// methods of the same name; like the backends' implementations they take
// arguments the front door has validated (host tensors) and check nothing.
#pragma once

#include <cstdint>

#include "stoke/backend.hpp"
#include "stoke/export.hpp"

namespace stoke::cpu {

// Counter-based uniform in [0, 1) of (seed, index): splitmix64, top 24 bits.
STOKE_INTERNAL float dropout_uniform(std::uint64_t seed, std::uint64_t index) noexcept;

namespace naive {

STOKE_INTERNAL void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   Tensor& y, const Conv2dParams& params);
STOKE_INTERNAL void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy,
                                    Tensor& dx, Tensor& dw, Tensor& db,
                                    const Conv2dParams& params);
STOKE_INTERNAL void batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                                const Tensor& beta, Tensor& y,
                                                Tensor& running_mean, Tensor& running_var,
                                                Tensor& save_mean, Tensor& save_invstd,
                                                const BatchNormParams& params);
STOKE_INTERNAL void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                                 const Tensor& beta, const Tensor& running_mean,
                                                 const Tensor& running_var, Tensor& y,
                                                 const BatchNormParams& params);
STOKE_INTERNAL void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                        const Tensor& save_mean, const Tensor& save_invstd,
                                        Tensor& dx, Tensor& dgamma, Tensor& dbeta);
STOKE_INTERNAL void relu_forward(const Tensor& x, Tensor& y);
STOKE_INTERNAL void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx);
STOKE_INTERNAL void max_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params);
STOKE_INTERNAL void max_pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                        Tensor& dx, const Pool2dParams& params);
STOKE_INTERNAL void avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params);
STOKE_INTERNAL void avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dParams& params);
STOKE_INTERNAL void global_avg_pool_forward(const Tensor& x, Tensor& y);
STOKE_INTERNAL void global_avg_pool_backward(const Tensor& dy, Tensor& dx);
STOKE_INTERNAL void add(const Tensor& a, const Tensor& b, Tensor& y);
STOKE_INTERNAL void accumulate(Tensor& dx, const Tensor& dy);
STOKE_INTERNAL void linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   Tensor& y);
STOKE_INTERNAL void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy,
                                    Tensor& dx, Tensor& dw, Tensor& db);
STOKE_INTERNAL void softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                                  Tensor& probs, Tensor& loss, Tensor& correct);
STOKE_INTERNAL void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                                   Tensor& dlogits);
STOKE_INTERNAL void dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p,
                                    std::uint64_t seed);
STOKE_INTERNAL void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx);
STOKE_INTERNAL void sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity,
                               const SgdParams& p);
STOKE_INTERNAL void adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                                const AdamParams& p);

}  // namespace naive
}  // namespace stoke::cpu
