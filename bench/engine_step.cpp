// BM_train_step/cpu/f32/<C>x<H>x<W>/b<N>: forward + softmax cross-entropy +
// backward + SGD update of the ResNet-style net (stem 32, widths 32/64/128,
// two basic blocks per stage, GAP, linear to 10 classes).
// BM_train_step/cpu/f32/resnet18/<C>x<H>x<W>/b<N>: the same step on
// torchvision's ResNet-18 (1000 classes).
// BM_train_step/cpu/bf16/...: the same steps in mixed precision
// (Backend::set_training_precision bf16: convolutions on bf16 inputs, fp32
// accumulation, fp32 weights and optimizer); skipped with the reason where
// the CPU has no native bf16.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/config.hpp"
#include "stoke/nn.hpp"
#include "stoke/system.hpp"
#include "stoke/threads.hpp"

namespace {

// Sizes the arena from STOKE_CPU_THREADS (CPU backend: all physical cores by default).
void apply_thread_knob() {
  static const bool applied = [] {
    stoke::set_thread_count(
        stoke::resolve_cpu_threads(stoke::Config::load().settings(), stoke::query_cpu(), false));
    return true;
  }();
  (void)applied;
}

void train_step(benchmark::State& state, int channels, int size, int batch, bool resnet18 = false,
                stoke::Precision precision = stoke::Precision::kFp32) {
  apply_thread_knob();
  stoke::Backend& be = stoke::cpu_backend();
  if (be.training_precision_support(precision) != stoke::PrecisionSupport::kNative) {
    state.SkipWithError("no native bf16 training convolutions on this CPU");
    return;
  }
  const stoke::TrainingPrecisionScope scope(be, precision);
  stoke::nn::ModelSpec spec;
  if (resnet18) {
    spec.architecture = stoke::nn::Architecture::kResNet18;
    spec.classes = 1000;
  }
  spec.in_channels = channels;
  spec.height = spec.width = size;
  auto model = stoke::nn::build_model(be, spec, 1);
  stoke::nn::Sgd sgd(*model, {0.9f, 5e-4f, false});
  stoke::nn::TrainStep step(*model, sgd);
  std::mt19937 rng(2);
  std::normal_distribution<float> dist;
  std::vector<float> xh(static_cast<std::size_t>(batch) * channels * size * size);
  for (float& v : xh) v = dist(rng);
  std::vector<std::int32_t> yh(static_cast<std::size_t>(batch));
  for (auto& l : yh) l = static_cast<std::int32_t>(rng() % 10);
  stoke::Tensor x(be, model->input_shape(batch)), y(be, {batch}, stoke::DType::kInt32);
  x.copy_from_host(xh.data());
  y.copy_from_host(yh.data());
  step.run(x, y, 0.01f);  // allocate outputs and workspace outside the timing
  for (auto _ : state) {
    step.run(x, y, 0.01f);
    be.synchronize();
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["threads"] = stoke::thread_count();
  state.counters["plan_MiB"] =
      static_cast<double>(model->memory_plan(batch, sgd.slots()).total()) / 1048576.0;
}

BENCHMARK_CAPTURE(train_step, 1x28x28_b64, 1, 28, 64)
    ->Name("BM_train_step/cpu/f32/1x28x28/b64")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(5.0);
BENCHMARK_CAPTURE(train_step, 3x128x128_b16, 3, 128, 16)
    ->Name("BM_train_step/cpu/f32/3x128x128/b16")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(5.0);
BENCHMARK_CAPTURE(train_step, 3x224x224_b8, 3, 224, 8)
    ->Name("BM_train_step/cpu/f32/3x224x224/b8")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(5.0);
BENCHMARK_CAPTURE(train_step, resnet18_3x224x224_b8, 3, 224, 8, true)
    ->Name("BM_train_step/cpu/f32/resnet18/3x224x224/b8")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(5.0);
BENCHMARK_CAPTURE(train_step, bf16_3x224x224_b8, 3, 224, 8, false, stoke::Precision::kBf16)
    ->Name("BM_train_step/cpu/bf16/3x224x224/b8")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(5.0);
BENCHMARK_CAPTURE(train_step, bf16_resnet18_3x224x224_b8, 3, 224, 8, true, stoke::Precision::kBf16)
    ->Name("BM_train_step/cpu/bf16/resnet18/3x224x224/b8")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(5.0);

}  // namespace
