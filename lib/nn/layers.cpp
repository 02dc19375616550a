// Layer base, and the layers with parameters: Conv2d, BatchNorm2d, Linear.
#include "stoke/nn/layers.hpp"

#include "stoke/error.hpp"

namespace stoke::nn {

namespace {
std::size_t float_bytes(const Shape& s) {
  return static_cast<std::size_t>(shape_numel(s)) * sizeof(float);
}
}  // namespace

Layer::~Layer() = default;
void Layer::parameters(std::vector<ParamSlot>&) {}
void Layer::buffers(std::vector<BufferSlot>&) {}
std::size_t Layer::workspace_bytes(const Shape&) const {
  return 0;
}

void Layer::describe(std::string& out, int depth, const Shape& in) const {
  out += std::string(static_cast<std::size_t>(depth) * 2, ' ') + name_ + "  " +
         shape_to_string(in) + " -> " + shape_to_string(output_shape(in)) + "\n";
}

const Tensor& Layer::none_tensor() {
  static const Tensor none;
  return none;
}

void Layer::ensure(Tensor& t, const Shape& shape) const {
  if (t.defined() && t.shape() == shape) return;
  t = Tensor(*backend_, shape);
  ++allocations_;
}

// --- Conv2d -------------------------------------------------------------------

Conv2d::Conv2d(Backend& backend, std::string name, int in_channels, int out_channels, int kernel,
               Conv2dParams params, bool bias)
    : Layer(backend, std::move(name)),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_(kernel),
      params_(params),
      has_bias_(bias) {
  if (in_channels < 1 || out_channels < 1 || kernel < 1 || params.groups < 1 ||
      in_channels % params.groups || out_channels % params.groups) {
    throw InvalidArgument("Conv2d '" + name_ + "': channels " + std::to_string(in_channels) +
                          " -> " + std::to_string(out_channels) + ", kernel " +
                          std::to_string(kernel) + " and groups " + std::to_string(params.groups) +
                          " are not a valid convolution");
  }
}

Shape Conv2d::output_shape(const Shape& in) const {
  if (in.size() != 4 || in[1] != in_channels_) {
    throw InvalidArgument("Conv2d '" + name_ + "' expects (N, " + std::to_string(in_channels_) +
                          ", H, W), got " + shape_to_string(in));
  }
  return {in[0], out_channels_,
          conv_output_size(in[2], kernel_, params_.stride_h, params_.pad_h, params_.dilation_h),
          conv_output_size(in[3], kernel_, params_.stride_w, params_.pad_w, params_.dilation_w)};
}

const Tensor& Conv2d::forward(const Tensor& x, bool) {
  ensure(y_, output_shape(x.shape()));
  x_ = x;
  backend_->conv2d_forward(x, weight_, has_bias_ ? bias_ : Tensor(), y_, params_);
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy) {
  Tensor none;
  if (input_grad_) ensure(dx_, x_.shape());
  backend_->conv2d_backward(x_, weight_, dy, input_grad_ ? dx_ : none, weight_grad_,
                            has_bias_ ? bias_grad_ : none, params_);
  return input_grad_ ? dx_ : none_tensor();
}

void Conv2d::release_activations() {
  x_ = y_ = dx_ = Tensor();
}

void Conv2d::parameters(std::vector<ParamSlot>& out) {
  const std::int64_t fan_in =
      static_cast<std::int64_t>(in_channels_ / params_.groups) * kernel_ * kernel_;
  out.push_back({name_ + ".weight",
                 {out_channels_, in_channels_ / params_.groups, kernel_, kernel_},
                 Init::kHe,
                 fan_in,
                 &weight_,
                 &weight_grad_});
  if (has_bias_)
    out.push_back({name_ + ".bias", {out_channels_}, Init::kZeros, 1, &bias_, &bias_grad_});
}

std::size_t Conv2d::activation_bytes(const Shape& in) const {
  return float_bytes(output_shape(in)) + (input_grad_ ? float_bytes(in) : 0);
}

std::size_t Conv2d::workspace_bytes(const Shape& in) const {
  return backend_->conv2d_workspace_bytes(
      in, {out_channels_, in_channels_ / params_.groups, kernel_, kernel_}, params_);
}

// --- BatchNorm2d ----------------------------------------------------------------

BatchNorm2d::BatchNorm2d(Backend& backend, std::string name, int channels, BatchNormParams params,
                         BnNames names)
    : Layer(backend, std::move(name)),
      channels_(channels),
      params_(params),
      names_(names),
      running_mean_(backend, {channels}),
      running_var_(backend, {channels}) {
  backend.fill(running_mean_, 0.0f);
  backend.fill(running_var_, 1.0f);
}

Shape BatchNorm2d::output_shape(const Shape& in) const {
  if (in.size() != 4 || in[1] != channels_) {
    throw InvalidArgument("BatchNorm2d '" + name_ + "' expects (N, " + std::to_string(channels_) +
                          ", H, W), got " + shape_to_string(in));
  }
  return in;
}

const Tensor& BatchNorm2d::forward(const Tensor& x, bool training) {
  ensure(y_, output_shape(x.shape()));
  x_ = x;
  fused_relu_ = false;
  if (training) {
    ensure(save_mean_, {channels_});
    ensure(save_invstd_, {channels_});
    backend_->batch_norm_forward_training(x, gamma_, beta_, y_, running_mean_, running_var_,
                                          save_mean_, save_invstd_, params_);
  } else {
    backend_->batch_norm_forward_inference(x, gamma_, beta_, running_mean_, running_var_, y_,
                                           params_);
  }
  return y_;
}

void BatchNorm2d::forward_relu(const Tensor& x, Tensor& y) {
  ensure(y_, output_shape(x.shape()));  // the unfused path's tensor, kept for the memory plan
  ensure(save_mean_, {channels_});
  ensure(save_invstd_, {channels_});
  backend_->batch_norm_relu_forward_training(x, gamma_, beta_, y, running_mean_, running_var_,
                                             save_mean_, save_invstd_, params_);
  fused_relu_ = true;
  x_ = x;
}

const Tensor& BatchNorm2d::backward_relu(const Tensor& y, const Tensor& dy) {
  if (!fused_relu_) {
    throw InvalidArgument("BatchNorm2d '" + name_ + "': backward_relu without forward_relu");
  }
  ensure(dx_, x_.shape());
  backend_->batch_norm_relu_backward(x_, y, dy, gamma_, save_mean_, save_invstd_, dx_, gamma_grad_,
                                     beta_grad_, params_);
  return dx_;
}

const Tensor& BatchNorm2d::backward(const Tensor& dy) {
  ensure(dx_, x_.shape());
  backend_->batch_norm_backward(x_, dy, gamma_, save_mean_, save_invstd_, dx_, gamma_grad_,
                                beta_grad_, params_);
  return dx_;
}

void BatchNorm2d::release_activations() {
  save_mean_ = save_invstd_ = x_ = y_ = dx_ = Tensor();
}

void BatchNorm2d::parameters(std::vector<ParamSlot>& out) {
  out.push_back({scale_name(), {channels_}, Init::kOnes, 1, &gamma_, &gamma_grad_});
  out.push_back({shift_name(), {channels_}, Init::kZeros, 1, &beta_, &beta_grad_});
}

std::string BatchNorm2d::scale_name() const {
  return name_ + (names_ == BnNames::kGammaBeta ? ".gamma" : ".weight");
}
std::string BatchNorm2d::shift_name() const {
  return name_ + (names_ == BnNames::kGammaBeta ? ".beta" : ".bias");
}

void BatchNorm2d::buffers(std::vector<BufferSlot>& out) {
  out.push_back({name_ + ".running_mean", &running_mean_});
  out.push_back({name_ + ".running_var", &running_var_});
}

std::size_t BatchNorm2d::activation_bytes(const Shape& in) const {
  return 2 * float_bytes(in) + 2 * float_bytes({channels_});  // y, dx, saved mean and 1/std
}

// --- Linear ---------------------------------------------------------------------

Linear::Linear(Backend& backend, std::string name, int in_features, int out_features)
    : Layer(backend, std::move(name)), in_(in_features), out_(out_features) {}

Shape Linear::output_shape(const Shape& in) const {
  if (in.size() != 2 || in[1] != in_) {
    throw InvalidArgument("Linear '" + name_ + "' expects (N, " + std::to_string(in_) + "), got " +
                          shape_to_string(in));
  }
  return {in[0], out_};
}

const Tensor& Linear::forward(const Tensor& x, bool) {
  ensure(y_, output_shape(x.shape()));
  x_ = x;
  backend_->linear_forward(x, weight_, bias_, y_);
  return y_;
}

const Tensor& Linear::backward(const Tensor& dy) {
  Tensor none;
  if (input_grad_) ensure(dx_, x_.shape());
  backend_->linear_backward(x_, weight_, dy, input_grad_ ? dx_ : none, weight_grad_, bias_grad_);
  return input_grad_ ? dx_ : none_tensor();
}

void Linear::release_activations() {
  x_ = y_ = dx_ = Tensor();
}

void Linear::parameters(std::vector<ParamSlot>& out) {
  out.push_back({name_ + ".weight", {out_, in_}, Init::kHe, in_, &weight_, &weight_grad_});
  out.push_back({name_ + ".bias", {out_}, Init::kZeros, 1, &bias_, &bias_grad_});
}

std::size_t Linear::activation_bytes(const Shape& in) const {
  return float_bytes(output_shape(in)) + (input_grad_ ? float_bytes(in) : 0);
}

}  // namespace stoke::nn
