// Helpers of the CUDA-vs-CPU parity tests: a strict-FP32 CUDA backend,
// seeded random tensors on both backends, outputs framed by guard values,
// and the one tolerance table.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_fixture.hpp"
#include "stoke/backend.hpp"
#include "stoke/cuda.hpp"

namespace stoke::testing {

// Error measure: max |gpu - cpu| / max(1, max |cpu|), so a tolerance reads as
// "relative to the output's scale". float32 epsilon is 1.19e-7.
struct Tolerance {
  double max_error;
  const char* reason;
};

// One table, by op family. Strict FP32 (no TF32) throughout.
inline constexpr Tolerance kExact{
    0.0, "one float operation per element in the same order on both backends"};
inline constexpr Tolerance kElementwise{
    4 * 1.19e-7,
    "a few float operations per element; nvcc contracts a*b+c into an FMA "
    "(one rounding fewer than the CPU)"};
inline constexpr Tolerance kWindowSum{32 * 1.19e-7,
                                      "sums of <= 9 terms (pool windows) or one plane"};
inline constexpr Tolerance kSoftmax{
    1e-5, "expf/logf differ by a few ulp between CUDA and libm; row sums of C terms"};
inline constexpr Tolerance kGemm{
    2e-5,
    "sums of K <= ~1200 products in another order (cuBLAS/cuDNN tiling): error grows "
    "~sqrt(K) eps"};
inline constexpr Tolerance kConv{
    5e-5,
    "as kGemm, plus FFT/Winograd algorithms cuDNN may choose, whose transforms add a "
    "few eps of the output's scale"};
inline constexpr Tolerance kBatchNorm{
    1e-4,
    "mean and variance over N*H*W values in another order, then 1/sqrt; the "
    "normalized output magnifies their error by 1/std"};
inline constexpr Tolerance kAdam{
    1e-5, "sqrt and division per element; bias corrections rounded to float"};
inline constexpr Tolerance kTrainStep{
    2e-4,
    "a whole forward/backward/update: the per-op errors above compound through "
    "~20 layers"};

class CudaParity : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    CudaBackendOptions options;
    options.strict_fp32 = true;
    gpu_ = create_cuda_backend(0, Settings{}, options);
  }

  Backend& cpu() { return cpu_backend(); }
  GpuBackend& gpu() { return *gpu_; }

  // Uniform in [lo, hi) from a fixed seed, on the CPU backend.
  Tensor random(const Shape& shape, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    Tensor t(cpu(), shape);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    float* p = t.data<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
    return t;
  }
  Tensor labels(std::int64_t n, int classes, std::uint32_t seed) {
    Tensor t(cpu(), {n}, DType::kInt32);
    std::mt19937 rng(seed);
    for (std::int64_t i = 0; i < n; ++i)
      t.data<std::int32_t>()[i] = static_cast<std::int32_t>(rng() % classes);
    return t;
  }
  // A copy of a CPU tensor on the GPU.
  Tensor to_gpu(const Tensor& host) {
    Tensor t(gpu(), host.shape(), host.dtype());
    t.copy_from_host(host.raw());
    return t;
  }
  Tensor to_gpu(Backend& be, const Tensor& host) {
    Tensor t(be, host.shape(), host.dtype());
    t.copy_from_host(host.raw());
    return t;
  }

  // An output tensor on the GPU framed by kGuard elements of a sentinel on
  // each side; guards_intact() checks that no kernel wrote outside it.
  static constexpr std::int64_t kGuard = 64;
  static constexpr float kSentinel = -7777.25f;
  struct Guarded {
    Tensor block;  // numel + 2 * kGuard
    Tensor view;   // the output
  };
  Guarded guarded(const Shape& shape) { return guarded(gpu(), shape); }
  Guarded guarded(Backend& be, const Shape& shape) {
    const std::int64_t n = shape_numel(shape);
    Tensor block(be, {n + 2 * kGuard});
    be.fill(block, kSentinel);
    return {block, block.view(kGuard, shape)};
  }
  ::testing::AssertionResult guards_intact(const Guarded& g, const char* what) {
    const std::vector<float> all = g.block.to_vector();
    const std::int64_t n = g.view.numel();
    for (std::int64_t i = 0; i < kGuard; ++i) {
      if (all[static_cast<std::size_t>(i)] != kSentinel) {
        return ::testing::AssertionFailure()
               << what << ": write before the output at guard " << (kGuard - i);
      }
      if (all[static_cast<std::size_t>(kGuard + n + i)] != kSentinel) {
        return ::testing::AssertionFailure()
               << what << ": write past the output at element " << n + i;
      }
    }
    return ::testing::AssertionSuccess();
  }

  // gpu vs cpu (both float32 of one shape) within `tol`.
  static ::testing::AssertionResult close(const Tensor& gpu_t, const Tensor& cpu_t,
                                          const Tolerance& tol, const std::string& what) {
    if (gpu_t.shape() != cpu_t.shape()) {
      return ::testing::AssertionFailure() << what << ": shape " << shape_to_string(gpu_t.shape())
                                           << " vs " << shape_to_string(cpu_t.shape());
    }
    const std::vector<float> a = gpu_t.to_vector();
    const std::vector<float> b = cpu_t.to_vector();
    double scale = 1.0, worst = 0.0;
    std::size_t at = 0;
    for (float v : b) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double err = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
      if (!(err <= worst)) {  // NaN counts as worst
        worst = std::isnan(err) ? INFINITY : err;
        at = i;
      }
    }
    if (worst / scale <= tol.max_error) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << what << ": error " << worst / scale << " of scale " << scale << " at element " << at
           << " (gpu " << a[at] << ", cpu " << b[at] << ") exceeds " << tol.max_error << " ("
           << tol.reason << ")";
  }

  std::unique_ptr<GpuBackend> gpu_;
};

}  // namespace stoke::testing
