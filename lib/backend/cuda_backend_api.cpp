// libstoke's side of the CUDA backend: creating one through the plugin, the
// GpuBackend surface, and GraphedStep (eager or replayed CUDA graph).
#include <memory>

#include "gpu/plugin_loader.hpp"
#include "gpu/prefetch_device.hpp"
#include "stoke/cuda.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/memory.hpp"

namespace stoke {

CapturedStep::~CapturedStep() = default;
GpuBackend::~GpuBackend() = default;
DeviceCommunicator::~DeviceCommunicator() = default;

std::string GpuBackend::device_collectives_unavailable() const {
  return name() + " has no device collectives";
}

std::vector<std::uint8_t> GpuBackend::new_device_group_id() {
  throw Unsupported("device group on " + name() + ": " + device_collectives_unavailable());
}

std::unique_ptr<DeviceCommunicator> GpuBackend::join_device_group(int, int,
                                                                  std::span<const std::uint8_t>,
                                                                  double) {
  throw Unsupported("device group on " + name() + ": " + device_collectives_unavailable());
}

GpuBackend* as_gpu_backend(Backend& backend) noexcept {
  return backend.gpu();
}

CudaBackendOptions cuda_backend_options(const Settings& settings) {
  CudaBackendOptions options;
  options.jit = settings.gpu_jit;
  return options;
}

std::unique_ptr<GpuBackend> create_cuda_backend(int device, const Settings& settings,
                                                const CudaBackendOptions& options) {
  const detail::PluginLoad& load = detail::cuda_plugin();
  if (!load.plugin) {
    throw Unsupported("CUDA backend for device " + std::to_string(device) +
                      " is not available: " + load.error);
  }
  std::shared_ptr<MemoryPool> pool = MemoryPool::device(settings, device);
  return load.plugin->create_backend(device, std::move(pool), options);
}

GraphedStep::GraphedStep(Backend& backend, Toggle mode) : backend_(backend) {
  if (mode == Toggle::kOff) {
    reason_ = "STOKE_GPU_GRAPH is off";
  } else if (!backend.gpu()) {
    reason_ = backend.name() + " has no CUDA graphs";
  } else {
    enabled_ = true;
  }
}

GraphedStep::~GraphedStep() = default;

void GraphedStep::run(const std::function<void()>& step, std::uint64_t key) {
  ++calls_;
  if (graph_ && key == key_) {
    graph_->replay();
    return;
  }
  // Call 1 warms up eagerly: tensors get allocated and convolution
  // algorithms chosen outside any capture.
  if (!enabled_ || calls_ == 1) {
    step();
    return;
  }
  // First capture, or the host scalars changed (new key): capture anew. The
  // old graph's queued replays finish first (CUDA frees it on completion).
  graph_.reset();
  std::string why;
  graph_ = backend_.gpu()->capture(step, &why);
  if (!graph_) {
    enabled_ = false;
    reason_ = why;
    log_warn("CUDA graph capture failed on " + backend_.name() +
             ", running the step eagerly from now on: " + why);
    step();
    return;
  }
  ++captures_;
  key_ = key;
  graph_->replay();
}

}  // namespace stoke
