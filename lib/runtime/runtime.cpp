#include "stoke/runtime.hpp"

#include <sstream>

#include "stoke/threads.hpp"

namespace stoke {

Runtime init(const Config& config) {
  Runtime runtime{config, query_system(), {}, 1, SimdLevel::kScalar};
  runtime.config.apply_logging();
  runtime.device = select_device(runtime.config, runtime.system);
  runtime.cpu_threads =
      resolve_cpu_threads(runtime.config.settings(), runtime.system.cpu, runtime.device.use_gpu);
  runtime.simd = resolve_simd(runtime.config.settings(), runtime.system.cpu);
  set_thread_count(runtime.cpu_threads);
  return runtime;
}

Runtime init() { return init(Config::load()); }

std::string describe(const Runtime& runtime) {
  std::ostringstream out;
  out << "selected device: " << describe(runtime.device, runtime.system.cuda.gpus) << "\n"
      << "cpu threads: " << runtime.cpu_threads << " (arena), simd: " << to_string(runtime.simd)
      << "\n";
  return out.str();
}

}  // namespace stoke
