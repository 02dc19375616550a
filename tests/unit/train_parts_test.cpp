// The trainer's parts: the step runners call the gradient hook between
// backward and update (where a data-parallel allreduce goes), once per
// optimizer step; nn::TrainStep in parts equals the whole step; nn::evaluate
// of a padded batch's first rows.
#include <gtest/gtest.h>

#include <cstring>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/optim.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke {
namespace {

using testing::TinyDataset;

TEST_F(TinyDataset, GradientHookRunsBeforeEachUpdateAndItsChangesApply) {
  options_.batch_size = 8;
  options_.batch_multiplier = 3;
  options_.sgd.weight_decay = 0.0f;
  auto m = model();
  const std::vector<float> initial = m->parameters().to_vector();
  std::uint64_t hooks = 0, steps = 0;
  Callbacks cb;
  cb.on_gradients = [&](Tensor& grads) {
    ++hooks;
    EXPECT_EQ(grads.raw(), m->gradients().raw());
    m->backend().fill(grads, 0.0f);  // an "allreduce" that cancels every update
  };
  cb.on_step = [&](const StepInfo&) { ++steps; };
  Trainer trainer(*m, options_, cb);
  const auto result = trainer.fit(data_, nullptr, loader_);
  EXPECT_EQ(hooks, result.log.epochs[0].steps);
  EXPECT_EQ(hooks, steps);
  EXPECT_EQ(hooks, static_cast<std::uint64_t>(kCount / 8 / 3));
  const std::vector<float> after = m->parameters().to_vector();
  EXPECT_EQ(std::memcmp(after.data(), initial.data(), after.size() * sizeof(float)), 0)
      << "the update did not apply the hook's gradients";
}

TEST_F(TinyDataset, TrainStepInPartsEqualsTheWholeStep) {
  auto whole = model();
  auto parts = model();
  nn::Sgd opt_whole(*whole), opt_parts(*parts);
  nn::TrainStep a(*whole, opt_whole), b(*parts, opt_parts);
  Tensor x(cpu_backend(), whole->input_shape(4)), y(cpu_backend(), {4}, DType::kInt32);
  std::vector<float> pixels(static_cast<std::size_t>(x.numel()));
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<float>(i % 13) / 13.0f - 0.5f;
  const std::int32_t labels[4] = {0, 1, 1, 0};
  x.copy_from_host(pixels.data());
  y.copy_from_host(labels);
  for (int step = 0; step < 3; ++step) {
    a.run(x, y, 0.05f);
    b.prepare(0.05f);
    b.forward(x, y);
    b.backward();
    b.update();
  }
  EXPECT_EQ(a.stats().loss, b.stats().loss);
  EXPECT_EQ(whole->parameters().to_vector(), parts->parameters().to_vector());
}

// A short batch evaluated in the first rows of a larger one (what validation
// does while graphs replay) gives the short batch's own loss and accuracy,
// whatever the other rows hold; rows outside the batch are refused.
TEST_F(TinyDataset, EvaluatingTheFirstRowsEqualsEvaluatingTheShortBatch) {
  auto m = model();
  Tensor x(cpu_backend(), m->input_shape(8)), y(cpu_backend(), {8}, DType::kInt32);
  std::vector<float> pixels(static_cast<std::size_t>(x.numel()));
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<float>(i % 11) / 11.0f - 0.5f;
  const std::int32_t labels[8] = {0, 1, 1, 0, 1, 1, 1, 1};
  x.copy_from_host(pixels.data());
  y.copy_from_host(labels);
  Tensor short_x(cpu_backend(), m->input_shape(3)), short_y(cpu_backend(), {3}, DType::kInt32);
  short_x.copy_from_host(pixels.data());
  short_y.copy_from_host(labels);
  const nn::StepStats alone = nn::evaluate(*m, short_x, short_y);
  const nn::StepStats padded = nn::evaluate(*m, x, y, 3);
  EXPECT_NEAR(padded.loss, alone.loss, 1e-6f);
  EXPECT_EQ(padded.accuracy, alone.accuracy);
  EXPECT_NE(nn::evaluate(*m, x, y).loss, alone.loss) << "the other rows must differ to test this";
  EXPECT_THROW(nn::evaluate(*m, x, y, 9), InvalidArgument);
  EXPECT_THROW(nn::evaluate(*m, x, y, -1), InvalidArgument);
}

}  // namespace
}  // namespace stoke
