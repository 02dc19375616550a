// The fixture of the CUDA-vs-CPU training-step parity tests
// (cuda_step_parity_test.cpp): a strict-FP32 CUDA backend, seeded random
// tensors on the CPU and copies of them on the GPU. Op-by-op parity is the
// op suite's (tests/unit/op_suite_*, instantiated for CUDA in
// op_suite_cuda_test.cpp); tolerances, guards and generators are the one
// test toolkit's (tests/unit/op_test_util.hpp).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "gpu/gpu_fixture.hpp"
#include "stoke/backend.hpp"
#include "stoke/cuda.hpp"
#include "stoke/nn/model.hpp"
#include "unit/op_test_util.hpp"

namespace stoke::testing {

// Whole steps compound the per-op errors of the toolkit's table.
inline constexpr Tolerance kTrainStep{
    2e-4,
    "a whole forward/backward/update: the per-op errors of the tolerance table compound through "
    "~20 layers"};
// One convolution of the step tests' sizes against the CPU backend.
inline constexpr Tolerance kConv{
    5e-5,
    "sums of K <= ~1200 products in another order (cuBLAS/cuDNN tiling), plus FFT/Winograd "
    "algorithms cuDNN may choose"};

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
    return random_tensor(cpu(), shape, seed, lo, hi);
  }
  Tensor labels(std::int64_t n, int classes, std::uint32_t seed) {
    return upload(cpu(), {n}, random_labels(static_cast<std::size_t>(n), classes, seed));
  }
  // A copy of a CPU tensor on the GPU (or on `be`).
  Tensor to_gpu(const Tensor& host) { return copy_to(gpu(), host); }
  // The GPU model's eval forward equals the CPU model's at each batch.
  void expect_same_eval_forward(nn::Model& cpu_model, nn::Model& gpu_model,
                                std::initializer_list<int> batches, std::uint32_t seed,
                                const Tolerance& tol, const std::string& what) {
    for (const int batch : batches) {
      const Tensor x =
          random(cpu_model.input_shape(batch), seed + static_cast<std::uint32_t>(batch));
      const Tensor& want = cpu_model.forward(x, false);
      const Tensor got = copy_to(cpu(), gpu_model.forward(to_gpu(x), false));
      EXPECT_TRUE(close(got, want, tol, what + ", batch " + std::to_string(batch)));
    }
  }
  Tensor to_gpu(Backend& be, const Tensor& host) { return copy_to(be, host); }

  // gpu vs cpu (both float32 of one shape) within `tol` (the toolkit's measure).
  static ::testing::AssertionResult close(const Tensor& gpu_t, const Tensor& cpu_t,
                                          const Tolerance& tol, const std::string& what) {
    return ::stoke::testing::close(gpu_t, cpu_t, tol, what);
  }

  std::unique_ptr<GpuBackend> gpu_;
};

// Copies parameters and buffers of `from` (CPU) into `to` so both start equal.
inline void copy_model(const nn::Model& from, nn::Model& to) {
  const std::vector<float> params = from.parameters().to_vector();
  to.parameters().copy_from_host(params.data());
  const auto src = from.named_buffers();
  auto dst = to.named_buffers();
  ASSERT_EQ(src.size(), dst.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    const std::vector<float> v = src[i].tensor.to_vector();
    dst[i].tensor.copy_from_host(v.data());
  }
}

}  // namespace stoke::testing
