// A GPU backend that brings its own device handle for the prefetcher. Test
// doubles implement it (a GpuBackend over an asynchronous fake device, so
// the trainer's GPU path runs without a GPU); the CUDA plugin's backend does
// not, and the prefetcher then opens PrefetchOptions::device itself.
#pragma once

#include <memory>

#include "gpu/cuda_device_api.hpp"
#include "stoke/export.hpp"

namespace stoke::detail {

class STOKE_INTERNAL PrefetchDeviceSource {
 public:
  virtual ~PrefetchDeviceSource();
  virtual std::shared_ptr<CudaDevice> prefetch_device() const = 0;
};

}  // namespace stoke::detail
