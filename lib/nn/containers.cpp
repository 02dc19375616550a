// Sequential and the ResNet basic block.
#include <algorithm>

#include "stoke/error.hpp"
#include "stoke/nn/layers.hpp"

namespace stoke::nn {

namespace {
std::size_t float_bytes(const Shape& s) { return static_cast<std::size_t>(shape_numel(s)) * sizeof(float); }
}  // namespace

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

BasicBlock::BasicBlock(Backend& backend, std::string name, int in_channels, int out_channels, int stride)
    : Layer(backend, name), main_(backend, name) {
  const Conv2dParams c1{stride, stride, 1, 1, 1, 1, 1};
  const Conv2dParams c2{1, 1, 1, 1, 1, 1, 1};
  main_.add(std::make_unique<Conv2d>(backend, name + ".conv1", in_channels, out_channels, 3, c1));
  main_.add(std::make_unique<BatchNorm2d>(backend, name + ".bn1", out_channels));
  main_.add(std::make_unique<Relu>(backend, name + ".relu1"));
  main_.add(std::make_unique<Conv2d>(backend, name + ".conv2", out_channels, out_channels, 3, c2));
  main_.add(std::make_unique<BatchNorm2d>(backend, name + ".bn2", out_channels));
  if (stride != 1 || in_channels != out_channels) {
    shortcut_ = std::make_unique<Sequential>(backend, name + ".shortcut");
    const Conv2dParams s{stride, stride, 0, 0, 1, 1, 1};
    shortcut_->add(std::make_unique<Conv2d>(backend, name + ".shortcut.conv", in_channels, out_channels, 1, s));
    shortcut_->add(std::make_unique<BatchNorm2d>(backend, name + ".shortcut.bn", out_channels));
  }
}

Shape BasicBlock::output_shape(const Shape& in) const {
  const Shape main = main_.output_shape(in);
  const Shape shortcut = shortcut_ ? shortcut_->output_shape(in) : in;
  if (main != shortcut) {
    throw InvalidArgument("BasicBlock '" + name_ + "': main path gives " + shape_to_string(main) + ", shortcut " +
                          shape_to_string(shortcut));
  }
  return main;
}

const Tensor& BasicBlock::forward(const Tensor& x, bool training) {
  const Shape out = output_shape(x.shape());
  ensure(sum_, out);
  ensure(y_, out);
  const Tensor& main = main_.forward(x, training);
  const Tensor& shortcut = shortcut_ ? shortcut_->forward(x, training) : x;
  backend_->add(main, shortcut, sum_);
  backend_->relu_forward(sum_, y_);
  return y_;
}

const Tensor& BasicBlock::backward(const Tensor& dy) {
  ensure(dsum_, y_.shape());
  backend_->relu_backward(y_, dy, dsum_);
  // The add passes dsum to both paths unchanged.
  const Tensor& dmain = main_.backward(dsum_);
  const Tensor& dshort = shortcut_ ? shortcut_->backward(dsum_) : dsum_;
  if (!input_grad_) return none_tensor();
  ensure(dx_, dmain.shape());
  backend_->add(dmain, dshort, dx_);
  return dx_;
}

void BasicBlock::release_activations() {
  main_.release_activations();
  if (shortcut_) shortcut_->release_activations();
  sum_ = y_ = dsum_ = dx_ = Tensor();
}

void BasicBlock::parameters(std::vector<ParamSlot>& out) {
  main_.parameters(out);
  if (shortcut_) shortcut_->parameters(out);
}

void BasicBlock::buffers(std::vector<BufferSlot>& out) {
  main_.buffers(out);
  if (shortcut_) shortcut_->buffers(out);
}

std::size_t BasicBlock::activation_bytes(const Shape& in) const {
  const std::size_t out = float_bytes(output_shape(in));
  return main_.activation_bytes(in) + (shortcut_ ? shortcut_->activation_bytes(in) : 0) + 3 * out +
         (input_grad_ ? float_bytes(in) : 0);
}

std::size_t BasicBlock::workspace_bytes(const Shape& in) const {
  return std::max(main_.workspace_bytes(in), shortcut_ ? shortcut_->workspace_bytes(in) : 0);
}

void BasicBlock::describe(std::string& out, int depth, const Shape& in) const {
  Layer::describe(out, depth, in);
  main_.describe(out, depth, in);
  if (shortcut_) shortcut_->describe(out, depth, in);
}

}  // namespace stoke::nn
