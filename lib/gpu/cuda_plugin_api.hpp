// The contract between libstoke and the CUDA plugin (libstoke_cuda.so).
// libstoke dlopens the plugin and calls stoke_cuda_plugin(); nothing in
// libstoke links a CUDA library. Both sides are built from the same tree with
// the same compiler, so the interface is a C++ class; kCudaPluginAbi guards
// against a plugin from another build.
#pragma once

#include <memory>
#include <string>

#include "gpu/cuda_device_api.hpp"
#include "stoke/cuda.hpp"
#include "stoke/memory.hpp"
#include "stoke/system.hpp"

namespace stoke::detail {

// 2: open_device (memory, streams, events, copies; see cuda_device_api.hpp).
// 3: create_backend (the cuDNN/cuBLAS backend, see stoke/cuda.hpp).
// 4: set_jit_cache (the NVRTC cache directory comes from libstoke's settings).
// 5: GpuBackend's device collectives (NCCL groups: new_device_group_id,
//    join_device_group), reached through the backend's table.
// 6: ConvAlgoChoice::deterministic.
// 7: CudaDevice::normalize_u8_hwc_to_f32_chw takes STOKE_GPU_JIT.
inline constexpr int kCudaPluginAbi = 7;

class CudaPlugin {
 public:
  virtual ~CudaPlugin() = default;
  virtual int abi_version() const noexcept = 0;
  // Versions and devices. Never throws: failures go to CudaInfo::device_error.
  virtual CudaInfo probe() noexcept = 0;
  // A handle on device `index` (shared: pools, staging and prefetchers of the
  // same device may hold it together). GpuLibraryError when the device cannot
  // be opened; InvalidArgument for an index that does not exist.
  virtual std::shared_ptr<CudaDevice> open_device(int index) = 0;
  // The directory of NVRTC-compiled kernels (Settings::jit_cache; "" = a
  // temporary one), set by libstoke right after loading the plugin.
  virtual void set_jit_cache(const std::string& directory) = 0;
  // The CUDA backend of device `index`, allocating from `pool` (a device pool
  // of the same device). GpuLibraryError when the device or its stream
  // cannot be set up.
  virtual std::unique_ptr<GpuBackend> create_backend(int index, std::shared_ptr<MemoryPool> pool,
                                                     const CudaBackendOptions& options) = 0;
};

}  // namespace stoke::detail

// Exported by the plugin; returns a process-lifetime instance.
extern "C" stoke::detail::CudaPlugin* stoke_cuda_plugin();
using StokeCudaPluginEntry = stoke::detail::CudaPlugin* (*)();
