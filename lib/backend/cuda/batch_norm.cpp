// cuDNN spatial batch normalization: training (batch statistics, running
// statistics with cuDNN's unbiased variance, saved mean and inverse std),
// inference, and backward from the saved statistics.
#include <atomic>
#include <initializer_list>
#include <utility>

#include "backend/cuda/check.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::cuda {
namespace {

// Persistent kernels are faster but cuDNN documents them as less exact;
// strict FP32 keeps the plain spatial mode. Both modes save the same
// statistics, so a backward in one mode after a forward in the other is fine.
cudnnBatchNormMode_t mode(bool strict, bool persistent_ok) {
  return strict || !persistent_ok ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
}

// Runs `call(mode)`; when the persistent mode is not supported for these
// shapes, drops it for good (one warning) and runs the spatial mode.
template <typename Call>
void with_mode(bool strict, std::atomic<bool>& persistent_ok, const std::string& where, Call call) {
  const cudnnBatchNormMode_t m = mode(strict, persistent_ok.load());
  const cudnnStatus_t status = call(m);
  if (status == CUDNN_STATUS_NOT_SUPPORTED && m == CUDNN_BATCHNORM_SPATIAL_PERSISTENT) {
    persistent_ok.store(false);
    log_warn("cuDNN persistent batch norm not supported on " + where + ", using the spatial mode");
    STOKE_CUDNN_CHECK(call(CUDNN_BATCHNORM_SPATIAL));
    return;
  }
  STOKE_CUDNN_CHECK(status);
}

// Unused by cuDNN when the saved statistics are given, but must be valid.
constexpr double kBackwardEpsilon = 1e-5;

}  // namespace

void CudaBackend::do_batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, Tensor& y, Tensor& running_mean,
                                              Tensor& running_var, Tensor& save_mean,
                                              Tensor& save_invstd, const BatchNormParams& params) {
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(x.dim(1)), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  cudnnHandle_t h = cudnn();
  with_mode(options_.strict_fp32, bn_persistent_ok_, name(), [&](cudnnBatchNormMode_t m) {
    return cudnnBatchNormalizationForwardTraining(
        h, m, &one, &zero, xd.get(), x.raw(), xd.get(), y.raw(), bn.get(), gamma.raw(), beta.raw(),
        static_cast<double>(params.momentum), running_mean.raw(), running_var.raw(),
        static_cast<double>(params.epsilon), save_mean.raw(), save_invstd.raw());
  });
}

void CudaBackend::do_batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, const Tensor& running_mean,
                                               const Tensor& running_var, Tensor& y,
                                               const BatchNormParams& params) {
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(x.dim(1)), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  STOKE_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
      cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd.get(), x.raw(), xd.get(), y.raw(), bn.get(),
      gamma.raw(), beta.raw(), running_mean.raw(), running_var.raw(),
      static_cast<double>(params.epsilon)));
}

void CudaBackend::do_batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_invstd,
                                      Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(x.dim(1)), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  cudnnHandle_t h = cudnn();
  with_mode(options_.strict_fp32, bn_persistent_ok_, name(), [&](cudnnBatchNormMode_t m) {
    return cudnnBatchNormalizationBackward(h, m, &one, &zero, &one, &zero, xd.get(), x.raw(),
                                           xd.get(), dy.raw(), xd.get(), dx.raw(), bn.get(),
                                           gamma.raw(), dgamma.raw(), dbeta.raw(), kBackwardEpsilon,
                                           save_mean.raw(), save_invstd.raw());
  });
}

}  // namespace stoke::cuda
