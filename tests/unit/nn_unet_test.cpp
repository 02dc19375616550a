// The U-Net segmentation model (ModelSpec::decoder_channels, lib/nn/unet.cpp)
// and SegmentationStep: shapes, names, learning a synthetic mask with SGD,
// the errors for bad shapes, and a checkpoint round trip. Its forward and
// gradients against PyTorch: tests/segment_model/ (Segment.UnetMatchesPyTorch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "nn/fused_inference.hpp"
#include "op_test_util.hpp"
#include "stoke/interchange.hpp"
#include "stoke/nn.hpp"
#include "unit/fake_gpu_backend.hpp"

namespace stoke::testing {
namespace {

nn::ModelSpec unet_spec(int side = 64) {
  nn::ModelSpec s;
  s.architecture = nn::Architecture::kResNet18;
  s.width_multiplier = 0.125f;  // 8, 8, 16, 32, 64 encoder channels
  s.in_channels = 1;
  s.height = s.width = side;
  s.classes = 2;
  s.decoder_channels = {32, 16, 16, 8, 8};
  return s;
}

// A dark image with a bright square [lo, hi) x [lo, hi), the mask 1 on the square.
void square_pair(Backend& be, int side, int lo, int hi, Tensor& x, Tensor& labels) {
  std::vector<float> img(static_cast<std::size_t>(side * side), -1.0f);
  std::vector<std::int32_t> mask(img.size(), 0);
  for (int y = lo; y < hi; ++y) {
    for (int c = lo; c < hi; ++c) {
      img[static_cast<std::size_t>(y * side + c)] = 1.0f;
      mask[static_cast<std::size_t>(y * side + c)] = 1;
    }
  }
  x = Tensor(be, {1, 1, side, side});
  x.copy_from_host(img.data());
  labels = Tensor(be, {1, side, side}, DType::kInt32);
  labels.copy_from_host(mask.data());
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

TEST(NnUnet, LogitsAtInputSizeWithSmpNames) {
  Backend& be = cpu_backend();
  auto model = nn::build_model(be, unet_spec(), 1);
  Tensor x = random_tensor(be, model->input_shape(2), 5);
  EXPECT_EQ(model->forward(x, true).shape(), (Shape{2, 2, 64, 64}));
  EXPECT_EQ(model->forward(x, false).shape(), (Shape{2, 2, 64, 64}));
  std::vector<std::string> names;
  for (const auto& p : model->named_parameters()) names.push_back(p.name);
  for (const char* want :
       {"encoder.conv1.weight", "encoder.layer4.1.bn2.bias", "encoder.layer2.0.downsample.0.weight",
        "decoder.blocks.0.conv1.0.weight", "decoder.blocks.4.conv2.1.weight",
        "segmentation_head.0.weight", "segmentation_head.0.bias"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  // Block 0 takes layer4 (64) upsampled + layer3 (32); block 4 has no skip.
  const auto* unet = nn::layer_as<nn::Unet>(*model->network().layers().front());
  ASSERT_NE(unet, nullptr);
  EXPECT_EQ(unet->decoder_blocks().size(), 5u);
  EXPECT_EQ(nn::layer_as<nn::Conv2d>(*unet->decoder_blocks()[0]->layers()[0])->in_channels(), 96);
  EXPECT_EQ(nn::layer_as<nn::Conv2d>(*unet->decoder_blocks()[4]->layers()[0])->in_channels(), 8);
  EXPECT_EQ(unet->head().out_channels(), 2);
  EXPECT_GT(model->memory_plan(2, 1).activations, 0u);
}

// The other encoders: ResNet-34's blocks, ResNet-50's bottleneck channels
// (x4: 8, 32, 64, 128, 256 at width 0.125) in the skips.
TEST(NnUnet, OtherEncodersFeedTheirChannelsToTheDecoder) {
  Backend& be = cpu_backend();
  for (const auto& [arch, block0_in, block3_in] :
       {std::tuple{nn::Architecture::kResNet34, 64 + 32, 16 + 8},
        std::tuple{nn::Architecture::kResNet50, 256 + 128, 16 + 8}}) {
    auto spec = unet_spec();
    spec.architecture = arch;
    auto model = nn::build_model(be, spec, 2);
    Tensor x = random_tensor(be, model->input_shape(1), 3);
    EXPECT_EQ(model->forward(x, true).shape(), (Shape{1, 2, 64, 64}));
    const auto* unet = nn::layer_as<nn::Unet>(*model->network().layers().front());
    ASSERT_NE(unet, nullptr);
    const auto in = [&](std::size_t i) {
      return nn::layer_as<nn::Conv2d>(*unet->decoder_blocks()[i]->layers()[0])->in_channels();
    };
    EXPECT_EQ(in(0), block0_in) << nn::architecture_name(arch);
    EXPECT_EQ(in(3), block3_in) << nn::architecture_name(arch);  // 16 from block 2 + the stem's 8
  }
}

TEST(NnUnet, SgdLearnsASquareMask) {
  Backend& be = cpu_backend();
  auto model = nn::build_model(be, unet_spec(), 7);
  nn::Sgd sgd(*model, nn::SgdOptions{0.9f, 0.0f});
  nn::SegmentationStep step(*model, nn::SegmentationLossOptions{{}, 0.5f, 1.0f});
  Tensor x, labels;
  square_pair(be, 64, 20, 44, x, labels);  // 576 of 4096 pixels are class 1
  const nn::SegmentationStats first = step.step(x, labels, sgd, 0.05f);
  nn::SegmentationStats last = first;
  for (int i = 0; i < 40; ++i) last = step.step(x, labels, sgd, 0.05f);
  const nn::SegmentationStats now = step.forward_backward(x, labels);  // after the last update
  // Measured: loss 1.04 -> 0.0034, pixel accuracy 0.57 -> 0.9998 (eval mode 0.999).
  EXPECT_LT(now.loss, 0.05f * first.loss) << "first " << first.loss << ", last " << last.loss;
  // All background would score 0.86: the square has to be found.
  EXPECT_GE(now.pixel_accuracy, 0.99f) << "first " << first.pixel_accuracy;
  // Eval mode: batch norm's running statistics have followed the training.
  EXPECT_GE(step.evaluate(x, labels).pixel_accuracy, 0.98f);
  EXPECT_GT(now.dice, 0.0f);
  EXPECT_LT(now.dice, first.dice);
}

// Logits, loss and gradients of one step of the same model and batch on `be`.
struct StepResult {
  std::vector<float> logits, gradients;
  float loss = 0.0f;
};
StepResult one_step(Backend& be) {
  auto model = nn::build_model(be, unet_spec(), 9);
  nn::SegmentationStep step(*model, nn::SegmentationLossOptions{{0.5f, 2.0f}, 0.5f, 0.0f, 255});
  Tensor x = random_tensor(be, model->input_shape(2), 4);
  std::vector<std::int32_t> mask(2 * 64 * 64);
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 11 == 0 ? 255 : (i / 7) % 2;
  Tensor labels(be, {2, 64, 64}, DType::kInt32);
  labels.copy_from_host(mask.data());
  StepResult r;
  r.loss = step.forward_backward(x, labels).loss;
  r.logits = step.logits().to_vector();
  r.gradients = model->gradients().to_vector();
  return r;
}

float max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  float err = 0.0f, scale = 0.0f;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

// The model only calls the backend's front door: the im2col + GEMM
// convolutions of a build without oneDNN and the fake GPU (ops issued on a
// stream) give the CPU backend's step, up to summation order.
TEST(NnUnet, RunsOnTheOtherBackends) {
  const StepResult want = one_step(cpu_backend());
  auto gemm = std::make_shared<cpu::CpuBackend>(0);
  gemm->use_gemm_convolutions(true);
  FakeGpuBackend fake_gpu;
  for (Backend* be : {static_cast<Backend*>(gemm.get()), static_cast<Backend*>(&fake_gpu)}) {
    const StepResult got = one_step(*be);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    ASSERT_EQ(got.gradients.size(), want.gradients.size());
    // fp32 summation order (as Segment.UnetMatchesPyTorch, whose worst is 1.7e-5).
    EXPECT_LT(max_relative_error(got.logits, want.logits), 1e-4f) << be->name();
    EXPECT_LT(max_relative_error(got.gradients, want.gradients), 1e-4f) << be->name();
    EXPECT_NEAR(got.loss, want.loss, 1e-5f * want.loss) << be->name();
  }
}

// The eval forward (Model::forward(x, false)) runs the U-Net as fused
// programs: the same logits as the layers' own eval forward (Unet::forward),
// every convolution of the encoder, decoder and head in the plan, and a
// training step's new weights and statistics folded in at the next eval
// forward; on the CPU's blocked layouts, on NCHW and on the fake GPU.
TEST(NnUnet, FusedEvalForwardEqualsTheLayersAndRefoldsAfterAStep) {
  FakeGpuBackend fake_gpu;
  for (Backend* be : {&cpu_backend(), static_cast<Backend*>(&fake_gpu)}) {
    auto model = nn::build_model(*be, unet_spec(), 12);
    auto* unet = nn::layer_as<nn::Unet>(*model->network().layers().front());
    ASSERT_NE(unet, nullptr);
    Tensor x = random_tensor(*be, model->input_shape(2), 6);
    Tensor labels;
    Tensor one;
    square_pair(*be, 64, 10, 30, one, labels);
    nn::Sgd sgd(*model, nn::SgdOptions{0.9f, 0.0f});
    nn::SegmentationStep step(*model, nn::SegmentationLossOptions{{}, 0.5f, 1.0f});
    step.step(one, labels, sgd, 0.05f);  // running statistics away from 0 and 1
    for (int round = 0; round < 2; ++round) {
      const std::vector<float> layers = unet->forward(x, false).to_vector();
      const std::vector<float> fused = model->forward(x, false).to_vector();
      ASSERT_EQ(fused.size(), layers.size());
      EXPECT_LT(max_relative_error(fused, layers), 1e-4f) << be->name() << " round " << round;
      for (auto layout : {nn::FusedInference::Layout::kAuto, nn::FusedInference::Layout::kPlain}) {
        nn::FusedInference plan(model->network(), layout);
        // 20 in the ResNet-18 encoder (3 downsampling shortcuts), 10 in the
        // decoder, the head.
        EXPECT_EQ(plan.fused_convolutions(), 31) << be->name();
        EXPECT_LT(max_relative_error(plan.forward(x).to_vector(), layers), 1e-4f) << be->name();
      }
      step.step(one, labels, sgd, 0.05f);  // the next round sees new weights
    }
  }
}

TEST(NnUnet, BadShapesAreNamed) {
  Backend& be = cpu_backend();
  auto spec = unet_spec();
  spec.classes = 1;
  EXPECT_NE(error_of([&] { nn::build_model(be, spec, 1); }).find("classes >= 2"),
            std::string::npos);
  spec = unet_spec(48);
  EXPECT_NE(error_of([&] { nn::build_model(be, spec, 1); }).find("multiples of 32"),
            std::string::npos);
  spec = unet_spec();
  spec.decoder_channels = {16, 8, 8, 8};
  EXPECT_NE(error_of([&] { nn::build_model(be, spec, 1); }).find("decoder_channels"),
            std::string::npos);
  spec = unet_spec();
  spec.architecture = nn::Architecture::kPlainCnn;
  EXPECT_NE(error_of([&] { nn::build_model(be, spec, 1); }).find("torchvision encoder"),
            std::string::npos);

  auto model = nn::build_model(be, unet_spec(), 1);
  nn::SegmentationStep step(*model);
  Tensor x = random_tensor(be, model->input_shape(1), 2);
  Tensor small(be, {1, 32, 64}, DType::kInt32);
  const std::vector<std::int32_t> zeros(32 * 64, 0);
  small.copy_from_host(zeros.data());
  const std::string mask = error_of([&] { step.forward_backward(x, small); });
  EXPECT_NE(mask.find("mask"), std::string::npos) << mask;
  EXPECT_NE(mask.find("(1, 32, 64)"), std::string::npos) << mask;
  EXPECT_NE(error_of([&] {
              nn::SegmentationStep{*model, nn::SegmentationLossOptions{{1.0f, 2.0f, 3.0f}}};
            }).find("3 class weights for 2 classes"),
            std::string::npos);
  auto classifier = nn::build_model(be, nn::ModelSpec{}, 1);
  EXPECT_NE(error_of([&] { nn::SegmentationStep{*classifier}; }).find("classifier"),
            std::string::npos);
}

TEST(NnUnet, CheckpointRebuildsTheModel) {
  Backend& be = cpu_backend();
  auto model = nn::build_model(be, unet_spec(), 3);
  nn::Sgd sgd(*model);
  nn::SegmentationStep step(*model);
  Tensor x, labels;
  square_pair(be, 64, 8, 30, x, labels);
  for (int i = 0; i < 2; ++i) step.step(x, labels, sgd, 0.01f);  // running statistics move
  const auto want = model->forward(x, false).to_vector();
  const auto path =
      std::filesystem::temp_directory_path() /
      ("stoke_unet_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".ckpt");
  nn::save_checkpoint(path.string(), *model, &sgd);
  nn::CheckpointInfo info;
  auto loaded = nn::load_model(path.string(), be, &info);
  std::filesystem::remove(path);
  EXPECT_EQ(info.spec.decoder_channels, unet_spec().decoder_channels);
  EXPECT_EQ(loaded->forward(x, false).to_vector(), want);
  // Classifiers' specs do not gain the key.
  EXPECT_EQ(nn::ModelSpec{}.to_map().count("decoder_channels"), 0u);
}

// smp's state_dict names: a U-Net's safetensors file (what
// safetensors.torch.save_file(smp_unet.state_dict()) writes) loads by name,
// into a 1-channel model through the summed RGB stem, and with another class
// count when the segmentation head keeps its own weights.
TEST(NnUnet, SafetensorsLoadWithAnotherHeadAndAGrayStem) {
  Backend& be = cpu_backend();
  auto rgb = unet_spec();
  rgb.in_channels = 3;
  rgb.classes = 4;
  auto source = nn::build_model(be, rgb, 5);
  const auto path =
      std::filesystem::temp_directory_path() /
      ("stoke_unet_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       ".safetensors");
  interchange::save_safetensors(*source, path.string());
  auto gray = nn::build_model(be, unet_spec(), 6);  // 1 channel, 2 classes
  interchange::ImportOptions options;
  options.load_classifier = false;
  const interchange::ImportReport report =
      interchange::load_safetensors(*gray, path.string(), options);
  std::filesystem::remove(path);
  EXPECT_TRUE(report.stem_summed);
  EXPECT_EQ(report.kept,
            (std::vector<std::string>{"segmentation_head.0.weight", "segmentation_head.0.bias"}));
  const auto named = [](const nn::Model& m, const std::string& name) {
    for (const auto& t : m.named_parameters())
      if (t.name == name) return t.tensor.to_vector();
    return std::vector<float>{};
  };
  const std::string block = "decoder.blocks.2.conv1.0.weight";
  EXPECT_EQ(named(*gray, block), named(*source, block));
  EXPECT_FALSE(named(*gray, block).empty());
}

}  // namespace
}  // namespace stoke::testing
