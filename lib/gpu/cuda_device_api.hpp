// What the CUDA plugin provides per device for the memory pool, the pinned
// staging buffers and the prefetcher: memory, streams, events and copies, as
// opaque handles so that libstoke never includes a CUDA header.
//
// Every call makes the object's device current first. Calls that allocate
// return nullptr when the driver refuses (out of memory); every other failure
// throws GpuLibraryError naming the call and the device. Destroy/free calls
// never throw (they log).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace stoke::detail {

using GpuStream = void*;  // cudaStream_t; nullptr = the legacy default stream
using GpuEvent = void*;   // cudaEvent_t

class CudaDevice {
 public:
  virtual ~CudaDevice() = default;

  virtual int index() const noexcept = 0;
  virtual std::string name() const = 0;  // "cuda:0 (NVIDIA H200)"
  virtual std::uint64_t total_memory() const = 0;
  virtual std::uint64_t free_memory() const = 0;

  // Device memory (cudaMalloc); nullptr when refused.
  virtual void* device_alloc(std::size_t bytes) = 0;
  virtual void device_free(void* ptr) noexcept = 0;
  // Page-locked host memory (cudaHostAlloc, portable); nullptr when refused.
  virtual void* pinned_alloc(std::size_t bytes) = 0;
  virtual void pinned_free(void* ptr) noexcept = 0;

  // Streams: non-blocking with respect to the legacy stream.
  virtual GpuStream create_stream() = 0;
  virtual void destroy_stream(GpuStream stream) noexcept = 0;
  virtual void synchronize(GpuStream stream) = 0;

  // Events: `timing` false gives the cheaper event without timestamps.
  virtual GpuEvent create_event(bool timing) = 0;
  virtual void destroy_event(GpuEvent event) noexcept = 0;
  virtual void record(GpuEvent event, GpuStream stream) = 0;
  virtual bool query(GpuEvent event) = 0;                          // passed?
  virtual void wait(GpuEvent event) = 0;                           // host blocks until passed
  virtual void stream_wait(GpuStream stream, GpuEvent event) = 0;  // device-side wait
  virtual float elapsed_ms(GpuEvent start, GpuEvent end) = 0;      // both timing events

  // Asynchronous copies on `stream` (synchronous with respect to the host for
  // pageable host memory, as CUDA defines).
  virtual void copy_to_device(void* dst, const void* src, std::size_t bytes, GpuStream stream) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes, GpuStream stream) = 0;

  // On `stream`: dst (N, C, H, W) float = (src (N, H, W, C) uint8 / 255 -
  // mean[c]) / std[c], with a kernel compiled by NVRTC for this device on first
  // use when `jit` (STOKE_GPU_JIT), else the precompiled one. Requires
  // 1 <= channels <= 4.
  virtual void normalize_u8_hwc_to_f32_chw(const void* src, float* dst, int samples, int height,
                                           int width, int channels, const float* mean,
                                           const float* std, bool jit, GpuStream stream) = 0;
};

}  // namespace stoke::detail
