// Same seed, same weights, any CPU thread count: every reduction in a CPU
// training step splits its work in an order that does not depend on the
// arena's size, so fit() with 1, 2 or 3 threads ends bit for bit equal.
#include <gtest/gtest.h>

#include <cstring>

#include "stoke/threads.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke {
namespace {

class TrainThreads : public testing::TinyDataset {
 protected:
  void TearDown() override {
    set_thread_count(threads_before_);
    TinyDataset::TearDown();
  }
  std::vector<float> weights_with(int threads) {
    set_thread_count(threads);
    auto m = model();
    Trainer trainer(*m, options_);
    trainer.fit(data_, &data_, loader_);
    std::vector<float> all = m->parameters().to_vector();
    for (const auto& b : m->named_buffers()) {
      const auto v = b.tensor.to_vector();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
  void expect_thread_independent() {
    options_.epochs = 2;
    const auto one = weights_with(1);
    for (int threads : {2, 3}) {
      const auto many = weights_with(threads);
      ASSERT_EQ(one.size(), many.size());
      EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0)
          << "1 and " << threads << " threads trained different weights";
    }
  }
  int threads_before_ = thread_count();
};

TEST_F(TrainThreads, PlainCnnTrainsTheSameWeightsOnOneTwoAndThreeThreads) {
  expect_thread_independent();
}

TEST_F(TrainThreads, ResNetWithAccumulationTrainsTheSameWeightsOnAnyThreadCount) {
  spec_.architecture = nn::Architecture::kResNet;
  spec_.stem_width = 4;
  spec_.widths = {4, 8};
  spec_.strides = {1, 2};
  spec_.blocks_per_stage = 1;
  options_.batch_size = 8;
  options_.batch_multiplier = 2;
  options_.optimizer = OptimizerKind::kAdam;
  options_.schedule.base_lr = 0.01f;
  expect_thread_independent();
}

}  // namespace
}  // namespace stoke
