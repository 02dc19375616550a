// Softmax cross-entropy reference, in double.
#include <cmath>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"

namespace stoke::cpu::naive {

void softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, Tensor& probs,
                                   Tensor& loss, Tensor& correct) {
  const std::int64_t n = logits.dim(0), c = logits.dim(1);
  double total = 0, right = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = logits.data<float>() + r * c;
    double mx = row[0];
    std::int64_t arg = 0;
    for (std::int64_t j = 1; j < c; ++j)
      if (row[j] > row[arg]) arg = j;
    mx = row[arg];
    double sum = 0;
    for (std::int64_t j = 0; j < c; ++j) sum += std::exp(row[j] - mx);
    for (std::int64_t j = 0; j < c; ++j)
      probs.data<float>()[r * c + j] = static_cast<float>(std::exp(row[j] - mx) / sum);
    const std::int32_t label = labels.data<std::int32_t>()[r];
    total += std::log(sum) - (row[label] - mx);
    right += arg == label ? 1 : 0;
  }
  loss.data<float>()[0] = static_cast<float>(total / static_cast<double>(n));
  correct.data<float>()[0] = static_cast<float>(right);
}

void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, Tensor& dlogits) {
  const std::int64_t n = probs.dim(0), c = probs.dim(1);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < c; ++j)
      dlogits.data<float>()[r * c + j] = static_cast<float>(
          (probs.data<float>()[r * c + j] - (j == labels.data<std::int32_t>()[r] ? 1.0 : 0.0)) /
          static_cast<double>(n));
}

}  // namespace stoke::cpu::naive
