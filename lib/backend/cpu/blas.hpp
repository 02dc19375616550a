// The one BLAS entry point of the CPU backend: row-major sgemm, called from
// inside TBB tasks. libstoke links Debian's OpenBLAS pthread build pinned to
// one thread (see lib/backend/module.cmake for why not the serial build), so
// each call runs on the calling thread and no second thread pool competes
// with the oneTBB arena.
#pragma once

namespace stoke::cpu {

// C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C, row-major.
void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace stoke::cpu
