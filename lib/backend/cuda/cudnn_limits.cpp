#include "backend/cuda/cudnn_limits.hpp"

#include <string>

#include "stoke/error.hpp"

namespace stoke::cuda {

void check_cudnn_elements(const char* op, const char* tensor, const Shape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    n *= d;
    if (n > kCudnnMaxElements) break;
  }
  if (n <= kCudnnMaxElements) return;
  std::int64_t total = 1;
  for (const std::int64_t d : shape) total *= d;
  throw Unsupported(std::string(op) + ": tensor '" + tensor + "' of shape " +
                    shape_to_string(shape) + " has " + std::to_string(total) +
                    " elements, over cuDNN's limit of " + std::to_string(kCudnnMaxElements) +
                    " (2^31 - 1) for one tensor: use a smaller batch or image size");
}

cudnnBatchNormMode_t batch_norm_mode(bool channels_last, bool strict_fp32) noexcept {
  return channels_last && !strict_fp32 ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT
                                       : CUDNN_BATCHNORM_SPATIAL;
}

}  // namespace stoke::cuda
