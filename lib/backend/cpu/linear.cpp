// Fully connected layer: sgemm over row blocks (forward, dx; the forward over
// output feature blocks when there are fewer rows than blocks) and over output
// feature blocks (dw), one block per chunk. The blocks are a fixed number, not
// one per thread: OpenBLAS may round an element differently for another block
// height (a 1-row product takes another kernel), so a per-thread split would
// make the weights depend on the thread count.
#include <algorithm>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace stoke::cpu {

namespace {
constexpr int kChunks = 8;

}  // namespace

void CpuBackend::do_linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                   Tensor& y) {
  const int n = static_cast<int>(x.dim(0)), k = static_cast<int>(x.dim(1)),
            m = static_cast<int>(w.dim(0));
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* bp = bias.defined() ? bias.data<float>() : nullptr;
  float* yp = y.data<float>();
  if (n < kChunks) {
    // Few rows (a classifier's head at batch 1): blocks of output features,
    // so that every thread reads its share of w (a matrix-vector product is
    // bound by reading w).
    for_chunks(*this, static_cast<std::size_t>(m), kChunks, [&](int, std::size_t b, std::size_t e) {
      const int cols = static_cast<int>(e - b);
      sgemm(false, true, n, cols, k, 1.0f, xp, k, wp + b * k, k, 0.0f, yp + b, m);
      if (bp)
        for (int r = 0; r < n; ++r)
          for (std::size_t j = b; j < e; ++j) yp[r * m + j] += bp[j];
    });
    return;
  }
  for_chunks(*this, static_cast<std::size_t>(n), kChunks, [&](int, std::size_t b, std::size_t e) {
    const int rows = static_cast<int>(e - b);
    sgemm(false, true, rows, m, k, 1.0f, xp + b * k, k, wp, k, 0.0f, yp + b * m, m);
    if (bp)
      for (std::size_t r = b; r < e; ++r)
        for (int j = 0; j < m; ++j) yp[r * m + j] += bp[j];
  });
}

void CpuBackend::do_linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                                    Tensor& dw, Tensor& db) {
  const int n = static_cast<int>(x.dim(0)), k = static_cast<int>(x.dim(1)),
            m = static_cast<int>(w.dim(0));
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* dyp = dy.data<float>();
  float* dwp = dw.data<float>();
  float* dbp = db.defined() ? db.data<float>() : nullptr;
  if (dx.defined()) {
    float* dxp = dx.data<float>();
    for_chunks(*this, static_cast<std::size_t>(n), kChunks, [&](int, std::size_t b, std::size_t e) {
      sgemm(false, false, static_cast<int>(e - b), k, m, 1.0f, dyp + b * m, m, wp, k, 0.0f,
            dxp + b * k, k);
    });
  }
  // dw[j, :] = sum_r dy[r, j] x[r, :] for the chunk's output features j.
  for_chunks(*this, static_cast<std::size_t>(m), kChunks, [&](int, std::size_t b, std::size_t e) {
    sgemm(true, false, static_cast<int>(e - b), k, n, 1.0f, dyp + b, m, xp, k, 0.0f, dwp + b * k,
          k);
    if (dbp)
      for (std::size_t j = b; j < e; ++j) {
        float sum = 0.0f;
        for (int r = 0; r < n; ++r) sum += dyp[static_cast<std::size_t>(r) * m + j];
        dbp[j] = sum;
      }
  });
}

}  // namespace stoke::cpu
