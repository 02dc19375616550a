// Optimizer updates: one xsimd sweep over the flat parameter block.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/simd.hpp"
#include "backend/update_scalars.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {
constexpr std::size_t kMinChunk = 1 << 15;
int sweep_chunks(const CpuBackend& be, std::size_t n) {
  return static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(be.chunks()), n / kMinChunk + 1));
}
}  // namespace

void CpuBackend::do_sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity,
                               const SgdParams& requested) {
  const SgdParams p = resolve_on_host(requested);
  float* w = params.data<float>();
  const float* g = grads.data<float>();
  float* v = velocity.data<float>();
  const SimdKernels& k = simd_kernels();
  const std::size_t n = static_cast<std::size_t>(params.numel());
  for_chunks(*this, n, sweep_chunks(*this, n), [&](int, std::size_t b, std::size_t e) {
    k.sgd(w + b, g + b, v + b, e - b, p.lr, p.momentum, p.weight_decay, p.nesterov);
  });
}

void CpuBackend::do_adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                                const AdamParams& requested) {
  const ResolvedAdam resolved = resolve_on_host(requested);
  const AdamParams& p = resolved.params;
  const float bc1 = resolved.bias1, bc2 = resolved.bias2;
  float* w = params.data<float>();
  const float* g = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const SimdKernels& k = simd_kernels();
  const std::size_t n = static_cast<std::size_t>(params.numel());
  for_chunks(*this, n, sweep_chunks(*this, n), [&](int, std::size_t b, std::size_t e) {
    k.adam(w + b, g + b, mp + b, vp + b, e - b, p.lr, p.beta1, p.beta2, p.epsilon, p.weight_decay,
           p.decoupled_weight_decay, bc1, bc2);
  });
}

}  // namespace stoke::cpu
