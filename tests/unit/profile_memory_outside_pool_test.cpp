// The epoch profile shows the device memory outside stoke's pool (CUDA
// context, library handles, other processes), which STOKE_GPU_MEM_PERCENT
// does not bound, in the table and in the JSON.
#include <gtest/gtest.h>

#include "stoke/profile.hpp"

namespace stoke {
namespace {

TEST(ProfileMemoryOutsidePool, TableAndJsonShowWhatTheCapDoesNotBound) {
  ProfileSummary s;
  s.memory.device_total = 1ull << 34;
  s.memory.pool_cap = 1ull << 33;
  s.memory.pool_reserved = 1ull << 30;
  s.memory.device_outside_pool = 512ull << 20;
  const std::string table = format_profile(s);
  EXPECT_NE(
      table.find("outside the pool (CUDA context, library handles, other processes) 512.0 MiB"),
      std::string::npos)
      << table;
  EXPECT_NE(profile_to_json(s).find("\"device_outside_pool\":536870912"), std::string::npos);
  s.memory.device_outside_pool = 0;  // unknown (CPU, or a backend that cannot tell)
  EXPECT_EQ(format_profile(s).find("outside the pool"), std::string::npos);
}

}  // namespace
}  // namespace stoke
