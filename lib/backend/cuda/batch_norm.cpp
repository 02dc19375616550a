// cuDNN spatial batch normalization: training (batch statistics, running
// statistics with cuDNN's unbiased variance, saved mean and inverse std),
// inference, and backward from the saved statistics with the forward's
// epsilon (cuDNN asks for the same one in both passes). NCHW tensors use the
// plain spatial mode (see batch_norm_mode in cudnn_limits.hpp).
#include "backend/cuda/check.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cudnn_limits.hpp"
#include "stoke/error.hpp"

namespace stoke::cuda {

void CudaBackend::do_batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                                 const Tensor& beta, Tensor& y,
                                                 Tensor& running_mean, Tensor& running_var,
                                                 Tensor& save_mean, Tensor& save_invstd,
                                                 const BatchNormParams& params) {
  check_cudnn_elements("batch_norm_forward_training", "x", x.shape());
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(x.dim(1)), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  STOKE_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      cudnn(), batch_norm_mode(false, options_.strict_fp32), &one, &zero, xd.get(), x.raw(),
      xd.get(), y.raw(), bn.get(), gamma.raw(), beta.raw(), static_cast<double>(params.momentum),
      running_mean.raw(), running_var.raw(), static_cast<double>(params.epsilon), save_mean.raw(),
      save_invstd.raw()));
}

void CudaBackend::do_batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                                  const Tensor& beta, const Tensor& running_mean,
                                                  const Tensor& running_var, Tensor& y,
                                                  const BatchNormParams& params) {
  check_cudnn_elements("batch_norm_forward_inference", "x", x.shape());
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(x.dim(1)), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  STOKE_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
      cudnn(), batch_norm_mode(false, options_.strict_fp32), &one, &zero, xd.get(), x.raw(),
      xd.get(), y.raw(), bn.get(), gamma.raw(), beta.raw(), running_mean.raw(), running_var.raw(),
      static_cast<double>(params.epsilon)));
}

void CudaBackend::do_batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                         const Tensor& save_mean, const Tensor& save_invstd,
                                         Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                         const BatchNormParams& params) {
  check_cudnn_elements("batch_norm_backward", "x", x.shape());
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(x.dim(1)), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  STOKE_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      cudnn(), batch_norm_mode(false, options_.strict_fp32), &one, &zero, &one, &zero, xd.get(),
      x.raw(), xd.get(), dy.raw(), xd.get(), dx.raw(), bn.get(), gamma.raw(), dgamma.raw(),
      dbeta.raw(), static_cast<double>(params.epsilon), save_mean.raw(), save_invstd.raw()));
}

}  // namespace stoke::cuda
