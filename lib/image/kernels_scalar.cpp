// Row kernels for the scalar level (flags: lib/image/module.cmake).
#define STOKE_ISA 0
#define STOKE_ISA_NS isa_scalar

#include "image/kernels_impl.hpp"

namespace stoke::image_detail {

const RowKernels* row_kernels_scalar() {
  return &isa_scalar::kTable;
}

}  // namespace stoke::image_detail
