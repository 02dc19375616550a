// The GPU tests' fixture runs them only on devices stoke supports: compute
// capability 7.5 and up (the documented minimum), with the reason otherwise.
#include <gtest/gtest.h>

#include "gpu/gpu_fixture.hpp"

namespace stoke::testing {
namespace {

SystemInfo with_gpu(int major, int minor) {
  SystemInfo s;
  s.cuda.plugin_built = s.cuda.plugin_loaded = true;
  GpuInfo g;
  g.compute_major = major;
  g.compute_minor = minor;
  s.cuda.gpus.push_back(g);
  return s;
}

TEST(GpuFixtureCapability, BelowSeven5IsRefusedWithTheReason) {
  const std::string volta = gpu_unavailable_reason(with_gpu(7, 0));
  EXPECT_NE(volta.find("7.0, below 7.5"), std::string::npos) << volta;
  EXPECT_FALSE(gpu_unavailable_reason(with_gpu(6, 1)).empty());
  EXPECT_EQ(gpu_unavailable_reason(with_gpu(7, 5)), "");
  EXPECT_EQ(gpu_unavailable_reason(with_gpu(9, 0)), "");
}

TEST(GpuFixtureCapability, NoPluginOrNoDeviceSaysWhich) {
  SystemInfo none;
  none.cuda.plugin_built = true;
  none.cuda.plugin_error = "libcudnn.so.9: cannot open shared object file";
  EXPECT_NE(gpu_unavailable_reason(none).find("plugin not loaded: libcudnn.so.9"),
            std::string::npos);
  none.cuda.plugin_loaded = true;
  none.cuda.device_error = "cudaGetDeviceCount: insufficient driver";
  EXPECT_NE(gpu_unavailable_reason(none).find("no CUDA device"), std::string::npos);
}

}  // namespace
}  // namespace stoke::testing
