// References of the fused ops: the plain references they fuse, run one after
// the other (obviously the same arithmetic, in double where those are).
#include <algorithm>
#include <vector>

#include "backend/cpu/naive.hpp"
#include "stoke/backend.hpp"

namespace stoke::cpu::naive {

void conv2d_fused_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                          const Tensor& residual, Tensor& y, const Conv2dParams& params,
                          Activation activation) {
  conv2d_forward(x, w, bias, y, params);
  float* yp = y.data<float>();
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    float v = yp[i] + (residual.defined() ? residual.data<float>()[i] : 0.0f);
    yp[i] = activation == Activation::kRelu ? std::max(v, 0.0f) : v;
  }
}

void add_relu(const Tensor& a, const Tensor& b, Tensor& y) {
  for (std::int64_t i = 0; i < a.numel(); ++i)
    y.data<float>()[i] = std::max(a.data<float>()[i] + b.data<float>()[i], 0.0f);
}

void batch_norm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      Tensor& y, Tensor& running_mean, Tensor& running_var,
                                      Tensor& save_mean, Tensor& save_invstd,
                                      const BatchNormParams& params) {
  batch_norm_forward_training(x, gamma, beta, y, running_mean, running_var, save_mean, save_invstd,
                              params);
  relu_forward(y, y);
}

void batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                              const Tensor& gamma, const Tensor& save_mean,
                              const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                              const BatchNormParams& params) {
  // dx holds the masked gradient first: the reference reads all of dy
  // before it writes dx, so a copy keeps it obviously right.
  Tensor masked(cpu_backend(), dy.shape());
  relu_backward(y, dy, masked);
  batch_norm_backward(x, masked, gamma, save_mean, save_invstd, dx, dgamma, dbeta, params);
}

}  // namespace stoke::cpu::naive
