// The host arena's small blocks through per-thread caches (small_blocks.hpp):
// the pair on one thread reuses its block without the lock, statistics stay
// exact (also after frees on other threads and thread exits), the cap holds
// with parked blocks, bad frees are caught, and a multi-thread stress test
// with tagged blocks ends with every byte accounted for (TSan checks it in CI).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "memory/small_blocks.hpp"
#include "stoke/error.hpp"
#include "stoke/memory.hpp"

namespace stoke {
namespace {

using detail::SmallBlocks;
using detail::ThreadCache;
constexpr std::size_t kMiB = std::size_t{1} << 20;

std::uint64_t rounded(std::size_t bytes) {
  return (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256;
}

TEST(MemoryPoolThreadCache, SamePairReusesTheBlockAndStatsAreExact) {
  auto arena = MemoryPool::host_arena(64 * kMiB);
  void* a = arena->allocate(200);
  arena->deallocate(a);
  void* b = arena->allocate(256);
  EXPECT_EQ(b, a) << "the newest parked block of the class comes back";
  void* c = arena->allocate(4096);
  const PoolStats s = arena->stats();
  EXPECT_EQ(s.in_use, 256u + 4096u);
  EXPECT_EQ(s.peak_in_use, 256u + 4096u);
  EXPECT_EQ(s.live_allocations, 2u);
  EXPECT_EQ(s.total_allocations, 3u);
  EXPECT_EQ(s.small_region, 4 * kMiB);
  EXPECT_GT(s.thread_cached, 0u) << "a refill parks more than the block handed out";
  EXPECT_LE(s.thread_cached, ThreadCache::max_cached_bytes());
  EXPECT_EQ(s.reserved, s.in_use + s.free + s.pending_free);
  EXPECT_NE(format_pool_stats(arena->name(), s).find("parked in thread caches"), std::string::npos);
  arena->deallocate(b);
  arena->deallocate(c);
  EXPECT_EQ(arena->stats().in_use, 0u);
  EXPECT_EQ(arena->stats().peak_in_use, 256u + 4096u);
  EXPECT_EQ(arena->trim(), s.reserved) << "trim returns this thread's cache, then the region";
  EXPECT_EQ(arena->stats().reserved, 0u);
}

TEST(MemoryPoolThreadCache, DoubleFreesAndPointersIntoBlocksAreRejected) {
  auto arena = MemoryPool::host_arena(64 * kMiB);
  auto* a = static_cast<unsigned char*>(arena->allocate(512));
  EXPECT_THROW(arena->deallocate(a + 256), InvalidArgument) << "inside a 512-byte block";
  arena->deallocate(a);
  EXPECT_THROW(arena->deallocate(a), InvalidArgument) << "double free of a parked block";
  void* again = arena->allocate(512);
  EXPECT_EQ(again, a);
  arena->deallocate(again);
  EXPECT_EQ(arena->stats().live_allocations, 0u);
}

TEST(MemoryPoolThreadCache, FreesOnAnotherThreadAndThreadExitsKeepStatsExact) {
  auto arena = MemoryPool::host_arena(64 * kMiB);
  std::vector<std::pair<unsigned char*, std::size_t>> blocks;
  std::uint64_t bytes = 0;
  std::thread producer([&] {
    for (std::size_t i = 0; i < 300; ++i) {
      const std::size_t n = 1 + (i * 97) % SmallBlocks::kMaxSize;
      auto* p = static_cast<unsigned char*>(arena->allocate(n));
      std::memset(p, static_cast<int>(i), n);
      blocks.emplace_back(p, n);
      bytes += rounded(n);
    }
  });
  producer.join();  // its cache (refill leftovers) went back to the pool
  PoolStats s = arena->stats();
  EXPECT_EQ(s.in_use, bytes);
  EXPECT_EQ(s.peak_in_use, bytes);
  EXPECT_EQ(s.live_allocations, 300u);
  EXPECT_EQ(s.thread_cached, 0u) << "the exited thread's cache was returned";
  std::thread consumer([&] {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      EXPECT_EQ(blocks[i].first[blocks[i].second - 1], static_cast<unsigned char>(i));
      arena->deallocate(blocks[i].first);
    }
    const PoolStats mid = arena->stats();
    EXPECT_EQ(mid.in_use, 0u);
    EXPECT_GT(mid.thread_cached, 0u) << "the freeing thread parks blocks it never allocated";
  });
  consumer.join();
  s = arena->stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.live_allocations, 0u);
  EXPECT_EQ(s.total_allocations, 300u);
  EXPECT_EQ(s.thread_cached, 0u);
  EXPECT_EQ(arena->trim(), s.reserved) << "nothing is left out: the region goes back";
}

TEST(MemoryPoolThreadCache, TheCapHoldsWithParkedBlocksAndTheyYieldToALargeRequest) {
  constexpr std::uint64_t kCap = 4 * kMiB;  // region: cap / 8 = 512 KiB
  auto arena = MemoryPool::host_arena(kCap, 1 * kMiB);
  std::vector<void*> small;
  bool refused = false;
  try {
    for (;;) small.push_back(arena->allocate(3000));
  } catch (const OutOfMemory&) {
    refused = true;
  }
  EXPECT_TRUE(refused);
  EXPECT_LE(arena->stats().reserved, kCap);
  EXPECT_GT(small.size(), 1000u);
  EXPECT_EQ(arena->stats().in_use, small.size() * 3072u);
  for (void* p : small) arena->deallocate(p);
  EXPECT_GT(arena->stats().thread_cached, 0u);
  // Only possible once this thread's parked blocks went back and the region
  // and every chunk were given back.
  void* big = arena->allocate(kCap);
  EXPECT_EQ(arena->stats().reserved, kCap);
  EXPECT_EQ(arena->stats().small_region, 0u);
  arena->deallocate(big);
}

TEST(MemoryPoolThreadCache, AThreadOutlivingItsPoolLeavesNothingBehind) {
  auto arena = MemoryPool::host_arena(64 * kMiB);
  std::mutex m;
  std::condition_variable cv;
  int phase = 0;
  std::thread worker([&] {
    arena->deallocate(arena->allocate(256));  // parks blocks of the first pool
    {
      std::unique_lock lock(m);
      phase = 1;
      cv.notify_all();
      cv.wait(lock, [&] { return phase == 2; });
    }
    auto other = MemoryPool::host_arena(64 * kMiB);  // a new pool on the same thread
    void* p = other->allocate(256);
    other->deallocate(p);
    EXPECT_EQ(other->stats().in_use, 0u);
    EXPECT_EQ(other->stats().total_allocations, 1u);
  });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return phase == 1; });
    arena.reset();  // the pool goes while the worker's cache still holds its blocks
    phase = 2;
    cv.notify_all();
  }
  worker.join();  // ASan/TSan: the worker's exit must not touch the first pool
}

TEST(MemoryPoolThreadCache, ResetPeakRestartsFromWhatIsInUse) {
  auto arena = MemoryPool::host_arena(64 * kMiB);
  void* keep = arena->allocate(1024);
  void* a = arena->allocate(256);
  void* b = arena->allocate(256);
  arena->deallocate(a);
  arena->deallocate(b);
  EXPECT_EQ(arena->stats().peak_in_use, 1024u + 512u);
  arena->reset_peak();
  EXPECT_EQ(arena->stats().peak_in_use, 1024u);
  void* c = arena->allocate(256);  // from the cache, no lock
  EXPECT_EQ(arena->stats().peak_in_use, 1024u + 256u);
  arena->deallocate(c);
  arena->deallocate(keep);
}

TEST(MemoryPoolThreadCache, BlocksParkedByALiveThreadKeepTheRegionUntilItExits) {
  auto arena = MemoryPool::host_arena(64 * kMiB);
  std::mutex m;
  std::condition_variable cv;
  int phase = 0;
  std::thread worker([&] {
    arena->deallocate(arena->allocate(256));
    std::unique_lock lock(m);
    phase = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return phase == 2; });
  });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return phase == 1; });
  }
  EXPECT_EQ(arena->trim(), 0u) << "the worker's parked blocks hold the region";
  PoolStats s = arena->stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.small_region, 4 * kMiB);
  EXPECT_GT(s.thread_cached, 0u);
  {
    std::lock_guard lock(m);
    phase = 2;
  }
  cv.notify_all();
  worker.join();
  EXPECT_EQ(arena->stats().thread_cached, 0u);
  EXPECT_EQ(arena->trim(), 4 * kMiB);
}

TEST(MemoryPoolThreadCache, PoolsWithoutTheOptionKeepEveryBlockInTheGeneralPath) {
  PoolOptions options;
  options.cap = 64 * kMiB;
  // Addresses only, never dereferenced (as device memory must not be).
  class Addresses final : public ChunkProvider {
   public:
    void* allocate_chunk(std::size_t bytes) override {
      next_ += bytes + kMiB;
      return reinterpret_cast<void*>(next_ - bytes);
    }
    void free_chunk(void*, std::size_t) noexcept override {}
    std::string name() const override { return "addresses"; }

   private:
    std::uintptr_t next_ = std::uintptr_t{1} << 40;
  };
  MemoryPool pool(std::make_unique<Addresses>(), options);  // as device pools are built
  void* a = pool.allocate(256);
  pool.deallocate(a);
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.small_region, 0u);
  EXPECT_EQ(s.thread_cached, 0u);
  EXPECT_EQ(s.free_blocks, 1u) << "the block merged back (after the quick cache's flush)";
}

TEST(MemoryPoolThreadCache, WhenTheProviderRefusesTheRegionSmallBlocksComeFromChunks) {
  // Host memory, but never a chunk of the region's size.
  class NoRegion final : public ChunkProvider {
   public:
    void* allocate_chunk(std::size_t bytes) override {
      if (bytes == 4 * kMiB) return nullptr;
      return ::operator new (bytes, std::align_val_t{kPoolAlignment}, std::nothrow);
    }
    void free_chunk(void* base, std::size_t) noexcept override {
      ::operator delete (base, std::align_val_t{kPoolAlignment});
    }
    std::string name() const override { return "no region"; }
  };
  PoolOptions options;
  options.cap = 64 * kMiB;  // region: 4 MiB, chunks: 32 MiB
  options.thread_cache = true;
  MemoryPool pool(std::make_unique<NoRegion>(), options);
  auto* p = static_cast<unsigned char*>(pool.allocate(300));
  std::memset(p, 7, 300);
  PoolStats s = pool.stats();
  EXPECT_EQ(s.small_region, 0u);
  EXPECT_EQ(s.in_use, 512u);
  EXPECT_EQ(s.chunks, 1u);
  pool.deallocate(p);
  EXPECT_THROW(pool.deallocate(p), InvalidArgument);
  s = pool.stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.total_allocations, 1u);
}

// Threads allocate tagged blocks (mostly small, some large), free some of
// their own and hand others to the next thread through a locked mailbox.
TEST(MemoryPoolThreadCache, ManyThreadsWithCrossThreadFreesEndFullyAccounted) {
  constexpr int kThreads = 4;
  constexpr int kSteps = 20000;
  auto arena = MemoryPool::host_arena(256 * kMiB, 4 * kMiB);
  struct Block {
    unsigned char* data;
    std::size_t bytes;
    unsigned char tag;
  };
  std::mutex mailbox_mutex;
  std::vector<std::vector<Block>> mailbox(kThreads);
  std::atomic<std::uint64_t> served{0};
  std::atomic<bool> corrupt{false};
  auto check_and_free = [&](const Block& b) {
    if (b.data[0] != b.tag || b.data[b.bytes - 1] != b.tag) corrupt = true;
    arena->deallocate(b.data);
  };
  auto work = [&](int id) {
    std::mt19937_64 rng(100 + id);
    std::vector<Block> mine;
    for (int step = 0; step < kSteps; ++step) {
      const unsigned r = rng() % 100;
      if (r < 50 || mine.empty()) {
        const std::size_t bytes = r % 10 == 0 ? 8192 + rng() % 100000 : 1 + rng() % 4096;
        auto* p = static_cast<unsigned char*>(arena->allocate(bytes));
        const auto tag = static_cast<unsigned char>(rng() | 1);
        p[0] = p[bytes - 1] = tag;
        mine.push_back({p, bytes, tag});
        ++served;
      } else if (r < 85) {
        const std::size_t pick = rng() % mine.size();
        check_and_free(mine[pick]);
        mine[pick] = mine.back();
        mine.pop_back();
      } else {
        std::lock_guard lock(mailbox_mutex);
        mailbox[(id + 1) % kThreads].push_back(mine.back());
        mine.pop_back();
        for (const Block& b : mailbox[id]) check_and_free(b);  // freed here, allocated there
        mailbox[id].clear();
      }
    }
    for (const Block& b : mine) check_and_free(b);
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(work, id);
  for (auto& t : threads) t.join();
  for (const auto& box : mailbox) {
    for (const Block& b : box) check_and_free(b);
  }
  EXPECT_FALSE(corrupt) << "a block was overwritten by another allocation";
  const PoolStats s = arena->stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.live_allocations, 0u);
  EXPECT_EQ(s.total_allocations, served.load());
  EXPECT_GT(s.peak_in_use, 0u);
  EXPECT_LE(s.reserved, 256 * kMiB);
  EXPECT_EQ(arena->trim(), s.reserved) << "every block, parked or not, went back";
}

}  // namespace
}  // namespace stoke
