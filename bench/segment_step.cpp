// The training step of `stoke train --task segment`'s model: the U-Net on a
// ResNet-18 encoder (decoder 256/128/64/32/16, as the CLI builds it), RGB
// inputs, per-pixel cross-entropy, SGD (momentum 0.9), on the registry's
// default backend (the CPU here, the GPU where STOKE_GPU_DEVICE finds one).
// bench/segment_step.sh runs it beside bench/pytorch_segment_step.py (the same
// model in PyTorch) in interleaved rounds. Prints one JSON object.
//
//   stoke_bench_segment_step [--size 512] [--batch 4] [--classes 3]
//                            [--steps 3] [--warmup 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "stoke/nn/segmentation.hpp"
#include "stoke/stoke.hpp"

int main(int argc, char** argv) {
  int size = 512, batch = 4, classes = 3, steps = 3, warmup = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--size") {
      size = v;
    } else if (k == "--batch") {
      batch = v;
    } else if (k == "--classes") {
      classes = v;
    } else if (k == "--steps") {
      steps = v;
    } else if (k == "--warmup") {
      warmup = v;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", k.c_str());
      return 2;
    }
  }
  if (size < 32 || batch < 1 || classes < 2 || steps < 1 || warmup < 0) {
    std::fprintf(stderr, "usage: %s [--size >= 32] [--batch N] [--classes >= 2] [--steps N]\n",
                 argv[0]);
    return 2;
  }
  try {
    const auto runtime = stoke::init();
    stoke::Backend& be = stoke::default_backend();
    stoke::nn::ModelSpec spec;
    spec.architecture = stoke::nn::Architecture::kResNet18;
    spec.in_channels = 3;
    spec.height = spec.width = size;
    spec.classes = classes;
    spec.decoder_channels = {256, 128, 64, 32, 16};
    auto model = stoke::nn::build_model(be, spec, 1);
    stoke::nn::SgdOptions sgd_options;
    sgd_options.momentum = 0.9f;
    stoke::nn::Sgd sgd(*model, sgd_options);
    stoke::nn::SegmentationStep step(*model);

    const std::int64_t n = batch, pixels = n * size * size;
    std::vector<float> hx(static_cast<std::size_t>(pixels * 3));
    std::vector<std::int32_t> hy(static_cast<std::size_t>(pixels));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (float& v : hx) v = uniform(rng);
    for (std::int32_t& v : hy)
      v = static_cast<std::int32_t>(rng() % static_cast<unsigned>(classes));
    stoke::Tensor x(be, {n, 3, size, size}), labels(be, {n, size, size}, stoke::DType::kInt32);
    x.copy_from_host(hx.data());
    labels.copy_from_host(hy.data());

    // step() reads the loss back: each timed step has finished on the device.
    float loss = 0.0f;
    for (int i = 0; i < warmup; ++i) loss = step.step(x, labels, sgd, 0.01f).loss;
    std::vector<double> ms;
    for (int i = 0; i < steps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      loss = step.step(x, labels, sgd, 0.01f).loss;
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const stoke::MemoryStats mem = be.memory_stats();
    // The plan the auto batch size trusts (SGD with momentum: one slot), beside the peak.
    const stoke::nn::MemoryPlan plan = model->memory_plan(batch, 1);
    std::printf(
        "{\"impl\": \"stoke\", \"backend\": \"%s\", \"threads\": %d, \"size\": %d, \"batch\": %d, "
        "\"classes\": %d, \"steps\": %d, \"median_ms\": %.3f, \"min_ms\": %.3f, "
        "\"peak_bytes\": %llu, \"plan_bytes\": %llu, \"loss\": %.5f}\n",
        be.name().c_str(), runtime.cpu_threads, size, batch, classes, steps, ms[ms.size() / 2],
        ms.front(), static_cast<unsigned long long>(mem.peak_bytes),
        static_cast<unsigned long long>(plan.total()), static_cast<double>(loss));
    return 0;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "stoke_bench_segment_step: %s\n", e.what());
    return 1;
  }
}
