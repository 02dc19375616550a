// Row kernels for the avx2 level (flags: lib/image/module.cmake).
#define STOKE_ISA 2
#define STOKE_ISA_NS isa_avx2
#if defined(__x86_64__)
#include "image/kernels_impl.hpp"
#endif

namespace stoke::image_detail {

const RowKernels* row_kernels_avx2() {
#if defined(__x86_64__)
  return &isa_avx2::kTable;
#else
  return nullptr;
#endif
}

}  // namespace stoke::image_detail
