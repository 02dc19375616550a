// Softmax cross-entropy with accuracy: rows split over chunks; each chunk's
// loss and correct count reduced in chunk order.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {
std::int32_t checked_label(const std::int32_t* labels, std::size_t r, std::int64_t classes) {
  const std::int32_t l = labels[r];
  if (l < 0 || l >= classes) {
    throw InvalidArgument("softmax_cross_entropy: label " + std::to_string(l) + " of row " +
                          std::to_string(r) + " is outside [0, " + std::to_string(classes) + ")");
  }
  return l;
}
}  // namespace

void CpuBackend::do_softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                                  Tensor& probs, Tensor& loss, Tensor& correct) {
  const std::size_t n = static_cast<std::size_t>(logits.dim(0));
  const std::int64_t c = logits.dim(1);
  const float* lp = logits.data<float>();
  const std::int32_t* lab = labels.data<std::int32_t>();
  float* pp = probs.data<float>();
  // A fixed split (not one per thread): the partial sums, and so the loss,
  // do not depend on the thread count.
  constexpr int kChunks = 8;
  const int chunk_count = std::max(1, std::min(kChunks, static_cast<int>(n)));
  std::vector<double> loss_part(static_cast<std::size_t>(chunk_count), 0.0);
  std::vector<double> correct_part(static_cast<std::size_t>(chunk_count), 0.0);
  for_chunks(*this, n, chunk_count, [&](int chunk, std::size_t b, std::size_t e) {
    for (std::size_t r = b; r < e; ++r) {
      const float* row = lp + r * c;
      float* prow = pp + r * c;
      const std::int32_t label = checked_label(lab, r, c);
      std::int64_t arg = 0;
      for (std::int64_t j = 1; j < c; ++j)
        if (row[j] > row[arg]) arg = j;
      const float mx = row[arg];
      double sum = 0.0;
      for (std::int64_t j = 0; j < c; ++j) {
        prow[j] = std::exp(row[j] - mx);
        sum += prow[j];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (std::int64_t j = 0; j < c; ++j) prow[j] *= inv;
      loss_part[static_cast<std::size_t>(chunk)] += std::log(sum) - (row[label] - mx);
      if (arg == label) correct_part[static_cast<std::size_t>(chunk)] += 1.0;
    }
  });
  double total = 0.0, right = 0.0;
  for (int k = 0; k < chunk_count; ++k) {
    total += loss_part[static_cast<std::size_t>(k)];
    right += correct_part[static_cast<std::size_t>(k)];
  }
  loss.data<float>()[0] = n ? static_cast<float>(total / static_cast<double>(n)) : 0.0f;
  correct.data<float>()[0] = static_cast<float>(right);
}

void CpuBackend::do_softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                                   Tensor& dlogits) {
  const std::size_t n = static_cast<std::size_t>(probs.dim(0));
  const std::int64_t c = probs.dim(1);
  const float* pp = probs.data<float>();
  const std::int32_t* lab = labels.data<std::int32_t>();
  float* dp = dlogits.data<float>();
  const float inv_n = 1.0f / static_cast<float>(std::max<std::size_t>(n, 1));
  for_chunks(*this, n, chunks(), [&](int, std::size_t b, std::size_t e) {
    for (std::size_t r = b; r < e; ++r) {
      const std::int32_t label = checked_label(lab, r, c);
      for (std::int64_t j = 0; j < c; ++j)
        dp[r * c + j] = (pp[r * c + j] - (j == label ? 1.0f : 0.0f)) * inv_n;
    }
  });
}

}  // namespace stoke::cpu
