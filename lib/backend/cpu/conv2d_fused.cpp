// The fused convolution (Backend::conv2d_fused_forward) on the CPU: with
// oneDNN, bias, residual and ReLU are post-ops of the convolution's own
// output pass; without it, the im2col convolution and one elementwise pass.
#include "backend/cpu/conv2d_dnnl.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace stoke::cpu {

void CpuBackend::do_conv2d_fused_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                         const Tensor& residual, Tensor& y,
                                         const Conv2dParams& params, Activation activation) {
  const bool relu = activation == Activation::kRelu;
  if (dnnl_convolutions()) {
    return dnnl_conv::forward(*this, x, w, bias, y, params,
                              {residual.defined() ? residual.data<float>() : nullptr, relu});
  }
  do_conv2d_forward(x, w, bias, y, params);
  if (residual.defined() && relu) return do_add_relu(y, residual, y);
  if (residual.defined()) return do_add(y, residual, y);
  if (relu) do_relu_forward(y, y);
}

}  // namespace stoke::cpu
