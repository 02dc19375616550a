// MemoryPool's policy: lazy growth under the cap, out-of-memory errors that
// leave the pool usable, trim, stream-ordered reuse through fences, the host
// arena and the RAII handle.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "stoke/error.hpp"
#include "stoke/memory.hpp"

namespace stoke {
namespace {

// Chunks are fake addresses (never dereferenced); fences pass when the test
// says so, like events on a stream the test drives by hand.
struct FakeState {
  std::map<std::uintptr_t, std::size_t> chunks;  // live chunks
  std::uintptr_t next_base = 0x100000000;
  std::uint64_t next_fence = 0;
  std::set<std::uint64_t> passed;
  std::set<std::uint64_t> released;
  std::vector<std::uint64_t> waited;
  std::uint64_t refuse_above = ~0ull;  // chunks larger than this are refused
};

class FakeChunks final : public ChunkProvider {
 public:
  explicit FakeChunks(FakeState* state) : s_(state) {}
  void* allocate_chunk(std::size_t bytes) override {
    if (bytes > s_->refuse_above) return nullptr;
    const std::uintptr_t base = s_->next_base;
    s_->next_base += bytes + (1 << 20);
    s_->chunks.emplace(base, bytes);
    return reinterpret_cast<void*>(base);
  }
  void free_chunk(void* base, std::size_t bytes) noexcept override {
    auto it = s_->chunks.find(reinterpret_cast<std::uintptr_t>(base));
    if (it != s_->chunks.end() && it->second == bytes) s_->chunks.erase(it);
  }
  std::uint64_t record_fence(StreamHandle) override { return ++s_->next_fence; }
  bool fence_passed(std::uint64_t fence) override { return s_->passed.count(fence) > 0; }
  void wait_fence(std::uint64_t fence) override {
    s_->waited.push_back(fence);
    s_->passed.insert(fence);
  }
  void release_fence(std::uint64_t fence) noexcept override { s_->released.insert(fence); }
  std::string name() const override { return "fake:0"; }

 private:
  FakeState* s_;
};

constexpr std::size_t kMiB = 1 << 20;

PoolOptions options(std::uint64_t cap) {
  PoolOptions o;
  o.cap = cap;
  o.min_chunk = 4 * kMiB;
  o.chunk_granularity = 2 * kMiB;
  o.cap_source = "min(STOKE_GPU_MEM_PERCENT=50% of 32 MiB, STOKE_GPU_MEM_MAX=none)";
  o.remedy = "use a smaller batch, or raise STOKE_GPU_MEM_PERCENT / STOKE_GPU_MEM_MAX";
  return o;
}

StreamHandle stream_a() {
  return reinterpret_cast<StreamHandle>(0x5a);
}

TEST(MemoryPool, GrowsLazilyInChunksUpToTheCap) {
  FakeState fake;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(16 * kMiB));
  EXPECT_EQ(pool.stats().reserved, 0u) << "nothing reserved before the first request";
  void* a = pool.allocate(1000);
  EXPECT_EQ(pool.stats().reserved, 4 * kMiB) << "one min_chunk";
  EXPECT_EQ(pool.stats().in_use, 1024u);
  void* b = pool.allocate(5 * kMiB);  // does not fit: a 6 MiB chunk
  EXPECT_EQ(pool.stats().reserved, 10 * kMiB);
  EXPECT_EQ(pool.stats().chunks, 2u);
  void* c = pool.allocate(6 * kMiB);  // exactly the room left
  EXPECT_EQ(pool.stats().reserved, 16 * kMiB);
  EXPECT_EQ(fake.chunks.size(), 3u);
  for (void* p : {a, b, c}) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % kPoolAlignment, 0u);
  pool.deallocate(a);
  pool.deallocate(b);
  pool.deallocate(c);
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_EQ(pool.stats().peak_in_use, 1024u + 5 * kMiB + 6 * kMiB);
}

// During a graph capture the pool neither hands chunks back (a refused
// cudaFree would drop a chunk from the books while it stays allocated) nor
// queries or waits on fences; after the capture both resume.
TEST(MemoryPool, DuringACaptureNoChunkIsFreedAndNoFenceIsWaitedOn) {
  FakeState fake;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(16 * kMiB));
  void* x = pool.allocate(1 * kMiB);   // a 4 MiB chunk
  void* a = pool.allocate(10 * kMiB);  // a 10 MiB chunk: 14 MiB reserved
  pool.deallocate(x, stream_a());      // pending behind fence 1
  pool.deallocate(a);                  // a whole free chunk
  pool.begin_capture();
  EXPECT_THROW(pool.allocate(12 * kMiB), OutOfMemory);  // would free a chunk and wait
  EXPECT_EQ(pool.trim(), 0u);
  EXPECT_TRUE(fake.waited.empty());
  EXPECT_EQ(fake.chunks.size(), 2u);
  EXPECT_EQ(pool.stats().reserved, 14 * kMiB) << "the chunks stay on the books";
  pool.end_capture();
  void* b = pool.allocate(12 * kMiB);  // waits for fence 1, frees both chunks, grows 12 MiB
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(fake.waited, std::vector<std::uint64_t>{1});
  EXPECT_EQ(fake.chunks.size(), 1u);
  pool.deallocate(b);
}

TEST(MemoryPool, OutOfMemoryNamesCapRequestUseAndKnobAndPoolRecovers) {
  FakeState fake;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(16 * kMiB));
  void* a = pool.allocate(10 * kMiB);
  try {
    pool.allocate(7 * kMiB);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.requested(), 7 * kMiB);
    EXPECT_EQ(e.cap(), 16 * kMiB);
    EXPECT_EQ(e.in_use(), 10 * kMiB);
    EXPECT_NE(message.find("fake:0"), std::string::npos) << message;
    EXPECT_NE(message.find("7.0 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("cap 16.0 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("in use 10.0 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("peak in use 10.0 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("STOKE_GPU_MEM_PERCENT"), std::string::npos) << message;
    EXPECT_NE(message.find("smaller batch"), std::string::npos) << message;
  }
  EXPECT_THROW(pool.allocate(17 * kMiB), OutOfMemory) << "larger than the cap itself";
  EXPECT_EQ(pool.stats().failed_allocations, 2u);
  // Still usable: what fits is served, and after a free the big one fits.
  void* b = pool.allocate(5 * kMiB);
  pool.deallocate(a);
  void* c = pool.allocate(7 * kMiB);
  EXPECT_NE(c, nullptr);
  pool.deallocate(b);
  pool.deallocate(c);
  EXPECT_EQ(pool.stats().in_use, 0u);
}

TEST(MemoryPool, ProviderRefusalUnderTheCapIsAnOutOfMemoryThatSaysSo) {
  FakeState fake;
  fake.refuse_above = 4 * kMiB;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(64 * kMiB));
  try {
    pool.allocate(8 * kMiB);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  }
  EXPECT_NE(pool.allocate(kMiB), nullptr);
}

TEST(MemoryPool, TrimReturnsOnlyEntirelyFreeChunks) {
  FakeState fake;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(64 * kMiB));
  void* a = pool.allocate(3 * kMiB);  // chunk 1 (4 MiB)
  void* b = pool.allocate(6 * kMiB);  // chunk 2 (6 MiB)
  void* c = pool.allocate(8 * kMiB);  // chunk 3 (8 MiB)
  pool.deallocate(b);
  pool.deallocate(c);
  EXPECT_EQ(pool.trim(), 14 * kMiB);
  EXPECT_EQ(pool.stats().reserved, 4 * kMiB);
  EXPECT_EQ(fake.chunks.size(), 1u);
  EXPECT_EQ(pool.trim(), 0u);
  pool.deallocate(a);
  EXPECT_EQ(pool.trim(), 4 * kMiB);
  EXPECT_TRUE(fake.chunks.empty());
}

TEST(MemoryPool, FreeChunksAreGivenBackToFitALargeRequestUnderTheCap) {
  FakeState fake;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(16 * kMiB));
  std::vector<void*> small;
  for (int i = 0; i < 4; ++i) small.push_back(pool.allocate(3 * kMiB));  // 4 chunks of 4 MiB
  for (void* p : small) pool.deallocate(p);
  EXPECT_EQ(pool.stats().reserved, 16 * kMiB);
  void* big = pool.allocate(12 * kMiB);
  EXPECT_EQ(pool.stats().chunks, 1u);
  pool.deallocate(big);
}

TEST(MemoryPool, BlockFreedOnAStreamIsReusedOnlyAfterItsFencePasses) {
  FakeState fake;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(64 * kMiB));
  void* a = pool.allocate(kMiB);
  pool.deallocate(a, stream_a());
  EXPECT_EQ(pool.stats().pending_free, kMiB);
  EXPECT_EQ(pool.stats().in_use, 0u);
  void* b = pool.allocate(kMiB);
  EXPECT_NE(b, a) << "reused before the stream's work passed";
  fake.passed.insert(1);
  void* c = pool.allocate(kMiB);
  EXPECT_EQ(c, a) << "best fit reuses the block once the fence passed";
  EXPECT_TRUE(fake.released.count(1));
  EXPECT_TRUE(fake.waited.empty()) << "nothing blocked while room was left";
  pool.deallocate(b);
  pool.deallocate(c);
}

TEST(MemoryPool, UnderPressureThePoolWaitsForPendingFencesBeforeFailing) {
  FakeState fake;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(8 * kMiB));
  void* a = pool.allocate(6 * kMiB);
  pool.deallocate(a, stream_a());
  void* b = pool.allocate(6 * kMiB);  // no room to grow: must wait for fence 1
  EXPECT_EQ(fake.waited, std::vector<std::uint64_t>{1});
  EXPECT_EQ(b, a);
  pool.deallocate(b, stream_a());
  pool.synchronize();
  EXPECT_EQ(pool.stats().pending_free, 0u);
  EXPECT_EQ(pool.stats().free, pool.stats().reserved);
}

TEST(MemoryPool, DeallocateRejectsForeignPointersAndKeepsWorking) {
  FakeState fake;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(8 * kMiB));
  void* a = pool.allocate(100);
  int local = 0;
  EXPECT_THROW(pool.deallocate(&local), InvalidArgument);
  EXPECT_THROW(pool.deallocate(&local, stream_a()), InvalidArgument);
  pool.deallocate(a);
  EXPECT_THROW(pool.deallocate(a), InvalidArgument);
  EXPECT_EQ(pool.stats().live_allocations, 0u);
}

TEST(MemoryPool, ScopedAllocationFreesOnItsStreamWhenItDies) {
  FakeState fake;
  MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(8 * kMiB));
  {
    PoolAllocation block = pool.allocate_scoped(5000, stream_a());
    EXPECT_TRUE(block);
    EXPECT_EQ(block.size(), 5000u);
    PoolAllocation moved = std::move(block);
    EXPECT_FALSE(block);
    EXPECT_EQ(pool.stats().live_allocations, 1u);
  }
  EXPECT_EQ(pool.stats().live_allocations, 0u);
  EXPECT_EQ(pool.stats().pending_free, 5120u);
}

TEST(MemoryPool, DestructorReturnsEveryChunkAfterWaitingForPendingFences) {
  FakeState fake;
  {
    MemoryPool pool(std::make_unique<FakeChunks>(&fake), options(64 * kMiB));
    pool.deallocate(pool.allocate(kMiB), stream_a());
    pool.allocate(9 * kMiB);
  }
  EXPECT_TRUE(fake.chunks.empty());
  EXPECT_EQ(fake.waited, std::vector<std::uint64_t>{1});
}

TEST(MemoryPool, HostArenaServesWritableAlignedMemoryAndStatsAddUp) {
  auto arena = MemoryPool::host_arena(8 * kMiB, 4 * kMiB);
  std::vector<std::pair<unsigned char*, std::size_t>> blocks;
  for (std::size_t i = 1; i <= 20; ++i) {
    const std::size_t n = i * 7919;
    auto* p = static_cast<unsigned char*>(arena->allocate(n));
    std::memset(p, static_cast<int>(i), n);
    blocks.emplace_back(p, n);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(blocks[i].first[0], i + 1);
    EXPECT_EQ(blocks[i].first[blocks[i].second - 1], i + 1) << "overwritten by a neighbour";
  }
  const PoolStats s = arena->stats();
  EXPECT_EQ(s.reserved, s.in_use + s.free + s.pending_free);
  EXPECT_LE(s.reserved, 8 * kMiB);
  const std::string table = format_pool_stats(arena->name(), s);
  EXPECT_NE(table.find("host arena"), std::string::npos);
  EXPECT_NE(table.find("fragmentation"), std::string::npos);
  for (auto& [p, n] : blocks) arena->deallocate(p);
  EXPECT_EQ(arena->stats().fragmentation, 0.0);
  EXPECT_EQ(arena->trim(), s.reserved);
}

TEST(MemoryPool, DeviceCapIsTheSmallerOfPercentAndMax) {
  Settings settings;
  settings.gpu_mem_percent = 50;
  const std::uint64_t total = 80ull << 30;
  PoolCap cap = resolve_device_pool_cap(settings, total);
  EXPECT_EQ(cap.bytes, 40ull << 30);
  EXPECT_NE(cap.source.find("STOKE_GPU_MEM_MAX=none"), std::string::npos) << cap.source;
  settings.gpu_mem_max = 10ull << 30;
  cap = resolve_device_pool_cap(settings, total);
  EXPECT_EQ(cap.bytes, 10ull << 30);
  EXPECT_NE(cap.source.find("STOKE_GPU_MEM_PERCENT=50%"), std::string::npos) << cap.source;
}

TEST(MemoryPool, DevicePoolWithoutAUsableDeviceIsUnsupportedWithTheReason) {
  Settings settings;
  try {
    MemoryPool::device(settings, 0);
    GTEST_SKIP() << "a CUDA device is present; covered by the GPU tests";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA device 0"), std::string::npos) << e.what();
  } catch (const Error& e) {
    // The plugin loaded but no driver: a GPU library error naming the call.
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoke
