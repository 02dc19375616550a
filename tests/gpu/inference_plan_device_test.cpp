// The inference engine on a GPU: Model::forward in eval mode runs the plan
// (the default program through the front doors: conv2d_fused_forward as
// cuDNN's fused convolution-bias-activation) and equals the CPU's plan within
// the convolution's tolerance; after a training step both refold. Runs only
// where a CUDA device is (label gpu, the device check).
#include "gpu/cuda_parity.hpp"
#include "stoke/nn/optim.hpp"

namespace stoke::testing {
namespace {

constexpr Tolerance kPlan{2e-4, "folded batch norm and TF32-free cuDNN vs oneDNN: rounding"};

nn::ModelSpec plan_resnet() {
  nn::ModelSpec spec;
  spec.in_channels = 3;
  spec.height = spec.width = 24;
  spec.classes = 6;
  spec.stem_width = 8;
  spec.widths = {8, 16, 32};
  spec.strides = {1, 2, 2};
  return spec;
}

TEST_F(CudaParity, InferencePlanMatchesTheCpuAndRefoldsAfterAStep) {
  gpu().set_strict_fp32(true);
  const nn::ModelSpec spec = plan_resnet();
  auto cpu_model = nn::build_model(cpu(), spec, 5);
  auto gpu_model = nn::build_model(gpu(), spec, 5);
  copy_model(*cpu_model, *gpu_model);
  expect_same_eval_forward(*cpu_model, *gpu_model, {1, 5}, 40, kPlan, "eval forward");
  nn::Sgd cpu_opt(*cpu_model), gpu_opt(*gpu_model);
  nn::TrainStep cpu_step(*cpu_model, cpu_opt), gpu_step(*gpu_model, gpu_opt);
  const Tensor x = random(cpu_model->input_shape(4), 50), lab = labels(4, spec.classes, 51);
  cpu_step.run(x, lab, 0.05f);
  gpu_step.run(to_gpu(x), to_gpu(lab), 0.05f);
  const Tensor& want = cpu_model->forward(x, false);
  const Tensor got = copy_to(cpu(), gpu_model->forward(to_gpu(x), false));
  EXPECT_TRUE(close(got, want, kPlan, "eval forward after a step"));
}

// A U-Net's eval forward runs nested programs (one per encoder stage and
// decoder block) with the upsampling, concatenation and head between them on
// the GPU's stream: the CPU's logits within the same tolerance.
TEST_F(CudaParity, UnetInferencePlanMatchesTheCpu) {
  gpu().set_strict_fp32(true);
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kResNet18;
  spec.width_multiplier = 0.125f;
  spec.in_channels = 3;
  spec.height = spec.width = 64;
  spec.classes = 3;
  spec.decoder_channels = {32, 16, 16, 8, 8};
  auto cpu_model = nn::build_model(cpu(), spec, 7);
  auto gpu_model = nn::build_model(gpu(), spec, 7);
  copy_model(*cpu_model, *gpu_model);
  expect_same_eval_forward(*cpu_model, *gpu_model, {1, 3}, 60, kPlan, "U-Net eval forward");
}

}  // namespace
}  // namespace stoke::testing
