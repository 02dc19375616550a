// A downstream program built against the installed package.
#include <cstdio>
#include <stoke/stoke.hpp>

int main() {
  stoke::ConfigLoadOptions options;
  options.environment =
      std::vector<std::pair<std::string, std::string>>{{"STOKE_GPU_MEM_PERCENT", "70"}};
  const auto config = stoke::Config::load(options);
  if (config.settings().gpu_mem_percent != 70.0) return 1;
  try {
    stoke::Config bad;
    bad.set("STOKE_CPU_THREADS", "0");
    return 1;  // must have thrown
  } catch (const stoke::ConfigError&) {
  }
  const auto system = stoke::query_system();
  std::printf("consumer: stoke %s, %d cores, %zu GPUs\n", stoke::version(),
              system.cpu.physical_cores, system.cuda.gpus.size());
  return 0;
}
