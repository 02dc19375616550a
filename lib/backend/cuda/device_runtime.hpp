// The plugin-side factory of detail::CudaDevice (see cuda_device_api.hpp).
#pragma once

#include <memory>

#include "gpu/cuda_device_api.hpp"

namespace stoke::cuda {

std::shared_ptr<detail::CudaDevice> open_device(int index);

}  // namespace stoke::cuda
