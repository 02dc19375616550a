// Small host blocks (up to 4 KiB) served without the pool's lock: a region of
// 64 KiB pages, each carved into blocks of one size class (256 B steps), and a
// cache per thread and pool of blocks of each class (ThreadCache).
//
// The common pair, allocate and free of a small block on one thread, touches
// only that thread's cache: no lock, no atomic read-modify-write and no lookup
// of the address in a map (free finds the class from the page it lies in, an
// index into a flat array). Blocks move between a cache and the region's
// pages in batches under the pool's lock; a thread's caches go back to their
// pools when it exits. Only for pools whose memory the host may write (the
// host arena): free blocks hold a mark and a link in their first 16 bytes.
//
// Thread safety: SmallBlocks is guarded by the pool's lock except class_at(),
// which reads only atomics. A ThreadCache's slots are touched by its thread
// only; its counters are atomics that only its thread writes (plain load and
// store, no locked instruction) and that stats() reads under the pool's lock.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "stoke/export.hpp"

namespace stoke {
class MemoryPool;
}

namespace stoke::detail {

class ThreadCache;

// What a pool shares with the thread caches that may outlive it: the pool's
// lock, and whether the pool still exists.
struct PoolShared {
  std::mutex mutex;
  MemoryPool* pool = nullptr;        // under mutex; null once the pool is gone
  std::vector<ThreadCache*> caches;  // under mutex: every live cache of this pool
  std::atomic<bool> alive{true};     // false once the pool is gone
};

// [cls][granule]: whether the 256-byte granule `granule` of a page of class
// `cls` starts a block (blocks of class c start every c granules).
inline constexpr auto kSmallBlockStarts = [] {
  std::array<std::array<bool, 256>, 17> starts{};
  for (int cls = 1; cls <= 16; ++cls) {
    for (int i = 0; (i + 1) * cls <= 256; ++i) starts[cls][i * cls] = true;
  }
  return starts;
}();

class STOKE_INTERNAL SmallBlocks {
 public:
  static constexpr std::size_t kGranule = 256;
  static constexpr int kClasses = 16;  // class c holds blocks of c * 256 bytes
  static constexpr std::size_t kMaxSize = kGranule * kClasses;
  static constexpr std::size_t kPageBytes = std::size_t{64} << 10;

  static constexpr int class_of(std::size_t bytes) noexcept {
    return bytes == 0 ? 1 : static_cast<int>((bytes + kGranule - 1) / kGranule);
  }
  static constexpr std::size_t class_size(int cls) noexcept {
    return static_cast<std::size_t>(cls) * kGranule;
  }

  // Requires: region_bytes a non-zero multiple of kPageBytes.
  explicit SmallBlocks(std::size_t region_bytes);
  std::size_t region_bytes() const noexcept { return pages_ * kPageBytes; }

  // Lock-free. 0: `address` is outside the region; -1: inside but not the
  // start of a block of a page in use; else the block's class.
  int class_at(std::uintptr_t address) const noexcept {
    const std::uintptr_t base = base_.load(std::memory_order_acquire);
    const std::uintptr_t offset = address - base;
    if (base == 0 || offset >= pages_ * kPageBytes) return 0;
    const int cls = page_class_[offset / kPageBytes].load(std::memory_order_acquire);
    const std::size_t in_page = offset % kPageBytes;
    if (cls == 0 || in_page % kGranule != 0 || !block_start(cls, in_page / kGranule)) return -1;
    return cls;
  }

  // The rest: under the pool's lock.
  bool has_region() const noexcept { return base_.load(std::memory_order_acquire) != 0; }
  void attach(std::uintptr_t base);  // requires: !has_region(), base 256-aligned
  std::uintptr_t detach();           // requires: out_count() == 0; returns the base
  // Moves up to `n` free blocks of class `cls` out to `out` (marked free);
  // returns how many (0: the region has no room for the class).
  std::size_t take(int cls, std::uintptr_t* out, std::size_t n);
  // Takes back a block that take() moved out. A page left with no block out
  // becomes free for any class.
  void give(std::uintptr_t address, int cls);
  std::uint64_t out_bytes() const noexcept { return out_bytes_; }  // in caches or live
  std::uint64_t out_count() const noexcept { return out_count_; }

  // Free blocks carry a mark in their first word (a double free finds it).
  static void mark_free(std::uintptr_t address) noexcept { store_word(address, mark(address)); }
  static void clear_mark(std::uintptr_t address) noexcept { store_word(address, 0); }
  static bool marked_free(std::uintptr_t address) noexcept {
    return load_word(address) == mark(address);
  }

 private:
  struct Page {
    int cls = 0;
    std::uint32_t capacity = 0;  // blocks in the page
    std::uint32_t bumped = 0;    // blocks ever carved; the rest is untouched
    std::uint32_t out = 0;       // blocks out of the page (cached or live)
    std::uintptr_t free_head = 0;
    bool listed = false;  // in partial_[cls]
  };
  static bool block_start(int cls, std::size_t granule) noexcept {
    return kSmallBlockStarts[cls][granule];
  }
  static std::uintptr_t mark(std::uintptr_t address) noexcept {
    return address ^ 0x5a0c7e5bf4d1e2a3ull;
  }
  static std::uintptr_t load_word(std::uintptr_t address) noexcept {
    std::uintptr_t word;
    std::memcpy(&word, reinterpret_cast<const void*>(address), sizeof word);
    return word;
  }
  static void store_word(std::uintptr_t address, std::uintptr_t word) noexcept {
    std::memcpy(reinterpret_cast<void*>(address), &word, sizeof word);
  }
  void unlist(std::uint32_t page);

  static_assert(kPageBytes / kGranule == 256 && kClasses == 16, "see kSmallBlockStarts");

  std::size_t pages_;
  std::atomic<std::uintptr_t> base_{0};
  std::unique_ptr<std::atomic<std::uint8_t>[]> page_class_;  // read lock-free by class_at
  std::vector<Page> page_;
  std::vector<std::uint32_t> empty_pages_;
  std::array<std::vector<std::uint32_t>, kClasses + 1> partial_;  // pages with room, per class
  std::uint64_t out_bytes_ = 0;
  std::uint64_t out_count_ = 0;
};

// [cls]: how many blocks of class `cls` a thread cache parks at most: 8 KiB
// worth, at least 2 and at most 32 (a table: the free path must not divide).
inline constexpr auto kThreadCacheLimits = [] {
  std::array<int, SmallBlocks::kClasses + 1> limits{};
  for (int cls = 1; cls <= SmallBlocks::kClasses; ++cls) {
    const auto n = static_cast<int>((std::size_t{8} << 10) / SmallBlocks::class_size(cls));
    limits[cls] = std::clamp(n, 2, 32);
  }
  return limits;
}();

// One thread's cache of small blocks for one pool.
class STOKE_INTERNAL ThreadCache {
 public:
  static constexpr int kMaxSlots = 32;
  // Per class at most 8 KiB (and 2..32 blocks): a thread parks at most
  // max_cached_bytes() per pool.
  static constexpr int limit(int cls) noexcept { return kThreadCacheLimits[cls]; }
  static constexpr std::size_t max_cached_bytes() noexcept {
    std::size_t total = 0;
    for (int c = 1; c <= SmallBlocks::kClasses; ++c) total += limit(c) * SmallBlocks::class_size(c);
    return total;
  }

  explicit ThreadCache(std::shared_ptr<PoolShared> owner) : shared(std::move(owner)) {}

  bool empty(int cls) const noexcept { return count[cls] == 0; }
  bool full(int cls) const noexcept { return count[cls] == limit(cls); }

  // Owner thread only. Hands out the newest block of `cls` (requires: !empty).
  std::uintptr_t pop(int cls) noexcept {
    const std::uintptr_t address = slots[cls][--count[cls]];
    const auto size = static_cast<std::int64_t>(SmallBlocks::class_size(cls));
    const std::int64_t cached = cached_bytes.load(std::memory_order_relaxed) - size;
    cached_bytes.store(cached, std::memory_order_relaxed);
    cached_count.store(cached_count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    hits.store(hits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (base - cached > local_peak.load(std::memory_order_relaxed)) {
      local_peak.store(base - cached, std::memory_order_relaxed);
    }
    SmallBlocks::clear_mark(address);
    return address;
  }
  // Owner thread only. Parks a block (requires: !full(cls)).
  void push(int cls, std::uintptr_t address) noexcept {
    SmallBlocks::mark_free(address);
    slots[cls][count[cls]++] = address;
    const auto size = static_cast<std::int64_t>(SmallBlocks::class_size(cls));
    cached_bytes.store(cached_bytes.load(std::memory_order_relaxed) + size,
                       std::memory_order_relaxed);
    cached_count.store(cached_count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // Owner thread only. Counts `n` more (n < 0: fewer) blocks in slots[cls]
  // as parked; the caller moved them in or out.
  void adopt(int cls, int n) noexcept {
    count[cls] += n;
    const auto size = static_cast<std::int64_t>(SmallBlocks::class_size(cls));
    cached_bytes.store(cached_bytes.load(std::memory_order_relaxed) + n * size,
                       std::memory_order_relaxed);
    cached_count.store(cached_count.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  const std::shared_ptr<PoolShared> shared;
  std::array<std::array<std::uintptr_t, kMaxSlots>, SmallBlocks::kClasses + 1> slots{};
  std::array<int, SmallBlocks::kClasses + 1> count{};
  // The pool's bytes in use, less the other caches' parked bytes, at this
  // thread's last locked operation on the pool: base - cached_bytes is the
  // pool's in use as this thread sees it (exact while it is the only user).
  std::int64_t base = 0;
  // Written by the owner only; read by stats() (and zeroed by reset_peak).
  std::atomic<std::int64_t> cached_bytes{0};
  std::atomic<std::int64_t> cached_count{0};
  std::atomic<std::uint64_t> hits{0};  // allocations served from the cache
  std::atomic<std::int64_t> local_peak{0};
};

static_assert(ThreadCache::max_cached_bytes() == 119040, "docs/memory_thread_cache.md quotes it");

}  // namespace stoke::detail
