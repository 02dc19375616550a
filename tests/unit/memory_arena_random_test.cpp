// The host arena under a random workload with real memory: every block is
// filled with its own tag and checked when freed (an overlap would overwrite
// a neighbour's tag), with growth, trims, out-of-memory and full coalescing.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "stoke/error.hpp"
#include "stoke/memory.hpp"

namespace stoke {
namespace {

struct Live {
  unsigned char* data;
  std::size_t bytes;
  unsigned char tag;
};

bool tag_intact(const Live& b) {
  for (std::size_t i = 0; i < b.bytes; i += 61) {
    if (b.data[i] != b.tag) return false;
  }
  return b.bytes == 0 || b.data[b.bytes - 1] == b.tag;
}

TEST(HostArenaRandom, TaggedBlocksNeverOverlapAndTheArenaEndsFullyCoalesced) {
  constexpr std::uint64_t kCap = 16u << 20;
  auto arena = MemoryPool::host_arena(kCap, 1u << 20);
  std::mt19937_64 rng(42);
  std::vector<Live> live;
  std::uint64_t in_use = 0, peak = 0, served = 0, refused = 0;
  for (int step = 0; step < 6000; ++step) {
    const unsigned r = rng() % 100;
    if (r < 52 || live.empty()) {
      const std::size_t bytes = (rng() % 8 == 0) ? rng() % (3u << 20) : rng() % 20000;
      try {
        auto* p = static_cast<unsigned char*>(arena->allocate(bytes));
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % kPoolAlignment, 0u);
        const auto tag = static_cast<unsigned char>(rng());
        std::memset(p, tag, bytes);
        live.push_back({p, bytes, tag});
        in_use += (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256;
        peak = std::max(peak, in_use);
        ++served;
      } catch (const OutOfMemory& e) {
        // An honest refusal: no free block holds the request and no chunk
        // for it fits under the cap (entirely free chunks were given back).
        const PoolStats s = arena->stats();
        ASSERT_LT(s.largest_free_block, e.requested()) << e.what();
        ASSERT_GT(s.reserved + e.requested(), kCap) << e.what();
        ASSERT_EQ(e.in_use(), in_use);
        ++refused;
      }
    } else if (r < 99) {
      const std::size_t pick = rng() % live.size();
      ASSERT_TRUE(tag_intact(live[pick])) << "block overwritten by another allocation";
      arena->deallocate(live[pick].data);
      in_use -= (std::max<std::size_t>(live[pick].bytes, 1) + 255) / 256 * 256;
      live[pick] = live.back();
      live.pop_back();
    } else {
      arena->trim();
    }
    const PoolStats s = arena->stats();
    ASSERT_EQ(s.in_use, in_use);
    ASSERT_EQ(s.peak_in_use, peak);
    ASSERT_EQ(s.live_allocations, live.size());
    ASSERT_LE(s.reserved, kCap);
    ASSERT_EQ(s.reserved, s.in_use + s.free);
  }
  EXPECT_GT(served, 2000u);
  EXPECT_GT(refused, 0u) << "the workload should reach the cap";
  for (const auto& b : live) {
    ASSERT_TRUE(tag_intact(b));
    arena->deallocate(b.data);
  }
  const PoolStats s = arena->stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.free_blocks, s.chunks) << "each chunk one free block after freeing everything";
  EXPECT_EQ(s.total_allocations, served);
  EXPECT_EQ(s.failed_allocations, refused);
  EXPECT_EQ(arena->trim(), s.reserved);
  EXPECT_EQ(arena->stats().reserved, 0u);
}

}  // namespace
}  // namespace stoke
