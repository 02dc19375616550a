// The segmentation ONNX export test's stoke side
// (tests/interchange/segment_export_check.py): a seeded U-Net on a ResNet-18
// encoder of width 0.25 (64 x 64 inputs, 3 channels, 3 classes) whose batch
// norm scales, shifts and running statistics and the head's bias are drawn at
// random too (so that folding them is checked), saved as a segmentation model
// file (seg.stoke, what stoke export reads) and loaded back; then a batch of 2
// random inputs (input.bin) and the loaded model's eval-mode logits on them
// (logits.bin), raw little-endian float32, and the shape in case.txt: N C H W CLASSES.
//   segment_export_tool OUTDIR
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "stoke/stoke.hpp"

namespace {

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!f) throw stoke::IoError("cannot write " + path);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::cerr << "usage: segment_export_tool OUTDIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  constexpr int kBatch = 2;
  stoke::nn::ModelSpec spec;
  spec.architecture = stoke::nn::Architecture::kResNet18;
  spec.width_multiplier = 0.25f;
  spec.in_channels = 3;
  spec.height = spec.width = 64;
  spec.classes = 3;
  spec.decoder_channels = {64, 32, 16, 16, 8};
  stoke::Backend& be = stoke::cpu_backend();
  auto model = stoke::nn::build_model(be, spec, 7);

  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  std::uniform_real_distribution<float> variance(0.5f, 2.0f);
  auto tensors = model->named_parameters();
  for (auto& b : model->named_buffers()) tensors.push_back(b);
  for (auto& [name, t] : tensors) {
    if (t.shape().size() != 1) continue;  // convolution weights keep their initialization
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    for (float& x : v) {
      x = ends_with(name, "running_var") ? variance(rng)
                                         : normal(rng) + (ends_with(name, ".weight") ? 1.0f : 0.0f);
    }
    t.copy_from_host(v.data());
  }

  stoke::ModelInfo info;
  info.class_names = {"background", "scratch", "dent"};
  info.preprocess.width = spec.width;
  info.preprocess.height = spec.height;
  info.preprocess.channels = spec.in_channels;
  const std::size_t image = static_cast<std::size_t>(spec.in_channels * spec.height * spec.width);
  std::vector<float> input(kBatch * image);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  for (float& x : input) x = pixel(rng);
  const std::string path = dir + "/seg.stoke";
  stoke::save_segmentation_model(path, *model, info, std::span<const float>(input.data(), image));

  auto loaded = stoke::nn::load_model(path, be);  // what stoke export exports
  stoke::Tensor x(be, loaded->input_shape(kBatch));
  x.copy_from_host(input.data());
  write_floats(dir + "/input.bin", input);
  write_floats(dir + "/logits.bin", loaded->forward(x, false).to_vector());
  std::ofstream(dir + "/case.txt") << kBatch << " " << spec.in_channels << " " << spec.height << " "
                                   << spec.width << " " << spec.classes << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "segment_export_tool: " << e.what() << "\n";
  return 1;
}
