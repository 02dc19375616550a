// A diverging fit (issue 25, item 3): a learning rate that blows the weights
// up stops with NonFinite, its stop checkpoint holds finite weights that
// load, and no non-finite model file is ever written.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke {
namespace {

using testing::TinyDataset;
namespace fs = std::filesystem;

class TrainNonFinite : public TinyDataset {};

TEST_F(TrainNonFinite, DivergedFitStopsWithAFiniteStopCheckpoint) {
  auto m = nn::build_model(cpu_backend(), spec_, 7);
  TrainerOptions o = options_;
  o.optimizer = OptimizerKind::kSgd;
  o.schedule.base_lr = 1e30f;  // finite, and certain to overflow the weights
  o.epochs = 3;
  o.stop_checkpoint = (dir_ / "m.stop").string();
  Trainer trainer(*m, o);
  EXPECT_THROW(trainer.fit(data_, nullptr, loader_), NonFinite);
  ASSERT_TRUE(fs::exists(o.stop_checkpoint)) << "no stop checkpoint of the last finite state";
  auto loaded = nn::load_model(o.stop_checkpoint, cpu_backend());  // refuses NaN weights
  EXPECT_NE(loaded, nullptr);
}

TEST_F(TrainNonFinite, NanLearningRateIsRefused) {
  auto m = nn::build_model(cpu_backend(), spec_, 7);
  TrainerOptions o = options_;
  o.schedule.base_lr = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(Trainer(*m, o), InvalidArgument);
}

}  // namespace
}  // namespace stoke
