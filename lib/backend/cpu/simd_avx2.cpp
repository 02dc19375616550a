// AVX2 + FMA kernels; this file alone is compiled with -mavx2 -mfma
// (lib/backend/module.cmake) and only called when the CPU has AVX2.
#include "backend/cpu/simd_kernels.hpp"

namespace stoke::cpu {
const SimdKernels& simd_kernels_avx2() noexcept {
  return simd_impl::Kernels<xsimd::fma3<xsimd::avx2>>::table("avx2");
}
}  // namespace stoke::cpu
