// Layers: the building blocks of a Model. A layer owns its output and
// input-gradient tensors (allocated on its backend at the first call for a
// shape and reused after), keeps what its backward pass needs, and declares
// its parameters as slots that the Model binds to views of one flat block.
// Every computation goes through the Backend interface, so one layer runs on
// any backend. Layers are used by one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/tensor.hpp"

namespace stoke::nn {

enum class Init : std::uint8_t { kHe, kZeros, kOnes };

// A parameter to be placed in the model's flat block. value/grad point to the
// layer's members, which the Model sets to views of the parameter and gradient blocks.
struct ParamSlot {
  std::string name;
  Shape shape;
  Init init = Init::kHe;
  std::int64_t fan_in = 1;  // for He initialization: std = sqrt(2 / fan_in)
  Tensor* value = nullptr;
  Tensor* grad = nullptr;
};

// State that is saved but not trained (batch-norm running statistics).
struct BufferSlot {
  std::string name;
  Tensor* value = nullptr;
};

class Conv2d;
class BatchNorm2d;
class Relu;
class Pool2d;
class GlobalAvgPool;
class Flatten;
class Linear;
class Dropout;
class Sequential;
class Residual;
class Unet;

// One overload per layer type: Layer::accept calls the one of the layer's own
// type, so code that treats layer types differently (inference planning, ONNX
// export and import, weight import, trainer state) names the types it handles
// instead of trying casts. A new layer type adds its overload here and in
// visit_layer's adapter (below the layers); every visit_layer call then
// decides about it explicitly or through its `const Layer&` fallback.
class STOKE_API LayerVisitor {
 public:
  virtual ~LayerVisitor() = default;
  virtual void visit(const Conv2d& layer) = 0;
  virtual void visit(const BatchNorm2d& layer) = 0;
  virtual void visit(const Relu& layer) = 0;
  virtual void visit(const Pool2d& layer) = 0;
  virtual void visit(const GlobalAvgPool& layer) = 0;
  virtual void visit(const Flatten& layer) = 0;
  virtual void visit(const Linear& layer) = 0;
  virtual void visit(const Dropout& layer) = 0;
  virtual void visit(const Sequential& layer) = 0;
  virtual void visit(const Residual& layer) = 0;  // and its subclasses (BasicBlock)
  virtual void visit(const Unet& layer) = 0;      // stoke/nn/unet.hpp
};

class STOKE_API Layer {
 public:
  Layer(Backend& backend, std::string name) : backend_(&backend), name_(std::move(name)) {}
  virtual ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const noexcept { return name_; }
  Backend& backend() const noexcept { return *backend_; }

  // InvalidArgument when the layer cannot take `in`.
  virtual Shape output_shape(const Shape& in) const = 0;
  // Returns the layer's output tensor (valid until the next forward).
  virtual const Tensor& forward(const Tensor& x, bool training) = 0;
  // Requires the forward of the same batch before. Returns dx (undefined when
  // input gradients are off) and writes the parameter gradients.
  virtual const Tensor& backward(const Tensor& dy) = 0;

  virtual void parameters(std::vector<ParamSlot>& out);
  virtual void buffers(std::vector<BufferSlot>& out);
  // Bytes this layer allocates for one training step at input shape `in`
  // (outputs, saved statistics, input gradients); the memory plan sums them.
  virtual std::size_t activation_bytes(const Shape& in) const = 0;
  // Largest backend workspace one of its ops takes at input shape `in`.
  virtual std::size_t workspace_bytes(const Shape& in) const;
  // The first layer of a model needs no input gradient.
  virtual void set_input_grad(bool needed) { input_grad_ = needed; }
  // One line per layer, indented by depth.
  virtual void describe(std::string& out, int depth, const Shape& in) const;
  // Calls visitor.visit with this layer as its own type (see LayerVisitor).
  virtual void accept(LayerVisitor& visitor) const = 0;
  // Frees the tensors kept between forward and backward (outputs, saved
  // statistics, input gradients); the next forward allocates them again.
  // After a failed step (out of memory) the trainer calls it so that the
  // failed step's activations do not stay allocated.
  virtual void release_activations() = 0;
  // Activation tensors allocated so far by this layer and the layers inside
  // it. Whoever keeps raw pointers to them (a captured CUDA graph) compares
  // it before reuse: a change means some buffer moved.
  virtual std::uint64_t activation_allocations() const noexcept { return allocations_; }

 protected:
  // (Re)allocates t on the layer's backend when its shape differs (counted).
  void ensure(Tensor& t, const Shape& shape) const;
  // The undefined tensor returned as "no input gradient".
  static const Tensor& none_tensor();

  Backend* backend_;
  std::string name_;
  bool input_grad_ = true;
  mutable std::uint64_t allocations_ = 0;  // see activation_allocations()
};

class STOKE_API Conv2d final : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  Conv2d(Backend& backend, std::string name, int in_channels, int out_channels, int kernel,
         Conv2dParams params = {}, bool bias = false);
  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  void parameters(std::vector<ParamSlot>& out) override;
  std::size_t activation_bytes(const Shape& in) const override;
  std::size_t workspace_bytes(const Shape& in) const override;
  // For inference folding (lib/nn/fused_inference.cpp).
  const Conv2dParams& params() const noexcept { return params_; }
  const Tensor& weight() const noexcept { return weight_; }
  const Tensor& bias() const noexcept { return bias_; }  // undefined without bias
  // For ONNX export and import (lib/interchange/).
  int in_channels() const noexcept { return in_channels_; }
  int out_channels() const noexcept { return out_channels_; }
  int kernel() const noexcept { return kernel_; }
  bool has_bias() const noexcept { return has_bias_; }

 private:
  int in_channels_, out_channels_, kernel_;
  Conv2dParams params_;
  bool has_bias_;
  Tensor weight_, weight_grad_, bias_, bias_grad_, x_, y_, dx_;
};

// How a batch norm names its scale and shift: stoke's own nets say gamma and
// beta, the torchvision backbones weight and bias (torchvision's state_dict names).
enum class BnNames : std::uint8_t { kGammaBeta, kWeightBias };

class STOKE_API BatchNorm2d final : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  BatchNorm2d(Backend& backend, std::string name, int channels, BatchNormParams params = {},
              BnNames names = BnNames::kGammaBeta);
  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  void parameters(std::vector<ParamSlot>& out) override;
  void buffers(std::vector<BufferSlot>& out) override;
  std::size_t activation_bytes(const Shape& in) const override;
  // For inference folding (lib/nn/fused_inference.cpp).
  const BatchNormParams& params() const noexcept { return params_; }
  const Tensor& gamma() const noexcept { return gamma_; }
  const Tensor& beta() const noexcept { return beta_; }
  const Tensor& running_mean() const noexcept { return running_mean_; }
  const Tensor& running_var() const noexcept { return running_var_; }
  // For ONNX export and import (lib/interchange/).
  int channels() const noexcept { return channels_; }
  // The names of the scale and shift parameters ("<name>.gamma" or "<name>.weight").
  std::string scale_name() const;
  std::string shift_name() const;

  // Training with the ReLU that follows folded in (Sequential does this on
  // every backend, through the fused ops): forward_relu writes max(BN(x), 0)
  // to y (x's shape); backward_relu takes that y and dy at it and returns dx.
  // fused_relu(): the last training forward was forward_relu.
  void forward_relu(const Tensor& x, Tensor& y);
  const Tensor& backward_relu(const Tensor& y, const Tensor& dy);
  bool fused_relu() const noexcept { return fused_relu_; }

 private:
  int channels_;
  BatchNormParams params_;
  BnNames names_;
  Tensor gamma_, gamma_grad_, beta_, beta_grad_, running_mean_, running_var_;
  Tensor save_mean_, save_invstd_, x_, y_, dx_;
  bool fused_relu_ = false;
};

class STOKE_API Relu final : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  using Layer::Layer;
  Shape output_shape(const Shape& in) const override { return in; }
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  std::size_t activation_bytes(const Shape& in) const override;
  // Fused with the BatchNorm2d before it (Sequential): that layer writes this
  // one's output. The unfused path's tensors are kept (dx untouched), so the
  // memory plan is the same on every backend.
  Tensor& fused_output(const Shape& shape);
  const Tensor& output() const noexcept { return y_; }

 private:
  Tensor y_, dx_;
};

enum class PoolKind : std::uint8_t { kMax, kAverage };

class STOKE_API Pool2d final : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  Pool2d(Backend& backend, std::string name, PoolKind kind, Pool2dParams params);
  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  std::size_t activation_bytes(const Shape& in) const override;
  PoolKind kind() const noexcept { return kind_; }
  const Pool2dParams& params() const noexcept { return params_; }

 private:
  PoolKind kind_;
  Pool2dParams params_;
  Tensor x_, y_, dx_;
};

// (N, C, H, W) -> (N, C)
class STOKE_API GlobalAvgPool final : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  using Layer::Layer;
  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  std::size_t activation_bytes(const Shape& in) const override;

 private:
  Shape in_shape_;
  Tensor y_, dx_;
};

// (N, ...) -> (N, rest) as a view: no memory, no copy.
class STOKE_API Flatten final : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  using Layer::Layer;
  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  std::size_t activation_bytes(const Shape&) const override { return 0; }

 private:
  Shape in_shape_;
  Tensor y_, dx_;
};

// x (N, in) -> (N, out), with bias.
class STOKE_API Linear final : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  Linear(Backend& backend, std::string name, int in_features, int out_features);
  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  void parameters(std::vector<ParamSlot>& out) override;
  std::size_t activation_bytes(const Shape& in) const override;
  int in_features() const noexcept { return in_; }
  int out_features() const noexcept { return out_; }
  const Tensor& weight() const noexcept { return weight_; }  // (out, in)
  const Tensor& bias() const noexcept { return bias_; }      // (out)

 private:
  int in_, out_;
  Tensor weight_, weight_grad_, bias_, bias_grad_, x_, y_, dx_;
};

// Inverted dropout; the mask seed advances every training forward, so runs
// with the same seed draw the same masks. Identity at inference.
class STOKE_API Dropout final : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  Dropout(Backend& backend, std::string name, float p, std::uint64_t seed);
  Shape output_shape(const Shape& in) const override { return in; }
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  std::size_t activation_bytes(const Shape& in) const override;
  // The mask stream (seed, masks drawn so far); a resumed run sets it back.
  std::uint64_t seed() const noexcept { return seed_; }
  std::uint64_t draws() const noexcept { return calls_; }
  void restore_stream(std::uint64_t seed, std::uint64_t draws) noexcept {
    seed_ = seed;
    calls_ = draws;
  }

 private:
  float p_;
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
  bool identity_ = false;
  Tensor x_, y_, mask_, dx_;
};

// Layers applied in order.
class STOKE_API Sequential : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  using Layer::Layer;
  void add(std::unique_ptr<Layer> layer);
  const std::vector<std::unique_ptr<Layer>>& layers() const noexcept { return layers_; }

  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  // Backward through layers [first, size()) only, in reverse (the layers
  // below `first` are frozen: neither they nor their input get a gradient
  // pass); after(i) once layers i.. have had theirs (a fused batch norm +
  // ReLU pair reports once, for the batch norm). Returns the gradient with
  // respect to layer `first`'s input.
  const Tensor& backward_from(const Tensor& dy, std::size_t first,
                              const std::function<void(std::size_t)>& after);
  void release_activations() override;
  std::uint64_t activation_allocations() const noexcept override;
  void parameters(std::vector<ParamSlot>& out) override;
  void buffers(std::vector<BufferSlot>& out) override;
  std::size_t activation_bytes(const Shape& in) const override;
  std::size_t workspace_bytes(const Shape& in) const override;
  void set_input_grad(bool needed) override;
  void describe(std::string& out, int depth, const Shape& in) const override;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  const Tensor* last_ = nullptr;
};

// A residual block of any body: relu(main(x) + shortcut(x)), the shortcut
// null for identity. torchvision's basic and bottleneck blocks are built as
// this (lib/nn/resnet.cpp), so their parameters keep torchvision's names
// (layer1.0.conv1.weight, layer1.0.downsample.0.weight).
class STOKE_API Residual : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  Residual(Backend& backend, std::string name, std::unique_ptr<Sequential> main,
           std::unique_ptr<Sequential> shortcut);
  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  std::uint64_t activation_allocations() const noexcept override;
  void parameters(std::vector<ParamSlot>& out) override;
  void buffers(std::vector<BufferSlot>& out) override;
  std::size_t activation_bytes(const Shape& in) const override;
  std::size_t workspace_bytes(const Shape& in) const override;
  void describe(std::string& out, int depth, const Shape& in) const override;
  const Sequential& main() const noexcept { return *main_; }
  const Sequential& main_path() const noexcept {
    return *main_;
  }  // the name lib/nn/fused_inference.cpp uses
  const Sequential* shortcut() const noexcept { return shortcut_.get(); }  // null: identity

 private:
  std::unique_ptr<Sequential> main_, shortcut_;
  Tensor sum_, y_, dsum_, dx_;
};

// ResNet basic block: relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut(x)),
// the shortcut a 1x1 strided conv + bn when the shape changes, else identity.
// Sub-layers: <name>.conv1, .bn1, .relu1, .conv2, .bn2, .shortcut.conv, .shortcut.bn.
class STOKE_API BasicBlock final : public Residual {
 public:
  BasicBlock(Backend& backend, std::string name, int in_channels, int out_channels, int stride);
};

// segmentation_models_pytorch's Unet (docs/segmentation-model.md), built by
// build_model for a spec with decoder_channels: a torchvision ResNet encoder
// (`encoder`: encoder.conv1 .. encoder.layer4) whose features at strides 2,
// 4, 8, 16 and 32 feed five decoder blocks (decoder.blocks.i: nearest 2x
// upsampling, concatenation with the encoder feature of that size (none for
// the last block), then conv1 and conv2, each a 3x3 conv without bias, batch
// norm and ReLU as .0, .1, .2), and a 3x3 convolution with bias to the class
// logits at the input size (segmentation_head.0). The names are smp's
// state_dict names. Input sides must be multiples of 32.
class STOKE_API Unet final : public Layer {
 public:
  void accept(LayerVisitor& visitor) const override { visitor.visit(*this); }
  // encoder: conv1, bn1, relu, maxpool, layer1..layer4 (add_torchvision_trunk),
  // encoder_channels: the channels after the stem and after each layerN (5);
  // decoder_channels: each block's output channels (5, each >= 1); classes >= 2.
  Unet(Backend& backend, std::string name, std::unique_ptr<Sequential> encoder,
       std::vector<int> encoder_channels, const std::vector<int>& decoder_channels, int classes);
  Shape output_shape(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, bool training) override;
  const Tensor& backward(const Tensor& dy) override;
  void release_activations() override;
  std::uint64_t activation_allocations() const noexcept override;
  void parameters(std::vector<ParamSlot>& out) override;
  void buffers(std::vector<BufferSlot>& out) override;
  std::size_t activation_bytes(const Shape& in) const override;
  std::size_t workspace_bytes(const Shape& in) const override;
  void set_input_grad(bool needed) override;
  void describe(std::string& out, int depth, const Shape& in) const override;
  // The encoder's layers that end each of its 5 stages (strides 2 .. 32):
  // the stem (conv1, bn1, relu), maxpool + layer1, layer2, layer3, layer4.
  static constexpr std::array<std::size_t, 5> kStageEnd = {3, 5, 6, 7, 8};
  const Sequential& encoder() const noexcept { return *encoder_; }
  Sequential& encoder() noexcept { return *encoder_; }
  const std::vector<std::unique_ptr<Sequential>>& decoder_blocks() const noexcept {
    return blocks_;
  }
  const Conv2d& head() const noexcept { return *head_; }
  int classes() const noexcept { return classes_; }

 private:
  // The input shape of every part at input `in` (checked), for forward and the memory plan.
  struct Shapes {
    std::vector<Shape> features, up, cat;  // features: 5 encoder outputs; up, cat: per block
  };
  Shapes shapes(const Shape& in) const;
  std::unique_ptr<Sequential> encoder_;
  std::vector<int> encoder_channels_;
  std::vector<std::unique_ptr<Sequential>> blocks_;
  std::unique_ptr<Conv2d> head_;
  int classes_;
  std::vector<const Tensor*> features_;
  std::vector<Tensor> up_, cat_, dup_, dskip_, dprev_, dsum_;
};

namespace visit_detail {

template <class... F>
struct Handlers : F... {
  using F::operator()...;
};

// Hands each layer type to the handler overload that takes it.
template <class Fn, class R>
class HandlerVisitor final : public LayerVisitor {
 public:
  explicit HandlerVisitor(Fn& fn) : fn_(fn) {}
  void visit(const Conv2d& l) override { call(l); }
  void visit(const BatchNorm2d& l) override { call(l); }
  void visit(const Relu& l) override { call(l); }
  void visit(const Pool2d& l) override { call(l); }
  void visit(const GlobalAvgPool& l) override { call(l); }
  void visit(const Flatten& l) override { call(l); }
  void visit(const Linear& l) override { call(l); }
  void visit(const Dropout& l) override { call(l); }
  void visit(const Sequential& l) override { call(l); }
  void visit(const Residual& l) override { call(l); }
  void visit(const Unet& l) override { call(l); }
  R result() { return std::move(*result_); }

 private:
  template <class T>
  void call(const T& l) {
    if constexpr (std::is_void_v<R>) {
      fn_(l);
    } else {
      result_.emplace(fn_(l));
    }
  }
  Fn& fn_;
  std::optional<std::conditional_t<std::is_void_v<R>, int, R>> result_;
};

}  // namespace visit_detail

// Runs the handler (lambdas, one per layer type it treats specially) that
// takes `layer`'s own type, and returns its result; a handler taking
// `const Layer&` is required and takes every other type (it may throw, or
// return a default). Example:
//   visit_layer(l, [](const Conv2d& c) { return c.kernel(); },
//                  [](const Layer&) { return 0; });
template <class... F>
auto visit_layer(const Layer& layer, F&&... handlers) {
  visit_detail::Handlers<std::decay_t<F>...> fn{std::forward<F>(handlers)...};
  using R = decltype(fn(layer));
  visit_detail::HandlerVisitor<decltype(fn), R> v(fn);
  layer.accept(v);
  if constexpr (!std::is_void_v<R>) return v.result();
}

// `layer` as a T when it is one (or derives from one, for Residual), else null.
template <class T>
const T* layer_as(const Layer& layer) {
  return visit_layer(
      layer, [](const T& t) { return &t; }, [](const Layer&) -> const T* { return nullptr; });
}
// The same for a layer the caller may change.
template <class T>
T* layer_as(Layer& layer) {
  return const_cast<T*>(layer_as<T>(std::as_const(layer)));
}

}  // namespace stoke::nn
