// The U-Net segmentation model (segmentation_models_pytorch's Unet on the
// torchvision ResNet encoders; docs/segmentation-model.md). Every step goes
// through the backend's ops (convolutions, batch norm, upsampling,
// concatenation, add), so it runs on any backend.
#include <algorithm>
#include <array>
#include <cmath>

#include "nn/resnet.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/layers.hpp"

namespace stoke::nn {

namespace {

constexpr int kStages = 5;  // encoder outputs at strides 2, 4, 8, 16, 32
constexpr int kStride = 32;
constexpr auto kStageEnd = Unet::kStageEnd;

std::size_t float_bytes(const Shape& s) {
  return static_cast<std::size_t>(shape_numel(s)) * sizeof(float);
}

std::string join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

constexpr Conv2dParams kSame3x3{1, 1, 1, 1, 1, 1, 1};

// smp's Conv2dReLU with batch norm: <name>.0 conv (no bias), .1 batch norm, .2 ReLU.
void add_conv_bn_relu(Sequential& seq, Backend& be, const std::string& name, int in, int out) {
  seq.add(std::make_unique<Conv2d>(be, name + ".0", in, out, 3, kSame3x3));
  seq.add(
      std::make_unique<BatchNorm2d>(be, name + ".1", out, BatchNormParams{}, BnNames::kWeightBias));
  seq.add(std::make_unique<Relu>(be, name + ".2"));
}

}  // namespace

Unet::Unet(Backend& backend, std::string name, std::unique_ptr<Sequential> encoder,
           std::vector<int> encoder_channels, const std::vector<int>& decoder_channels, int classes)
    : Layer(backend, std::move(name)),
      encoder_(std::move(encoder)),
      encoder_channels_(std::move(encoder_channels)),
      classes_(classes) {
  if (!encoder_ || encoder_->layers().size() != kStageEnd.back() ||
      encoder_channels_.size() != kStages) {
    throw InvalidArgument("Unet '" + name_ +
                          "': the encoder must be a torchvision ResNet trunk (8 layers, "
                          "5 feature channel counts)");
  }
  if (decoder_channels.size() != kStages ||
      std::any_of(decoder_channels.begin(), decoder_channels.end(), [](int c) { return c < 1; })) {
    throw InvalidArgument("Unet '" + name_ + "': decoder_channels must be 5 counts >= 1, got (" +
                          join(decoder_channels) + ")");
  }
  if (classes_ < 2) {
    throw InvalidArgument("Unet '" + name_ + "': classes must be >= 2 (background first), got " +
                          std::to_string(classes_));
  }
  int in = encoder_channels_.back();
  for (int i = 0; i < kStages; ++i) {
    const int skip = i + 1 < kStages ? encoder_channels_[static_cast<std::size_t>(3 - i)] : 0;
    const int out = decoder_channels[static_cast<std::size_t>(i)];
    const std::string block = "decoder.blocks." + std::to_string(i);
    auto seq = std::make_unique<Sequential>(backend, block);
    add_conv_bn_relu(*seq, backend, block + ".conv1", in + skip, out);
    add_conv_bn_relu(*seq, backend, block + ".conv2", out, out);
    blocks_.push_back(std::move(seq));
    in = out;
  }
  head_ = std::make_unique<Conv2d>(backend, "segmentation_head.0", in, classes_, 3, kSame3x3,
                                   /*bias=*/true);
  up_.resize(kStages);
  cat_.resize(kStages);
  dup_.resize(kStages);
  dskip_.resize(kStages);
  dprev_.resize(kStages);
  dsum_.resize(kStages);
}

Unet::Shapes Unet::shapes(const Shape& in) const {
  if (in.size() != 4) {
    throw InvalidArgument("Unet '" + name_ + "' expects an (N, C, H, W) input, got " +
                          shape_to_string(in));
  }
  if (in[2] < kStride || in[3] < kStride || in[2] % kStride != 0 || in[3] % kStride != 0) {
    throw InvalidArgument("Unet '" + name_ + "': input height and width must be multiples of " +
                          std::to_string(kStride) + " (the encoder's stride), got " +
                          std::to_string(in[2]) + "x" + std::to_string(in[3]));
  }
  Shapes s;
  const auto& enc = encoder_->layers();
  Shape t = in;
  std::size_t li = 0;
  for (std::size_t st = 0; st < kStages; ++st) {
    for (; li < kStageEnd[st]; ++li) t = enc[li]->output_shape(t);
    s.features.push_back(t);
  }
  for (std::size_t i = 0; i < kStages; ++i) {
    const Shape up = {t[0], t[1], t[2] * 2, t[3] * 2};
    s.up.push_back(up);
    Shape cat = up;
    if (i + 1 < kStages) cat[1] += s.features[3 - i][1];
    s.cat.push_back(cat);
    t = blocks_[i]->output_shape(cat);
  }
  return s;
}

Shape Unet::output_shape(const Shape& in) const {
  const Shapes s = shapes(in);
  return head_->output_shape(blocks_.back()->output_shape(s.cat.back()));
}

const Tensor& Unet::forward(const Tensor& x, bool training) {
  const Shapes sh = shapes(x.shape());
  const auto& enc = encoder_->layers();
  features_.assign(kStages, nullptr);
  const Tensor* t = &x;
  std::size_t li = 0;
  for (std::size_t st = 0; st < kStages; ++st) {
    for (; li < kStageEnd[st]; ++li) t = &enc[li]->forward(*t, training);
    features_[st] = t;
  }
  for (std::size_t i = 0; i < kStages; ++i) {
    ensure(up_[i], sh.up[i]);
    backend_->upsample2d_forward(*t, up_[i], UpsampleMode::kNearest);
    t = &up_[i];
    if (i + 1 < kStages) {
      ensure(cat_[i], sh.cat[i]);
      backend_->concat_channels_forward(up_[i], *features_[3 - i], cat_[i]);
      t = &cat_[i];
    }
    t = &blocks_[i]->forward(*t, training);
  }
  return head_->forward(*t, training);
}

const Tensor& Unet::backward(const Tensor& dy) {
  if (features_.size() != kStages)
    throw InvalidArgument("Unet '" + name_ + "': backward without a forward");
  const Tensor* g = &head_->backward(dy);
  for (std::size_t i = kStages; i-- > 0;) {
    const Tensor& din = blocks_[i]->backward(*g);
    const Tensor* dup = &din;
    if (i + 1 < kStages) {  // concat's backward: the upsampled part and the skip
      ensure(dup_[i], up_[i].shape());
      ensure(dskip_[i], features_[3 - i]->shape());
      backend_->concat_channels_backward(din, dup_[i], dskip_[i]);
      dup = &dup_[i];
    }
    const Shape& up = up_[i].shape();
    ensure(dprev_[i], {up[0], up[1], up[2] / 2, up[3] / 2});
    backend_->upsample2d_backward(*dup, dprev_[i], UpsampleMode::kNearest);
    g = &dprev_[i];
  }
  // g is the gradient at the deepest feature; each shallower feature adds its skip's.
  const auto& enc = encoder_->layers();
  std::size_t li = kStageEnd.back();
  for (std::size_t st = kStages; st-- > 0;) {
    if (st + 1 < kStages) {
      ensure(dsum_[st], features_[st]->shape());
      backend_->add(*g, dskip_[3 - st], dsum_[st]);
      g = &dsum_[st];
    }
    const std::size_t begin = st == 0 ? 0 : kStageEnd[st - 1];
    for (; li > begin; --li) g = &enc[li - 1]->backward(*g);
  }
  return input_grad_ ? *g : none_tensor();
}

void Unet::release_activations() {
  encoder_->release_activations();
  for (auto& b : blocks_) b->release_activations();
  head_->release_activations();
  for (auto* v : {&up_, &cat_, &dup_, &dskip_, &dprev_, &dsum_})
    for (Tensor& t : *v) t = Tensor();
  features_.clear();
}

std::uint64_t Unet::activation_allocations() const noexcept {
  std::uint64_t n =
      allocations_ + encoder_->activation_allocations() + head_->activation_allocations();
  for (const auto& b : blocks_) n += b->activation_allocations();
  return n;
}

void Unet::parameters(std::vector<ParamSlot>& out) {
  encoder_->parameters(out);
  for (auto& b : blocks_) b->parameters(out);
  head_->parameters(out);
}

void Unet::buffers(std::vector<BufferSlot>& out) {
  encoder_->buffers(out);
  for (auto& b : blocks_) b->buffers(out);
  head_->buffers(out);
}

std::size_t Unet::activation_bytes(const Shape& in) const {
  const Shapes s = shapes(in);
  std::size_t bytes = encoder_->activation_bytes(in);
  for (std::size_t i = 0; i < kStages; ++i) {
    bytes += blocks_[i]->activation_bytes(s.cat[i]);
    // up_ and dprev_ (the block's input before upsampling); cat_, dup_, dskip_, dsum_ with a skip
    const Shape& u = s.up[i];
    bytes += float_bytes(u) + float_bytes({u[0], u[1], u[2] / 2, u[3] / 2});
    if (i + 1 < kStages) {
      bytes += float_bytes(s.cat[i]) + float_bytes(u) + 2 * float_bytes(s.features[3 - i]);
    }
  }
  return bytes + head_->activation_bytes(blocks_.back()->output_shape(s.cat.back()));
}

std::size_t Unet::workspace_bytes(const Shape& in) const {
  const Shapes s = shapes(in);
  std::size_t w = encoder_->workspace_bytes(in);
  for (std::size_t i = 0; i < kStages; ++i) w = std::max(w, blocks_[i]->workspace_bytes(s.cat[i]));
  return std::max(w, head_->workspace_bytes(blocks_.back()->output_shape(s.cat.back())));
}

void Unet::set_input_grad(bool needed) {
  input_grad_ = needed;
  encoder_->set_input_grad(needed);
}

void Unet::describe(std::string& out, int depth, const Shape& in) const {
  Layer::describe(out, depth, in);
  const Shapes s = shapes(in);
  encoder_->describe(out, depth + 1, in);
  for (std::size_t i = 0; i < kStages; ++i) blocks_[i]->describe(out, depth + 1, s.cat[i]);
  head_->describe(out, depth + 1, blocks_.back()->output_shape(s.cat.back()));
}

std::unique_ptr<Sequential> build_unet(Backend& be, const ModelSpec& spec) {
  const char* arch = architecture_name(spec.architecture);
  if (!is_torchvision_resnet(spec.architecture)) {
    throw InvalidArgument(std::string("build_model: a U-Net (decoder_channels) needs a torchvision "
                                      "encoder (resnet18, resnet34, resnet50, wide_resnet50_2), "
                                      "not ") +
                          arch);
  }
  if (spec.classes < 2) {
    throw InvalidArgument("build_model: a U-Net needs classes >= 2 (background first), got " +
                          std::to_string(spec.classes));
  }
  if (spec.in_channels < 1 || !(spec.width_multiplier > 0.0f) ||
      !std::isfinite(spec.width_multiplier)) {
    throw InvalidArgument(
        "build_model: a U-Net needs >= 1 input channel and a width multiplier "
        "> 0 (got " +
        std::to_string(spec.in_channels) + ", " + std::to_string(spec.width_multiplier) + ")");
  }
  if (spec.height % kStride != 0 || spec.width % kStride != 0 || spec.height < kStride ||
      spec.width < kStride) {
    throw InvalidArgument(
        "build_model: a U-Net's input height and width must be multiples of 32 "
        "(the encoder's stride), got " +
        std::to_string(spec.height) + "x" + std::to_string(spec.width));
  }
  auto encoder = std::make_unique<Sequential>(be, "encoder");
  add_torchvision_trunk(*encoder, be, spec, "encoder.");
  const int b = torchvision_base_width(spec);
  const bool bottleneck = spec.architecture == Architecture::kResNet50 ||
                          spec.architecture == Architecture::kWideResNet50_2;
  std::vector<int> channels = bottleneck ? std::vector<int>{b, 4 * b, 8 * b, 16 * b, 32 * b}
                                         : std::vector<int>{b, b, 2 * b, 4 * b, 8 * b};
  auto net = std::make_unique<Sequential>(be, "net");
  net->add(std::make_unique<Unet>(be, "unet", std::move(encoder), std::move(channels),
                                  spec.decoder_channels, spec.classes));
  net->output_shape({1, spec.in_channels, spec.height, spec.width});  // checks the channels
  return net;
}

}  // namespace stoke::nn
