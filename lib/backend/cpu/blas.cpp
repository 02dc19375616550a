#include "backend/cpu/blas.hpp"

#include <cblas.h>

namespace stoke::cpu {

namespace {
// The serial OpenBLAS is found first through libstoke's RUNPATH; if an
// application has already loaded the pthread build under the same soname,
// pin it to one thread so it does not fight the oneTBB arena.
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
