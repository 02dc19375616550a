// Fine-tuning at the model and optimizer level: frozen stages get no
// gradient, no update (not even weight decay) and keep their batch-norm
// statistics; per-stage learning-rate multipliers scale exactly their
// stage's update. Weight decay on conv and linear weights only (issue 29,
// item 6): the 1-D parameters (biases, batch-norm scales and shifts) in groups
// of their own that SGD and Adam(W) leave undecayed when asked, by default for
// AdamW, whose default decay is PyTorch's 0.01.
#include <cmath>
#include <map>

#include "op_test_util.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"
#include "tiny_dataset.hpp"

namespace stoke::testing {
namespace {

nn::ModelSpec r18() {
  nn::ModelSpec s;
  s.architecture = nn::Architecture::kResNet18;
  s.width_multiplier = 0.0625f;
  s.in_channels = 3;
  s.height = s.width = 32;
  s.classes = 3;
  return s;
}

Tensor labels(Backend& be, std::int64_t n) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i % 3);
  Tensor t(be, {n}, DType::kInt32);
  t.copy_from_host(v.data());
  return t;
}

bool in_stage(const std::string& name, int stages) {
  if (name.starts_with("conv1") || name.starts_with("bn1")) return stages >= 1;
  for (int s = 1; s <= stages; ++s) {
    if (name.starts_with("layer" + std::to_string(s) + ".")) return true;
  }
  return false;
}

TEST(FineTune, FrozenStagesKeepWeightsAndStatistics) {
  Backend& be = cpu_backend();
  auto model = nn::build_model(be, r18(), 1);
  model->freeze_stages(2);
  EXPECT_EQ(model->frozen_layers(), 6);  // conv1, bn1, relu, maxpool, layer1, layer2
  nn::Sgd sgd(*model,
              {0.9f, 1e-2f, false});  // weight decay would move frozen weights if they were updated
  nn::TrainStep step(*model, sgd);
  std::map<std::string, std::vector<float>> before;
  for (const auto& t : model->named_parameters()) before[t.name] = t.tensor.to_vector();
  for (const auto& t : model->named_buffers()) before[t.name] = t.tensor.to_vector();
  Tensor x = random_tensor(be, model->input_shape(4), 2);
  Tensor y = labels(be, 4);
  for (int i = 0; i < 3; ++i) step.run(x, y, 0.1f);
  int frozen = 0, moved = 0;
  auto check = [&](const nn::NamedTensor& t) {
    const bool is_frozen = in_stage(t.name, 2);
    if (is_frozen) {
      ++frozen;
      EXPECT_EQ(t.tensor.to_vector(), before[t.name]) << t.name << " is frozen";
    } else if (t.tensor.to_vector() != before[t.name]) {
      ++moved;
    }
  };
  for (const auto& t : model->named_parameters()) check(t);
  for (const auto& t : model->named_buffers()) check(t);
  EXPECT_GT(frozen, 20);
  EXPECT_GT(moved, 40);
  // Frozen layers get no gradient.
  const auto groups = model->parameter_groups();
  ASSERT_EQ(groups.size(), 1u);
  const auto g = model->gradients().to_vector();
  for (std::int64_t i = 0; i < groups[0].offset; ++i)
    ASSERT_EQ(g[static_cast<std::size_t>(i)], 0.0f) << i;
  EXPECT_THROW(model->freeze_stages(5), InvalidArgument);
}

TEST(FineTune, StageMultipliersScaleTheirStagesUpdate) {
  Backend& be = cpu_backend();
  auto a = nn::build_model(be, r18(), 1), b = nn::build_model(be, r18(), 1);
  b->set_stage_lr_multipliers({0.5f, 1.0f, 1.0f, 0.0f});
  nn::Sgd sa(*a, {0.0f, 1e-3f, false}), sb(*b, {0.0f, 1e-3f, false});
  Tensor x = random_tensor(be, a->input_shape(4), 2);
  Tensor y = labels(be, 4);
  const auto w0 = a->parameters().to_vector();
  nn::TrainStep(*a, sa).run(x, y, 0.1f);
  nn::TrainStep(*b, sb).run(x, y, 0.1f);
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  std::size_t offset = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const auto va = pa[i].tensor.to_vector(), vb = pb[i].tensor.to_vector();
    const float m = in_stage(pa[i].name, 1)             ? 0.5f
                    : pa[i].name.starts_with("layer4.") ? 0.0f
                                                        : 1.0f;
    // The update of b is m times the update of a: b - w0 = m (a - w0).
    const auto w0i =
        std::vector<float>(w0.begin() + static_cast<std::ptrdiff_t>(offset),
                           w0.begin() + static_cast<std::ptrdiff_t>(offset + va.size()));
    for (std::size_t j = 0; j < va.size(); ++j) {
      ASSERT_NEAR(vb[j] - w0i[j], m * (va[j] - w0i[j]), 1e-6f + 1e-4f * std::fabs(va[j] - w0i[j]))
          << pa[i].name;
    }
    offset += (va.size() + 15) / 16 * 16;  // views are 64-byte aligned in the flat block
  }
  EXPECT_THROW(b->set_stage_lr_multipliers({1, 1, 1, 1, 1}), InvalidArgument);
}

// Every parameter 1, every gradient 0, then one step: what remains is the decay.
std::map<std::string, std::vector<float>> after_one_decay_step(nn::Model& model,
                                                               nn::Optimizer& optimizer) {
  model.backend().fill(model.parameters(), 1.0f);
  model.backend().fill(model.gradients(), 0.0f);
  optimizer.step(model, 0.1f);
  std::map<std::string, std::vector<float>> out;
  for (const auto& t : model.named_parameters()) out[t.name] = t.tensor.to_vector();
  return out;
}

bool one_dimensional(const nn::Model& model, const std::string& name) {
  for (const auto& t : model.named_parameters())
    if (t.name == name) return t.tensor.shape().size() <= 1;
  return false;
}

TEST(WeightDecay, AdamWDefaultsToPyTorchsDecayOnWeightsOnly) {
  nn::AdamOptions adam;
  EXPECT_FLOAT_EQ(adam.resolved_weight_decay(), 0.0f);
  EXPECT_FALSE(adam.resolved_exclusion());
  adam.decoupled_weight_decay = true;
  EXPECT_FLOAT_EQ(adam.resolved_weight_decay(), 0.01f);
  EXPECT_TRUE(adam.resolved_exclusion());

  Backend& be = cpu_backend();
  auto model = nn::build_model(be, r18(), 1);
  nn::Adam adamw(*model, adam);
  int decayed = 0, kept = 0;
  for (const auto& [name, values] : after_one_decay_step(*model, adamw)) {
    const bool flat = one_dimensional(*model, name);
    for (float v : values) {
      if (flat) {
        ASSERT_EQ(v, 1.0f) << name << " is a bias or a batch-norm parameter: not decayed";
      } else {
        ASSERT_NEAR(v, 1.0f - 0.1f * 0.01f, 1e-7f) << name << " is decayed by lr * 0.01";
      }
    }
    ++(flat ? kept : decayed);
  }
  EXPECT_GT(decayed, 15);
  EXPECT_GT(kept, 30);
}

TEST(WeightDecay, ExclusionOffDecaysEverythingAndSgdExcludesOnRequest) {
  Backend& be = cpu_backend();
  auto model = nn::build_model(be, r18(), 1);
  nn::AdamOptions all;
  all.decoupled_weight_decay = true;
  all.exclude_norm_and_bias_from_decay = false;
  nn::Adam adamw(*model, all);
  for (const auto& [name, values] : after_one_decay_step(*model, adamw)) {
    for (float v : values) ASSERT_NEAR(v, 1.0f - 0.1f * 0.01f, 1e-7f) << name;
  }

  nn::SgdOptions sgd{0.0f, 0.01f, false, true};
  nn::Sgd weights_only(*model, sgd);
  for (const auto& [name, values] : after_one_decay_step(*model, weights_only)) {
    const float expected = one_dimensional(*model, name) ? 1.0f : 1.0f - 0.1f * 0.01f;
    for (float v : values) ASSERT_NEAR(v, expected, 1e-7f) << name;
  }
}

TEST(WeightDecay, SplitGroupsCoverTheSameRangesWithFrozenStagesAndMultipliers) {
  Backend& be = cpu_backend();
  auto model = nn::build_model(be, r18(), 1);
  model->freeze_stages(1);
  model->set_stage_lr_multipliers({1.0f, 0.5f});
  const auto plain = model->parameter_groups(false), split = model->parameter_groups(true);
  ASSERT_GT(split.size(), plain.size());
  std::vector<float> lr_plain(static_cast<std::size_t>(model->parameters().numel()), -1.f);
  std::vector<float> lr_split = lr_plain;
  for (const auto& g : plain) {
    for (std::int64_t i = g.offset; i < g.offset + g.count; ++i)
      lr_plain[static_cast<std::size_t>(i)] = g.lr_multiplier;
  }
  for (std::size_t k = 0; k < split.size(); ++k) {
    const auto& g = split[k];
    if (k > 0) {
      EXPECT_LE(split[k - 1].offset + split[k - 1].count, g.offset);
    }
    for (std::int64_t i = g.offset; i < g.offset + g.count; ++i)
      lr_split[static_cast<std::size_t>(i)] = g.lr_multiplier;
  }
  EXPECT_EQ(lr_split, lr_plain);  // the same elements, each with its multiplier
  for (const auto& g : plain) EXPECT_TRUE(g.decay);
}

}  // namespace
}  // namespace stoke::testing

namespace stoke::testing {
namespace {

// TrainerOptions::freeze_stages reaches the model before the optimizer: the
// frozen stage's weights and statistics come out of fit() as they went in.
TEST_F(TinyDataset, TrainerFreezesStagesFromOptions) {
  spec_.widths = {6, 8};
  auto m = model();
  options_.epochs = 1;
  options_.freeze_stages = 1;
  options_.stage_lr_multipliers = {0.0f, 0.5f};
  std::map<std::string, std::vector<float>> before;
  for (const auto& t : m->named_parameters()) before[t.name] = t.tensor.to_vector();
  for (const auto& t : m->named_buffers()) before[t.name] = t.tensor.to_vector();
  Trainer trainer(*m, options_);
  trainer.fit(data_, nullptr, loader_);
  EXPECT_EQ(m->frozen_layers(), 4);
  for (const auto& t : m->named_parameters()) {
    if (t.name.starts_with("conv1")) {
      EXPECT_EQ(t.tensor.to_vector(), before[t.name]) << t.name;
    } else {
      EXPECT_NE(t.tensor.to_vector(), before[t.name]) << t.name;
    }
  }
  for (const auto& t : m->named_buffers()) {
    if (t.name.starts_with("conv1")) {
      EXPECT_EQ(t.tensor.to_vector(), before[t.name]) << t.name;
    }
  }
}

}  // namespace
}  // namespace stoke::testing
