// cuDNN spatial batch normalization: training (batch statistics, running
// statistics with cuDNN's unbiased variance, saved mean and inverse std),
// inference, and backward from the saved statistics. NCHW tensors use the
// plain spatial mode (see batch_norm_mode in cudnn_limits.hpp).
#include <initializer_list>
#include <utility>

#include "backend/cuda/check.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cudnn_limits.hpp"
#include "stoke/error.hpp"

namespace stoke::cuda {
namespace {

std::int64_t channels(const char* op, const Tensor& x) {
  expect_defined(op, "x", x);
  if (x.rank() != 4 && x.rank() != 2) {
    throw InvalidArgument(std::string(op) + ": x must be (N, C, H, W) or (N, C), got " +
                          shape_to_string(x.shape()));
  }
  return x.dim(1);
}

// Checks x-shaped tensors and per-channel (C) tensors of a batch-norm op;
// returns C.
using Named = std::pair<const char*, const Tensor*>;
Shape expect_batch_norm(const char* op, const Tensor& x, std::initializer_list<Named> like_x,
                        std::initializer_list<Named> per_channel) {
  const Shape c{channels(op, x)};
  expect(op, "x", x, x.shape());
  check_cudnn_elements(op, "x", x.shape());
  for (const auto& [name, t] : like_x) expect(op, name, *t, x.shape());
  for (const auto& [name, t] : per_channel) expect(op, name, *t, c);
  return c;
}

// Unused by cuDNN when the saved statistics are given, but must be valid.
constexpr double kBackwardEpsilon = 1e-5;

}  // namespace

void CudaBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, Tensor& y, Tensor& running_mean,
                                              Tensor& running_var, Tensor& save_mean,
                                              Tensor& save_invstd, const BatchNormParams& params) {
  const Shape c = expect_batch_norm("batch_norm_forward_training", x, {{"y", &y}},
                                    {{"gamma", &gamma},
                                     {"beta", &beta},
                                     {"running_mean", &running_mean},
                                     {"running_var", &running_var},
                                     {"save_mean", &save_mean},
                                     {"save_invstd", &save_invstd}});
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(c[0]), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  STOKE_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      cudnn(), batch_norm_mode(false, options_.strict_fp32), &one, &zero, xd.get(), x.raw(),
      xd.get(), y.raw(), bn.get(), gamma.raw(), beta.raw(), static_cast<double>(params.momentum),
      running_mean.raw(), running_var.raw(), static_cast<double>(params.epsilon), save_mean.raw(),
      save_invstd.raw()));
}

void CudaBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, const Tensor& running_mean,
                                               const Tensor& running_var, Tensor& y,
                                               const BatchNormParams& params) {
  const Shape c = expect_batch_norm("batch_norm_forward_inference", x, {{"y", &y}},
                                    {{"gamma", &gamma},
                                     {"beta", &beta},
                                     {"running_mean", &running_mean},
                                     {"running_var", &running_var}});
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(c[0]), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  STOKE_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
      cudnn(), batch_norm_mode(false, options_.strict_fp32), &one, &zero, xd.get(), x.raw(),
      xd.get(), y.raw(), bn.get(), gamma.raw(), beta.raw(), running_mean.raw(), running_var.raw(),
      static_cast<double>(params.epsilon)));
}

void CudaBackend::batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_invstd,
                                      Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const Shape c = expect_batch_norm("batch_norm_backward", x, {{"dy", &dy}, {"dx", &dx}},
                                    {{"gamma", &gamma},
                                     {"save_mean", &save_mean},
                                     {"save_invstd", &save_invstd},
                                     {"dgamma", &dgamma},
                                     {"dbeta", &dbeta}});
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(c[0]), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  STOKE_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      cudnn(), batch_norm_mode(false, options_.strict_fp32), &one, &zero, &one, &zero, xd.get(),
      x.raw(), xd.get(), dy.raw(), xd.get(), dx.raw(), bn.get(), gamma.raw(), dgamma.raw(),
      dbeta.raw(), kBackwardEpsilon, save_mean.raw(), save_invstd.raw()));
}

}  // namespace stoke::cuda
