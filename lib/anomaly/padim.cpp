// PaDiM's channel subset, Gaussians and Mahalanobis distance (see padim.hpp),
// and its scorer (scorer.hpp).
#include "anomaly/padim.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <string>

#include "anomaly/resample.hpp"
#include "anomaly/scorer.hpp"
#include "data/rng.hpp"
#include "stoke/error.hpp"

namespace stoke::anomaly_detail {

namespace {

// sum_b a[b] * b[b] in 8 lanes summed in a fixed order: the same bits on
// any thread count, and vectorized by the compiler (one running sum would be
// a chain of dependent additions it may not reorder).
template <typename T>
T lane_dot(const T* a, const T* b, std::int64_t k) noexcept {
  constexpr std::int64_t kLanes = 8;
  T lane[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) lane[l] += a[i + l] * b[i + l];
  for (std::int64_t l = 0; i < k; ++i, ++l) lane[l] += a[i] * b[i];
  T sum = 0;
  for (T x : lane) sum += x;
  return sum;
}

// Positions per task: a few, each a whole Cholesky of features^3 / 3 flops.
constexpr std::size_t kPositionGrain = 4;

// a (k x k, symmetric positive definite, row-major, its lower triangle read)
// -> the upper triangle of its inverse, packed, in `inv_upper` through
// a = L L^T: X = L^-1 row by row, then inv = X^T X. `x` is scratch. false
// when a pivot is not positive (a is not positive definite).
bool invert_spd(std::vector<double>& a, std::vector<double>& x, std::int64_t k, float* inv_upper) {
  for (std::int64_t j = 0; j < k; ++j) {  // a's lower triangle becomes L
    double* row_j = a.data() + j * k;
    for (std::int64_t i = j; i < k; ++i) {
      double* row_i = a.data() + i * k;
      const double s = row_i[j] - lane_dot(row_i, row_j, j);
      if (i == j) {
        if (!(s > 0.0)) return false;
        row_j[j] = std::sqrt(s);
      } else {
        row_i[j] = s / row_j[j];
      }
    }
  }
  std::fill(x.begin(), x.end(), 0.0);
  for (std::int64_t i = 0; i < k; ++i) {  // row i of L^-1: (e_i - sum L_ic X_c) / L_ii
    double* xi = x.data() + i * k;
    const double* li = a.data() + i * k;
    xi[i] = 1.0;
    for (std::int64_t c = 0; c < i; ++c) {
      const double f = li[c];
      const double* xc = x.data() + c * k;
      for (std::int64_t j = 0; j <= c; ++j) xi[j] -= f * xc[j];
    }
    const double d = 1.0 / li[i];
    for (std::int64_t j = 0; j <= i; ++j) xi[j] *= d;
  }
  std::fill(a.begin(), a.end(), 0.0);  // inv = X^T X's upper triangle, X lower triangular
  for (std::int64_t r = 0; r < k; ++r) {
    const double* xr = x.data() + r * k;
    for (std::int64_t i = 0; i <= r; ++i) {
      double* ai = a.data() + i * k;
      const double f = xr[i];
      for (std::int64_t j = i; j <= r; ++j) ai[j] += f * xr[j];
    }
  }
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = i; j < k; ++j)
      *inv_upper++ = static_cast<float>(a[static_cast<std::size_t>(i * k + j)]);
  return true;
}

}  // namespace

std::vector<std::int64_t> padim_channels(std::int64_t full_width, std::int64_t kept,
                                         std::uint64_t seed) {
  if (kept < 1 || kept > full_width) {
    throw InvalidArgument("anomaly: PaDiM keeps " + std::to_string(kept) + " of " +
                          std::to_string(full_width) +
                          " channels (padim_features must be 1 to the backbone's layer1 + layer2 "
                          "+ layer3 width)");
  }
  std::vector<std::int64_t> all(static_cast<std::size_t>(full_width));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  data_detail::Rng rng(seed);
  for (std::int64_t i = 0; i < kept; ++i) {
    const auto j =
        i + static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(full_width - i));
    std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(j)]);
  }
  all.resize(static_cast<std::size_t>(kept));
  std::sort(all.begin(), all.end());
  return all;
}

void select_channels(anomaly::Embeddings& e, std::span<const std::int64_t> channels) {
  const auto kept = static_cast<std::int64_t>(channels.size());
  for (std::size_t i = 0; i < channels.size(); ++i) {
    if (channels[i] < 0 || channels[i] >= e.width || (i > 0 && channels[i] <= channels[i - 1]))
      throw InvalidArgument("anomaly: PaDiM channel " + std::to_string(channels[i]) +
                            " is not ascending within the embedding's " + std::to_string(e.width));
  }
  const std::int64_t rows = e.count * e.grid_h * e.grid_w;
  // In place: ascending channels put each value at or below where it is read.
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = e.rows.data() + r * e.width;
    float* out = e.rows.data() + r * kept;
    for (std::int64_t i = 0; i < kept; ++i) out[i] = in[channels[static_cast<std::size_t>(i)]];
  }
  e.rows.resize(static_cast<std::size_t>(rows * kept));
  e.width = kept;
}

std::vector<float> full_inverse(const Gaussians& g) {
  const std::int64_t k = g.features;
  std::vector<float> full(static_cast<std::size_t>(g.positions() * k * k));
  const float* q = g.inv_upper.data();
  for (std::int64_t p = 0; p < g.positions(); ++p) {
    float* m = full.data() + p * k * k;
    for (std::int64_t a = 0; a < k; ++a)
      for (std::int64_t b = a; b < k; ++b) m[a * k + b] = m[b * k + a] = *q++;
  }
  return full;
}

std::int64_t pack_inverse(std::span<const float> full, Gaussians& g) {
  const std::int64_t k = g.features;
  std::vector<float> packed(static_cast<std::size_t>(g.positions() * g.packed()));
  float* q = packed.data();
  for (std::int64_t p = 0; p < g.positions(); ++p) {
    const float* m = full.data() + p * k * k;
    for (std::int64_t a = 0; a < k; ++a) {
      for (std::int64_t b = a; b < k; ++b) {
        if (std::bit_cast<std::uint32_t>(m[a * k + b]) !=
            std::bit_cast<std::uint32_t>(m[b * k + a]))
          return p;
        *q++ = m[a * k + b];
      }
    }
  }
  g.inv_upper = std::move(packed);
  return -1;
}

Gaussians fit_gaussians(const anomaly::Embeddings& e, Execution execution) {
  if (e.count < 2) {
    throw InvalidArgument(
        "anomaly: PaDiM fits a covariance per position and needs at least 2 "
        "training images, got " +
        std::to_string(e.count));
  }
  const std::int64_t positions = e.grid_h * e.grid_w, k = e.width, n = e.count;
  if (k < 1 || e.rows.size() != static_cast<std::size_t>(n * positions * k))
    throw InvalidArgument("anomaly: embeddings of " + std::to_string(e.rows.size()) +
                          " floats are not " + std::to_string(n * positions) + " rows of " +
                          std::to_string(k));
  Gaussians g{e.grid_h, e.grid_w, k, {}, {}};
  g.mean.resize(static_cast<std::size_t>(positions * k));
  g.inv_upper.resize(static_cast<std::size_t>(positions * g.packed()));
  const auto kk = static_cast<std::size_t>(k * k);
  parallel_for(
      0, static_cast<std::size_t>(positions), kPositionGrain,
      [&](std::size_t lo, std::size_t hi) {
        std::vector<double> mean(static_cast<std::size_t>(k)),
            centered(static_cast<std::size_t>(n * k));
        std::vector<double> cov(kk), scratch(kk);
        for (std::size_t p = lo; p < hi; ++p) {
          const auto pos = static_cast<std::int64_t>(p);
          std::fill(mean.begin(), mean.end(), 0.0);
          for (std::int64_t i = 0; i < n; ++i) {
            const float* x = e.rows.data() + (i * positions + pos) * k;
            for (std::int64_t c = 0; c < k; ++c) mean[static_cast<std::size_t>(c)] += x[c];
          }
          for (double& m : mean) m /= static_cast<double>(n);
          for (std::int64_t i = 0; i < n; ++i) {
            const float* x = e.rows.data() + (i * positions + pos) * k;
            for (std::int64_t c = 0; c < k; ++c)
              centered[static_cast<std::size_t>(i * k + c)] =
                  x[c] - mean[static_cast<std::size_t>(c)];
          }
          std::fill(cov.begin(), cov.end(), 0.0);
          for (std::int64_t i = 0; i < n; ++i) {  // the lower triangle, what invert_spd reads
            const double* d = centered.data() + i * k;
            for (std::int64_t a = 0; a < k; ++a) {
              double* row = cov.data() + a * k;
              const double f = d[a];
              for (std::int64_t b = 0; b <= a; ++b) row[b] += f * d[b];
            }
          }
          const double scale = 1.0 / static_cast<double>(n - 1);
          for (double& v : cov) v *= scale;
          for (std::int64_t c = 0; c < k; ++c)
            cov[static_cast<std::size_t>(c * k + c)] += kPadimCovarianceFloor;
          for (std::int64_t c = 0; c < k; ++c)
            g.mean[static_cast<std::size_t>(pos * k + c)] =
                static_cast<float>(mean[static_cast<std::size_t>(c)]);
          if (!invert_spd(cov, scratch, k, g.inv_upper.data() + pos * g.packed())) {
            throw InvalidArgument("anomaly: PaDiM's covariance at grid position " +
                                  std::to_string(p) +
                                  " is not positive definite (non-finite features?)");
          }
        }
      },
      execution);
  return g;
}

std::vector<float> mahalanobis(const Gaussians& g, std::span<const float> rows,
                               Execution execution) {
  const std::int64_t positions = g.positions(), k = g.features;
  if (rows.size() != static_cast<std::size_t>(positions * k))
    throw InvalidArgument("anomaly: " + std::to_string(rows.size()) + " floats are not " +
                          std::to_string(positions) + " positions x " + std::to_string(k) +
                          " PaDiM features");
  std::vector<float> out(static_cast<std::size_t>(positions));
  parallel_for(
      0, static_cast<std::size_t>(positions), 16,
      [&](std::size_t lo, std::size_t hi) {
        std::vector<float> delta(static_cast<std::size_t>(k));
        for (std::size_t p = lo; p < hi; ++p) {
          const float* x = rows.data() + p * static_cast<std::size_t>(k);
          const float* mu = g.mean.data() + p * static_cast<std::size_t>(k);
          for (std::int64_t c = 0; c < k; ++c) delta[static_cast<std::size_t>(c)] = x[c] - mu[c];
          // Row a of the upper triangle: the diagonal term once, the
          // off-diagonal ones twice (the lower triangle's mirror).
          const float* row = g.inv_upper.data() + static_cast<std::int64_t>(p) * g.packed();
          double sum = 0.0;
          for (std::int64_t a = 0; a < k; row += k - a, ++a) {
            const float* d = delta.data() + a;
            const double terms =
                static_cast<double>(row[0]) * d[0] + 2.0 * lane_dot(row + 1, d + 1, k - a - 1);
            sum += d[0] * terms;
          }
          out[p] = static_cast<float>(std::sqrt(std::max(0.0, sum)));
        }
      },
      execution);
  return out;
}

GaussianScorer::GaussianScorer(Gaussians gaussians) : gaussians_(std::move(gaussians)) {}

anomaly::AnomalyResult GaussianScorer::score(const anomaly::Embeddings& e, int height, int width,
                                             float sigma) const {
  if (e.count != 1 || e.grid_h != gaussians_.grid_h || e.grid_w != gaussians_.grid_w) {
    throw InvalidArgument("anomaly: a " + std::to_string(e.grid_h) + "x" +
                          std::to_string(e.grid_w) + " feature grid, PaDiM's Gaussians are " +
                          std::to_string(gaussians_.grid_h) + "x" +
                          std::to_string(gaussians_.grid_w));
  }
  const std::vector<float> distances = mahalanobis(gaussians_, e.rows);
  anomaly::AnomalyResult r;
  r.height = height;
  r.width = width;
  r.map = gaussian_blur(resize_bilinear(distances, 1, e.grid_h, e.grid_w, height, width), height,
                        width, sigma);
  r.score = *std::max_element(r.map.begin(), r.map.end());
  return r;
}

}  // namespace stoke::anomaly_detail
