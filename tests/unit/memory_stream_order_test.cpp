// Stream-ordered reuse on the device pool's real fence path (events recorded
// by the pool's device provider) against a lagging asynchronous fake device:
// a block freed on a stream whose reads are still queued is not handed out
// until those reads ran, so a new owner's writes cannot reach them.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "stoke/memory.hpp"
#include "unit/async_fake_cuda_device.hpp"

namespace stoke::testing {
namespace {

TEST(DevicePoolStreamOrder, ReadsQueuedBeforeAStreamFreeSeeTheOldContents) {
  auto device = std::make_shared<AsyncFakeCudaDevice>(99);
  Settings settings;
  settings.gpu_mem_max = 4u << 20;  // one 4 MiB chunk at most: reuse is forced
  auto pool = MemoryPool::device(settings, device);
  detail::GpuStream a = device->create_stream();
  detail::GpuStream b = device->create_stream();
  constexpr std::size_t kBytes = 3u << 20;
  std::vector<unsigned char> old_data(kBytes, 0x11), new_data(kBytes, 0x22);
  std::vector<std::vector<unsigned char>> seen(20, std::vector<unsigned char>(4096));
  for (int round = 0; round < 20; ++round) {
    void* block = pool->allocate(kBytes, a);
    device->copy_to_device(block, old_data.data(), kBytes, a);
    device->copy_to_host(seen[round].data(), static_cast<unsigned char*>(block) + kBytes - 4096,
                         4096, a);
    pool->deallocate(block, a);  // the read above may still be queued
    // The next owner writes on another stream as soon as it has the block.
    void* next = pool->allocate(kBytes, b);
    EXPECT_EQ(next, block) << "only one block fits under the cap";
    device->copy_to_device(next, new_data.data(), kBytes, b);
    pool->deallocate(next, b);
  }
  device->synchronize(a);
  device->synchronize(b);
  pool->synchronize();
  for (int round = 0; round < 20; ++round) {
    EXPECT_EQ(seen[round][0], 0x11) << "round " << round << ": read the next owner's data";
    EXPECT_EQ(seen[round][4095], 0x11) << "round " << round;
  }
  EXPECT_EQ(pool->stats().pending_free, 0u);
  EXPECT_EQ(pool->stats().in_use, 0u);
}

}  // namespace
}  // namespace stoke::testing
