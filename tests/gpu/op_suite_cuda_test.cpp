// The op suite (tests/unit/op_suite_*_test.cpp, compiled into this binary too)
// instantiated for CUDA: a strict-FP32 backend of its own on device 0
// (cuDNN with FMA math, cuBLAS pedantic: no TF32), checked against the naive
// reference like every backend. Skips with the reason where no device can run it.
#include <algorithm>

#include "gpu/gpu_fixture.hpp"
#include "stoke/cuda.hpp"
#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

std::shared_ptr<Backend> make_strict_cuda(std::string* why_not) {
  const std::string why = gpu_unavailable_reason(query_system());
  if (!why.empty()) {
    *why_not = why;
    return nullptr;
  }
  CudaBackendOptions options;
  options.strict_fp32 = true;
  return create_cuda_backend(0, Settings{}, options);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Gpu, OpSuite,
                         ::testing::Values(BackendUnderTest{"cuda", make_strict_cuda}),
                         backend_test_name);

}  // namespace stoke::testing

namespace stoke::testing {
namespace {

// Strict FP32 gives every pass of every convolution an FMA-only algorithm
// (no tensor-op/TF32 algorithm), which the suite's tolerances assume.
// tensor_ops is what cuDNN reported for the chosen candidate (strict does not
// force it off), so the check fails when strict lets a tensor-op candidate
// through; the same convolutions on a default-math backend must report one,
// or the check could not tell.
using CudaOpSuite = GpuTest;
std::vector<ConvAlgoChoice> conv_choices(GpuBackend& gpu) {
  const Shape xs{8, 64, 32, 32}, ws{64, 64, 3, 3};
  const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  Tensor x = random_tensor(gpu, xs, 1), w = random_tensor(gpu, ws, 2),
         b = random_tensor(gpu, {64}, 3);
  Tensor y(gpu, conv2d_output_shape(xs, ws, p)), dx(gpu, xs), dw(gpu, ws), db(gpu, {64});
  gpu.conv2d_forward(x, w, b, y, p);
  gpu.conv2d_backward(x, w, y, dx, dw, db, p);
  gpu.synchronize();
  return gpu.conv_algorithms();
}

TEST_F(CudaOpSuite, StrictConvolutionsChooseFmaOnlyAlgorithms) {
  std::string why;
  const std::shared_ptr<Backend> owner = make_strict_cuda(&why);
  ASSERT_TRUE(owner) << why;
  const auto algorithms = conv_choices(dynamic_cast<GpuBackend&>(*owner));
  EXPECT_EQ(algorithms.size(), 3u) << "forward, backward data, backward filter";
  for (const ConvAlgoChoice& a : algorithms) {
    EXPECT_FALSE(a.tensor_ops) << a.pass << " " << a.key << " uses " << a.algorithm_name;
    EXPECT_EQ(a.math_type, 3) << a.pass << ": strict runs with CUDNN_FMA_MATH";
  }
  auto tf32 = create_cuda_backend(0, Settings{}, CudaBackendOptions{});
  const auto defaults = conv_choices(*tf32);
  EXPECT_TRUE(std::any_of(defaults.begin(), defaults.end(), [](const ConvAlgoChoice& a) {
    return a.tensor_ops;
  })) << "no default-math choice reports tensor ops: the strict check above proves nothing";
}

}  // namespace
}  // namespace stoke::testing
