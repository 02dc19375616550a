// One inference engine on every path: Model::forward in eval mode runs the
// inference plan (and refolds after the weights change), the Predictor gives
// the plan's logits, and threads calling one Predictor at once get what one
// thread gets, in parallel workers.
#include <thread>

#include "deploy_fixture.hpp"
#include "nn/fused_inference.hpp"
#include "stoke/nn/optim.hpp"
#include "unit/op_test_util.hpp"

namespace stoke::testing {
namespace {

nn::ModelSpec small_resnet() {
  nn::ModelSpec spec;
  spec.in_channels = 3;
  spec.height = spec.width = 20;
  spec.classes = 5;
  spec.stem_width = 8;
  spec.widths = {8, 16};
  spec.strides = {1, 2};
  return spec;
}

// Eval forward = the plan's output (the same bits: it is the plan), and
// within float rounding of the layers run one by one; after an SGD step the
// next eval forward follows the new weights and statistics.
TEST(Engine, ModelEvalForwardRunsThePlanAndRefoldsAfterAStep) {
  auto model = nn::build_model(cpu_backend(), small_resnet(), 3);
  Tensor x = random_tensor(cpu_backend(), model->input_shape(4), 9);
  const std::vector<float> layers = model->network().forward(x, false).to_vector();
  const std::vector<float> planned = model->forward(x, false).to_vector();
  nn::FusedInference plan(model->network());
  EXPECT_EQ(planned, plan.forward(x).to_vector());
  // Folding batch norm reorders the arithmetic: a few roundings per layer.
  const Tolerance folded{1e-4, "batch norm folded into the convolutions"};
  EXPECT_TRUE(close(planned, layers, folded, "eval forward vs the layers"));

  nn::Sgd sgd(*model);
  Tensor labels(cpu_backend(), {4}, DType::kInt32);
  const std::int32_t l[4] = {0, 1, 2, 3};
  labels.copy_from_host(l);
  Tensor probs(cpu_backend(), {4, 5}), loss(cpu_backend(), {1}), correct(cpu_backend(), {1}),
      dlogits(cpu_backend(), {4, 5});
  const Tensor& logits = model->forward(x, true);
  cpu_backend().softmax_cross_entropy_forward(logits, labels, probs, loss, correct);
  cpu_backend().softmax_cross_entropy_backward(probs, labels, dlogits);
  model->backward(dlogits);
  sgd.step(*model, 0.5f);
  const std::vector<float> after = model->forward(x, false).to_vector();
  EXPECT_NE(after, planned) << "the plan did not refold after the step";
  EXPECT_TRUE(close(after, model->network().forward(x, false).to_vector(), folded,
                    "eval forward after a step vs the layers"));
}

// Four threads on one Predictor (forward and predict_file) give one
// thread's results bit for bit.
TEST_F(DeployFixture, FourThreadsOnOnePredictorGiveOneThreadsResults) {
  train(loader_options(3, false, 16, false));
  Predictor predictor(model_path());
  EXPECT_TRUE(predictor.self_check().passed) << predictor.self_check().message;
  std::vector<fs::path> files;
  for (std::size_t i = 0; i < val_.size(); ++i) files.emplace_back(val_.path(i));
  std::vector<Prediction> single;
  for (const auto& f : files) single.push_back(predictor.predict_file(f));
  std::vector<std::vector<Prediction>> per_thread(4);
  std::vector<std::thread> threads;
  for (auto& out : per_thread) {
    threads.emplace_back([&] {
      for (int round = 0; round < 3; ++round) {
        for (const auto& f : files) out.push_back(predictor.predict_file(f));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& out : per_thread) {
    ASSERT_EQ(out.size(), 3 * single.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(out[i].probabilities, single[i % single.size()].probabilities)
          << files[i % single.size()];
    }
  }
}

}  // namespace
}  // namespace stoke::testing
