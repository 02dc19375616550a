#include "backend/cpu/conv2d_fused.hpp"

#include "backend/cpu/conv2d_dnnl.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

bool conv2d_fused(Backend& backend, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor* residual,
                  Tensor& y, const Conv2dParams& params, bool relu) {
  auto* cpu = dynamic_cast<CpuBackend*>(&backend);
  if (!cpu || !dnnl_conv::enabled()) return false;
  expect_shape("conv2d_fused", "x", x, x.shape());
  expect_shape("conv2d_fused", "w", w, w.shape());
  const Shape ys = conv2d_output_shape(x.shape(), w.shape(), params);
  expect_shape("conv2d_fused", "y", y, ys);
  if (bias.defined()) expect_shape("conv2d_fused", "bias", bias, {w.dim(0)});
  if (residual) {
    expect_shape("conv2d_fused", "residual", *residual, ys);
    if (residual->data<float>() == y.data<float>()) throw InvalidArgument("conv2d_fused: residual aliases y");
  }
  dnnl_conv::forward(*cpu, x, w, bias, y, params, {residual ? residual->data<float>() : nullptr, relu});
  return true;
}

}  // namespace stoke::cpu
