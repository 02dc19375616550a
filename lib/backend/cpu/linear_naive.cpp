// Fully connected reference, in double.
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"

namespace stoke::cpu::naive {

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const std::int64_t n = x.dim(0), k = x.dim(1), m = w.dim(0);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < m; ++j) {
      double sum = bias.defined() ? bias.data<float>()[j] : 0.0;
      for (std::int64_t i = 0; i < k; ++i)
        sum += static_cast<double>(x.data<float>()[r * k + i]) * w.data<float>()[j * k + i];
      y.data<float>()[r * m + j] = static_cast<float>(sum);
    }
}

void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& db) {
  const std::int64_t n = x.dim(0), k = x.dim(1), m = w.dim(0);
  for (std::int64_t r = 0; r < n && dx.defined(); ++r)
    for (std::int64_t i = 0; i < k; ++i) {
      double sum = 0;
      for (std::int64_t j = 0; j < m; ++j)
        sum += static_cast<double>(dy.data<float>()[r * m + j]) * w.data<float>()[j * k + i];
      dx.data<float>()[r * k + i] = static_cast<float>(sum);
    }
  for (std::int64_t j = 0; j < m; ++j) {
    for (std::int64_t i = 0; i < k; ++i) {
      double sum = 0;
      for (std::int64_t r = 0; r < n; ++r)
        sum += static_cast<double>(dy.data<float>()[r * m + j]) * x.data<float>()[r * k + i];
      dw.data<float>()[j * k + i] = static_cast<float>(sum);
    }
    if (db.defined()) {
      double sum = 0;
      for (std::int64_t r = 0; r < n; ++r) sum += dy.data<float>()[r * m + j];
      db.data<float>()[j] = static_cast<float>(sum);
    }
  }
}

}  // namespace stoke::cpu::naive
