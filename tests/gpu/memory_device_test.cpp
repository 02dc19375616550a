// The pool on real device memory and pinned staging on a real device.
#include <chrono>
#include <cstring>
#include <vector>

#include "gpu/cuda_device.hpp"
#include "gpu/gpu_fixture.hpp"
#include "stoke/error.hpp"
#include "stoke/memory.hpp"

namespace stoke::testing {
namespace {

constexpr std::size_t kMiB = 1 << 20;

class DeviceMemory : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    device_ = detail::open_cuda_device(0);
  }
  std::shared_ptr<detail::CudaDevice> device_;
};

TEST_F(DeviceMemory, PoolHonoursTheCapAndServesUsableMemory) {
  Settings settings;
  settings.gpu_mem_max = 256 * kMiB;
  auto pool = MemoryPool::device(settings, 0);
  EXPECT_EQ(pool->cap(), 256 * kMiB);
  EXPECT_EQ(pool->stats().reserved, 0u) << "nothing reserved up front";

  void* a = pool->allocate(100 * kMiB);
  void* b = pool->allocate(100 * kMiB);
  EXPECT_LE(pool->stats().reserved, 256 * kMiB);
  EXPECT_THROW(pool->allocate(100 * kMiB), OutOfMemory);
  EXPECT_LE(pool->stats().reserved, 256 * kMiB);

  // The memory works: a round trip through it.
  std::vector<unsigned char> in(1 << 20), out(1 << 20, 0);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 31 + 7);
  detail::GpuStream stream = device_->create_stream();
  device_->copy_to_device(b, in.data(), in.size(), stream);
  device_->copy_to_host(out.data(), b, out.size(), stream);
  device_->synchronize(stream);
  EXPECT_EQ(in, out);

  // Freed on a stream: reused once the stream's work passed.
  pool->deallocate(a, stream);
  void* c = pool->allocate(100 * kMiB);  // must wait for the fence: no room to grow
  EXPECT_EQ(c, a);
  pool->deallocate(b);
  pool->deallocate(c);
  EXPECT_GT(pool->trim(), 0u);
  EXPECT_EQ(pool->stats().reserved, 0u);
  device_->destroy_stream(stream);
}

TEST_F(DeviceMemory, PoolCapFollowsThePercentOfTotalMemory) {
  Settings settings;
  settings.gpu_mem_percent = 10;
  auto pool = MemoryPool::device(settings, 0);
  EXPECT_NEAR(static_cast<double>(pool->cap()), 0.10 * static_cast<double>(device().total_memory),
              256.0);
  EXPECT_THROW(pool->allocate(pool->cap() + kMiB), OutOfMemory);
  void* p = pool->allocate(pool->cap() / 2);
  pool->deallocate(p);
}

// Measured and reported, not asserted: speed belongs to benchmarks. What is
// asserted is that both paths deliver the same bytes.
TEST_F(DeviceMemory, PinnedAndPageableUploadsDeliverTheSameBytesAndReportBandwidth) {
  Settings settings;
  HostStaging staging(settings, 0);
  constexpr std::size_t kBytes = 64 * kMiB;
  StagingBuffer pinned = staging.allocate(kBytes);
  ASSERT_TRUE(pinned.pinned()) << staging.report_text();
  std::vector<std::byte> pageable(kBytes);
  for (std::size_t i = 0; i < kBytes; i += 4096) {
    pinned.data()[i] = pageable[i] = static_cast<std::byte>(i / 4096);
  }
  void* dst = device_->device_alloc(kBytes);
  ASSERT_NE(dst, nullptr);
  detail::GpuStream stream = device_->create_stream();
  detail::GpuEvent start = device_->create_event(true);
  detail::GpuEvent end = device_->create_event(true);
  auto bandwidth = [&](const void* src) {
    device_->record(start, stream);
    for (int i = 0; i < 4; ++i) device_->copy_to_device(dst, src, kBytes, stream);
    device_->record(end, stream);
    device_->wait(end);
    return 4.0 * kBytes / (device_->elapsed_ms(start, end) / 1000.0) / 1e9;
  };
  const double pinned_gbs = bandwidth(pinned.data());
  const double pageable_gbs = bandwidth(pageable.data());
  RecordProperty("pinned_GBps", std::to_string(pinned_gbs));
  RecordProperty("pageable_GBps", std::to_string(pageable_gbs));
  std::printf("host->device: pinned %.1f GB/s, pageable %.1f GB/s\n", pinned_gbs, pageable_gbs);
  std::vector<std::byte> back(kBytes);
  device_->copy_to_host(back.data(), dst, kBytes, stream);
  device_->synchronize(stream);
  EXPECT_EQ(std::memcmp(back.data(), pageable.data(), kBytes), 0);
  device_->destroy_event(start);
  device_->destroy_event(end);
  device_->destroy_stream(stream);
  device_->device_free(dst);
}

TEST_F(DeviceMemory, PinnedStagingFallsBackOverTheCapOnARealDevice) {
  Settings settings;
  settings.host_pinned_max = 8 * kMiB;
  HostStaging staging(settings, 0);
  StagingBuffer a = staging.allocate(6 * kMiB);
  StagingBuffer b = staging.allocate(6 * kMiB);
  EXPECT_TRUE(a.pinned());
  EXPECT_FALSE(b.pinned());
  EXPECT_TRUE(staging.report().fell_back);
}

}  // namespace
}  // namespace stoke::testing
