// The normalize kernel compiled with NVRTC for one device, loaded once and
// launched on a stream (see normalize_kernel.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

namespace stoke::cuda {

class NormalizeKernel {
 public:
  explicit NormalizeKernel(int device) : device_(device) {}
  ~NormalizeKernel();
  NormalizeKernel(const NormalizeKernel&) = delete;
  NormalizeKernel& operator=(const NormalizeKernel&) = delete;

  // dst (N, C, H, W) = (src (N, H, W, C) / 255 - mean[c]) / std[c], on stream.
  // Requires: 1 <= channels <= 4, the caller made the device current.
  // Compiles on first use; GpuLibraryError (NVRTC log included) on failure.
  void launch(const void* src, float* dst, int samples, int height, int width, int channels,
              const float* mean, const float* std, cudaStream_t stream);

 private:
  void load();
  int device_;
  std::once_flag loaded_;
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
  int blocks_ = 0;
};

}  // namespace stoke::cuda
