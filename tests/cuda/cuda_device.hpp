// The fixtures of the CUDA kernel tests: whether this machine can run them.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace stoke::cuda {

// Empty when a CUDA device exists, else why not (the reason a test skips with).
inline std::string missing_cuda_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return {};
  cudaGetLastError();  // clear the sticky error for the next test
  return std::string("no CUDA device: ") +
         (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
}

}  // namespace stoke::cuda
