// The prefetcher on a real device: every batch reaches its device slot intact
// even when the consumer's reads are still queued when it releases the slot,
// and with a copy stream the uploads overlap the consumer's device work.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gpu/cuda_device.hpp"
#include "gpu/gpu_fixture.hpp"
#include "stoke/prefetch.hpp"

namespace stoke::testing {
namespace {

constexpr std::size_t kSampleBytes = 4096;
constexpr std::size_t kBatch = 64;

std::byte pattern(std::uint64_t b, std::size_t s) {
  return static_cast<std::byte>((b * 13 + s) % 251);
}

class DeviceStreams : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    device_ = detail::open_cuda_device(0);
    compute_ = device_->create_stream();
  }
  void TearDown() override {
    if (device_) device_->destroy_stream(compute_);
  }
  std::shared_ptr<detail::CudaDevice> device_;
  detail::GpuStream compute_ = nullptr;
};

class DevicePrefetch : public DeviceStreams, public ::testing::WithParamInterface<bool> {};

TEST_P(DevicePrefetch, EveryBatchArrivesIntactWhileReadsAreStillQueuedAtRelease) {
  PrefetchOptions o;
  o.sample_bytes = kSampleBytes;
  o.batch_size = kBatch;
  o.batches_per_epoch = 40;
  o.depth = 2;
  o.device = 0;
  o.gpu_streams = GetParam();
  o.compute_stream = compute_;
  auto fill = [](std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                 std::span<std::int32_t> labels) {
    for (std::size_t s = 0; s < kBatch; ++s) {
      std::memset(images.data() + s * kSampleBytes, static_cast<int>(pattern(b, s)), kSampleBytes);
      labels[s] = static_cast<std::int32_t>(b * 1000 + s);
    }
    return kBatch;
  };
  // Pinned destinations: a device-to-host copy into pageable memory is
  // synchronous, so the read would be done before release() and the test
  // would not test a read still queued at release.
  constexpr std::size_t kImageBytes = kBatch * kSampleBytes,
                        kLabelBytes = kBatch * sizeof(std::int32_t);
  auto* pinned = static_cast<std::byte*>(device_->pinned_alloc(40 * (kImageBytes + kLabelBytes)));
  ASSERT_NE(pinned, nullptr) << "no pinned memory for the test";
  const auto seen_at = [&](std::uint64_t b) { return pinned + b * kImageBytes; };
  const auto labels_at = [&](std::uint64_t b) {
    return reinterpret_cast<std::int32_t*>(pinned + 40 * kImageBytes + b * kLabelBytes);
  };
  {
    Prefetcher prefetcher(o, fill);
    while (auto batch = prefetcher.next()) {
      // Queue the read on the compute stream and release at once: the next
      // upload into this slot must wait for the read, not overwrite it.
      device_->copy_to_host(seen_at(batch->index()), batch->device_images(), kImageBytes, compute_);
      device_->copy_to_host(labels_at(batch->index()), batch->device_labels(), kLabelBytes,
                            compute_);
      batch->release();
    }
    device_->synchronize(compute_);
    const PrefetchStats stats = prefetcher.stats();
    EXPECT_EQ(stats.batches, 40u);
    EXPECT_TRUE(stats.on_device);
    EXPECT_FALSE(stats.staging.fell_back) << stats.staging.fallback_reason;
    std::printf("%s", format_prefetch_stats(stats).c_str());
  }
  bool intact = true;
  for (std::uint64_t b = 0; b < 40 && intact; ++b) {
    for (std::size_t s = 0; s < kBatch; ++s) {
      EXPECT_EQ(seen_at(b)[s * kSampleBytes], pattern(b, s)) << "batch " << b << " sample " << s;
      EXPECT_EQ(seen_at(b)[s * kSampleBytes + kSampleBytes - 1], pattern(b, s));
      EXPECT_EQ(labels_at(b)[s], static_cast<std::int32_t>(b * 1000 + s));
      intact = intact && seen_at(b)[s * kSampleBytes] == pattern(b, s);
    }
  }
  device_->pinned_free(pinned);
}

INSTANTIATE_TEST_SUITE_P(Streams, DevicePrefetch, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "CopyStream" : "OneStream"; });

// The uint8 HWC -> float CHW kernel against a plain CPU loop: the one NVRTC
// compiles (STOKE_GPU_JIT on/auto) and the precompiled one (off).
class DeviceNormalizeKernel : public DeviceStreams, public ::testing::WithParamInterface<bool> {};

TEST_P(DeviceNormalizeKernel, EqualsTheCpuReference) {
  constexpr int kH = 37, kW = 53, kC = 3, kN = 5;
  PrefetchOptions o;
  o.sample_bytes = kH * kW * kC;
  o.batch_size = kN;
  o.batches_per_epoch = 4;
  o.device = 0;
  o.compute_stream = compute_;
  o.device_normalize = {
      true, kH, kW, kC, {0.485f, 0.456f, 0.406f, 0.0f}, {0.229f, 0.224f, 0.225f, 1.0f}, GetParam()};
  auto byte_at = [](std::uint64_t b, std::size_t i) {
    return static_cast<unsigned char>((b * 101 + i * 7 + i / 13) % 256);
  };
  auto fill = [&](std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                  std::span<std::int32_t> labels) {
    for (std::size_t i = 0; i < images.size(); ++i)
      images[i] = static_cast<std::byte>(byte_at(b, i));
    for (auto& l : labels) l = 0;
    return std::size_t{kN};
  };
  constexpr std::size_t kFloats = std::size_t{kN} * kC * kH * kW;
  std::vector<float> got(kFloats);
  Prefetcher prefetcher(o, fill);
  const float eps = std::numeric_limits<float>::epsilon();
  while (auto batch = prefetcher.next()) {
    device_->copy_to_host(got.data(), batch->device_images(), kFloats * sizeof(float), compute_);
    device_->synchronize(compute_);
    for (int n = 0; n < kN; ++n) {
      for (int c = 0; c < kC; ++c) {
        for (int p = 0; p < kH * kW; ++p) {
          const std::size_t in = (static_cast<std::size_t>(n) * kH * kW + p) * kC + c;
          const float ref = (byte_at(batch->index(), in) / 255.0f - o.device_normalize.mean[c]) /
                            o.device_normalize.std[c];
          const float out = got[(static_cast<std::size_t>(n) * kC + c) * kH * kW + p];
          // A few roundings on each side, of terms as large as (1 + mean) / std
          // that may cancel: the bound scales with those terms, not with ref.
          const float terms = (1.0f + o.device_normalize.mean[c]) / o.device_normalize.std[c];
          ASSERT_NEAR(out, ref, 4.0f * eps * (std::fabs(ref) + terms))
              << "batch " << batch->index() << " n " << n << " c " << c << " p " << p;
        }
      }
    }
  }
  EXPECT_EQ(prefetcher.stats().batches, 4u);
}

INSTANTIATE_TEST_SUITE_P(Kernels, DeviceNormalizeKernel, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Jit" : "Precompiled"; });

// Device time of n batches whose consumer work is a device->host copy of the
// same size as the upload (another copy engine): serialized on one stream it
// is about the sum, with a copy stream about the larger of the two.
double device_ms(detail::CudaDevice& device, detail::GpuStream compute, bool streams) {
  constexpr std::size_t kBytes = 32u << 20;
  constexpr int kBatches = 12;
  PrefetchOptions o;
  o.sample_bytes = kBytes;
  o.batch_size = 1;
  o.batches_per_epoch = kBatches;
  o.depth = 3;
  o.device = 0;
  o.gpu_streams = streams;
  o.compute_stream = compute;
  // The producer is nearly free here: the images are whatever the slot holds.
  auto fill = [](std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                 std::span<std::int32_t> labels) {
    images[0] = static_cast<std::byte>(b);
    labels[0] = static_cast<std::int32_t>(b);
    return std::size_t{1};
  };
  void* sink_host = device.pinned_alloc(kBytes);
  detail::GpuEvent start = device.create_event(true);
  detail::GpuEvent end = device.create_event(true);
  float ms = 0.0f;
  {
    Prefetcher prefetcher(o, fill);
    auto first = prefetcher.next();
    device.record(start, compute);
    device.copy_to_host(sink_host, first->device_images(), kBytes, compute);
    first->release();
    while (auto batch = prefetcher.next()) {
      device.copy_to_host(sink_host, batch->device_images(), kBytes, compute);
      batch->release();
    }
    device.record(end, compute);
    device.wait(end);
    ms = device.elapsed_ms(start, end);
  }
  device.destroy_event(start);
  device.destroy_event(end);
  device.pinned_free(sink_host);
  return ms;
}

class DevicePrefetchOverlap : public DeviceStreams {};

TEST_F(DevicePrefetchOverlap, CopyStreamOverlapsUploadsWithConsumerWorkInEventTimings) {
  device_ms(*device_, compute_, true);  // warm-up
  const double serialized = device_ms(*device_, compute_, false);
  const double overlapped = device_ms(*device_, compute_, true);
  RecordProperty("one_stream_ms", std::to_string(serialized));
  RecordProperty("copy_stream_ms", std::to_string(overlapped));
  std::printf("12 batches of 32 MiB: one stream %.2f ms, copy stream %.2f ms\n", serialized,
              overlapped);
  EXPECT_LT(overlapped, 0.85 * serialized) << "no overlap visible in the event timings";
}

}  // namespace
}  // namespace stoke::testing
