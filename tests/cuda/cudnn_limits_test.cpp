// What cuDNN's legacy API can describe, checked before any cuDNN call (so
// these run on any machine): the 2^31-element descriptor limit and the
// batch-norm mode of stoke's NCHW layout.
#include "backend/cuda/cudnn_limits.hpp"

#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/conv2d.hpp"
#include "stoke/error.hpp"

namespace stoke::cuda {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Unsupported& e) {
    return e.what();
  }
  return "";
}

TEST(CudnnLimits, TensorOver2To31ElementsIsRefusedNamingTensorSizeAndLimit) {
  const std::string m = message_of([] {
    check_cudnn_elements("conv2d_forward", "x", Shape{8, 64, 2448, 2048});
  });
  EXPECT_NE(m.find("conv2d_forward"), std::string::npos) << m;
  EXPECT_NE(m.find("'x'"), std::string::npos) << m;
  EXPECT_NE(m.find("2566914048"), std::string::npos) << m;
  EXPECT_NE(m.find("2147483647"), std::string::npos) << m;
  EXPECT_NO_THROW(check_cudnn_elements("op", "x", Shape{1, 1, 1, kCudnnMaxElements}));
  EXPECT_THROW(check_cudnn_elements("op", "x", Shape{2, 1, 1, kCudnnMaxElements / 2 + 1}),
               Unsupported);
}

// The convolution's setup checks its tensors before it builds a descriptor:
// a large input, or an output made large by the filter count, is refused.
TEST(CudnnLimits, ConvolutionSetupRefusesAnOversizedInputOrOutput) {
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const std::string x = message_of([&] {
    ConvSetup s("conv2d_forward", Shape{8, 64, 2448, 2048}, Shape{64, 64, 3, 3}, p, false);
  });
  EXPECT_NE(x.find("tensor 'x'"), std::string::npos) << x;
  const std::string y = message_of([&] {
    ConvSetup s("conv2d_backward", Shape{8, 3, 2448, 2048}, Shape{64, 3, 3, 3}, p, false);
  });
  EXPECT_NE(y.find("conv2d_backward: tensor 'y'"), std::string::npos) << y;
}

// Persistent batch norm can return Inf/NaN without an error on NCHW input:
// the default (non-strict) path must not use it there.
TEST(CudnnLimits, BatchNormOnNchwUsesThePlainSpatialMode) {
  EXPECT_EQ(batch_norm_mode(false, false), CUDNN_BATCHNORM_SPATIAL);
  EXPECT_EQ(batch_norm_mode(false, true), CUDNN_BATCHNORM_SPATIAL);
  EXPECT_EQ(batch_norm_mode(true, true), CUDNN_BATCHNORM_SPATIAL);
  EXPECT_EQ(batch_norm_mode(true, false), CUDNN_BATCHNORM_SPATIAL_PERSISTENT);
}

}  // namespace
}  // namespace stoke::cuda
