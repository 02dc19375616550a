// Run-time choice of the elementwise kernel table.
#include "backend/cpu/simd.hpp"

#include "stoke/config.hpp"

namespace stoke::cpu {

const SimdKernels& simd_kernels() noexcept {
  static const SimdKernels& chosen = []() -> const SimdKernels& {
    SimdLevel level = SimdLevel::kScalar;
    try {
      level = resolve_simd(Config::load().settings(), query_cpu());
    } catch (...) {
      // A bad STOKE_* value is reported where the configuration is loaded;
      // the kernels fall back to the baseline rather than fail here.
      level = SimdLevel::kScalar;
    }
    return level >= SimdLevel::kAvx2 ? simd_kernels_avx2() : simd_kernels_sse2();
  }();
  return chosen;
}

}  // namespace stoke::cpu
