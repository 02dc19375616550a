// The prefetch ring's device slots (and the normalized images of a uint8
// upload) come from the GPU backend's capped pool when the backend is given
// (PrefetchOptions::device_memory, which the trainer sets), so the pool's cap
// bounds everything stoke holds on the device. On the fake GPU backend.
#include <gtest/gtest.h>

#include <cstring>

#include "stoke/prefetch.hpp"
#include "unit/fake_gpu_backend.hpp"

namespace stoke::testing {
namespace {

constexpr std::size_t kSampleBytes = 3 * 8 * 8, kBatch = 4;

PrefetchOptions ring_options(FakeGpuBackend& gpu, bool normalize) {
  PrefetchOptions o;
  o.sample_bytes = kSampleBytes;
  o.batch_size = kBatch;
  o.batches_per_epoch = 6;
  o.depth = 3;
  o.device = 0;
  o.compute_stream = gpu.compute_stream();
  o.device_memory = &gpu;
  if (normalize) {
    o.device_normalize.enabled = true;
    o.device_normalize.height = o.device_normalize.width = 8;
    o.device_normalize.channels = 3;
  }
  return o;
}

std::size_t fill(std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                 std::span<std::int32_t> labels) {
  std::memset(images.data(), static_cast<int>(b + 1), kBatch * kSampleBytes);
  for (std::size_t s = 0; s < kBatch; ++s) labels[s] = static_cast<std::int32_t>(b);
  return kBatch;
}

TEST(PrefetchDeviceMemory, SlotsComeFromTheBackendsPoolAndGoBack) {
  for (const bool normalize : {false, true}) {
    FakeGpuBackend gpu;
    const std::uint64_t before = gpu.memory_stats().in_use_bytes;
    {
      Prefetcher ring(ring_options(gpu, normalize), fill, gpu.prefetch_device());
      const std::uint64_t held = gpu.memory_stats().in_use_bytes - before;
      // 3 slots of images + labels, and 3 float image buffers when normalizing.
      std::uint64_t expected = 3 * (kBatch * kSampleBytes + kBatch * sizeof(std::int32_t));
      if (normalize) expected += 3 * kBatch * kSampleBytes * sizeof(float);
      EXPECT_GE(held, expected) << "normalize " << normalize;
      int batches = 0;
      while (auto batch = ring.next()) {
        ASSERT_NE(batch->device_images(), nullptr);
        ++batches;
      }
      EXPECT_EQ(batches, 6);
    }
    EXPECT_EQ(gpu.memory_stats().in_use_bytes, before) << "normalize " << normalize;
  }
}

}  // namespace
}  // namespace stoke::testing
