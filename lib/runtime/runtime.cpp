// The public entry points: init() and make_backend() hand the application's
// settings down to the modules below (nothing there reads the environment).
#include "stoke/runtime.hpp"

#include <sstream>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/registry.hpp"
#include "gpu/plugin_loader.hpp"
#include "stoke/cuda.hpp"
#include "stoke/threads.hpp"
#include "threads/arena.hpp"

namespace stoke {

Runtime init(const Config& config) {
  const Settings& settings = config.settings();
  detail::request_cuda_plugin(settings.cuda_plugin, settings.jit_cache);
  Runtime runtime{config, query_system(), {}, 1, SimdLevel::kScalar, {}};
  runtime.config.apply_logging();
  runtime.device = select_device(runtime.config, runtime.system);
  runtime.context = Context(runtime.config, runtime.system.cpu, runtime.device.use_gpu);
  detail::set_registry_context(runtime.context);
  runtime.cpu_threads = runtime.context.cpu_threads();
  runtime.simd = runtime.context.simd();
  // One arena for the process: the context's becomes the library's.
  detail::set_library_arena(context_arena(runtime.context));
  return runtime;
}

Runtime init() {
  return init(Config::load());
}

std::unique_ptr<Backend> make_backend(const Context& context) {
  const Settings& settings = context.settings();
  detail::request_cuda_plugin(settings.cuda_plugin, settings.jit_cache);
  if (settings.gpu_device.kind != DeviceRequest::Kind::kCpu) {
    const SystemInfo system = query_system();
    const DeviceSelection device =
        select_device(settings.gpu_device, system.cuda.gpus, system.cuda.device_error);
    if (device.use_gpu && !device.gpus.empty()) {
      return make_backend(context, "cuda:" + std::to_string(device.gpus.front()));
    }
  }
  return make_backend(context, "cpu");
}

std::string describe(const Runtime& runtime) {
  std::ostringstream out;
  out << "selected device: " << describe(runtime.device, runtime.system.cuda.gpus) << "\n"
      << "cpu threads: " << runtime.cpu_threads << " (arena), simd: " << to_string(runtime.simd)
      << "\n";
  return out.str();
}

}  // namespace stoke
