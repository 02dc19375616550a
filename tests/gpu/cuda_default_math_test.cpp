// The default (non-strict, TF32-allowed) CUDA path against the CPU: the
// parity suite runs strict FP32; this runs what users get by default. Batch
// norm there must use the plain spatial mode on NCHW (the persistent mode can
// return Inf/NaN without an error), so its results are finite and close.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/cuda_parity.hpp"

namespace stoke::testing {
namespace {

class CudaDefaultMath : public CudaParity {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu_ = create_cuda_backend(0, Settings{}, CudaBackendOptions{});
    ASSERT_FALSE(gpu_->strict_fp32());
  }
  static bool finite(const Tensor& t) {
    for (float v : t.to_vector())
      if (!std::isfinite(v)) return false;
    return true;
  }
};

TEST_F(CudaDefaultMath, BatchNormTrainingAndBackwardAreFiniteAndMatchTheCpu) {
  // Large activations over many positions: where persistent kernels lose accuracy.
  for (const Shape& s : {Shape{32, 64, 28, 28}, Shape{4, 6, 5, 7}}) {
    const std::string what = shape_to_string(s);
    const Shape c{s[1]};
    const Tensor x = random(s, 11, -40.0f, 60.0f), gamma = random(c, 12, 0.5f, 1.5f),
                 beta = random(c, 13);
    const BatchNormParams p{1e-5f, 0.1f};
    // Statistics over N*H*W values per channel, then TF32-free cuDNN math.
    const Tolerance kBatchNorm =
        tolerance(Accuracy::kNormalization, static_cast<std::size_t>(s[0] * s[2] * s[3]));
    Tensor y(cpu(), s), rm(cpu(), c), rv(cpu(), c), sm(cpu(), c), si(cpu(), c);
    cpu().fill(rm, 0.0f);
    cpu().fill(rv, 1.0f);
    Tensor grm = to_gpu(rm), grv = to_gpu(rv), gy(gpu(), s), gsm(gpu(), c), gsi(gpu(), c);
    cpu().batch_norm_forward_training(x, gamma, beta, y, rm, rv, sm, si, p);
    const Tensor gx = to_gpu(x), gg = to_gpu(gamma);
    gpu().batch_norm_forward_training(gx, gg, to_gpu(beta), gy, grm, grv, gsm, gsi, p);
    EXPECT_TRUE(finite(gy) && finite(gsm) && finite(gsi)) << what;
    EXPECT_TRUE(close(gy, y, kBatchNorm, "bn y " + what));
    EXPECT_TRUE(close(gsi, si, kBatchNorm, "bn save_invstd " + what));

    const Tensor dy = random(s, 14);
    Tensor dx(cpu(), s), dg(cpu(), c), db(cpu(), c), gdx(gpu(), s), gdg(gpu(), c), gdb(gpu(), c);
    cpu().batch_norm_backward(x, dy, gamma, sm, si, dx, dg, db, p);
    gpu().batch_norm_backward(gx, to_gpu(dy), gg, gsm, gsi, gdx, gdg, gdb, p);
    EXPECT_TRUE(finite(gdx) && finite(gdg) && finite(gdb)) << what;
    EXPECT_TRUE(close(gdx, dx, kBatchNorm, "bn dx " + what));
    EXPECT_TRUE(close(gdg, dg, kBatchNorm, "bn dgamma " + what));
  }
}

}  // namespace
}  // namespace stoke::testing
