// The plugin-side factory of detail::CudaDevice (see cuda_device_api.hpp),
// and the scope that makes a device current and restores the caller's.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "backend/cuda/check.hpp"
#include "gpu/cuda_device_api.hpp"

namespace stoke::cuda {

std::shared_ptr<detail::CudaDevice> open_device(int index);

// Makes `device` current for the scope's lifetime and restores the caller's
// device afterwards, so plugin calls never change the thread's global state.
class STOKE_INTERNAL DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device) STOKE_CUDA_CHECK(cudaSetDevice(device));
    switched_ = previous_ != device;
  }
  ~DeviceScope() {
    if (switched_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace stoke::cuda
