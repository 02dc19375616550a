// Baseline x86-64 kernels (SSE2 is part of the ABI, so no flags are needed).
#include "backend/cpu/simd_kernels.hpp"

namespace stoke::cpu {
const SimdKernels& simd_kernels_sse2() noexcept {
  return simd_impl::Kernels<xsimd::sse2>::table("sse2");
}
}  // namespace stoke::cpu
