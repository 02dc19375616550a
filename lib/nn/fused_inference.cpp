// Inference with batch norm folded and bias + residual + ReLU fused (see
// fused_inference.hpp). Folding: scale = gamma / sqrt(var + eps),
// w' = w * scale (per output channel), b' = (b - mean) * scale + beta.
#include "nn/fused_inference.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "backend/cpu/conv2d_fused.hpp"
#include "nn/fused_inference_step.hpp"

namespace stoke::nn {

void FoldedConv::fold(Backend& be, bool blocked_layout) {
  const Shape shape = conv->weight().shape();
  const auto k = static_cast<std::size_t>(shape[0]);
  std::vector<float> wv = conv->weight().to_vector();
  const std::size_t per = wv.size() / k;
  std::vector<float> bv =
      conv->bias().defined() ? conv->bias().to_vector() : std::vector<float>(k, 0.0f);
  if (bn) {
    const auto gamma = bn->gamma().to_vector(), beta = bn->beta().to_vector();
    const auto mean = bn->running_mean().to_vector(), var = bn->running_var().to_vector();
    for (std::size_t c = 0; c < k; ++c) {
      const double scale = gamma[c] / std::sqrt(static_cast<double>(var[c]) + bn->params().epsilon);
      for (std::size_t i = 0; i < per; ++i)
        wv[c * per + i] = static_cast<float>(wv[c * per + i] * scale);
      bv[c] = static_cast<float>((bv[c] - mean[c]) * scale + beta[c]);
    }
  }
  ensure_shape(be, w, shape);
  ensure_shape(be, b, {shape[0]});
  w.copy_from_host(wv.data());
  b.copy_from_host(bv.data());
  if (blocked_layout) blocked.set_weights(w, b, conv->params(), relu);
}

const Tensor& FoldedConv::run(Backend& be, const Tensor& x, const Tensor* residual) {
  if (cpu::conv2d_fused(be, x, w, b, residual, y, conv->params(), relu)) return y;
  // Elsewhere: the same arithmetic through the plain ops.
  if (!residual && !relu) {
    be.conv2d_forward(x, w, b, y, conv->params());
    return y;
  }
  ensure_shape(be, scratch, y.shape());
  be.conv2d_forward(x, w, b, scratch, conv->params());
  if (!residual) {
    be.relu_forward(scratch, y);
    return y;
  }
  be.add(scratch, *residual, y);
  if (!relu) return y;
  be.relu_forward(y, scratch);
  return scratch;
}

namespace {

template <class T>
const T* as(const std::unique_ptr<Layer>& layer) {
  return dynamic_cast<const T*>(layer.get());
}

// Conv2d at layers[i], with a BatchNorm2d of its channels and a Relu after it
// taken in; advances i past what it took.
FoldedConv take_conv(const std::vector<std::unique_ptr<Layer>>& layers, std::size_t& i) {
  FoldedConv fc;
  fc.conv = as<Conv2d>(layers[i]);
  const auto* bn = i + 1 < layers.size() ? as<BatchNorm2d>(layers[i + 1]) : nullptr;
  if (bn && bn->gamma().numel() == fc.conv->weight().dim(0)) {
    fc.bn = bn;
    ++i;
  }
  if (i + 1 < layers.size() && as<Relu>(layers[i + 1])) {
    fc.relu = true;
    ++i;
  }
  return fc;
}

}  // namespace

Shape FusedInference::Step::output_shape(const Shape& in) const {
  if (kind == Kind::kLayer) return layer->output_shape(in);
  Shape s = in;
  for (const auto& fc : chain) s = fc.conv->output_shape(s);
  return s;
}

std::int64_t FusedInference::Step::largest_output(const Shape& in, bool blocked) const {
  if (kind == Kind::kLayer) {  // a blocked max pool's output
    const auto* pool = dynamic_cast<const Pool2d*>(layer);
    return blocked && pool && pool->kind() == PoolKind::kMax
               ? cpu::blocked::blocked_floats(layer->output_shape(in))
               : 0;
  }
  auto size = [&](const Shape& s) {
    return blocked ? cpu::blocked::blocked_floats(s) : shape_numel(s);
  };
  std::int64_t most = shortcut.conv ? size(shortcut.conv->output_shape(in)) : 0;
  if (blocked) most = std::max(most, size(in));  // a plain input made blocked
  Shape s = in;
  for (const auto& fc : chain) {
    s = fc.conv->output_shape(s);
    most = std::max(most, size(s));
  }
  return most;
}

void FusedInference::Step::fold(Backend& be, bool blocked) {
  for (auto& fc : chain) fc.fold(be, blocked);
  if (shortcut.conv) shortcut.fold(be, blocked);
}

const Tensor& FusedInference::Step::run(Backend& be, const Tensor& x, Slots& slots, int& slot) {
  if (kind == Kind::kLayer) {
    slot = -1;
    return layer->forward(x, false);
  }
  const int in = slot < 0 ? 0 : 1 << slot;
  int keep = in;  // slots that must survive: the input and the shortcut's output
  auto place = [&](FoldedConv& fc, const Shape& shape, int busy) {
    int s = 0;
    while (busy & (1 << s)) ++s;
    fc.y = slots[static_cast<std::size_t>(s)].view(0, shape);
    return s;
  };
  const Tensor* skip = nullptr;
  if (kind == Kind::kBlock) {
    skip = &x;
    if (shortcut.conv) {
      keep |= 1 << place(shortcut, shortcut.conv->output_shape(x.shape()), keep);
      skip = &shortcut.run(be, x, nullptr);
    }
  }
  const Tensor* t = &x;
  int prev = 0;  // the slot of the previous convolution's output (bit)
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const int s = place(chain[i], chain[i].conv->output_shape(t->shape()), keep | prev);
    t = &chain[i].run(be, *t, i + 1 == chain.size() ? skip : nullptr);
    prev = 1 << s;
    slot = s;
  }
  return *t;
}

namespace {

// A residual block's body as convolutions, each with its batch norm and all
// but the last with a relu; its shortcut conv-bn or identity. False when the
// layers are anything else.
bool take_block(const Residual& block, FusedInference::Step& step) {
  const auto& m = block.main().layers();
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (!as<Conv2d>(m[i])) return false;
    step.chain.push_back(take_conv(m, i));
    const bool last = i + 1 == m.size();
    if (!step.chain.back().bn || step.chain.back().relu == last) return false;
  }
  if (step.chain.empty()) return false;
  step.chain.back().relu = true;  // the block's relu after the add
  if (const Sequential* sc = block.shortcut()) {
    const auto& s = sc->layers();
    std::size_t i = 0;
    if (s.size() != 2 || !as<Conv2d>(s[0])) return false;
    step.shortcut = take_conv(s, i);
    if (!step.shortcut.bn || i + 1 != s.size()) return false;
  }
  step.kind = FusedInference::Step::Kind::kBlock;
  return true;
}

void build(const Sequential& seq, std::vector<std::unique_ptr<FusedInference::Step>>& steps) {
  const auto& layers = seq.layers();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto step = std::make_unique<FusedInference::Step>();
    if (const auto* inner = as<Sequential>(layers[i])) {
      build(*inner, steps);
      continue;
    }
    if (as<Conv2d>(layers[i])) {
      step->kind = FusedInference::Step::Kind::kConvs;
      step->chain.push_back(take_conv(layers, i));
    } else if (const auto* block = as<Residual>(layers[i]); !(block && take_block(*block, *step))) {
      step = std::make_unique<FusedInference::Step>();
      step->layer = layers[i].get();
    }
    steps.push_back(std::move(step));
  }
}

}  // namespace

FusedInference::FusedInference(Sequential& net, Layout layout) : backend_(&net.backend()) {
  build(net, steps_);
  blocked_ = layout == Layout::kAuto && cpu::blocked::available(*backend_);
  for (const auto& step : steps_) {
    for (const auto& fc : step->chain) blocked_ = blocked_ && fc.conv->params().groups == 1;
    if (step->shortcut.conv) blocked_ = blocked_ && step->shortcut.conv->params().groups == 1;
  }
  refold();
}

FusedInference::~FusedInference() = default;

void FusedInference::refold() {
  for (auto& step : steps_) step->fold(*backend_, blocked_);
}

const Tensor& FusedInference::forward(const Tensor& x) {
  if (x.shape() != planned_for_) {  // size the slots for this input shape
    std::int64_t most = 1;
    Shape s = x.shape();
    for (const auto& step : steps_) {
      most = std::max(most, step->largest_output(s, blocked_));
      s = step->output_shape(s);
    }
    for (Tensor& slot : slots_) {
      if (!slot.defined() || slot.numel() < most) slot = Tensor(*backend_, {most});
    }
    planned_for_ = x.shape();
  }
  if (blocked_) return forward_blocked(x);
  const Tensor* t = &x;
  int slot = -1;
  step_times_.clear();
  for (auto& step : steps_) {
    timed(record_, step_times_, step->name(), [&] { t = &step->run(*backend_, *t, slots_, slot); });
  }
  return *t;
}

int FusedInference::fused_convolutions() const noexcept {
  int count = 0;
  for (const auto& step : steps_) {
    count += static_cast<int>(step->chain.size()) + (step->shortcut.conv ? 1 : 0);
  }
  return count;
}

}  // namespace stoke::nn
