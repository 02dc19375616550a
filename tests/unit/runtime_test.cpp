#include "stoke/runtime.hpp"

#include <gtest/gtest.h>

#include <atomic>

#include "stoke/error.hpp"
#include "stoke/threads.hpp"

namespace stoke {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

Config config_from(Env env) {
  ConfigLoadOptions options;
  options.environment = std::move(env);
  return Config::load(options);
}

TEST(Runtime, ConfiguredThreadCountBoundsLibraryWork) {
  const int saved = thread_count();
  const auto runtime = init(config_from({{"STOKE_CPU_THREADS", "1"}, {"STOKE_GPU_DEVICE", "cpu"}}));
  EXPECT_EQ(runtime.cpu_threads, 1);
  EXPECT_EQ(thread_count(), 1);
  std::atomic<int> running{0}, peak{0};
  parallel_for(0, 32, 1, [&](std::size_t, std::size_t) {
    const int now = ++running;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    volatile double sink = 0;
    for (int i = 0; i < 100000; ++i) sink = sink + i;
    --running;
  });
  EXPECT_EQ(peak.load(), 1);
  set_thread_count(saved);
}

TEST(Runtime, CpuBackendDefaultUsesAllPhysicalCores) {
  const int saved = thread_count();
  const auto runtime = init(config_from({{"STOKE_GPU_DEVICE", "cpu"}}));
  EXPECT_FALSE(runtime.device.use_gpu);
  EXPECT_EQ(runtime.cpu_threads, runtime.system.cpu.physical_cores);
  EXPECT_NE(describe(runtime).find("selected device: CPU"), std::string::npos);
  set_thread_count(saved);
}

TEST(Runtime, ForcedScalarSimdIsHonoured) {
  const int saved = thread_count();
  const auto runtime =
      init(config_from({{"STOKE_CPU_SIMD", "scalar"}, {"STOKE_GPU_DEVICE", "cpu"}}));
  EXPECT_EQ(runtime.simd, SimdLevel::kScalar);
  set_thread_count(saved);
}

TEST(Runtime, RequestingAMissingDeviceIsAnError) {
  // Device 999 exists on no machine: the error names it and lists what exists.
  try {
    init(config_from({{"STOKE_GPU_DEVICE", "999"}}));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("device 999"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoke
