// The backend registry: factories by name ("cpu" always, "cuda:<i>" as the
// plugin finds devices, an application's own), and the shared backend made
// from each. The one mutable global the library keeps besides its thread arena.
#include <algorithm>
#include <mutex>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/registry.hpp"
#include "gpu/plugin_loader.hpp"
#include "stoke/backend.hpp"
#include "stoke/config.hpp"
#include "stoke/context.hpp"
#include "stoke/cuda.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke {

Backend::~Backend() = default;

namespace {

// One name: how to make a backend of it for a context, and the registry's
// shared one (what find_backend and default_backend return).
struct Entry {
  std::string name;
  BackendFactory factory;           // empty for a backend registered as an instance
  std::unique_ptr<Backend> shared;  // null until made (GPU entries STOKE_GPU_DEVICE leaves out)
};

struct Registry {
  std::mutex mutex;
  std::vector<Entry> entries;  // entries[0]: "cpu"
  Context context;             // init()'s: the shared GPU backends are made with its settings
  bool gpu_added = false;      // add_gpu_backends ran: a later context does not apply to them
};

std::unique_ptr<Backend> make_cpu(const Context& context) {
  return std::make_unique<cpu::CpuBackend>(0, context);
}

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: plugins may outlive static teardown order
    // The shared CPU backend follows the arena current on its caller (a
    // default context); init() hands it its SIMD level.
    reg->entries.push_back({"cpu", make_cpu, std::make_unique<cpu::CpuBackend>()});
    return reg;
  }();
  return *r;
}

Entry* find_entry(Registry& r, const std::string& name) {
  for (auto& e : r.entries)
    if (e.name == name) return &e;
  return nullptr;
}

void add_entry(Registry& r, Entry entry) {
  if (find_entry(r, entry.name)) {
    throw InvalidArgument("register_backend: a backend named '" + entry.name +
                          "' is already registered");
  }
  r.entries.push_back(std::move(entry));
}

// A factory "cuda:<i>" for every device the plugin finds, and a shared
// backend from it for those STOKE_GPU_DEVICE of init()'s context selects
// (none for `cpu`), once per process, on first use of a lookup other than
// cpu_backend() (defaults when the application never called init(); nothing
// is read from the environment here). Creating one is cheap: a stream; the
// pool grows and the handles and kernels load on first use. A failure leaves
// the CPU backend alone and is logged.
void add_gpu_backends() {
  const detail::PluginLoad& load = detail::cuda_plugin();
  if (!load.plugin) return;
  const CudaInfo info = load.plugin->probe();
  if (info.gpus.empty()) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.gpu_added = true;
  const Settings& settings = r.context.settings();
  for (const GpuInfo& gpu : info.gpus) {
    const int index = gpu.index;
    Entry entry{
        "cuda:" + std::to_string(index),
        [index](const Context& context) {
          const Settings& s = context.settings();
          return std::unique_ptr<Backend>(create_cuda_backend(index, s, cuda_backend_options(s)));
        },
        nullptr};
    const auto& wanted = settings.gpu_device.indices;
    const bool selected = settings.gpu_device.kind != DeviceRequest::Kind::kCpu &&
                          (settings.gpu_device.kind != DeviceRequest::Kind::kList ||
                           std::find(wanted.begin(), wanted.end(), index) != wanted.end());
    try {
      if (selected) entry.shared = entry.factory(r.context);
    } catch (const std::exception& e) {
      log_warn("CUDA backend for device " + std::to_string(index) + " not registered: " + e.what());
    }
    try {
      add_entry(r, std::move(entry));
    } catch (const std::exception& e) {
      log_warn(std::string("CUDA backend not registered: ") + e.what());
    }
  }
}

void ensure_gpu_backends() {
  static std::once_flag once;
  std::call_once(once, add_gpu_backends);
}

}  // namespace

namespace detail {

void set_registry_context(const Context& context) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (!r.gpu_added) r.context = context;
  static_cast<cpu::CpuBackend&>(*r.entries.front().shared).adopt_simd(context);
}

}  // namespace detail

Backend& cpu_backend() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return *r.entries.front().shared;
}

Backend* find_backend(const std::string& name) {
  ensure_gpu_backends();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Entry* e = find_entry(r, name);
  return e ? e->shared.get() : nullptr;
}

void register_backend(std::unique_ptr<Backend> backend) {
  if (!backend) throw InvalidArgument("register_backend: null backend");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::string name = backend->name();
  add_entry(r, {name, nullptr, std::move(backend)});
}

void register_backend_factory(const std::string& name, BackendFactory factory) {
  if (!factory) throw InvalidArgument("register_backend_factory: no factory for '" + name + "'");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Entry entry{name, std::move(factory), nullptr};
  entry.shared = entry.factory(r.context);
  add_entry(r, std::move(entry));
}

std::unique_ptr<Backend> make_backend(const Context& context, const std::string& name) {
  ensure_gpu_backends();
  BackendFactory factory;
  std::string names;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (const auto& e : r.entries) {
      if (e.name == name) factory = e.factory;
      if (e.factory) names += (names.empty() ? "" : ", ") + e.name;
    }
  }
  if (!factory) {
    throw InvalidArgument("make_backend: no backend factory named '" + name +
                          "' (registered: " + names + ")");
  }
  return factory(context);
}

std::vector<std::string> backend_names() {
  ensure_gpu_backends();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (auto& e : r.entries)
    if (e.shared) names.push_back(e.name);
  return names;
}

Backend& default_backend() {
  ensure_gpu_backends();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto& e : r.entries) {
    if (e.shared && !e.shared->is_host()) return *e.shared;
  }
  return *r.entries.front().shared;
}

}  // namespace stoke

namespace stoke {

std::unique_ptr<Backend> make_cpu_backend(std::uint64_t memory_cap) {
  return std::make_unique<cpu::CpuBackend>(memory_cap);
}

}  // namespace stoke
