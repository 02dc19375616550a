// unet_parity_tool DIR: builds the U-Net that DIR/case.txt describes (written
// by tests/segment_model/parity.py) on the CPU backend, loads its weights and
// batch-norm statistics by name from DIR/w/NAME.bin, and writes, as raw
// little-endian float32: eval_logits.bin (eval mode), logits.bin (training
// mode), loss.bin (total, cross-entropy, Dice), g/NAME.bin (each parameter's
// gradient) and dx.bin (the input's), from SegmentationStep::forward_backward.
//
// case.txt: ARCH WIDTH_MULTIPLIER IN_CHANNELS H W N CLASSES D0 D1 D2 D3 D4
//           IGNORE_LABEL DICE_WEIGHT CLASS_WEIGHT... (one per class)
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/layers.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/segmentation.hpp"

namespace {

using stoke::Tensor;

template <class T>
std::vector<T> read_raw(const std::string& path, std::size_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<T> v(count);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(T)));
  if (!in)
    throw std::runtime_error("cannot read " + std::to_string(count) + " values from " + path);
  return v;
}

void write_raw(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::cerr << "usage: unet_parity_tool DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  std::ifstream c(dir + "/case.txt");
  std::string arch;
  stoke::nn::ModelSpec spec;
  std::int64_t n = 0;
  stoke::nn::SegmentationLossOptions loss;
  c >> arch >> spec.width_multiplier >> spec.in_channels >> spec.height >> spec.width >> n >>
      spec.classes;
  spec.architecture = stoke::nn::architecture_from_name(arch);
  spec.decoder_channels.resize(5);
  for (int& d : spec.decoder_channels) c >> d;
  c >> loss.ignore_label >> loss.dice_weight;
  loss.class_weights.resize(static_cast<std::size_t>(spec.classes));
  for (float& w : loss.class_weights) c >> w;
  if (!c) throw std::runtime_error("cannot parse " + dir + "/case.txt");

  stoke::Backend& be = stoke::cpu_backend();
  auto model = stoke::nn::build_model(be, spec, 1);
  auto tensors = model->named_parameters();
  for (auto& b : model->named_buffers()) tensors.push_back(b);
  for (auto& [name, t] : tensors) {
    t.copy_from_host(
        read_raw<float>(dir + "/w/" + name + ".bin", static_cast<std::size_t>(t.numel())).data());
  }
  const std::int64_t pixels = n * spec.height * spec.width;
  Tensor x(be, model->input_shape(n));
  x.copy_from_host(
      read_raw<float>(dir + "/x.bin", static_cast<std::size_t>(pixels * spec.in_channels)).data());
  Tensor labels(be, {n, spec.height, spec.width}, stoke::DType::kInt32);
  labels.copy_from_host(read_raw<std::int32_t>(dir + "/labels.bin", pixels).data());

  write_raw(dir + "/eval_logits.bin", model->forward(x, false).to_vector());
  model->network().set_input_grad(true);  // the input's gradient too
  stoke::nn::SegmentationStep step(*model, loss);
  const auto stats = step.forward_backward(x, labels);
  write_raw(dir + "/logits.bin", step.logits().to_vector());
  write_raw(dir + "/loss.bin", {stats.loss, stats.cross_entropy, stats.dice});
  std::vector<stoke::nn::ParamSlot> slots;
  model->network().parameters(slots);
  std::filesystem::create_directories(dir + "/g");
  for (const auto& s : slots) write_raw(dir + "/g/" + s.name + ".bin", s.grad->to_vector());
  // Model::backward keeps the input's gradient to itself: a second backward of
  // the same forward through the network returns it (the parameter gradients,
  // written above, are overwritten with the same values).
  write_raw(dir + "/dx.bin", model->network().backward(step.dlogits()).to_vector());
  std::cout << "loss " << stats.loss << " pixel accuracy " << stats.pixel_accuracy << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "unet_parity_tool: " << e.what() << "\n";
  return 1;
}
