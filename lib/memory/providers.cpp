// The pool's two real chunk providers: aligned host memory, and device memory
// through the CUDA plugin with events as stream fences.
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "gpu/cuda_device.hpp"
#include "stoke/error.hpp"
#include "stoke/memory.hpp"

namespace stoke {

namespace {

class HostChunks final : public ChunkProvider {
 public:
  void* allocate_chunk(std::size_t bytes) override {
    return ::operator new (bytes, std::align_val_t{kPoolAlignment}, std::nothrow);
  }
  void free_chunk(void* base, std::size_t) noexcept override {
    ::operator delete (base, std::align_val_t{kPoolAlignment});
  }
  std::string name() const override { return "host arena"; }
};

// Device chunks from cudaMalloc. A fence is an event recorded on the freeing
// stream; events are recycled so a steady state creates none.
class DeviceChunks final : public ChunkProvider {
 public:
  explicit DeviceChunks(std::shared_ptr<detail::CudaDevice> device) : device_(std::move(device)) {}
  ~DeviceChunks() override {
    for (auto& [fence, event] : live_) device_->destroy_event(event);
    for (auto event : spare_) device_->destroy_event(event);
  }

  void* allocate_chunk(std::size_t bytes) override { return device_->device_alloc(bytes); }
  void free_chunk(void* base, std::size_t) noexcept override { device_->device_free(base); }

  std::uint64_t record_fence(StreamHandle stream) override {
    detail::GpuEvent event = nullptr;
    if (spare_.empty()) {
      event = device_->create_event(false);
    } else {
      event = spare_.back();
      spare_.pop_back();
    }
    try {
      device_->record(event, stream);
    } catch (...) {
      spare_.push_back(event);
      throw;
    }
    const std::uint64_t fence = ++next_fence_;
    live_.emplace(fence, event);
    return fence;
  }
  bool fence_passed(std::uint64_t fence) override { return device_->query(live_.at(fence)); }
  void wait_fence(std::uint64_t fence) override { device_->wait(live_.at(fence)); }
  void release_fence(std::uint64_t fence) noexcept override {
    auto it = live_.find(fence);
    if (it == live_.end()) return;
    spare_.push_back(it->second);
    live_.erase(it);
  }
  std::string name() const override { return device_->name(); }

 private:
  std::shared_ptr<detail::CudaDevice> device_;
  std::unordered_map<std::uint64_t, detail::GpuEvent> live_;
  std::vector<detail::GpuEvent> spare_;
  std::uint64_t next_fence_ = 0;
};

}  // namespace

std::unique_ptr<MemoryPool> MemoryPool::host_arena(std::uint64_t cap, std::size_t min_chunk) {
  PoolOptions options;
  options.cap = cap;
  options.min_chunk = min_chunk;
  options.chunk_granularity = 64u << 10;
  options.cap_source = "the host arena's cap";
  options.remedy = "use a smaller batch or raise the host arena's cap";
  options.thread_cache = true;  // host memory: small blocks through per-thread caches
  return std::make_unique<MemoryPool>(std::make_unique<HostChunks>(), std::move(options));
}

std::unique_ptr<MemoryPool> MemoryPool::device(const Settings& settings, int device) {
  return MemoryPool::device(settings, detail::open_cuda_device(device));
}

std::unique_ptr<MemoryPool> MemoryPool::device(const Settings& settings,
                                               std::shared_ptr<detail::CudaDevice> cuda) {
  if (!cuda) throw InvalidArgument("MemoryPool::device: no device");
  const PoolCap cap = resolve_device_pool_cap(settings, cuda->total_memory());
  PoolOptions options;
  options.cap = cap.bytes;
  options.cap_source = cap.source;
  options.remedy =
      "use a smaller batch or input size, or raise STOKE_GPU_MEM_PERCENT / STOKE_GPU_MEM_MAX";
  return std::make_unique<MemoryPool>(std::make_unique<DeviceChunks>(std::move(cuda)),
                                      std::move(options));
}

}  // namespace stoke
