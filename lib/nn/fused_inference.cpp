// The network as inference steps (see fused_inference.hpp). Folding:
// scale = gamma / sqrt(var + eps), w' = w * scale (per output channel),
// b' = (b - mean) * scale + beta.
#include "nn/fused_inference.hpp"

#include <cmath>

#include "stoke/error.hpp"

namespace stoke::nn {

// A U-Net as programs: each encoder stage and each decoder block one
// FusedInference over the Unet's own Sequentials (batch norm folded, ReLU
// fused, the backend's layouts inside), each stage's output kept as the skip
// its program leaves valid until its next forward; the nearest 2x upsampling,
// the concatenation and the head convolution through the backend's front
// doors, on plain NCHW tensors, as Unet::forward runs them.
struct FusedInference::Nested {
  Nested(Unet& net, Layout layout, Precision precision) : unet(&net) {
    std::size_t first = 0;
    for (std::size_t end : Unet::kStageEnd) {
      stages.push_back(
          std::make_unique<FusedInference>(net.encoder(), first, end, layout, precision));
      first = end;
    }
    for (const auto& block : net.decoder_blocks())
      blocks.push_back(std::make_unique<FusedInference>(*block, layout, precision));
    up.resize(blocks.size());
    cat.resize(blocks.size());
  }

  const Tensor& run(const Tensor& x) {
    Backend& be = x.backend();
    std::vector<const Tensor*> features;
    const Tensor* t = &x;
    for (auto& stage : stages) features.push_back(t = &stage->forward(*t));
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const Shape s = t->shape();
      ensure(up[i], {s[0], s[1], 2 * s[2], 2 * s[3]});
      be.upsample2d_forward(*t, up[i], UpsampleMode::kNearest);
      t = &up[i];
      if (i + 1 < blocks.size()) {
        const Tensor& skip = *features[features.size() - 2 - i];
        ensure(cat[i], {s[0], s[1] + skip.dim(1), 2 * s[2], 2 * s[3]});
        be.concat_channels_forward(up[i], skip, cat[i]);
        t = &cat[i];
      }
      t = &blocks[i]->forward(*t);
    }
    const Conv2d& head = unet->head();
    ensure(out, head.output_shape(t->shape()));
    be.conv2d_forward(*t, head.weight(), head.has_bias() ? head.bias() : Tensor(), out,
                      head.params());
    return out;
  }

  void refold() {
    for (auto& p : stages) p->refold();
    for (auto& p : blocks) p->refold();
  }

  int fused_convolutions() const noexcept {
    int n = 1;  // the head
    for (const auto& p : stages) n += p->fused_convolutions();
    for (const auto& p : blocks) n += p->fused_convolutions();
    return n;
  }

  void ensure(Tensor& t, const Shape& shape) {
    if (!t.defined() || t.shape() != shape) t = Tensor(unet->backend(), shape);
  }

  Unet* unet;
  std::vector<std::unique_ptr<FusedInference>> stages, blocks;
  std::vector<Tensor> up, cat;
  Tensor out;
};

namespace {

using Kind = InferenceStep::Kind;
using Layers = std::vector<std::unique_ptr<Layer>>;

template <class T>
const T* as(const std::unique_ptr<Layer>& layer) {
  return layer_as<T>(*layer);
}

struct Builder {
  Backend& be;
  std::vector<InferenceStep>& steps;
  std::vector<std::unique_ptr<FusedInference::Nested>>& nested;
  FusedInference::Layout layout;
  Precision precision;
  // Per folded convolution, in order: (step, index in chain; -1 the shortcut).
  std::vector<std::pair<FusedInference::Source, std::pair<std::size_t, int>>> folds;

  // Conv2d at layers[i], with a BatchNorm2d of its channels and a Relu after
  // it (before `end`) taken in; advances i past what it took.
  FusedConv take_conv(const Layers& layers, std::size_t& i, std::size_t end,
                      FusedInference::Source& src) {
    src.conv = as<Conv2d>(layers[i]);
    FusedConv fc;
    fc.params = src.conv->params();
    fc.w = Tensor(be, src.conv->weight().shape());
    fc.bias = Tensor(be, {src.conv->weight().dim(0)});
    const auto* bn = i + 1 < end ? as<BatchNorm2d>(layers[i + 1]) : nullptr;
    if (bn && bn->gamma().numel() == src.conv->weight().dim(0)) {
      src.bn = bn;
      ++i;
    }
    if (i + 1 < end && as<Relu>(layers[i + 1])) {
      fc.activation = Activation::kRelu;
      ++i;
    }
    return fc;
  }

  void add_conv(InferenceStep& step, FusedConv fc, const FusedInference::Source& src, int index) {
    folds.push_back({src, {steps.size(), index}});
    if (index < 0) {
      step.shortcut = std::move(fc);
    } else {
      step.chain.push_back(std::move(fc));
    }
  }

  // A residual block's body as convolutions, each with its batch norm and
  // all but the last with a relu; its shortcut conv-bn or identity. False,
  // nothing added, when the layers are anything else.
  bool take_block(const Residual& block) {
    InferenceStep step;
    step.kind = Kind::kBlock;
    step.name = block.name();
    const std::size_t first_fold = folds.size();
    auto fail = [&] {
      folds.resize(first_fold);
      return false;
    };
    const Layers& m = block.main().layers();
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (!as<Conv2d>(m[i])) return fail();
      FusedInference::Source src;
      FusedConv fc = take_conv(m, i, m.size(), src);
      const bool last = i + 1 == m.size();
      if (!src.bn || (fc.activation == Activation::kRelu) == last) return fail();
      add_conv(step, std::move(fc), src, static_cast<int>(step.chain.size()));
    }
    if (step.chain.empty()) return fail();
    step.chain.back().activation = Activation::kRelu;  // the block's relu after the add
    if (const Sequential* sc = block.shortcut()) {
      const Layers& s = sc->layers();
      std::size_t i = 0;
      if (s.size() != 2 || !as<Conv2d>(s[0])) return fail();
      FusedInference::Source src;
      FusedConv fc = take_conv(s, i, s.size(), src);
      if (!src.bn || i + 1 != s.size()) return fail();
      add_conv(step, std::move(fc), src, -1);
    }
    steps.push_back(std::move(step));
    return true;
  }

  // A layer that maps to one op; false for any other.
  bool take_simple(const Layer& layer, InferenceStep& step) {
    const auto identity = [&](const Layer&) {
      step.kind = Kind::kIdentity;
      step.output_shape = [&layer](const Shape& in) { return layer.output_shape(in); };
      return true;
    };
    return visit_layer(
        layer,
        [&](const Pool2d& pool) {
          step.kind = pool.kind() == PoolKind::kMax ? Kind::kMaxPool : Kind::kAvgPool;
          step.pool = pool.params();
          return true;
        },
        [&](const GlobalAvgPool&) {
          step.kind = Kind::kGlobalAvgPool;
          return true;
        },
        [&](const Linear& linear) {
          step.kind = Kind::kLinear;
          step.linear_w = linear.weight();
          step.linear_bias = linear.bias();
          return true;
        },
        [&](const Relu&) {
          step.kind = Kind::kRelu;
          return true;
        },
        [&](const Flatten& l) { return identity(l); },
        [&](const Dropout& l) { return identity(l); }, [](const Layer&) { return false; });
  }

  void build(const Sequential& seq) { build(seq.layers(), 0, seq.layers().size()); }

  // The layers [first, end) of one Sequential.
  void build(const Layers& layers, std::size_t first, std::size_t end) {
    for (std::size_t i = first; i < end; ++i) {
      if (const auto* inner = as<Sequential>(layers[i])) {
        build(*inner);
        continue;
      }
      if (const auto* block = as<Residual>(layers[i]); block && take_block(*block)) continue;
      InferenceStep step;
      step.name = layers[i]->name();
      if (as<Conv2d>(layers[i])) {
        step.kind = Kind::kConv;
        FusedInference::Source src;
        FusedConv fc = take_conv(layers, i, end, src);
        add_conv(step, std::move(fc), src, 0);
      } else if (auto* unet = layer_as<Unet>(*layers[i]); unet && precision != Precision::kInt8) {
        // int8 needs a calibrated range per convolution of the program's
        // own; a U-Net's convolutions are in its nested programs.
        nested.push_back(std::make_unique<FusedInference::Nested>(*unet, layout, precision));
        FusedInference::Nested* plan = nested.back().get();
        step.kind = Kind::kLayer;
        step.run = [plan](const Tensor& x) -> const Tensor& { return plan->run(x); };
        step.output_shape = [unet](const Shape& in) { return unet->output_shape(in); };
      } else if (!take_simple(*layers[i], step)) {
        Layer* layer = layers[i].get();
        step.kind = Kind::kLayer;
        step.run = [layer](const Tensor& x) -> const Tensor& { return layer->forward(x, false); };
        step.output_shape = [layer](const Shape& in) { return layer->output_shape(in); };
      }
      steps.push_back(std::move(step));
    }
  }
};

void fold(const FusedInference::Source& src) {
  const Shape shape = src.conv->weight().shape();
  const auto k = static_cast<std::size_t>(shape[0]);
  std::vector<float> wv = src.conv->weight().to_vector();
  const std::size_t per = wv.size() / k;
  std::vector<float> bv =
      src.conv->bias().defined() ? src.conv->bias().to_vector() : std::vector<float>(k, 0.0f);
  if (const BatchNorm2d* bn = src.bn) {
    const auto gamma = bn->gamma().to_vector(), beta = bn->beta().to_vector();
    const auto mean = bn->running_mean().to_vector(), var = bn->running_var().to_vector();
    for (std::size_t c = 0; c < k; ++c) {
      const double scale = gamma[c] / std::sqrt(static_cast<double>(var[c]) + bn->params().epsilon);
      for (std::size_t i = 0; i < per; ++i)
        wv[c * per + i] = static_cast<float>(wv[c * per + i] * scale);
      bv[c] = static_cast<float>((bv[c] - mean[c]) * scale + beta[c]);
    }
  }
  src.target->w.copy_from_host(wv.data());
  src.target->bias.copy_from_host(bv.data());
}

}  // namespace

FusedInference::FusedInference(Sequential& net, Layout layout, Precision precision,
                               const std::vector<ActivationRange>& input_ranges)
    : FusedInference(net, 0, net.layers().size(), layout, precision, input_ranges) {}

FusedInference::FusedInference(Sequential& net, std::size_t first, std::size_t end, Layout layout,
                               Precision precision,
                               const std::vector<ActivationRange>& input_ranges)
    : backend_(&net.backend()),
      layout_(layout == Layout::kPlain ? ProgramLayout::kPlain : ProgramLayout::kBackend),
      precision_(precision) {
  if (first >= end || end > net.layers().size()) {
    throw InvalidArgument("FusedInference: layers [" + std::to_string(first) + ", " +
                          std::to_string(end) + ") of '" + net.name() + "', which has " +
                          std::to_string(net.layers().size()));
  }
  Builder b{*backend_,  steps_,
            nested_,    layout_ == ProgramLayout::kPlain ? Layout::kPlain : Layout::kAuto,
            precision_, {}};
  b.build(net.layers(), first, end);
  for (auto& [src, where] : b.folds) {  // steps_ is complete: pointers into it stay valid
    InferenceStep& step = steps_[where.first];
    src.target =
        where.second < 0 ? &*step.shortcut : &step.chain[static_cast<std::size_t>(where.second)];
    sources_.push_back(src);
  }
  for (const auto& src : sources_) fold(src);
  if (!input_ranges.empty()) {
    std::vector<FusedConv*> convs;  // the program's order: a block's chain, then its shortcut
    for (auto& step : steps_) {
      for (auto& fc : step.chain) convs.push_back(&fc);
      if (step.shortcut) convs.push_back(&*step.shortcut);
    }
    if (convs.size() != input_ranges.size()) {
      throw InvalidArgument("FusedInference: " + std::to_string(input_ranges.size()) +
                            " calibrated input ranges for '" + net.name() + "', which has " +
                            std::to_string(convs.size()) + " fused convolutions");
    }
    for (std::size_t j = 0; j < convs.size(); ++j) convs[j]->input_range = input_ranges[j];
  }
  program_ = backend_->compile_inference(steps_, layout_, precision_);
}

FusedInference::~FusedInference() = default;

void FusedInference::refold() {
  for (const auto& src : sources_) fold(src);
  for (const auto& n : nested_) n->refold();
  program_->weights_changed();
}

std::unique_ptr<InferenceProgram> FusedInference::compile(Backend& backend) const {
  return backend.compile_inference(steps_, layout_, precision_);
}

int FusedInference::fused_convolutions() const noexcept {
  int n = static_cast<int>(sources_.size());
  for (const auto& nest : nested_) n += nest->fused_convolutions();
  return n;
}

}  // namespace stoke::nn
