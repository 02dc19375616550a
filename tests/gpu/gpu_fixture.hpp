// Shared fixture of every GPU test: skips with the reason where no CUDA device
// can run the test (no CUDA build, plugin not loaded, no device, capability too low).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "stoke/system.hpp"

namespace stoke::testing {

// sm_75 (Turing) is the documented minimum: 7.0 (Volta) is refused.
inline constexpr int kMinComputeCapability = 75;

// Why no GPU test can run here ("" when device 0 can run them).
inline std::string gpu_unavailable_reason(const SystemInfo& system) {
  const auto& cuda = system.cuda;
  if (!cuda.plugin_built) return "no CUDA build: " + cuda.plugin_error;
  if (!cuda.plugin_loaded) return "CUDA plugin not loaded: " + cuda.plugin_error;
  if (cuda.gpus.empty()) return "no CUDA device: " + cuda.device_error;
  if (cuda.gpus[0].compute_major * 10 + cuda.gpus[0].compute_minor < kMinComputeCapability) {
    return "device 0 has compute capability " + std::to_string(cuda.gpus[0].compute_major) + "." +
           std::to_string(cuda.gpus[0].compute_minor) + ", below 7.5";
  }
  return "";
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    system_ = query_system();
    const std::string why = gpu_unavailable_reason(system_);
    if (!why.empty()) GTEST_SKIP() << why;
  }

  const GpuInfo& device() const { return system_.cuda.gpus[0]; }
  SystemInfo system_;
};

}  // namespace stoke::testing
