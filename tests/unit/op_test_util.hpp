// Shared helpers for the op tests: seeded random tensors, the float32
// tolerance table, guard values around outputs and central finite differences.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"

namespace stoke::test {

// One table for float32. Every entry is |got - want| <= abs + rel * |want|.
struct Tolerance {
  double abs;
  double rel;
  const char* reason;
};
inline constexpr double kEpsF32 = std::numeric_limits<float>::epsilon();
// A fast op against the double-accumulating reference: float rounding grows
// with the reduction length n (pairwise-ish sums and sgemm blocking: ~sqrt(n)
// typical, bounded here by a factor 16 for safety).
inline Tolerance reduction_tolerance(std::size_t n) {
  const double t = 16.0 * kEpsF32 * std::sqrt(static_cast<double>(n) + 1.0);
  return {t, t, "float32 sum of n terms against a double reference"};
}
// Elementwise ops: one or two roundings.
inline constexpr Tolerance kElementwise{2 * kEpsF32, 2 * kEpsF32, "one rounding per element"};
// Central differences in float32 with step h = 1e-2 on O(1) inputs: the
// truncation error is O(h^2) and the rounding error eps * |L| / h.
inline constexpr Tolerance kFiniteDifference{2e-2, 2e-2, "float32 central differences, h = 1e-2"};

inline std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline Tensor random_tensor(Backend& be, const Shape& shape, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(be, shape);
  const auto v = random_values(static_cast<std::size_t>(t.numel()), seed, lo, hi);
  t.copy_from_host(v.data());
  return t;
}

// An output tensor with kGuard sentinel elements on each side in the same
// allocation; check() fails the test if an op wrote outside the tensor.
class Guarded {
 public:
  static constexpr std::int64_t kGuard = 64;
  static constexpr float kSentinel = -12345.678f;
  Guarded(Backend& be, const Shape& shape) : base_(be, {shape_numel(shape) + 2 * kGuard}) {
    be.fill(base_, kSentinel);
    tensor = base_.view(kGuard, shape);
  }
  void check(const std::string& what) const {
    const auto all = base_.to_vector();
    const std::size_t n = all.size();
    for (std::int64_t i = 0; i < kGuard; ++i) {
      ASSERT_EQ(all[static_cast<std::size_t>(i)], kSentinel) << what << ": write before the output";
      ASSERT_EQ(all[n - 1 - static_cast<std::size_t>(i)], kSentinel) << what << ": write after the output";
    }
  }
  Tensor tensor;

 private:
  Tensor base_;
};

inline void expect_close(const Tensor& got, const Tensor& want, const Tolerance& tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto g = got.to_vector();
  const auto w = want.to_vector();
  int reported = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double bound = tol.abs + tol.rel * std::fabs(w[i]);
    if (!(std::fabs(static_cast<double>(g[i]) - w[i]) <= bound)) {
      ADD_FAILURE() << what << " element " << i << ": got " << g[i] << ", want " << w[i] << " (bound " << bound
                    << ": " << tol.reason << ")";
      if (++reported >= 5) return;
    }
  }
}

inline void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  const auto x = a.to_vector();
  const auto y = b.to_vector();
  ASSERT_EQ(x.size(), y.size()) << what;
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << what << " element " << i;
}

// Sum of y * weights in double: a scalar loss whose gradient wrt y is weights.
inline double weighted_sum(const Tensor& y, const std::vector<float>& weights) {
  const auto v = y.to_vector();
  double s = 0;
  for (std::size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * weights[i];
  return s;
}

// Compares analytic with central differences of loss() over `input`, at up
// to max_points evenly spread elements.
inline void expect_gradient(Tensor& input, const Tensor& analytic, const std::function<double()>& loss,
                            const std::string& what, float h = 1e-2f, int max_points = 48) {
  ASSERT_EQ(input.shape(), analytic.shape()) << what;
  const auto grad = analytic.to_vector();
  float* p = input.data<float>();
  const std::int64_t n = input.numel();
  const std::int64_t step = std::max<std::int64_t>(1, n / max_points);
  for (std::int64_t i = 0; i < n; i += step) {
    const float saved = p[i];
    p[i] = saved + h;
    const double up = loss();
    p[i] = saved - h;
    const double down = loss();
    p[i] = saved;
    const double fd = (up - down) / (2.0 * h);
    const double bound = kFiniteDifference.abs + kFiniteDifference.rel * std::fabs(fd);
    EXPECT_NEAR(grad[static_cast<std::size_t>(i)], fd, bound) << what << " element " << i << " ("
                                                              << kFiniteDifference.reason << ")";
  }
}

}  // namespace stoke::test
