// Opening a CUDA device through the plugin: one shared handle per device.
#include "gpu/cuda_device.hpp"

#include <map>
#include <mutex>

#include "gpu/plugin_loader.hpp"
#include "gpu/prefetch_device.hpp"
#include "stoke/error.hpp"

namespace stoke::detail {

PrefetchDeviceSource::~PrefetchDeviceSource() = default;

std::shared_ptr<CudaDevice> open_cuda_device(int index) {
  const PluginLoad& load = cuda_plugin();
  if (!load.plugin)
    throw Unsupported("CUDA device " + std::to_string(index) + " is not available: " + load.error);
  // One handle per device while any user holds it, so pools, staging and
  // prefetchers share its compiled kernels.
  static std::mutex mutex;
  static std::map<int, std::weak_ptr<CudaDevice>> open;
  std::lock_guard lock(mutex);
  if (auto device = open[index].lock()) return device;
  auto device = load.plugin->open_device(index);
  open[index] = device;
  return device;
}

std::shared_ptr<CudaDevice> try_open_cuda_device(int index, std::string* why) noexcept {
  try {
    return open_cuda_device(index);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
  } catch (...) {
    if (why) *why = "unknown error opening CUDA device " + std::to_string(index);
  }
  return nullptr;
}

}  // namespace stoke::detail
