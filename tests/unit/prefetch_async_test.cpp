// The prefetcher's CUDA hand-over (events between the copy stream and the
// compute stream, host waits before rewriting staging) against a fake device
// whose streams run asynchronously in a random order: every batch must reach
// the consumer's queued reads intact.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <vector>

#include "stoke/prefetch.hpp"
#include "unit/async_fake_cuda_device.hpp"

namespace stoke::testing {
namespace {

constexpr std::size_t kSampleBytes = 256;
constexpr std::size_t kBatch = 8;
constexpr std::uint64_t kBatches = 60;

unsigned char pattern(std::uint64_t b, std::size_t s) {
  return static_cast<unsigned char>((b * 29 + s) % 253);
}

struct Case {
  bool streams;
  int depth;
  std::uint64_t seed;
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << (c.streams ? "copy stream" : "one stream") << ", depth " << c.depth << ", seed "
       << c.seed;
}

class PrefetcherOnAsyncDevice : public ::testing::TestWithParam<Case> {};

TEST_P(PrefetcherOnAsyncDevice, QueuedReadsSeeEveryBatchIntactWhenSlotsAreReleasedAtOnce) {
  const Case c = GetParam();
  auto device = std::make_shared<AsyncFakeCudaDevice>(c.seed);
  detail::GpuStream compute = device->create_stream();
  PrefetchOptions o;
  o.sample_bytes = kSampleBytes;
  o.batch_size = kBatch;
  o.batches_per_epoch = kBatches;
  o.depth = c.depth;
  o.gpu_streams = c.streams;
  o.compute_stream = compute;
  auto fill = [](std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                 std::span<std::int32_t> labels) {
    for (std::size_t s = 0; s < kBatch; ++s) {
      std::memset(images.data() + s * kSampleBytes, pattern(b, s), kSampleBytes);
      labels[s] = static_cast<std::int32_t>(b * 100 + s);
    }
    return kBatch;
  };
  std::vector<std::vector<unsigned char>> seen(kBatches,
                                               std::vector<unsigned char>(kBatch * kSampleBytes));
  std::vector<std::vector<std::int32_t>> seen_labels(kBatches, std::vector<std::int32_t>(kBatch));
  {
    Prefetcher prefetcher(o, fill, device);
    while (auto batch = prefetcher.next()) {
      // The consumer's "kernel": reads queued on the compute stream, then the
      // slot goes back at once, before those reads ran.
      device->copy_to_host(seen[batch->index()].data(), batch->device_images(),
                           kBatch * kSampleBytes, compute);
      device->copy_to_host(seen_labels[batch->index()].data(), batch->device_labels(),
                           kBatch * sizeof(std::int32_t), compute);
      batch->release();
    }
    device->synchronize(compute);
  }
  for (std::uint64_t b = 0; b < kBatches; ++b) {
    for (std::size_t s = 0; s < kBatch; ++s) {
      ASSERT_EQ(seen[b][s * kSampleBytes], pattern(b, s)) << "batch " << b << " sample " << s;
      ASSERT_EQ(seen[b][s * kSampleBytes + kSampleBytes - 1], pattern(b, s))
          << "batch " << b << " sample " << s;
      ASSERT_EQ(seen_labels[b][s], static_cast<std::int32_t>(b * 100 + s)) << "batch " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, PrefetcherOnAsyncDevice,
                         ::testing::Values(Case{true, 2, 1}, Case{true, 2, 2}, Case{true, 3, 3},
                                           Case{false, 2, 4}, Case{true, 1, 5}),
                         [](const auto& info) {
                           return std::string(info.param.streams ? "CopyStream" : "OneStream") +
                                  "Depth" + std::to_string(info.param.depth) + "Seed" +
                                  std::to_string(info.param.seed);
                         });

}  // namespace
}  // namespace stoke::testing
