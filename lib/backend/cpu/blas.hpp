// The one BLAS entry point of the CPU backend: row-major sgemm, called from
// inside TBB tasks. libstoke links Debian's OpenBLAS pthread build pinned to
// one thread (see lib/backend/module.cmake for why not the serial build), so
// each call runs on the calling thread and no second thread pool competes
// with the oneTBB arena.
//
// OpenBLAS picks its kernels by CPU model when it loads, and a model newer
// than the library gets its oldest x86-64 kernels: Debian 12's 0.3.21 runs
// Prescott's SSE3 kernels on a 5th-generation Xeon (family 6, model 207),
// a quarter of the vector width the CPU has. Where OpenBLAS chose a core
// without AVX2 on a CPU with AVX2 and stoke has oneDNN, the products go
// through oneDNN's sgemm, which picks its kernels by instruction set.
#pragma once

#include <string>

namespace stoke::cpu {

// C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C, row-major.
void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);

enum class BlasRoute { kOpenBlas, kOneDnn };

// The route sgemm takes in this process (decided at the first call).
BlasRoute blas_route();
// "OpenBLAS 0.3.21 (Haswell kernels)" or "oneDNN sgemm (OpenBLAS 0.3.21 chose
// Prescott kernels on a CPU with AVX-512)": for stoke info and logs.
std::string blas_description();

namespace blas_detail {
// Whether OpenBLAS's core `name` (openblas_get_corename) lags a CPU that has
// AVX2: a core without AVX2 kernels on it.
bool core_lags_cpu(const std::string& name, bool cpu_has_avx2);
// The two routes, whichever blas_route() picked (tests compare them).
void sgemm_openblas(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc);
// false where stoke was built without oneDNN (nothing computed).
bool sgemm_onednn(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  int lda, const float* b, int ldb, float beta, float* c, int ldc);
}  // namespace blas_detail

}  // namespace stoke::cpu
