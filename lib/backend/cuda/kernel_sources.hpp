// The custom kernels of the CUDA backend, as text for NVRTC and as
// precompiled functions, both generated from lib/backend/cuda/kernels/*.cu.
#pragma once

#include <string>
#include <vector>

#include "stoke/export.hpp"

namespace stoke::cuda {

struct KernelSource {
  std::string name;                  // file name without extension, e.g. "elementwise"
  std::string text;                  // the whole file
  std::vector<std::string> kernels;  // extern "C" kernel names it defines
};

struct PrecompiledKernel {
  const char* name;
  const void* function;  // for cudaLaunchKernel
};

STOKE_INTERNAL const std::vector<KernelSource>& kernel_sources();
// Defined only in the plugin (nvcc-compiled).
const std::vector<PrecompiledKernel>& precompiled_kernels();

}  // namespace stoke::cuda
