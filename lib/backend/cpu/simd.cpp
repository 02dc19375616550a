// Choice of the elementwise kernel table for a SIMD level.
#include "backend/cpu/simd.hpp"

namespace stoke::cpu {

const SimdKernels& simd_kernels(SimdLevel level) noexcept {
  return level >= SimdLevel::kAvx2 ? simd_kernels_avx2() : simd_kernels_sse2();
}

}  // namespace stoke::cpu
