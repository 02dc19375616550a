#include "backend/cpu/blas.hpp"

#include <cblas.h>

namespace stoke::cpu {

namespace {
// One OpenBLAS thread: parallelism comes from the oneTBB arena, each task
// calling sgemm on its own thread (the pthread build locks its buffer
// allocator, so concurrent calls are safe).
const bool kOneBlasThread = [] {
  openblas_set_num_threads(1);
  return true;
}();
}  // namespace

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  (void)kOneBlasThread;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace stoke::cpu
