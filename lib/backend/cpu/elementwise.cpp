// ReLU, residual add, gradient accumulation, dropout and the finite check:
// xsimd kernels (or loops the compiler vectorizes) over contiguous ranges,
// split into chunks only when the tensor is large enough to pay for the task
// overhead.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "backend/cpu/simd.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {

constexpr std::size_t kMinChunk = 1 << 15;  // elements; below this one task is cheaper

void sweep(const CpuBackend& be, std::size_t n,
           const std::function<void(std::size_t, std::size_t)>& fn) {
  const int c = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(be.chunks()), n / kMinChunk + 1));
  for_chunks(be, n, c, [&](int, std::size_t b, std::size_t e) { fn(b, e); });
}

}  // namespace

void CpuBackend::do_relu_forward(const Tensor& x, Tensor& y) {
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(x.numel()),
        [&](std::size_t b, std::size_t e) { k.relu(xp + b, yp + b, e - b); });
}

void CpuBackend::do_relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  const float* yp = y.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(y.numel()),
        [&](std::size_t b, std::size_t e) { k.relu_backward(yp + b, dyp + b, dxp + b, e - b); });
}

void CpuBackend::do_add(const Tensor& a, const Tensor& b, Tensor& y) {
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(a.numel()),
        [&](std::size_t s, std::size_t e) { k.add(ap + s, bp + s, yp + s, e - s); });
}

void CpuBackend::do_add_relu(const Tensor& a, const Tensor& b, Tensor& y) {
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(a.numel()),
        [&](std::size_t s, std::size_t e) { k.add_relu(ap + s, bp + s, yp + s, e - s); });
}

void CpuBackend::do_accumulate(Tensor& dx, const Tensor& dy) {
  float* dxp = dx.data<float>();
  const float* dyp = dy.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(dx.numel()),
        [&](std::size_t s, std::size_t e) { k.accumulate(dxp + s, dyp + s, e - s); });
}

void CpuBackend::do_scale(Tensor& x, float alpha) {
  float* xp = x.data<float>();
  sweep(*this, static_cast<std::size_t>(x.numel()), [&](std::size_t s, std::size_t e) {
    for (std::size_t i = s; i < e; ++i) xp[i] *= alpha;
  });
}

// A float is NaN or infinite exactly when its exponent bits are all ones:
// (bits & 0x7f800000) + 0x00800000 then carries into the sign bit. Integer
// ORs over the chunk, no branch (a loop the compiler can vectorize).
void CpuBackend::do_all_finite(const Tensor& x, Tensor& flag) {
  const float* xp = x.data<float>();
  const auto n = static_cast<std::size_t>(x.numel());
  const int c = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(chunks()), n / kMinChunk + 1));
  std::vector<std::uint32_t> bad(static_cast<std::size_t>(c), 0u);
  for_chunks(*this, n, c, [&](int chunk, std::size_t b, std::size_t e) {
    std::uint32_t acc = 0;
    for (std::size_t i = b; i < e; ++i)
      acc |= (std::bit_cast<std::uint32_t>(xp[i]) & 0x7f800000u) + 0x00800000u;
    bad[static_cast<std::size_t>(chunk)] = acc & 0x80000000u;
  });
  std::uint32_t any = 0;
  for (std::uint32_t v : bad) any |= v;
  flag.data<float>()[0] = any ? 0.0f : 1.0f;
}

void CpuBackend::do_dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p,
                                    std::uint64_t seed) {
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  float* mp = mask.data<float>();
  const float keep_scale = 1.0f / (1.0f - p);
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(x.numel()), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) mp[i] = dropout_uniform(seed, i) >= p ? keep_scale : 0.0f;
    k.mul(xp + b, mp + b, yp + b, e - b);
  });
}

void CpuBackend::do_dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) {
  const float* dyp = dy.data<float>();
  const float* mp = mask.data<float>();
  float* dxp = dx.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(dy.numel()),
        [&](std::size_t b, std::size_t e) { k.mul(dyp + b, mp + b, dxp + b, e - b); });
}

}  // namespace stoke::cpu
