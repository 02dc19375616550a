#include "backend/cpu/blas.hpp"

#include <cblas.h>

#include <cstddef>
#include <string>

#include "backend/cpu/address_space.hpp"

namespace stoke::cpu {

namespace {
// One OpenBLAS thread: parallelism comes from the oneTBB arena, each task
// calling sgemm on its own thread (the pthread build locks its buffer
// allocator, so concurrent calls are safe).
const bool kOneBlasThread = [] {
  openblas_set_num_threads(1);
  return true;
}();

// OpenBLAS maps a 128 MiB work buffer (BUFFER_SIZE on x86-64) for each thread
// that calls it at once and retries forever when that fails: twice that
// must be free (address_space.hpp).
constexpr std::size_t kBlasBufferProbe = std::size_t{2} * (128u << 20);
}  // namespace

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  (void)kOneBlasThread;
  if (address_space_limited())  // the message is built only where it may be needed
    require_address_space(kBlasBufferProbe, "a " + std::to_string(m) + "x" + std::to_string(k) +
                                                " by " + std::to_string(k) + "x" +
                                                std::to_string(n) + " matrix product (BLAS)");
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace stoke::cpu
