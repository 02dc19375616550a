// Class-weighted cross-entropy in nn::TrainStep: the gradient with respect to
// the logits is w[y_i] (softmax_i - onehot(y_i)) / N, the gradient of
// L = sum_i w[y_i] l_i / N, checked against that formula computed here in
// double, and end to end: the parameter gradients backward() writes match
// central differences of L computed from the model's own forward pass.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/optim.hpp"

namespace stoke {
namespace {

class WeightedLoss : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.architecture = nn::Architecture::kPlainCnn;
    spec_.in_channels = 1;
    spec_.height = spec_.width = 6;
    spec_.classes = 3;
    spec_.widths = {4};
    model_ = nn::build_model(cpu_backend(), spec_, 3);
    std::vector<float> pixels(static_cast<std::size_t>(kN * 36));
    for (std::size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = std::sin(0.7f * static_cast<float>(i)) * 2.0f;
    x_ = Tensor(cpu_backend(), model_->input_shape(kN));
    x_.copy_from_host(pixels.data());
    labels_ = Tensor(cpu_backend(), {kN}, DType::kInt32);
    labels_.copy_from_host(kLabels);
  }
  // L = sum_i w[y_i] l_i / N of the model's training forward, in double.
  double weighted_loss(std::vector<double>* dlogits = nullptr) {
    const std::vector<float> z = model_->forward(x_, true).to_vector();
    double total = 0;
    if (dlogits) dlogits->assign(z.size(), 0.0);
    for (int i = 0; i < kN; ++i) {
      double mx = -1e30, sum = 0;
      for (int j = 0; j < 3; ++j) mx = std::max(mx, static_cast<double>(z[i * 3 + j]));
      for (int j = 0; j < 3; ++j) sum += std::exp(z[i * 3 + j] - mx);
      const double w = kWeights[kLabels[i]];
      total += w * (std::log(sum) - (z[i * 3 + kLabels[i]] - mx));
      if (!dlogits) continue;
      for (int j = 0; j < 3; ++j)
        (*dlogits)[i * 3 + j] =
            w * (std::exp(z[i * 3 + j] - mx) / sum - (j == kLabels[i] ? 1.0 : 0.0)) / kN;
    }
    return total / kN;
  }

  static constexpr int kN = 5;
  static constexpr std::int32_t kLabels[kN] = {2, 0, 1, 1, 0};
  static constexpr float kWeights[3] = {0.5f, 4.0f, 1.25f};
  nn::ModelSpec spec_;
  std::unique_ptr<nn::Model> model_;
  Tensor x_, labels_;
};

TEST_F(WeightedLoss, LogitGradientIsTheFormula) {
  std::vector<double> want;
  weighted_loss(&want);
  nn::Sgd sgd(*model_);
  nn::TrainStep step(*model_, sgd);
  step.set_class_weights({kWeights[0], kWeights[1], kWeights[2]});
  step.forward(x_, labels_);
  const std::vector<float> got = step.dlogits().to_vector();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6) << "dlogits[" << i << "]";
}

TEST_F(WeightedLoss, ParameterGradientsMatchCentralDifferencesOfTheWeightedLoss) {
  nn::Sgd sgd(*model_);
  nn::TrainStep step(*model_, sgd);
  step.set_class_weights({kWeights[0], kWeights[1], kWeights[2]});
  step.forward(x_, labels_);
  step.backward();
  const std::vector<float> grads = model_->gradients().to_vector();
  std::vector<float> params = model_->parameters().to_vector();
  const float h = 1e-3f;  // small enough not to cross a ReLU or max-pool switch
  int checked = 0;
  for (std::size_t i = 0; i < params.size(); i += 7) {
    const float keep = params[i];
    params[i] = keep + h;
    model_->parameters().copy_from_host(params.data());
    const double up = weighted_loss();
    params[i] = keep - h;
    model_->parameters().copy_from_host(params.data());
    const double down = weighted_loss();
    params[i] = keep;
    model_->parameters().copy_from_host(params.data());
    const double fd = (up - down) / (2.0 * h);
    EXPECT_NEAR(grads[i], fd, 5e-3 + 1e-2 * std::fabs(fd)) << "parameter " << i;
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST_F(WeightedLoss, OnesEqualUnweightedAndAWrongCountIsRefused) {
  nn::Sgd sgd(*model_);
  nn::TrainStep plain(*model_, sgd), ones(*model_, sgd);
  ones.set_class_weights({1.0f, 1.0f, 1.0f});
  plain.forward(x_, labels_);
  const std::vector<float> a = plain.dlogits().to_vector();
  ones.forward(x_, labels_);
  const std::vector<float> b = ones.dlogits().to_vector();
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-7f) << i;  // one-hot within an ulp of 1
  EXPECT_THROW(ones.set_class_weights({1.0f, 2.0f}), InvalidArgument);
}

}  // namespace
}  // namespace stoke
