// Shared fixture of every GPU test: skips with the reason where no CUDA device
// can run the test (no CUDA build, plugin not loaded, no device, capability too low).
#pragma once

#include <gtest/gtest.h>

#include "stoke/system.hpp"

namespace stoke::testing {

class GpuTest : public ::testing::Test {
 protected:
  static constexpr int kMinComputeMajor = 7;  // sm_75 and up

  void SetUp() override {
    system_ = query_system();
    const auto& cuda = system_.cuda;
    if (!cuda.plugin_built) GTEST_SKIP() << "no CUDA build: " << cuda.plugin_error;
    if (!cuda.plugin_loaded) GTEST_SKIP() << "CUDA plugin not loaded: " << cuda.plugin_error;
    if (cuda.gpus.empty()) GTEST_SKIP() << "no CUDA device: " << cuda.device_error;
    if (cuda.gpus[0].compute_major < kMinComputeMajor) {
      GTEST_SKIP() << "device 0 has compute capability " << cuda.gpus[0].compute_major << "."
                   << cuda.gpus[0].compute_minor << ", below 7.5";
    }
  }

  const GpuInfo& device() const { return system_.cuda.gpus[0]; }
  SystemInfo system_;
};

}  // namespace stoke::testing
