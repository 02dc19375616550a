// The system probe on a real device. It reads free memory only on a device
// that already has a CUDA context (it never creates one per GPU), so whether
// free memory is known depends on what the process did before: the test that
// asserts it makes the context itself, and passes or fails on its own in any
// order and in a process of its own.
#include "gpu/cuda_device.hpp"
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
    EXPECT_LE(gpu.free_memory, gpu.total_memory) << "0 (unknown) without a context";
    EXPECT_GT(gpu.multiprocessors, 0);
    EXPECT_EQ(gpu.pci_bus_id.size(), 12u) << gpu.pci_bus_id;
  }
}

TEST_F(CudaProbe, ReportsFreeMemoryOfADeviceWithAContext) {
  const auto device = detail::open_cuda_device(0);
  void* block = device->device_alloc(1 << 20);  // device 0's primary context exists from here
  ASSERT_NE(block, nullptr);
  const SystemInfo probed = query_system();
  ASSERT_FALSE(probed.cuda.gpus.empty()) << probed.cuda.device_error;
  const GpuInfo& gpu = probed.cuda.gpus[0];
  EXPECT_GT(gpu.free_memory, 0u) << "device 0 has a context: its free memory is known";
  EXPECT_LE(gpu.free_memory, gpu.total_memory);
  device->device_free(block);
}

}  // namespace
}  // namespace stoke::testing
