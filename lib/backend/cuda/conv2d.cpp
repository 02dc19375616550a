// cuDNN convolution: forward, backward data, backward filter and bias, with
// the algorithm of each pass from conv2d_algo.cpp and its workspace from the pool.
#include "backend/cuda/conv2d.hpp"

#include <algorithm>

#include "backend/cuda/check.hpp"
#include "stoke/error.hpp"

namespace stoke::cuda {
namespace {

int to_int(std::int64_t v) {
  return static_cast<int>(v);
}

}  // namespace

ConvSetup::ConvSetup(const char* op, const Shape& x, const Shape& w, const Conv2dParams& p,
                     bool strict) {
  (void)op;  // the shape errors name conv2d (stoke::conv2d_output_shape)
  y_shape_ = conv2d_output_shape(x, w, p);
  key_ = shape_to_string(x) + " w" + shape_to_string(w) + " s" + std::to_string(p.stride_h) + "," +
         std::to_string(p.stride_w) + " p" + std::to_string(p.pad_h) + "," +
         std::to_string(p.pad_w) + " d" + std::to_string(p.dilation_h) + "," +
         std::to_string(p.dilation_w) + " g" + std::to_string(p.groups) +
         (strict ? " fp32" : " tf32");
  x_ = std::make_unique<TensorDesc>(x);
  y_ = std::make_unique<TensorDesc>(y_shape_);
  STOKE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
  STOKE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                               to_int(w[0]), to_int(w[1]), to_int(w[2]),
                                               to_int(w[3])));
  STOKE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
  STOKE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                                                    p.dilation_h, p.dilation_w,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  STOKE_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_, p.groups));
  // Strict FP32 asks the heuristics for FMA-only algorithms; otherwise cuDNN
  // may pick TF32 tensor-core ones.
  set_math(strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH);
}

ConvSetup::~ConvSetup() {
  if (conv_) STOKE_CUDNN_WARN(cudnnDestroyConvolutionDescriptor(conv_));
  if (w_) STOKE_CUDNN_WARN(cudnnDestroyFilterDescriptor(w_));
}

void ConvSetup::set_math(int math_type) const {
  STOKE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, static_cast<cudnnMathType_t>(math_type)));
}

std::size_t CudaBackend::conv2d_workspace_bytes(const Shape& x, const Shape& w,
                                                const Conv2dParams& params) const {
  const ConvSetup setup("conv2d_workspace_bytes", x, w, params, options_.strict_fp32);
  std::size_t most = 0;
  for (int pass : {kConvForward, kConvBackwardData, kConvBackwardFilter}) {
    most = std::max(most, choose_conv_algo(pass, ConvCall{setup}).workspace_bytes);
  }
  return most;
}

void CudaBackend::do_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                                 const Conv2dParams& params) {
  const ConvSetup s("conv2d_forward", x.shape(), w.shape(), params, options_.strict_fp32);
  const ConvAlgoChoice c = choose_conv_algo(kConvForward, ConvCall{s, x.raw(), w.raw(), y.raw()});
  s.set_math(c.math_type);
  void* ws = workspace(c.workspace_bytes);
  const float one = 1.0f, zero = 0.0f;
  cudnnHandle_t h = cudnn();
  STOKE_CUDNN_CHECK(cudnnConvolutionForward(h, &one, s.x(), x.raw(), s.w(), w.raw(), s.conv(),
                                            static_cast<cudnnConvolutionFwdAlgo_t>(c.algorithm), ws,
                                            c.workspace_bytes, &zero, s.y(), y.raw()));
  if (bias.defined()) {
    const TensorDesc b(1, static_cast<int>(w.dim(0)), 1, 1);
    STOKE_CUDNN_CHECK(cudnnAddTensor(h, &one, b.get(), bias.raw(), &one, s.y(), y.raw()));
  }
}

void CudaBackend::do_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                                  Tensor& dw, Tensor& db, const Conv2dParams& params) {
  const ConvSetup s("conv2d_backward", x.shape(), w.shape(), params, options_.strict_fp32);
  const float one = 1.0f, zero = 0.0f;
  if (db.defined()) {
    const TensorDesc b(1, static_cast<int>(w.dim(0)), 1, 1);
    STOKE_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(cudnn(), &one, s.y(), dy.raw(), &zero, b.get(), db.raw()));
  }
  {
    const ConvAlgoChoice c =
        choose_conv_algo(kConvBackwardFilter, ConvCall{s, x.raw(), dy.raw(), dw.raw()});
    s.set_math(c.math_type);
    void* ws = workspace(c.workspace_bytes);
    STOKE_CUDNN_CHECK(
        cudnnConvolutionBackwardFilter(cudnn(), &one, s.x(), x.raw(), s.y(), dy.raw(), s.conv(),
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algorithm),
                                       ws, c.workspace_bytes, &zero, s.w(), dw.raw()));
  }
  if (dx.defined()) {
    const ConvAlgoChoice c =
        choose_conv_algo(kConvBackwardData, ConvCall{s, w.raw(), dy.raw(), dx.raw()});
    s.set_math(c.math_type);
    void* ws = workspace(c.workspace_bytes);
    STOKE_CUDNN_CHECK(
        cudnnConvolutionBackwardData(cudnn(), &one, s.w(), w.raw(), s.y(), dy.raw(), s.conv(),
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algorithm), ws,
                                     c.workspace_bytes, &zero, s.x(), dx.raw()));
  }
}

}  // namespace stoke::cuda
