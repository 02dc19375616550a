// The block allocator's quick cache (parked small blocks, block_allocator.hpp)
// and the pool built on it: figures exact while blocks are parked, reuse of a
// parked block for the same size only, double frees still caught, and a
// random workload against a model of live intervals that ends fully merged.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "memory/block_allocator.hpp"
#include "stoke/error.hpp"
#include "stoke/memory.hpp"

namespace stoke::detail {
namespace {

constexpr std::uintptr_t kBase = std::uintptr_t{1} << 40;
constexpr std::size_t kChunk = std::size_t{64} << 20;

TEST(BlockAllocatorQuickCache, ParkedBlocksCountAsFreeAndComeBackForTheirSize) {
  BlockAllocator blocks(256);
  blocks.set_quick_cache(true);
  blocks.add_chunk(kBase, kChunk);
  const std::uintptr_t a = blocks.allocate(1000);  // 1024 rounded
  const std::uintptr_t keep = blocks.allocate(300);
  EXPECT_EQ(blocks.free(a), 1024u);
  EXPECT_EQ(blocks.quick_count(), 1u);
  EXPECT_EQ(blocks.in_use(), 512u);
  EXPECT_EQ(blocks.live_allocations(), 1u);
  EXPECT_EQ(blocks.block_size(a), 0u) << "a parked block is not live";
  EXPECT_THROW(blocks.free(a), InvalidArgument) << "double free of a parked block";
  EXPECT_NE(blocks.allocate(2048), a) << "another size must not get the parked block";
  EXPECT_EQ(blocks.allocate(1024), a);
  EXPECT_EQ(blocks.quick_count(), 0u);
  EXPECT_EQ(blocks.in_use(), 512u + 2048u + 1024u);
  EXPECT_EQ(blocks.peak_in_use(), 512u + 2048u + 1024u);
  EXPECT_EQ(blocks.total_allocations(), 4u);
  blocks.free(keep);
  EXPECT_EQ(blocks.peak_in_use(), 512u + 2048u + 1024u);
}

TEST(BlockAllocatorQuickCache, LargeBlocksAndAFullListGoBackToTheBins) {
  BlockAllocator blocks(256);
  blocks.set_quick_cache(true);
  blocks.add_chunk(kBase, kChunk);
  const std::uintptr_t big = blocks.allocate(BlockAllocator::kQuickMaxSize + 256);
  blocks.free(big);
  EXPECT_EQ(blocks.quick_count(), 0u) << "over kQuickMaxSize: merged at once";
  std::vector<std::uintptr_t> small;
  for (int i = 0; i < BlockAllocator::kQuickSlots + 5; ++i) small.push_back(blocks.allocate(256));
  for (auto p : small) blocks.free(p);
  EXPECT_EQ(blocks.quick_count(), static_cast<std::size_t>(BlockAllocator::kQuickSlots));
  blocks.flush_quick();
  EXPECT_EQ(blocks.free_block_count(), 1u);
  EXPECT_EQ(blocks.largest_free_block(), kChunk);
}

TEST(BlockAllocatorQuickCache, RandomWorkloadNeverOverlapsAndEndsMerged) {
  BlockAllocator blocks(256);
  blocks.set_quick_cache(true);
  blocks.add_chunk(kBase, kChunk);
  std::mt19937_64 rng(9);
  std::map<std::uintptr_t, std::size_t> live;
  std::uint64_t in_use = 0, peak = 0;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 100 < 55) {
      // Few distinct sizes, so that parked blocks are reused often.
      const std::size_t bytes = (rng() % 10 == 0) ? (rng() % 4 + 1) << 20 : 256u << (rng() % 6);
      const std::uintptr_t p = blocks.allocate(bytes);
      if (!p) continue;
      const std::size_t size = blocks.round_up(bytes);
      auto next = live.lower_bound(p);
      if (next != live.end()) {
        ASSERT_GE(next->first, p + size);
      }
      if (next != live.begin()) {
        ASSERT_LE(std::prev(next)->first + std::prev(next)->second, p);
      }
      live.emplace(p, size);
      in_use += size;
      peak = std::max(peak, in_use);
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      ASSERT_EQ(blocks.free(it->first), it->second);
      in_use -= it->second;
      live.erase(it);
    }
    ASSERT_EQ(blocks.in_use(), in_use);
    ASSERT_EQ(blocks.live_allocations(), live.size());
  }
  EXPECT_EQ(blocks.peak_in_use(), peak);
  for (const auto& [p, size] : live) blocks.free(p);
  blocks.flush_quick();
  EXPECT_EQ(blocks.free_block_count(), 1u);
  EXPECT_EQ(blocks.largest_free_block(), kChunk);
}

TEST(MemoryPoolQuickCache, StatsAreExactWhileBlocksAreParked) {
  // Above SmallBlocks::kMaxSize: these come from the bins, not the thread caches.
  auto arena = MemoryPool::host_arena(8u << 20, 4u << 20);
  void* a = arena->allocate(8192);
  void* b = arena->allocate(16384);
  arena->deallocate(b);  // parked; merged, it joins the free tail of the chunk
  const PoolStats s = arena->stats();
  EXPECT_EQ(s.in_use, 8192u);
  EXPECT_EQ(s.live_allocations, 1u);
  EXPECT_EQ(s.peak_in_use, 8192u + 16384u);
  EXPECT_EQ(s.reserved, s.in_use + s.free + s.pending_free);
  EXPECT_EQ(s.free_blocks, 1u);
  EXPECT_EQ(s.fragmentation, 0.0) << "stats() merges parked blocks first";
  arena->deallocate(a);
  EXPECT_EQ(arena->trim(), s.reserved);
}

}  // namespace
}  // namespace stoke::detail
