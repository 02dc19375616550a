// The prefetcher on a real device: every batch reaches its device slot intact
// even when the consumer's reads are still queued when it releases the slot,
// and uploads and reads follow each other in the order the prefetcher
// promises (device timestamps), on a copy stream of their own when asked.
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
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

// Past STOKE_HOST_PINNED_MAX the ring stages in pageable memory (its copies
// then synchronous with respect to the host): every batch still reaches its
// device slot intact, and the stats say it fell back.
TEST_F(DeviceStreams, PageableFallbackDeliversEveryBatchIntact) {
  PrefetchOptions o;
  o.sample_bytes = kSampleBytes;
  o.batch_size = kBatch;
  o.batches_per_epoch = 12;
  o.depth = 2;
  o.device = 0;
  o.compute_stream = compute_;
  o.host_pinned_max = 64u << 10;  // less than one slot's 256 KiB
  auto fill = [](std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                 std::span<std::int32_t> labels) {
    for (std::size_t s = 0; s < kBatch; ++s) {
      std::memset(images.data() + s * kSampleBytes, static_cast<int>(pattern(b, s)), kSampleBytes);
      labels[s] = static_cast<std::int32_t>(b * 1000 + s);
    }
    return kBatch;
  };
  std::vector<std::byte> seen(kBatch * kSampleBytes);
  std::vector<std::int32_t> labels(kBatch);
  Prefetcher prefetcher(o, fill);
  std::uint64_t batches = 0;
  while (auto batch = prefetcher.next()) {
    device_->copy_to_host(seen.data(), batch->device_images(), seen.size(), compute_);
    device_->copy_to_host(labels.data(), batch->device_labels(), kBatch * sizeof(std::int32_t),
                          compute_);
    device_->synchronize(compute_);
    for (std::size_t s = 0; s < kBatch; ++s) {
      ASSERT_EQ(seen[s * kSampleBytes], pattern(batch->index(), s)) << "batch " << batch->index();
      ASSERT_EQ(seen[s * kSampleBytes + kSampleBytes - 1], pattern(batch->index(), s));
      ASSERT_EQ(labels[s], static_cast<std::int32_t>(batch->index() * 1000 + s));
    }
    batch->release();
    ++batches;
  }
  EXPECT_EQ(batches, 12u);
  const PrefetchStats stats = prefetcher.stats();
  EXPECT_TRUE(stats.on_device);
  EXPECT_TRUE(stats.staging.fell_back) << "a 64 KiB pinned cap must not hold the ring";
}

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

// The real device behind the prefetcher, recording a timing event before and
// after every image upload (on the stream the upload was issued on), so the
// test can put the uploads and the consumer's reads in device order.
class UploadRecordingDevice final : public detail::CudaDevice {
 public:
  struct Upload {
    void* dst;
    detail::GpuStream stream;
    detail::GpuEvent begin, end;
  };
  UploadRecordingDevice(std::shared_ptr<detail::CudaDevice> real, std::size_t image_bytes)
      : real_(std::move(real)), image_bytes_(image_bytes) {}
  ~UploadRecordingDevice() override {
    for (const Upload& u : uploads_) {
      real_->destroy_event(u.begin);
      real_->destroy_event(u.end);
    }
  }
  std::vector<Upload> uploads() {
    std::lock_guard lock(mutex_);
    return uploads_;
  }

  int index() const noexcept override { return real_->index(); }
  std::string name() const override { return real_->name(); }
  std::uint64_t total_memory() const override { return real_->total_memory(); }
  std::uint64_t free_memory() const override { return real_->free_memory(); }
  void* device_alloc(std::size_t bytes) override { return real_->device_alloc(bytes); }
  void device_free(void* ptr) noexcept override { real_->device_free(ptr); }
  void* pinned_alloc(std::size_t bytes) override { return real_->pinned_alloc(bytes); }
  void pinned_free(void* ptr) noexcept override { real_->pinned_free(ptr); }
  detail::GpuStream create_stream() override { return real_->create_stream(); }
  void destroy_stream(detail::GpuStream s) noexcept override { real_->destroy_stream(s); }
  void synchronize(detail::GpuStream s) override { real_->synchronize(s); }
  detail::GpuEvent create_event(bool timing) override { return real_->create_event(timing); }
  void destroy_event(detail::GpuEvent e) noexcept override { real_->destroy_event(e); }
  void record(detail::GpuEvent e, detail::GpuStream s) override { real_->record(e, s); }
  bool query(detail::GpuEvent e) override { return real_->query(e); }
  void wait(detail::GpuEvent e) override { real_->wait(e); }
  void stream_wait(detail::GpuStream s, detail::GpuEvent e) override { real_->stream_wait(s, e); }
  float elapsed_ms(detail::GpuEvent a, detail::GpuEvent b) override {
    return real_->elapsed_ms(a, b);
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes,
                      detail::GpuStream stream) override {
    if (bytes != image_bytes_) return real_->copy_to_device(dst, src, bytes, stream);
    Upload u{dst, stream, real_->create_event(true), real_->create_event(true)};
    real_->record(u.begin, stream);
    real_->copy_to_device(dst, src, bytes, stream);
    real_->record(u.end, stream);
    std::lock_guard lock(mutex_);
    uploads_.push_back(u);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes,
                    detail::GpuStream stream) override {
    real_->copy_to_host(dst, src, bytes, stream);
  }
  void normalize_u8_hwc_to_f32_chw(const void* src, float* dst, int samples, int height, int width,
                                   int channels, const float* mean, const float* std, bool jit,
                                   detail::GpuStream stream) override {
    real_->normalize_u8_hwc_to_f32_chw(src, dst, samples, height, width, channels, mean, std, jit,
                                       stream);
  }

 private:
  std::shared_ptr<detail::CudaDevice> real_;
  std::size_t image_bytes_;
  std::mutex mutex_;
  std::vector<Upload> uploads_;
};

// The order the prefetcher promises, read from device timestamps: batch b's
// upload ends before the consumer's read of it begins, and the upload that
// reuses b's slot begins after the consumer's read of b ended. With a copy
// stream the uploads run on a stream of their own (what lets them overlap the
// consumer's work; how much they overlap is measured by the
// BM_PrefetchOverlap/cuda_* benches of stoke_bench_memory, not asserted).
class DevicePrefetchOrder : public DeviceStreams, public ::testing::WithParamInterface<bool> {};

TEST_P(DevicePrefetchOrder, UploadsPrecedeReadsAndSlotsWaitForTheirReads) {
  constexpr std::size_t kBytes = 8u << 20;
  constexpr int kBatches = 10, kDepth = 3;
  PrefetchOptions o;
  o.sample_bytes = kBytes;
  o.batch_size = 1;
  o.batches_per_epoch = kBatches;
  o.depth = kDepth;
  o.device = 0;
  o.gpu_streams = GetParam();
  o.compute_stream = compute_;
  auto fill = [](std::uint64_t, std::uint64_t b, std::span<std::byte> images,
                 std::span<std::int32_t> labels) {
    images[0] = static_cast<std::byte>(b);
    labels[0] = static_cast<std::int32_t>(b);
    return std::size_t{1};
  };
  auto recorder = std::make_shared<UploadRecordingDevice>(device_, kBytes);
  void* sink = device_->pinned_alloc(kBytes);
  ASSERT_NE(sink, nullptr);
  struct Read {
    void* slot;
    detail::GpuEvent begin, end;
  };
  std::vector<Read> reads;
  {
    Prefetcher prefetcher(o, fill, recorder);
    while (auto batch = prefetcher.next()) {
      Read r{batch->device_images(), device_->create_event(true), device_->create_event(true)};
      device_->record(r.begin, compute_);
      device_->copy_to_host(sink, batch->device_images(), kBytes, compute_);  // the consumer's work
      device_->record(r.end, compute_);
      reads.push_back(r);
      batch->release();
    }
    device_->synchronize(compute_);
  }
  const auto uploads = recorder->uploads();
  ASSERT_EQ(uploads.size(), static_cast<std::size_t>(kBatches));
  ASSERT_EQ(reads.size(), static_cast<std::size_t>(kBatches));
  // Timestamps of one device share a clock; allow its resolution (~0.5 us).
  constexpr float kResolutionMs = 0.002f;
  for (int b = 0; b < kBatches; ++b) {
    const auto& up = uploads[static_cast<std::size_t>(b)];
    const auto& read = reads[static_cast<std::size_t>(b)];
    EXPECT_EQ(up.dst, read.slot) << "batch " << b << " was uploaded into another slot";
    EXPECT_GE(device_->elapsed_ms(up.end, read.begin), -kResolutionMs)
        << "batch " << b << " was read before its upload ended";
    EXPECT_EQ(up.stream != compute_, GetParam())
        << "batch " << b
        << (GetParam() ? " uploaded on the compute stream" : " uploaded off the compute stream");
    // The next upload into this slot (slots go round in order).
    for (int later = b + 1; later < kBatches; ++later) {
      const auto& next = uploads[static_cast<std::size_t>(later)];
      if (next.dst != up.dst) continue;
      EXPECT_GE(device_->elapsed_ms(read.end, next.begin), -kResolutionMs)
          << "batch " << later << " overwrote slot of batch " << b << " before its read ended";
      break;
    }
  }
  for (const Read& r : reads) {
    device_->destroy_event(r.begin);
    device_->destroy_event(r.end);
  }
  device_->pinned_free(sink);
}

INSTANTIATE_TEST_SUITE_P(Streams, DevicePrefetchOrder, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "CopyStream" : "OneStream"; });

}  // namespace
}  // namespace stoke::testing
