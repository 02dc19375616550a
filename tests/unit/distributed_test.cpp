#include "stoke/distributed.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <set>

#include "distributed/peer_directory.hpp"
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

// Without this, a rank writing to a peer that just failed could die of
// SIGPIPE before naming it (the test above, now and then).
TEST_F(Ranks, SigpipeIsIgnoredUnlessTheHostHandlesIt) {
  for (const char* scenario : {"sigpipe-default", "sigpipe-handler"}) {
    testing::RankGroup group(scratch(scenario), 2);
    const auto results = group.run(STOKE_DIST_WORKER, {scenario}, std::chrono::seconds(60));
    for (std::size_t r = 0; r < results.size(); ++r)
      EXPECT_EQ(results[r].exit_code, 0) << scenario << " rank " << r << ":\n" << results[r].output;
  }
}

TEST_F(Ranks, AKilledRankIsNamedByItsConnectionAmongRanksOnOneAddress) {
  testing::RankGroup group(scratch("killed3"), 3);
  const auto results = group.run(STOKE_DIST_WORKER, {"peer-killed"}, std::chrono::seconds(60),
                                 {"STOKE_DIST_TIMEOUT=10"});
  ASSERT_EQ(results[0].exit_code, 0) << results[0].output;
  // All three listen on 127.0.0.1: the address alone would name ranks 1 and 2.
  EXPECT_NE(results[0].output.find("rank 1 (127.0.0.1 on "), std::string::npos)
      << results[0].output;
  EXPECT_NE(results[0].output.find("closed its connection"), std::string::npos)
      << results[0].output;
  EXPECT_EQ(results[0].output.find("rank 2 ("), std::string::npos) << results[0].output;
}

TEST_F(Ranks, AHungRankIsNamedWithinTheTimeout) {
  testing::RankGroup group(scratch("hangs"), 2);
  const auto results = group.run(STOKE_DIST_WORKER, {"peer-hangs"}, std::chrono::seconds(60),
                                 {"STOKE_DIST_TIMEOUT=3"});
  ASSERT_EQ(results[0].exit_code, 0) << results[0].output;
  EXPECT_NE(results[0].output.find("no answer from rank 1 (127.0.0.1 on "), std::string::npos)
      << results[0].output;
  EXPECT_LT(results[0].seconds, 8.0) << "bounded by the timeout";
}

TEST_F(Ranks, ARankThatNeverJoinsIsNamedWithinTheTimeout) {
  const auto dir = scratch("absent");
  std::filesystem::remove_all(dir);
  DistributedOptions o;
  o.rank = 0;
  o.world_size = 3;
  o.store = "file:" + dir.string();
  o.timeout_seconds = 2;
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    make_communicator(o);
  } catch (const CommunicationError& e) {
    message = e.what();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::filesystem::remove_all(dir);
  EXPECT_NE(message.find("rank 0 of 3: ranks 1, 2 did not join the rendezvous at file:"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("Joined: rank 0 (127.0.0.1 on "), std::string::npos) << message;
  EXPECT_LT(seconds, 5.0);
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

// The wording of a failed collective, from Gloo's texts (no processes).
TEST(PeerDirectory, NamesTheRankWhoseConnectionGlooNames) {
  detail::PeerDirectory peers(0, 3);
  peers.set_record(1, detail::PeerRecord::parse("127.0.0.1 node-a 41"));
  peers.set_record(2, detail::PeerRecord::parse("127.0.0.1 node-a 42"));
  peers.add_socket(1, "[127.0.0.1]:1234");
  peers.add_socket(2, "[127.0.0.1]:5678");
  const std::string closed =
      "[gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:5678";
  EXPECT_EQ(peers.named_in(closed), std::vector<int>{2});
  // The listening address a peer advertised names it too (Gloo prints that
  // one for a connection the peer made first).
  peers.add_socket(1, "[127.0.0.1]:4321");
  EXPECT_EQ(peers.named_in("Read error [127.0.0.1]:4321: Connection reset by peer"),
            std::vector<int>{1});
  EXPECT_EQ(detail::explain_gloo_failure(peers, closed, detail::full_mesh_exchange(0, 3), 5),
            "rank 2 (127.0.0.1 on node-a, pid 42) closed its connection to this rank: it exited "
            "or was killed");
  // An address without a known connection: every rank registered at that host.
  EXPECT_EQ(peers.named_in("connect [127.0.0.1]:999$3: Connection refused"),
            (std::vector<int>{1, 2}));
  EXPECT_TRUE(peers.named_in("Application timeout caused pair closure").empty());
  EXPECT_EQ(detail::explain_gloo_failure(peers, "Application timeout caused pair closure",
                                         detail::full_mesh_exchange(0, 3), 5),
            "");
}

TEST(PeerDirectory, ATimeoutNamesTheRankTheCollectiveWaitedOn) {
  detail::PeerDirectory peers(1, 2);
  peers.set_record(0, detail::PeerRecord::parse("10.231.0.1 node-a 7"));
  EXPECT_EQ(detail::explain_gloo_failure(
                peers, "[unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation",
                detail::ring_allreduce_exchange(1, 2), 10),
            "no answer from rank 0 (10.231.0.1 on node-a, pid 7) within 10 s (STOKE_DIST_TIMEOUT): "
            "that rank hangs or was stopped, or the network between the two is down");
  EXPECT_EQ(peers.name(0), "rank 0 (10.231.0.1 on node-a, pid 7)");
  detail::PeerDirectory unknown(0, 2);
  EXPECT_EQ(unknown.name(1), "rank 1") << "a rank that registered nothing";
}

TEST(PeerDirectory, ExchangesFollowGloosAlgorithms) {
  using detail::Exchange;
  const auto ring = detail::ring_allreduce_exchange(0, 3);
  EXPECT_EQ(ring.receives_from, std::vector<int>{1});
  EXPECT_EQ(ring.sends_to, std::vector<int>{2});
  // Binomial tree from root 1 over 5 ranks: virtual ranks 0..4 are 1, 2, 3, 4, 0.
  EXPECT_EQ(detail::tree_broadcast_exchange(1, 5, 1).sends_to, (std::vector<int>{2, 3, 0}));
  EXPECT_TRUE(detail::tree_broadcast_exchange(1, 5, 1).receives_from.empty());
  EXPECT_EQ(detail::tree_broadcast_exchange(4, 5, 1).receives_from, std::vector<int>{2});
  EXPECT_EQ(detail::tree_broadcast_exchange(4, 5, 1).sends_to, std::vector<int>{});
  EXPECT_EQ(detail::tree_broadcast_exchange(0, 5, 1).receives_from, std::vector<int>{1});
  EXPECT_EQ(detail::tree_broadcast_exchange(2, 5, 1).sends_to, std::vector<int>{4});
  const auto barrier = detail::dissemination_barrier_exchange(0, 4);
  EXPECT_EQ(barrier.receives_from, (std::vector<int>{3, 2}));
  EXPECT_EQ(barrier.sends_to, (std::vector<int>{1, 2}));
  const auto record = detail::PeerRecord::parse(detail::PeerRecord{"10.0.0.2", "b", 9}.serialize());
  EXPECT_EQ(record.address, "10.0.0.2");
  EXPECT_EQ(record.host, "b");
  EXPECT_EQ(record.pid, 9);
  EXPECT_TRUE(detail::PeerRecord::parse("garbage").address.empty());
}

}  // namespace
}  // namespace stoke
