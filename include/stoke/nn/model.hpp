// Models: a network of layers, its parameters in one flat block, seeded He
// initialization, and a memory plan for a batch size. Built from a ModelSpec
// (which checkpoints store, so inference can rebuild the same network).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stoke/nn/layers.hpp"

namespace stoke::nn {

enum class Architecture : std::uint8_t {
  kResNet,    // stem conv3x3-bn-relu, stages of basic blocks, GAP, linear
  kPlainCnn,  // per width: conv3x3-bn-relu, 2x2 max pool; then GAP, dropout, linear
  // torchvision's topology and parameter names: 7x7/2 stem, 3x3/2 max pool,
  // four stages (64, 128, 256, 512 channels x width_multiplier), GAP, fc.
  kResNet18,  // basic blocks 2-2-2-2
  kResNet34,  // basic blocks 3-4-6-3
  kResNet50,  // bottleneck blocks 3-4-6-3 (expansion 4, stride on the 3x3)
  // torchvision's wide_resnet50_2: kResNet50 with each bottleneck's inner
  // (1x1 -> 3x3) width doubled; block outputs as kResNet50.
  kWideResNet50_2,
};

// "resnet", "plain_cnn", "resnet18", "resnet34", "resnet50", "wide_resnet50_2" and back;
// architecture_from_name: InvalidArgument listing the names for anything else.
STOKE_API const char* architecture_name(Architecture architecture) noexcept;
STOKE_API Architecture architecture_from_name(const std::string& name);
// True for the torchvision backbones (kResNet18/34/50, kWideResNet50_2).
STOKE_API bool is_torchvision_resnet(Architecture architecture) noexcept;

struct STOKE_API ModelSpec {
  Architecture architecture = Architecture::kResNet;
  int in_channels = 1;
  int height = 28;
  int width = 28;
  int classes = 10;
  int stem_width = 32;                      // ResNet stem output channels
  std::vector<int> widths = {32, 64, 128};  // one per stage (ResNet) or conv (plain)
  std::vector<int> strides = {1, 2, 2};     // first block of each stage (ResNet)
  int blocks_per_stage = 2;
  float dropout = 0.0f;  // before the classifier (plain CNN)
  // torchvision backbones: channels are round(64 x multiplier) x {1, 2, 4, 8}
  // (at least 1); stem_width, widths, strides and blocks_per_stage do not apply.
  float width_multiplier = 1.0f;
  // The nonlinearity after each convolution's batch norm and each block's
  // add (what the fused ops and the ONNX export apply). "relu" is the one
  // implemented; from_map and build_model refuse any other, naming it.
  std::string activation = "relu";
  // Non-empty: a U-Net segmentation model (docs/segmentation-model.md) on the
  // torchvision encoder `architecture` names, these five counts the decoder
  // blocks' channels (segmentation_models_pytorch's default: 256, 128, 64, 32,
  // 16); logits (N, classes, height, width). Empty: a classifier.
  std::vector<int> decoder_channels;
  bool is_segmentation() const noexcept { return !decoder_channels.empty(); }

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
  std::size_t parameters = 0;  // weights and buffers (running statistics)
  std::size_t gradients = 0;
  std::size_t optimizer_state = 0;  // optimizer_slots x the parameter block + the step values
  std::size_t activations = 0;  // layer outputs, saved statistics, input gradients, loss buffers
  std::size_t workspace = 0;    // the largest op workspace
  std::size_t total() const noexcept {
    return parameters + gradients + optimizer_state + activations + workspace;
  }
};

// A contiguous range of the flat parameter block that the optimizer updates,
// with its learning-rate multiplier. Frozen layers' parameters are in none.
struct ParameterGroup {
  std::int64_t offset = 0;
  std::int64_t count = 0;
  float lr_multiplier = 1.0f;
  // Weight decay applies. False for a range of 1-D parameters (biases,
  // batch-norm scales and shifts) when they are excluded from decay.
  bool decay = true;
};

class FusedInference;  // lib/nn/fused_inference.hpp

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// What a new model's parameters start as: initialize(seed)'s draw, or (kNone)
// zeros and the buffers' defaults, for a model whose every parameter and
// buffer is about to be loaded (the draw costs ~1 s for Wide-ResNet-50-2).
enum class Initialization { kRandom, kNone };

class STOKE_API Model {
 public:
  // Takes the network; allocates the flat parameter and gradient blocks on
  // the network's backend and initializes them with `seed` (see Initialization).
  Model(ModelSpec spec, std::unique_ptr<Sequential> net, std::uint64_t seed,
        Initialization init = Initialization::kRandom);
  ~Model();

  const ModelSpec& spec() const noexcept { return spec_; }
  Backend& backend() const noexcept { return net_->backend(); }
  Shape input_shape(std::int64_t batch) const {
    return {batch, spec_.in_channels, spec_.height, spec_.width};
  }

  // x (N, C, H, W) -> logits (N, classes), or (N, classes, H, W) for a
  // segmentation spec; valid until the next forward.
  // Eval mode (training false) runs the inference plan: batch norm folded,
  // fused convolutions, the backend's layouts (lib/nn/fused_inference.hpp),
  // built on the first eval forward and refolded after the weights changed;
  // a segmentation model's eval forward runs its layers in eval mode instead.
  const Tensor& forward(const Tensor& x, bool training);
  // Tells the model that its parameters or buffers were written from outside
  // (through a tensor taken earlier): the next eval forward refolds. Training
  // forwards, initialize() and every accessor that hands out writable
  // parameters (parameters(), named_parameters(), named_buffers(), network())
  // do it themselves.
  void parameters_changed() const noexcept { inference_stale_ = true; }
  // Told during backward, after each top-level layer's pass has been issued:
  // every gradient at offset >= first (in floats, into gradients()) is now
  // final for this batch, the ones below are still to come. Offsets only
  // fall; the last call says 0. (On a GPU backend "issued" is not "done":
  // wait for the stream before reading.)
  using GradientsReady = std::function<void(std::int64_t first)>;
  // Gradients of the last training forward, written to gradients(); `ready`
  // (may be empty) follows its progress, for a data-parallel allreduce that
  // starts on the last layers' gradients while the first layers' are computed.
  void backward(const Tensor& dlogits, const GradientsReady& ready = {});
  // Frees every layer's activations (see Layer::release_activations).
  void release_activations();
  // Activation tensors the layers allocated so far: unchanged means every
  // layer output, saved statistic and input gradient is where it was (what a
  // captured CUDA graph needs before it replays).
  std::uint64_t activation_allocations() const noexcept { return net_->activation_allocations(); }

  // The flat blocks: parameter i is a view at an offset aligned to 64 bytes.
  Tensor& parameters() noexcept {
    parameters_changed();
    return params_;
  }
  const Tensor& parameters() const noexcept { return params_; }
  Tensor& gradients() noexcept { return grads_; }
  const Tensor& gradients() const noexcept { return grads_; }
  std::vector<NamedTensor> named_parameters() const;
  std::vector<NamedTensor> named_buffers() const;
  std::int64_t parameter_count() const noexcept { return param_count_; }

  // Re-initializes: He normal for conv/linear weights (std sqrt(2 / fan_in)),
  // zeros for biases and beta, ones for gamma; running stats reset.
  void initialize(std::uint64_t seed);

  // Fine-tuning. Stages: the four layerN of a torchvision backbone, the width
  // stages of the other architectures; stage 1 includes the stem.
  int stage_count() const noexcept;
  // Top-level layers of the network up to the end of stage `stages` (0..stage_count()).
  int stage_end(int stages) const;
  // The first `layers` top-level layers are frozen: they run in inference mode
  // (batch norm uses and keeps its running statistics), get no backward pass,
  // and their parameters are in no ParameterGroup, so no optimizer updates
  // them (nor decays them). 0 unfreezes. Set it before building the optimizer.
  void freeze_layers(int layers);
  void freeze_stages(int stages) { freeze_layers(stage_end(stages)); }
  int frozen_layers() const noexcept { return frozen_; }
  // Learning-rate multiplier per stage (entry i: stage i + 1); layers after the
  // last stage (pooling, head) and missing entries take 1. InvalidArgument for
  // more entries than stages or a negative or non-finite multiplier.
  void set_stage_lr_multipliers(std::vector<float> multipliers);
  // What the optimizer updates: one group over the whole block unless layers
  // are frozen or multipliers differ from 1. `split_decay`: the ranges of 1-D
  // parameters (biases, batch-norm scales and shifts) become groups of their
  // own with decay false, as timm and most recipes leave them undecayed.
  std::vector<ParameterGroup> parameter_groups(bool split_decay = false) const;

  // optimizer_slots: Optimizer::slots() (1 for SGD, 2 for Adam). With frozen
  // layers the activations are an upper bound (frozen layers keep no
  // statistics and need no gradients); otherwise the plan is exact.
  MemoryPlan memory_plan(std::int64_t batch, int optimizer_slots) const;
  std::string summary() const;
  Sequential& network() noexcept {
    parameters_changed();
    return *net_;
  }
  const Sequential& network() const noexcept { return *net_; }

 private:
  void reset_buffers();  // running means 0, running variances 1
  ModelSpec spec_;
  std::unique_ptr<Sequential> net_;
  std::vector<ParamSlot> slots_;
  std::vector<BufferSlot> buffers_;
  Tensor params_, grads_;
  std::int64_t param_count_ = 0;
  std::vector<std::int64_t> slot_offsets_;   // per slot, in floats (64-byte aligned)
  std::vector<std::size_t> layer_slot_end_;  // per top-level layer: end of its slots
  std::vector<ParameterGroup> parameter_groups_by_stage() const;  // frozen layers, multipliers
  // Where slot `slot` starts in the flat blocks; the block's end past the last.
  std::int64_t slot_offset(std::size_t slot) const {
    return slot < slot_offsets_.size() ? slot_offsets_[slot] : params_.numel();
  }
  int frozen_ = 0;
  std::vector<float> stage_lr_;
  const Tensor& inference_forward(const Tensor& x);
  std::unique_ptr<FusedInference> inference_;  // built by the first eval forward
  mutable bool inference_stale_ = true;
};

// Builds the network a spec describes on `backend`, initialized with `seed`
// (kNone: left for a checkpoint to fill; the seed still seeds dropout).
STOKE_API std::unique_ptr<Model> build_model(Backend& backend, const ModelSpec& spec,
                                             std::uint64_t seed,
                                             Initialization init = Initialization::kRandom);

}  // namespace stoke::nn
