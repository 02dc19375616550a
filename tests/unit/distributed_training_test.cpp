// Data-parallel training with two real rank processes (Gloo over loopback)
// against one process accumulating the same batches.
#include <gtest/gtest.h>
#include <unistd.h>

#include "stoke/distributed.hpp"
#include "unit/dp_training_setup.hpp"
#include "unit/rank_group.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke {
namespace {

class DataParallelTraining : public testing::TinyDataset {
 protected:
  void SetUp() override {
    if (!distributed_available()) GTEST_SKIP() << "this build has no Gloo (libgloo-dev)";
    TinyDataset::SetUp();
  }

  // Both ranks' final parameters and their output.
  std::vector<testing::RankResult> run_ranks(const std::string& name,
                                             const std::vector<std::string>& extra = {},
                                             const std::string& scenario = "train",
                                             const std::string& log_level = "warn") {
    testing::RankGroup group(dir_ / name, 2);
    std::vector<std::string> args = {scenario, (dir_ / "images.idx").string(),
                                     (dir_ / "labels.idx").string(),
                                     (dir_ / (name + ".params")).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto results =
        group.run(STOKE_DIST_WORKER, args, std::chrono::seconds(120),
                  {"STOKE_CPU_THREADS=1", "STOKE_DIST_TIMEOUT=30", "STOKE_LOG_LEVEL=" + log_level});
    for (std::size_t r = 0; r < results.size(); ++r) {
      EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
    }
    return results;
  }

  std::vector<float> params_of(const std::string& name, int rank) {
    return testing::read_floats(dir_ / (name + ".params." + std::to_string(rank)));
  }

  // One process, the same seed and order, rank r's batch as micro batch r.
  std::vector<float> one_process_accumulating() {
    nn::ModelSpec spec;
    LoaderOptions loader;
    TrainerOptions options;
    testing::dp_training_setup(spec, loader, options);
    options.batch_multiplier = 2;
    auto model = nn::build_model(cpu_backend(), spec, 7);
    Trainer(*model, options).fit(data_, &data_, loader);
    return model->parameters().to_vector();
  }
};

TEST_F(DataParallelTraining, TwoRanksEqualOneProcessAccumulatingBothBatches) {
  const auto results = run_ranks("dp");
  const std::vector<float> rank0 = params_of("dp", 0), rank1 = params_of("dp", 1);
  ASSERT_FALSE(rank0.empty());
  EXPECT_EQ(rank0, rank1) << "the ranks hold identical weights";
  // (g0 + g1) / 2 on both sides, with two ranks the sum is exact whatever
  // the order: the weights agree bit for bit.
  EXPECT_EQ(rank0, one_process_accumulating());
  // Validation is sharded and reduced: the run's validation covers every sample.
  EXPECT_NE(results[0].output.find("val acc"), std::string::npos);
  EXPECT_NE(results[0].output.find("on 192 images"), std::string::npos) << results[0].output;
  EXPECT_NE(results[1].output.find("on 192 images"), std::string::npos) << results[1].output;
}

// Gradients averaged in buckets of 32 floats on the communication thread,
// most of them while backward still runs, give the same weights as one
// allreduce after backward and as one process: bit for bit.
TEST_F(DataParallelTraining, GradientBucketsOverlapBackwardAndChangeNoBit) {
  const auto results = run_ranks("dp-buckets", {}, "train-small-buckets", "info");
  run_ranks("dp-whole", {}, "train-no-buckets");
  const std::vector<float> buckets = params_of("dp-buckets", 0);
  ASSERT_FALSE(buckets.empty());
  EXPECT_EQ(buckets, params_of("dp-buckets", 1)) << "the ranks hold identical weights";
  EXPECT_EQ(buckets, params_of("dp-whole", 0));
  EXPECT_EQ(buckets, one_process_accumulating());
  for (const auto& rank : results) {
    const auto at = rank.output.find("buckets of 128 B on a gloo/tcp communication thread, ");
    ASSERT_NE(at, std::string::npos) << rank.output;
    const std::string tail = rank.output.substr(rank.output.rfind("gradients in ", at));
    int total = 0, early = 0;
    ASSERT_EQ(std::sscanf(tail.c_str(),
                          "gradients in %d buckets of 128 B on a gloo/tcp communication thread, "
                          "%d of them sent while backward ran",
                          &total, &early),
              2)
        << tail;
    EXPECT_GE(total, 4) << "the tiny model's gradients span several buckets";
    EXPECT_GE(early, total - 1) << "all but the first layer's bucket go while backward runs";
  }
}

// A GPU backend without NCCL (the fake GPU, its stream lagging behind the
// host): the gradients go through the host after the stream has run, the run
// says so, and it ends with the CPU ranks' weights, bit for bit.
TEST_F(DataParallelTraining, GpuRanksWithoutNcclAverageThroughTheHostAndSaySo) {
  const auto gpu = run_ranks("dp-gpu", {}, "train-fake-gpu", "info");
  run_ranks("dp-cpu");
  const std::vector<float> gpu0 = params_of("dp-gpu", 0);
  ASSERT_FALSE(gpu0.empty());
  EXPECT_EQ(gpu0, params_of("dp-gpu", 1)) << "the ranks hold identical weights";
  EXPECT_EQ(gpu0, params_of("dp-cpu", 0))
      << "the host path on a GPU backend equals the CPU ranks' run";
  for (const auto& rank : gpu) {
    EXPECT_NE(rank.output.find("data-parallel gradients through the host (gloo/tcp)"),
              std::string::npos)
        << rank.output;
  }
}

// Rank 1 is killed after its third step of a bucketed run (rank 0's
// communication thread alive and idle between steps): rank 0's fit() ends
// with a CommunicationError naming its rank within the bound, not a hang.
// (A collective failing on that thread: GradientBuckets.AFailedCollective...)
TEST_F(DataParallelTraining, ARankKilledMidRunEndsTheOtherWithinTheBound) {
  testing::RankGroup group(dir_ / "killed", 2);
  const std::vector<std::string> args = {"train-small-buckets",
                                         (dir_ / "images.idx").string(),
                                         (dir_ / "labels.idx").string(),
                                         (dir_ / "killed.params").string(),
                                         "3",
                                         "die"};
  const auto results = group.run(STOKE_DIST_WORKER, args, std::chrono::seconds(60),
                                 {"STOKE_CPU_THREADS=1", "STOKE_DIST_TIMEOUT=10"});
  EXPECT_EQ(results[1].exit_code, 9) << results[1].output;
  EXPECT_EQ(results[0].exit_code, 70) << "fit() throws a stoke::Error:\n" << results[0].output;
  EXPECT_NE(results[0].output.find("rank 0 of 2"), std::string::npos) << results[0].output;
  EXPECT_LT(results[0].seconds, 15.0) << "bounded by the timeout";
}

TEST_F(DataParallelTraining, AStopRequestOnOneRankStopsBothAndRankZeroWritesOneCheckpoint) {
  const auto results = run_ranks("stop", {"3"});
  for (const auto& r : results)
    EXPECT_NE(r.output.find("requested after 1 epochs"), std::string::npos) << r.output;
  EXPECT_EQ(params_of("stop", 0), params_of("stop", 1));
  const auto checkpoint = dir_ / "stop.params.stop.ckpt";
  ASSERT_TRUE(std::filesystem::exists(checkpoint));

  // Stopped mid-epoch by two ranks: one process cannot continue that position.
  nn::ModelSpec spec;
  LoaderOptions loader;
  TrainerOptions options;
  testing::dp_training_setup(spec, loader, options);
  options.resume = checkpoint.string();
  auto model = nn::build_model(cpu_backend(), spec, 7);
  try {
    Trainer(*model, options).fit(data_, &data_, loader);
    ADD_FAILURE() << "resumed a two-rank mid-epoch position in one process";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("resumes only with 2 rank(s), not 1"), std::string::npos)
        << e.what();
  }
}

// Rank 1 asks to stop after the ranks agreed to go on (at its first epoch's
// end, as a signal landing between two agreements does): it keeps going until
// the next agreement, both stop after the same step, no collective is left
// half joined (a rank acting alone left the other in a gradient allreduce).
TEST_F(DataParallelTraining, AStopRequestBetweenTwoAgreementsWaitsForTheNext) {
  const auto results = run_ranks("late-stop", {"0", "epoch-end"});
  for (const auto& r : results)
    EXPECT_NE(r.output.find("requested after 2 epochs"), std::string::npos) << r.output;
  EXPECT_EQ(params_of("late-stop", 0), params_of("late-stop", 1));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "late-stop.params.stop.ckpt"));
}

}  // namespace
}  // namespace stoke
