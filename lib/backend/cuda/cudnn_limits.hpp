// What cuDNN's legacy API can describe, checked before a call rather than
// discovered as a wrong result or an opaque status.
#pragma once

#include <cudnn.h>

#include <cstdint>

#include "stoke/backend.hpp"

namespace stoke::cuda {

// Legacy 4-D tensor and filter descriptors index with 32-bit ints: a tensor
// of 2^31 elements or more (e.g. 8 x 64 x 2448 x 2048) cannot be described.
inline constexpr std::int64_t kCudnnMaxElements = 2147483647;  // 2^31 - 1

// Unsupported naming the op, the tensor, its shape, its element count and
// the limit when `shape` is over it.
STOKE_INTERNAL void check_cudnn_elements(const char* op, const char* tensor, const Shape& shape);

// The batch-norm mode for a layout. The persistent mode can return Inf/NaN
// without an error on some inputs (cuDNN documents it; PyTorch uses it for
// channels-last only): NCHW, stoke's layout, always gets the plain spatial
// mode, and so does strict FP32.
STOKE_INTERNAL cudnnBatchNormMode_t batch_norm_mode(bool channels_last, bool strict_fp32) noexcept;

}  // namespace stoke::cuda
