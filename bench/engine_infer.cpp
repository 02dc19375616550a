// bench_engine_infer: eval-mode inference of the ResNet-style net of
// bench/pytorch_resnet.py (stoke's default ResNet spec, 10 classes), timed as
//   plain   the layers' own eval forward (network().forward(x, false)):
//           every op a pass of its own
//   fused   Model::forward(x, false), the path users call (Predictor, eval,
//           validation): the inference plan, batch norm folded, bias +
//           residual + ReLU in the convolution's output pass, the
//           activations in oneDNN's blocked layout between convolutions
//   nchw    the same with Layout::kPlain (NCHW between layers: the path
//           before the blocked layout)
// each at 1 thread and at `threads` threads, all interleaved round by round
// (medians), so the load of a shared machine hits every column alike.
//   bench_engine_infer [--channels 3] [--size 224] [--batch 1] [--rounds 5] [--threads 2]
//   [--fused-only] [--json] [--profile] [--arch resnet|resnet18]
// --arch resnet18: torchvision's ResNet-18 (1000 classes) instead of the default net.
// --fused-only: only the fused forward at `threads` (the plain forward keeps
// every activation: ~8 GB at batch 32, 224x224).
// --json prints one line {"plain_ms":..,"fused_ms":..,"fused_1t_ms":..,"nchw_ms":..} for
// bench/engine_reference.py.
// --profile: then one more forward of each fused path at `threads`, timed step
// by step (FusedInference::step_times), printed side by side.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "nn/fused_inference.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/threads.hpp"

namespace {

struct Options {
  int channels = 3, size = 224, batch = 1, rounds = 5, threads = 2;
  bool json = false, fused_only = false, profile = false;
  bool resnet18 = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--channels")
      o.channels = next();
    else if (a == "--size")
      o.size = next();
    else if (a == "--batch")
      o.batch = next();
    else if (a == "--rounds")
      o.rounds = next();
    else if (a == "--threads")
      o.threads = next();
    else if (a == "--json")
      o.json = true;
    else if (a == "--fused-only")
      o.fused_only = true;
    else if (a == "--profile")
      o.profile = true;
    else if (a == "--arch" && i + 1 < argc &&
             (std::strcmp(argv[i + 1], "resnet") == 0 || std::strcmp(argv[i + 1], "resnet18") == 0))
      o.resnet18 = std::strcmp(argv[++i], "resnet18") == 0;
    else {
      std::fprintf(stderr, "bench_engine_infer: unknown argument '%s'\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.channels < 1 || o.size < 8 || o.batch < 1 || o.rounds < 1 || o.threads < 1) {
    std::fprintf(stderr,
                 "bench_engine_infer: channels, batch, rounds, threads >= 1 and size >= 8\n");
    std::exit(2);
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One forward of each path, step by step, at the current thread count.
void print_profile(stoke::nn::FusedInference& blocked, stoke::nn::FusedInference& nchw,
                   const stoke::Tensor& x) {
  blocked.record_step_times(true), nchw.record_step_times(true);
  blocked.forward(x), nchw.forward(x);
  const auto& b = blocked.step_times();
  const auto& n = nchw.step_times();
  double sum_b = 0, sum_n = 0;
  std::printf("# profile, one forward: step (first layer)       blocked ms   NCHW ms\n");
  for (std::size_t i = 0; i < b.size(); ++i) {
    const double nm = i < n.size() && n[i].first == b[i].first ? n[i].second : 0.0;
    std::printf("#   %-38s %9.2f %9.2f\n", b[i].first.c_str(), b[i].second, nm);
    sum_b += b[i].second, sum_n += nm;
  }
  std::printf("#   %-38s %9.2f %9.2f\n", "total", sum_b, sum_n);
  blocked.record_step_times(false), nchw.record_step_times(false);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  stoke::Backend& be = stoke::cpu_backend();
  stoke::nn::ModelSpec spec;
  spec.in_channels = o.channels;
  spec.height = spec.width = o.size;
  if (o.resnet18) {
    spec.architecture = stoke::nn::Architecture::kResNet18;
    spec.classes = 1000;
  }
  auto model = stoke::nn::build_model(be, spec, 1);
  stoke::nn::FusedInference fused(model->network());
  stoke::nn::FusedInference nchw(model->network(), stoke::nn::FusedInference::Layout::kPlain);
  std::mt19937 rng(2);
  std::normal_distribution<float> dist;
  std::vector<float> xh(static_cast<std::size_t>(stoke::shape_numel(model->input_shape(o.batch))));
  for (float& v : xh) v = dist(rng);
  stoke::Tensor x(be, model->input_shape(o.batch));
  x.copy_from_host(xh.data());
  // Taken once: the non-const accessor tells the model its weights may change.
  stoke::nn::Sequential& layers = model->network();
  std::vector<double> plain, fused_n, fused_1, nchw_n;
  for (int r = -1; r < o.rounds;
       ++r) {  // round -1 warms up (first-call allocations, primitive creation)
    stoke::set_thread_count(o.threads);
    const double p = o.fused_only ? 0.0 : time_ms([&] { layers.forward(x, false); });
    const double f = time_ms([&] { model->forward(x, false); });
    const double fp = o.fused_only ? 0.0 : time_ms([&] { nchw.forward(x); });
    stoke::set_thread_count(1);
    const double f1 = o.fused_only ? 0.0 : time_ms([&] { model->forward(x, false); });
    if (r < 0) continue;
    plain.push_back(p), fused_n.push_back(f), fused_1.push_back(f1), nchw_n.push_back(fp);
  }
  const double p = median(plain), f = median(fused_n), f1 = median(fused_1), fp = median(nchw_n);
  if (o.json) {
    std::printf(
        "{\"plain_ms\": %.3f, \"fused_ms\": %.3f, \"fused_1t_ms\": %.3f, \"nchw_ms\": %.3f}\n", p,
        f, f1, fp);
    return 0;
  }
  std::printf("# %dx%dx%d batch %d, median of %d interleaved rounds, %d threads\n", o.channels,
              o.size, o.size, o.batch, o.rounds, o.threads);
  std::printf("plain forward        %9.1f ms\n", p);
  std::printf("fused forward        %9.1f ms   (fused / plain %.2f)\n", f, f / p);
  std::printf("fused forward, 1 thr %9.1f ms   (%d threads speed-up %.2fx)\n", f1, o.threads,
              f1 / f);
  std::printf("fused, NCHW layout   %9.1f ms   (blocked / NCHW %.2f)\n", fp, f / fp);
  std::printf("# blocked layout: %s; kernels: %s\n", fused.blocked() ? "yes" : "no",
              fused.implementations().c_str());
  if (o.profile) {
    stoke::set_thread_count(o.threads);
    print_profile(fused, nchw, x);
  }
  return 0;
}
