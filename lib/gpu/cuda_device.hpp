// Opening a CUDA device through the plugin, with the reason when that is
// impossible (no plugin, no driver, no such device).
#pragma once

#include <memory>
#include <string>

#include "gpu/cuda_device_api.hpp"
#include "stoke/export.hpp"

namespace stoke::detail {

// Throws Unsupported naming why the device cannot be used.
STOKE_INTERNAL std::shared_ptr<CudaDevice> open_cuda_device(int index);

// As above, but returns null and sets *why instead of throwing.
STOKE_INTERNAL std::shared_ptr<CudaDevice> try_open_cuda_device(int index,
                                                                std::string* why) noexcept;

}  // namespace stoke::detail
