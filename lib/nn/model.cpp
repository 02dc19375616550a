// Model: flat parameter block, initialization, memory plan.
#include "stoke/nn/model.hpp"

#include <cmath>
#include <random>
#include <vector>

#include "nn/fused_inference.hpp"
#include "stoke/error.hpp"

namespace stoke::nn {

namespace {
constexpr std::int64_t kAlignFloats = 16;  // 64-byte aligned parameter views
std::int64_t aligned(std::int64_t n) {
  return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}
}  // namespace

Model::Model(ModelSpec spec, std::unique_ptr<Sequential> net, std::uint64_t seed,
             Initialization init)
    : spec_(std::move(spec)), net_(std::move(net)) {
  if (!net_) throw InvalidArgument("Model: null network");
  net_->set_input_grad(false);  // nothing upstream of the input needs its gradient
  net_->parameters(slots_);
  net_->buffers(buffers_);
  std::int64_t total = 0;
  for (const ParamSlot& s : slots_) total += aligned(shape_numel(s.shape));
  param_count_ = 0;
  for (const ParamSlot& s : slots_) param_count_ += shape_numel(s.shape);
  Backend& be = net_->backend();
  params_ = Tensor(be, {std::max<std::int64_t>(total, 1)});
  grads_ = Tensor(be, {std::max<std::int64_t>(total, 1)});
  be.fill(params_, 0.0f);  // the alignment gaps stay zero, so sweeps over them are harmless
  be.fill(grads_, 0.0f);
  std::int64_t offset = 0;
  for (ParamSlot& s : slots_) {
    slot_offsets_.push_back(offset);
    *s.value = params_.view(offset, s.shape);
    *s.grad = grads_.view(offset, s.shape);
    offset += aligned(shape_numel(s.shape));
  }
  std::size_t slots = 0;
  for (const auto& layer : net_->layers()) {
    std::vector<ParamSlot> mine;
    layer->parameters(mine);
    slots += mine.size();
    layer_slot_end_.push_back(slots);
  }
  if (init == Initialization::kRandom) {
    initialize(seed);
  } else {
    reset_buffers();  // the parameters stay the zeros written above
  }
}

Model::~Model() = default;

void Model::initialize(std::uint64_t seed) {
  parameters_changed();
  std::mt19937_64 rng(seed);
  std::vector<float> host(static_cast<std::size_t>(params_.numel()), 0.0f);
  std::int64_t offset = 0;
  for (const ParamSlot& s : slots_) {
    const std::int64_t n = shape_numel(s.shape);
    float* p = host.data() + offset;
    if (s.init == Init::kHe) {
      std::normal_distribution<float> dist(
          0.0f, std::sqrt(2.0f / static_cast<float>(std::max<std::int64_t>(s.fan_in, 1))));
      for (std::int64_t i = 0; i < n; ++i) p[i] = dist(rng);
    } else {
      std::fill(p, p + n, s.init == Init::kOnes ? 1.0f : 0.0f);
    }
    offset += aligned(n);
  }
  params_.copy_from_host(host.data());
  reset_buffers();
}

void Model::reset_buffers() {
  Backend& be = net_->backend();
  for (const BufferSlot& b : buffers_) {
    be.fill(*b.value, b.name.ends_with("running_var") ? 1.0f : 0.0f);
  }
}

const Tensor& Model::forward(const Tensor& x, bool training) {
  if (x.rank() != 4 || x.dim(1) != spec_.in_channels || x.dim(2) != spec_.height ||
      x.dim(3) != spec_.width) {
    throw InvalidArgument("Model::forward: input " + shape_to_string(x.shape()) +
                          " does not match the model's " +
                          shape_to_string(input_shape(x.rank() > 0 ? x.dim(0) : 0)));
  }
  if (!training) return inference_forward(x);
  parameters_changed();  // the update that follows, and batch norm's running statistics
  if (frozen_ == 0) return net_->forward(x, true);
  const auto& layers = net_->layers();
  const Tensor* t = &x;
  for (std::size_t i = 0; i < layers.size(); ++i)
    t = &layers[i]->forward(*t, training && static_cast<int>(i) >= frozen_);
  return *t;
}

void Model::backward(const Tensor& dlogits, const GradientsReady& ready) {
  if (!ready) {
    net_->backward_from(dlogits, static_cast<std::size_t>(frozen_), {});
    return;
  }
  // Layer i's gradients start at its first slot's offset (the block's end
  // when it has none): once its pass is issued, everything from there on is final.
  const auto layer_begin = [this](std::size_t i) {
    return slot_offset(i == 0 ? 0 : layer_slot_end_[i - 1]);
  };
  std::int64_t reported = grads_.numel();
  net_->backward_from(dlogits, static_cast<std::size_t>(frozen_), [&](std::size_t i) {
    if (layer_begin(i) < reported) ready(reported = layer_begin(i));
  });
  // Frozen layers' gradients are not computed: they are as final as they get.
  if (reported > 0) ready(0);
}

std::vector<NamedTensor> Model::named_parameters() const {
  parameters_changed();  // the tensors are writable views
  std::vector<NamedTensor> out;
  for (const ParamSlot& s : slots_) out.push_back({s.name, *s.value});
  return out;
}

const Tensor& Model::inference_forward(const Tensor& x) {
  if (!inference_) {
    inference_ = std::make_unique<FusedInference>(*net_);
  } else if (inference_stale_) {
    inference_->refold();
  }
  inference_stale_ = false;
  return inference_->forward(x);
}

void Model::release_activations() {
  inference_.reset();  // its folded weights and activation slots
  net_->release_activations();
}

std::vector<NamedTensor> Model::named_buffers() const {
  parameters_changed();
  std::vector<NamedTensor> out;
  for (const BufferSlot& b : buffers_) out.push_back({b.name, *b.value});
  return out;
}

MemoryPlan Model::memory_plan(std::int64_t batch, int optimizer_slots) const {
  MemoryPlan plan;
  plan.batch = batch;
  plan.parameters = params_.bytes();
  for (const BufferSlot& b : buffers_) plan.parameters += b.value->bytes();
  plan.gradients = grads_.bytes();
  plan.optimizer_state = static_cast<std::size_t>(std::max(optimizer_slots, 0)) * params_.bytes();
  if (optimizer_slots > 0)
    plan.optimizer_state += parameter_groups().size() * kOptimizerStepValues * sizeof(float);
  const Shape in = input_shape(batch);
  plan.activations = net_->activation_bytes(in);
  // Loss buffers of a TrainStep: probabilities and dlogits (N, classes), loss and correct (1);
  // of a SegmentationStep without Dice: probabilities and dlogits (N, classes, H, W), loss (2).
  const std::int64_t pixels =
      spec_.is_segmentation() ? static_cast<std::int64_t>(spec_.height) * spec_.width : 1;
  plan.activations += 2 * static_cast<std::size_t>(batch * spec_.classes * pixels) * sizeof(float) +
                      2 * sizeof(float);
  plan.workspace = net_->workspace_bytes(in);
  return plan;
}

std::string Model::summary() const {
  std::string out;
  net_->describe(out, 0, input_shape(1));
  out += "parameters: " + std::to_string(param_count_) + "\n";
  return out;
}

}  // namespace stoke::nn
