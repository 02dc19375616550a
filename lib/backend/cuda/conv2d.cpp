// cuDNN convolution: forward, backward data, backward filter and bias, with
// the algorithm of each pass from conv2d_algo.cpp and its workspace from the pool.
#include "backend/cuda/conv2d.hpp"

#include <algorithm>

#include "backend/cuda/check.hpp"
#include "backend/cuda/cudnn_limits.hpp"
#include "stoke/error.hpp"

namespace stoke::cuda {
namespace {

int to_int(std::int64_t v) {
  return static_cast<int>(v);
}

}  // namespace

ConvSetup::ConvSetup(const char* op, const Shape& x, const Shape& w, const Conv2dParams& p,
                     bool strict, Precision precision) {
  const bool low = precision == Precision::kBf16 || precision == Precision::kFp16;
  y_shape_ = conv2d_output_shape(x, w, p);
  check_cudnn_elements(op, "x", x);
  check_cudnn_elements(op, "w", w);
  check_cudnn_elements(op, "y", y_shape_);
  key_ = shape_to_string(x) + " w" + shape_to_string(w) + " s" + std::to_string(p.stride_h) + "," +
         std::to_string(p.stride_w) + " p" + std::to_string(p.pad_h) + "," +
         std::to_string(p.pad_w) + " d" + std::to_string(p.dilation_h) + "," +
         std::to_string(p.dilation_w) + " g" + std::to_string(p.groups) +
         (low      ? std::string(" ") + to_string(precision)
          : strict ? " fp32"
                   : " tf32");
  for (int pass = 0; pass < 3; ++pass)
    pass_keys_[pass] = std::string(kConvPassNames[pass]) + " " + key_;
  const cudnnDataType_t type = precision == Precision::kBf16   ? CUDNN_DATA_BFLOAT16
                               : precision == Precision::kFp16 ? CUDNN_DATA_HALF
                                                               : CUDNN_DATA_FLOAT;
  x_ = std::make_unique<TensorDesc>(x, type);
  y_ = std::make_unique<TensorDesc>(y_shape_, type);
  STOKE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
  STOKE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, type, CUDNN_TENSOR_NCHW, to_int(w[0]),
                                               to_int(w[1]), to_int(w[2]), to_int(w[3])));
  STOKE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
  STOKE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                                                    p.dilation_h, p.dilation_w,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  STOKE_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_, p.groups));
  // Strict FP32 asks the heuristics for FMA-only algorithms; otherwise cuDNN
  // may pick TF32 tensor-core ones (bf16, fp16: tensor cores).
  set_math(low ? CUDNN_TENSOR_OP_MATH : strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH);
}

ConvSetup::~ConvSetup() {
  if (conv_) STOKE_CUDNN_WARN(cudnnDestroyConvolutionDescriptor(conv_));
  if (w_) STOKE_CUDNN_WARN(cudnnDestroyFilterDescriptor(w_));
}

void ConvSetup::set_math(int math_type) const {
  STOKE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, static_cast<cudnnMathType_t>(math_type)));
}

ConvShapeKey conv_shape_key(const Shape& x, const Shape& w, const Conv2dParams& p, bool strict,
                            Precision precision) {
  ConvShapeKey k{};
  for (std::size_t i = 0; i < 4; ++i) {
    k[i] = i < x.size() ? x[i] : -1;
    k[4 + i] = i < w.size() ? w[i] : -1;
  }
  k[8] = p.stride_h;
  k[9] = p.stride_w;
  k[10] = p.pad_h;
  k[11] = p.pad_w;
  k[12] = p.dilation_h;
  k[13] = p.dilation_w;
  k[14] = p.groups;
  k[15] = precision == Precision::kBf16 ? 2 : precision == Precision::kFp16 ? 3 : strict ? 1 : 0;
  return k;
}

// The descriptors of a shape, built (and checked) once and kept: every pass
// of every step used to rebuild them and their key string. Bounded: a stream
// of ever new shapes (inference on arbitrary image sizes) starts over; a
// setup another thread still uses lives on in its shared_ptr.
std::shared_ptr<const ConvSetup> CudaBackend::conv_setup(const char* op, const Shape& x,
                                                         const Shape& w, const Conv2dParams& p) {
  const Precision precision = convolution_precision();
  const ConvShapeKey key = conv_shape_key(x, w, p, options_.strict_fp32, precision);
  std::lock_guard lock(conv_setups_mutex_);
  auto it = conv_setups_.find(key);
  if (it != conv_setups_.end()) return it->second;
  if (conv_setups_.size() >= kMaxConvSetups) conv_setups_.clear();
  auto setup = std::make_shared<const ConvSetup>(op, x, w, p, options_.strict_fp32, precision);
  return conv_setups_.emplace(key, std::move(setup)).first->second;
}

std::size_t CudaBackend::conv_setups_cached() const {
  std::lock_guard lock(conv_setups_mutex_);
  return conv_setups_.size();
}

std::size_t CudaBackend::conv2d_workspace_bytes(const Shape& x, const Shape& w,
                                                const Conv2dParams& params) const {
  const ConvSetup setup("conv2d_workspace_bytes", x, w, params, options_.strict_fp32,
                        convolution_precision());
  std::size_t most = 0;
  for (int pass : {kConvForward, kConvBackwardData, kConvBackwardFilter}) {
    most = std::max(most, choose_conv_algo(pass, ConvCall{setup}).workspace_bytes);
  }
  return most;
}

void CudaBackend::do_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                                    const Conv2dParams& params) {
  if (convolution_precision() != Precision::kFp32) {
    return conv2d_forward_low(x, w, bias, y, params);
  }
  const auto lock = workspace_lock();
  const auto setup = conv_setup("conv2d_forward", x.shape(), w.shape(), params);
  const ConvSetup& s = *setup;
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
  if (convolution_precision() != Precision::kFp32) {
    return conv2d_backward_low(x, w, dy, dx, dw, db, params);
  }
  const auto lock = workspace_lock();
  const auto setup = conv_setup("conv2d_backward", x.shape(), w.shape(), params);
  const ConvSetup& s = *setup;
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
