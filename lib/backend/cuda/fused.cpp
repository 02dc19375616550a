// The fused ops on CUDA. The convolution with bias and ReLU (and a residual)
// is cuDNN's cudnnConvolutionBiasActivationForward, with the forward
// algorithm the plain convolution chose (ReLU works with every algorithm;
// identity only with IMPLICIT_PRECOMP_GEMM, so identity and bias-less calls
// run the plain convolution and one elementwise kernel). Batch norm + ReLU
// runs cuDNN's batch norm and the ReLU kernels: cuDNN fuses the activation
// only for NHWC half-precision batch norm.
#include "backend/cuda/check.hpp"
#include "backend/cuda/conv2d.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cudnn_limits.hpp"

namespace stoke::cuda {
namespace {

class ReluDesc {
 public:
  ReluDesc() {
    STOKE_CUDNN_CHECK(cudnnCreateActivationDescriptor(&desc_));
    STOKE_CUDNN_CHECK(
        cudnnSetActivationDescriptor(desc_, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  }
  ~ReluDesc() { STOKE_CUDNN_WARN(cudnnDestroyActivationDescriptor(desc_)); }
  ReluDesc(const ReluDesc&) = delete;
  ReluDesc& operator=(const ReluDesc&) = delete;
  cudnnActivationDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnActivationDescriptor_t desc_ = nullptr;
};

}  // namespace

void CudaBackend::do_conv2d_fused_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                          const Tensor& residual, Tensor& y,
                                          const Conv2dParams& params, Activation activation) {
  // bf16 or fp16: the low-precision convolution, then the bias, residual and ReLU in fp32.
  if (activation != Activation::kRelu || !bias.defined() ||
      convolution_precision() != Precision::kFp32) {
    do_conv2d_forward(x, w, bias, y, params);
    if (residual.defined() && activation == Activation::kRelu) return do_add_relu(y, residual, y);
    if (residual.defined()) return do_add(y, residual, y);
    if (activation == Activation::kRelu) do_relu_forward(y, y);
    return;
  }
  const auto lock = workspace_lock();
  const auto setup = conv_setup("conv2d_fused_forward", x.shape(), w.shape(), params);
  const ConvSetup& s = *setup;
  const ConvAlgoChoice c = choose_conv_algo(kConvForward, ConvCall{s, x.raw(), w.raw(), y.raw()});
  s.set_math(c.math_type);
  void* ws = workspace(c.workspace_bytes);
  const TensorDesc b(1, static_cast<int>(w.dim(0)), 1, 1);
  const ReluDesc relu;
  const float one = 1.0f;
  // Without a residual z is y itself with weight 0 (cuDNN does not read it then).
  const float z_weight = residual.defined() ? 1.0f : 0.0f;
  const void* z = residual.defined() ? residual.raw() : y.raw();
  STOKE_CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
      cudnn(), &one, s.x(), x.raw(), s.w(), w.raw(), s.conv(),
      static_cast<cudnnConvolutionFwdAlgo_t>(c.algorithm), ws, c.workspace_bytes, &z_weight, s.y(),
      z, b.get(), bias.raw(), relu.get(), s.y(), y.raw()));
}

void CudaBackend::do_add_relu(const Tensor& a, const Tensor& b, Tensor& y) {
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  const long long n = a.numel();
  launch_n("stoke_add_relu", n, {&ap, &bp, &yp, &n});
}

void CudaBackend::do_batch_norm_relu_forward_training(const Tensor& x, const Tensor& gamma,
                                                      const Tensor& beta, Tensor& y,
                                                      Tensor& running_mean, Tensor& running_var,
                                                      Tensor& save_mean, Tensor& save_invstd,
                                                      const BatchNormParams& params) {
  do_batch_norm_forward_training(x, gamma, beta, y, running_mean, running_var, save_mean,
                                 save_invstd, params);
  do_relu_forward(y, y);
}

void CudaBackend::do_batch_norm_relu_backward(const Tensor& x, const Tensor& y, const Tensor& dy,
                                              const Tensor& gamma, const Tensor& save_mean,
                                              const Tensor& save_invstd, Tensor& dx, Tensor& dgamma,
                                              Tensor& dbeta, const BatchNormParams& params) {
  // dy masked to y > 0 in the backend's workspace (kept between ops, safe
  // inside a captured graph), then batch norm's backward from it.
  check_cudnn_elements("batch_norm_relu_backward", "x", x.shape());
  const auto lock = workspace_lock();
  const float* yp = y.data<float>();
  const float* dyp = dy.data<float>();
  auto* masked = static_cast<float*>(workspace(dy.bytes()));
  const long long n = y.numel();
  launch_n("stoke_relu_backward", n, {&yp, &dyp, &masked, &n});
  const TensorDesc xd(x.shape()), bn(1, static_cast<int>(x.dim(1)), 1, 1);
  const float one = 1.0f, zero = 0.0f;
  STOKE_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      cudnn(), batch_norm_mode(false, options_.strict_fp32), &one, &zero, &one, &zero, xd.get(),
      x.raw(), xd.get(), masked, xd.get(), dx.raw(), bn.get(), gamma.raw(), dgamma.raw(),
      dbeta.raw(), static_cast<double>(params.epsilon), save_mean.raw(), save_invstd.raw()));
}

}  // namespace stoke::cuda
