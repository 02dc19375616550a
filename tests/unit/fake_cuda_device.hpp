// A host-only stand-in for the plugin's CudaDevice: "device" and "pinned"
// memory are host memory, copies are memcpy, streams run in order at once and
// every event has passed when recorded. It lets the code above the plugin run
// its CUDA paths here; ordering under real concurrency is left to the GPU tests.
#pragma once

#include <atomic>
#include <cstring>
#include <new>
#include <set>
#include <stdexcept>
#include <string>

#include "gpu/cuda_device_api.hpp"

namespace stoke::testing {

class FakeCudaDevice final : public detail::CudaDevice {
 public:
  std::uint64_t pinned_limit = ~0ull;  // pinned_alloc refuses beyond this total
  bool pinned_throws = false;          // pinned_alloc fails like a driver error
  std::atomic<std::uint64_t> pinned_live{0};
  std::atomic<int> pinned_allocs{0};
  std::atomic<int> streams_live{0};
  std::atomic<int> events_live{0};
  std::atomic<int> copies{0};
  std::atomic<std::uint64_t> device_live{0};

  int index() const noexcept override { return 0; }
  std::string name() const override { return "fake:0"; }
  std::uint64_t total_memory() const override { return 1ull << 30; }
  std::uint64_t free_memory() const override { return 1ull << 30; }

  void* device_alloc(std::size_t bytes) override {
    device_live += 1;
    return ::operator new (bytes, std::align_val_t{256});
  }
  void device_free(void* ptr) noexcept override {
    if (!ptr) return;
    device_live -= 1;
    ::operator delete (ptr, std::align_val_t{256});
  }
  void* pinned_alloc(std::size_t bytes) override {
    if (pinned_throws) throw std::runtime_error("cudaHostAlloc: unknown error (status 999)");
    if (pinned_live + bytes > pinned_limit) return nullptr;
    pinned_live += bytes;
    ++pinned_allocs;
    auto* p = static_cast<unsigned char*>(::operator new (bytes + 256, std::align_val_t{256}));
    std::memcpy(p, &bytes, sizeof bytes);  // remember the size for pinned_free
    return p + 256;
  }
  void pinned_free(void* ptr) noexcept override {
    if (!ptr) return;
    auto* p = static_cast<unsigned char*>(ptr) - 256;
    std::size_t bytes = 0;
    std::memcpy(&bytes, p, sizeof bytes);
    pinned_live -= bytes;
    ::operator delete (p, std::align_val_t{256});
  }

  detail::GpuStream create_stream() override {
    ++streams_live;
    return new int(0);
  }
  void destroy_stream(detail::GpuStream stream) noexcept override {
    if (!stream) return;
    --streams_live;
    delete static_cast<int*>(stream);
  }
  void synchronize(detail::GpuStream) override {}

  detail::GpuEvent create_event(bool) override {
    ++events_live;
    return new int(0);
  }
  void destroy_event(detail::GpuEvent event) noexcept override {
    if (!event) return;
    --events_live;
    delete static_cast<int*>(event);
  }
  void record(detail::GpuEvent, detail::GpuStream) override {}
  bool query(detail::GpuEvent) override { return true; }
  void wait(detail::GpuEvent) override {}
  void stream_wait(detail::GpuStream, detail::GpuEvent) override {}
  float elapsed_ms(detail::GpuEvent, detail::GpuEvent) override { return 0.25f; }

  void copy_to_device(void* dst, const void* src, std::size_t bytes, detail::GpuStream) override {
    ++copies;
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes, detail::GpuStream) override {
    std::memcpy(dst, src, bytes);
  }
  std::atomic<int> normalizes{0};
  std::atomic<int> precompiled_normalizes{0};  // those asked for without JIT
  // The plain reference of the device kernel.
  void normalize_u8_hwc_to_f32_chw(const void* src, float* dst, int samples, int height, int width,
                                   int channels, const float* mean, const float* std, bool jit,
                                   detail::GpuStream) override {
    ++normalizes;
    if (!jit) ++precompiled_normalizes;
    const auto* in = static_cast<const unsigned char*>(src);
    const std::size_t pixels = static_cast<std::size_t>(height) * width;
    for (int n = 0; n < samples; ++n) {
      for (std::size_t p = 0; p < pixels; ++p) {
        for (int c = 0; c < channels; ++c) {
          const float v = in[(n * pixels + p) * channels + c] / 255.0f;
          dst[(static_cast<std::size_t>(n) * channels + c) * pixels + p] = (v - mean[c]) / std[c];
        }
      }
    }
  }
};

}  // namespace stoke::testing
