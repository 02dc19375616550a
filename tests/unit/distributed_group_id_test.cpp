// The NCCL unique id's way to the ranks (lib/distributed/group_id.hpp): rank 0
// makes it, the host communicator's broadcast_bytes carries it. Runs without a
// GPU: the id here is 128 bytes made by the worker, as ncclGetUniqueId makes one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "distributed/group_id.hpp"
#include "stoke/cuda.hpp"
#include "stoke/distributed.hpp"
#include "unit/fake_gpu_backend.hpp"
#include "unit/rank_group.hpp"

namespace stoke {
namespace {

// "rank 1 id 0a1b..." -> "0a1b..." ("" when the line is missing).
std::string printed_id(const std::string& output) {
  const auto at = output.find(" id ");
  if (at == std::string::npos) return "";
  return output.substr(at + 4, output.find('\n', at) - at - 4);
}

TEST(DeviceGroupId, TravelsFromRankZeroToTheOtherProcessOverGloo) {
  if (!distributed_available()) GTEST_SKIP() << "this build has no Gloo (libgloo-dev)";
  testing::RankGroup group(
      std::filesystem::temp_directory_path() / ("stoke-dist-group-id-" + std::to_string(getpid())),
      2);
  const auto results = group.run(STOKE_DIST_WORKER, {"group-id"}, std::chrono::seconds(60));
  ASSERT_EQ(results.size(), 2u);
  for (std::size_t r = 0; r < results.size(); ++r) {
    ASSERT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
  }
  const std::string root = printed_id(results[0].output);
  EXPECT_EQ(root.size(), 2 * kDeviceGroupIdBytes) << results[0].output;
  EXPECT_EQ(printed_id(results[1].output), root) << "rank 1 must hold rank 0's id:\n"
                                                 << results[1].output;
  EXPECT_NE(root.find_first_not_of('0'), std::string::npos) << "the id is not all zeros";
}

TEST(DeviceGroupId, OneRankKeepsTheIdItMade) {
  auto comm = make_communicator(DistributedOptions{});
  const std::vector<std::uint8_t> made(kDeviceGroupIdBytes, 0x5a);
  int calls = 0;
  const auto id = detail::share_group_id(
      *comm,
      [&] {
        ++calls;
        return made;
      },
      kDeviceGroupIdBytes);
  EXPECT_EQ(id, made);
  EXPECT_EQ(calls, 1);
}

TEST(DeviceGroupId, AnIdOfTheWrongSizeIsRefusedBeforeItIsSent) {
  auto comm = make_communicator(DistributedOptions{});
  try {
    detail::share_group_id(
        *comm, [] { return std::vector<std::uint8_t>(5); }, kDeviceGroupIdBytes);
    FAIL() << "a 5-byte id was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5 bytes, expected 128"), std::string::npos) << e.what();
  }
}

// The signal DataParallel reads to fall back to the host path: a GPU backend
// without device collectives (here the fake one) says why and refuses groups.
TEST(DeviceGroupId, AGpuBackendWithoutNcclSaysSoAndRefusesAGroup) {
  testing::FakeGpuBackend gpu;
  EXPECT_NE(gpu.device_collectives_unavailable().find("no device collectives"), std::string::npos);
  EXPECT_THROW(gpu.new_device_group_id(), Unsupported);
  const std::vector<std::uint8_t> id(kDeviceGroupIdBytes);
  EXPECT_THROW(gpu.join_device_group(0, 1, id), Unsupported);
}

}  // namespace
}  // namespace stoke
