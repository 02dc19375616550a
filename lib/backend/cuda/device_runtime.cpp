// The plugin's per-device object: memory, pinned host memory, streams, events
// and copies for libstoke's pool, staging buffers and prefetcher.
#include "backend/cuda/device_runtime.hpp"

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backend/cuda/check.hpp"
#include "backend/cuda/device_normalize.hpp"
#include "backend/cuda/device_runtime.hpp"
#include "gpu/cuda_device_api.hpp"

namespace stoke::cuda {
namespace {

// Relaxes this thread's stream-capture mode for its lifetime.
class CaptureModeRelaxed {
 public:
  CaptureModeRelaxed() { exchanged_ = cudaThreadExchangeStreamCaptureMode(&mode_) == cudaSuccess; }
  ~CaptureModeRelaxed() {
    if (exchanged_) cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  CaptureModeRelaxed(const CaptureModeRelaxed&) = delete;
  CaptureModeRelaxed& operator=(const CaptureModeRelaxed&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
  bool exchanged_ = false;
};

class Device final : public detail::CudaDevice {
 public:
  explicit Device(int index)
      : index_(index), normalize_jit_(index, true), normalize_precompiled_(index, false) {
    int count = 0;
    STOKE_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (index < 0 || index >= count) {
      throw InvalidArgument("CUDA device " + std::to_string(index) + " does not exist (" +
                            std::to_string(count) + " devices visible)");
    }
    cudaDeviceProp prop{};
    STOKE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    name_ = "cuda:" + std::to_string(index) + " (" + prop.name + ")";
    total_ = prop.totalGlobalMem;
  }

  int index() const noexcept override { return index_; }
  std::string name() const override { return name_; }
  std::uint64_t total_memory() const override { return total_; }
  std::uint64_t free_memory() const override {
    DeviceScope scope(index_);
    std::size_t free_bytes = 0, total_bytes = 0;
    STOKE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return free_bytes;
  }

  void* device_alloc(std::size_t bytes) override {
    DeviceScope scope(index_);
    void* ptr = nullptr;
    // The pool may grow while this thread captures a graph (thread-local
    // mode forbids cudaMalloc): relax the mode around the allocation, as
    // PyTorch's allocator does, so the capture goes on instead of failing.
    CaptureModeRelaxed relaxed;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error so later calls succeed
      return nullptr;
    }
    STOKE_CUDA_CHECK(status);
    return ptr;
  }
  void device_free(void* ptr) noexcept override {
    if (!ptr) return;
    try {
      DeviceScope scope(index_);
      STOKE_CUDA_WARN(cudaFree(ptr));
    } catch (...) {
    }
  }

  void* pinned_alloc(std::size_t bytes) override {
    DeviceScope scope(index_);
    void* ptr = nullptr;
    const cudaError_t status = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    STOKE_CUDA_CHECK(status);
    return ptr;
  }
  void pinned_free(void* ptr) noexcept override {
    if (ptr) STOKE_CUDA_WARN(cudaFreeHost(ptr));
  }

  detail::GpuStream create_stream() override {
    DeviceScope scope(index_);
    cudaStream_t stream = nullptr;
    STOKE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return stream;
  }
  void destroy_stream(detail::GpuStream stream) noexcept override {
    if (stream) STOKE_CUDA_WARN(cudaStreamDestroy(static_cast<cudaStream_t>(stream)));
  }
  void synchronize(detail::GpuStream stream) override {
    DeviceScope scope(index_);
    STOKE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  }

  detail::GpuEvent create_event(bool timing) override {
    DeviceScope scope(index_);
    cudaEvent_t event = nullptr;
    STOKE_CUDA_CHECK(
        cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
    return event;
  }
  void destroy_event(detail::GpuEvent event) noexcept override {
    if (event) STOKE_CUDA_WARN(cudaEventDestroy(static_cast<cudaEvent_t>(event)));
  }
  void record(detail::GpuEvent event, detail::GpuStream stream) override {
    DeviceScope scope(index_);
    STOKE_CUDA_CHECK(
        cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
  }
  bool query(detail::GpuEvent event) override {
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    STOKE_CUDA_CHECK(status);
    return true;
  }
  void wait(detail::GpuEvent event) override {
    STOKE_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  }
  void stream_wait(detail::GpuStream stream, detail::GpuEvent event) override {
    DeviceScope scope(index_);
    STOKE_CUDA_CHECK(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
  }
  float elapsed_ms(detail::GpuEvent start, detail::GpuEvent end) override {
    float ms = 0.0f;
    STOKE_CUDA_CHECK(
        cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
    return ms;
  }

  void copy_to_device(void* dst, const void* src, std::size_t bytes,
                      detail::GpuStream stream) override {
    DeviceScope scope(index_);
    STOKE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                     static_cast<cudaStream_t>(stream)));
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes,
                    detail::GpuStream stream) override {
    DeviceScope scope(index_);
    STOKE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
                                     static_cast<cudaStream_t>(stream)));
  }

  void normalize_u8_hwc_to_f32_chw(const void* src, float* dst, int samples, int height, int width,
                                   int channels, const float* mean, const float* std, bool jit,
                                   detail::GpuStream stream) override {
    DeviceScope scope(index_);
    // One handle per device serves every prefetcher: each asks for the
    // kernel its settings name, each loaded on first use.
    NormalizeKernel& kernel = jit ? normalize_jit_ : normalize_precompiled_;
    kernel.launch(src, dst, samples, height, width, channels, mean, std,
                  static_cast<cudaStream_t>(stream));
  }

 private:
  int index_;
  NormalizeKernel normalize_jit_;
  NormalizeKernel normalize_precompiled_;
  std::string name_;
  std::uint64_t total_ = 0;
};

}  // namespace

std::shared_ptr<detail::CudaDevice> open_device(int index) {
  return std::make_shared<Device>(index);
}

}  // namespace stoke::cuda
