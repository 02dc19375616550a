// The one test toolkit for ops on any backend (CPU, the fake GPU, CUDA):
// seeded generators, the tolerance table, guard values around outputs,
// comparisons and central finite differences. Used by the op suite
// (op_suite_*), the CUDA step-parity tests and the nn tests.
//
// Data lives on the host as std::vector<float> and goes to a backend with
// upload(); results come back with Tensor::to_vector() (synchronous on every
// backend), so nothing here assumes host-readable tensors except
// expect_gradient's loss callback, which the caller writes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"

namespace stoke::testing {

// --- tolerances -------------------------------------------------------------
// An output passes when max_i |got_i - want_i| / max(1, max_i |want_i|) <=
// max_error: the error relative to the output's scale (a kernel that reads or
// writes the wrong element misses by O(1) of the scale; rounding is a few
// epsilon of it).
struct Tolerance {
  double max_error;
  const char* reason;
};

inline constexpr double epsilon(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return 9.77e-4;  // 2^-10
    case DType::kBFloat16:
      return 7.81e-3;  // 2^-7
    case DType::kUInt8:
      return 1.0 / 127;  // int8 inference's 8-bit codes: one step of an s8 range (u8's is finer)
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

// What an output's error is made of, against the double-accumulating naive
// reference. The one table of tolerances is below; each row is a number of
// epsilons, times sqrt(n + 1) where the error grows with the reduction length n.
enum class Accuracy : std::uint8_t {
  kExact,           // the same float operations in the same order
  kElementwise,     // a few operations per element
  kTranscendental,  // exp/log/sqrt per element, short row sums
  kReduction,       // sums of n products or terms (GEMM, convolution, pooling windows)
  kConvolution,     // kReduction, plus the algorithms a GPU library may choose
  kNormalization,   // statistics over n values, then a division by the std
  kOptimizer,       // several steps of sqrt and division per element
  kRoundedInputs,   // a low-precision dtype's products: inputs rounded, fp32 sums
  kQuantized,       // int8 inference: inputs and weights quantized, exact int32 sums
};

struct ToleranceRule {
  Accuracy accuracy;
  double epsilons;
  bool grows_with_n;
  const char* reason;
};

inline constexpr ToleranceRule kToleranceTable[] = {
    {Accuracy::kExact, 0, false, "the same float operations in the same order as the reference"},
    {Accuracy::kElementwise, 4, false,
     "a few float operations per element; nvcc contracts a*b+c into an FMA (one rounding fewer)"},
    {Accuracy::kTranscendental, 80, false,
     "expf/logf/sqrtf differ by a few ulp between libm and CUDA; softmax sums a row of C terms"},
    {Accuracy::kReduction, 16, true,
     "a float sum of n terms in another order (blocking, tiling) against a double sum: ~sqrt(n) "
     "eps"},
    {Accuracy::kConvolution, 128, true,
     "as kReduction, plus FFT/Winograd transforms cuDNN may choose (a few eps of the output's "
     "scale)"},
    {Accuracy::kNormalization, 128, true,
     "mean and variance over n values in another order, then 1/sqrt; the output magnifies them by "
     "1/std"},
    {Accuracy::kOptimizer, 128, false,
     "sqrt and division per element, over a few steps; bias corrections rounded to float"},
    {Accuracy::kRoundedInputs, 4, false,
     "inputs and weights rounded to the dtype (eps/2 each), products summed in fp32, the output "
     "rounded once more: a random-sign sum of n rounding errors grows as sqrt(n), as the "
     "output's scale does, so the error relative to that scale does not grow with n"},
    {Accuracy::kQuantized, 4, false,
     "input and weights quantized to 8-bit codes (half a step of the range each), exact int32 "
     "sums, dequantized in fp32: as kRoundedInputs, a random-sign sum whose error relative to "
     "the output's scale does not grow with n; an 8-bit step is ~2^-7 of the range"},
};

inline Tolerance tolerance(Accuracy accuracy, std::size_t n = 1, DType dtype = DType::kFloat32) {
  for (const ToleranceRule& rule : kToleranceTable) {
    if (rule.accuracy != accuracy) continue;
    const double growth = rule.grows_with_n ? std::sqrt(static_cast<double>(n) + 1.0) : 1.0;
    return {rule.epsilons * epsilon(dtype) * growth, rule.reason};
  }
  return {0.0, "no rule"};
}

// Central differences in float32 with step h = 1e-2 on O(1) inputs: the
// truncation error is O(h^2) and the rounding error eps * |L| / h. Compared per
// element: |analytic - fd| <= abs + rel * |fd|.
struct FiniteDifferenceTolerance {
  double abs, rel;
  const char* reason;
};
inline constexpr FiniteDifferenceTolerance kFiniteDifference{
    2e-2, 2e-2, "float32 central differences, h = 1e-2"};

// --- generators -------------------------------------------------------------
// Fixed seeds only (no std::random_device): every failure reproduces.
inline std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<std::int32_t> random_labels(std::size_t n, int classes, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> v(n);
  for (auto& l : v) l = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(classes));
  return v;
}

// A tensor of `be` holding host data (float32 or int32 by the vector's type).
inline Tensor upload(Backend& be, const Shape& shape, const std::vector<float>& values) {
  Tensor t(be, shape);
  t.copy_from_host(values.data());
  return t;
}
inline Tensor upload(Backend& be, const Shape& shape, const std::vector<std::int32_t>& values) {
  Tensor t(be, shape, DType::kInt32);
  t.copy_from_host(values.data());
  return t;
}
// A copy of a tensor (any backend) on `be`.
inline Tensor copy_to(Backend& be, const Tensor& t) {
  Tensor out(be, t.shape(), t.dtype());
  std::vector<unsigned char> bytes(t.bytes());
  t.copy_to_host(bytes.data());
  out.copy_from_host(bytes.data());
  return out;
}

inline Tensor random_tensor(Backend& be, const Shape& shape, std::uint32_t seed, float lo = -1.0f,
                            float hi = 1.0f) {
  return upload(be, shape,
                random_values(static_cast<std::size_t>(shape_numel(shape)), seed, lo, hi));
}

// --- guards -----------------------------------------------------------------
// An output tensor with kGuard sentinel elements on each side in the same
// allocation; intact() fails if an op wrote outside the tensor.
class Guarded {
 public:
  static constexpr std::int64_t kGuard = 64;
  static constexpr float kSentinel = -12345.678f;
  Guarded(Backend& be, const Shape& shape) : base_(be, {shape_numel(shape) + 2 * kGuard}) {
    be.fill(base_, kSentinel);
    tensor = base_.view(kGuard, shape);
  }
  ::testing::AssertionResult intact(const std::string& what) const {
    const auto all = base_.to_vector();
    const std::size_t n = all.size();
    for (std::size_t i = 0; i < static_cast<std::size_t>(kGuard); ++i) {
      if (all[i] != kSentinel) {
        return ::testing::AssertionFailure()
               << what << ": write before the output at guard " << kGuard - i;
      }
      if (all[n - 1 - i] != kSentinel) {
        return ::testing::AssertionFailure()
               << what << ": write past the output, guard " << kGuard - i;
      }
    }
    return ::testing::AssertionSuccess();
  }
  void check(const std::string& what) const { EXPECT_TRUE(intact(what)); }
  Tensor tensor;

 private:
  Tensor base_;
};

// --- comparisons ------------------------------------------------------------
inline ::testing::AssertionResult close(const std::vector<float>& got,
                                        const std::vector<float>& want, const Tolerance& tol,
                                        const std::string& what) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " elements, want " << want.size();
  }
  double scale = 1.0, worst = 0.0;
  std::size_t at = 0;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    if (!(err <= worst)) {  // NaN counts as worst
      worst = std::isnan(err) ? INFINITY : err;
      at = i;
    }
  }
  if (worst / scale <= tol.max_error) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": error " << worst / scale << " of scale " << scale << " at element " << at
         << " (got " << got[at] << ", want " << want[at] << ") exceeds " << tol.max_error << " ("
         << tol.reason << ")";
}
inline ::testing::AssertionResult close(const Tensor& got, const Tensor& want, const Tolerance& tol,
                                        const std::string& what) {
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << what << ": shape " << shape_to_string(got.shape())
                                         << " vs " << shape_to_string(want.shape());
  }
  return close(got.to_vector(), want.to_vector(), tol, what);
}
inline void expect_close(const Tensor& got, const Tensor& want, const Tolerance& tol,
                         const std::string& what) {
  EXPECT_TRUE(close(got, want, tol, what));
}
inline void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  EXPECT_TRUE(close(a, b, tolerance(Accuracy::kExact), what));
}

// --- finite differences -----------------------------------------------------
// Sum of y * weights in double: a scalar loss whose gradient wrt y is weights.
inline double weighted_sum(const std::vector<float>& y, const std::vector<float>& weights) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * weights[i];
  return s;
}
inline double weighted_sum(const Tensor& y, const std::vector<float>& weights) {
  return weighted_sum(y.to_vector(), weights);
}

// (loss(x + h) - loss(x - h)) / 2h, with x restored afterwards.
inline double central_difference(float& x, const std::function<double()>& loss, float h) {
  const float saved = x;
  x = saved + h;
  const double up = loss();
  x = saved - h;
  const double down = loss();
  x = saved;
  return (up - down) / (2.0 * static_cast<double>(h));
}

// Compares `analytic` (the gradient of loss() wrt `input`) with central
// differences at up to max_points evenly spread elements. `input` is the
// host copy loss() reads (it uploads it where it needs to).
inline void expect_gradient(std::vector<float>& input, const std::vector<float>& analytic,
                            const std::function<double()>& loss, const std::string& what,
                            float h = 1e-2f, int max_points = 24) {
  ASSERT_EQ(input.size(), analytic.size()) << what;
  const std::size_t n = input.size();
  const std::size_t step = std::max<std::size_t>(1, n / static_cast<std::size_t>(max_points));
  for (std::size_t i = 0; i < n; i += step) {
    const double fd = central_difference(input[i], loss, h);
    const double bound = kFiniteDifference.abs + kFiniteDifference.rel * std::fabs(fd);
    EXPECT_NEAR(analytic[i], fd, bound)
        << what << " element " << i << " (" << kFiniteDifference.reason << ")";
  }
}

// InvalidArgument whose message contains `part`.
inline void expect_invalid(const std::function<void()>& call, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "no InvalidArgument; expected one saying \"" << part << "\"";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace stoke::testing
