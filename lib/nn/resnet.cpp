// torchvision's ResNet-18/34/50, Wide-ResNet-50-2 and the Residual block they are built from.
#include "nn/resnet.hpp"

#include <algorithm>
#include <cmath>

#include "stoke/error.hpp"

namespace stoke::nn {

namespace {

std::size_t float_bytes(const Shape& s) {
  return static_cast<std::size_t>(shape_numel(s)) * sizeof(float);
}

constexpr Conv2dParams conv_params(int stride, int pad) {
  return {stride, stride, pad, pad, 1, 1, 1};
}

void add_conv_bn(Sequential& seq, Backend& be, const std::string& conv, const std::string& bn,
                 int in, int out, int kernel, int stride) {
  seq.add(std::make_unique<Conv2d>(be, conv, in, out, kernel, conv_params(stride, kernel / 2)));
  seq.add(std::make_unique<BatchNorm2d>(be, bn, out, BatchNormParams{}, BnNames::kWeightBias));
}

// torchvision BasicBlock (expansion 1) or Bottleneck (expansion 4, stride on
// the 3x3 conv, inner width planes x inner_factor: 2 for wide_resnet50_2).
std::unique_ptr<Layer> make_block(Backend& be, const std::string& name, int in, int planes,
                                  int stride, bool bottleneck, int inner_factor) {
  auto main = std::make_unique<Sequential>(be, name);
  const int out = bottleneck ? planes * 4 : planes;
  if (bottleneck) {
    const int inner = planes * inner_factor;
    add_conv_bn(*main, be, name + ".conv1", name + ".bn1", in, inner, 1, 1);
    main->add(std::make_unique<Relu>(be, name + ".relu1"));
    add_conv_bn(*main, be, name + ".conv2", name + ".bn2", inner, inner, 3, stride);
    main->add(std::make_unique<Relu>(be, name + ".relu2"));
    add_conv_bn(*main, be, name + ".conv3", name + ".bn3", inner, out, 1, 1);
  } else {
    add_conv_bn(*main, be, name + ".conv1", name + ".bn1", in, planes, 3, stride);
    main->add(std::make_unique<Relu>(be, name + ".relu1"));
    add_conv_bn(*main, be, name + ".conv2", name + ".bn2", planes, planes, 3, 1);
  }
  std::unique_ptr<Sequential> shortcut;
  if (stride != 1 || in != out) {
    shortcut = std::make_unique<Sequential>(be, name + ".downsample");
    add_conv_bn(*shortcut, be, name + ".downsample.0", name + ".downsample.1", in, out, 1, stride);
  }
  return std::make_unique<Residual>(be, name, std::move(main), std::move(shortcut));
}

}  // namespace

int add_torchvision_trunk(Sequential& net, Backend& be, const ModelSpec& spec,
                          const std::string& prefix) {
  const bool wide = spec.architecture == Architecture::kWideResNet50_2;
  const bool bottleneck = wide || spec.architecture == Architecture::kResNet50;
  const int blocks18[] = {2, 2, 2, 2}, blocks34[] = {3, 4, 6, 3};
  const int* blocks = spec.architecture == Architecture::kResNet18 ? blocks18 : blocks34;
  const int base = torchvision_base_width(spec);
  net.add(
      std::make_unique<Conv2d>(be, prefix + "conv1", spec.in_channels, base, 7, conv_params(2, 3)));
  net.add(std::make_unique<BatchNorm2d>(be, prefix + "bn1", base, BatchNormParams{},
                                        BnNames::kWeightBias));
  net.add(std::make_unique<Relu>(be, prefix + "relu"));
  net.add(std::make_unique<Pool2d>(be, prefix + "maxpool", PoolKind::kMax,
                                   Pool2dParams{3, 3, 2, 2, 1, 1}));
  int channels = base;
  for (int st = 0; st < 4; ++st) {
    const std::string stage = prefix + "layer" + std::to_string(st + 1);
    auto seq = std::make_unique<Sequential>(be, stage);
    const int planes = base << st;
    for (int b = 0; b < blocks[st]; ++b) {
      seq->add(make_block(be, stage + "." + std::to_string(b), channels, planes,
                          b == 0 && st > 0 ? 2 : 1, bottleneck, wide ? 2 : 1));
      channels = bottleneck ? planes * 4 : planes;
    }
    net.add(std::move(seq));
  }
  return channels;
}

int torchvision_base_width(const ModelSpec& spec) noexcept {
  return std::max(1,
                  static_cast<int>(std::lround(64.0 * static_cast<double>(spec.width_multiplier))));
}

std::unique_ptr<Sequential> build_torchvision_resnet(Backend& be, const ModelSpec& spec,
                                                     std::uint64_t seed) {
  const char* arch = architecture_name(spec.architecture);
  if (spec.classes < 1 || spec.in_channels < 1 || !(spec.width_multiplier > 0.0f) ||
      !std::isfinite(spec.width_multiplier)) {
    throw InvalidArgument(
        std::string("build_model: ") + arch + " needs >= 1 class, >= 1 input channel and a width " +
        "multiplier > 0 (got " + std::to_string(spec.classes) + ", " +
        std::to_string(spec.in_channels) + ", " + std::to_string(spec.width_multiplier) + ")");
  }
  auto net = std::make_unique<Sequential>(be, "net");
  const int channels = add_torchvision_trunk(*net, be, spec, "");
  net->add(std::make_unique<GlobalAvgPool>(be, "avgpool"));
  if (spec.dropout > 0.0f)
    net->add(std::make_unique<Dropout>(be, "dropout", spec.dropout, seed ^ 0xD40Full));
  net->add(std::make_unique<Linear>(be, "fc", channels, spec.classes));
  try {
    net->output_shape({1, spec.in_channels, spec.height, spec.width});
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("build_model: ") + arch + " cannot take a " +
                          std::to_string(spec.height) + "x" + std::to_string(spec.width) +
                          " input: " + e.what());
  }
  return net;
}

// --- Residual -------------------------------------------------------------------

Residual::Residual(Backend& backend, std::string name, std::unique_ptr<Sequential> main,
                   std::unique_ptr<Sequential> shortcut)
    : Layer(backend, std::move(name)), main_(std::move(main)), shortcut_(std::move(shortcut)) {
  if (!main_) throw InvalidArgument("Residual '" + name_ + "': null main path");
}

Shape Residual::output_shape(const Shape& in) const {
  const Shape main = main_->output_shape(in);
  const Shape shortcut = shortcut_ ? shortcut_->output_shape(in) : in;
  if (main != shortcut) {
    throw InvalidArgument("Residual '" + name_ + "': main path gives " + shape_to_string(main) +
                          ", shortcut " + shape_to_string(shortcut));
  }
  return main;
}

const Tensor& Residual::forward(const Tensor& x, bool training) {
  const Shape out = output_shape(x.shape());
  ensure(sum_, out);
  ensure(y_, out);
  const Tensor& main = main_->forward(x, training);
  const Tensor& shortcut = shortcut_ ? shortcut_->forward(x, training) : x;
  // One fused pass; sum_ stays as the memory plan counts it, unwritten.
  backend_->add_relu(main, shortcut, y_);
  return y_;
}

const Tensor& Residual::backward(const Tensor& dy) {
  ensure(dsum_, y_.shape());
  backend_->relu_backward(y_, dy, dsum_);
  const Tensor& dmain = main_->backward(dsum_);  // the add passes dsum to both paths
  const Tensor& dshort = shortcut_ ? shortcut_->backward(dsum_) : dsum_;
  if (!input_grad_) return none_tensor();
  ensure(dx_, dmain.shape());
  backend_->add(dmain, dshort, dx_);
  return dx_;
}

void Residual::release_activations() {
  main_->release_activations();
  if (shortcut_) shortcut_->release_activations();
  sum_ = y_ = dsum_ = dx_ = Tensor();
}

std::uint64_t Residual::activation_allocations() const noexcept {
  return allocations_ + main_->activation_allocations() +
         (shortcut_ ? shortcut_->activation_allocations() : 0);
}

void Residual::parameters(std::vector<ParamSlot>& out) {
  main_->parameters(out);
  if (shortcut_) shortcut_->parameters(out);
}

void Residual::buffers(std::vector<BufferSlot>& out) {
  main_->buffers(out);
  if (shortcut_) shortcut_->buffers(out);
}

std::size_t Residual::activation_bytes(const Shape& in) const {
  const std::size_t out = float_bytes(output_shape(in));
  return main_->activation_bytes(in) + (shortcut_ ? shortcut_->activation_bytes(in) : 0) + 3 * out +
         (input_grad_ ? float_bytes(in) : 0);
}

std::size_t Residual::workspace_bytes(const Shape& in) const {
  return std::max(main_->workspace_bytes(in), shortcut_ ? shortcut_->workspace_bytes(in) : 0);
}

void Residual::describe(std::string& out, int depth, const Shape& in) const {
  Layer::describe(out, depth, in);
  main_->describe(out, depth, in);
  if (shortcut_) shortcut_->describe(out, depth, in);
}

}  // namespace stoke::nn
