// Optimizer updates: one xsimd sweep over the flat parameter block.
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/simd.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {
constexpr std::size_t kMinChunk = 1 << 15;
int sweep_chunks(const CpuBackend& be, std::size_t n) {
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(be.chunks()), n / kMinChunk + 1));
}
}  // namespace

void CpuBackend::sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity, const SgdParams& p) {
  expect_shape("sgd_update", "grads", grads, params.shape());
  expect_shape("sgd_update", "velocity", velocity, params.shape());
  float* w = params.data<float>();
  const float* g = grads.data<float>();
  float* v = velocity.data<float>();
  const SimdKernels& k = simd_kernels();
  const std::size_t n = static_cast<std::size_t>(params.numel());
  for_chunks(*this, n, sweep_chunks(*this, n), [&](int, std::size_t b, std::size_t e) {
    k.sgd(w + b, g + b, v + b, e - b, p.lr, p.momentum, p.weight_decay, p.nesterov);
  });
}

void CpuBackend::adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, const AdamParams& p) {
  expect_shape("adam_update", "grads", grads, params.shape());
  expect_shape("adam_update", "m", m, params.shape());
  expect_shape("adam_update", "v", v, params.shape());
  if (p.step < 1) throw InvalidArgument("adam_update: step is 1-based, got " + std::to_string(p.step));
  float* w = params.data<float>();
  const float* g = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step)));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step)));
  const SimdKernels& k = simd_kernels();
  const std::size_t n = static_cast<std::size_t>(params.numel());
  for_chunks(*this, n, sweep_chunks(*this, n), [&](int, std::size_t b, std::size_t e) {
    k.adam(w + b, g + b, mp + b, vp + b, e - b, p.lr, p.beta1, p.beta2, p.epsilon, p.weight_decay,
           p.decoupled_weight_decay, bc1, bc2);
  });
}

}  // namespace stoke::cpu
