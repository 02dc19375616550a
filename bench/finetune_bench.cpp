// bench_finetune DIR [--threads N] [--pre-epochs E] [--epochs E] [--width M]
// Fine-tuning from imported weights against training from scratch. DIR holds
// float32 (N, 1, 32, 32) images and int32 labels written by
// bench/finetune_bench.py: pre_{x,y}.bin (task A), ft_{x,y}.bin and
// test_{x,y}.bin (task B, other classes). A ResNet-18 (width M) is trained on
// task A, saved as safetensors and ONNX, and imported with a new head for
// task B; each start trains the same steps on task B. One JSON line per
// epoch: {"start": ..., "epoch": ..., "test_accuracy": ...}.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "stoke/stoke.hpp"

namespace {

using namespace stoke;

template <class T>
std::vector<T> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw IoError("cannot open " + path);
  std::vector<T> v(static_cast<std::size_t>(f.tellg()) / sizeof(T));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  return v;
}

struct TaskData {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  std::int64_t n() const { return static_cast<std::int64_t>(y.size()); }
};

TaskData load(const std::string& dir, const std::string& name) {
  return {read_all<float>(dir + "/" + name + "_x.bin"),
          read_all<std::int32_t>(dir + "/" + name + "_y.bin")};
}

constexpr std::int64_t kPixels = 32 * 32, kBatch = 32;

void train_epoch(nn::Model& m, nn::Optimizer& opt, const TaskData& s, float lr, std::mt19937& rng) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(s.n()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  nn::TrainStep step(m, opt);
  Tensor x(m.backend(), m.input_shape(kBatch)), y(m.backend(), {kBatch}, DType::kInt32);
  std::vector<float> hx(static_cast<std::size_t>(kBatch * kPixels));
  std::vector<std::int32_t> hy(static_cast<std::size_t>(kBatch));
  for (std::int64_t b = 0; b + kBatch <= s.n(); b += kBatch) {
    for (std::int64_t i = 0; i < kBatch; ++i) {
      const std::int64_t k = order[static_cast<std::size_t>(b + i)];
      std::copy_n(s.x.begin() + k * kPixels, kPixels, hx.begin() + i * kPixels);
      hy[static_cast<std::size_t>(i)] = s.y[static_cast<std::size_t>(k)];
    }
    x.copy_from_host(hx.data());
    y.copy_from_host(hy.data());
    step.run(x, y, lr);
  }
}

double accuracy(nn::Model& m, const TaskData& s) {
  double correct = 0;
  std::int64_t seen = 0;
  for (std::int64_t b = 0; b + kBatch <= s.n(); b += kBatch) {
    Tensor x(m.backend(), m.input_shape(kBatch)), y(m.backend(), {kBatch}, DType::kInt32);
    x.copy_from_host(s.x.data() + b * kPixels);
    y.copy_from_host(s.y.data() + b);
    correct += nn::evaluate(m, x, y).accuracy * kBatch;
    seen += kBatch;
  }
  return seen ? correct / static_cast<double>(seen) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string dir = argv[1];
  int threads = 2, pre_epochs = 2, epochs = 4;
  float width = 0.25f;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = std::stoi(argv[i + 1]);
    if (k == "--pre-epochs") pre_epochs = std::stoi(argv[i + 1]);
    if (k == "--epochs") epochs = std::stoi(argv[i + 1]);
    if (k == "--width") width = std::stof(argv[i + 1]);
  }
  try {
    set_thread_count(threads);
    Backend& be = cpu_backend();
    const TaskData pre = load(dir, "pre"), ft = load(dir, "ft"), test = load(dir, "test");
    nn::ModelSpec spec;
    spec.architecture = nn::Architecture::kResNet18;
    spec.width_multiplier = width;
    spec.in_channels = 1;
    spec.height = spec.width = 32;
    spec.classes = 5;
    auto a = nn::build_model(be, spec, 1);
    nn::Sgd sa(*a, {0.9f, 5e-4f, false});
    std::mt19937 rng(1);
    for (int e = 0; e < pre_epochs; ++e) train_epoch(*a, sa, pre, 0.05f, rng);
    std::printf("{\"pretrained_task_a_epochs\": %d}\n", pre_epochs);
    interchange::save_safetensors(*a, dir + "/pre.safetensors");
    interchange::OnnxExportOptions folded;
    folded.fold_batch_norm = true;  // as exporters ship it
    interchange::export_onnx(*a, dir + "/pre.onnx", folded);
    for (const std::string start :
         {"scratch", "safetensors", "onnx_folded", "safetensors_frozen2"}) {
      auto m = nn::build_model(be, spec, 7);
      interchange::ImportOptions o;
      o.load_classifier = false;
      if (start.starts_with("safetensors"))
        interchange::load_safetensors(*m, dir + "/pre.safetensors", o);
      if (start == "onnx_folded") interchange::import_onnx(*m, dir + "/pre.onnx", o);
      if (start == "safetensors_frozen2") m->freeze_stages(2);
      nn::Sgd opt(*m, {0.9f, 5e-4f, false});
      std::mt19937 r(2);
      for (int e = 1; e <= epochs; ++e) {
        train_epoch(*m, opt, ft, 0.02f, r);
        std::printf("{\"start\": \"%s\", \"epoch\": %d, \"test_accuracy\": %.4f}\n", start.c_str(),
                    e, accuracy(*m, test));
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "bench_finetune: %s\n", e.what());
    return 1;
  }
}
