// Run-time choice of the row-kernel table (the scalar IEEE half / bfloat16
// conversions the tables share are in core/float16.hpp).
#include "image/kernels.hpp"

#include <cstring>

namespace stoke::image_detail {

const RowKernels& row_kernels(SimdLevel level) {
  // Never run a table above what the CPU executes, whatever was asked.
  static const SimdLevel cpu_level = query_cpu().simd;
  if (static_cast<int>(level) > static_cast<int>(cpu_level)) level = cpu_level;
  const RowKernels* table = nullptr;
  switch (level) {
    case SimdLevel::kAvx512:
      table = row_kernels_avx512();
      break;
    case SimdLevel::kAvx2:
      table = row_kernels_avx2();
      break;
    case SimdLevel::kSse4:
      table = row_kernels_sse4();
      break;
    case SimdLevel::kScalar:
      break;
  }
  return table ? *table : *row_kernels_scalar();
}

}  // namespace stoke::image_detail
