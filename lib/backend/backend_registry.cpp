// The backend registry: the CPU backend always, GPU backends as plugins add
// them. The one mutable global the library keeps besides its thread arena.
#include <algorithm>
#include <mutex>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/registry.hpp"
#include "gpu/plugin_loader.hpp"
#include "stoke/backend.hpp"
#include "stoke/config.hpp"
#include "stoke/cuda.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke {

Backend::~Backend() = default;

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Backend>> backends;
  Settings gpu_settings;   // what "cuda:<i>" are created with (init() hands them down)
  bool gpu_added = false;  // add_gpu_backends ran: later settings do not apply
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: plugins may outlive static teardown order
    reg->backends.push_back(std::make_unique<cpu::CpuBackend>());
    return reg;
  }();
  return *r;
}

// "cuda:<i>" for every device the plugin finds (or those STOKE_GPU_DEVICE
// lists; none for `cpu`), once per process, on first use of a lookup other
// than cpu_backend(), with the settings init() handed down (defaults when the
// application never called it; nothing is read from the environment here). Creating one is cheap: a
// stream; the pool grows and the handles and kernels load on first use. A failure leaves the CPU
// backend alone and is logged.
void add_gpu_backends() {
  const detail::PluginLoad& load = detail::cuda_plugin();
  if (!load.plugin) return;
  const CudaInfo info = load.plugin->probe();
  if (info.gpus.empty()) return;
  Settings settings;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.gpu_added = true;
    settings = r.gpu_settings;
  }
  try {
    if (settings.gpu_device.kind == DeviceRequest::Kind::kCpu) return;
    for (const GpuInfo& gpu : info.gpus) {
      const auto& wanted = settings.gpu_device.indices;
      if (settings.gpu_device.kind == DeviceRequest::Kind::kList &&
          std::find(wanted.begin(), wanted.end(), gpu.index) == wanted.end()) {
        continue;
      }
      try {
        register_backend(create_cuda_backend(gpu.index, settings, cuda_backend_options(settings)));
      } catch (const std::exception& e) {
        log_warn("CUDA backend for device " + std::to_string(gpu.index) +
                 " not registered: " + e.what());
      }
    }
  } catch (const std::exception& e) {
    log_warn(std::string("CUDA backends not registered: ") + e.what());
  }
}

void ensure_gpu_backends() {
  static std::once_flag once;
  std::call_once(once, add_gpu_backends);
}

}  // namespace

namespace detail {

void set_registry_settings(const Settings& settings) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (!r.gpu_added) r.gpu_settings = settings;
}

void set_registry_context(const Context& context) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  static_cast<cpu::CpuBackend&>(*r.backends.front()).adopt_simd(context);
}

}  // namespace detail

Backend& cpu_backend() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return *r.backends.front();
}

Backend* find_backend(const std::string& name) {
  ensure_gpu_backends();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto& b : r.backends) {
    if (b->name() == name) return b.get();
  }
  return nullptr;
}

void register_backend(std::unique_ptr<Backend> backend) {
  if (!backend) throw InvalidArgument("register_backend: null backend");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::string name = backend->name();
  for (auto& b : r.backends) {
    if (b->name() == name) {
      throw InvalidArgument("register_backend: a backend named '" + name +
                            "' is already registered");
    }
  }
  r.backends.push_back(std::move(backend));
}

std::vector<std::string> backend_names() {
  ensure_gpu_backends();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (auto& b : r.backends) names.push_back(b->name());
  return names;
}

Backend& default_backend() {
  ensure_gpu_backends();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto& b : r.backends) {
    if (!b->is_host()) return *b;
  }
  return *r.backends.front();
}

}  // namespace stoke

namespace stoke {

std::unique_ptr<Backend> make_cpu_backend(std::uint64_t memory_cap) {
  return std::make_unique<cpu::CpuBackend>(memory_cap);
}

}  // namespace stoke
