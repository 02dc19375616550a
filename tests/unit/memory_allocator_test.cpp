// The pool's bookkeeping checked against a plain model: a map of live
// intervals, under thousands of random allocations and frees.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "memory/block_allocator.hpp"
#include "stoke/error.hpp"

namespace stoke::detail {
namespace {

constexpr std::size_t kAlign = 256;

// Live intervals by start; checks that a new one overlaps none.
class Model {
 public:
  void add(std::uintptr_t address, std::size_t size) {
    auto next = live_.lower_bound(address);
    if (next != live_.end()) {
      ASSERT_GE(next->first, address + size) << "overlaps the next live block";
    }
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      ASSERT_LE(prev->first + prev->second, address) << "overlaps the previous live block";
    }
    live_.emplace(address, size);
    in_use_ += size;
  }
  std::size_t remove(std::uintptr_t address) {
    auto it = live_.find(address);
    const std::size_t size = it->second;
    live_.erase(it);
    in_use_ -= size;
    return size;
  }
  std::uint64_t in_use() const { return in_use_; }
  std::size_t count() const { return live_.size(); }

 private:
  std::map<std::uintptr_t, std::size_t> live_;
  std::uint64_t in_use_ = 0;
};

bool inside_some_chunk(const std::vector<BlockAllocator::Chunk>& chunks, std::uintptr_t address,
                       std::size_t size) {
  for (const auto& c : chunks) {
    if (address >= c.base && address + size <= c.base + c.size) return true;
  }
  return false;
}

TEST(BlockAllocator, RandomAllocFreeMatchesModelAndCoalescesFully) {
  BlockAllocator blocks(kAlign);
  // Three chunks of different sizes; the middle one directly adjacent to the
  // first, so coalescing across the chunk boundary would be detected.
  const std::vector<BlockAllocator::Chunk> chunks = {
      {0x100000, 1 << 20}, {0x100000 + (1 << 20), 512 << 10}, {0x10000000, 3 << 20}};
  std::uint64_t total = 0;
  for (const auto& c : chunks) {
    blocks.add_chunk(c.base, c.size);
    total += c.size;
  }

  std::mt19937_64 rng(20261201);
  std::uniform_int_distribution<int> size_class(0, 9);
  Model model;
  std::vector<std::uintptr_t> live;
  std::uint64_t peak = 0;
  std::uint64_t served = 0;
  for (int step = 0; step < 20000; ++step) {
    const bool do_alloc = live.empty() || (rng() % 100) < 55;
    if (do_alloc) {
      // Mostly small, sometimes large, sometimes 0 or not a multiple of 256.
      const int cls = size_class(rng);
      const std::size_t size = cls == 0 ? 0 : cls < 7 ? rng() % 4000 : rng() % (200 << 10);
      const std::uintptr_t address = blocks.allocate(size);
      if (address == 0) {
        // A refusal must be honest: no free block holds the rounded size.
        ASSERT_LT(blocks.largest_free_block(), blocks.round_up(size));
        continue;
      }
      ASSERT_EQ(address % kAlign, 0u);
      const std::size_t rounded = blocks.round_up(size);
      ASSERT_GE(rounded, size);
      ASSERT_EQ(blocks.block_size(address), rounded);
      ASSERT_TRUE(inside_some_chunk(chunks, address, rounded));
      model.add(address, rounded);
      live.push_back(address);
      ++served;
    } else {
      const std::size_t pick = rng() % live.size();
      const std::uintptr_t address = live[pick];
      live[pick] = live.back();
      live.pop_back();
      ASSERT_EQ(blocks.free(address), model.remove(address));
    }
    peak = std::max(peak, model.in_use());
    ASSERT_EQ(blocks.in_use(), model.in_use());
    ASSERT_EQ(blocks.live_allocations(), model.count());
    ASSERT_EQ(blocks.free_bytes(), total - model.in_use());
    ASSERT_EQ(blocks.peak_in_use(), peak);
    ASSERT_LE(blocks.largest_free_block(), blocks.free_bytes());
  }
  EXPECT_EQ(blocks.total_allocations(), served);
  EXPECT_GT(served, 5000u);

  for (const auto address : live) blocks.free(address);
  // Fully coalesced: one free block per chunk, the largest the largest chunk.
  EXPECT_EQ(blocks.in_use(), 0u);
  EXPECT_EQ(blocks.free_block_count(), chunks.size());
  EXPECT_EQ(blocks.largest_free_block(), 3u << 20);
  EXPECT_EQ(blocks.free_bytes(), total);
  EXPECT_EQ(blocks.take_free_chunks().size(), chunks.size());
  EXPECT_EQ(blocks.reserved(), 0u);
}

TEST(BlockAllocator, GoodFitServesFromTheSmallestSufficientBin) {
  BlockAllocator blocks(kAlign);
  blocks.add_chunk(0x10000, 64 * kAlign);
  // Carve free holes of 4, 2 and 8 blocks separated by live blocks.
  std::vector<std::uintptr_t> a;
  for (std::size_t n : {4, 1, 2, 1, 8, 1}) a.push_back(blocks.allocate(n * kAlign));
  blocks.free(a[0]);
  blocks.free(a[2]);
  blocks.free(a[4]);
  EXPECT_EQ(blocks.allocate(2 * kAlign), a[2]);
  EXPECT_EQ(blocks.allocate(3 * kAlign), a[0]);
  EXPECT_EQ(blocks.allocate(5 * kAlign), a[4]);
}

TEST(BlockAllocator, RejectsDoubleFreeAndForeignPointers) {
  BlockAllocator blocks(kAlign);
  blocks.add_chunk(0x10000, 16 * kAlign);
  const auto a = blocks.allocate(100);
  blocks.free(a);
  EXPECT_THROW(blocks.free(a), InvalidArgument);
  EXPECT_THROW(blocks.free(0x20000), InvalidArgument);
  EXPECT_THROW(blocks.add_chunk(0x10000 + kAlign, kAlign), InvalidArgument);  // overlap
  EXPECT_THROW(blocks.add_chunk(0x30001, kAlign), InvalidArgument);           // misaligned
}

TEST(BlockAllocator, PendingBlocksAreNeitherFreeNorUsedUntilTheirFencePasses) {
  BlockAllocator blocks(kAlign);
  blocks.add_chunk(0x10000, 4 * kAlign);
  const auto a = blocks.allocate(2 * kAlign);
  const auto b = blocks.allocate(2 * kAlign);
  blocks.free_after(a, 7);
  EXPECT_EQ(blocks.pending_bytes(), 2 * kAlign);
  EXPECT_EQ(blocks.in_use(), 2 * kAlign);
  EXPECT_EQ(blocks.allocate(kAlign), 0u) << "a pending block was handed out";
  std::vector<std::uint64_t> released;
  auto record = [&](std::uint64_t f) { released.push_back(f); };
  EXPECT_EQ(blocks.reclaim([](std::uint64_t) { return false; }, record), 0u);
  EXPECT_EQ(blocks.reclaim([](std::uint64_t f) { return f == 7; }, record), 1u);
  EXPECT_EQ(released, std::vector<std::uint64_t>{7});
  EXPECT_EQ(blocks.pending_bytes(), 0u);
  EXPECT_EQ(blocks.allocate(kAlign), a);
  blocks.free(a);
  blocks.free(b);
  EXPECT_EQ(blocks.free_block_count(), 1u);
}

}  // namespace
}  // namespace stoke::detail
