// Layers without parameters: ReLU, pooling, global average pooling, flatten,
// dropout.
#include "stoke/error.hpp"
#include "stoke/nn/layers.hpp"

namespace stoke::nn {

namespace {
std::size_t float_bytes(const Shape& s) {
  return static_cast<std::size_t>(shape_numel(s)) * sizeof(float);
}
}  // namespace

const Tensor& Relu::forward(const Tensor& x, bool) {
  ensure(y_, x.shape());
  backend_->relu_forward(x, y_);
  return y_;
}

const Tensor& Relu::backward(const Tensor& dy) {
  ensure(dx_, y_.shape());
  backend_->relu_backward(y_, dy, dx_);
  return dx_;
}

Tensor& Relu::fused_output(const Shape& shape) {
  ensure(y_, shape);
  ensure(dx_, shape);
  return y_;
}

void Relu::release_activations() {
  y_ = dx_ = Tensor();
}

std::size_t Relu::activation_bytes(const Shape& in) const {
  return 2 * float_bytes(in);
}

Pool2d::Pool2d(Backend& backend, std::string name, PoolKind kind, Pool2dParams params)
    : Layer(backend, std::move(name)), kind_(kind), params_(params) {}

Shape Pool2d::output_shape(const Shape& in) const {
  if (in.size() != 4)
    throw InvalidArgument("Pool2d '" + name_ + "' expects (N, C, H, W), got " +
                          shape_to_string(in));
  return {in[0], in[1], conv_output_size(in[2], params_.kernel_h, params_.stride_h, params_.pad_h),
          conv_output_size(in[3], params_.kernel_w, params_.stride_w, params_.pad_w)};
}

const Tensor& Pool2d::forward(const Tensor& x, bool) {
  ensure(y_, output_shape(x.shape()));
  x_ = x;
  if (kind_ == PoolKind::kMax) {
    backend_->max_pool2d_forward(x, y_, params_);
  } else {
    backend_->avg_pool2d_forward(x, y_, params_);
  }
  return y_;
}

const Tensor& Pool2d::backward(const Tensor& dy) {
  ensure(dx_, x_.shape());
  if (kind_ == PoolKind::kMax) {
    backend_->max_pool2d_backward(x_, y_, dy, dx_, params_);
  } else {
    backend_->avg_pool2d_backward(dy, dx_, params_);
  }
  return dx_;
}

void Pool2d::release_activations() {
  x_ = y_ = dx_ = Tensor();
}

std::size_t Pool2d::activation_bytes(const Shape& in) const {
  return float_bytes(output_shape(in)) + float_bytes(in);
}

Shape GlobalAvgPool::output_shape(const Shape& in) const {
  if (in.size() != 4) {
    throw InvalidArgument("GlobalAvgPool '" + name_ + "' expects (N, C, H, W), got " +
                          shape_to_string(in));
  }
  return {in[0], in[1]};
}

const Tensor& GlobalAvgPool::forward(const Tensor& x, bool) {
  ensure(y_, output_shape(x.shape()));
  in_shape_ = x.shape();
  backend_->global_avg_pool_forward(x, y_);
  return y_;
}

const Tensor& GlobalAvgPool::backward(const Tensor& dy) {
  ensure(dx_, in_shape_);
  backend_->global_avg_pool_backward(dy, dx_);
  return dx_;
}

void GlobalAvgPool::release_activations() {
  y_ = dx_ = Tensor();
}

std::size_t GlobalAvgPool::activation_bytes(const Shape& in) const {
  return float_bytes(output_shape(in)) + float_bytes(in);
}

Shape Flatten::output_shape(const Shape& in) const {
  if (in.empty()) throw InvalidArgument("Flatten '" + name_ + "' needs a batch dimension");
  return {in[0], in[0] ? shape_numel(in) / in[0] : 0};
}

const Tensor& Flatten::forward(const Tensor& x, bool) {
  in_shape_ = x.shape();
  y_ = x.reshaped(output_shape(x.shape()));
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dy) {
  dx_ = dy.reshaped(in_shape_);
  return dx_;
}

void Flatten::release_activations() {
  y_ = dx_ = Tensor();
}

Dropout::Dropout(Backend& backend, std::string name, float p, std::uint64_t seed)
    : Layer(backend, std::move(name)), p_(p), seed_(seed) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw InvalidArgument("Dropout '" + name_ + "': p must be in [0, 1), got " + std::to_string(p));
  }
}

const Tensor& Dropout::forward(const Tensor& x, bool training) {
  identity_ = !training || p_ == 0.0f;
  if (identity_) {
    y_ = x;
    return y_;
  }
  if (!mask_.defined() || mask_.shape() != x.shape()) {
    y_ = Tensor(*backend_, x.shape());
    mask_ = Tensor(*backend_, x.shape());
    allocations_ += 2;
  }
  backend_->dropout_forward(x, y_, mask_, p_, seed_ + 0x9E3779B97F4A7C15ull * ++calls_);
  return y_;
}

const Tensor& Dropout::backward(const Tensor& dy) {
  if (identity_) {
    dx_ = dy;
    return dx_;
  }
  ensure(dx_, dy.shape());
  backend_->dropout_backward(dy, mask_, dx_);
  return dx_;
}

void Dropout::release_activations() {
  x_ = y_ = mask_ = dx_ = Tensor();
}

std::size_t Dropout::activation_bytes(const Shape& in) const {
  return p_ == 0.0f ? 0 : 3 * float_bytes(in);
}

}  // namespace stoke::nn
