// The normalize kernel compiled with NVRTC for one device, loaded once and
// launched on a stream (see normalize_kernel.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

namespace stoke::cuda {

class NormalizeKernel {
 public:
  // use_jit: compile for the device with NVRTC (STOKE_GPU_JIT), else the
  // precompiled kernel.
  NormalizeKernel(int device, bool use_jit) : device_(device), use_jit_(use_jit) {}
  ~NormalizeKernel();
  NormalizeKernel(const NormalizeKernel&) = delete;
  NormalizeKernel& operator=(const NormalizeKernel&) = delete;

  // dst (N, C, H, W) = (src (N, H, W, C) / 255 - mean[c]) / std[c], on stream.
  // Requires: 1 <= channels <= 4, the caller made the device current.
  // Loads on first use (JIT through the shared cache, or precompiled).
  void launch(const void* src, float* dst, int samples, int height, int width, int channels,
              const float* mean, const float* std, cudaStream_t stream);

 private:
  void load();
  int device_;
  std::once_flag loaded_;
  cudaLibrary_t library_ = nullptr;
  bool use_jit_;
  const void* function_ = nullptr;
  int blocks_ = 0;
};

}  // namespace stoke::cuda
