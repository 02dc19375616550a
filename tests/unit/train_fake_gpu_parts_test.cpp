// The trainer's new parts on the GPU path without a GPU (FakeGpuBackend):
// class-weighted steps replay from recorded graphs exactly like eager steps
// and like the CPU trainer; the gradient hook is captured with the step.
#include <gtest/gtest.h>

#include "stoke/cuda.hpp"
#include "stoke/train.hpp"
#include "unit/fake_gpu_backend.hpp"
#include "unit/trainer_runs.hpp"

namespace stoke::testing {
namespace {

using FakeGpuTrainerParts = TrainerRuns;

TEST_F(FakeGpuTrainerParts, ClassWeightedStepsReplayLikeEagerAndTheCpu) {
  options_.epochs = 2;
  options_.class_weights = {0.5f, 3.0f};
  const Run cpu = fit(cpu_backend(), Toggle::kOff);
  FakeGpuBackend eager_gpu, graph_gpu;
  const Run eager = fit(eager_gpu, Toggle::kOff);
  const Run graphed = fit(graph_gpu, Toggle::kOn);
  EXPECT_EQ(graphed.result.graph_steps, 2 * kSteps - 2) << graphed.result.graph_note;
  EXPECT_EQ(graphed.parameters, eager.parameters);
  EXPECT_EQ(eager.parameters, cpu.parameters);
  options_.class_weights.clear();
  const Run plain = fit(cpu_backend(), Toggle::kOff);
  EXPECT_NE(plain.parameters, cpu.parameters) << "the weights changed nothing";
}

}  // namespace
}  // namespace stoke::testing
