#include "stoke/profile.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace stoke {
namespace {

using Clock = Profiler::Clock;

TEST(Profiler, RecordsTotalsCountsAndMaxPerStage) {
  Profiler p;
  p.start();
  const auto t0 = Clock::now();
  p.record(Stage::kDecode, t0, t0 + std::chrono::milliseconds(3));
  p.record(Stage::kDecode, t0, t0 + std::chrono::milliseconds(5));
  p.record(Stage::kForward, t0, t0 + std::chrono::milliseconds(2));
  p.step_done(16);
  p.step_done(16);
  const auto s = p.summary();
  EXPECT_NEAR(s.stage(Stage::kDecode).seconds, 0.008, 1e-9);
  EXPECT_EQ(s.stage(Stage::kDecode).count, 2u);
  EXPECT_NEAR(s.stage(Stage::kDecode).max_seconds, 0.005, 1e-9);
  EXPECT_EQ(s.steps, 2u);
  EXPECT_EQ(s.images, 32u);
  EXPECT_FALSE(s.device_busy_measured);
  // CPU backend: compute stages stand for device busy time.
  EXPECT_NEAR(s.device_busy_seconds, 0.002, 1e-9);
  EXPECT_GT(s.wall_seconds, 0);
}

TEST(Profiler, ConcurrentSpansAreAllCounted) {
  Profiler p;
  p.start();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        const auto now = Clock::now();
        p.record(Stage::kPreprocess, now, now + std::chrono::microseconds(1));
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto s = p.summary();
  EXPECT_EQ(s.stage(Stage::kPreprocess).count, 4000u);
  EXPECT_NEAR(s.stage(Stage::kPreprocess).seconds, 4000e-6, 1e-9);
}

TEST(Profiler, MeasuredDeviceBusyReplacesComputeStages) {
  Profiler p;
  p.start();
  const auto t0 = Clock::now();
  p.record(Stage::kForward, t0, t0 + std::chrono::milliseconds(10));
  p.add_device_busy(0.25);
  const auto s = p.summary();
  EXPECT_TRUE(s.device_busy_measured);
  EXPECT_NEAR(s.device_busy_seconds, 0.25, 1e-9);
}

TEST(Profiler, StartClearsEverything) {
  Profiler p;
  const auto t0 = Clock::now();
  p.record(Stage::kRead, t0, t0 + std::chrono::milliseconds(1));
  p.step_done(4);
  p.start();
  const auto s = p.summary();
  EXPECT_EQ(s.stage(Stage::kRead).count, 0u);
  EXPECT_EQ(s.steps, 0u);
}

TEST(Profiler, ChromeTraceHoldsOnlyTheFirstSteps) {
  Profiler p({/*trace_steps=*/2});
  p.start();
  for (int step = 0; step < 5; ++step) {
    const auto now = Clock::now();
    p.record(Stage::kForward, now, now + std::chrono::microseconds(100));
    p.step_done(1);
  }
  const auto trace = p.chrome_trace();
  std::size_t events = 0;
  for (std::size_t pos = 0; (pos = trace.find("\"ph\":\"X\"", pos)) != std::string::npos; ++pos)
    ++events;
  EXPECT_EQ(events, 2u) << trace;
  EXPECT_NE(trace.find("\"name\":\"forward\""), std::string::npos);
  EXPECT_EQ(trace.rfind("{\"traceEvents\":[", 0), 0u);
}

TEST(Profiler, ProcessCpuTimeAdvancesWithWork) {
  const double before = process_cpu_seconds();
  volatile double sink = 0;
  for (int i = 0; i < 20000000; ++i) sink = sink + i * 1e-9;
  EXPECT_GT(process_cpu_seconds(), before);
}

TEST(Profiler, ReportAndJsonNameTheStages) {
  Profiler p;
  p.start();
  const auto t0 = Clock::now();
  p.record(Stage::kDataWait, t0, t0 + std::chrono::milliseconds(1));
  p.set_memory({.device_total = 1ull << 34,
                .pool_cap = 1ull << 33,
                .pool_reserved = 1ull << 30,
                .pool_in_use = 1ull << 29,
                .pool_peak = 1ull << 29,
                .pinned_bytes = 1ull << 26,
                .pinned_fallback = false});
  const auto s = p.summary();
  const auto table = format_profile(s);
  EXPECT_NE(table.find("waiting for data"), std::string::npos) << table;
  EXPECT_NE(table.find("pool cap 8.0 GiB"), std::string::npos) << table;
  const auto json = profile_to_json(s);
  EXPECT_NE(json.find("\"waiting for data\":{\"seconds\":0.001"), std::string::npos) << json;
  EXPECT_NE(json.find("\"pool_peak\":536870912"), std::string::npos) << json;
}

}  // namespace
}  // namespace stoke
