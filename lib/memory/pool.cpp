// MemoryPool: the locking, growth and out-of-memory policy around the
// BlockAllocator's bookkeeping.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "memory/block_allocator.hpp"
#include "memory/small_blocks.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/memory.hpp"
#include "stoke/system.hpp"

namespace stoke {

// Default fences: no streams, so every fence has passed already.
std::uint64_t ChunkProvider::record_fence(StreamHandle) {
  return 0;
}
bool ChunkProvider::fence_passed(std::uint64_t) {
  return true;
}
void ChunkProvider::wait_fence(std::uint64_t) {}
void ChunkProvider::release_fence(std::uint64_t) noexcept {}

namespace {

std::uint64_t round_to(std::uint64_t bytes, std::uint64_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

}  // namespace

MemoryPool::MemoryPool(std::unique_ptr<ChunkProvider> provider, PoolOptions options)
    : provider_(std::move(provider)),
      options_(std::move(options)),
      shared_(std::make_shared<detail::PoolShared>()),
      blocks_(std::make_unique<detail::BlockAllocator>(kPoolAlignment)) {
  if (!provider_) throw InvalidArgument("MemoryPool: no chunk provider");
  if (options_.chunk_granularity == 0 || options_.chunk_granularity % kPoolAlignment != 0) {
    throw InvalidArgument("MemoryPool: chunk granularity " +
                          std::to_string(options_.chunk_granularity) + " is not a multiple of 256");
  }
  options_.min_chunk =
      round_to(std::max<std::size_t>(options_.min_chunk, 1), options_.chunk_granularity);
  // Small and medium blocks freed without a stream are parked for the next
  // request of their size (block_allocator.hpp): an allocate/free pair then
  // skips the bins' split and merge.
  blocks_->set_quick_cache(true);
  // Small blocks: a region of min(4 MiB, cap / 8) in 64 KiB pages, none when
  // that is under 256 KiB (the cap is too small to spare it).
  const std::uint64_t region = std::min<std::uint64_t>(4ull << 20, options_.cap / 8) /
                               detail::SmallBlocks::kPageBytes * detail::SmallBlocks::kPageBytes;
  if (options_.thread_cache && region >= (256u << 10)) {
    small_ = std::make_unique<detail::SmallBlocks>(region);
  }
  shared_->pool = this;
  if (options_.remedy.empty()) options_.remedy = "free memory or raise the pool's cap";
}

MemoryPool::~MemoryPool() {
  std::lock_guard lock(shared_->mutex);
  // Caches of threads still running keep their blocks' addresses but never
  // touch this pool again: each holds the shared part, which says it is gone.
  shared_->pool = nullptr;
  shared_->caches.clear();
  shared_->alive.store(false, std::memory_order_release);
  // Fences still pending are waited for: their streams may still read the
  // chunks being returned.
  try {
    collect_locked(true);
  } catch (const std::exception& e) {
    log_warn(std::string("memory pool ") + provider_->name() +
             ": waiting for pending frees failed: " + e.what());
  }
  for (const auto& chunk : blocks_->chunks()) {
    provider_->free_chunk(reinterpret_cast<void*>(chunk.base), chunk.size);
  }
  if (small_ && small_->has_region()) {
    provider_->free_chunk(reinterpret_cast<void*>(small_->detach()), small_->region_bytes());
  }
}

std::string MemoryPool::name() const {
  return provider_->name();
}

void MemoryPool::collect_locked(bool wait) {
  if (captures_ > 0 || blocks_->pending_count() == 0) return;
  blocks_->reclaim(
      [&](std::uint64_t fence) {
        if (wait) provider_->wait_fence(fence);
        return wait || provider_->fence_passed(fence);
      },
      [&](std::uint64_t fence) { provider_->release_fence(fence); });
}

void* MemoryPool::try_allocate_locked(std::size_t bytes) {
  const std::uintptr_t address = blocks_->allocate(bytes);
  if (address && small_) note_change_locked();
  return address ? reinterpret_cast<void*>(address) : nullptr;
}

std::uint64_t MemoryPool::reserved_locked() const {
  const bool region = small_ && small_->has_region();
  return blocks_->reserved() + (region ? small_->region_bytes() : 0);
}

bool MemoryPool::grow_locked(std::size_t bytes) {
  const std::uint64_t need = round_to(blocks_->round_up(bytes), options_.chunk_granularity);
  const std::uint64_t room = options_.cap - std::min(options_.cap, reserved_locked());
  if (need > room) return false;
  // At least min_chunk, so that small requests do not each cost a driver
  // call, but never past the cap.
  const std::uint64_t size =
      std::min<std::uint64_t>(std::max<std::uint64_t>(need, options_.min_chunk),
                              room / options_.chunk_granularity * options_.chunk_granularity);
  void* base = provider_->allocate_chunk(size);
  if (!base) return false;
  if (reinterpret_cast<std::uintptr_t>(base) % kPoolAlignment != 0) {
    provider_->free_chunk(base, size);
    throw Error(ErrorCode::kInternal, "memory pool " + provider_->name() +
                                          ": the provider returned a chunk not aligned to 256");
  }
  blocks_->add_chunk(reinterpret_cast<std::uintptr_t>(base), size);
  return true;
}

std::uint64_t MemoryPool::release_free_chunks_locked() {
  if (captures_ > 0) return 0;  // see begin_capture()
  std::uint64_t released = 0;
  for (const auto& chunk : blocks_->take_free_chunks()) {
    provider_->free_chunk(reinterpret_cast<void*>(chunk.base), chunk.size);
    released += chunk.size;
  }
  if (small_ && small_->has_region() && small_->out_count() == 0) {
    provider_->free_chunk(reinterpret_cast<void*>(small_->detach()), small_->region_bytes());
    released += small_->region_bytes();
  }
  if (released > 0) region_refused_ = false;  // the provider may have room for it again
  return released;
}

void* MemoryPool::allocate_general(std::size_t bytes) {
  std::lock_guard lock(shared_->mutex);
  // Cheapest first: a free block (after collecting passed fences); then a new
  // chunk under the cap; then wait for pending frees; last, hand back whole
  // free chunks so one large enough chunk fits under the cap.
  collect_locked(false);  // a no-op unless frees are pending
  if (void* ptr = try_allocate_locked(bytes)) return ptr;
  bool refused = false;
  if (blocks_->round_up(bytes) <= options_.cap) {
    if (grow_locked(bytes)) {
      if (void* ptr = try_allocate_locked(bytes)) return ptr;
    } else {
      refused =
          reserved_locked() + round_to(blocks_->round_up(bytes), options_.chunk_granularity) <=
          options_.cap;
    }
    if (blocks_->pending_count() > 0) {
      collect_locked(true);
      if (void* ptr = try_allocate_locked(bytes)) return ptr;
    }
    return_own_cache_locked();  // this thread's parked small blocks may hold the region
    if (release_free_chunks_locked() > 0 && grow_locked(bytes)) {
      if (void* ptr = try_allocate_locked(bytes)) return ptr;
    }
  }
  throw_out_of_memory_locked(bytes, refused ? "the provider refused a new chunk under the cap "
                                              "(memory taken by another process?)"
                                            : "");
}

void MemoryPool::throw_out_of_memory_locked(std::size_t bytes, const std::string& detail) {
  ++failed_;
  std::ostringstream message;
  message << "memory pool " << provider_->name() << " cannot allocate " << format_bytes(bytes)
          << " (" << bytes << " bytes): cap " << format_bytes(options_.cap);
  if (!options_.cap_source.empty()) message << " = " << options_.cap_source;
  const std::uint64_t in_use = in_use_locked();
  const std::uint64_t peak = small_ ? std::max(peak_, in_use) : blocks_->peak_in_use();
  message << ", in use " << format_bytes(in_use) << ", peak in use " << format_bytes(peak)
          << ", reserved " << format_bytes(reserved_locked()) << ", largest free block "
          << format_bytes(blocks_->largest_free_block());
  if (!detail.empty()) message << "; " << detail;
  message << ". To fix: " << options_.remedy << ".";
  throw OutOfMemory(message.str(), bytes, options_.cap, in_use);
}

void MemoryPool::deallocate_general(std::uintptr_t address, StreamHandle stream) {
  std::lock_guard lock(shared_->mutex);
  if (!stream) {
    blocks_->free(address);
    if (small_) note_change_locked();
    return;
  }
  if (blocks_->block_size(address) == 0) blocks_->free(address);  // throws the error
  const std::uint64_t fence = provider_->record_fence(stream);
  if (fence == 0) {
    blocks_->free(address);
  } else {
    blocks_->free_after(address, fence);
  }
  if (small_) note_change_locked();
}

PoolAllocation MemoryPool::allocate_scoped(std::size_t bytes, StreamHandle stream) {
  return PoolAllocation(this, allocate(bytes, stream), bytes, stream);
}

std::uint64_t MemoryPool::trim() {
  std::lock_guard lock(shared_->mutex);
  return_own_cache_locked();
  collect_locked(false);
  return release_free_chunks_locked();
}

void MemoryPool::synchronize() {
  std::lock_guard lock(shared_->mutex);
  collect_locked(true);
}

void MemoryPool::begin_capture() {
  std::lock_guard lock(shared_->mutex);
  ++captures_;
}

void MemoryPool::end_capture() {
  std::lock_guard lock(shared_->mutex);
  if (captures_ > 0) --captures_;
}

PoolStats MemoryPool::stats() const {
  std::lock_guard lock(shared_->mutex);
  blocks_->flush_quick();  // free-block figures as if nothing were parked
  PoolStats s;
  s.cap = options_.cap;
  s.reserved = reserved_locked();
  s.in_use = blocks_->in_use();
  s.peak_in_use = blocks_->peak_in_use();
  s.pending_free = blocks_->pending_bytes();
  s.largest_free_block = blocks_->largest_free_block();
  s.live_allocations = blocks_->live_allocations();
  s.total_allocations = blocks_->total_allocations();
  s.failed_allocations = failed_;
  s.chunks = blocks_->chunk_count();
  s.free_blocks = blocks_->free_block_count();
  const std::uint64_t general_free = blocks_->free_bytes();
  s.fragmentation = general_free == 0 ? 0.0
                                      : 1.0 - static_cast<double>(s.largest_free_block) /
                                                  static_cast<double>(general_free);
  if (small_) {
    // Blocks out of the region are live unless a thread cache holds them.
    std::int64_t cached = 0, cached_count = 0;
    std::uint64_t hits = retired_hits_;
    std::int64_t peak = static_cast<std::int64_t>(peak_);
    for (const detail::ThreadCache* cache : shared_->caches) {
      cached += cache->cached_bytes.load(std::memory_order_relaxed);
      cached_count += cache->cached_count.load(std::memory_order_relaxed);
      hits += cache->hits.load(std::memory_order_relaxed);
      peak = std::max(peak, cache->local_peak.load(std::memory_order_relaxed));
    }
    s.in_use += small_->out_bytes() - static_cast<std::uint64_t>(cached);
    s.live_allocations += small_->out_count() - static_cast<std::uint64_t>(cached_count);
    s.total_allocations += hits;
    s.peak_in_use = std::max(static_cast<std::uint64_t>(peak), s.in_use);
    s.small_region = small_->has_region() ? small_->region_bytes() : 0;
    s.thread_cached = static_cast<std::uint64_t>(cached);
  }
  s.free = s.reserved - s.in_use - s.pending_free;
  return s;
}

void MemoryPool::reset_peak() {
  std::lock_guard lock(shared_->mutex);
  blocks_->reset_peak();
  if (small_) {
    peak_ = in_use_locked();
    for (detail::ThreadCache* cache : shared_->caches) {
      cache->local_peak.store(0, std::memory_order_relaxed);
    }
  }
}

void PoolAllocation::reset() noexcept {
  if (pool_ && ptr_) {
    try {
      pool_->deallocate(ptr_, stream_);
    } catch (const std::exception& e) {
      log_error(std::string("freeing a pool allocation failed: ") + e.what());
    }
  }
  pool_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
  stream_ = nullptr;
}

void PoolAllocation::swap(PoolAllocation& other) noexcept {
  std::swap(pool_, other.pool_);
  std::swap(ptr_, other.ptr_);
  std::swap(bytes_, other.bytes_);
  std::swap(stream_, other.stream_);
}

std::string format_pool_stats(const std::string& name, const PoolStats& s) {
  std::ostringstream out;
  char fragmentation[32];
  std::snprintf(fragmentation, sizeof fragmentation, "%.1f %%", 100.0 * s.fragmentation);
  out << "memory pool " << name << "\n"
      << "  cap                 " << format_bytes(s.cap) << "\n"
      << "  reserved            " << format_bytes(s.reserved) << " in " << s.chunks << " chunks\n"
      << "  in use              " << format_bytes(s.in_use) << " in " << s.live_allocations
      << " allocations\n"
      << "  peak in use         " << format_bytes(s.peak_in_use) << "\n"
      << "  pending free        " << format_bytes(s.pending_free) << "\n"
      << "  free                " << format_bytes(s.free) << " in " << s.free_blocks
      << " blocks, largest " << format_bytes(s.largest_free_block) << "\n"
      << "  fragmentation       " << fragmentation << "\n"
      << "  allocations         " << s.total_allocations << " served, " << s.failed_allocations
      << " out of memory\n";
  if (s.small_region > 0) {
    out << "  small blocks        " << format_bytes(s.small_region) << " region, "
        << format_bytes(s.thread_cached) << " parked in thread caches\n";
  }
  return out.str();
}

PoolCap resolve_device_pool_cap(const Settings& settings, std::uint64_t total_memory) {
  PoolCap cap;
  const auto by_percent = static_cast<std::uint64_t>(
      std::floor(static_cast<double>(total_memory) * settings.gpu_mem_percent / 100.0));
  cap.bytes = by_percent;
  std::ostringstream source;
  char percent[32];
  std::snprintf(percent, sizeof percent, "%g", settings.gpu_mem_percent);
  source << "min(STOKE_GPU_MEM_PERCENT=" << percent << "% of " << format_bytes(total_memory)
         << " = " << format_bytes(by_percent) << ", STOKE_GPU_MEM_MAX=";
  if (settings.gpu_mem_max) {
    source << format_bytes(*settings.gpu_mem_max);
    cap.bytes = std::min(cap.bytes, *settings.gpu_mem_max);
  } else {
    source << "none";
  }
  source << ")";
  cap.bytes = cap.bytes / kPoolAlignment * kPoolAlignment;
  cap.source = source.str();
  return cap;
}

}  // namespace stoke
