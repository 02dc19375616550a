// Mixed-precision training on CUDA (conv2d_low.cpp: cuDNN's bf16 and fp16
// tensor-core convolutions): the CPU test's net and noisy set
// (unit/bf16_training.hpp) trained in fp32 and in bf16 (or fp16 with loss
// scaling) on the device reach the same validation accuracy within 1 point. Skips with the reason
// where no device runs it, or where the device has no bf16 tensor cores (the refusal is checked
// then).
#include "gpu/gpu_fixture.hpp"
#include "stoke/cuda.hpp"
#include "unit/bf16_training.hpp"

namespace stoke::testing {
namespace {

TEST_F(Bf16Training, ReachesFp32ValidationAccuracyWithinOnePointOnTheGpu) {
  const std::string why = gpu_unavailable_reason(query_system());
  if (!why.empty()) GTEST_SKIP() << why;
  auto gpu = create_cuda_backend(0, Settings{}, CudaBackendOptions{});
  if (gpu->training_precision_support(Precision::kBf16) == PrecisionSupport::kNone) {
    EXPECT_THROW(gpu->set_training_precision(Precision::kBf16), Unsupported);
    GTEST_SKIP() << gpu->name() << " has no bf16 tensor cores (compute capability below 8.0)";
  }
  EXPECT_EQ(gpu->training_precision_support(Precision::kBf16), PrecisionSupport::kNative);
  expect_matches_fp32(*gpu, Precision::kBf16);
}

// fp16 with the trainer's loss scaling (auto: dynamic for fp16): the same
// accuracy as fp32 within 1 point, the scale in use and reported.
TEST_F(Bf16Training, Fp16WithLossScalingReachesFp32ValidationAccuracyOnTheGpu) {
  const std::string why = gpu_unavailable_reason(query_system());
  if (!why.empty()) GTEST_SKIP() << why;
  auto gpu = create_cuda_backend(0, Settings{}, CudaBackendOptions{});
  if (gpu->training_precision_support(Precision::kFp16) == PrecisionSupport::kNone) {
    EXPECT_THROW(gpu->set_training_precision(Precision::kFp16), Unsupported);
    GTEST_SKIP() << gpu->name() << " has no fp16 tensor cores (compute capability below 7.0)";
  }
  const FitResult r = expect_matches_fp32(*gpu, Precision::kFp16);
  EXPECT_GT(r.loss_scale, 0.0f) << "fp16 trained without loss scaling";
  std::printf("fp16: final loss scale %g, %llu skipped steps\n", static_cast<double>(r.loss_scale),
              static_cast<unsigned long long>(r.skipped_steps));
}

}  // namespace
}  // namespace stoke::testing
