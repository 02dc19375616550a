#include "stoke/distributed.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <set>

#include "unit/rank_group.hpp"

namespace stoke {
namespace {

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("stoke-dist-" + name + "-" + std::to_string(getpid()));
}

TEST(ShardPlan, RanksTakeDisjointBatchesThatCoverEveryWholeGlobalStep) {
  for (std::size_t samples : {0u, 1u, 7u, 64u, 100u, 1001u}) {
    for (std::size_t batch : {1u, 3u, 8u}) {
      for (int world : {1, 2, 3, 4}) {
        const ShardPlan plan = plan_shards(samples, batch, world);
        std::multiset<std::size_t> seen;
        for (int r = 0; r < world; ++r) {
          const auto positions = shard_positions(samples, batch, r, world);
          ASSERT_EQ(positions.size(), plan.steps * batch) << "every rank runs the same steps";
          seen.insert(positions.begin(), positions.end());
        }
        EXPECT_EQ(seen.size() + plan.dropped, samples);
        EXPECT_LT(plan.dropped, batch * static_cast<std::size_t>(world));
        std::size_t expected = 0;
        for (std::size_t p : seen)
          EXPECT_EQ(p, expected++) << "positions are disjoint and contiguous";
      }
    }
  }
}

TEST(ShardPlan, RankRTakesTheRthBatchOfEachGlobalStep) {
  // batch 2, world 3: global steps of 6; rank 1 takes positions 2,3 then 8,9.
  EXPECT_EQ(shard_positions(13, 2, 1, 3), (std::vector<std::size_t>{2, 3, 8, 9}));
  EXPECT_THROW(shard_positions(13, 2, 3, 3), InvalidArgument);
  EXPECT_THROW(plan_shards(13, 0, 3), InvalidArgument);
}

class DistributedEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) unsetenv(name);
  }
  void TearDown() override { SetUp(); }
  static constexpr const char* kNames[] = {"RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_RANK",
                                           "OMPI_COMM_WORLD_RANK",
                                           "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_LOCAL_RANK",
                                           "STOKE_DIST_STORE",
                                           "STOKE_DIST_TIMEOUT"};
};

TEST_F(DistributedEnv, UnsetMeansOneRank) {
  const auto o = DistributedOptions::from_environment();
  EXPECT_EQ(o.rank, 0);
  EXPECT_EQ(o.world_size, 1);
  auto comm = make_communicator(o);
  EXPECT_EQ(comm->name(), "local");
  std::vector<float> x = {1, 2, 3};
  comm->allreduce_mean(x);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3}));
}

TEST_F(DistributedEnv, ReadsTorchrunAndOpenMpiVariables) {
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("STOKE_DIST_STORE", "file:/tmp/x", 1);
  auto o = DistributedOptions::from_environment();
  EXPECT_EQ(o.rank, 2);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.local_rank, 2);
  setenv("RANK", "1", 1);  // torchrun's names win over MPI's
  setenv("WORLD_SIZE", "2", 1);
  o = DistributedOptions::from_environment();
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.world_size, 2);
}

TEST_F(DistributedEnv, BadValuesNameTheVariable) {
  const auto message_of = [] {
    try {
      DistributedOptions::from_environment();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  setenv("WORLD_SIZE", "two", 1);
  EXPECT_NE(message_of().find("WORLD_SIZE=two"), std::string::npos);
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "2", 1);
  EXPECT_NE(message_of().find("outside the world"), std::string::npos);
  setenv("RANK", "1", 1);
  EXPECT_NE(message_of().find("STOKE_DIST_STORE"), std::string::npos) << "two ranks need a store";
  setenv("STOKE_DIST_STORE", "nfs:/share", 1);
  EXPECT_NE(message_of().find("file:DIR"), std::string::npos);
}

class Ranks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!distributed_available()) GTEST_SKIP() << "this build has no Gloo (libgloo-dev)";
  }
};

TEST_F(Ranks, CollectivesAgreeAcrossThreeProcesses) {
  testing::RankGroup group(scratch("collectives"), 3);
  const auto results = group.run(STOKE_DIST_WORKER, {"collectives"}, std::chrono::seconds(60));
  for (std::size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
    EXPECT_NE(results[r].output.find("ok (gloo/tcp)"), std::string::npos) << results[r].output;
  }
}

TEST_F(Ranks, AFailingRankStopsTheOthersWithItsReason) {
  testing::RankGroup group(scratch("fails"), 2);
  const auto results = group.run(STOKE_DIST_WORKER, {"peer-fails"}, std::chrono::seconds(60),
                                 {"STOKE_DIST_TIMEOUT=20"});
  EXPECT_EQ(results[1].exit_code, 9);
  ASSERT_EQ(results[0].exit_code, 0) << results[0].output;
  EXPECT_NE(results[0].output.find("rank 1: out of memory in step 3"), std::string::npos)
      << results[0].output;
  EXPECT_LT(results[0].seconds, 25.0) << "bounded by the timeout";
}

TEST_F(Ranks, AKilledRankEndsTheOthersWithinTheTimeout) {
  testing::RankGroup group(scratch("killed"), 2);
  const auto results = group.run(STOKE_DIST_WORKER, {"peer-killed"}, std::chrono::seconds(60),
                                 {"STOKE_DIST_TIMEOUT=10"});
  ASSERT_EQ(results[0].exit_code, 0) << results[0].output;
  EXPECT_NE(results[0].output.find("rank 0 of 2: allreduce"), std::string::npos)
      << results[0].output;
  EXPECT_LT(results[0].seconds, 15.0);
}

}  // namespace
}  // namespace stoke
