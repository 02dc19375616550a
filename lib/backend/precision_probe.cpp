// STOKE_PRECISION=auto's measurement: "native" bf16 kernels are not always the
// faster ones (oneDNN 2.6's on an Intel Xeon with AVX512-BF16 but no AMX take
// 1.6-2.7x fp32's time, on an AMD Zen 4 about half: bench/RESULTS.md), so
// auto times a few convolutions in both precisions on the backend and picks
// the low precision only where it clearly wins. Measured once per process and
// backend name, then remembered.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/log.hpp"
#include "stoke/program.hpp"

namespace stoke {
namespace {

using Clock = std::chrono::steady_clock;

// Three 3x3 convolutions of a ResNet's middle (64 -> 64, 64 -> 128 stride 2,
// 128 -> 128 with ReLU) on one 40x40 image: about 0.3 GFLOP, a few ms in fp32.
std::vector<InferenceStep> probe_steps(Backend& backend) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-0.05f, 0.05f);
  const auto random_tensor = [&](Shape shape) {
    Tensor t(backend, std::move(shape));
    std::vector<float> host(static_cast<std::size_t>(t.numel()));
    for (float& v : host) v = value(rng);
    t.copy_from_host(host.data());
    return t;
  };
  std::vector<InferenceStep> steps;
  const std::int64_t channels[][3] = {{64, 64, 1}, {64, 128, 2}, {128, 128, 1}};
  for (const auto& [in, out, stride] : channels) {
    InferenceStep step;
    step.kind = InferenceStep::Kind::kConv;
    step.name = "probe";
    FusedConv conv;
    conv.w = random_tensor({out, in, 3, 3});
    conv.bias = random_tensor({out});
    conv.params.stride_h = conv.params.stride_w = static_cast<int>(stride);
    conv.params.pad_h = conv.params.pad_w = 1;
    conv.activation = Activation::kRelu;
    step.chain.push_back(std::move(conv));
    steps.push_back(std::move(step));
  }
  return steps;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median time of `low` over fp32's, the two interleaved in rounds.
double measure(Backend& backend, Precision low) {
  const std::vector<InferenceStep> steps = probe_steps(backend);
  auto fp32 = backend.compile_inference(steps, ProgramLayout::kBackend, Precision::kFp32);
  auto reduced = backend.compile_inference(steps, ProgramLayout::kBackend, low);
  Tensor x(backend, {1, 64, 40, 40});
  std::vector<float> host(static_cast<std::size_t>(x.numel()), 0.5f);
  x.copy_from_host(host.data());
  const auto time = [&](InferenceProgram& program) {
    const auto start = Clock::now();
    program.forward(x);
    backend.synchronize();
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  time(*fp32);  // first calls: primitive creation, weight reorders
  time(*reduced);
  std::vector<double> a, b;
  for (int round = 0; round < 7; ++round) {
    a.push_back(time(*fp32));
    b.push_back(time(*reduced));
  }
  return median(b) / median(a);
}

}  // namespace

double measured_time_ratio(Backend& backend, Precision precision) {
  // Held while measuring, on purpose: two measures at once (two backends,
  // or two threads resolving `auto`) would time each other's load.
  static std::mutex mutex;
  static std::map<std::pair<std::string, Precision>, double> measured;
  std::lock_guard lock(mutex);
  const auto key = std::make_pair(backend.name(), precision);
  if (auto it = measured.find(key); it != measured.end()) return it->second;
  const double ratio = measure(backend, precision);
  measured.emplace(key, ratio);
  char text[160];
  std::snprintf(text, sizeof text,
                "STOKE_PRECISION=auto: %s convolutions take %.2fx fp32's time on %s here (%s "
                "where at most %.2fx)",
                to_string(precision), ratio, backend.name().c_str(), to_string(precision),
                kAutoTimeRatio);
  log_info(text);
  return ratio;
}

bool gated_precision_pays(Backend& backend, Precision gated) {
  if (gated == Precision::kFp32 || gated == Precision::kAuto) return false;
  if (backend.inference_precision(gated) != PrecisionSupport::kNative) return false;
  return gated != Precision::kBf16 || measured_time_ratio(backend, gated) <= kAutoTimeRatio;
}

}  // namespace stoke
