// GPU inference (label gpu; skips with the reason without a device): a model
// trained on the GPU is written as a model file (its self-check references
// computed on the GPU), and the Predictor and evaluate(), what `stoke predict`
// and `stoke eval` run, give on the GPU (the inference plan's fused
// convolutions through cuDNN) the CPU's predictions and metrics. The CPU
// predictor's self-check checks the GPU's stored logits, the GPU's its own.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/gpu_fixture.hpp"
#include "stoke/cuda.hpp"
#include "unit/deploy_fixture.hpp"

namespace stoke::testing {
namespace {

class GpuInference : public DeployFixture {
 protected:
  void SetUp() override {
    DeployFixture::SetUp();
    const std::string why = gpu_unavailable_reason(query_system());
    if (!why.empty()) GTEST_SKIP() << why;
    CudaBackendOptions strict;
    strict.strict_fp32 = true;
    gpu_ = create_cuda_backend(0, Settings{}, strict);
  }
  // One epoch on the GPU; the best model file is the final model.
  void train_on_gpu(const LoaderOptions& loader) {
    nn::ModelSpec spec;
    spec.architecture = nn::Architecture::kResNet;
    spec.in_channels = loader.preprocess.channels;
    spec.height = spec.width = 16;
    spec.classes = 2;
    spec.stem_width = 8;
    spec.widths = {8, 16};
    spec.strides = {1, 2};
    spec.blocks_per_stage = 1;
    auto model = nn::build_model(*gpu_, spec, 11);
    TrainerOptions o;
    o.epochs = 1;
    o.batch_size = 4;
    o.log_every_steps = 0;
    o.schedule.base_lr = 0.05f;
    o.best_checkpoint = model_path();
    Config config;
    config.set("STOKE_PREFETCH_DEPTH", "2");
    o.settings = config.settings();
    Trainer trainer(*model, o);
    trainer.fit(train_, &val_, loader);
  }
  std::unique_ptr<GpuBackend> gpu_;
};

TEST_F(GpuInference, AGpuModelPredictsAndEvaluatesOnTheGpuAsOnTheCpu) {
  train_on_gpu(loader_options(3, true, 20, false));
  ASSERT_TRUE(fs::exists(model_path()));
  PredictorOptions on_cpu, on_gpu;
  on_cpu.backend = &cpu_backend();
  on_gpu.backend = gpu_.get();
  Predictor cpu_predictor(model_path(), on_cpu);  // throws when its self-check fails
  Predictor gpu_predictor(model_path(), on_gpu);
  EXPECT_TRUE(cpu_predictor.self_check().ran);
  EXPECT_TRUE(cpu_predictor.self_check().passed) << cpu_predictor.self_check().message;
  EXPECT_TRUE(gpu_predictor.self_check().passed) << gpu_predictor.self_check().message;

  std::vector<fs::path> files;
  for (std::size_t i = 0; i < val_.size(); ++i) files.emplace_back(val_.path(i));
  const auto want = cpu_predictor.predict_files(files);
  const auto got = gpu_predictor.predict_files(files);  // batched: the plan at batch > 1
  ASSERT_EQ(got.size(), want.size());
  std::size_t borderline = 0;  // files whose label rounding may flip
  for (std::size_t i = 0; i < want.size(); ++i) {
    const Prediction single = gpu_predictor.predict_file(files[i]);
    for (std::size_t k = 0; k < want[i].probabilities.size(); ++k) {
      EXPECT_NEAR(got[i].probabilities[k], want[i].probabilities[k], 1e-4) << files[i];
      EXPECT_NEAR(single.probabilities[k], want[i].probabilities[k], 1e-4) << files[i];
    }
    if (std::fabs(want[i].probabilities[0] - want[i].probabilities[1]) > 1e-3) {
      EXPECT_EQ(got[i].label, want[i].label) << files[i];
    } else {
      ++borderline;
    }
  }

  const Evaluation cpu_eval = evaluate(cpu_predictor, val_);
  const Evaluation gpu_eval = evaluate(gpu_predictor, val_);
  EXPECT_EQ(gpu_eval.samples, cpu_eval.samples);
  if (borderline == 0) {
    EXPECT_EQ(gpu_eval.confusion, cpu_eval.confusion);
  }
  EXPECT_NEAR(gpu_eval.accuracy, cpu_eval.accuracy,
              static_cast<double>(borderline) / static_cast<double>(want.size()) + 1e-12);
}

}  // namespace
}  // namespace stoke::testing
