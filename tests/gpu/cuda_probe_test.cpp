#include "gpu/gpu_fixture.hpp"

namespace stoke::testing {
namespace {

class CudaProbe : public GpuTest {};

TEST_F(CudaProbe, ReportsDevicePropertiesAndVersions) {
  const auto& cuda = system_.cuda;
  EXPECT_GT(cuda.driver_version, 0);
  EXPECT_GT(cuda.runtime_version, 0);
  EXPECT_GE(cuda.cudnn_version, 90000);
  EXPECT_GT(cuda.nvrtc_version, 0);
  for (const auto& gpu : cuda.gpus) {
    EXPECT_FALSE(gpu.name.empty());
    EXPECT_GT(gpu.total_memory, 0u);
    EXPECT_GT(gpu.free_memory, 0u);
    EXPECT_LE(gpu.free_memory, gpu.total_memory);
    EXPECT_GT(gpu.multiprocessors, 0);
    EXPECT_EQ(gpu.pci_bus_id.size(), 12u) << gpu.pci_bus_id;
  }
}

}  // namespace
}  // namespace stoke::testing
