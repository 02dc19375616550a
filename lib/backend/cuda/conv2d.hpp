// Convolution descriptors shared by conv2d.cpp (the passes) and conv2d_algo.cpp
// (algorithm choice and its cache).
#pragma once

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend.hpp"

namespace stoke::cuda {

// Descriptors of one convolution (x, w, y, conv) built from shapes, and the
// cache key naming them. InvalidArgument for inconsistent shapes.
class STOKE_INTERNAL ConvSetup {
 public:
  // `precision` bf16 or fp16: x, w and y (and their gradients) in that
  // type, fp32 accumulation (cuDNN's pseudo-bf16 / pseudo-half
  // configurations; the key says "bf16" or "fp16"); fp32 otherwise.
  ConvSetup(const char* op, const Shape& x, const Shape& w, const Conv2dParams& p, bool strict,
            Precision precision = Precision::kFp32);
  ~ConvSetup();
  ConvSetup(const ConvSetup&) = delete;
  ConvSetup& operator=(const ConvSetup&) = delete;

  const Shape& y_shape() const noexcept { return y_shape_; }
  const std::string& key() const noexcept { return key_; }
  // "<pass name> <key>": the algorithm cache's key of pass 0, 1 or 2, built once.
  const std::string& pass_key(int pass) const noexcept { return pass_keys_[pass]; }
  cudnnTensorDescriptor_t x() const noexcept { return x_->get(); }
  cudnnTensorDescriptor_t y() const noexcept { return y_->get(); }
  cudnnFilterDescriptor_t w() const noexcept { return w_; }
  cudnnConvolutionDescriptor_t conv() const noexcept { return conv_; }
  void set_math(int math_type) const;

 private:
  Shape y_shape_;
  std::string key_;
  std::string pass_keys_[3];
  std::unique_ptr<TensorDesc> x_, y_;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
};

// What choose_conv_algo needs: the descriptors and, for benchmarking, the
// buffers of the pass (forward: x, w -> y; backward data: w, dy -> dx;
// backward filter: x, dy -> dw). Null buffers: heuristics only, not cached.
struct CudaBackend::ConvCall {
  const ConvSetup& setup;
  const void* in1 = nullptr;
  const void* in2 = nullptr;
  void* out = nullptr;
};

enum ConvPass : int { kConvForward = 0, kConvBackwardData = 1, kConvBackwardFilter = 2 };
inline constexpr const char* kConvPassNames[] = {"forward", "backward_data", "backward_filter"};

// What identifies a convolution's descriptors: x and w shapes, the params and
// the math mode (TF32, strict FP32, bf16 or fp16).
using ConvShapeKey = std::array<std::int64_t, 16>;
ConvShapeKey conv_shape_key(const Shape& x, const Shape& w, const Conv2dParams& p, bool strict,
                            Precision precision);

}  // namespace stoke::cuda
