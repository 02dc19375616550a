// Row kernels for the avx512 level (flags: lib/image/module.cmake).
#define STOKE_ISA 3
#define STOKE_ISA_NS isa_avx512
#if defined(__x86_64__)
#include "image/kernels_impl.hpp"
#endif

namespace stoke::image_detail {

const RowKernels* row_kernels_avx512() {
#if defined(__x86_64__)
  return &isa_avx512::kTable;
#else
  return nullptr;
#endif
}

}  // namespace stoke::image_detail
