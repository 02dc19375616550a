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

namespace {

// Layer i is a BatchNorm2d followed by a Relu: the pair Sequential fuses in training.
BatchNorm2d* fusable_bn(const std::vector<std::unique_ptr<Layer>>& layers, std::size_t i) {
  if (i + 1 >= layers.size() || !layer_as<Relu>(*layers[i + 1])) return nullptr;
  return layer_as<BatchNorm2d>(*layers[i]);
}

}  // namespace

// In training, a BatchNorm2d followed by a Relu runs as one fused op
// (Backend::batch_norm_relu_forward_training): the batch norm writes the Relu's output.
const Tensor& Sequential::forward(const Tensor& x, bool training) {
  const Tensor* t = &x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (BatchNorm2d* bn = training ? fusable_bn(layers_, i) : nullptr) {
      Tensor& y = static_cast<Relu&>(*layers_[i + 1]).fused_output(t->shape());
      bn->forward_relu(*t, y);
      t = &y;
      ++i;
      continue;
    }
    t = &layers_[i]->forward(*t, training);
  }
  last_ = t;
  return *t;
}

const Tensor& Sequential::backward(const Tensor& dy) {
  return backward_from(dy, 0, {});
}

const Tensor& Sequential::backward_from(const Tensor& dy, std::size_t first,
                                        const std::function<void(std::size_t)>& after) {
  const Tensor* g = &dy;
  for (std::size_t i = layers_.size(); i-- > first;) {
    BatchNorm2d* bn = i > first ? fusable_bn(layers_, i - 1) : nullptr;
    if (bn && bn->fused_relu()) {
      g = &bn->backward_relu(static_cast<Relu&>(*layers_[i]).output(), *g);
      --i;
    } else {
      g = &layers_[i]->backward(*g);
    }
    if (after) after(i);
  }
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
