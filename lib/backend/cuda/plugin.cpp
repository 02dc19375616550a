// The plugin's entry point and its device probe.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/device_runtime.hpp"
#include "backend/cuda/jit.hpp"
#include "gpu/cuda_plugin_api.hpp"

namespace stoke::cuda {
namespace {

GpuInfo describe_device(int index, const cudaDeviceProp& prop) {
  GpuInfo gpu;
  gpu.index = index;
  gpu.name = prop.name;
  gpu.compute_major = prop.major;
  gpu.compute_minor = prop.minor;
  gpu.total_memory = prop.totalGlobalMem;
  gpu.integrated = prop.integrated != 0;
  gpu.multiprocessors = prop.multiProcessorCount;
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID,
                prop.pciDeviceID);
  gpu.pci_bus_id = bus;
  return gpu;
}

// Whether device `index` already has its primary context. The probe reads
// free memory only there: cudaMemGetInfo would create a context (hundreds
// of MiB and ~100 ms) on every GPU of the machine just to print a number.
// The driver's function comes through the runtime (the plugin does not link
// libcuda); false when it cannot be asked.
bool primary_context_active(int index) {
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using CtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);
  static const auto entry = [](const char* symbol) -> void* {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return fn;
  };
  static const auto device_get = reinterpret_cast<DeviceGet>(entry("cuDeviceGet"));
  static const auto get_state = reinterpret_cast<CtxGetState>(entry("cuDevicePrimaryCtxGetState"));
  if (!device_get || !get_state) return false;
  CUdevice dev = 0;
  unsigned int flags = 0;
  int active = 0;
  return device_get(&dev, index) == CUDA_SUCCESS &&
         get_state(dev, &flags, &active) == CUDA_SUCCESS && active != 0;
}

class Plugin final : public detail::CudaPlugin {
 public:
  int abi_version() const noexcept override { return detail::kCudaPluginAbi; }

  std::shared_ptr<detail::CudaDevice> open_device(int index) override {
    return cuda::open_device(index);
  }

  void set_jit_cache(const std::string& directory) override {
    JitCache::set_default_directory(directory);
  }

  std::unique_ptr<GpuBackend> create_backend(int index, std::shared_ptr<MemoryPool> pool,
                                             const CudaBackendOptions& options) override {
    return std::make_unique<CudaBackend>(index, std::move(pool), options);
  }

  CudaInfo probe() noexcept override {
    CudaInfo info;
    info.plugin_built = true;
    info.plugin_loaded = true;
    try {
      cudaDriverGetVersion(&info.driver_version);
      cudaRuntimeGetVersion(&info.runtime_version);
      info.cudnn_version = static_cast<int>(cudnnGetVersion());
      int major = 0, minor = 0;
      if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS)
        info.nvrtc_version = major * 1000 + minor * 10;

      int count = 0;
      // Any error here means "no usable device": without a driver the runtime
      // answers cudaErrorInsufficientDriver, not cudaErrorNoDevice.
      const cudaError_t status = cudaGetDeviceCount(&count);
      if (status != cudaSuccess) {
        info.device_error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
        cudaGetLastError();
        return info;
      }
      if (count == 0) info.device_error = "the CUDA runtime reports no devices";
      for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        GpuInfo gpu = describe_device(i, prop);
        if (primary_context_active(i)) {  // else free_memory stays 0: unknown
          const DeviceScope scope(i);
          std::size_t free_bytes = 0, total_bytes = 0;
          if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
            gpu.free_memory = free_bytes;
        }
        cudaGetLastError();
        info.gpus.push_back(std::move(gpu));
      }
    } catch (const std::exception& e) {
      info.device_error = std::string("CUDA probe failed: ") + e.what();
    } catch (...) {
      info.device_error = "CUDA probe failed";
    }
    return info;
  }
};

}  // namespace
}  // namespace stoke::cuda

extern "C" __attribute__((visibility("default"))) stoke::detail::CudaPlugin* stoke_cuda_plugin() {
  static stoke::cuda::Plugin plugin;
  return &plugin;
}
