// Sequential and the ResNet basic block (a Residual, lib/nn/resnet.cpp).
#include <algorithm>

#include "stoke/error.hpp"
#include "stoke/nn/layers.hpp"

namespace stoke::nn {

void Sequential::add(std::unique_ptr<Layer> layer) {
  if (!layer) throw InvalidArgument("Sequential '" + name_ + "': null layer");
  layers_.push_back(std::move(layer));
}

Shape Sequential::output_shape(const Shape& in) const {
  Shape s = in;
  for (const auto& l : layers_) s = l->output_shape(s);
  return s;
}

const Tensor& Sequential::forward(const Tensor& x, bool training) {
  const Tensor* t = &x;
  for (auto& l : layers_) t = &l->forward(*t, training);
  last_ = t;
  return *t;
}

const Tensor& Sequential::backward(const Tensor& dy) {
  const Tensor* g = &dy;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) g = &(*it)->backward(*g);
  return *g;
}

void Sequential::release_activations() {
  for (auto& l : layers_) l->release_activations();
  last_ = nullptr;
}

std::uint64_t Sequential::activation_allocations() const noexcept {
  std::uint64_t total = allocations_;
  for (const auto& l : layers_) total += l->activation_allocations();
  return total;
}

void Sequential::parameters(std::vector<ParamSlot>& out) {
  for (auto& l : layers_) l->parameters(out);
}

void Sequential::buffers(std::vector<BufferSlot>& out) {
  for (auto& l : layers_) l->buffers(out);
}

std::size_t Sequential::activation_bytes(const Shape& in) const {
  std::size_t total = 0;
  Shape s = in;
  for (const auto& l : layers_) {
    total += l->activation_bytes(s);
    s = l->output_shape(s);
  }
  return total;
}

std::size_t Sequential::workspace_bytes(const Shape& in) const {
  std::size_t most = 0;
  Shape s = in;
  for (const auto& l : layers_) {
    most = std::max(most, l->workspace_bytes(s));
    s = l->output_shape(s);
  }
  return most;
}

void Sequential::set_input_grad(bool needed) {
  input_grad_ = needed;
  if (!layers_.empty()) layers_.front()->set_input_grad(needed);
}

void Sequential::describe(std::string& out, int depth, const Shape& in) const {
  if (depth > 0) Layer::describe(out, depth, in);
  Shape s = in;
  for (const auto& l : layers_) {
    l->describe(out, depth + 1, s);
    s = l->output_shape(s);
  }
}

namespace {

std::unique_ptr<Sequential> basic_main(Backend& backend, const std::string& name, int in_channels,
                                       int out_channels, int stride) {
  auto main = std::make_unique<Sequential>(backend, name);
  const Conv2dParams c1{stride, stride, 1, 1, 1, 1, 1};
  const Conv2dParams c2{1, 1, 1, 1, 1, 1, 1};
  main->add(std::make_unique<Conv2d>(backend, name + ".conv1", in_channels, out_channels, 3, c1));
  main->add(std::make_unique<BatchNorm2d>(backend, name + ".bn1", out_channels));
  main->add(std::make_unique<Relu>(backend, name + ".relu1"));
  main->add(std::make_unique<Conv2d>(backend, name + ".conv2", out_channels, out_channels, 3, c2));
  main->add(std::make_unique<BatchNorm2d>(backend, name + ".bn2", out_channels));
  return main;
}

std::unique_ptr<Sequential> basic_shortcut(Backend& backend, const std::string& name,
                                           int in_channels, int out_channels, int stride) {
  if (stride == 1 && in_channels == out_channels) return nullptr;
  auto shortcut = std::make_unique<Sequential>(backend, name + ".shortcut");
  const Conv2dParams s{stride, stride, 0, 0, 1, 1, 1};
  shortcut->add(
      std::make_unique<Conv2d>(backend, name + ".shortcut.conv", in_channels, out_channels, 1, s));
  shortcut->add(std::make_unique<BatchNorm2d>(backend, name + ".shortcut.bn", out_channels));
  return shortcut;
}

}  // namespace

BasicBlock::BasicBlock(Backend& backend, std::string name, int in_channels, int out_channels,
                       int stride)
    : Residual(backend, name, basic_main(backend, name, in_channels, out_channels, stride),
               basic_shortcut(backend, name, in_channels, out_channels, stride)) {}

}  // namespace stoke::nn
