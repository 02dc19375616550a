#include <gtest/gtest.h>

#include "stoke/device.hpp"
#include "stoke/error.hpp"

namespace stoke {
namespace {

GpuInfo gpu(int index, const char* name, double gib, int major, int minor, bool integrated) {
  GpuInfo g;
  g.index = index;
  g.name = name;
  g.total_memory = static_cast<std::uint64_t>(gib * (1ull << 30));
  g.compute_major = major;
  g.compute_minor = minor;
  g.integrated = integrated;
  return g;
}

DeviceRequest automatic() {
  return {};
}
DeviceRequest list(std::vector<int> indices) {
  return {DeviceRequest::Kind::kList, std::move(indices)};
}

TEST(DeviceSelect, AutoPrefersDiscreteOverIntegratedListedFirst) {
  const std::vector<GpuInfo> gpus = {gpu(0, "Intel UHD", 32, 0, 0, true),
                                     gpu(1, "RTX A4000", 16, 8, 6, false)};
  const auto s = select_device(automatic(), gpus);
  ASSERT_TRUE(s.use_gpu);
  EXPECT_EQ(s.gpus, std::vector<int>{1});
  EXPECT_TRUE(s.warnings.empty());
}

TEST(DeviceSelect, AutoAmongTwoDiscretePicksMostMemoryThenCapability) {
  std::vector<GpuInfo> gpus = {gpu(0, "T4", 16, 7, 5, false), gpu(1, "A100", 80, 8, 0, false)};
  EXPECT_EQ(select_device(automatic(), gpus).gpus, std::vector<int>{1});
  gpus = {gpu(0, "older", 24, 7, 5, false), gpu(1, "newer", 24, 8, 9, false)};
  EXPECT_EQ(select_device(automatic(), gpus).gpus, std::vector<int>{1});
  gpus = {gpu(0, "same", 24, 8, 9, false), gpu(1, "same", 24, 8, 9, false)};
  EXPECT_EQ(select_device(automatic(), gpus).gpus, std::vector<int>{0});
}

TEST(DeviceSelect, AutoWithNoGpuFallsBackToCpuWithOneWarning) {
  const auto s = select_device(automatic(), {}, "cudaGetDeviceCount: insufficient driver");
  EXPECT_FALSE(s.use_gpu);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("no CUDA device: running on CPU"), std::string::npos);
  EXPECT_NE(s.warnings[0].find("insufficient driver"), std::string::npos);
}

TEST(DeviceSelect, AutoWithOnlyAnIntegratedGpuUsesItAndWarns) {
  const auto s = select_device(automatic(), {gpu(0, "Orin", 32, 8, 7, true)});
  EXPECT_TRUE(s.use_gpu);
  EXPECT_EQ(s.gpus, std::vector<int>{0});
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("integrated"), std::string::npos);
}

TEST(DeviceSelect, CpuRequestIgnoresGpus) {
  const auto s = select_device({DeviceRequest::Kind::kCpu, {}}, {gpu(0, "A100", 80, 8, 0, false)});
  EXPECT_FALSE(s.use_gpu);
  EXPECT_TRUE(s.gpus.empty());
  EXPECT_TRUE(s.warnings.empty());
}

// Multi-GPU training is not built: a list of several devices would train on
// the first only, so it is refused with the device to pick instead.
TEST(DeviceSelect, AListOfSeveralDevicesIsRefusedNamingTheOneToPick) {
  const std::vector<GpuInfo> gpus = {gpu(0, "a", 16, 8, 0, false), gpu(1, "b", 16, 8, 0, false),
                                     gpu(2, "c", 40, 8, 0, false)};
  try {
    select_device(list({0, 2}), gpus);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("STOKE_GPU_DEVICE=0,2 lists 2 devices"), std::string::npos) << m;
    EXPECT_NE(m.find("one process per device (`stoke train --nproc 2`"), std::string::npos) << m;
    EXPECT_NE(m.find("set STOKE_GPU_DEVICE=2 (c"), std::string::npos) << m;
  }
  const auto one = select_device(list({2}), gpus);
  EXPECT_TRUE(one.use_gpu);
  EXPECT_EQ(one.gpus, (std::vector<int>{2}));
}

TEST(DeviceSelect, OutOfRangeIndexListsTheDevicesThatExist) {
  const std::vector<GpuInfo> gpus = {gpu(0, "RTX A4000", 16, 8, 6, false)};
  try {
    select_device(list({0, 3}), gpus);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("device 3"), std::string::npos) << m;
    EXPECT_NE(m.find("0 (RTX A4000, discrete)"), std::string::npos) << m;
  }
  EXPECT_THROW(select_device(list({0}), {}, "no driver"), ConfigError);
}

TEST(DeviceSelect, ExplicitIntegratedWhileDiscreteExistsWarnsWithTheFix) {
  const std::vector<GpuInfo> gpus = {gpu(0, "Intel UHD", 8, 0, 0, true),
                                     gpu(1, "RTX 4090", 24, 8, 9, false)};
  const auto s = select_device(list({0}), gpus);
  EXPECT_EQ(s.gpus, std::vector<int>{0});
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("STOKE_GPU_DEVICE=1"), std::string::npos) << s.warnings[0];
}

TEST(DeviceSelect, DuplicatesInTheListAreAConfigError) {
  Config c;
  EXPECT_THROW(c.set("STOKE_GPU_DEVICE", "1,0,1"), ConfigError);
}

}  // namespace
}  // namespace stoke
