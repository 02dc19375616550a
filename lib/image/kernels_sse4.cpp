// Row kernels for the sse4 level (flags: lib/image/module.cmake).
#define STOKE_ISA 1
#define STOKE_ISA_NS isa_sse4
#if defined(__x86_64__)
#include "image/kernels_impl.hpp"
#endif

namespace stoke::image_detail {

const RowKernels* row_kernels_sse4() {
#if defined(__x86_64__)
  return &isa_sse4::kTable;
#else
  return nullptr;
#endif
}

}  // namespace stoke::image_detail
