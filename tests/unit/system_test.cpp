#include "stoke/system.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "core/text.hpp"
#include "system/cpu_limits.hpp"

namespace stoke {
namespace {

TEST(System, CpuFactsAreConsistent) {
  const auto cpu = query_cpu();
  EXPECT_GE(cpu.physical_cores, 1);
  EXPECT_GE(cpu.logical_cores, cpu.physical_cores);
  EXPECT_LE(cpu.logical_cores, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_GE(cpu.numa_nodes, 1);
  EXPECT_GT(cpu.total_memory, 0u);
  EXPECT_LE(cpu.available_memory, cpu.total_memory);
  EXPECT_FALSE(cpu.model.empty());
}

// Config::load checks knobs against the cached limits: they equal a fresh
// query, and follow a change of the affinity mask.
TEST(System, CachedCpuLimitsFollowTheAffinityMask) {
  const CpuInfo fresh = query_cpu();
  EXPECT_EQ(cpu_limits().physical_cores, fresh.physical_cores);
  EXPECT_EQ(cpu_limits().simd, fresh.simd);
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  if (CPU_COUNT(&saved) < 2) GTEST_SKIP() << "one CPU in the affinity mask: nothing to narrow";
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  // The mask is per thread; query_cpu and cpu_limits read the calling thread's.
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const CpuLimits narrowed = cpu_limits();
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(narrowed.physical_cores, 1);
  EXPECT_EQ(cpu_limits().physical_cores, fresh.physical_cores) << "the cache follows the mask back";
}

TEST(System, QueryNeverThrowsAndExplainsMissingGpus) {
  const auto info = query_system();
  if (info.cuda.gpus.empty()) {
    const std::string why =
        info.cuda.plugin_loaded ? info.cuda.device_error : info.cuda.plugin_error;
    EXPECT_FALSE(why.empty()) << "no GPU and no reason given";
    EXPECT_NE(format_system(info).find("no CUDA device: running on CPU"), std::string::npos);
  }
}

TEST(System, JsonEscapesAndHasEveryField) {
  SystemInfo info;
  info.cpu.model = "Quote \" and backslash \\ and\nnewline";
  GpuInfo g;
  g.name = "Test GPU";
  g.compute_major = 9;
  info.cuda.gpus.push_back(g);
  const auto json = system_to_json(info);
  EXPECT_NE(json.find("Quote \\\" and backslash \\\\ and\\nnewline"), std::string::npos) << json;
  EXPECT_NE(json.find("\"compute_capability\":\"9.0\""), std::string::npos);
  EXPECT_NE(json.find("\"cuda_visible_devices\":null"), std::string::npos);
}

TEST(System, FormatBytes) {
  EXPECT_EQ(format_bytes(300), "300 B");
  EXPECT_EQ(format_bytes(512ull << 20), "512.0 MiB");
  EXPECT_EQ(format_bytes(3ull << 29), "1.5 GiB");
}

TEST(Text, EditDistance) {
  EXPECT_EQ(detail::edit_distance("STOKE_GPU_MEM_PERCNT", "STOKE_GPU_MEM_PERCENT"), 1u);
  EXPECT_EQ(detail::edit_distance("", "abc"), 3u);
  EXPECT_EQ(detail::edit_distance("kitten", "sitting"), 3u);
}

}  // namespace
}  // namespace stoke
