// Memory: a capped, lazily growing pool (device memory through the CUDA
// plugin, or a host arena with the same bookkeeping) and page-locked staging
// buffers for host->device copies.
//
// The pool never hoards: it grows in chunks only when a request does not fit,
// never beyond its cap, and trim() gives back every chunk that is entirely
// free. Its bookkeeping manages addresses only; the memory itself comes from a
// ChunkProvider, so the same code serves the GPU, the host and the tests.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "stoke/config.hpp"
#include "stoke/export.hpp"

namespace stoke {

namespace detail {
class BlockAllocator;
class CudaDevice;
class SmallBlocks;
class ThreadCache;
struct PoolShared;
struct ThreadCacheSet;
}  // namespace detail

// An opaque stream (a cudaStream_t on CUDA). nullptr: no stream, i.e. memory
// freed with it is reusable at once.
using StreamHandle = void*;

inline constexpr std::size_t kPoolAlignment = 256;

// Supplies the memory a MemoryPool manages, in chunks, and the fences that
// make stream-ordered reuse testable without a GPU. A fence is a ticket for
// "the work queued on a stream so far"; 0 is a fence that is already passed.
class STOKE_API ChunkProvider {
 public:
  virtual ~ChunkProvider() = default;

  // A chunk of `bytes` aligned to kPoolAlignment, or nullptr when the backing
  // store refuses (the driver is out of memory). May throw for real errors.
  virtual void* allocate_chunk(std::size_t bytes) = 0;
  virtual void free_chunk(void* base, std::size_t bytes) noexcept = 0;

  // Fences: record one at the end of `stream`'s queued work; ask whether it is
  // passed; block until it is; hand it back once the pool no longer needs it.
  virtual std::uint64_t record_fence(StreamHandle stream);
  virtual bool fence_passed(std::uint64_t fence);
  virtual void wait_fence(std::uint64_t fence);
  virtual void release_fence(std::uint64_t fence) noexcept;

  // "cuda:0 (NVIDIA H200)", "host arena": names the pool in messages.
  virtual std::string name() const = 0;
};

struct PoolOptions {
  std::uint64_t cap = 0;                       // bytes; the pool never reserves more
  std::size_t min_chunk = 32ull << 20;         // smallest chunk requested from the provider
  std::size_t chunk_granularity = 2ull << 20;  // chunk sizes are multiples of this
  // Where the cap comes from, quoted in the out-of-memory message, e.g.
  // "min(STOKE_GPU_MEM_PERCENT=60% of 140 GiB, STOKE_GPU_MEM_MAX=none)".
  std::string cap_source;
  // What to do about an out-of-memory error, e.g. "use a smaller batch or
  // input size, or raise STOKE_GPU_MEM_PERCENT / STOKE_GPU_MEM_MAX".
  std::string remedy;
  // Serve blocks of up to 4 KiB from a region of the pool (min(4 MiB, cap / 8),
  // reserved on the first small request) through a cache per thread, without
  // the pool's lock. Requires memory the host may write (the host arena sets
  // it; device pools must not).
  bool thread_cache = false;
};

struct PoolStats {
  std::uint64_t cap = 0;
  std::uint64_t reserved = 0;      // bytes held from the provider (sum of chunks)
  std::uint64_t in_use = 0;        // bytes in live allocations (rounded to 256)
  std::uint64_t peak_in_use = 0;   // high-water mark of in_use (reset_peak() clears)
  std::uint64_t pending_free = 0;  // freed on a stream whose work is not yet done
  std::uint64_t free = 0;          // reserved - in_use - pending_free
  std::uint64_t largest_free_block = 0;
  std::uint64_t live_allocations = 0;
  std::uint64_t total_allocations = 0;   // successful allocate() calls since creation
  std::uint64_t failed_allocations = 0;  // out-of-memory errors thrown
  std::uint64_t chunks = 0;
  std::uint64_t free_blocks = 0;
  // 1 - largest_free_block / free, over the free memory outside the small-block
  // region: 0 when that is one block.
  double fragmentation = 0.0;
  std::uint64_t small_region = 0;   // bytes of reserved holding small blocks (thread_cache)
  std::uint64_t thread_cached = 0;  // free small blocks parked in thread caches (in free)
};

// A table of the statistics, for reports.
STOKE_API std::string format_pool_stats(const std::string& name, const PoolStats& stats);

// The device pool's cap: min(percent x total, max), with its description.
struct PoolCap {
  std::uint64_t bytes = 0;
  std::string
      source;  // "min(STOKE_GPU_MEM_PERCENT=60% of 80 GiB = 48 GiB, STOKE_GPU_MEM_MAX=none)"
};
STOKE_API PoolCap resolve_device_pool_cap(const Settings& settings, std::uint64_t total_memory);

class PoolAllocation;

// A thread-safe best-fit pool with coalescing, 256-byte alignment, lazy growth
// up to a cap and stream-ordered reuse. allocate/deallocate are O(1) (TLSF).
// With PoolOptions::thread_cache, blocks of up to 4 KiB come from a cache per
// thread without the lock (docs/memory_thread_cache.md). Statistics are exact
// whenever no other thread is allocating; peak_in_use is exact while one
// thread at a time uses the pool's small blocks (otherwise each thread's view
// of the others' caches dates from its last locked operation).
class STOKE_API MemoryPool {
 public:
  MemoryPool(std::unique_ptr<ChunkProvider> provider, PoolOptions options);
  ~MemoryPool();  // frees every chunk; live allocations become dangling
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // Host memory in chunks from aligned operator new, capped at `cap`.
  static std::unique_ptr<MemoryPool> host_arena(std::uint64_t cap,
                                                std::size_t min_chunk = 4ull << 20);

  // Device memory of CUDA device `device` through the plugin, capped at
  // resolve_device_pool_cap(settings, total). Unsupported when the CUDA plugin
  // or the device is missing (the message says why).
  static std::unique_ptr<MemoryPool> device(const Settings& settings, int device);
  // Internal (tests, backends): on an already opened device handle.
  static std::unique_ptr<MemoryPool> device(const Settings& settings,
                                            std::shared_ptr<detail::CudaDevice> device);

  // Ensures: a 256-aligned block of at least `bytes` (0 is served as 256)
  // that no other live allocation uses and whose previous owner's stream work
  // has passed its fence. `stream` is the stream the block will be used on
  // (recorded by allocate_scoped, which frees on it; allocate itself needs no
  // per-stream pools since every reuse waits for the freeing stream's fence).
  // Throws OutOfMemory (naming cap, request, in use, peak and remedy) when the
  // request cannot be served under the cap; the pool stays usable.
  void* allocate(std::size_t bytes, StreamHandle stream = nullptr);

  // Frees a block from allocate(). With a stream: the block is reused only
  // once the work queued on that stream so far has passed (a fence recorded
  // now). InvalidArgument for a pointer that is not a live allocation here.
  void deallocate(void* ptr, StreamHandle stream = nullptr);

  // RAII form: freed (on `stream`) when the handle dies.
  PoolAllocation allocate_scoped(std::size_t bytes, StreamHandle stream = nullptr);

  // Gives every entirely free chunk back to the provider (after collecting
  // passed fences, and returning the calling thread's cached small blocks);
  // returns the bytes given back. The small-block region goes back once no
  // block of it is live or parked in another thread's cache.
  std::uint64_t trim();

  // Blocks until every pending free's fence has passed and makes those blocks free.
  void synchronize();

  // While a CUDA graph is captured on the pool's device (CudaBackend::capture),
  // between begin_capture() and end_capture(): no chunk goes back to the
  // provider and no fence is queried or waited on (a cudaFree or an event
  // query from the capturing thread would break the capture, and a refused
  // free would drop the chunk from the books while it stays allocated). An
  // allocation that would need either fails with OutOfMemory; the chunks stay
  // reserved and counted against the cap. Calls nest.
  void begin_capture();
  void end_capture();

  PoolStats stats() const;
  void reset_peak();
  std::uint64_t cap() const noexcept { return options_.cap; }
  std::string name() const;

 private:
  friend struct detail::ThreadCacheSet;

  void* allocate_general(std::size_t bytes);
  void deallocate_general(std::uintptr_t address, StreamHandle stream);
  void* allocate_small_slow(int cls);
  void deallocate_small(std::uintptr_t address, int cls, StreamHandle stream);
  detail::ThreadCache* this_thread_cache(bool create);
  void return_cached_locked(detail::ThreadCache& cache, int cls, int keep);
  void return_own_cache_locked();
  void retire_cache_locked(detail::ThreadCache& cache);
  void ensure_region_locked();
  void note_change_locked();
  std::uint64_t reserved_locked() const;
  std::uint64_t in_use_locked() const;
  void* try_allocate_locked(std::size_t bytes);
  bool grow_locked(std::size_t bytes);
  void collect_locked(bool wait);
  std::uint64_t release_free_chunks_locked();
  [[noreturn]] void throw_out_of_memory_locked(std::size_t bytes, const std::string& detail);

  std::unique_ptr<ChunkProvider> provider_;
  PoolOptions options_;
  // The lock and the list of thread caches, shared with caches that outlive the pool.
  std::shared_ptr<detail::PoolShared> shared_;
  std::unique_ptr<detail::BlockAllocator> blocks_;
  std::unique_ptr<detail::SmallBlocks> small_;  // null without thread_cache
  bool region_refused_ = false;                 // the provider refused the region
  std::uint64_t peak_ = 0;                      // peak in use seen under the lock (with small_)
  std::uint64_t retired_hits_ = 0;              // cache hits of caches already retired
  std::uint64_t failed_ = 0;
  int captures_ = 0;  // begin_capture() calls not yet ended
};

// Move-only owner of one pool block; frees it on its stream when it dies.
class STOKE_API PoolAllocation {
 public:
  PoolAllocation() = default;
  PoolAllocation(MemoryPool* pool, void* ptr, std::size_t bytes, StreamHandle stream) noexcept
      : pool_(pool), ptr_(ptr), bytes_(bytes), stream_(stream) {}
  PoolAllocation(PoolAllocation&& other) noexcept { swap(other); }
  PoolAllocation& operator=(PoolAllocation&& other) noexcept {
    if (this != &other) {
      reset();
      swap(other);
    }
    return *this;
  }
  PoolAllocation(const PoolAllocation&) = delete;
  PoolAllocation& operator=(const PoolAllocation&) = delete;
  ~PoolAllocation() { reset(); }

  void* get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return bytes_; }  // as requested
  StreamHandle stream() const noexcept { return stream_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  void reset() noexcept;

 private:
  void swap(PoolAllocation& other) noexcept;
  MemoryPool* pool_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  StreamHandle stream_ = nullptr;
};

// ---------------------------------------------------------------------------
// Staging: host buffers for host->device copies. Page-locked (cudaHostAlloc)
// while pinning is on, a device is present and the pinned total stays under
// STOKE_HOST_PINNED_MAX; otherwise pageable, with one warning per
// HostStaging and the reason kept for reports. Buffers are touched once at
// allocation, so their pages are resident before the first batch.

class HostStaging;

class STOKE_API StagingBuffer {
 public:
  StagingBuffer() = default;
  StagingBuffer(StagingBuffer&& other) noexcept { swap(other); }
  StagingBuffer& operator=(StagingBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      swap(other);
    }
    return *this;
  }
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;
  ~StagingBuffer() { reset(); }

  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return bytes_; }
  bool pinned() const noexcept { return pinned_; }
  void reset() noexcept;

 private:
  friend class HostStaging;
  void swap(StagingBuffer& other) noexcept;
  std::shared_ptr<detail::CudaDevice> device_;  // set when pinned
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
  bool pinned_ = false;
  std::shared_ptr<std::atomic<std::uint64_t>> pinned_total_;  // the HostStaging's running total
};

struct StagingReport {
  bool pinning_requested = false;    // STOKE_HOST_PINNED
  std::uint64_t pinned_cap = 0;      // STOKE_HOST_PINNED_MAX
  std::uint64_t pinned_bytes = 0;    // live pinned bytes
  std::uint64_t pageable_bytes = 0;  // bytes handed out as pageable (cumulative)
  std::uint64_t buffers = 0;         // buffers handed out (cumulative)
  bool fell_back = false;            // some buffer is pageable although pinning was requested
  std::string fallback_reason;       // why, for reports
};

class STOKE_API HostStaging {
 public:
  // `device` < 0: no device (pageable only; with pinning requested that is a
  // fallback). Pinned memory comes from the CUDA plugin for that device.
  HostStaging(const Settings& settings, int device);
  // With a device handle already open (null: no device). For the prefetcher and tests.
  HostStaging(const Settings& settings, std::shared_ptr<detail::CudaDevice> device);
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // A zero-filled buffer of `bytes` (never throws for refused pinning; throws
  // OutOfMemory only when even pageable memory is refused).
  StagingBuffer allocate(std::size_t bytes);

  StagingReport report() const;
  std::string report_text() const;  // one line for reports

  // The device handle used for pinned memory (null without one). Internal use.
  const std::shared_ptr<detail::CudaDevice>& cuda_device() const noexcept { return device_; }

 private:
  void fall_back_locked(const std::string& reason);

  mutable std::mutex mutex_;
  std::shared_ptr<detail::CudaDevice> device_;
  std::shared_ptr<std::atomic<std::uint64_t>> pinned_total_;
  StagingReport report_;
  std::string open_error_;
};

}  // namespace stoke
