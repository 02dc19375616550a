#include "stoke/threads.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "stoke/error.hpp"

namespace stoke {
namespace {

// Restores the arena size a test changed.
struct ThreadCountGuard {
  int saved = thread_count();
  ~ThreadCountGuard() { set_thread_count(saved); }
};

// Largest number of bodies observed running at the same moment. Each body
// spins briefly so that every thread the arena has gets a chance to join.
int max_concurrency(std::size_t chunks) {
  std::atomic<int> running{0};
  std::atomic<int> peak{0};
  parallel_for(0, chunks, 1, [&](std::size_t, std::size_t) {
    const int now = ++running;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    volatile double sink = 0;
    for (int i = 0; i < 200000; ++i) sink = sink + i * 0.5;
    --running;
  });
  return peak.load();
}

TEST(Threads, WorkUsesNoMoreThreadsThanConfigured) {
  ThreadCountGuard guard;
  set_thread_count(1);
  EXPECT_EQ(thread_count(), 1);
  EXPECT_EQ(max_concurrency(64), 1);

  set_thread_count(2);
  EXPECT_LE(max_concurrency(64), 2);

  // Asking for more threads than cores is allowed; the cap still holds.
  const int many = static_cast<int>(std::thread::hardware_concurrency()) + 2;
  set_thread_count(many);
  EXPECT_LE(max_concurrency(256), many);
}

TEST(Threads, DistinctThreadsNeverExceedTheArenaSize) {
  ThreadCountGuard guard;
  set_thread_count(1);
  std::mutex m;
  std::set<std::thread::id> ids;
  parallel_for(0, 1000, 1, [&](std::size_t, std::size_t) {
    std::lock_guard lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 1u);
}

TEST(Threads, SerialAndParallelCoverTheRangeWithTheSameChunks) {
  for (std::size_t grain : {1u, 7u, 64u, 1000u}) {
    std::vector<std::pair<std::size_t, std::size_t>> serial, parallel;
    std::mutex m;
    parallel_for(
        3, 1003, grain, [&](std::size_t b, std::size_t e) { serial.emplace_back(b, e); },
        Execution::kSerial);
    parallel_for(3, 1003, grain, [&](std::size_t b, std::size_t e) {
      std::lock_guard lock(m);
      parallel.emplace_back(b, e);
    });
    std::sort(parallel.begin(), parallel.end());
    EXPECT_EQ(serial, parallel) << "grain " << grain;
    std::size_t covered = 0;
    for (auto [b, e] : serial) covered += e - b;
    EXPECT_EQ(covered, 1000u);
  }
}

TEST(Threads, ExceptionsReachTheCaller) {
  EXPECT_THROW(parallel_for(0, 100, 1,
                            [](std::size_t b, std::size_t) {
                              if (b == 42) throw std::runtime_error("chunk 42");
                            }),
               std::runtime_error);
}

TEST(Threads, ZeroThreadsIsRejected) {
  EXPECT_THROW(set_thread_count(0), InvalidArgument);
}

TEST(Threads, EmptyRangeRunsNothing) {
  int calls = 0;
  parallel_for(5, 5, 1, [&](std::size_t, std::size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace stoke
