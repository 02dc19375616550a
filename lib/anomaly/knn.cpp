// Nearest neighbours by chunked GEMM (see knn.hpp).
#include "anomaly/knn.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "stoke/error.hpp"
#include "stoke/threads.hpp"

namespace stoke::anomaly_detail {

namespace {

// Keeps the k smallest (distance, index) of one query, nearest first; a tie
// keeps the lower index first (candidates arrive in rising index order).
void offer(float d, std::int64_t index, std::int64_t k, float* dist, std::int64_t* idx,
           std::int64_t& filled) {
  if (filled == k && !(d < dist[k - 1])) return;
  std::int64_t pos = filled < k ? filled++ : k - 1;
  while (pos > 0 && d < dist[pos - 1]) {
    dist[pos] = dist[pos - 1];
    idx[pos] = idx[pos - 1];
    --pos;
  }
  dist[pos] = d;
  idx[pos] = index;
}

void check_k(std::int64_t k, std::int64_t rows) {
  if (k < 1 || k > rows) {
    throw InvalidArgument("anomaly: " + std::to_string(k) +
                          " nearest neighbours asked of a bank of " + std::to_string(rows) +
                          " rows");
  }
}

}  // namespace

double euclidean_distance(const float* a, const float* b, std::int64_t width) noexcept {
  double sq = 0.0;
  for (std::int64_t c = 0; c < width; ++c) {
    const double d = static_cast<double>(a[c]) - b[c];
    sq += d * d;
  }
  return std::sqrt(sq);
}

BankSearch::BankSearch(Backend& backend, std::span<const float> bank, std::int64_t rows,
                       std::int64_t width, std::size_t chunk_bytes)
    : backend_(&backend),
      rows_(rows),
      width_(width),
      bank_(bank.begin(), bank.end()),
      chunk_bytes_(chunk_bytes) {
  if (rows < 1 || width < 1 || bank.size() != static_cast<std::size_t>(rows * width)) {
    throw InvalidArgument("anomaly: memory bank of " + std::to_string(bank.size()) +
                          " floats is not " + std::to_string(rows) + " rows of " +
                          std::to_string(width));
  }
  std::vector<float> scaled(bank.size()), norms(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double n = 0.0;
    for (std::int64_t c = 0; c < width; ++c) {
      const float v = bank[static_cast<std::size_t>(r * width + c)];
      scaled[static_cast<std::size_t>(r * width + c)] = -2.0f * v;
      n += static_cast<double>(v) * v;
    }
    norms[static_cast<std::size_t>(r)] = static_cast<float>(n);
  }
  minus2_bank_ = Tensor(backend, {rows, width});
  minus2_bank_.copy_from_host(scaled.data());
  bank_norms_ = Tensor(backend, {rows});
  bank_norms_.copy_from_host(norms.data());
}

Neighbours BankSearch::nearest(std::span<const float> queries, std::int64_t count,
                               std::int64_t k) const {
  check_k(k, rows_);
  if (queries.size() != static_cast<std::size_t>(count * width_)) {
    throw InvalidArgument("anomaly: " + std::to_string(queries.size()) + " query floats are not " +
                          std::to_string(count) + " rows of " + std::to_string(width_));
  }
  Neighbours out{k, std::vector<float>(static_cast<std::size_t>(count * k)),
                 std::vector<std::int64_t>(static_cast<std::size_t>(count * k))};
  std::vector<std::int64_t> filled(static_cast<std::size_t>(count), 0);
  // Bank chunks of at most chunk_bytes / (query chunk x 4) rows.
  const std::int64_t q_chunk = std::min<std::int64_t>(count, 1024);
  const std::int64_t b_chunk = std::max<std::int64_t>(
      1, std::min<std::int64_t>(rows_, static_cast<std::int64_t>(chunk_bytes_ / 4) / q_chunk));
  std::vector<float> block;
  for (std::int64_t q0 = 0; q0 < count; q0 += q_chunk) {
    const std::int64_t qn = std::min(q_chunk, count - q0);
    Tensor q(*backend_, {qn, width_});
    q.copy_from_host(queries.data() + q0 * width_);
    for (std::int64_t b0 = 0; b0 < rows_; b0 += b_chunk) {
      const std::int64_t bn = std::min(b_chunk, rows_ - b0);
      Tensor y(*backend_, {qn, bn});
      backend_->linear_forward(q, minus2_bank_.view(b0 * width_, {bn, width_}),
                               bank_norms_.view(b0, {bn}), y);
      const float* ys = nullptr;  // the block on the host: the tensor itself where it lives there
      if (backend_->is_host()) {
        ys = y.data<float>();
      } else {
        block.resize(static_cast<std::size_t>(qn * bn));
        y.copy_to_host(block.data());
        ys = block.data();
      }
      parallel_for(0, static_cast<std::size_t>(qn), 64, [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
          float* dist = out.distances.data() + (q0 + static_cast<std::int64_t>(i)) * k;
          std::int64_t* idx = out.indices.data() + (q0 + static_cast<std::int64_t>(i)) * k;
          // Ranked by ||b||^2 - 2 q.b, the squared distance less the query's
          // own ||q||^2 (the same for all its rows); refine() replaces the k
          // kept with their exact distances. Once k are kept, a row not below
          // the k-th is passed over without a call.
          const float* row = ys + i * static_cast<std::size_t>(bn);
          std::int64_t kept = filled[static_cast<std::size_t>(q0) + i];
          float worst = dist[k - 1];
          for (std::int64_t j = 0; j < bn; ++j) {
            if (kept == k && !(row[j] < worst)) continue;
            offer(row[j], b0 + j, k, dist, idx, kept);
            worst = dist[k - 1];
          }
          filled[static_cast<std::size_t>(q0) + i] = kept;
        }
      });
    }
  }
  refine(queries, out);
  return out;
}

void BankSearch::refine(std::span<const float> queries, Neighbours& out) const {
  const std::int64_t k = out.k;
  const auto count = static_cast<std::int64_t>(out.indices.size()) / k;
  parallel_for(0, static_cast<std::size_t>(count), 64, [&](std::size_t lo, std::size_t hi) {
    std::vector<std::pair<double, std::int64_t>> found(static_cast<std::size_t>(k));
    for (std::size_t i = lo; i < hi; ++i) {
      const float* q = queries.data() + i * static_cast<std::size_t>(width_);
      float* dist = out.distances.data() + static_cast<std::int64_t>(i) * k;
      std::int64_t* idx = out.indices.data() + static_cast<std::int64_t>(i) * k;
      for (std::int64_t j = 0; j < k; ++j)
        found[static_cast<std::size_t>(j)] = {
            euclidean_distance(q, bank_.data() + idx[j] * width_, width_), idx[j]};
      std::sort(found.begin(), found.end());
      for (std::int64_t j = 0; j < k; ++j) {
        dist[j] = static_cast<float>(found[static_cast<std::size_t>(j)].first);
        idx[j] = found[static_cast<std::size_t>(j)].second;
      }
    }
  });
}

Neighbours nearest_brute_force(std::span<const float> bank, std::int64_t rows, std::int64_t width,
                               std::span<const float> queries, std::int64_t count, std::int64_t k) {
  check_k(k, rows);
  Neighbours out{k, std::vector<float>(static_cast<std::size_t>(count * k)),
                 std::vector<std::int64_t>(static_cast<std::size_t>(count * k))};
  for (std::int64_t i = 0; i < count; ++i) {
    std::int64_t filled = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      offer(static_cast<float>(
                euclidean_distance(queries.data() + i * width, bank.data() + r * width, width)),
            r, k, out.distances.data() + i * k, out.indices.data() + i * k, filled);
    }
  }
  return out;
}

}  // namespace stoke::anomaly_detail
