#include <gtest/gtest.h>

#include "stoke/error.hpp"
#include "stoke/threads.hpp"
#include "stoke/tune.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke {
namespace {

using testing::TinyDataset;

TEST_F(TinyDataset, AutotuneTriesBatchesThreadsCacheAndDepthAndRestoresTheModel) {
  auto m = model();
  const auto before = m->parameters().to_vector();
  const int saved_threads = thread_count();
  TuneOptions tune;
  tune.steps_per_trial = 3;
  tune.max_batch = 32;
  tune.thread_candidates = {1, 2};
  int reported = 0;
  tune.on_trial = [&](const TrialResult&) { ++reported; };
  const auto result = autotune(*m, data_, loader_, options_, tune);

  EXPECT_EQ(m->parameters().to_vector(), before) << "trials must not change the model";
  EXPECT_EQ(reported, static_cast<int>(result.trials.size()));
  // Batches 4, 8, 16, 32, the other thread count, cache A/B, one deeper prefetch.
  ASSERT_GE(result.trials.size(), 6u);
  EXPECT_EQ(result.trials[0].settings.batch_size, 4);
  EXPECT_EQ(result.trials[3].settings.batch_size, 32);
  EXPECT_GT(result.best_images_per_second, 0);
  double fastest = 0;
  for (const auto& t : result.trials) fastest = std::max(fastest, t.images_per_second);
  EXPECT_EQ(result.best_images_per_second, fastest);
  // The pick travels in the result's context; the library arena is untouched.
  EXPECT_EQ(thread_count(), saved_threads) << "autotune() changes no process state";
  EXPECT_EQ(result.context.cpu_threads(), result.best.cpu_threads);
  EXPECT_EQ(result.context.settings().prefetch_depth, result.best.prefetch_depth);
  EXPECT_EQ(result.not_tried.size(), 3u);  // GPU knobs on the CPU backend
  EXPECT_NE(result.table().find("best: batch"), std::string::npos);
  EXPECT_FALSE(result.gpu);
  for (const auto& t : result.trials) EXPECT_EQ(t.settings.label.find("graphs"), std::string::npos);
  EXPECT_EQ(result.config_text().find("STOKE_GPU_GRAPH"), std::string::npos)
      << "no graph trial ran here";
  set_thread_count(saved_threads);
}

TEST_F(TinyDataset, AutotuneConfigFileLoadsIntoConfig) {
  auto m = model();
  TuneOptions tune;
  tune.steps_per_trial = 2;
  tune.max_batch = 16;
  tune.thread_candidates = {1};
  const int saved_threads = thread_count();
  const auto result = autotune(*m, data_, loader_, options_, tune);
  result.write_config(dir_ / "tuned.conf");
  ConfigLoadOptions load;
  load.file = dir_ / "tuned.conf";
  load.environment = std::vector<std::pair<std::string, std::string>>{};
  const auto config = Config::load(load);
  EXPECT_EQ(*config.settings().cpu_threads, result.best.cpu_threads);
  EXPECT_EQ(config.settings().prefetch_depth, result.best.prefetch_depth);
  EXPECT_EQ(config.settings().cache.kind == CacheSpec::Kind::kRam, result.best.cache);
  EXPECT_EQ(config.knob("STOKE_CPU_THREADS").source, ConfigSource::kFile);
  set_thread_count(saved_threads);
}

TEST_F(TinyDataset, AFailingTrialIsRecordedNotFatal) {
  auto m = model();
  TuneOptions tune;
  tune.steps_per_trial = 2;
  tune.max_batch = 8;
  tune.thread_candidates = {0};  // set_thread_count(0) throws inside the trial
  const int saved_threads = thread_count();
  const auto result = autotune(*m, data_, loader_, options_, tune);
  const auto failed = std::count_if(result.trials.begin(), result.trials.end(),
                                    [](const TrialResult& t) { return t.failed; });
  EXPECT_EQ(failed, 1);
  EXPECT_GT(result.best_images_per_second, 0);
  EXPECT_NE(result.table().find("failed"), std::string::npos);
  set_thread_count(saved_threads);
}

}  // namespace
}  // namespace stoke
