// Elementwise kernels, compiled once per instruction set (simd_sse2.cpp,
// simd_avx2.cpp with -mavx2 -mfma) from the xsimd templates in
// simd_kernels.hpp and chosen per CpuBackend from its Context's SIMD level.
// The library itself never needs -march=native.
#pragma once

#include <cstddef>

#include "stoke/export.hpp"
#include "stoke/system.hpp"

namespace stoke::cpu {

struct SimdKernels {
  const char* name;
  void (*relu)(const float* x, float* y, std::size_t n);
  void (*relu_backward)(const float* y, const float* dy, float* dx, std::size_t n);
  void (*add)(const float* a, const float* b, float* y, std::size_t n);
  void (*accumulate)(float* dx, const float* dy, std::size_t n);
  void (*mul)(const float* a, const float* b, float* y, std::size_t n);
  // y = x * scale + shift
  void (*scale_shift)(const float* x, float* y, std::size_t n, float scale, float shift);
  void (*sgd)(float* w, const float* g, float* v, std::size_t n, float lr, float momentum,
              float weight_decay, bool nesterov);
  // bias_correction1/2 = 1 - beta^step
  void (*adam)(float* w, const float* g, float* m, float* v, std::size_t n, float lr, float beta1,
               float beta2, float epsilon, float weight_decay, bool decoupled,
               float bias_correction1, float bias_correction2);
  // Batch norm (batch_norm.cpp): plane sums, y = max(x * scale + shift, 0),
  // and the backward's sums and pass, dy masked to relu_y > 0 where relu_y
  // is not null (a following ReLU's backward folded in).
  float (*sum)(const float* x, std::size_t n);
  float (*centered_squares)(const float* x, std::size_t n, float mean);
  void (*scale_shift_relu)(const float* x, float* y, std::size_t n, float scale, float shift);
  void (*bn_backward_sums)(const float* x, const float* dy, const float* relu_y, std::size_t n,
                           float mean, float* sums);
  void (*bn_backward_apply)(const float* x, const float* dy, const float* relu_y, float* dx,
                            std::size_t n, float mean, float a, float b, float cst);
  // y = max(a + b, 0) (a residual block's add and ReLU, add_relu.hpp)
  void (*add_relu)(const float* a, const float* b, float* y, std::size_t n);
};

STOKE_INTERNAL const SimdKernels& simd_kernels_sse2() noexcept;
STOKE_INTERNAL const SimdKernels& simd_kernels_avx2() noexcept;
// The table for `level` (a level resolved against the CPU: avx2 and above
// take the AVX2 table, below it the SSE2 baseline). A CpuBackend holds the
// one its Context chose.
STOKE_INTERNAL const SimdKernels& simd_kernels(SimdLevel level) noexcept;

}  // namespace stoke::cpu
