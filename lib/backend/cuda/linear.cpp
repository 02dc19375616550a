// Linear layers with cuBLAS. Tensors are row-major; cuBLAS is column-major,
// so a row-major (R, C) matrix is passed as the column-major (C, R) one and
// every product below is the transposed identity:
//   y = x w^T      ->  y^T (M, N) = w' (K, M)^T x' (K, N)
//   dx = dy w      ->  dx^T (K, N) = w' (K, M) dy^T (M, N)
//   dw = dy^T x    ->  dw^T (K, M) = x' (K, N) dy' (M, N)^T
// The bias broadcast and its gradient are small custom kernels.
#include "backend/cuda/check.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "stoke/error.hpp"

namespace stoke::cuda {
namespace {

struct Dims {
  int n, k, m;
};

Dims linear_dims(const Tensor& x, const Tensor& w) {
  return {static_cast<int>(x.dim(0)), static_cast<int>(x.dim(1)), static_cast<int>(w.dim(0))};
}

}  // namespace

void CudaBackend::do_linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                    Tensor& y) {
  const Dims d = linear_dims(x, w);
  const float one = 1.0f, zero = 0.0f;
  STOKE_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, d.m, d.n, d.k, &one,
                                 w.data<float>(), d.k, x.data<float>(), d.k, &zero, y.data<float>(),
                                 d.m));
  if (bias.defined()) {
    float* yp = y.data<float>();
    const float* bp = bias.data<float>();
    const long long rows = d.n;
    const int cols = d.m;
    launch_n("stoke_add_bias_rows", rows * cols, {&yp, &bp, &rows, &cols});
  }
}

void CudaBackend::do_linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                                     Tensor& dw, Tensor& db) {
  const Dims d = linear_dims(x, w);
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t h = cublas();
  if (dx.defined()) {
    STOKE_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, d.k, d.n, d.m, &one,
                                   w.data<float>(), d.k, dy.data<float>(), d.m, &zero,
                                   dx.data<float>(), d.k));
  }
  STOKE_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, d.k, d.m, d.n, &one, x.data<float>(),
                                 d.k, dy.data<float>(), d.m, &zero, dw.data<float>(), d.k));
  if (db.defined()) {
    const float* dyp = dy.data<float>();
    float* dbp = db.data<float>();
    const long long rows = d.n;
    const int cols = d.m;
    const unsigned blocks = static_cast<unsigned>((cols + 255) / 256);
    launch("stoke_sum_rows", dim3(blocks), dim3(256), {&dyp, &dbp, &rows, &cols});
  }
}

}  // namespace stoke::cuda
