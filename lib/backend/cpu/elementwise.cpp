// ReLU, residual add, gradient accumulation and dropout: xsimd kernels over
// contiguous ranges, split into chunks only when the tensor is large enough
// to pay for the task overhead.
#include <algorithm>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "backend/cpu/simd.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {

constexpr std::size_t kMinChunk = 1 << 15;  // elements; below this one task is cheaper

void sweep(const CpuBackend& be, std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn) {
  const int c = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(be.chunks()), n / kMinChunk + 1));
  for_chunks(be, n, c, [&](int, std::size_t b, std::size_t e) { fn(b, e); });
}

}  // namespace

void CpuBackend::relu_forward(const Tensor& x, Tensor& y) {
  expect_shape("relu_forward", "y", y, x.shape());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(x.numel()), [&](std::size_t b, std::size_t e) { k.relu(xp + b, yp + b, e - b); });
}

void CpuBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  expect_shape("relu_backward", "dy", dy, y.shape());
  expect_shape("relu_backward", "dx", dx, y.shape());
  const float* yp = y.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(y.numel()),
        [&](std::size_t b, std::size_t e) { k.relu_backward(yp + b, dyp + b, dxp + b, e - b); });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  expect_shape("add", "b", b, a.shape());
  expect_shape("add", "y", y, a.shape());
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(a.numel()),
        [&](std::size_t s, std::size_t e) { k.add(ap + s, bp + s, yp + s, e - s); });
}

void CpuBackend::accumulate(Tensor& dx, const Tensor& dy) {
  expect_shape("accumulate", "dy", dy, dx.shape());
  float* dxp = dx.data<float>();
  const float* dyp = dy.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(dx.numel()),
        [&](std::size_t s, std::size_t e) { k.accumulate(dxp + s, dyp + s, e - s); });
}

void CpuBackend::scale(Tensor& x, float alpha) {
  expect_shape("scale", "x", x, x.shape());
  float* xp = x.data<float>();
  sweep(*this, static_cast<std::size_t>(x.numel()), [&](std::size_t s, std::size_t e) {
    for (std::size_t i = s; i < e; ++i) xp[i] *= alpha;
  });
}

void CpuBackend::dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p, std::uint64_t seed) {
  if (!(p >= 0.0f && p < 1.0f)) throw InvalidArgument("dropout_forward: p must be in [0, 1), got " + std::to_string(p));
  expect_shape("dropout_forward", "y", y, x.shape());
  expect_shape("dropout_forward", "mask", mask, x.shape());
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

void CpuBackend::dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) {
  expect_shape("dropout_backward", "mask", mask, dy.shape());
  expect_shape("dropout_backward", "dx", dx, dy.shape());
  const float* dyp = dy.data<float>();
  const float* mp = mask.data<float>();
  float* dxp = dx.data<float>();
  const SimdKernels& k = simd_kernels();
  sweep(*this, static_cast<std::size_t>(dy.numel()),
        [&](std::size_t b, std::size_t e) { k.mul(dyp + b, mp + b, dxp + b, e - b); });
}

}  // namespace stoke::cpu
