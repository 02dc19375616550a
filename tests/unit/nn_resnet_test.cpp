// torchvision backbones: topology and parameter names, parameter counts equal
// to torchvision's, any input size, and a whole ResNet-18 (small width)
// against central differences.
#include <cmath>

#include "nn/resnet.hpp"
#include "op_test_util.hpp"
#include "stoke/nn/model.hpp"

namespace stoke::testing {
namespace {

nn::ModelSpec torch_spec(nn::Architecture arch, float width, int channels, int size, int classes) {
  nn::ModelSpec s;
  s.architecture = arch;
  s.width_multiplier = width;
  s.in_channels = channels;
  s.height = s.width = size;
  s.classes = classes;
  return s;
}

bool has_name(const std::vector<nn::NamedTensor>& v, const std::string& name, const Shape& shape) {
  for (const auto& t : v) {
    if (t.name == name) return t.tensor.shape() == shape;
  }
  return false;
}

TEST(TorchResNet, ParameterCountsEqualTorchvision) {
  // torchvision.models.resnetXX(num_classes=1000): sum(p.numel() for p in m.parameters()).
  // Counted from the network's slots, without allocating the full-size blocks.
  const std::pair<nn::Architecture, std::int64_t> expected[] = {
      {nn::Architecture::kResNet18, 11689512},
      {nn::Architecture::kResNet34, 21797672},
      {nn::Architecture::kResNet50, 25557032},
      {nn::Architecture::kWideResNet50_2, 68883240}};
  for (const auto& [arch, count] : expected) {
    auto net = nn::build_torchvision_resnet(cpu_backend(), torch_spec(arch, 1.0f, 3, 224, 1000), 1);
    std::vector<nn::ParamSlot> slots;
    net->parameters(slots);
    std::int64_t n = 0;
    for (const auto& slot : slots) n += shape_numel(slot.shape);
    EXPECT_EQ(n, count) << nn::architecture_name(arch);
    EXPECT_EQ(net->output_shape({2, 3, 224, 224}), (Shape{2, 1000}));
  }
}

TEST(TorchResNet, WideResNetDoublesTheBottleneckInnerWidth) {
  auto wrn = nn::build_model(cpu_backend(),
                             torch_spec(nn::Architecture::kWideResNet50_2, 0.25f, 3, 32, 5), 1);
  const auto p = wrn->named_parameters();
  // torchvision wide_resnet50_2: width_per_group 128, so layer1's inner width is 2 x 64.
  EXPECT_TRUE(has_name(p, "layer1.0.conv1.weight", {32, 16, 1, 1}));
  EXPECT_TRUE(has_name(p, "layer1.0.conv2.weight", {32, 32, 3, 3}));
  EXPECT_TRUE(has_name(p, "layer1.0.conv3.weight", {64, 32, 1, 1}));
  EXPECT_TRUE(has_name(p, "layer3.5.conv2.weight", {128, 128, 3, 3}));
  EXPECT_TRUE(has_name(p, "fc.weight", {5, 512}));
  EXPECT_EQ(nn::architecture_from_name("wide_resnet50_2"), nn::Architecture::kWideResNet50_2);
}

TEST(TorchResNet, TorchvisionParameterNames) {
  auto r18 =
      nn::build_model(cpu_backend(), torch_spec(nn::Architecture::kResNet18, 0.25f, 1, 32, 5), 1);
  const auto p = r18->named_parameters();
  const auto b = r18->named_buffers();
  EXPECT_TRUE(has_name(p, "conv1.weight", {16, 1, 7, 7}));
  EXPECT_TRUE(has_name(p, "bn1.weight", {16}));
  EXPECT_TRUE(has_name(p, "bn1.bias", {16}));
  EXPECT_TRUE(has_name(b, "bn1.running_mean", {16}));
  EXPECT_TRUE(has_name(b, "layer4.1.bn2.running_var", {128}));
  EXPECT_TRUE(has_name(p, "layer1.0.conv1.weight", {16, 16, 3, 3}));
  EXPECT_TRUE(has_name(p, "layer2.0.downsample.0.weight", {32, 16, 1, 1}));
  EXPECT_TRUE(has_name(p, "layer2.0.downsample.1.weight", {32}));
  EXPECT_TRUE(has_name(p, "fc.weight", {5, 128}));
  EXPECT_TRUE(has_name(p, "fc.bias", {5}));
  EXPECT_FALSE(has_name(p, "layer1.0.downsample.0.weight", {16, 16, 1, 1}));  // identity shortcut
  auto r50 =
      nn::build_model(cpu_backend(), torch_spec(nn::Architecture::kResNet50, 0.125f, 3, 32, 5), 1);
  const auto p50 = r50->named_parameters();
  EXPECT_TRUE(has_name(p50, "layer1.0.conv3.weight", {32, 8, 1, 1}));
  EXPECT_TRUE(has_name(p50, "layer1.0.downsample.0.weight", {32, 8, 1, 1}));
  EXPECT_TRUE(has_name(p50, "layer3.5.conv2.weight", {32, 32, 3, 3}));
  EXPECT_TRUE(has_name(p50, "fc.weight", {5, 256}));
}

TEST(TorchResNet, AnyInputSizeAndSpecRoundTrip) {
  for (int size : {32, 33, 57, 100}) {
    auto m = nn::build_model(cpu_backend(),
                             torch_spec(nn::Architecture::kResNet34, 0.0625f, 3, size, 4), 1);
    EXPECT_EQ(m->network().output_shape(m->input_shape(1)), (Shape{1, 4})) << size;
  }
  const nn::ModelSpec spec = torch_spec(nn::Architecture::kResNet50, 0.5f, 1, 64, 7);
  const nn::ModelSpec back = nn::ModelSpec::from_map(spec.to_map());
  EXPECT_EQ(back.architecture, nn::Architecture::kResNet50);
  EXPECT_FLOAT_EQ(back.width_multiplier, 0.5f);
  auto old = spec.to_map();
  old.erase("width_multiplier");  // files written before the backbones existed
  EXPECT_FLOAT_EQ(nn::ModelSpec::from_map(old).width_multiplier, 1.0f);
  EXPECT_THROW(nn::architecture_from_name("resnet101"), InvalidArgument);
  EXPECT_THROW(
      nn::build_model(cpu_backend(), torch_spec(nn::Architecture::kResNet18, 0.0f, 3, 32, 2), 1),
      InvalidArgument);
}

TEST(TorchResNet, ResNet18GradientsMatchFiniteDifferences) {
  Backend& be = cpu_backend();
  auto model = nn::build_model(be, torch_spec(nn::Architecture::kResNet18, 0.0625f, 3, 40, 3), 11);
  const std::int64_t n = 3;
  Tensor x = random_tensor(be, model->input_shape(n), 12);
  std::vector<std::int32_t> lv = {0, 2, 1};
  Tensor labels(be, {n}, DType::kInt32);
  labels.copy_from_host(lv.data());
  Tensor probs(be, {n, 3}), dlogits(be, {n, 3}), loss(be, {1}), correct(be, {1});
  be.softmax_cross_entropy_forward(model->forward(x, true), labels, probs, loss, correct);
  be.softmax_cross_entropy_backward(probs, labels, dlogits);
  model->backward(dlogits);
  const auto g = model->gradients().to_vector();
  auto f = [&] {
    be.softmax_cross_entropy_forward(model->forward(x, true), labels, probs, loss, correct);
    return static_cast<double>(loss.to_vector()[0]);
  };
  float* p = model->parameters().data<float>();
  int checked = 0, agreed = 0;
  double gmax = 0;
  for (std::int64_t i = 0; i < model->parameters().numel(); i += 149) {
    const double fd = central_difference(p[i], f, 1e-3f);
    const double gi = g[static_cast<std::size_t>(i)];
    gmax = std::max(gmax, std::fabs(gi));
    ++checked;
    if (std::fabs(fd - gi) <= 2e-3 + 5e-2 * std::fabs(fd)) ++agreed;
  }
  EXPECT_GT(gmax, 0.05) << "gradients this small would make the comparison vacuous";
  EXPECT_GE(agreed, checked * 9 / 10) << agreed << "/" << checked;
}

}  // namespace
}  // namespace stoke::testing
