// The fused ops' front doors (stoke/backend.hpp, "fused ops"): checked once
// here for every backend, as the plain ops are in ops.cpp.
#include "backend/op_check.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"

namespace stoke {

using detail::Aliasing;
using detail::checked_conv_output;
using detail::OpCheck;

void Backend::conv2d_fused_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   const Tensor& residual, Tensor& y, const Conv2dParams& params,
                                   Activation activation) {
  OpCheck check(*this, Op::kConv2dFusedForward);
  check.supported("x", x);
  const Shape ys = checked_conv_output(check, x, w, params);
  check.input("x", x, x.shape()).input("w", w, w.shape()).optional_input("bias", bias, {w.dim(0)});
  check.optional_input("residual", residual, ys);
  check.require(activation == Activation::kIdentity || activation == Activation::kRelu,
                "unknown activation " + std::to_string(static_cast<int>(activation)));
  check.output("y", y, ys).done();
  do_conv2d_fused_forward(x, w, bias, residual, y, params, activation);
}

void Backend::add_relu(const Tensor& a, const Tensor& b, Tensor& y) {
  OpCheck check(*this, Op::kAddRelu, Aliasing::kExactAllowed);
  check.supported("a", a).input("a", a, a.shape()).input("b", b, a.shape());
  check.output("y", y, a.shape()).done();
  do_add_relu(a, b, y);
}

void Backend::batch_norm_relu_forward_training(const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, Tensor& y, Tensor& running_mean,
                                               Tensor& running_var, Tensor& save_mean,
                                               Tensor& save_invstd, const BatchNormParams& params) {
  OpCheck check(*this, Op::kBatchNormReluForwardTraining);
  detail::check_batch_norm_training(check, x, gamma, beta, y, running_mean, running_var, save_mean,
                                    save_invstd, params);
  do_batch_norm_relu_forward_training(x, gamma, beta, y, running_mean, running_var, save_mean,
                                      save_invstd, params);
}

void Backend::batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                       const Tensor& gamma, const Tensor& save_mean,
                                       const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                       Tensor& dbeta, const BatchNormParams& params) {
  OpCheck check(*this, Op::kBatchNormReluBackward);
  check.supported("x", x).rank("x", x, 4);
  const Shape c{x.dim(1)};
  check.input("x", x, x.shape()).input("y", y, x.shape()).input("dy", dy, x.shape());
  check.input("gamma", gamma, c).input("save_mean", save_mean, c);
  check.input("save_invstd", save_invstd, c);
  check.output("dx", dx, x.shape()).output("dgamma", dgamma, c).output("dbeta", dbeta, c);
  check.require(params.epsilon > 0.0f, "epsilon must be > 0").done();
  do_batch_norm_relu_backward(x, y, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, params);
}

}  // namespace stoke
