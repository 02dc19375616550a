// The prefetch ring on the CPU path and, through a host fake of the plugin's
// device, its CUDA path: order, overlap, shutdown, errors and leaks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "prefetch/ring.hpp"
#include "stoke/error.hpp"
#include "stoke/prefetch.hpp"
#include "unit/fake_cuda_device.hpp"

namespace stoke::testing {
namespace {

constexpr std::size_t kSampleBytes = 48;

// Sample s of batch b in epoch e: every byte = (e * 131 + b * 7 + s) mod 251,
// label = e * 100000 + b * 100 + s.
std::byte pattern(std::uint64_t e, std::uint64_t b, std::size_t s) {
  return static_cast<std::byte>((e * 131 + b * 7 + s) % 251);
}

FillBatch pattern_fill(std::size_t total_samples, std::size_t batch_size) {
  return [=](std::uint64_t e, std::uint64_t b, std::span<std::byte> images,
             std::span<std::int32_t> labels) -> std::size_t {
    const std::size_t first = b * batch_size;
    if (first >= total_samples) return 0;
    const std::size_t count = std::min(batch_size, total_samples - first);
    for (std::size_t s = 0; s < count; ++s) {
      std::memset(images.data() + s * kSampleBytes, static_cast<int>(pattern(e, b, s)),
                  kSampleBytes);
      labels[s] = static_cast<std::int32_t>(e * 100000 + b * 100 + s);
    }
    return count;
  };
}

void expect_batch_content(const Batch& batch, const std::byte* images, const std::int32_t* labels) {
  for (std::size_t s = 0; s < batch.count(); ++s) {
    ASSERT_EQ(images[s * kSampleBytes], pattern(batch.epoch(), batch.index(), s));
    ASSERT_EQ(images[s * kSampleBytes + kSampleBytes - 1],
              pattern(batch.epoch(), batch.index(), s));
    ASSERT_EQ(labels[s],
              static_cast<std::int32_t>(batch.epoch() * 100000 + batch.index() * 100 + s));
  }
}

PrefetchOptions ring(int depth, std::size_t batch_size, std::uint64_t batches,
                     std::uint64_t epochs) {
  PrefetchOptions o;
  o.sample_bytes = kSampleBytes;
  o.batch_size = batch_size;
  o.batches_per_epoch = batches;
  o.epochs = epochs;
  o.first_epoch = 3;
  o.depth = depth;
  return o;
}

TEST(Prefetcher, BatchesArriveInOrderEachExactlyOnceWithAShortLastBatch) {
  // 130 samples in batches of 8: 16 full batches and one of 2, for 2 epochs.
  Prefetcher prefetcher(ring(3, 8, 17, 2), pattern_fill(130, 8));
  std::uint64_t expected_epoch = 3, expected_index = 0, samples = 0;
  while (auto batch = prefetcher.next()) {
    ASSERT_EQ(batch->epoch(), expected_epoch);
    ASSERT_EQ(batch->index(), expected_index);
    ASSERT_EQ(batch->count(), expected_index == 16 ? 2u : 8u);
    ASSERT_EQ(batch->images().size(), batch->count() * kSampleBytes);
    ASSERT_EQ(batch->device_images(), nullptr) << "no device on the CPU path";
    expect_batch_content(*batch, batch->images().data(), batch->labels().data());
    samples += batch->count();
    if (++expected_index == 17) {
      expected_index = 0;
      ++expected_epoch;
    }
  }
  EXPECT_EQ(expected_epoch, 5u);
  EXPECT_EQ(samples, 260u);
  EXPECT_FALSE(prefetcher.next()) << "stays empty after the end";
  const PrefetchStats stats = prefetcher.stats();
  EXPECT_EQ(stats.batches, 34u);
  EXPECT_EQ(stats.samples, 260u);
  EXPECT_EQ(stats.depth, 3);
  EXPECT_FALSE(stats.on_device);
  EXPECT_FALSE(stats.staging.fell_back) << "no pinning on the CPU path, so no fallback";
  EXPECT_NE(format_prefetch_stats(stats).find("34 batches"), std::string::npos);
}

TEST(Prefetcher, AnEpochEndsWhenFillReturnsZeroSamples) {
  Prefetcher prefetcher(ring(2, 10, 0, 2), pattern_fill(35, 10));  // 4 batches per epoch
  std::vector<std::pair<std::uint64_t, std::uint64_t>> seen;
  while (auto batch = prefetcher.next()) seen.emplace_back(batch->epoch(), batch->index());
  ASSERT_EQ(seen.size(), 8u);
  EXPECT_EQ(seen[3], std::make_pair(std::uint64_t{3}, std::uint64_t{3}));
  EXPECT_EQ(seen[4], std::make_pair(std::uint64_t{4}, std::uint64_t{0}));
}

TEST(Prefetcher, ProducerFillsTheNextSlotWhileTheConsumerHoldsABatch) {
  // Overlap shown by structure, not timing: while the consumer holds batch 0,
  // the producer must start filling batch 1. Without overlap this would wait
  // out the (generous) timeout.
  std::mutex mutex;
  std::condition_variable cv;
  std::set<std::uint64_t> started;
  auto fill = [&](std::uint64_t e, std::uint64_t b, std::span<std::byte> images,
                  std::span<std::int32_t> labels) {
    {
      std::lock_guard lock(mutex);
      started.insert(b);
    }
    cv.notify_all();
    return pattern_fill(1000, 4)(e, b, images, labels);
  };
  Prefetcher prefetcher(ring(2, 4, 10, 1), fill);
  auto batch0 = prefetcher.next();
  ASSERT_TRUE(batch0);
  std::unique_lock lock(mutex);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return started.count(1) > 0; }))
      << "the producer did not work ahead while the consumer held a batch";
  EXPECT_EQ(started.count(2), 0u) << "depth 2: batch 2 must wait for batch 0's slot";
}

TEST(Prefetcher, ProducerExceptionReachesConsumerAfterTheBatchesBeforeIt) {
  auto fill = [](std::uint64_t e, std::uint64_t b, std::span<std::byte> images,
                 std::span<std::int32_t> labels) -> std::size_t {
    if (b == 5) throw DecodeError("cannot decode /data/cat_0042.jpg: truncated");
    return pattern_fill(1000, 4)(e, b, images, labels);
  };
  Prefetcher prefetcher(ring(3, 4, 10, 1), fill);
  for (std::uint64_t i = 0; i < 5; ++i) {
    auto batch = prefetcher.next();
    ASSERT_TRUE(batch);
    EXPECT_EQ(batch->index(), i);
  }
  try {
    prefetcher.next();
    FAIL() << "expected the producer's exception";
  } catch (const DecodeError& e) {
    EXPECT_STREQ(e.what(), "cannot decode /data/cat_0042.jpg: truncated");
  }
  EXPECT_THROW(prefetcher.next(), DecodeError) << "the error stays";
}

TEST(Prefetcher, FillReturningMoreThanTheBatchSizeIsAnError) {
  auto fill = [](std::uint64_t, std::uint64_t, std::span<std::byte>, std::span<std::int32_t>) {
    return std::size_t{9};
  };
  Prefetcher prefetcher(ring(2, 8, 4, 1), fill);
  try {
    prefetcher.next();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("more than the batch size 8"), std::string::npos);
  }
}

TEST(Prefetcher, HoldingEverySlotAndAskingForMoreIsAnErrorNotADeadlock) {
  Prefetcher prefetcher(ring(2, 4, 10, 1), pattern_fill(1000, 4));
  auto a = prefetcher.next();
  auto b = prefetcher.next();
  EXPECT_THROW(prefetcher.next(), InvalidArgument);
  a->release();
  auto c = prefetcher.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->index(), 2u);
}

TEST(Prefetcher, ShutdownWithBatchesInFlightNeitherDeadlocksNorInvalidatesHeldBatches) {
  std::atomic<int> fills{0};
  auto fill = [&](std::uint64_t e, std::uint64_t b, std::span<std::byte> images,
                  std::span<std::int32_t> labels) {
    ++fills;
    return pattern_fill(100000, 4)(e, b, images, labels);
  };
  std::optional<Batch> held;
  {
    Prefetcher prefetcher(ring(3, 4, 1000, 1), fill);
    held = prefetcher.next();
    auto second = prefetcher.next();
    ASSERT_TRUE(held && second);
    // The producer is now filling or waiting for a slot; destroying the
    // prefetcher must stop it without either side being released first.
  }
  const int after_shutdown = fills.load();
  EXPECT_LE(after_shutdown, 4) << "the producer ran on past its ring";
  ASSERT_TRUE(held);
  expect_batch_content(*held, held->images().data(), held->labels().data());
  held->release();
  EXPECT_EQ(fills.load(), after_shutdown) << "the producer kept running after shutdown";
}

TEST(Prefetcher, StopHandsOutWhatIsPreparedThenEnds) {
  Prefetcher prefetcher(ring(2, 4, 1000, 1), pattern_fill(100000, 4));
  auto first = prefetcher.next();
  prefetcher.stop();
  first.reset();
  int more = 0;
  while (auto batch = prefetcher.next()) ++more;
  EXPECT_LE(more, 2);
}

TEST(Prefetcher, RejectsImpossibleOptions) {
  auto fill = pattern_fill(10, 2);
  PrefetchOptions o = ring(2, 4, 1, 1);
  o.depth = 0;
  EXPECT_THROW(Prefetcher(o, fill), InvalidArgument);
  o = ring(2, 0, 1, 1);
  EXPECT_THROW(Prefetcher(o, fill), InvalidArgument);
  o = ring(2, 4, 1, 1);
  o.device = 0;  // no usable device here (or the GPU test covers it)
  try {
    Prefetcher p(o, fill);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).size(), 0u);
  }
}

TEST(Prefetcher, OptionsFromSettingsTakeDepthStreamsAndPinning) {
  Settings settings;
  settings.prefetch_depth = 5;
  settings.gpu_streams = false;
  settings.host_pinned_max = 1 << 20;
  const PrefetchOptions o = PrefetchOptions::from_settings(settings);
  EXPECT_EQ(o.depth, 5);
  EXPECT_FALSE(o.gpu_streams);
  EXPECT_EQ(o.host_pinned_max, 1u << 20);
}

// The CUDA path through the fake device: synchronous "streams", host memory.
class PrefetcherOnFakeDevice : public ::testing::TestWithParam<bool> {};

TEST_P(PrefetcherOnFakeDevice, UploadsEveryBatchToFixedDeviceSlotsAndLeaksNothing) {
  const bool streams = GetParam();
  auto device = std::make_shared<FakeCudaDevice>();
  std::set<void*> slot_addresses;
  {
    PrefetchOptions o = ring(3, 8, 9, 1);
    o.gpu_streams = streams;
    Prefetcher prefetcher(o, pattern_fill(70, 8), device);  // last batch: 6 samples
    std::uint64_t expected = 0;
    while (auto batch = prefetcher.next()) {
      ASSERT_EQ(batch->index(), expected++);
      ASSERT_NE(batch->device_images(), nullptr);
      slot_addresses.insert(batch->device_images());
      expect_batch_content(*batch, static_cast<const std::byte*>(batch->device_images()),
                           batch->device_labels());
    }
    EXPECT_EQ(expected, 9u);
    const PrefetchStats stats = prefetcher.stats();
    EXPECT_TRUE(stats.on_device);
    EXPECT_EQ(stats.gpu_streams, streams);
    EXPECT_EQ(stats.bytes_copied, 70 * (kSampleBytes + sizeof(std::int32_t)));
    EXPECT_GT(stats.copy_seconds, 0.0);
    EXPECT_TRUE(stats.staging.pinned_bytes > 0) << "staging pinned through the device";
    EXPECT_EQ(device->streams_live, streams ? 1 : 0);
    EXPECT_EQ(device->copies, 18);
  }
  EXPECT_EQ(slot_addresses.size(), 3u) << "device slots are fixed: one address per slot";
  EXPECT_EQ(device->device_live, 0u);
  EXPECT_EQ(device->events_live, 0);
  EXPECT_EQ(device->streams_live, 0);
  EXPECT_EQ(device->pinned_live, 0u);
}

TEST_P(PrefetcherOnFakeDevice, EarlyStopWithHeldBatchesReleasesDeviceResourcesLast) {
  auto device = std::make_shared<FakeCudaDevice>();
  std::optional<Batch> held;
  {
    PrefetchOptions o = ring(4, 8, 100, 1);
    o.gpu_streams = GetParam();
    Prefetcher prefetcher(o, pattern_fill(100000, 8), device);
    held = prefetcher.next();
    prefetcher.next();  // taken and released at once
  }
  EXPECT_GT(device->device_live, 0u) << "the held batch keeps the ring alive";
  expect_batch_content(*held, static_cast<const std::byte*>(held->device_images()),
                       held->device_labels());
  held.reset();
  EXPECT_EQ(device->device_live, 0u);
  EXPECT_EQ(device->events_live, 0);
  EXPECT_EQ(device->pinned_live, 0u);
}

TEST_P(PrefetcherOnFakeDevice, DeviceNormalizeHandsOutFloatChwOfTheUploadedBytes) {
  auto device = std::make_shared<FakeCudaDevice>();
  constexpr int kH = 3, kW = 5, kC = 3, kBatch = 4;
  PrefetchOptions o;
  o.sample_bytes = kH * kW * kC;
  o.batch_size = kBatch;
  o.batches_per_epoch = 3;
  o.gpu_streams = GetParam();
  o.device_normalize = {true, kH, kW, kC, {0.5f, 0.25f, 0.0f, 0.0f}, {0.5f, 0.25f, 2.0f, 1.0f}};
  // Byte (n, y, x, c) of batch b = (b * 50 + n * 17 + (y * kW + x) * 3 + c) mod 256.
  auto fill = [](std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                 std::span<std::int32_t> labels) {
    for (std::size_t i = 0; i < kBatch * kH * kW * kC; ++i) {
      const std::size_t n = i / (kH * kW * kC), rest = i % (kH * kW * kC);
      images[i] = static_cast<std::byte>((b * 50 + n * 17 + rest) % 256);
    }
    for (int n = 0; n < kBatch; ++n) labels[static_cast<std::size_t>(n)] = n;
    return std::size_t{kBatch};
  };
  Prefetcher prefetcher(o, fill, device);
  while (auto batch = prefetcher.next()) {
    const auto* out = static_cast<const float*>(batch->device_images());
    for (int n = 0; n < kBatch; ++n) {
      for (int c = 0; c < kC; ++c) {
        for (int p = 0; p < kH * kW; ++p) {
          const float byte = static_cast<float>((batch->index() * 50 + n * 17 + p * kC + c) % 256);
          const float expected =
              (byte / 255.0f - o.device_normalize.mean[c]) / o.device_normalize.std[c];
          ASSERT_NEAR(out[(n * kC + c) * kH * kW + p], expected, 1e-5f)
              << "batch " << batch->index() << " n " << n << " c " << c << " p " << p;
        }
      }
    }
    EXPECT_EQ(batch->images().size(), static_cast<std::size_t>(kBatch * kH * kW * kC))
        << "the host side keeps the uint8 batch";
  }
  EXPECT_EQ(device->normalizes, 3);
}

TEST(Prefetcher, DeviceNormalizeRejectsAShapeThatIsNotTheSampleSize) {
  PrefetchOptions o = ring(2, 4, 1, 1);                    // 48-byte samples
  o.device_normalize = {true, 4, 4, 4, {}, {1, 1, 1, 1}};  // 64 bytes
  EXPECT_THROW(Prefetcher(o, pattern_fill(8, 4)), InvalidArgument);
  o.device_normalize = {true, 4, 4, 3, {}, {1, 0, 1, 1}};  // std 0
  EXPECT_THROW(Prefetcher(o, pattern_fill(8, 4)), InvalidArgument);
}

// The fit's rings (lib/prefetch/ring.hpp): pass after pass (an epoch, a
// validation) borrows the same slots, so staging is pinned and device slots
// allocated once, and every pass sees its own batches through the same
// device addresses (what a captured graph relies on).
TEST(PrefetchRings, PassesBorrowOneRingWithFixedSlots) {
  auto device = std::make_shared<FakeCudaDevice>();
  detail::PrefetchRings rings;
  std::set<void*> addresses;
  for (std::uint64_t pass = 0; pass < 3; ++pass) {
    PrefetchOptions o = ring(2, 8, 5, 1);
    o.first_epoch = pass;
    o.device = 0;
    Prefetcher prefetcher(o, pattern_fill(37, 8), rings.acquire(o, device));
    std::uint64_t batches = 0;
    while (auto batch = prefetcher.next()) {
      ASSERT_EQ(batch->epoch(), pass);
      ASSERT_EQ(batch->index(), batches++);
      addresses.insert(batch->device_images());
      expect_batch_content(*batch, static_cast<const std::byte*>(batch->device_images()),
                           batch->device_labels());
    }
    EXPECT_EQ(batches, 5u);
    EXPECT_EQ(prefetcher.stats().bytes_copied, 37 * (kSampleBytes + sizeof(std::int32_t)))
        << "a pass reports its own copies, not the ring's";
  }
  EXPECT_EQ(rings.built(), 1u);
  EXPECT_EQ(device->pinned_allocs, 2) << "one staging buffer per slot, for all three passes";
  EXPECT_EQ(addresses.size(), 2u) << "the same two device slots every pass";
  EXPECT_GT(device->device_live, 0u) << "the rings keep their slots between passes";
  rings.clear();
  EXPECT_EQ(device->device_live, 0u);
  EXPECT_EQ(device->events_live, 0);
  EXPECT_EQ(device->streams_live, 0);
  EXPECT_EQ(device->pinned_live, 0u);
}

// Another layout gets a ring of its own (and keeps it); a ring whose batch
// is still held is not lent again; a ring never runs a layout it was not
// built for.
TEST(PrefetchRings, AnotherLayoutOrAHeldRingGetsItsOwnRing) {
  auto device = std::make_shared<FakeCudaDevice>();
  detail::PrefetchRings rings;
  PrefetchOptions train = ring(2, 8, 3, 1), val = ring(2, 4, 3, 1);
  train.device = val.device = 0;
  const auto train_ring = rings.acquire(train, device);
  EXPECT_NE(rings.acquire(val, device), train_ring);
  EXPECT_EQ(rings.acquire(val, device), rings.acquire(val, device));
  EXPECT_EQ(rings.built(), 2u);
  EXPECT_THROW(Prefetcher(val, pattern_fill(12, 4), train_ring), InvalidArgument);
  std::optional<Batch> held;
  {
    Prefetcher first(train, pattern_fill(24, 8), rings.acquire(train, device));
    held = first.next();
  }
  ASSERT_TRUE(train_ring->lent()) << "the held batch keeps the pass alive";
  EXPECT_THROW(Prefetcher(train, pattern_fill(24, 8), train_ring), InvalidArgument);
  EXPECT_NE(rings.acquire(train, device), train_ring);
  EXPECT_EQ(rings.built(), 3u);
  held.reset();
  EXPECT_FALSE(train_ring->lent());
  Prefetcher again(train, pattern_fill(24, 8), train_ring);
  EXPECT_TRUE(again.next().has_value());
}

INSTANTIATE_TEST_SUITE_P(Streams, PrefetcherOnFakeDevice, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "CopyStream" : "OneStream"; });

}  // namespace
}  // namespace stoke::testing
