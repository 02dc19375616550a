// Models: shapes, seeded initialization, whole-model gradients against
// central differences, the memory plan against the counting allocator, and
// a loss that falls on a tiny problem.
#include <cmath>

#include "backend/cpu/cpu_backend.hpp"
#include "op_test_util.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"

namespace stoke::testing {
namespace {

nn::ModelSpec tiny_resnet() {
  nn::ModelSpec s;
  s.in_channels = 2;
  s.height = s.width = 6;
  s.classes = 3;
  s.stem_width = 4;
  s.widths = {4, 6};
  s.strides = {1, 2};
  s.blocks_per_stage = 1;
  return s;
}

Tensor labels_for(Backend& be, std::int64_t n, int classes, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (auto& l : v) l = static_cast<std::int32_t>(rng() % static_cast<unsigned>(classes));
  Tensor t(be, {n}, DType::kInt32);
  t.copy_from_host(v.data());
  return t;
}

TEST(Model, ResNetShapesAndParameterCount) {
  nn::ModelSpec spec;  // Fashion-MNIST ResNet: 1x28x28, widths 32/64/128, 2 blocks per stage
  auto model = nn::build_model(cpu_backend(), spec, 1);
  EXPECT_EQ(model->network().output_shape(model->input_shape(5)), (Shape{5, 10}));
  // stem 288+64, stage1 4 convs 9216 each + 8 bn 64, stage2 18432+36864*3 + 1x1 2048 + bn, stage3
  // ...
  EXPECT_GT(model->parameter_count(), 600000);
  EXPECT_LT(model->parameter_count(), 800000);
  EXPECT_NE(model->summary().find("stage3.block1.conv2"), std::string::npos);
}

TEST(Model, InitializationIsSeededAndHeScaled) {
  auto a = nn::build_model(cpu_backend(), tiny_resnet(), 7);
  auto b = nn::build_model(cpu_backend(), tiny_resnet(), 7);
  auto c = nn::build_model(cpu_backend(), tiny_resnet(), 8);
  EXPECT_EQ(a->parameters().to_vector(), b->parameters().to_vector());
  EXPECT_NE(a->parameters().to_vector(), c->parameters().to_vector());
  nn::ModelSpec big;
  auto m = nn::build_model(cpu_backend(), big, 3);
  for (const auto& p : m->named_parameters()) {
    if (p.name != "stage2.block1.conv1.weight") continue;
    const auto v = p.tensor.to_vector();
    double sq = 0;
    for (float x : v) sq += static_cast<double>(x) * x;
    EXPECT_NEAR(std::sqrt(sq / static_cast<double>(v.size())), std::sqrt(2.0 / (64 * 9)), 0.005);
  }
}

// A model built to be loaded skips the draw: zero parameters, the buffers'
// defaults (running variance 1), and the same layout as a drawn one.
TEST(Model, UninitializedModelIsZerosWithDefaultBuffers) {
  auto drawn = nn::build_model(cpu_backend(), tiny_resnet(), 7);
  auto bare = nn::build_model(cpu_backend(), tiny_resnet(), 7, nn::Initialization::kNone);
  ASSERT_EQ(bare->parameter_count(), drawn->parameter_count());
  for (float x : bare->parameters().to_vector()) ASSERT_EQ(x, 0.0f);
  bool saw_var = false;
  for (const auto& b : bare->named_buffers()) {
    const float want = b.name.ends_with("running_var") ? 1.0f : 0.0f;
    saw_var |= want == 1.0f;
    for (float x : b.tensor.to_vector()) ASSERT_EQ(x, want) << b.name;
  }
  EXPECT_TRUE(saw_var);
}

TEST(Model, GradientsMatchFiniteDifferences) {
  Backend& be = cpu_backend();
  for (auto arch : {nn::Architecture::kResNet, nn::Architecture::kPlainCnn}) {
    nn::ModelSpec spec = tiny_resnet();
    spec.architecture = arch;
    spec.height = spec.width = 8;
    auto model = nn::build_model(be, spec, 11);
    const std::int64_t n = 4;
    Tensor x = random_tensor(be, model->input_shape(n), 12);
    Tensor labels = labels_for(be, n, spec.classes, 13);
    Tensor probs(be, {n, 3}), dlogits(be, {n, 3}), loss(be, {1}), correct(be, {1});
    const Tensor& logits = model->forward(x, true);
    be.softmax_cross_entropy_forward(logits, labels, probs, loss, correct);
    be.softmax_cross_entropy_backward(probs, labels, dlogits);
    model->backward(dlogits);
    Tensor grads(be, model->gradients().shape());
    be.copy(grads.raw(), model->gradients().raw(), grads.bytes(), CopyKind::kDeviceToDevice);
    auto f = [&] {
      be.softmax_cross_entropy_forward(model->forward(x, true), labels, probs, loss, correct);
      return static_cast<double>(loss.to_vector()[0]);
    };
    // Double-ish precision is out of reach for a whole float32 network; h = 1e-3
    // keeps the ReLU kinks rare and the rounding (eps * |L| / h ~ 1e-4) small.
    const auto g = grads.to_vector();
    float* p = model->parameters().data<float>();
    int checked = 0, agreed = 0;
    for (std::int64_t i = 0; i < model->parameters().numel(); i += 37) {
      const double fd = central_difference(p[i], f, 1e-3f);
      ++checked;
      if (std::fabs(fd - g[static_cast<std::size_t>(i)]) <= 2e-3 + 5e-2 * std::fabs(fd)) ++agreed;
    }
    // A perturbation that crosses a ReLU kink or a max-pool switch breaks the
    // difference quotient for that element; a wiring bug breaks most of them.
    double gmax = 0;
    for (float v : g) gmax = std::max(gmax, static_cast<double>(std::fabs(v)));
    EXPECT_GT(gmax, 0.1) << "gradients this small would make the comparison vacuous";
    EXPECT_GE(agreed, checked * 9 / 10)
        << "architecture " << static_cast<int>(arch) << ": " << agreed << "/" << checked;
  }
}

TEST(Model, MemoryPlanMatchesMeasuredPeak) {
  cpu::CpuBackend be;
  std::vector<nn::ModelSpec> specs(1);
  specs[0].height = specs[0].width = 16;
  // The torchvision backbones at a small width and input.
  for (auto arch :
       {nn::Architecture::kResNet18, nn::Architecture::kResNet34, nn::Architecture::kResNet50}) {
    nn::ModelSpec t;
    t.architecture = arch;
    t.width_multiplier = 0.0625f;
    t.in_channels = 3;
    t.height = t.width = 32;
    specs.push_back(t);
  }
  // Each run's tensors are gone before the peak is reset, so a smaller model
  // after a larger one measures its own peak.
  const auto run = [&](const nn::ModelSpec& spec, std::int64_t batch) {
    auto model = nn::build_model(be, spec, 1);
    nn::Sgd sgd(*model);
    nn::TrainStep step(*model, sgd);
    Tensor x = random_tensor(be, model->input_shape(batch), 2);
    Tensor labels = labels_for(be, batch, spec.classes, 3);
    const std::size_t inputs = x.bytes() + labels.bytes();
    step.run(x, labels, 0.01f);
    step.run(x, labels, 0.01f);
    const std::size_t measured = be.memory_stats().peak_bytes - inputs;
    const nn::MemoryPlan plan = model->memory_plan(batch, sgd.slots());
    EXPECT_EQ(measured, plan.total())
        << nn::architecture_name(spec.architecture) << " batch " << batch << ": params "
        << plan.parameters << " grads " << plan.gradients << " opt " << plan.optimizer_state
        << " act " << plan.activations << " ws " << plan.workspace;
  };
  for (const nn::ModelSpec& spec : specs) {
    for (std::int64_t batch : {2, 8}) {
      run(spec, batch);
      be.release_workspace();
      be.reset_peak();
    }
  }
}

// Releasing the activations frees exactly the layers' share of the plan, and
// the next step allocates them again and computes the same thing.
TEST(Model, ReleasedActivationsComeBackAndChangeNothing) {
  cpu::CpuBackend be;
  const std::int64_t batch = 4;
  auto a = nn::build_model(be, tiny_resnet(), 3), b = nn::build_model(be, tiny_resnet(), 3);
  nn::Sgd sa(*a), sb(*b);
  nn::TrainStep ta(*a, sa), tb(*b, sb);
  Tensor x = random_tensor(be, a->input_shape(batch), 4);
  Tensor labels = labels_for(be, batch, 3, 5);
  ta.run(x, labels, 0.05f);
  tb.run(x, labels, 0.05f);
  const std::size_t before = be.memory_stats().in_use_bytes;
  b->release_activations();
  const std::size_t layers = a->network().activation_bytes(a->input_shape(batch));
  EXPECT_EQ(before - be.memory_stats().in_use_bytes, layers);
  ta.run(x, labels, 0.05f);
  tb.run(x, labels, 0.05f);
  EXPECT_EQ(a->parameters().to_vector(), b->parameters().to_vector());
  EXPECT_EQ(be.memory_stats().in_use_bytes, before);
}

TEST(Model, LossFallsOnATinyProblem) {
  Backend& be = cpu_backend();
  for (bool adam : {false, true}) {
    auto model = nn::build_model(be, tiny_resnet(), 5);
    const std::int64_t n = 16;
    Tensor x = random_tensor(be, model->input_shape(n), 6);
    Tensor labels = labels_for(be, n, 3, 7);
    std::unique_ptr<nn::Optimizer> opt;
    if (adam) {
      opt = std::make_unique<nn::Adam>(
          *model, nn::AdamOptions{0.9f, 0.999f, 1e-8f, 0.01f, true, std::nullopt});
    } else {
      opt = std::make_unique<nn::Sgd>(*model);
    }
    nn::TrainStep step(*model, *opt);
    step.run(x, labels, adam ? 0.01f : 0.05f);
    const float first = step.stats().loss;
    for (int i = 0; i < 30; ++i) step.run(x, labels, adam ? 0.01f : 0.05f);
    const nn::StepStats last = step.stats();
    EXPECT_LT(last.loss, first * 0.5f) << (adam ? "adamw" : "sgd");
    EXPECT_GT(last.accuracy, 0.9f) << (adam ? "adamw" : "sgd");
  }
}

TEST(Schedule, WarmupStepAndCosine) {
  nn::LrSchedule s;
  s.base_lr = 0.1f;
  s.warmup_steps = 10;
  EXPECT_FLOAT_EQ(s.lr(0), 0.01f);
  EXPECT_FLOAT_EQ(s.lr(9), 0.1f);
  EXPECT_FLOAT_EQ(s.lr(500), 0.1f);
  s.kind = nn::ScheduleKind::kStep;
  s.step_size = 100;
  EXPECT_FLOAT_EQ(s.lr(109), 0.1f);
  EXPECT_FLOAT_EQ(s.lr(110), 0.01f);
  s.kind = nn::ScheduleKind::kCosine;
  s.total_steps = 110;
  s.min_lr = 0.001f;
  EXPECT_FLOAT_EQ(s.lr(10), 0.1f);
  EXPECT_NEAR(s.lr(60), 0.0505f, 1e-6);
  EXPECT_FLOAT_EQ(s.lr(110), 0.001f);
  EXPECT_FLOAT_EQ(s.lr(1000), 0.001f);
}

}  // namespace
}  // namespace stoke::testing

namespace stoke::testing {
namespace {

// ModelSpec records the activation: written and read back, "relu" for files
// written before the field existed, anything else refused naming it.
TEST(ModelSpecActivation, RecordedReadBackAndCheckedByName) {
  nn::ModelSpec spec;
  auto map = spec.to_map();
  EXPECT_EQ(map.at("activation"), "relu");
  EXPECT_EQ(nn::ModelSpec::from_map(map).activation, "relu");
  map.erase("activation");
  EXPECT_EQ(nn::ModelSpec::from_map(map).activation, "relu");
  map["activation"] = "gelu";
  try {
    nn::ModelSpec::from_map(map);
    FAIL() << "gelu accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'gelu'"), std::string::npos) << e.what();
  }
  spec.activation = "tanh";
  EXPECT_THROW(nn::build_model(cpu_backend(), spec, 1), InvalidArgument);
}

}  // namespace
}  // namespace stoke::testing
