// Models: a network of layers, its parameters in one flat block, seeded He
// initialization, and a memory plan for a batch size. Built from a ModelSpec
// (which checkpoints store, so inference can rebuild the same network).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stoke/nn/layers.hpp"

namespace stoke::nn {

enum class Architecture : std::uint8_t {
  kResNet,    // stem conv3x3-bn-relu, stages of basic blocks, GAP, linear
  kPlainCnn,  // per width: conv3x3-bn-relu, 2x2 max pool; then GAP, dropout, linear
};

struct STOKE_API ModelSpec {
  Architecture architecture = Architecture::kResNet;
  int in_channels = 1;
  int height = 28;
  int width = 28;
  int classes = 10;
  int stem_width = 32;                    // ResNet stem output channels
  std::vector<int> widths = {32, 64, 128};  // one per stage (ResNet) or conv (plain)
  std::vector<int> strides = {1, 2, 2};     // first block of each stage (ResNet)
  int blocks_per_stage = 2;
  float dropout = 0.0f;  // before the classifier (plain CNN)

  // "key=value" pairs and back, for checkpoints. from_map: InvalidArgument
  // naming the key when a value is missing or malformed.
  std::map<std::string, std::string> to_map() const;
  static ModelSpec from_map(const std::map<std::string, std::string>& map);
};

// Per-step values an optimizer keeps on the device (learning rate, bias
// corrections), read by the update when it executes: one small tensor.
inline constexpr std::int64_t kOptimizerStepValues = 4;

// Bytes a training step needs at one batch size, by kind. The CPU backend's
// counting allocator measures the same figures (see nn_model_test).
struct MemoryPlan {
  std::int64_t batch = 0;
  std::size_t parameters = 0;       // weights and buffers (running statistics)
  std::size_t gradients = 0;
  std::size_t optimizer_state = 0;  // optimizer_slots x the parameter block + the step values
  std::size_t activations = 0;      // layer outputs, saved statistics, input gradients, loss buffers
  std::size_t workspace = 0;        // the largest op workspace
  std::size_t total() const noexcept {
    return parameters + gradients + optimizer_state + activations + workspace;
  }
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

class STOKE_API Model {
 public:
  // Takes the network; allocates the flat parameter and gradient blocks on
  // the network's backend and initializes them with `seed`.
  Model(ModelSpec spec, std::unique_ptr<Sequential> net, std::uint64_t seed);

  const ModelSpec& spec() const noexcept { return spec_; }
  Backend& backend() const noexcept { return net_->backend(); }
  Shape input_shape(std::int64_t batch) const {
    return {batch, spec_.in_channels, spec_.height, spec_.width};
  }

  // x (N, C, H, W) -> logits (N, classes); valid until the next forward.
  const Tensor& forward(const Tensor& x, bool training);
  // Gradients of the last training forward, written to gradients().
  void backward(const Tensor& dlogits);
  // Frees every layer's activations (see Layer::release_activations).
  void release_activations();

  // The flat blocks: parameter i is a view at an offset aligned to 64 bytes.
  Tensor& parameters() noexcept { return params_; }
  const Tensor& parameters() const noexcept { return params_; }
  Tensor& gradients() noexcept { return grads_; }
  std::vector<NamedTensor> named_parameters() const;
  std::vector<NamedTensor> named_buffers() const;
  std::int64_t parameter_count() const noexcept { return param_count_; }

  // Re-initializes: He normal for conv/linear weights (std sqrt(2 / fan_in)),
  // zeros for biases and beta, ones for gamma; running stats reset.
  void initialize(std::uint64_t seed);

  // optimizer_slots: Optimizer::slots() (1 for SGD, 2 for Adam).
  MemoryPlan memory_plan(std::int64_t batch, int optimizer_slots) const;
  std::string summary() const;
  Sequential& network() noexcept { return *net_; }

 private:
  ModelSpec spec_;
  std::unique_ptr<Sequential> net_;
  std::vector<ParamSlot> slots_;
  std::vector<BufferSlot> buffers_;
  Tensor params_, grads_;
  std::int64_t param_count_ = 0;
};

// Builds the network a spec describes on `backend`, initialized with `seed`.
STOKE_API std::unique_ptr<Model> build_model(Backend& backend, const ModelSpec& spec, std::uint64_t seed);

}  // namespace stoke::nn
