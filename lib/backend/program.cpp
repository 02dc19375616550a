// The default inference program (stoke/program.hpp): every step through the
// front doors, activations in NCHW. Convolution outputs live in kSlots shared
// buffers: a step reads its input from one slot and writes to others (a block
// holds at most its input, its shortcut, the previous and the current
// convolution's output at once), so memory is four activations, not one per
// convolution. Other steps keep their own outputs.
#include <algorithm>
#include <array>
#include <chrono>

#include "backend/program_steps.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke {

namespace detail {

void ensure_shape(Backend& backend, Tensor& t, const Shape& shape) {
  if (!t.defined() || t.shape() != shape) t = Tensor(backend, shape);
}

const Tensor& run_plain_step(Backend& be, const InferenceStep& step, const Tensor& x, Tensor& out) {
  using Kind = InferenceStep::Kind;
  if (step.kind == Kind::kLayer) return step.run(x);
  const Shape shape = step_output_shape(step, x.shape());
  if (step.kind == Kind::kIdentity) return out = x.reshaped(shape);
  ensure_shape(be, out, shape);
  switch (step.kind) {
    case Kind::kMaxPool:
      be.max_pool2d_forward(x, out, step.pool);
      break;
    case Kind::kAvgPool:
      be.avg_pool2d_forward(x, out, step.pool);
      break;
    case Kind::kGlobalAvgPool:
      be.global_avg_pool_forward(x, out);
      break;
    case Kind::kRelu:
      be.relu_forward(x, out);
      break;
    case Kind::kLinear:
      be.linear_forward(x.reshaped({x.dim(0), x.numel() / x.dim(0)}), step.linear_w,
                        step.linear_bias, out);
      break;
    default:
      throw InvalidArgument("inference step '" + step.name + "' is a convolution");
  }
  return out;
}

}  // namespace detail

using Kind = InferenceStep::Kind;

Shape step_output_shape(const InferenceStep& step, const Shape& in) {
  switch (step.kind) {
    case Kind::kConv:
    case Kind::kBlock: {
      Shape s = in;
      for (const auto& fc : step.chain) s = conv2d_output_shape(s, fc.w.shape(), fc.params);
      return s;
    }
    case Kind::kMaxPool:
    case Kind::kAvgPool:
      return pool2d_output_shape(in, step.pool, step.name.c_str());
    case Kind::kGlobalAvgPool:
      return {in.at(0), in.at(1)};
    case Kind::kLinear:
      return {in.at(0), step.linear_w.dim(0)};
    case Kind::kRelu:
      return in;
    case Kind::kIdentity:
    case Kind::kLayer:
      return step.output_shape(in);
  }
  return in;
}

InferenceProgram::InferenceProgram(const std::vector<InferenceStep>& steps) {
  for (const auto& s : steps) concurrent_ = concurrent_ && s.kind != Kind::kLayer;
}

InferenceProgram::~InferenceProgram() = default;

void InferenceProgram::timed(const std::string& name, const std::function<void()>& f) {
  if (!record_) return f();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  step_times_.emplace_back(
      name,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

void InferenceProgram::record_through(InferenceProgram& inner,
                                      const std::function<void()>& forward) {
  inner.record_step_times(record_);
  forward();
  if (record_) step_times_ = inner.step_times_;
}

namespace {

constexpr int kSlots = 4;

class PlainProgram final : public InferenceProgram {
 public:
  PlainProgram(Backend& backend, std::vector<InferenceStep> steps)
      : InferenceProgram(steps), be_(backend), steps_(std::move(steps)), outputs_(steps_.size()) {
    for (const auto& step : steps_) conv_outputs_.emplace_back(step.chain.size() + 1);
  }

  const Tensor& forward(const Tensor& x) override {
    if (x.shape() != planned_for_) plan(x.shape());
    clear_step_times();
    const Tensor* t = &x;
    int slot = -1;  // the slot t lives in (-1: none)
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      timed(steps_[i].name, [&] { t = &run(i, *t, slot); });
    }
    return *t;
  }
  void weights_changed() override {}

 private:
  // Slots sized for the largest convolution output of any step.
  void plan(const Shape& input) {
    std::int64_t most = 1;
    Shape s = input;
    for (const auto& step : steps_) {
      if (step.shortcut) {
        most = std::max(most, shape_numel(conv2d_output_shape(s, step.shortcut->w.shape(),
                                                              step.shortcut->params)));
      }
      Shape c = s;
      for (const auto& fc : step.chain) {
        c = conv2d_output_shape(c, fc.w.shape(), fc.params);
        most = std::max(most, shape_numel(c));
      }
      s = step_output_shape(step, s);
    }
    for (Tensor& slot : slots_) {
      if (!slot.defined() || slot.numel() < most) slot = Tensor(be_, {most});
    }
    planned_for_ = input;
  }

  // The lowest slot not in `busy` (a bit set), its view of `shape` in y.
  int place(const Shape& shape, int busy, Tensor& y) {
    int s = 0;
    while (busy & (1 << s)) ++s;
    y = slots_[static_cast<std::size_t>(s)].view(0, shape);
    return s;
  }

  const Tensor& run(std::size_t i, const Tensor& x, int& slot) {
    const InferenceStep& step = steps_[i];
    if (step.kind != Kind::kConv && step.kind != Kind::kBlock) {
      const Tensor& y = detail::run_plain_step(be_, step, x, outputs_[i]);
      if (step.kind != Kind::kIdentity) slot = -1;  // an identity views its input's slot
      return y;
    }
    int keep = slot < 0 ? 0 : 1 << slot;  // slots that must survive: input, shortcut output
    std::vector<Tensor>& outs = conv_outputs_[i];  // the chain's, then the shortcut's
    Tensor& shortcut_out = outs.back();
    const Tensor none;
    const Tensor* residual = nullptr;
    if (step.kind == Kind::kBlock) {
      residual = &x;
      if (step.shortcut) {
        const auto& sc = *step.shortcut;
        keep |=
            1 << place(conv2d_output_shape(x.shape(), sc.w.shape(), sc.params), keep, shortcut_out);
        be_.conv2d_fused_forward(x, sc.w, sc.bias, none, shortcut_out, sc.params, sc.activation);
        residual = &shortcut_out;
      }
    }
    const Tensor* t = &x;
    int prev = 0;  // the previous convolution's output slot (bit)
    for (std::size_t c = 0; c < step.chain.size(); ++c) {
      const FusedConv& fc = step.chain[c];
      Tensor& y = outs[c];
      const int s = place(conv2d_output_shape(t->shape(), fc.w.shape(), fc.params), keep | prev, y);
      const bool last = c + 1 == step.chain.size();
      be_.conv2d_fused_forward(*t, fc.w, fc.bias, last && residual ? *residual : none, y, fc.params,
                               fc.activation);
      t = &y;
      prev = 1 << s;
      slot = s;
    }
    return *t;
  }

  Backend& be_;
  std::vector<InferenceStep> steps_;
  std::vector<Tensor> outputs_;  // per non-convolution step
  std::array<Tensor, kSlots> slots_;
  std::vector<std::vector<Tensor>> conv_outputs_;  // per step: views of the slots
  Shape planned_for_;
};

}  // namespace

std::unique_ptr<InferenceProgram> make_plain_program(Backend& backend,
                                                     std::vector<InferenceStep> steps) {
  return std::make_unique<PlainProgram>(backend, std::move(steps));
}

std::unique_ptr<InferenceProgram> Backend::compile_inference(std::vector<InferenceStep> steps,
                                                             ProgramLayout /*layout*/,
                                                             Precision precision) {
  if (precision != Precision::kFp32) {
    throw Unsupported(name() + ": inference in " + to_string(precision) +
                      " is not available on this backend; use STOKE_PRECISION=fp32");
  }
  return make_plain_program(*this, std::move(steps));
}

PrecisionSupport Backend::inference_precision(Precision precision) const noexcept {
  return precision == Precision::kFp32 ? PrecisionSupport::kNative : PrecisionSupport::kNone;
}

PrecisionSupport Backend::training_precision_support(Precision precision) const noexcept {
  return precision == Precision::kFp32 ? PrecisionSupport::kNative : PrecisionSupport::kNone;
}

void Backend::set_training_precision(Precision precision) {
  if (precision == Precision::kFp32) return;
  throw Unsupported(name() + ": training in " + to_string(precision) +
                    " is not available on this backend; train in fp32");
}

TrainingPrecisionScope::TrainingPrecisionScope(Backend& backend, Precision precision)
    : backend_(backend), previous_(backend.training_precision()) {
  backend_.set_training_precision(precision);
}

TrainingPrecisionScope::~TrainingPrecisionScope() {
  try {
    backend_.set_training_precision(previous_);
  } catch (const std::exception& e) {
    log_warn(std::string("restoring the training precision failed: ") + e.what());
  }
}

Precision resolve_precision(Backend& backend, Precision requested) {
  if (requested == Precision::kAuto) {
    return gated_precision_pays(backend, Precision::kBf16) ? Precision::kBf16 : Precision::kFp32;
  }
  switch (backend.inference_precision(requested)) {
    case PrecisionSupport::kNative:
      return requested;
    case PrecisionSupport::kEmulated:
      log_warn(std::string("STOKE_PRECISION=") + to_string(requested) + ": " + backend.name() +
               " emulates " + to_string(requested) +
               " (no native instructions for it here): slower than fp32");
      return requested;
    case PrecisionSupport::kNone:
      break;
  }
  throw Unsupported(
      std::string("STOKE_PRECISION=") + to_string(requested) + ": " + backend.name() +
      " cannot run inference in " + to_string(requested) +
      (backend.is_host()
           ? " (oneDNN's bf16 kernels need AVX-512, which this CPU or its STOKE_CPU_SIMD / "
             "ONEDNN_MAX_CPU_ISA cap lacks; int8 needs oneDNN; fp16 is for GPUs)"
           : "") +
      "; use fp32 or auto");
}

}  // namespace stoke
