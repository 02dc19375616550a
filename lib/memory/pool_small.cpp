// MemoryPool's small blocks (PoolOptions::thread_cache): the allocate/free
// pair through this thread's cache without the lock, and the locked moves of
// blocks between the caches and the region (small_blocks.hpp).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "memory/block_allocator.hpp"
#include "memory/small_blocks.hpp"
#include "stoke/error.hpp"
#include "stoke/memory.hpp"

namespace stoke {
namespace detail {

// This thread's caches, one per pool it used small blocks of; each goes back
// to its pool (if that still exists) when the thread exits.
struct ThreadCacheSet {
  std::vector<std::unique_ptr<ThreadCache>> caches;
  ~ThreadCacheSet();
};

}  // namespace detail

namespace {

// The cache this thread used last (the fast path compares one pointer), and
// whether the thread has destroyed its caches (code running later in its
// exit frees straight to the pool). Constant-initialized: no guard, no wrapper.
[[gnu::tls_model("initial-exec")]] thread_local detail::ThreadCache* t_recent = nullptr;
[[gnu::tls_model("initial-exec")]] thread_local bool t_exited = false;

detail::ThreadCacheSet& thread_caches() {
  thread_local detail::ThreadCacheSet set;
  return set;
}

std::string hex(std::uintptr_t address) {
  char text[2 + 2 * sizeof address + 1];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

}  // namespace

detail::ThreadCacheSet::~ThreadCacheSet() {
  t_recent = nullptr;
  t_exited = true;
  for (auto& cache : caches) {
    std::lock_guard lock(cache->shared->mutex);
    if (MemoryPool* pool = cache->shared->pool) pool->retire_cache_locked(*cache);
  }
}

void* MemoryPool::allocate(std::size_t bytes, StreamHandle /*stream*/) {
  if (small_ && bytes <= detail::SmallBlocks::kMaxSize) {
    const int cls = detail::SmallBlocks::class_of(bytes);
    detail::ThreadCache* cache = t_recent;
    if (cache && cache->shared.get() == shared_.get() && !cache->empty(cls)) {
      return reinterpret_cast<void*>(cache->pop(cls));
    }
    if (void* ptr = allocate_small_slow(cls)) return ptr;
  }
  return allocate_general(bytes);
}

void MemoryPool::deallocate(void* ptr, StreamHandle stream) {
  if (!ptr) return;
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  if (small_) {
    if (const int cls = small_->class_at(address)) {
      // The common case inline: a live block, no stream, room in this thread's cache.
      detail::ThreadCache* cache = t_recent;
      if (cls > 0 && !stream && !detail::SmallBlocks::marked_free(address) && cache &&
          cache->shared.get() == shared_.get() && !cache->full(cls)) {
        cache->push(cls, address);
        return;
      }
      deallocate_small(address, cls, stream);
      return;
    }
  }
  deallocate_general(address, stream);
}

detail::ThreadCache* MemoryPool::this_thread_cache(bool create) {
  if (t_exited) return nullptr;
  if (t_recent && t_recent->shared == shared_) return t_recent;
  auto& caches = thread_caches().caches;
  for (auto& cache : caches) {
    if (cache->shared == shared_) return t_recent = cache.get();
  }
  if (!create) return nullptr;
  // Caches of pools that are gone: nothing refers to them any more.
  std::erase_if(caches,
                [](const auto& c) { return !c->shared->alive.load(std::memory_order_acquire); });
  auto cache = std::make_unique<detail::ThreadCache>(shared_);
  {
    std::lock_guard lock(shared_->mutex);
    shared_->caches.push_back(cache.get());
  }
  caches.push_back(std::move(cache));
  return t_recent = caches.back().get();
}

void* MemoryPool::allocate_small_slow(int cls) {
  detail::ThreadCache* cache = this_thread_cache(true);
  if (!cache) return nullptr;  // the thread is exiting: the general path serves it
  std::lock_guard lock(shared_->mutex);
  ensure_region_locked();
  if (!small_->has_region()) return nullptr;
  if (cache->empty(cls)) {
    // Half a cache's worth: the next allocations of the class take no lock.
    const int want = std::max(1, detail::ThreadCache::limit(cls) / 2);
    const std::size_t got = small_->take(cls, cache->slots[cls].data(), want);
    if (got == 0) return nullptr;  // no page left for the class: the general path
    cache->adopt(cls, static_cast<int>(got));
  }
  note_change_locked();
  return reinterpret_cast<void*>(cache->pop(cls));
}

// Everything but the common case: bad frees, streams, no cache yet, a full cache.
[[gnu::noinline]] void MemoryPool::deallocate_small(std::uintptr_t address, int cls,
                                                    StreamHandle stream) {
  if (cls < 0 || detail::SmallBlocks::marked_free(address)) {
    throw InvalidArgument("memory pool " + provider_->name() + ": free of " + hex(address) +
                          ", which is not a live allocation of this pool (double free or "
                          "foreign pointer)");
  }
  if (stream) {  // host memory: wait for the stream's work instead of deferring the reuse
    std::lock_guard lock(shared_->mutex);
    if (const std::uint64_t fence = provider_->record_fence(stream)) {
      provider_->wait_fence(fence);
      provider_->release_fence(fence);
    }
  }
  detail::ThreadCache* cache = t_recent;
  if (!cache || cache->shared.get() != shared_.get()) cache = this_thread_cache(true);
  if (cache && !cache->full(cls)) {
    cache->push(cls, address);
    return;
  }
  std::lock_guard lock(shared_->mutex);
  if (cache) {
    return_cached_locked(*cache, cls, detail::ThreadCache::limit(cls) / 2);
    cache->push(cls, address);
  } else {
    small_->give(address, cls);
  }
  note_change_locked();
}

void MemoryPool::return_cached_locked(detail::ThreadCache& cache, int cls, int keep) {
  const int count = cache.count[cls];
  const int back = count - keep;
  if (back <= 0) return;
  auto& slots = cache.slots[cls];
  for (int i = 0; i < back; ++i) small_->give(slots[i], cls);  // the oldest go back
  std::copy(slots.begin() + back, slots.begin() + count, slots.begin());
  cache.adopt(cls, -back);
}

void MemoryPool::return_own_cache_locked() {
  detail::ThreadCache* own = small_ ? this_thread_cache(false) : nullptr;
  if (!own) return;
  for (int cls = 1; cls <= detail::SmallBlocks::kClasses; ++cls) return_cached_locked(*own, cls, 0);
  note_change_locked();
}

void MemoryPool::retire_cache_locked(detail::ThreadCache& cache) {
  for (int cls = 1; cls <= detail::SmallBlocks::kClasses; ++cls)
    return_cached_locked(cache, cls, 0);
  retired_hits_ += cache.hits.load(std::memory_order_relaxed);
  peak_ = std::max<std::uint64_t>(peak_, cache.local_peak.load(std::memory_order_relaxed));
  auto& caches = shared_->caches;
  caches.erase(std::find(caches.begin(), caches.end(), &cache));
}

void MemoryPool::ensure_region_locked() {
  if (small_->has_region() || region_refused_) return;
  const std::size_t bytes = small_->region_bytes();
  if (reserved_locked() + bytes > options_.cap) return;  // small blocks come from chunks
  void* base = provider_->allocate_chunk(bytes);
  if (!base) {
    region_refused_ = true;  // until a trim gives memory back
    return;
  }
  if (reinterpret_cast<std::uintptr_t>(base) % kPoolAlignment != 0) {
    provider_->free_chunk(base, bytes);
    throw Error(ErrorCode::kInternal, "memory pool " + provider_->name() +
                                          ": the provider returned a chunk not aligned to 256");
  }
  small_->attach(reinterpret_cast<std::uintptr_t>(base));
}

std::uint64_t MemoryPool::in_use_locked() const {
  std::uint64_t in_use = blocks_->in_use();
  if (!small_) return in_use;
  in_use += small_->out_bytes();
  for (const detail::ThreadCache* cache : shared_->caches) {
    in_use -= static_cast<std::uint64_t>(cache->cached_bytes.load(std::memory_order_relaxed));
  }
  return in_use;
}

// After a locked change of the figures: the peak, and this thread's view of
// the other caches for its lock-free allocations (ThreadCache::base).
void MemoryPool::note_change_locked() {
  const std::uint64_t in_use = in_use_locked();
  peak_ = std::max(peak_, in_use);
  if (detail::ThreadCache* own = this_thread_cache(false)) {
    own->base =
        static_cast<std::int64_t>(in_use) + own->cached_bytes.load(std::memory_order_relaxed);
  }
}

}  // namespace stoke
