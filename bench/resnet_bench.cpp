// bench_resnet ONNX_OUT [--threads N] [--batch B] [--steps S] [--size S] [--arch resnet18]
// Times stoke's torchvision ResNet (1000 classes, RGB) on the CPU: the median
// inference forward at batch 1 and at batch B, and the median SGD train step
// at batch B; writes the model as ONNX to ONNX_OUT for the ONNX Runtime
// comparison (bench/interchange_bench.py). Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "stoke/stoke.hpp"

namespace {

using namespace stoke;

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_resnet ONNX_OUT [--threads N] [--batch B] [--steps S] [--size S] "
                 "[--arch A]\n");
    return 2;
  }
  int threads = 2, batch = 8, steps = 3, size = 224;
  std::string arch = "resnet18";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = std::stoi(argv[i + 1]);
    if (k == "--batch") batch = std::stoi(argv[i + 1]);
    if (k == "--steps") steps = std::stoi(argv[i + 1]);
    if (k == "--size") size = std::stoi(argv[i + 1]);
    if (k == "--arch") arch = argv[i + 1];
  }
  try {
    set_thread_count(threads);
    Backend& be = cpu_backend();
    nn::ModelSpec spec;
    spec.architecture = nn::architecture_from_name(arch);
    spec.in_channels = 3;
    spec.height = spec.width = size;
    spec.classes = 1000;
    auto model = nn::build_model(be, spec, 1);
    interchange::export_onnx(*model, argv[1]);
    std::vector<float> host(static_cast<std::size_t>(shape_numel(model->input_shape(batch))));
    for (std::size_t i = 0; i < host.size(); ++i)
      host[i] = static_cast<float>(i % 255) / 255.0f - 0.5f;
    Tensor x1(be, model->input_shape(1)), xb(be, model->input_shape(batch));
    x1.copy_from_host(host.data());
    xb.copy_from_host(host.data());
    std::vector<std::int32_t> lv(static_cast<std::size_t>(batch));
    for (int i = 0; i < batch; ++i) lv[static_cast<std::size_t>(i)] = i % 1000;
    Tensor labels(be, {batch}, DType::kInt32);
    labels.copy_from_host(lv.data());
    model->forward(x1, false);  // warm-up (allocations, workspace)
    const double infer1 = median_ms(steps + 2, [&] { model->forward(x1, false).to_vector(); });
    model->forward(xb, false);
    const double inferb = median_ms(steps, [&] { model->forward(xb, false).to_vector(); });
    nn::Sgd sgd(*model);
    nn::TrainStep step(*model, sgd);
    step.run(xb, labels, 0.01f);
    step.stats();
    const double train = median_ms(steps, [&] {
      step.run(xb, labels, 0.01f);
      step.stats();
    });
    std::printf(
        "{\"arch\": \"%s\", \"threads\": %d, \"size\": %d, \"batch\": %d, \"infer_b1_ms\": %.2f, "
        "\"infer_batch_ms\": %.2f, \"train_step_ms\": %.2f}\n",
        arch.c_str(), threads, size, batch, infer1, inferb, train);
    return 0;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "bench_resnet: %s\n", e.what());
    return 1;
  }
}
