#include "backend/cuda/kernels.hpp"

#include "backend/cuda/check.hpp"
#include "backend/cuda/device_runtime.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::cuda {

KernelSet::KernelSet(int device, bool use_jit, const JitCache& cache) {
  // Modules load into the device's context; the caller's device comes back after.
  const DeviceScope scope(device);
  int major = 0, minor = 0;
  STOKE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  STOKE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  arch_ = major * 10 + minor;
  if (use_jit) {
    try {
      for (const auto& source : kernel_sources()) {
        bool compiled = false;
        const auto cubin = cache.get_or_compile(source, arch_, &compiled);
        compiled_ += compiled ? 1 : 0;
        cudaLibrary_t library = nullptr;
        STOKE_CUDA_CHECK(
            cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
        libraries_.push_back(library);
        for (const auto& name : source.kernels) {
          cudaKernel_t kernel = nullptr;
          STOKE_CUDA_CHECK(cudaLibraryGetKernel(&kernel, library, name.c_str()));
          functions_[name] = reinterpret_cast<const void*>(kernel);
        }
      }
      origin_ = KernelOrigin::kJit;
      return;
    } catch (const Error& e) {
      log_warn(std::string("JIT compilation failed, using precompiled kernels: ") + e.what());
      for (auto library : libraries_) STOKE_CUDA_WARN(cudaLibraryUnload(library));
      libraries_.clear();
      functions_.clear();
    }
  }
  for (const auto& k : precompiled_kernels()) functions_[k.name] = k.function;
  origin_ = KernelOrigin::kPrecompiled;
}

KernelSet::~KernelSet() {
  for (auto library : libraries_) STOKE_CUDA_WARN(cudaLibraryUnload(library));
}

const void* KernelSet::function(const std::string& name) const {
  const auto it = functions_.find(name);
  if (it == functions_.end()) throw Unsupported("no CUDA kernel named " + name);
  return it->second;
}

dim3 grid_for(long long n, int block) {
  const long long needed = (n + block - 1) / block;
  // Grid-stride loops: a few waves of blocks are enough for any n.
  const long long capped = needed < 65535 ? needed : 65535;
  return dim3(static_cast<unsigned>(capped > 0 ? capped : 1));
}

void launch(const void* function, dim3 grid, dim3 block, void** args, cudaStream_t stream,
            const char* name, std::size_t shared_bytes) {
  const cudaError_t status = cudaLaunchKernel(function, grid, block, args, shared_bytes, stream);
  if (status != cudaSuccess) {
    const StatusInfo info = status_info(status);
    throw_failure(info, (std::string("launch of ") + name).c_str(), __FILE__, __LINE__);
  }
}

}  // namespace stoke::cuda
