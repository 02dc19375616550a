// Mixed-precision training on CUDA (conv2d_bf16.cpp: cuDNN's bf16 tensor-core
// convolutions): the CPU test's net and noisy set (unit/bf16_training.hpp)
// trained in fp32 and in bf16 on the device reach the same validation
// accuracy within 1 point. Skips with the reason where no device runs it, or
// where the device has no bf16 tensor cores (the refusal is checked then).
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
  expect_bf16_matches_fp32(*gpu);
}

}  // namespace
}  // namespace stoke::testing
