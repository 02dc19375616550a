#include "backend/cpu/conv2d_fused.hpp"

#include "backend/cpu/conv2d_dnnl.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "backend/op_check.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

bool conv2d_fused(Backend& backend, const Tensor& x, const Tensor& w, const Tensor& bias,
                  const Tensor* residual, Tensor& y, const Conv2dParams& params, bool relu) {
  auto* cpu = dynamic_cast<CpuBackend*>(&backend);
  if (!cpu || !dnnl_conv::enabled()) return false;
  // The checks of the conv2d_forward front door, plus the residual's.
  detail::OpCheck check(backend, Op::kConv2dForward);
  check.supported("x", x);
  check.rank("x", x, 4).rank("w", w, 4);
  const Shape ys = conv2d_output_shape(x.shape(), w.shape(), params);
  check.input("x", x, x.shape()).input("w", w, w.shape()).optional_input("bias", bias, {w.dim(0)});
  if (residual) check.input("residual", *residual, ys);
  check.output("y", y, ys).done();
  dnnl_conv::forward(*cpu, x, w, bias, y, params,
                     {residual ? residual->data<float>() : nullptr, relu});
  return true;
}

}  // namespace stoke::cpu
